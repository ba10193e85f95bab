"""What one rank does: build the strategy, warm up, probe, time steps, hand back its figures.

Order of a run on every rank::

    warm-up steps   untimed, >= 2: the first infers pipeline shapes and allocates DDP buckets,
                    the second rebuilds the buckets (two extra broadcasts)
    probe step      untimed, every meter on: c10d ops by category, saved activations
    timed steps     back to back, a barrier before and after each chunk of 16; only a clock and the
                    OS write counter run
    compute-only    ddp: a few steps under no_sync, for the exposed-communication estimate
    traced steps    untimed, under torch.profiler and the comm meter's timer: the step-time
                    breakdown and the trace (parbench.metrics.tracing)

Each step's input is made before its chunk starts (``Trainer.feed.prepare``), as a loader's
workers would have it ready, and timed on its own (``data_times_s``); with ``data_in_step`` the
step makes it inside the timed window instead (``parbench.data``).

The meters stay off during timed steps, so measuring costs the timed loop nothing but a clock
read per step; the byte counts of the probe step hold for every step because the strategies'
traffic is deterministic (the OS counter over the timed steps cross-checks it).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from parbench import progress, strategies, workloads
from parbench.config import RunConfig
from parbench.names import Fault
from parbench.data import Feed
from parbench.distributed import RankInfo
from parbench.metrics import memory
from parbench.metrics.comm import CommMeter, os_write_bytes
from parbench.metrics.tracing import TRACED_STEPS, traced_steps
from parbench.rank_result import RankResult
from parbench.strategies.base import RankContext, Trainer

COMPUTE_ONLY_STEPS = 5
MeterFactory = Callable[..., CommMeter]
"""``(rank=, backend=) -> CommMeter``: the multi-node worker passes one that also splits bytes by node."""


def run_rank(cfg: RunConfig, info: RankInfo) -> RankResult:
    """The rank function of a run (``parbench.distributed.spawn`` calls it in every rank)."""
    return measure(*prepare(cfg, info))


def prepare(cfg: RunConfig, info: RankInfo, *, meter_factory: MeterFactory = CommMeter) -> tuple[RankContext, Trainer]:
    """This rank's context and its strategy's trainer (fault hook applied), memory peaks reset."""
    ctx = RankContext(config=cfg, rank=info.rank, world_size=info.world_size, device=info.device,
                      workload=workloads.make(cfg.workload, cfg.seed),
                      meter=meter_factory(rank=info.rank, backend=cfg.backend.value))
    memory.reset_peak_rss()
    trainer = strategies.build(ctx)
    memory.reset_cuda_peaks(info.device)  # after the build: see reset_cuda_peaks
    if cfg.inject_fault:
        trainer = _with_fault(trainer, cfg.inject_fault, info.rank)
    return ctx, trainer


def _with_fault(trainer: Trainer, text: str, rank: int) -> Trainer:
    """Wrap the step so that the fault's rank fails at the fault's step (a testing aid)."""
    fault = Fault.parse(text)
    if fault.rank != rank:
        return trainer
    inner = trainer.step

    def step(i: int):
        if i == fault.step:
            if fault.kind == "raise":
                raise RuntimeError(f"injected fault on rank {rank} at step {i}")
            if fault.kind == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault.kind == "hang":
                time.sleep(10**6)
            with torch.no_grad():  # nan: the gradient exchange carries it to the other ranks
                for p in trainer.params:
                    p.detach().fill_(float("nan"))
        return inner(i)

    trainer.step = step
    return trainer


def measure(ctx: RankContext, trainer: Trainer) -> RankResult:
    cfg, device = ctx.config, ctx.device
    # rank 0 names each phase on the terminal's status line (when `parbench run` asked for it);
    # every write happens between phases, never inside a timed window or its OS byte count
    say = progress.for_rank(ctx.rank, f"parbench run (rank 0 of {ctx.world_size})").phase
    say(f"warm-up: {cfg.warmup_steps} steps")
    losses = [trainer.step(i) for i in range(cfg.warmup_steps)]

    tracker = memory.ActivationTracker()
    tracker.exclude_params(trainer.params)
    if trainer.feed is not None:
        trainer.feed.prepare(cfg.warmup_steps)  # the probe meters the step, not the making of its input
    say("probe step (every meter on)")
    with ctx.meter.counting(), tracker.tracking():
        losses.append(trainer.step(cfg.warmup_steps))
    probe = len(losses) - 1
    mem = {
        "mem_param_bytes": memory.param_bytes(trainer.params),
        "mem_grad_bytes": memory.grad_bytes(trainer.params),
        "mem_optim_bytes": memory.optimizer_bytes(trainer.optimizer) if trainer.optimizer else 0,
        "mem_activation_bytes": tracker.peak,
        **memory.expert_split(trainer.expert_params, trainer.optimizer),
    }

    first_timed = probe + 1
    say(f"timed steps: {cfg.steps}")
    step_times, timed_losses, io_bytes = timed_steps(ctx, trainer.step, first_timed, cfg.steps, trainer.feed)
    losses += timed_losses
    compute_times: list[float] = []
    if trainer.compute_only_step is not None:
        n = min(cfg.steps, COMPUTE_ONLY_STEPS)
        say(f"compute-only steps (no gradient communication): {n}")
        compute_times, *_ = timed_steps(ctx, trainer.compute_only_step, first_timed + cfg.steps, n, trainer.feed)
    ahead = trainer.feed is not None and not cfg.data_in_step
    say(f"traced steps (step-time breakdown): {TRACED_STEPS}")
    trace = traced_steps(step=trainer.step, meter=ctx.meter, device=device, world_size=ctx.world_size,
                         start=first_timed + cfg.steps + len(compute_times), n=TRACED_STEPS,
                         prepare=trainer.feed.prepare if ahead else None)

    nccl = cfg.backend.value == "nccl"
    return RankResult(
        rank=ctx.rank,
        role=trainer.role,
        step_times_s=step_times,
        data_times_s=_data_times(trainer.feed, first_timed, cfg.steps),
        compute_times_s=compute_times,
        losses=[None if v is None else float(v) for v in losses],
        comm_bytes_per_step=ctx.meter.by_category(),
        # gloo's algorithms and its socket writes; NCCL picks ring/tree itself and moves bytes over
        # NVLink, shared memory or InfiniBand without write syscalls: neither figure holds there
        comm_wire_bytes_per_step=None if nccl else ctx.meter.wire_total(),
        comm_ops=ctx.meter.breakdown(),
        os_write_bytes_per_step=None if nccl else io_bytes / cfg.steps,
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        comm_bytes_by_label=dict(ctx.meter.labels),
        moe_routing=trainer.routing()[:probe + 1 + cfg.steps] if trainer.routing else None,
        peak_rss_bytes=memory.peak_rss_bytes(),
        **mem,
        **memory.cuda_peaks(device),
        param_count=sum(_local(p).numel() for p in trainer.params),
        train_flops_per_sample=ctx.workload.train_flops_per_sample,
        tokens_per_sample=ctx.workload.tokens_per_sample,
        extra=trainer.extra,
        trace={"rank": ctx.rank, **trace},
    )


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (what this rank stores); a plain tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t


PREBUILT_STEPS = 16
"""Timed steps whose inputs are made ahead at once: a chunk of the timed loop (memory: 16 batches)."""


def timed_steps(ctx: RankContext, step: Callable[[int], Any], start: int, n: int, feed: Feed | None = None):
    """n steps back to back, as a training loop runs them: no barrier inside the loop.

    The loop runs in chunks of ``PREBUILT_STEPS``. Each chunk's inputs are made before it (as a loader's
    workers would have them ready; with ``data_in_step`` the step makes its own), then a barrier starts the
    chunk on every rank together and one ends it. Inside, each step is clocked from the end of the one
    before it on this rank, so this rank's times add up to its chunk; the strategy's own collectives keep
    the ranks in step. Returns (this rank's seconds per step, losses, OS bytes the steps wrote: the
    counter is read inside the barriers, so theirs are not in it)."""
    times, losses, io_bytes = [], [], 0
    ahead = feed is not None and not ctx.config.data_in_step
    for lo in range(start, start + n, PREBUILT_STEPS):
        chunk = range(lo, min(lo + PREBUILT_STEPS, start + n))
        for i in chunk if ahead else ():
            feed.prepare(i)  # off the timed window
        dist.barrier()  # every rank starts the chunk together
        io0 = os_write_bytes()
        t0 = time.perf_counter()
        for i in chunk:
            losses.append(step(i))
            if ctx.device.type == "cuda":
                torch.cuda.synchronize(ctx.device)  # kernels are asynchronous: wait for them
            t1 = time.perf_counter()
            times.append(t1 - t0)
            t0 = t1
        io_bytes += os_write_bytes() - io0
        dist.barrier()  # the chunk is over when every rank is done (not clocked: a training loop has no such wait)
    return times, losses, io_bytes


def _data_times(feed: Feed | None, start: int, n: int) -> list[float] | None:
    """Seconds each of steps start..start+n-1 took to make this rank's input (None: it reads none)."""
    if feed is None:
        return None
    return [feed.seconds.get(i, 0.0) for i in range(start, start + n)]
