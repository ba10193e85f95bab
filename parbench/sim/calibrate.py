"""``parbench calibrate``: measure this machine with torch, fit the simulator's constants, save a profile.

What is measured (threads per process as the runner's ranks: 1, unless said):
- GEMM time at a range of square sizes -> t = gemm_overhead + flops / peak (fit, held-out error);
- the GEMM, elementwise, memory-bandwidth and exp/erf probes again with 2 up to all the host's cores as intra-op
  threads (``measure_threaded``) -> the rates a rank of that many threads computes at (``Cluster.threaded``);
- elementwise add at a range of sizes -> t = op_overhead + bytes / memory bandwidth;
- causal flash attention (scaled_dot_product_attention) forward + backward -> its fraction of the GEMM peak;
- a Linear's backward against its forward -> the backward GEMMs' rate ratio;
- GELU, SiLU and the cross-entropy forward + backward -> seconds per element of an exp/erf-based function;
- the host cost of torch's DTensor tensor parallelism, FSDP2, DTensor optimizer steps and pipeline schedules,
  on the runner's workloads in a one-rank process group, FSDP2 and tensor parallelism on a fake two-rank one
  (``measure_framework``, ``parbench.sim.framework``);
- each collective the strategies use (all_reduce, all_gather, reduce_scatter, broadcast, scatter, send)
  over gloo with real rank processes at group sizes 2 and 4, each after ~1 ms of compute as in a training
  step -> alpha + beta x payload per (kind, n); and broadcasts issued back to back, no compute between, as
  ZeRO-1 syncs its parameters -> the same per (broadcast_burst, n).
The payload is the full buffer S, as in parbench.metrics.conventions (nccl-tests' size).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from parbench.metrics import stats
from parbench.results import host_cpus, now_iso
from parbench.sim.fit import fit_with_holdout, point_estimates, unphysical
from parbench.sim.hardware import (
    BURST_SUFFIX,
    Cluster,
    Link,
    cluster_to_dict,
    profile_path,
)

BURST_KINDS = ("broadcast" + BURST_SUFFIX,)
"""Kinds also timed in bursts (``_burst_row``): torch's ZeroRedundancyOptimizer broadcasts each rank's bucket of
parameters this way after its step."""
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "scatter", "send") + BURST_KINDS
GROUP_SIZES = (2, 4)


def _sizes(quick: bool) -> dict[str, list[int]]:
    if quick:
        return {"gemm": [16, 32, 64, 96, 128, 192, 256], "elementwise": [2**k for k in range(6, 21, 2)],
                "stream": [2**22, 2**23], "comm": [2**k for k in (10, 13, 16, 18, 20)]}
    return {"gemm": [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768],
            "elementwise": [2**k for k in range(4, 23)], "stream": [2**23, 2**24, 2**25],
            "comm": [2**k for k in range(8, 25, 2)]}


def _time_median(fn, reps: int, window_s: float = 0.02) -> float:
    """Median seconds per call over ``reps`` windows of >= ``window_s`` each. Windows, not single calls:
    a training step is sustained work, and on a shared machine short calls catch only the best time slices."""
    t0 = time.perf_counter()
    fn()  # warm-up: the first call allocates and picks kernels; it also sizes the window
    inner = max(1, math.ceil(window_s / max(time.perf_counter() - t0, 1e-7)))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return stats.median(times)


def measure_gemm(sizes: list[int], reps: int, threads: int = 1) -> tuple[list[float], list[float]]:
    """(flops, seconds) of a forward+backward-like square matmul n x n @ n x n at each size."""
    import torch

    torch.set_num_threads(threads)
    xs, ys = [], []
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = _time_median(lambda: torch.mm(a, b), reps)
        xs.append(2.0 * n**3)
        ys.append(t)
    return xs, ys


def measure_elementwise(sizes: list[int], reps: int, threads: int = 1) -> tuple[list[float], list[float]]:
    """(bytes moved, seconds) of out = a + b in float32 (read 2, write 1)."""
    import torch

    torch.set_num_threads(threads)
    xs, ys = [], []
    for n in sizes:
        a, b, out = torch.randn(n), torch.randn(n), torch.empty(n)
        t = _time_median(lambda: torch.add(a, b, out=out), reps)
        xs.append(12.0 * n)
        ys.append(t)
    return xs, ys


def cache_capacity(xs: list[float], ys: list[float], stream_bytes_per_s: float) -> dict[str, Any]:
    """Where a float32 add's operands outgrow a core's caches (``Cluster.cache_bytes``), from the elementwise
    probe's (bytes moved, seconds): past the size of its best bandwidth, the first size whose bandwidth falls
    below the geometric mean of that best and ``stream_bytes_per_s`` (beyond every cache) is the first out;
    the size before it is the capacity, and the median bandwidth from it on is what an op beyond the caches
    gets (``Cluster.beyond_cache_bandwidth_bytes_per_s``). No fall within the probe's sizes: 0 for both (one
    level). On this project's 2-core VM with 2 MiB of L2 per core the add ran 110 GB/s on arrays of 0.25 MiB
    (0.75 MiB of operands), 87 GB/s at 0.5 MiB and 28-31 GB/s at 1-32 MiB."""
    rows = [{"bytes": x, "seconds": y, "bytes_per_s": x / y} for x, y in sorted(zip(xs, ys))]
    best = max(range(len(rows)), key=lambda i: rows[i]["bytes_per_s"])
    threshold = math.sqrt(rows[best]["bytes_per_s"] * stream_bytes_per_s)
    out = next((i for i in range(best + 1, len(rows)) if rows[i]["bytes_per_s"] < threshold), None)
    return {"alpha": rows[out - 1]["bytes"] if out else 0,
            "beyond_bytes_per_s": stats.median([r["bytes_per_s"] for r in rows[out:]]) if out else 0.0,
            "threshold_bytes_per_s": threshold, "rows": rows}


def measure_stream_bandwidth(sizes: list[int], reps: int, threads: int = 1) -> tuple[float, list[dict[str, float]]]:
    """Bytes per second of the same float32 add on arrays past the last-level cache (16-128 MiB each):
    the median over ``sizes`` of bytes / seconds, each far above the op's fixed cost. A training step's
    optimizer streams every parameter, gradient and state this way (``Cluster.stream_bandwidth``)."""
    xs, ys = measure_elementwise(sizes, reps, threads)
    rows = [{"elements": n, "bytes": x, "seconds": y, "bytes_per_s": x / y} for n, x, y in zip(sizes, xs, ys)]
    return stats.median([r["bytes_per_s"] for r in rows]), rows


def thread_counts(cores: int) -> list[int]:
    """The intra-op thread counts per rank ``calibrate`` measures beyond one: the powers of two below ``cores``, and
    ``cores`` (2 on a 2-core host; 2, 4, 8 and 12 on a 12-core one)."""
    return sorted({t for t in (2, 4, 8, 16, 32, 64, 128) if t < cores} | ({cores} if cores > 1 else set()))


def measure_threaded(sizes: dict[str, list[int]], reps: int, cores: int
                     ) -> tuple[dict[int, dict[str, float]], dict[str, dict[str, Any]]]:
    """``THREADED_FIELDS`` at each of ``thread_counts(cores)`` intra-op threads in this one process, measured and
    fitted as the one-thread figures are (GEMM and add curves, the add past the caches, GELU / SiLU /
    cross-entropy, flash attention against that thread count's GEMM peak): (figures by thread count, for
    ``Cluster.threaded``; the fits by key, for the report)."""
    threaded: dict[int, dict[str, float]] = {}
    fits: dict[str, dict[str, Any]] = {}
    for t in thread_counts(cores):
        (gemm_a, gemm_b), fits[f"gemm@{t} threads"] = checked_fit(*measure_gemm(sizes["gemm"], reps, t))
        elem_xs, elem_ys = measure_elementwise(sizes["elementwise"], reps, t)
        (elem_a, elem_b), fits[f"elementwise@{t} threads"] = checked_fit(elem_xs, elem_ys)
        stream_bw, _ = measure_stream_bandwidth(sizes["stream"], reps, t)
        cache = cache_capacity(elem_xs, elem_ys, stream_bw)
        transcendental, _ = measure_transcendental(reps, 1 / elem_b, t)
        attention, _ = measure_attention(reps, 1 / gemm_b, gemm_a, t)
        threaded[t] = {"peak_flops": 1 / gemm_b, "gemm_overhead_s": gemm_a, "op_overhead_s": elem_a,
                       "attention_efficiency": min(attention, 1.0),
                       "memory_bandwidth_bytes_per_s": 1 / elem_b, "stream_bandwidth_bytes_per_s": stream_bw,
                       "cache_bytes": float(cache["alpha"]), "beyond_cache_bandwidth_bytes_per_s": cache["beyond_bytes_per_s"],
                       "transcendental_s_per_element": transcendental}
    import torch

    torch.set_num_threads(1)  # as every other probe runs
    return threaded, fits


BACKWARD_GEMM_SHAPES = ((32, 384, 384), (128, 256, 512), (512, 96, 384), (2048, 384, 96))
"""(rows, in, out) of the Linear probes whose backward is timed against their forward: batch-like and token-like
row counts from 32 to 2048, none of them the simulator check's or the reference steps' shapes. The backward
includes what autograd does around the two products: the bias gradient's sum and the accumulation into the
existing ``.grad`` (the runner zeroes gradients in place, so every backward adds to them)."""


def measure_backward_gemm(reps: int) -> tuple[float, list[dict[str, Any]]]:
    """A Linear's backward GEMM rate over its forward's (``Cluster.backward_gemm_ratio``): forward, then forward
    + backward (input and weight gradients, 2x the forward's FLOPs) of ``torch.nn.Linear`` at each of
    ``BACKWARD_GEMM_SHAPES``; the median of 2 t_forward / t_backward."""
    import torch

    torch.set_num_threads(1)
    rows = []
    for m, k, n in BACKWARD_GEMM_SHAPES:
        linear, x, g = torch.nn.Linear(k, n), torch.randn(m, k, requires_grad=True), torch.randn(m, n)
        forward = _time_median(lambda: linear(x), reps)
        both = _time_median(lambda: linear(x).backward(g), reps)
        rows.append({"shape": [m, k, n], "forward_s": forward, "backward_s": both - forward,
                     "ratio": 2 * forward / max(both - forward, 1e-9)})
    return stats.median([r["ratio"] for r in rows]), rows


WEIGHT_READ_SIDES = (320, 448, 576)
"""Square Linear weights (0.4-1.3 MiB of float32) whose forward at ``WEIGHT_READ_ROWS`` rows
``measure_weight_read`` times: none of the simulator check's or the reference steps' shapes."""
WEIGHT_READ_ROWS = 32
WEIGHT_READ_POOL_BYTES = 64 * 2**20
"""The cold calls cycle through this many bytes of distinct weights: each call finds its weight where a training
step finds one, a whole pass after it was last touched, past a core's own caches."""


def measure_weight_read(reps: int, flops_per_s: float, overhead_s: float, memory_bandwidth_bytes_per_s: float
                        ) -> tuple[float, list[dict[str, Any]]]:
    """Bytes per second at which a Linear on few rows brings in its weight beyond its arithmetic
    (``Cluster.weight_read_bandwidth_bytes_per_s``): at each of ``WEIGHT_READ_SIDES`` the forward timed cold (a
    different weight each call, ``WEIGHT_READ_POOL_BYTES`` of them) against what the GEMM fit gives its shape
    (``overhead_s`` + the larger of FLOPs at ``flops_per_s`` and operand bytes at the memory bandwidth, as
    ``parbench.sim.timing.gemm_time_s``); the bandwidth is the weights' bytes over the time beyond that, summed
    over the shapes. 0 (no such term) where the cold calls took no longer. The square GEMMs the rate is fitted
    on reuse each packed panel of B over as many rows as B has columns; 32 rows reuse it 32 times, so the
    packing and the weight's trip from beyond the caches show. The same forward with its weight hot (one
    weight, before and after) is recorded beside it: how much of the time is the caches'. Measured on this
    project's 2-core VMs at 32 rows: on a host with a 480 MiB L3 (the pool stays in it), 1.35-2.25x the GEMM
    fit's time hot and 1.75-2.63x cold, 10.7 GB/s; on one with a 32 MiB L3, a 512 x 512 weight 191 us by the
    fit, 223-284 us hot, 405-487 us cold, 3.5-4.9 GB/s."""
    import itertools

    import torch
    import torch.nn.functional as F

    def hot_and_cold(side: int) -> tuple[float, float]:
        x = torch.randn(WEIGHT_READ_ROWS, side)
        pool = [torch.randn(side, side) for _ in range(max(2, WEIGHT_READ_POOL_BYTES // (4 * side * side)))]
        turn = itertools.cycle(pool)
        before = _time_median(lambda: F.linear(x, pool[0]), reps)
        cold = _time_median(lambda: F.linear(x, next(turn)), reps)
        after = _time_median(lambda: F.linear(x, pool[0]), reps)
        return (before + after) / 2, cold

    torch.set_num_threads(1)
    rows = []
    for side in WEIGHT_READ_SIDES:
        hot, cold = hot_and_cold(side)
        m, weight_bytes = WEIGHT_READ_ROWS, 4 * side * side
        model = overhead_s + max(2 * m * side * side / flops_per_s,
                                 (2 * m * side * 4 + weight_bytes) / memory_bandwidth_bytes_per_s)
        rows.append({"shape": [m, side, side], "weight_bytes": weight_bytes, "model_s": model, "hot_s": hot,
                     "cold_s": cold})
    extra = sum(r["cold_s"] - r["model_s"] for r in rows)
    return (sum(r["weight_bytes"] for r in rows) / extra if extra > 0 else 0.0), rows


TRANSCENDENTAL_ELEMENTS = 2**18
"""Elements per probe of ``measure_transcendental`` (256 rows of 1024: 1 MiB of float32, cache-resident as an
activation of a small model is)."""


def measure_transcendental(reps: int, memory_bw: float, threads: int = 1) -> tuple[float, list[dict[str, Any]]]:
    """Seconds per element of an exp- or erf-based function, forward + backward, beyond the 24 bytes per element
    (float32 read and written forward, twice that backward) the elementwise term already charges at
    ``memory_bw``: GELU, SiLU and the cross-entropy (log-softmax + NLL) over 1024 classes; the median of the three
    (``Cluster.transcendental_s_per_element``)."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    x = torch.randn(TRANSCENDENTAL_ELEMENTS // 1024, 1024, requires_grad=True)
    grad, labels = torch.randn_like(x), torch.randint(0, 1024, (x.shape[0],))
    probes = {"gelu": lambda: F.gelu(x).backward(grad), "silu": lambda: F.silu(x).backward(grad),
              "cross_entropy": lambda: F.cross_entropy(x, labels).backward()}
    rows = []
    for name, fn in probes.items():
        per_element = _time_median(fn, reps) / x.numel()
        rows.append({"function": name, "seconds_per_element": per_element,
                     "beyond_memory_s": max(per_element - 24 / memory_bw, 0.0)})
    return stats.median([r["beyond_memory_s"] for r in rows]), rows


ATTENTION_SHAPES = ((8, 4, 32, 24), (8, 4, 128, 32), (4, 8, 256, 64))
"""(batch, heads, sequence, head dim) of the attention probes: unlike the simulator check's (4 heads of
32 over 64 tokens), so that check is held out."""


def measure_attention(reps: int, peak_flops: float, gemm_overhead_s: float, threads: int = 1
                      ) -> tuple[float, list[dict[str, float]]]:
    """The flash attention kernel's fraction of the GEMM peak, as ``parbench.sim.timing`` charges it:
    causal forward + backward of ``scaled_dot_product_attention`` costs 3.5 x the forward's two products
    (backward twice, QK^T again), each 2 s^2 d FLOPs per head times the share of the scores torch's CPU kernel
    computes under the causal mask (``parbench.sim.timing.causal_fraction``), plus 7 GEMM overheads. Median
    over ``ATTENTION_SHAPES``; every probe with its own figure. ``threads``: intra-op threads, against that
    many threads' GEMM peak and overhead (on this project's 2-core VM the check decoder's flash attention took as
    long with 2 threads as with 1, where its GEMMs ran 1.8-2.0x as fast)."""
    import torch
    import torch.nn.functional as F

    from parbench.sim.timing import cpu_causal_fraction

    torch.set_num_threads(threads)
    rows = []
    for b, h, seq, d in ATTENTION_SHAPES:
        # laid out as the workloads' attention gives them to the kernel: heads split off the projections' outputs,
        # (b, s, h, d) viewed as (b, h, s, d). With 2 threads the check decoder's shape ran 1.21x as fast so and
        # 1.94x on contiguous (b, h, s, d) tensors; with one thread 7.2 and 7.7 ms, the same
        q, k, v = (torch.randn(b, seq, h, d, requires_grad=True) for _ in range(3))
        t = _time_median(lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                                 is_causal=True).sum().backward(), reps)
        flops = 2 * (2 * seq * seq * d * b * h) * cpu_causal_fraction(seq)  # QK^T and AV, the causal share computed
        rows.append({"shape": [b, h, seq, d], "seconds": t,
                     "efficiency": 3.5 * flops / (peak_flops * max(t - 7 * gemm_overhead_s, 1e-9))})
    return stats.median([r["efficiency"] for r in rows]), rows


def count_aten_ops(fn) -> int:
    """aten operator calls ``fn`` dispatches (the unit the simulator counts per layer)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counter.calls += 1
            return func(*args, **(kwargs or {}))

    with Counter():
        fn()
    return Counter.calls


def measure_framework_overhead(reps: int, units: int = 32) -> float:
    """Seconds per aten operator on the training path (module call, autograd recording, backward node):
    forward + backward of a chain of tiny Linear+ReLU units divided by the aten ops it dispatches."""
    import torch

    torch.set_num_threads(1)
    chain = torch.nn.Sequential(*[m for _ in range(units) for m in (torch.nn.Linear(8, 8), torch.nn.ReLU())])
    x = torch.randn(1, 8)
    step = lambda: chain(x).sum().backward()  # noqa: E731
    return _time_median(step, reps, window_s=0.05) / count_aten_ops(step)


def _compute_probe() -> float:
    """Seconds of one forward+backward of a small MLP (mixed GEMM and per-op work, like a training step)."""
    import torch

    torch.set_num_threads(1)
    net = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(128, 128), torch.nn.ReLU())])
    x = torch.randn(64, 128)
    return _time_median(lambda: net(x).sum().backward(), 5, window_s=0.1)


def _collective(kind: str, size: int, rank: int, n: int):
    """A closure running one collective of full-buffer ``size`` bytes (float32 elements)."""
    import torch
    import torch.distributed as dist

    elems = max(size // 4 // n * n, n)
    full, part = torch.ones(elems), torch.ones(elems // n)
    if kind == "all_reduce":
        return lambda: dist.all_reduce(full)
    if kind == "all_gather":
        return lambda: dist.all_gather_into_tensor(full, part)
    if kind == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, full)
    if kind == "broadcast":
        return lambda: dist.broadcast(full, src=0)
    if kind == "scatter":
        chunks = list(full.chunk(n)) if rank == 0 else None
        return lambda: dist.scatter(part, chunks, src=0)
    peer = rank + 1 if rank % 2 == 0 else rank - 1  # pairs (0,1), (2,3) exchange at once, as pipeline stages do
    return (lambda: dist.send(full, dst=peer)) if rank % 2 == 0 else (lambda: dist.recv(full, src=peer))


@dataclass(frozen=True, kw_only=True)
class CollectivePlan:
    """What every rank of a collective calibration times."""

    sizes: list[int]
    reps: int
    kinds: tuple[str, ...]


def collectives_rank(plan: CollectivePlan, info) -> dict[str, Any]:
    """The rank function: the compute probe with every rank computing at once (at the start, after the
    compute burst's timing and at the end), every kind at every size, barriers. Every rank returns its
    probe readings; rank 0 also the rows."""
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.barrier()  # every rank computes at once: the contention a run with n ranks sees
    probes = [_compute_probe()]
    burst = _compute_burst()
    dist.barrier()
    burst_s = _time_median(burst, plan.reps, window_s=0.05)  # every rank at once, as in the windows below
    dist.barrier()
    probes.append(_compute_probe())
    dist.barrier()
    results = {kind: [_burst_row(size, info, plan.reps) if kind in BURST_KINDS
                      else _collective_row(kind, size, info, plan.reps, burst) for size in plan.sizes]
               for kind in plan.kinds}
    dist.barrier()  # and once more at the end: the machine's load drifts during the calibration
    probes.append(_compute_probe())
    bar = _barrier_s(plan.reps * 8)
    if info.rank:
        return {"compute_probe_s": probes}
    return {"collectives": results, "barrier_s": bar, "compute_probe_s": probes, "burst_s": burst_s}


CPU_OVERLAP = 0.0
"""``Cluster.overlap`` of a calibrated CPU profile: how much of a collective issued ahead hides under compute.
gloo runs a collective on threads of its own, which need a core. On this project's 2-core VM an asynchronous
all-reduce of 4 MiB, issued before about twice its length of GEMM bursts and waited after them, was hidden by
0-42% (seven readings at 2 ranks within an hour, each from 5-9 rounds: 0, 0, 1, 19, 32, 34, 42%), so
no calibration reads it steadily; and predicting the simulator check's runs with 0.2 or 0.4 instead of 0
made them worse (within cores 10.5% -> 12.2% and 12.1%, one profile, 2026-12-05)."""


def _compute_burst():
    """About 1 ms of GEMMs: what a rank does between two collectives of a training step."""
    import torch

    torch.set_num_threads(1)
    a = torch.randn(160, 160)
    return lambda: [a @ a for _ in range(8)]


MIN_OPS_PER_WINDOW = 8
"""Fewest (compute burst, collective) pairs in one timed window of ``_collective_row``."""


def ops_per_window(size: int) -> int:
    """Ops timed in one window at ``size`` bytes: up to 32 of the small ones (about 1 MiB in all, so the
    barrier's share is amortised), never fewer than ``MIN_OPS_PER_WINDOW``."""
    return max(MIN_OPS_PER_WINDOW, min(32, 2**20 // size))


def _collective_row(kind: str, size: int, info, reps: int, burst) -> list[float]:
    """[size, median seconds of a window of ``inner`` (compute burst, op) pairs (barrier included), inner].
    Each op follows a burst of compute, as in a training step: the ranks reach it unsynchronised, their
    communication threads idle since the previous op (back to back, a barrier away, gloo's all-reduce
    of 1 MiB at 2 ranks measured 1.05 ms; after 0.7 ms of compute, 2.3-3.2 ms, as in a real step).

    Every window holds at least ``MIN_OPS_PER_WINDOW`` ops. A step's time is the sum of its ops, so the mean
    cost per op is what the model needs, and one op is a poor sample of it: on this project's 2-core VM an
    all-reduce of 1 MiB at 2 ranks took 0.4-10 ms after the last rank arrived (deciles 0.7, 1.6-2.1 median,
    4.6-5.3 at the 90th; 280 ops in each of three runs), with the ranks arriving within 0.1 ms of each other.
    Windows of one op (and one barrier, whose delays are as wide) read 4.3-5.5 ms at 1 MiB and 8.7-9.5 ms at
    4 MiB where windows of 8 and 32 ops read 2.7-3.2 and 4.5-6.2 ms."""
    import torch.distributed as dist

    op = _collective(kind, size, info.rank, info.world_size)
    inner = ops_per_window(size)
    times = []
    for _ in range(reps + 1):
        dist.barrier()  # every rank starts the batch together
        t0 = time.perf_counter()
        for _ in range(inner):
            burst()
            op()
        dist.barrier()  # the batch is over when the slowest rank is done
        times.append(time.perf_counter() - t0)
    return [size, stats.median(times[1:]), inner]  # first repetition: warm-up


def _burst_row(size: int, info, reps: int) -> list[float]:
    """As ``_collective_row``, but each window is one burst: ``ops_per_window`` asynchronous broadcasts issued back to
    back, each rank the root of a run of them in turn (ZeroRedundancyOptimizer's ``_sync_params``: the first
    rank's bucket, then the second's, ...), then waited for together; no compute between."""
    import torch
    import torch.distributed as dist

    n, inner = info.world_size, ops_per_window(size)
    full = torch.ones(max(size // 4, 1))
    times = []
    for _ in range(reps + 1):
        dist.barrier()
        t0 = time.perf_counter()
        handles = [dist.broadcast(full, src=i * n // inner, async_op=True) for i in range(inner)]
        for h in handles:
            h.wait()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return [size, stats.median(times[1:]), inner]


def _barrier_s(count: int) -> float:
    """Median seconds of one barrier; a fixed count, identical on every rank (collectives must match)."""
    import torch.distributed as dist

    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        dist.barrier()
        times.append(time.perf_counter() - t0)
    return stats.median(times)


def contended_probe_s(rank_results: list[dict[str, Any]]) -> float:
    """The compute probe's seconds with every rank computing at once: the median over every rank's readings,
    which one rank's or one moment's hiccup moves little. Rank 0's two readings alone gave x1.00-1.33 at 2
    ranks and x2.26-2.92 at 4 over four calibrations within 3 minutes on this project's 2-core VM; the median
    of every rank's three, x1.00-1.04 and x2.30-2.57."""
    return stats.median([t for r in rank_results for t in r["compute_probe_s"]])


def measure_collectives(n: int, sizes: list[int], reps: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """Time every kind at every size over ``n`` gloo rank processes, each op after a compute burst (a
    ``BURST_KINDS`` op after the one before it); seconds exclude one barrier and the compute burst (timed alone
    with every rank computing)."""
    from parbench.distributed import spawn

    outcome = spawn(n, collectives_rank, CollectivePlan(sizes=sizes, reps=reps, kinds=kinds), timeout_s=600)
    if outcome.status != "ok":
        raise RuntimeError(f"collective calibration at n={n} produced no result: {outcome.error}")
    data = outcome.results[0]
    bar, burst = data["barrier_s"], data["burst_s"]
    out_rows: dict[str, Any] = {kind: [(s, max((t - bar) / inner - (0.0 if kind in BURST_KINDS else burst), 1e-7))
                                       for s, t, inner in rows]
                                for kind, rows in data["collectives"].items()}
    out_rows["compute_s"] = contended_probe_s(outcome.results)
    out_rows["barrier_s"] = bar
    return out_rows


FRAMEWORK_PROBES = (("mlp", {"layers": 2, "hidden": 256}),
                    ("transformer", {"layers": 2, "hidden": 96, "heads": 4, "seq_len": 32, "vocab_size": 256}))
"""Shapes for ``measure_framework``, unlike the simulator check's (docs/simulator.md), so that check is held out."""
FSDP_WIDE_PROBE = ("mlp", {"layers": 2, "hidden": 1024})
"""The mlp probe four times as wide (same units and parameter tensors, 14x the bytes): FSDP2 on it against
FSDP2 on the probe gives the cost per gathered byte."""
FSDP_WIDE_REPS_FACTOR = 3
"""The probe and its wide twin alternate, in the same rounds, for this many times the calibration's rounds.
On this project's 2-core VM the wide twin's cost still moves between runs: 0.49-0.90 ns per byte over three
measurements of 21 rounds (its FSDP2 step 5.8-8.4 ms over the plain one), 0.56-0.88 over five of 5 rounds."""
FRAMEWORK_BATCH = 8
TP_LARGE_BATCH = 64
"""The tensor-parallel probes run at ``FRAMEWORK_BATCH`` and at this: the difference in their cost over the
difference in the bytes their all-reduces carry is the cost per byte, the rest the cost per Linear."""


FRAMEWORK_FIELDS = ("optimizer_op_overhead_s", "tp_linear_overhead_s", "tp_byte_overhead_s", "fsdp_unit_overhead_s",
                    "fsdp_param_overhead_s", "dtensor_op_overhead_s", "pipeline_action_overhead_s",
                    "ddp_param_overhead_s", "ddp_byte_overhead_s", "fsdp_byte_overhead_s", "tracing_fsdp_scale",
                    "tracing_tp_scale", "tracing_fsdp_between_share", "tracing_tp_between_share")
PIPELINE_PROBE_MICRO_BATCHES = 4
"""Micro-batches of the one-stage pipeline schedule ``framework_rank`` times (the default sweep's count)."""


@dataclass(frozen=True, kw_only=True)
class FrameworkPlan:
    reps: int


def _alternate(steps: dict[str, Any], reps: int, window_s: float) -> dict[str, list[float]]:
    """Median seconds per call of each function, ``reps`` rounds timed in alternation (drift hits all alike)."""
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(reps):
        for label, fn in steps.items():
            times[label].append(_time_median(fn, 1, window_s=window_s))
    return times


def _fake_two_rank_mesh():
    """A two-rank device mesh whose collectives return at once (torch's fake process group), replacing this
    process's one-rank group; None where this torch has no fake backend. FSDP2 runs its all-gather and
    reduce-scatter paths only with two or more ranks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.testing._internal.distributed.fake_pg import (
            FakeStore,  # registers the "fake" backend
        )
    except ImportError:
        return None
    dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    return init_device_mesh("cpu", (2,))


def shard_shaped(model, plan: dict, tp: int):
    """``model`` with every Linear of a tensor-parallel ``plan`` replaced by a plain Linear of one rank's shard
    shape (column-wise: out / tp outputs; row-wise: in / tp inputs): the compute one rank does, unwrapped."""
    from torch import nn
    from torch.distributed.tensor.parallel import ColwiseParallel

    for path, style in plan.items():
        parent_path, _, leaf = path.rpartition(".")
        parent = model.get_submodule(parent_path)
        full = getattr(parent, leaf)
        i, o = full.in_features, full.out_features
        setattr(parent, leaf, nn.Linear(i, o // tp) if isinstance(style, ColwiseParallel) else nn.Linear(i // tp, o))
    return model


def _tp_probe_bytes(cfg, ranks: int, batch: int) -> float:
    """Bytes the simulator's tensor-parallel all-reduces carry in one forward + backward of the probe."""
    from parbench.config import RunConfig, Strategy
    from parbench.sim.framework import tp_allreduce_bytes
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.stages import stages

    if ranks < 2:
        return 0.0
    spec = model_spec(cfg)
    layout = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.TP, world_size=ranks, global_batch_size=batch))
    return tp_allreduce_bytes(spec, layout, stages(spec, 1, 1)[0])


def framework_rank(plan: FrameworkPlan, info) -> dict[str, Any]:
    """Per probe workload, the medians of wrapped - plain differences and what the simulator counts for them.

    On this process's one-rank group: forward + backward under DistributedDataParallel (its reducer runs
    its hooks and bucket copies on one rank too; torch's fake group cannot serve its reducer) against
    plain; the optimizer step, plain and under ``fully_shard``; a one-stage
    pipeline schedule of ``PIPELINE_PROBE_MICRO_BATCHES`` micro-batches against the same micro-batches in a
    plain loop. Then on a fake two-rank group: forward + backward under ``fully_shard`` against plain, and
    under ``parallelize_module`` against a plain model of the shard's shapes, at two batch sizes; and both
    again at the small batch, each beside its plain twin, untraced and traced (``plain_and_traced``)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import Schedule1F1B
    from torch.distributed.tensor.parallel import parallelize_module
    from torch.nn.parallel import DistributedDataParallel

    from parbench import workloads
    from parbench.config import WorkloadConfig
    from parbench.metrics.comm import CommMeter
    from parbench.sim.framework import fsdp_units, tp_linears
    from parbench.sim.model import model_spec
    from parbench.sim.stages import stages
    from parbench.workloads.base import StagedModel

    warnings.filterwarnings("ignore", category=FutureWarning)
    mesh = init_device_mesh("cpu", (1,))
    probes = []
    for name, shape in FRAMEWORK_PROBES:
        cfg = WorkloadConfig(name=name, **shape)
        w = workloads.make(cfg, 0)
        x, y = w.rows(0, FRAMEWORK_BATCH, 0, FRAMEWORK_BATCH)
        probes.append((name, cfg, w, x, y))
    rows = []
    for name, cfg, w, x, y in probes:
        fsdp, piped = w.build(0), w.build(0)
        for unit in fsdp.units:
            fully_shard(unit, mesh=mesh)
        fully_shard(fsdp, mesh=mesh)
        m = PIPELINE_PROBE_MICRO_BATCHES
        stage = PipelineStage(StagedModel(piped.pre, list(piped.units), piped.post), 0, 1, torch.device("cpu"))
        schedule = Schedule1F1B(stage, n_microbatches=m, loss_fn=w.loss)
        plain = w.build(0)
        pieces = list(zip(x.tensor_split(m), y.tensor_split(m)))
        train, opt_steps = {}, {}
        for label, model in (("plain", plain), ("fsdp", fsdp)):
            opt = w.optimizer(list(model.parameters()), 1e-3)
            train[label] = lambda m_=model: w.loss(m_(x), y).backward()
            opt_steps[label] = lambda o=opt: (o.step(), o.zero_grad(set_to_none=False))
        train.pop("fsdp")  # timed on two ranks below
        ddp = DistributedDataParallel(w.build(0))
        train["ddp"] = lambda: w.loss(ddp(x), y).backward()
        w.loss(fsdp(x), y).backward()  # its optimizer steps need gradients (zero_grad keeps them, as zeros)
        train["plain_micro"] = lambda: [w.loss(plain(a), b).backward() for a, b in pieces]
        train["pipeline"] = lambda: schedule.step(x, target=y, losses=[])
        t, o = _alternate(train, plan.reps, 0.1), _alternate(opt_steps, plan.reps, 0.05)
        spec = model_spec(cfg)
        st = stages(spec, 1, 1)[0]
        rows.append({"workload": name, "optimizer_plain_s": stats.median(o["plain"]), "param_elements": spec.param_numel,
                     "optimizer_s": _median_diff(o, "fsdp", "plain"), "ddp_s": _median_diff(t, "ddp", "plain"),
                     "ddp_bytes": spec.param_numel * 4,
                     "pipeline_s": _median_diff(t, "pipeline", "plain_micro"), "pipeline_micro_batches": m,
                     "tp_linears": tp_linears(st), "fsdp_units": fsdp_units(st), "params": len(st.tensors),
                     "optimizer": spec.optimizer,
                     "iqr_s": {"optimizer": _iqr_diff(o, "fsdp", "plain"), "pipeline": _iqr_diff(t, "pipeline", "plain_micro"),
                               "ddp": _iqr_diff(t, "ddp", "plain")}})
    two = _fake_two_rank_mesh() or mesh
    ranks = two.size()
    meter = CommMeter(rank=0)

    def fsdp_steps(w, x, y, suffix: str = "") -> dict[str, Any]:
        fsdp, plain = w.build(0), w.build(0)
        for unit in fsdp.units:
            fully_shard(unit, mesh=two)
        fully_shard(fsdp, mesh=two)
        return {f"plain{suffix}": lambda: w.loss(plain(x), y).backward(),
                f"fsdp{suffix}": lambda: w.loss(fsdp(x), y).backward()}

    for row, (name, cfg, w, x, y) in zip(rows, probes):
        steps, reps = fsdp_steps(w, x, y), plan.reps
        if name == FSDP_WIDE_PROBE[0]:  # the wide twin in the same rounds, so drift hits both alike
            wide_cfg = WorkloadConfig(name=name, **FSDP_WIDE_PROBE[1])
            wide = workloads.make(wide_cfg, 0)
            steps.update(fsdp_steps(wide, *wide.rows(0, FRAMEWORK_BATCH, 0, FRAMEWORK_BATCH), "_wide"))
            reps = FSDP_WIDE_REPS_FACTOR * plan.reps
            row["fsdp_wide_bytes"] = model_spec(wide_cfg).param_numel * 4
        t = _alternate(steps, reps, 0.1)
        for key in ("fsdp", "fsdp_wide") if "fsdp_wide" in t else ("fsdp",):
            plain_key = key.replace("fsdp", "plain")
            row[f"{key}_s"], row["iqr_s"][key] = _median_diff(t, key, plain_key), _iqr_diff(t, key, plain_key)
        row.update(fsdp_ranks=ranks, tp_ranks=ranks, fsdp_bytes=model_spec(cfg).param_numel * 4)
        tp = w.build(0)
        parallelize_module(tp, two, w.tp_plan(tp))
        shard = shard_shaped(w.build(0), w.tp_plan(tp), ranks)
        for key, batch in (("tp", FRAMEWORK_BATCH), ("tp_large", TP_LARGE_BATCH)):
            xb, yb = w.rows(0, batch, 0, batch)
            t = _alternate({"plain": lambda: w.loss(shard(xb), yb).backward(), "tp": lambda: w.loss(tp(xb), yb).backward()},
                           plan.reps, 0.1)
            row.update({f"{key}_s": _median_diff(t, "tp", "plain"), f"{key}_bytes": _tp_probe_bytes(cfg, ranks, batch)})
            row["iqr_s"][key] = _iqr_diff(t, "tp", "plain")
        # each wrapper again, plain and traced as the runner traces a step, against its unwrapped twin
        calls = {"plain": steps["plain"], "fsdp": steps["fsdp"],
                 "shard": lambda w=w, m=shard, x=x, y=y: w.loss(m(x), y).backward(),
                 "tp": lambda w=w, m=tp, x=x, y=y: w.loss(m(x), y).backward()}
        got = {k: plain_and_traced(fn, plan.reps, meter) for k, fn in calls.items()}
        for kind, base in (("fsdp", "plain"), ("tp", "shard")):
            (plain_s, traced_s, between_s), (plain_b, traced_b, between_b) = got[kind], got[base]
            row.update({f"{kind}_untraced_added_s": plain_s - plain_b, f"{kind}_traced_added_s": traced_s - traced_b,
                        f"{kind}_between_added_s": between_s - between_b})
    return {"rows": rows}


def _median_diff(times: dict[str, list[float]], a: str, b: str) -> float:
    return stats.median([p - q for p, q in zip(times[a], times[b])])


def _iqr_diff(times: dict[str, list[float]], a: str, b: str) -> float:
    return stats.iqr([p - q for p, q in zip(times[a], times[b])])


def measure_framework(reps: int, memory_bandwidth_bytes_per_s: float) -> dict[str, Any]:
    """Fit the host costs of torch's wrappers (``parbench.sim.framework``) from ``framework_rank``'s rows:
    per byte a parallelised Linear's all-reduces carry (both probes' growth from the small batch to the large
    over their growth in bytes, pooled), per parallelised Linear (what is left at the small batch, median
    over the probes), per byte FSDP2 gathers (the mlp probe's growth from its own width to ``FSDP_WIDE_PROBE``'s
    over the growth in bytes), per FSDP2 unit and parameter (the two probes' equations solved, their bytes'
    share taken out first; a negative share falls back to all of it per parameter), per DDP parameter and gradient byte (likewise), per DTensor optimizer
    op, per pipeline schedule action (a micro-batch on a stage; median over the probes); per operator of a plain optimizer step + zero_grad (its memory
    traffic taken out, as ``parbench.sim.timing.optimizer_time_s`` adds it back); and FSDP2's and tensor
    parallelism's cost in a traced step, as a multiple of the untraced and the share of it between operators
    (``_traced_multiple``)."""
    from parbench.distributed import spawn

    outcome = spawn(1, framework_rank, FrameworkPlan(reps=reps), timeout_s=600)
    if outcome.status != "ok":
        raise RuntimeError(f"framework calibration produced no result: {outcome.error}")
    return fit_framework(outcome.results[0]["rows"], memory_bandwidth_bytes_per_s)


def fit_framework(rows: list[dict[str, Any]], memory_bandwidth_bytes_per_s: float) -> dict[str, Any]:
    """``measure_framework``'s fit of its measured rows (torch's own optimizers run unfused: one kernel per
    operation, ``parbench.sim.timing.ADAMW_UNFUSED_BYTES_PER_ELEMENT``)."""
    from parbench.sim.timing import (
        ADAMW_OPS_PER_TENSOR,
        SGD_BYTES_PER_ELEMENT,
        SGD_OPS_PER_TENSOR,
        adamw_bytes_per_element,
    )

    grown = [(r["tp_large_s"] - r["tp_s"], r["tp_large_bytes"] - r["tp_bytes"]) for r in rows if "tp_large_s" in r]
    per_byte = max(sum(d for d, _ in grown) / sum(b for _, b in grown), 0.0) if sum(b for _, b in grown) > 0 else 0.0
    tp = stats.median([max(r["tp_s"] - per_byte * r.get("tp_bytes", 0.0), 0.0) / r["tp_linears"] for r in rows])
    wide = [r for r in rows if "fsdp_wide_s" in r]
    fsdp_byte = (max((wide[0]["fsdp_wide_s"] - wide[0]["fsdp_s"]) / (wide[0]["fsdp_wide_bytes"] - wide[0]["fsdp_bytes"]), 0.0)
                 if wide else 0.0)
    param, unit = _solve_two([(r["params"], r["fsdp_units"], max(r["fsdp_s"] - fsdp_byte * r.get("fsdp_bytes", 0), 0.0))
                              for r in rows])
    pipeline = stats.median([max(r["pipeline_s"], 0.0) / r["pipeline_micro_batches"] for r in rows])
    ddp_param, ddp_byte = _solve_two([(r["params"], r.get("ddp_bytes", 0), max(r.get("ddp_s", 0.0), 0.0)) for r in rows])
    ops = [r["params"] * (ADAMW_OPS_PER_TENSOR if r["optimizer"] == "adamw" else SGD_OPS_PER_TENSOR) for r in rows]
    op = max(sum(r["optimizer_s"] for r in rows), 0.0) / sum(ops)
    per_el = {"adamw": adamw_bytes_per_element(False) + 4, "sgd": SGD_BYTES_PER_ELEMENT + 4}  # update + zero_grad
    plain = stats.median([max(r["optimizer_plain_s"] - r["param_elements"] * per_el[r["optimizer"]] / memory_bandwidth_bytes_per_s,
                              0.0) / (n + r["params"]) for r, n in zip(rows, ops)])
    traced = {kind: _traced_multiple(rows, kind) for kind in ("fsdp", "tp")}
    return dict(zip(FRAMEWORK_FIELDS, (plain, tp, per_byte, unit, param, op, pipeline, ddp_param, ddp_byte, fsdp_byte,
                                       traced["fsdp"][0], traced["tp"][0], traced["fsdp"][1], traced["tp"][1])),
                rows=rows)


def _traced_multiple(rows: list[dict[str, Any]], kind: str) -> tuple[float, float]:
    """(traced / untraced seconds the wrapper ``kind`` adds, the share of its traced seconds between operators),
    summed over the probes (the larger weigh most). Tracing adds work, so the multiple is at least 1; without
    the measurement (an older row), 1 and 0: the untraced cost, all in compute."""
    untraced = sum(r.get(f"{kind}_untraced_added_s", 0.0) for r in rows)
    traced = sum(r.get(f"{kind}_traced_added_s", 0.0) for r in rows)
    between = sum(r.get(f"{kind}_between_added_s", 0.0) for r in rows)
    if untraced <= 0 or traced <= 0:
        return 1.0, 0.0
    return max(traced / untraced, 1.0), min(max(between / traced, 0.0), 1.0)


def _solve_two(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(a, b) with a x_i + b y_i = d_i for two probes' (x, y, d); a share that comes out negative (or rows that
    cannot separate them) falls back to all of it on the first: (sum d / sum x, 0)."""
    a, b = _solve_exact(rows)
    if a < 0 or b < 0:
        (x1, _, d1), (x2, _, d2) = rows
        return (d1 + d2) / (x1 + x2) if x1 + x2 else 0.0, 0.0
    return a, b


def _solve_exact(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(a, b) with a x_i + b y_i = d_i for two probes' (x, y, d), whatever their signs; (-1, -1) where the rows
    cannot separate them."""
    (x1, y1, d1), (x2, y2, d2) = rows
    det = x1 * y2 - x2 * y1
    return ((d1 * y2 - d2 * y1) / det, (x1 * d2 - x2 * d1) / det) if det else (-1.0, -1.0)


REFERENCE_STEPS = (("mlp", {}, 64), ("mlp", {"layers": 2, "hidden": 384}, 16), ("mlp", {"layers": 1, "hidden": 1024}, 128),
                   ("transformer", {}, 16),
                   ("transformer", {"layers": 2, "hidden": 96, "heads": 3, "seq_len": 48, "vocab_size": 384}, 8),
                   ("transformer", {"layers": 2, "hidden": 192, "heads": 6, "seq_len": 96, "vocab_size": 768}, 4))
"""(workload, shape, batch) of the single-process steps ``step_scale`` times: three mlps and three decoders from
the defaults up to about the size of the simulator check's, none of them its shapes (the check stays held out).
Each shape's measured / predicted ratio carries its own small-shape costs the op model misses; their median is
what one scale can say about all of them (two shapes, one per workload, read 0.82 and 1.46 before the op model
counted backward GEMMs, exp/erf functions and the CPU attention kernel's tiling)."""


def reference_label(name: str, shape: dict) -> str:
    return f"{name}-{shape['layers']}x{shape['hidden']}" if shape else name


def _reference_parts(cfg, batch: int):
    """(parameter tensors, forward + loss + backward, zero_grad, optimizer step) of a built-in workload's
    single-process training step (a ``WorkloadConfig``) on one batch made beforehand."""
    import torch

    from parbench import workloads

    torch.set_num_threads(1)
    w = workloads.make(cfg, 0)
    model = w.build(0)
    params = list(model.parameters())
    opt = w.optimizer(params, 1e-3)
    x, y = w.rows(0, batch, 0, batch)

    def backward() -> None:
        w.loss(model(x), y).backward()

    return len(params), backward, lambda: opt.zero_grad(set_to_none=False), opt.step


def measure_reference_step(cfg, batch: int, reps: int) -> float:
    """Seconds of one single-process training step of a built-in workload (a ``WorkloadConfig``), as the
    runner's ``single`` strategy times it (zero_grad, forward, loss, backward, optimizer step; the batch is
    made before)."""
    _, backward, zero_grad, update = _reference_parts(cfg, batch)

    def step() -> None:
        zero_grad()
        backward()
        update()  # right after the backward pass, as the runner steps

    return _time_median(step, reps, window_s=0.2)


TRACED_REFERENCE = "parbench.calibrate.traced_reference"
"""The profiler annotation around each traced reference forward + backward (``measure_tracing``)."""


TRACING_LARGE_STEPS = (("transformer", {"layers": 2, "hidden": 192, "heads": 6, "seq_len": 96, "vocab_size": 768}, 32),)
"""(workload, shape, batch) whose forward + backward ``measure_tracing`` also times, plain and traced: a reference
decoder at 8x its batch (about 0.2 s plain), same operators, so what tracing adds beyond its cost per operator
(a share of the operators' own work) stands out. On this project's 2-core VM the check decoder at batch 4 to 64
(16 to 252 ms plain, 555 operators) cost 9-10 to 21-30 ms more traced; torch.profiler alone added 6-10 ms to a
72 ms mlp step of 64 operators."""


def measure_tracing(reps: int) -> tuple[float, float, float, float, list[dict[str, Any]]]:
    """What the step-time breakdown's tracing adds: (seconds per training-path operator, per optimizer operator,
    between operators per training operator, the share of the operators' own work, rows). Each REFERENCE_STEPS
    step's forward + backward and its zero_grad + optimizer step, and each ``TRACING_LARGE_STEPS`` forward +
    backward, timed plain and again as the runner traces a step (inside torch.profiler, under the comm meter's
    timing mode; ``plain_and_traced``). The operators are the ones the simulator counts (``timing.training_ops``,
    ``timing.optimizer_ops``). The optimizer's cost is the added seconds over its operators, summed over the
    steps (7-21 us an operator per step on this project's 2-core VM). The training path's is split into a cost
    per operator and a share of the plain time (``fit_tracing``).

    Between operators: of the traced forward + backward, the seconds on the calling thread outside every operator
    the profiler records (the breakdown's ``other``: the Python that calls them, the tracer's bookkeeping), over
    the operators counted, summed over the steps likewise (4-10 us an operator on this project's 2-core VM)."""
    from parbench.config import WorkloadConfig
    from parbench.metrics.comm import CommMeter
    from parbench.sim.model import model_spec
    from parbench.sim.timing import optimizer_ops, training_ops

    meter = CommMeter(rank=0)
    rows = []
    steps = [(step, False) for step in REFERENCE_STEPS] + [(step, True) for step in TRACING_LARGE_STEPS]
    for (name, shape, batch), large in steps:
        cfg = WorkloadConfig(name=name, **shape)
        spec = model_spec(cfg)
        tensors, backward, zero_grad, update = _reference_parts(cfg, batch)
        row: dict[str, Any] = {"step": reference_label(name, shape) + (f" batch {batch}" if large else ""), "large": large}
        parts = [("training", backward, training_ops(spec))]
        if not large:  # the optimizer's work does not grow with the batch
            parts.append(("optimizer", lambda z=zero_grad, u=update: (z(), u()), optimizer_ops(spec, tensors)))
        for part, fn, ops in parts:
            plain, under, between = plain_and_traced(fn, reps, meter)
            row.update({f"{part}_ops": ops, f"{part}_plain_s": plain, f"{part}_traced_s": under,
                        f"{part}_s_per_op": (under - plain) / ops})
            if part == "training":
                row.update({"training_between_s": between, "training_between_s_per_op": between / ops})
        rows.append(row)
    training, share = fit_tracing(rows)
    optimizer = [r for r in rows if "optimizer_ops" in r]
    per_op = max(sum(r["optimizer_traced_s"] - r["optimizer_plain_s"] for r in optimizer)
                 / sum(r["optimizer_ops"] for r in optimizer), 0.0)
    between = sum(r["training_between_s"] for r in rows) / sum(r["training_ops"] for r in rows)
    return training, per_op, between, share, rows


def fit_tracing(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(seconds per operator, share of the plain time) that tracing adds to a forward + backward: a per-operator
    cost and a share of the operators' own work, from two pooled equations, the reference steps' (few
    milliseconds each: mostly the per-operator cost) and the large steps' (mostly the share). Without large
    steps, or where either comes out negative or the share at 1 or more (tracing cannot double the work), all of
    it per operator: the reference steps' added seconds over their operators. The large steps are left out of
    that: what tracing adds to them is a few percent of a step of hundreds of milliseconds, inside a shared
    machine's drift (on this project's 2-core VM one calibration's large step ran 4.4% faster traced than
    plain, and pooled with the others it pulled the cost per operator from 22 us to 6.3 us, against 23 us
    measured on the check's mlp and decoder steps traced as the runner traces them)."""
    def pooled(group: list[dict[str, Any]]) -> tuple[float, float, float]:
        return (sum(r["training_ops"] for r in group), sum(r["training_plain_s"] for r in group),
                sum(r["training_traced_s"] - r["training_plain_s"] for r in group))

    small, large = [r for r in rows if not r.get("large")], [r for r in rows if r.get("large")]
    per_op, share = _solve_exact([pooled(small), pooled(large)]) if small and large else (-1.0, 0.0)
    if per_op < 0 or not 0 <= share < 1:
        ops, _, added = pooled(small or rows)
        return max(added / ops, 0.0), 0.0
    return per_op, share


def plain_and_traced(fn, reps: int, meter, window_s: float = 0.05) -> tuple[float, float, float]:
    """Seconds of one call of ``fn``: (plain, traced, of the traced call's those between operators). Traced as
    the runner traces a step: inside torch.profiler, under the comm meter's timing mode (``meter``). Plain and
    traced windows alternate, each traced one in a profiler of its own: traced is the plain median times the
    median ratio of each traced window to the plain one just before it, so a slow spell of a shared machine
    hits a pair, not one side. (Timed in three blocks instead, plain, traced, plain, the large tracing step's
    share read 3.3% in one calibration and 36% in another on this project's 2-core VM, whose compute probe
    drifted 13% and 24% while they ran.)"""
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # as the runner's tracing: no stage line per profiler start

    def traced() -> None:
        with meter.timing(), record_function(TRACED_REFERENCE):
            fn()

    def window(call, inner: int) -> float:
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        return (time.perf_counter() - t0) / inner

    t0 = time.perf_counter()
    fn()  # warm-up: the first call allocates and picks kernels; it also sizes the window
    inner = max(1, math.ceil(window_s / max(time.perf_counter() - t0, 1e-7)))
    with profile(activities=[ProfilerActivity.CPU]):
        traced()  # and once traced: the profiler's first record of each operator
    plains, ratios, calls, between = [], [], 0, 0.0
    for _ in range(reps):
        plains.append(window(fn, inner))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            ratios.append(window(traced, inner) / plains[-1])
        n, s = _between_operators(prof.profiler.kineto_results.events())
        calls, between = calls + n, between + s
    plain = stats.median(plains)
    return plain, plain * stats.median(ratios), between / calls


def _between_operators(events) -> tuple[int, float]:
    """(calls, seconds) of the ``TRACED_REFERENCE`` annotations and of their time on their thread outside every
    operator the breakdown counts as compute (``tracing.NOT_COMPUTE`` lists the events it does not)."""
    from parbench.metrics.breakdown import merge, subtract
    from parbench.metrics.tracing import NOT_COMPUTE

    marks = [(e.start_ns(), e.end_ns()) for e in events if e.name() == TRACED_REFERENCE]
    thread = next(e.start_thread_id() for e in events if e.name() == TRACED_REFERENCE)
    ops = [(e.start_ns(), e.end_ns()) for e in events
           if e.start_thread_id() == thread and not e.is_user_annotation() and not e.name().startswith(NOT_COMPUTE)]
    return len(marks), sum(b - a for a, b in subtract(merge(marks), merge(ops))) / 1e9


def measure_reference_steps(reps: int) -> dict[str, float]:
    """Seconds of each REFERENCE_STEPS step, by its label."""
    from parbench.config import WorkloadConfig

    return {reference_label(name, shape): measure_reference_step(WorkloadConfig(name=name, **shape), batch, reps)
            for name, shape, batch in REFERENCE_STEPS}


def step_scale(cluster: Cluster, reps: int, measured: dict[str, float] | None = None) -> tuple[float, dict[str, float]]:
    """Median over REFERENCE_STEPS of measured / predicted single-process step time (and each ratio); ``measured``:
    the steps' seconds by label where they were timed already (``measure_reference_steps``)."""
    from parbench.config import RunConfig, WorkloadConfig
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.predict import predict

    measured = measured or measure_reference_steps(reps)
    ratios = {}
    for name, shape, batch in REFERENCE_STEPS:
        cfg = RunConfig(workload=WorkloadConfig(name=name, **shape), global_batch_size=batch)
        predicted = predict(model_spec(cfg.workload), layout_from_run(cfg), cluster).step_time_s
        ratios[reference_label(name, shape)] = measured[reference_label(name, shape)] / predicted
    return stats.median(list(ratios.values())), ratios


STEP_PROBES = {"collective_step_overhead_s": ("fsdp", FRAMEWORK_PROBES[0]), "burst_step_overhead_s": ("zero1", FRAMEWORK_PROBES[0]),
               "tp_step_overhead_s": ("tp", FRAMEWORK_PROBES[1]), "fsdp_step_byte_overhead_s": ("fsdp", FSDP_WIDE_PROBE)}
"""Per in-step term, the strategy and workload of the real run it is fitted on, in the order fitted (the framework
probes' shapes, not the check's): FSDP2 on the mlp, a dozen blocking collectives a step; ZeRO-1 on the mlp, whose
step ends in a burst of one broadcast per rank's bucket (after its gradient all-reduce, which carries the first
term); tensor parallelism on the decoder, 12 blocking all-reduces a step; FSDP2 on the wide mlp, whose bytes (14x
the mlp's, the same collectives) give FSDP2's cost per byte beyond the first term. Each term is what the run's step
has beyond its prediction, so it also takes up whatever the prediction misses in the probe's compute: the burst's
n broadcasts are a few ms of a decoder's step, and the decoder probe's compute was predicted fast by about that.
On one steady calibration (2026-12-07), the mlp probe read 0.83 and 0.56 ms a broadcast at 2 and 4 ranks, the
decoder 1.43 and 1.57 (3 runs each, 10 minutes after the calibration's own decoder fit of 1.76 and 2.34); the
check's ZeRO-1 runs predicted with the mlp's figures went from a median |error| of 18% to 9% (the mlp's from
16-34% to 0-11%, the decoder's, already predicted fast like every decoder that day, from 4-30% to 9-31%)."""
STEP_PROBE_BATCH = 32
STEP_PROBE_STEPS = 20
STEP_PROBE_RUNS = 3
"""Runs of the probe per group size, their median step taken: at 2 ranks two runs a minute apart read 18.1 and
20.6 ms (0.31 and 0.59 ms a collective), at 4 ranks 58.5 and 58.7 ms (1.24 and 1.26)."""


def step_probe_config(n: int, term: str = "collective_step_overhead_s"):
    """The runner's run of ``term``'s probe (``STEP_PROBES``) on n gloo ranks. FSDP2 (ZeRO-3) gathers every unit
    in forward and again in backward and reduce-scatters its gradient: 3 collectives a unit on the step's path."""
    from parbench.config import RunConfig, Strategy, WorkloadConfig

    strategy, (name, shape) = STEP_PROBES[term]
    return RunConfig(strategy=Strategy(strategy), world_size=n, workload=WorkloadConfig(name=name, **shape),
                     global_batch_size=STEP_PROBE_BATCH, steps=STEP_PROBE_STEPS, warmup_steps=2, timeout_s=300)


def measure_step_probe(cfg, runs: int = STEP_PROBE_RUNS) -> float:
    """The median over ``runs`` real runs of ``cfg`` of each one's median step seconds (the slowest rank's, as
    its record reports it)."""
    return stats.median(r["step_time_s_median"] for r in run_step_probe(cfg, runs))


def run_step_probe(cfg, runs: int = STEP_PROBE_RUNS) -> list[dict[str, Any]]:
    """The records of ``runs`` real runs of ``cfg`` (their step times and traced step-time terms)."""
    from parbench.launch import launch
    from parbench.record import build_record

    records = []
    for _ in range(runs):
        outcome = launch(cfg)
        if outcome.status != "ok":
            raise RuntimeError(f"step probe at n={cfg.world_size} produced no result: {outcome.error}")
        records.append(build_record(cfg, outcome.results, outcome.wall_s))
    return records


def fit_tp_compute_share(cluster: Cluster, cfg, measured_comm_s: float) -> dict[str, Any]:
    """``Cluster.tp_step_compute_share`` at ``cfg``'s world size, ``cluster`` holding its ``tp_step_overhead_s``:
    of that overhead, the share the tensor-parallel probe's rank did not spend waiting. Its comm meter measured
    ``measured_comm_s`` of exposed intermediate communication in a traced step; the model predicts it from the
    collectives' fits alone (the share at 1) up to the fits and the whole overhead (at 0); where the measurement
    lies between is the share waited, the rest computed. Clamped to [0, 1]; 0 where there is no overhead."""
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.predict import predict

    n, spec, layout = cfg.world_size, model_spec(cfg.workload), layout_from_run(cfg)

    def comm(share: float) -> float:
        traced = dataclasses.replace(cluster, tp_step_compute_share={n: share}).traced()
        return predict(spec, layout, traced).terms["time_comm_exposed_intermediate_s"]

    waited_all, computed_all = comm(0.0), comm(1.0)
    overhead = waited_all - computed_all
    waited = min(max((measured_comm_s - computed_all) / overhead, 0.0), 1.0) if overhead > 0 else 1.0
    return {"alpha": 1.0 - waited, "measured_comm_s": measured_comm_s, "predicted_comm_s_all_waited": waited_all,
            "predicted_comm_s_none_waited": computed_all}


def fit_collective_step_overhead(cluster: Cluster, cfg, measured_s: float,
                                 term: str = "collective_step_overhead_s") -> dict[str, Any]:
    """The ``Cluster`` field ``term`` at ``cfg``'s world size: the measured step less its prediction without the
    term, over the ops it covers on the step's path (what one second per op adds to the prediction, so the
    count is the model's own); 0 where the prediction is not short."""
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.predict import predict

    n, spec, layout = cfg.world_size, model_spec(cfg.workload), layout_from_run(cfg)
    base = predict(spec, layout, dataclasses.replace(cluster, **{term: {n: 0.0}})).step_time_s
    one = predict(spec, layout, dataclasses.replace(cluster, **{term: {n: 1.0}})).step_time_s
    count = one - base
    alpha = max((measured_s - base) / count, 0.0) if count > 0 else 0.0
    return {"alpha": alpha, "measured_s": measured_s, "predicted_s": base, "collectives_on_path": count}


DRIFT_LIMIT_PCT = 15.0
"""A profile whose machine changed speed by more than this while it was measured cannot support a step-time
error below it; the report says so (this 2-core VM's speed was seen to drift by 10-50% within an hour)."""


def machine_drift(probe_s: list[float], reference_s: tuple[dict[str, float], dict[str, float]] | None = None,
                  threaded_gemm_gain: dict[int, float] | None = None) -> dict[str, Any]:
    """The same single-process compute probe read through the calibration (start, around each group of
    collectives, end): its readings and their spread, (slowest - fastest) / fastest in %. ``reference_s``: the
    reference training steps' seconds by label at the start and at the end; their move, the median over the
    steps of (slower / faster - 1) in %, counts too. A GEMM probe alone missed a third's slowdown of these
    small, dispatch-bound steps within minutes (read 1.71x and 1.51x their op-level prediction in one
    calibration that called itself steady, 1.27x and 1.17x ten minutes later).

    ``threaded_gemm_gain``: thread count -> the GEMM rate measured with that many threads over one thread's. Below
    1 (more cores, no faster) the cores were shared while those probes ran, which the one-thread compute probe
    cannot see: the profile is unsteady. (On this project's 2-core VM two threads read 1.89x; a test run for 4
    seconds beside the probes made it 0.99x, and the flash attention probe 0.67x.)"""
    drift = (max(probe_s) / min(probe_s) - 1) * 100
    out: dict[str, Any] = {"speed_probe_s": probe_s, "compute_drift_pct": drift}
    if reference_s:
        start, end = reference_s
        moved = stats.median([(max(start[k], end[k]) / min(start[k], end[k]) - 1) * 100 for k in start])
        out.update(reference_steps_start_s=start, reference_steps_end_s=end, reference_drift_pct=moved)
        drift = max(drift, moved)
    slower = {t: g for t, g in (threaded_gemm_gain or {}).items() if g < 1}
    if threaded_gemm_gain:
        out["threaded_gemm_gain"] = threaded_gemm_gain
    return {**out, "drift_pct": drift, "steady": drift <= DRIFT_LIMIT_PCT and not slower}


def checked_fit(xs: list[float], ys: list[float], *, max_rate: float = math.inf) -> tuple[tuple[float, float], dict[str, Any]]:
    """((alpha, beta) to use, the fit's report). An unphysical fit is reported with its reasons and replaced
    by the measured point estimates (``parbench.sim.fit.point_estimates``)."""
    f = fit_with_holdout(xs, ys)
    reasons = unphysical(f, max_rate=max_rate)
    used = point_estimates(xs, ys) if reasons else (f.alpha, f.beta)
    report = {**asdict(f), "points": len(xs), "status": "unphysical" if reasons else "ok", "reasons": reasons,
              "used": "point estimates" if reasons else "fit", "used_alpha": used[0], "used_beta": used[1]}
    return used, report


def calibrate(*, quick: bool = False, results_dir: str | Path = "results", save: bool = True) -> dict[str, Any]:
    """Measure, fit and (optionally) save the local profile; returns {cluster, fit, meta}."""
    sizes = _sizes(quick)
    reps = 3 if quick else 7
    t0 = time.perf_counter()
    alone = [_compute_probe()]  # the machine's speed, read again around each group and at the end
    early = measure_reference_steps(reps)  # and the single-process steps the step scale rests on, again at the end
    (gemm_a, gemm_b), gemm = checked_fit(*measure_gemm(sizes["gemm"], reps))
    elem_xs, elem_ys = measure_elementwise(sizes["elementwise"], reps)
    (elem_a, elem_b), elem = checked_fit(elem_xs, elem_ys)
    memory_bw = 1 / elem_b
    stream_bw, stream_rows = measure_stream_bandwidth(sizes["stream"], reps)
    cache = cache_capacity(elem_xs, elem_ys, stream_bw)
    op_overhead = measure_framework_overhead(reps)
    attention_eff, attention_rows = measure_attention(reps, 1 / gemm_b, gemm_a)
    backward_ratio, backward_rows = measure_backward_gemm(reps)
    weight_bw, weight_rows = measure_weight_read(reps, 1 / gemm_b, gemm_a, memory_bw)
    transcendental, transcendental_rows = measure_transcendental(reps, memory_bw)
    fits: dict[str, dict[str, Any]] = {"gemm": gemm, "elementwise": elem,
                                       "stream_bandwidth": {"alpha": stream_bw, "rows": stream_rows},
                                       "cache_capacity": cache,
                                       "framework_op_overhead_s": {"alpha": op_overhead},
                                       "attention_efficiency": {"alpha": attention_eff, "rows": attention_rows},
                                       "backward_gemm_ratio": {"alpha": backward_ratio, "rows": backward_rows},
                                       "weight_read_bandwidth": {"alpha": weight_bw, "rows": weight_rows},
                                       "transcendental_s_per_element": {"alpha": transcendental, "rows": transcendental_rows}}
    cores = host_cpus()
    threaded, threaded_fits = measure_threaded(sizes, reps, cores)
    fits.update(threaded_fits)
    collectives: dict[str, dict[int, tuple[float, float]]] = {}
    slowdown = {1: 1.0}
    for n in GROUP_SIZES:
        alone.append(_compute_probe())
        rows_by_kind = measure_collectives(n, sizes["comm"], reps)
        alone.append(_compute_probe())
        # n ranks on fewer cores cannot beat n / cores: the floor guards against a lucky quiet moment
        slowdown[n] = max(rows_by_kind.pop("compute_s") / (sum(alone[-2:]) / 2), n / cores, 1.0)
        collectives.setdefault("barrier", {})[n] = (rows_by_kind.pop("barrier_s"), 0.0)
        fits[f"compute_slowdown@{n}"] = {"alpha": slowdown[n]}
        for kind, rows in rows_by_kind.items():
            used, fits[f"{kind}@{n}"] = checked_fit([s for s, _ in rows], [t for _, t in rows], max_rate=memory_bw)
            collectives.setdefault(kind, {})[n] = used
    framework = measure_framework(reps, memory_bw)
    fits["framework"] = framework
    send = collectives["send"][2]
    cluster = Cluster(
        name=f"local:{socket.gethostname()}", gpus_per_node=max(cores, 64), peak_flops=1 / gemm_b,
        gemm_efficiency=1.0, attention_efficiency=min(attention_eff, 1.0), gemm_overhead_s=gemm_a, op_overhead_s=elem_a, autograd_op_overhead_s=op_overhead,
        memory_bandwidth_bytes_per_s=memory_bw, stream_bandwidth_bytes_per_s=stream_bw,
        weight_read_bandwidth_bytes_per_s=weight_bw, cache_bytes=int(cache["alpha"]),
        beyond_cache_bandwidth_bytes_per_s=cache["beyond_bytes_per_s"],
        backward_gemm_ratio=min(max(backward_ratio, 0.1), 2.0), transcendental_s_per_element=transcendental,
        memory_bytes=_host_memory_bytes(), intra=Link(latency_s=send[0], bandwidth_bytes_per_s=1 / send[1]),
        inter=Link(latency_s=send[0], bandwidth_bytes_per_s=1 / send[1]), overlap=CPU_OVERLAP, cores=cores,
        compute_slowdown=slowdown, threaded=threaded,
        **{k: framework[k] for k in FRAMEWORK_FIELDS},
        collectives=collectives,
        sources={"all": f"parbench calibrate{' --quick' if quick else ''} on {socket.gethostname()}"})
    late = measure_reference_steps(reps)
    scale, ratios = step_scale(cluster, reps, {k: (early[k] + late[k]) / 2 for k in early})
    tracing, tracing_optimizer, between, work_share, tracing_rows = measure_tracing(reps)
    cluster = dataclasses.replace(cluster, step_scale=scale, tracing_op_overhead_s=tracing,
                                  tracing_optimizer_op_overhead_s=tracing_optimizer, tracing_between_op_s=between,
                                  tracing_work_share=work_share)
    fits["tracing_op_overhead_s"] = {"alpha": tracing, "optimizer": tracing_optimizer, "between": between,
                                     "work_share": work_share,
                                     "rows": tracing_rows}
    fits["step_scale"] = {"alpha": scale, **{f"measured_over_predicted_{k}": v for k, v in ratios.items()}}
    for term in STEP_PROBES:  # after step_scale: the probes' compute is predicted as every run's is
        overhead, share = {}, {}
        for n in GROUP_SIZES:
            cfg = step_probe_config(n, term)
            key = f"{term.removesuffix('_s')}@{n}"
            records = run_step_probe(cfg, 1 if quick else STEP_PROBE_RUNS)
            fits[key] = fit_collective_step_overhead(cluster, cfg, stats.median(r["step_time_s_median"] for r in records),
                                                     term)
            overhead[n] = fits[key]["alpha"]
            comm = [r["time_comm_exposed_intermediate_s"] for r in records if r.get("time_comm_exposed_intermediate_s") is not None]
            if term == "tp_step_overhead_s" and comm:  # which term holds the overhead: the probe's traced terms say
                fits[f"tp_step_compute_share@{n}"] = fit_tp_compute_share(
                    dataclasses.replace(cluster, tp_step_overhead_s={**cluster.tp_step_overhead_s, n: overhead[n]}),
                    cfg, stats.median(comm))
                share[n] = fits[f"tp_step_compute_share@{n}"]["alpha"]
        cluster = dataclasses.replace(cluster, **{term: overhead}, **({"tp_step_compute_share": share} if share else {}))
    alone.append(_compute_probe())
    profile = {"cluster": cluster_to_dict(cluster), "fit": fits,
               "meta": {"quick": quick, "load_average_1min": os.getloadavg()[0], "seconds": time.perf_counter() - t0,
                        "created_at": now_iso(), "host": socket.gethostname(),
                        "backend": "gloo", "threads_per_rank": [1, *threaded],
                        **machine_drift(alone, (early, late), {t: r["peak_flops"] * gemm_b for t, r in threaded.items()})}}
    if save:
        path = profile_path(results_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(profile, indent=1))
        profile["meta"]["path"] = str(path)
    return profile


def _host_memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 * 2**30
