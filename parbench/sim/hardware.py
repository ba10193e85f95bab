"""Clusters the simulator predicts for: GPU node presets (every figure with its source), a user
cluster file (TOML or JSON), and this machine's calibrated profile (``parbench calibrate``).

Collective time follows the alpha-beta (latency-bandwidth) model per algorithm (Thakur, Rabenseifner
& Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; bus bandwidth
factors of nccl-tests doc/PERFORMANCE.md): ring all-reduce 2(n-1) alpha + 2(n-1)/n S/B, all-gather and
reduce-scatter (n-1) alpha + (n-1)/n S/B, broadcast (binomial tree) ceil(log2 n) alpha + S/B, send alpha + S/B.
Rings are used inside and across nodes (NCCL's default ring algorithm): the latency of one collective grows
as (n-1) alpha, so at large n, where each rank's share of a bucket or unit shrinks, latency dominates.
"""

from __future__ import annotations

import copy
import json
import math
import socket
import tomllib
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from parbench.devices import DATASHEETS


@dataclass(frozen=True, kw_only=True)
class Link:
    """One level of the network, per GPU (rank) and direction."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if not (0 <= self.latency_s < math.inf and 0 < self.bandwidth_bytes_per_s < math.inf):
            raise ValueError(f"link latency_s={self.latency_s} must be >= 0 and bandwidth={self.bandwidth_bytes_per_s} > 0")


THREADED_FIELDS = ("peak_flops", "gemm_overhead_s", "op_overhead_s", "memory_bandwidth_bytes_per_s",
                   "stream_bandwidth_bytes_per_s", "cache_bytes", "beyond_cache_bandwidth_bytes_per_s",
                   "transcendental_s_per_element", "attention_efficiency")
"""The ``Cluster`` figures ``parbench calibrate`` measures again at each thread count (``Cluster.threaded``): the
probes of operators that torch spreads over its intra-op threads (a matmul; an add, split over the threads' cores
and their caches, above torch's grain of 32,768 elements; GELU, SiLU, the cross-entropy), and the flash attention
kernel's share of that thread count's GEMM peak, which it need not keep (a profile measured before it holds
none: the one-thread share applies)."""


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """A homogeneous cluster: nodes of ``gpus_per_node`` devices, a fast link inside, a slower one across."""

    name: str
    gpus_per_node: int
    peak_flops: float
    """Dense FLOP/s of one device at the training dtype (the MFU denominator)."""
    peak_flops_fp8: float = 0.0
    """Dense FP8 FLOP/s (0: the device has no FP8 tensor cores; ``--precision fp8`` is refused)."""
    peak_flops_tf32: float = 0.0
    """Dense FLOP/s of float32 matmuls on TF32 tensor cores (0: ``peak_flops``, as a CPU profile's one figure)."""
    peak_flops_fp32: float = 0.0
    """Dense FLOP/s of float32 matmuls on CUDA cores (0: ``peak_flops``)."""
    bf16: bool = True
    """Whether the tensor cores take bfloat16 (False: Volta, whose tensor cores take fp16 alone; ``--precision bf16``
    and ``amp`` are refused and the default precision is fp16)."""
    flash_attention: bool = True
    """Whether a fused (flash) attention kernel with a published rate runs on this device. False on Volta
    (FlashAttention needs Ampere or later): layouts default to eager attention and ``--attention flash`` is refused."""
    gemm_efficiency: float
    """Fraction of peak a large GEMM reaches; small GEMMs pay ``gemm_overhead_s`` on top."""
    fp8_gemm_share: float = 1.0
    """An FP8 GEMM's fraction of the FP8 peak, relative to ``gemm_efficiency`` (a BF16 GEMM's of the BF16 peak):
    an FP8 GEMM runs at ``peak_flops_fp8 x gemm_efficiency x fp8_gemm_share``. Below one where the same shape's
    fixed work (prologue, epilogue, operand traffic) weighs more at twice the math rate."""
    mxfp8_gemm_share: float = 0.0
    """An MXFP8 GEMM's rate relative to a per-tensor-scaled FP8 GEMM of the same shape (``Layout.fp8_scaling``
    ``mxfp8``): a block-scaled kernel also loads one E8M0 scale per 32 elements of each operand and applies it
    inside the tensor-core instruction, so it runs a little below the per-tensor kernel at equal FP8 peak.
    0: the device has no block-scaled FP8 instruction (Hopper, Ampere); ``--fp8-scaling mxfp8`` is refused."""
    attention_efficiency: float = 0.0
    """Fraction of the training dtype's peak a fused (flash) attention kernel reaches on the FLOPs it
    executes (causal: the lower triangle), forward and backward; 0 = ``gemm_efficiency``. Attention
    kernels keep softmax, masking and rescaling between their two matrix products, so they run below a
    plain GEMM: on an H100, FlashAttention-2 reaches 35% of peak where cuBLAS GEMMs reach 60-70%."""
    attention_kernels: dict[str, float] = field(default_factory=dict)
    """Fraction of peak of named flash kernels where a published kernel benchmark gives it (a layout's
    ``attention_kernel``); a kernel without a figure here runs at ``attention_efficiency``."""
    gemm_overhead_s: float
    """Fixed cost of one GEMM (launch, tile quantisation): t = overhead + flops / (peak x efficiency)."""
    op_overhead_s: float
    """Fixed cost of any other operator call (kernel launch, framework dispatch): the optimizer's ops."""
    autograd_op_overhead_s: float = 0.0
    """Fixed cost per operator on the training path (module call, autograd recording, backward node);
    0 = ``op_overhead_s`` (GPUs: launch-bound; CPUs: the framework's own cost dominates small models)."""
    backward_gemm_ratio: float = 1.0
    """Rate of a Linear's backward GEMMs (input and weight gradients) over its forward GEMM's. Their operands
    are the forward's transposed; a CPU BLAS runs those products slower (calibrated CPU profiles measure it:
    0.6-0.9 on this project's 2-core VM). 1.0 on GPU presets: cuBLAS takes a transpose as a layout flag, and
    their fitted GEMM efficiencies are forward + backward figures."""
    transcendental_s_per_element: float = 0.0
    """Seconds per element of an exp- or erf-based function (GELU, SiLU, the cross-entropy's softmax), forward
    + backward, beyond the memory traffic the elementwise term charges (``Unit.transcendental_elems_per_sample``).
    A CPU core evaluates them at 1-3 ns per element (calibrated profiles measure it). 0 on GPU presets: there
    these kernels are memory-bound, since the CUDA cores' float32 rate (H100 SXM datasheet: 67 TFLOP/s) leaves
    about 100 FLOPs per element at the rate HBM delivers bf16 elements (3.35 TB/s x 0.8 / 4 bytes read and
    written), where a GELU or an exp takes 10-30."""
    memory_bandwidth_bytes_per_s: float
    """Achievable memory bandwidth of memory-bound operators (elementwise, norms, optimizer)."""
    stream_bandwidth_bytes_per_s: float = 0.0
    """Bandwidth of traffic that streams every parameter, gradient and optimizer state once per step (the
    optimizer step, zero_grad, a float32 gradient pass): by then the backward pass has evicted them from
    the caches, so a CPU reads them from DRAM. 0 = ``memory_bandwidth_bytes_per_s`` (a GPU's HBM has no cache
    that would hold them). Calibrated CPU profiles measure it on arrays larger than the last-level cache:
    on this project's 2-core VM 20-22 GB/s, against 65-90 GB/s for operands of 1-12 MiB."""
    cache_bytes: int = 0
    """Operand bytes (inputs and output) of one elementwise op up to which a CPU core's caches hold them: an
    op on more moves its traffic at ``beyond_cache_bandwidth``, not ``memory_bandwidth_bytes_per_s``. 0 = one
    level (a GPU's elementwise kernels stream from HBM at any size). Calibrated CPU profiles find it where a
    float32 add's bandwidth falls off as its arrays grow (``calibrate.cache_capacity``); on this project's
    2-core VM with 2 MiB of L2 per core, 1.5 MiB (110 GB/s at 0.75 MiB, 87 at 1.5, 28-31 from 3 MiB up)."""
    beyond_cache_bandwidth_bytes_per_s: float = 0.0
    """Bandwidth of an elementwise op whose operands exceed ``cache_bytes``: the same add's, measured on the
    probe sizes past the fall. 0 = ``stream_bandwidth``."""
    weight_read_bandwidth_bytes_per_s: float = 0.0
    """Bandwidth at which a single-threaded CPU GEMM brings in its weight-sized operand, in series with its
    arithmetic: a Goto-style BLAS packs B into contiguous panels before its micro-kernel runs (Goto and van de
    Geijn, "Anatomy of High-Performance Matrix Multiplication", ACM TOMS 34(3), 2008, sec. 4), and in a training
    step the weight was last touched a whole pass earlier, so it comes from beyond the core's caches. The GEMM
    rate, fitted on square products, amortizes that over as many rows as the weight has columns; a Linear on a
    few rows does not. Each Linear pays its weight's bytes three times per micro-batch (the forward and the
    input gradient read it, the weight gradient writes a result of its size). 0 = no such term (a GPU streams
    its operands under the arithmetic: the roofline's max covers them). Calibrated CPU profiles measure it
    (``calibrate.measure_weight_read``: 3.5-10.7 GB/s on this project's 2-core VMs)."""
    memory_bytes: int
    """Device memory a process can use (as the driver reports it, not the marketing figure)."""
    context_bytes: int = 0
    """Fixed per-process device memory outside the caching allocator: the CUDA context, its kernels and
    library workspaces."""
    comm_buffer_bytes: int = 0
    """Device memory each communicator (process group) keeps for its transfer buffers."""
    fragmentation: float = 0.0
    """Reserved-but-unusable share of what the caching allocator holds (block rounding, split segments)."""
    intra: Link
    inter: Link
    multi_rail_rings: bool = True
    """Whether a ring that leaves the node runs one channel per local rank of its group, each through that rank's
    own NIC (NCCL's multi-rail rings on rail-optimised nodes), so the node's crossing carries ``rails`` x the
    per-GPU inter-node bandwidth (``collective_cost_s``); False where every ring crosses over one NIC pair, so a
    ring's crossing carries ``inter``'s bandwidth however many of its ranks share a node."""
    peer_link_bytes_per_s: float = 0.0
    """Where a node's GPUs are wired point to point, each pair by its own link (a full mesh: AMD Instinct's Infinity
    Fabric, a four-GPU V100 SXM2 board), that link's bandwidth per direction as derated: a collective over k of the
    node's GPUs moves a GPU's bytes over its k - 1 links to the others (NCCL and RCCL lay one ring per link
    pattern), (k - 1) x this, at most ``intra`` (``intra_bandwidth_bytes_per_s``). 0: a switch (NVSwitch, NVL72),
    which gives every group of the node the whole of ``intra``."""
    overlap: float = 1.0
    """Fraction of backward compute that data-parallel gradient communication can hide under."""
    overlap_interference: float = 0.0
    """Fraction of a collective's hidden seconds it still adds by slowing the compute it overlaps
    (``parbench.sim.overlap.contended_s``; not tensor-parallel overlap)."""
    rank_spread: float = 0.0
    """Relative standard deviation of one device's compute speed across the devices of a cluster (same SKU: they
    differ by manufacture, power management and cooling). A persistent difference, so every synchronous step
    waits for the slowest of its ranks (``parbench.sim.timing.slowest_of``); 0 = identical devices."""
    cores: int = 0
    """CPU profiles: cores shared by all ranks (compute slows by ranks/cores beyond it); 0 = one device per rank."""
    step_scale: float = 1.0
    """Calibrated CPU profiles: a measured reference training step (the runner's own workloads, one
    process) / the op-level prediction of it; multiplies every compute term (1 = trust the op model)."""
    optimizer_op_overhead_s: float = 0.0
    """Fixed cost of one operator of an eager optimizer step or zero_grad (Python loop over the tensors,
    dispatch, launch); 0 = ``op_overhead_s``. Calibrated CPU profiles measure it on a real step."""
    tp_linear_overhead_s: float = 0.0
    """Host seconds torch's DTensor tensor parallelism adds to one parallelised Linear's forward + backward
    (``parbench.sim.framework``; 0 on GPUs, where the host runs ahead of the device)."""
    ddp_param_overhead_s: float = 0.0
    """Host seconds torch's DDP adds per parameter tensor and micro-batch (its reducer's autograd hook, the
    gradient's view into its bucket) (``parbench.sim.framework``; 0 on GPUs)."""
    ddp_byte_overhead_s: float = 0.0
    """Host seconds torch's DDP adds per gradient byte and micro-batch (copying the gradients into their
    buckets and the reduced buckets back)."""
    tp_byte_overhead_s: float = 0.0
    """Host seconds torch's tensor parallelism adds per byte of the activations (and their gradients) its
    functional all-reduces carry, beyond the per-Linear cost (``parbench.sim.framework``; 0 on GPUs)."""
    fsdp_unit_overhead_s: float = 0.0
    """Host seconds FSDP2's hooks add per ``fully_shard`` unit and micro-batch (forward + backward)."""
    fsdp_param_overhead_s: float = 0.0
    """Host seconds FSDP2 adds per parameter tensor of a unit and micro-batch (forward + backward)."""
    fsdp_byte_overhead_s: float = 0.0
    """Host seconds FSDP2 adds per byte of gathered parameters and micro-batch (forward + backward): its
    copies into and out of the flat all-gather and reduce-scatter buffers (``parbench.sim.framework``)."""
    dtensor_op_overhead_s: float = 0.0
    """Host seconds an optimizer operator on a DTensor parameter costs beyond one on a plain tensor."""
    pipeline_action_overhead_s: float = 0.0
    """Host seconds torch.distributed.pipelining's schedule adds per micro-batch and stage (its forward and
    backward actions: splitting the batch, the stage's input and output bookkeeping, the per-micro-batch
    loss), beyond the same micro-batches run in a plain loop."""
    moe_expert_fixed_s: float = 0.0
    """Seconds per expert a rank holds, per MoE block and micro-batch (forward + backward), beyond the experts'
    GEMM FLOPs: the per-expert kernels of a grouped expert MLP (its GEMMs' launches, the inputs' quantisation,
    the token chunks sorted to and from expert order), which the device runs right after the dispatcher's
    host synchronisation, so not hidden under its queue (``parbench.sim.timing.moe_expert_fixed_s``)."""
    tracing_op_overhead_s: float = 0.0
    """Seconds the step-time breakdown's tracing adds to each operator on the training path of a traced step
    (torch.profiler recording it, the comm meter's dispatch mode intercepting it; ``parbench.metrics.tracing``).
    Calibrated CPU profiles measure it on their reference steps (``parbench.sim.calibrate.measure_tracing``).
    Only the prediction of a traced step uses it (``Cluster.traced``), never a step time: the timed steps run
    untraced."""
    tracing_optimizer_op_overhead_s: float = 0.0
    """As ``tracing_op_overhead_s``, for each operator of the optimizer step and zero_grad."""
    tracing_between_op_s: float = 0.0
    """Of a traced step's seconds per training-path operator, those between operators (the Python that calls
    them, the tracer's own bookkeeping), where the breakdown finds no operator running: its ``other``.
    Calibrated CPU profiles measure it on their reference steps; ``Cluster.traced`` sets ``between_op_s`` to it."""
    between_op_s: float = 0.0
    """Seconds per training-path operator that the step spends between operators; predicted as ``other``, taken
    out of compute (whose per-operator costs include it). 0 = all in compute (an untraced prediction)."""
    tracing_work_share: float = 0.0
    """The share by which tracing slows the training operators' own work, beyond ``tracing_op_overhead_s`` per
    operator (torch.profiler alone added 6-10 ms to a 72 ms mlp step of 64 operators on this project's 2-core VM).
    Calibrated CPU profiles measure it with a large step (``parbench.sim.calibrate.fit_tracing``);
    ``Cluster.traced`` sets ``work_scale`` to 1 + it."""
    work_scale: float = 1.0
    """What the training path's compute is multiplied by: 1 + ``tracing_work_share`` in a traced prediction, 1
    otherwise."""
    tracing_fsdp_scale: float = 1.0
    """FSDP2's host cost per micro-batch in a traced step over its cost untraced (its hooks' operators traced too):
    ``Cluster.traced`` multiplies ``fsdp_unit_overhead_s``, ``fsdp_param_overhead_s`` and ``fsdp_byte_overhead_s``
    by it. Calibrated CPU profiles measure it on the framework probes (``parbench.sim.calibrate.framework_rank``)."""
    tracing_tp_scale: float = 1.0
    """As ``tracing_fsdp_scale``, for torch's tensor parallelism (``tp_linear_overhead_s``, ``tp_byte_overhead_s``)."""
    tracing_fsdp_between_share: float = 0.0
    """Of FSDP2's host cost in a traced step, the share spent between operators (its hooks' Python), where the
    breakdown finds no operator running: its ``other``. ``Cluster.traced`` sets ``fsdp_between_share`` to it."""
    tracing_tp_between_share: float = 0.0
    """As ``tracing_fsdp_between_share``, for torch's tensor parallelism (DTensor's dispatch in Python)."""
    fsdp_between_share: float = 0.0
    """Of FSDP2's host cost, the share predicted as ``other`` rather than compute. 0 = all in compute (an
    untraced prediction)."""
    tp_between_share: float = 0.0
    """As ``fsdp_between_share``, for torch's tensor parallelism."""
    compute_slowdown: dict[int, float] = field(default_factory=dict)
    """Calibrated CPU profiles: per-rank compute time with n ranks computing at once / alone (n -> factor):
    cores shared with each other, with the calibration's own collectives threads and with other jobs."""
    threaded: dict[int, dict[str, float]] = field(default_factory=dict)
    """Calibrated CPU profiles: the operator rates one process measured with t intra-op threads, by t (2 up to
    ``cores``): each ``THREADED_FIELDS`` figure as it reads at t threads. The fields themselves are one thread's;
    ``with_threads`` gives the cluster a rank of t threads computes on."""
    threads: int = 1
    """Intra-op threads per rank the rates are for (``with_threads`` sets it, ``oversubscription`` counts it)."""
    collectives: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)
    """Calibrated fits: kind -> group size -> (alpha_s, seconds per payload byte), used where present."""
    collective_base_latency_s: float = 0.0
    """Fixed seconds of one collective (all-reduce, all-gather, reduce-scatter, broadcast) beyond its ring steps'
    latencies: NCCL's base latency of its ring algorithm (``collective_latency_s``). Point-to-point sends and
    all-to-alls (grouped sends) do not pay it."""
    multinode_all_reduce_latency_factor: float = 1.0
    """A ring all-reduce across nodes takes this times its modelled latency: NCCL's "plateau effect of ring",
    1.4 on Ampere and later for all but the smallest buffers (``ncclTopoGetAlgoTime`` in NCCL's
    ``src/graph/tuning.cc``; 1.9 before Ampere). 1 where the collectives are not NCCL's."""
    collective_step_overhead_s: dict[int, float] = field(default_factory=dict)
    """Calibrated CPU profiles: seconds a group collective costs inside a training step beyond its fit in
    ``collectives`` (group size -> seconds, added to every fitted collective but point-to-point sends and the
    back-to-back bursts of ZeRO-1's broadcasts, which ``burst_step_overhead_s`` covers), from a
    real FSDP2 step on that many ranks against its prediction (``parbench.sim.calibrate.fit_collective_step_overhead``).
    On this project's 2-core VM the check's two-rank FSDP2 mlp took 36-43 ms a step: its 12 collectives back to
    back 20-24 ms, the same step on torch's fake group 9.7 ms, so about 0.6 ms a collective appears only when
    the group is real and the collectives sit inside a step."""
    burst_step_overhead_s: dict[int, float] = field(default_factory=dict)
    """As ``collective_step_overhead_s``, for each broadcast of ZeRO-1's back-to-back burst (its fit in
    ``collectives`` is timed back to back, outside a step), from a real ZeRO-1 run of the calibration's
    transformer probe."""
    tp_step_overhead_s: dict[int, float] = field(default_factory=dict)
    """As ``collective_step_overhead_s``, for each of tensor parallelism's blocking all-reduces (DTensor's
    functional collectives, waited on before the next GEMM), from a real tensor-parallel run of the calibration's
    transformer probe; where not calibrated they take ``collective_step_overhead_s``. On this project's 2-core VM the
    simulator check's two-rank decoder ran its step in 137-144 ms on torch's fake process group (its collectives
    returning at once) and in 212-218 ms on gloo: 3.0 ms for each of its 24 all-reduces of 1 MiB, where their fit
    gives 2.06 ms and the FSDP2 probe's in-step cost 0.36 ms more."""
    tp_step_compute_share: dict[int, float] = field(default_factory=dict)
    """Group size -> of ``tp_step_overhead_s`` there, the share the rank spends working on its own thread
    (around each functional all-reduce: DTensor's redistribution, the collective's copies, gloo's thread taking
    a core), which the step-time breakdown books as compute; the rest is waiting, exposed intermediate
    communication. From the
    calibration's tensor-parallel probe: how much of the overhead its comm meter measured as waiting
    (``parbench.sim.calibrate.fit_tp_compute_share``). The step's total does not change with it (the all-reduces
    block), only which term holds the seconds."""
    fsdp_step_byte_overhead_s: dict[int, float] = field(default_factory=dict)
    """Seconds per full-buffer byte an FSDP2 all-gather or reduce-scatter costs inside a step beyond its fit and
    ``collective_step_overhead_s`` (group size -> seconds per byte), fitted on a real FSDP2 run of the wide mlp
    probe (``parbench.sim.calibrate.FSDP_WIDE_PROBE``, 14x the narrow probe's bytes) after the per-op term on the
    narrow one. FSDP2 gathers into a freshly allocated buffer each call and its large all-gathers ran up to twice
    their fit inside a step on this project's 2-core VM (3.2 MB sent: 7.9-9.8 ms against 4.6)."""
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def training_op_overhead_s(self) -> float:
        return self.autograd_op_overhead_s or self.op_overhead_s

    @property
    def default_attention(self) -> str:
        """The attention a layout on this cluster runs unless told: flash on GPU clusters (one device per rank) that
        have a flash kernel, eager on Volta and on calibrated CPU profiles (the runner's own transformer)."""
        return "eager" if self.cores or not self.flash_attention else "flash"

    @property
    def stream_bandwidth(self) -> float:
        return self.stream_bandwidth_bytes_per_s or self.memory_bandwidth_bytes_per_s

    def elementwise_bandwidth(self, operand_bytes: float) -> float:
        """Bytes per second of an elementwise op whose inputs and output take ``operand_bytes``."""
        if self.cache_bytes and operand_bytes > self.cache_bytes:
            return self.beyond_cache_bandwidth_bytes_per_s or self.stream_bandwidth
        return self.memory_bandwidth_bytes_per_s

    @property
    def optimizer_op_s(self) -> float:
        return self.optimizer_op_overhead_s or self.op_overhead_s

    def with_threads(self, threads: int) -> Cluster:
        """This CPU profile as a rank with ``threads`` intra-op threads computes on it: GEMM rate and overhead,
        an op's fixed cost, memory and cache bandwidths and the exp/erf cost as measured at that many threads
        (``threaded``); what was not measured per thread count (framework costs, collectives, the step scale)
        stays one thread's. ValueError where that many threads were not measured."""
        if threads == self.threads:
            return self
        if self.threads != 1 or (threads != 1 and threads not in self.threaded):
            raise ValueError(f"{self.name} measured its rates at {self.measured_threads()} threads per rank, not {threads}")
        rates = self.threaded.get(threads, {})
        return replace(self, **{k: int(v) if k == "cache_bytes" else v for k, v in rates.items()}, threads=threads)

    def measured_threads(self) -> str:
        """The thread counts this profile's rates were measured at, as a phrase: "1", "1 or 2"."""
        counts = [str(t) for t in sorted({1, *self.threaded})]
        return counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} or {counts[-1]}"

    def traced(self) -> Cluster:
        """This machine as a traced step sees it: every operator costs its tracing overhead more, the operators'
        own work its traced share more, FSDP2's and tensor parallelism's host work its traced multiple, and part
        of each goes between operators. The measured step-time terms come from traced steps, so they are
        compared with this profile's prediction."""
        fsdp, tp = self.tracing_fsdp_scale, self.tracing_tp_scale
        return replace(self, autograd_op_overhead_s=self.training_op_overhead_s + self.tracing_op_overhead_s,
                       optimizer_op_overhead_s=self.optimizer_op_s + self.tracing_optimizer_op_overhead_s,
                       between_op_s=self.tracing_between_op_s, work_scale=1 + self.tracing_work_share,
                       fsdp_unit_overhead_s=self.fsdp_unit_overhead_s * fsdp,
                       fsdp_param_overhead_s=self.fsdp_param_overhead_s * fsdp,
                       fsdp_byte_overhead_s=self.fsdp_byte_overhead_s * fsdp,
                       tp_linear_overhead_s=self.tp_linear_overhead_s * tp, tp_byte_overhead_s=self.tp_byte_overhead_s * tp,
                       fsdp_between_share=self.tracing_fsdp_between_share, tp_between_share=self.tracing_tp_between_share)

    @property
    def host_runs_ahead(self) -> bool:
        """A GPU (no ``cores``): the host enqueues kernels and runs ahead of the device, so a stream of
        operators costs the larger of its launches and its kernels, not their sum. A CPU profile computes on
        the thread that dispatches."""
        return self.cores == 0

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node={self.gpus_per_node} must be >= 1")
        if not 0 < self.gemm_efficiency <= 1:
            raise ValueError(f"gemm_efficiency={self.gemm_efficiency} must be in (0, 1]")
        if not 0 <= self.attention_efficiency <= 1:
            raise ValueError(f"attention_efficiency={self.attention_efficiency} must be in [0, 1] (0: the GEMM efficiency)")
        if any(not 0 < e <= 1 for e in self.attention_kernels.values()):
            raise ValueError(f"attention_kernels={self.attention_kernels} must map kernel names to (0, 1]")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"overlap={self.overlap} must be in [0, 1]")
        if not 0 <= self.overlap_interference <= 1:
            raise ValueError(f"overlap_interference={self.overlap_interference} must be in [0, 1]")
        if not 0 <= self.rank_spread < 0.2:
            raise ValueError(f"rank_spread={self.rank_spread} must be in [0, 0.2) (a relative standard deviation)")
        if self.peak_flops <= 0 or self.memory_bandwidth_bytes_per_s <= 0 or self.memory_bytes <= 0:
            raise ValueError("peak_flops, memory_bandwidth_bytes_per_s and memory_bytes must be > 0")
        if min(self.peak_flops_fp8, self.peak_flops_tf32, self.peak_flops_fp32, self.context_bytes, self.comm_buffer_bytes) < 0:
            raise ValueError("peak_flops_fp8, peak_flops_tf32, peak_flops_fp32, context_bytes and comm_buffer_bytes must be >= 0")
        overheads = ("optimizer_op_overhead_s", "tp_linear_overhead_s", "tp_byte_overhead_s", "fsdp_unit_overhead_s",
                     "fsdp_param_overhead_s", "dtensor_op_overhead_s", "pipeline_action_overhead_s",
                     "ddp_param_overhead_s", "ddp_byte_overhead_s", "fsdp_byte_overhead_s", "moe_expert_fixed_s")
        if any(getattr(self, k) < 0 for k in overheads):
            raise ValueError(f"{', '.join(overheads)} must be >= 0")
        if not 0 <= self.tracing_work_share < 1 or self.work_scale < 1:
            raise ValueError(f"tracing_work_share={self.tracing_work_share} must be in [0, 1) and work_scale="
                             f"{self.work_scale} >= 1")
        if min(self.tracing_fsdp_scale, self.tracing_tp_scale) < 1:
            raise ValueError(f"tracing_fsdp_scale={self.tracing_fsdp_scale} and tracing_tp_scale={self.tracing_tp_scale} "
                             "must be >= 1 (tracing adds work, never removes it)")
        if any(not 0 <= v <= 1 for v in self.tp_step_compute_share.values()):
            raise ValueError(f"tp_step_compute_share={self.tp_step_compute_share} must map group sizes to shares in [0, 1]")
        shares = ("tracing_fsdp_between_share", "tracing_tp_between_share", "fsdp_between_share", "tp_between_share")
        if any(not 0 <= getattr(self, k) <= 1 for k in shares):
            raise ValueError(f"{', '.join(shares)} must be in [0, 1]")
        if not 0 < self.fp8_gemm_share <= 1:
            raise ValueError(f"fp8_gemm_share={self.fp8_gemm_share} must be in (0, 1]")
        if not 0 <= self.mxfp8_gemm_share <= 1:
            raise ValueError(f"mxfp8_gemm_share={self.mxfp8_gemm_share} must be in [0, 1] (0: no MXFP8 GEMMs)")
        if not 0 < self.backward_gemm_ratio <= 2:
            raise ValueError(f"backward_gemm_ratio={self.backward_gemm_ratio} must be in (0, 2]")
        if self.cache_bytes < 0 or self.beyond_cache_bandwidth_bytes_per_s < 0:
            raise ValueError(f"cache_bytes={self.cache_bytes} and beyond_cache_bandwidth_bytes_per_s="
                             f"{self.beyond_cache_bandwidth_bytes_per_s} must be >= 0 (0: one level)")
        if self.weight_read_bandwidth_bytes_per_s < 0:
            raise ValueError(f"weight_read_bandwidth_bytes_per_s={self.weight_read_bandwidth_bytes_per_s} must be >= 0 "
                             "(0: no such term)")
        if self.transcendental_s_per_element < 0:
            raise ValueError(f"transcendental_s_per_element={self.transcendental_s_per_element} must be >= 0")
        if not 0 <= self.fragmentation < 1:
            raise ValueError(f"fragmentation={self.fragmentation} must be in [0, 1)")
        for t, rates in self.threaded.items():
            if (t < 2 or set(rates) - set(THREADED_FIELDS) or any(not (math.isfinite(v) and v >= 0) for v in rates.values())
                    or not all(rates.get(k, 1) > 0 for k in ("peak_flops", "memory_bandwidth_bytes_per_s"))):
                raise ValueError(f"threaded[{t}]={rates} must map a thread count >= 2 to finite figures >= 0 among "
                                 f"{', '.join(THREADED_FIELDS)} (peak_flops and memory_bandwidth_bytes_per_s > 0)")
        if self.threads < 1:
            raise ValueError(f"threads={self.threads} must be >= 1")
        # every other figure is a rate, a time, a share or a factor (nan passes each comparison above)
        numbers = [(f.name, getattr(self, f.name)) for f in fields(self) if f.type == "float"]
        numbers += [(f"{f.name}[{n}]", v) for f in fields(self) if f.type == "dict[int, float]"
                    for n, v in getattr(self, f.name).items()]
        numbers += [(f"attention_kernels[{k!r}]", v) for k, v in self.attention_kernels.items()]
        numbers += [(f"collectives[{k!r}][{n}]", x) for k, by_n in self.collectives.items() for n, pair in by_n.items()
                    for x in pair]
        for name, v in numbers:
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}={v} must be a finite number >= 0")

    def attention_efficiency_for(self, kernel: str = "") -> float:
        """The flash attention kernel's fraction of peak: the named kernel's figure, else the device default."""
        return self.attention_kernels.get(kernel, 0.0) or self.attention_efficiency

    def mfu_peak_flops(self, gemm_dtype: str = "") -> float:
        """MFU's denominator: the training dtype's peak; a float32 run's TF32 or FP32 peak, as the runner's MFU
        takes it (``parbench.devices.peak_basis``); FP8 runs keep the bf16 peak, as torchtitan reports them."""
        return self.peak_flops if gemm_dtype == "fp8" else self.gemm_peak_flops(gemm_dtype)

    def gemm_peak_flops(self, gemm_dtype: str = "") -> float:
        """The peak a matrix multiply runs at: FP8 where asked; a float32 run's TF32 or CUDA-core peak where the
        cluster states it; else the training dtype's."""
        if gemm_dtype == "fp8":
            return self.peak_flops_fp8
        return {"tf32": self.peak_flops_tf32, "fp32": self.peak_flops_fp32}.get(gemm_dtype) or self.peak_flops


# Algorithm factors: (latency steps, bandwidth factor on the payload S) per collective, n ranks.
def algorithm_factors(kind: str, n: int) -> tuple[float, float]:
    """nccl-tests PERFORMANCE.md bus-bandwidth factors; ring steps for latency, binomial tree for broadcast."""
    if n <= 1:
        return 0.0, 0.0
    if kind == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "scatter", "all_to_all"):
        return float(n - 1), (n - 1) / n
    if kind == "broadcast":
        return float(math.ceil(math.log2(n))), 1.0
    return 1.0, 1.0  # send (recv costs the sender's time)


BURST_SUFFIX = "_burst"
"""A calibrated profile's ``collectives`` key for a kind timed in bursts (``"broadcast" + BURST_SUFFIX``): ops
issued back to back, no compute between, waited together. The kind's own fit times each op after a burst of
compute, as most of a step's collectives come; an op in a burst costs less (figures: ``comm._zero1_broadcasts``).
Where a profile has no burst fit (every GPU preset) a burst op costs what the kind's fit or formula says."""


def collective_time_s(cluster: Cluster, kind: str, payload: int, n: int, *, inter_node: bool, rails: int = 1,
                      burst: bool = False, tp: bool = False, fsdp: bool = False) -> float:
    """Seconds for one collective of full-buffer ``payload`` bytes over ``n`` ranks: ``collective_cost_s``'s fixed
    seconds plus its seconds per byte times the payload."""
    if n <= 1 or (payload <= 0 and kind != "barrier"):
        return 0.0
    fixed, per_byte = collective_cost_s(cluster, kind, n, inter_node=inter_node, rails=rails, burst=burst, tp=tp,
                                        fsdp=fsdp)
    return fixed + per_byte * payload


def collective_cost_s(cluster: Cluster, kind: str, n: int, *, inter_node: bool, rails: int = 1, burst: bool = False,
                      tp: bool = False, fsdp: bool = False) -> tuple[float, float]:
    """One collective over ``n`` ranks as (fixed seconds, seconds per full-buffer byte): its latencies and fixed
    costs, which no message size changes, and its bytes over a bandwidth. ``rails``: the group's ranks per node.
    A ring that leaves the node visits its local ranks over the intra-node link first and runs one channel per
    local rank, each through that rank's own NIC (NCCL's multi-rail rings), so the node's crossing carries the
    group's traffic at ``rails`` x the per-GPU inter-node bandwidth, capped by the intra-node link (nccl-tests on
    rail-optimised DGX nodes report all-reduce bus bandwidth close to the node's total NIC bandwidth; a group
    with one rank per node gets that rank's NIC alone). An all-to-all across nodes is no ring: a rank's parts
    for the ``n - rails`` ranks elsewhere leave through its own NIC while the ``rails - 1`` parts for its node's
    ranks cross the node's link."""
    if n <= 1:
        return 0.0, 0.0
    fitted = (burst and _fitted(cluster, kind + BURST_SUFFIX, n)) or _fitted(cluster, kind, n)
    if fitted is not None:
        alpha, beta = fitted
        per_byte = _nearest(cluster.fsdp_step_byte_overhead_s, n) if fsdp else 0.0
        overhead = 0.0 if kind == "send" else step_overhead_s(cluster, n, burst=burst, tp=tp)
        return alpha + overhead - (tp_host_s(cluster, kind, n) if tp else 0.0), beta + per_byte
    link = cluster.inter if inter_node else cluster.intra
    bandwidth = link.bandwidth_bytes_per_s if inter_node else intra_bandwidth_bytes_per_s(cluster, n)
    if kind == "all_to_all" and inter_node:
        # each rank sends an n-th of its buffer to every rank at once: the parts for other nodes through its own
        # NIC, the rest over the node's link, side by side; no ring, so no rail aggregates another rank's traffic
        local = max(1, min(rails, n))
        return (n - 1) * link.latency_s, max((n - local) / n / bandwidth,
                                             (local - 1) / n / intra_bandwidth_bytes_per_s(cluster, local))
    if inter_node and rails > 1 and cluster.multi_rail_rings:
        bandwidth = min(bandwidth * rails, max(intra_bandwidth_bytes_per_s(cluster, rails), bandwidth))
    factor = algorithm_factors(kind, n)[1]
    return collective_latency_s(cluster, kind, n, inter_node=inter_node, rails=rails), factor / bandwidth


def intra_bandwidth_bytes_per_s(cluster: Cluster, ranks: int) -> float:
    """The bandwidth per direction a collective over ``ranks`` GPUs of one node gets from each: the whole of
    ``Cluster.intra`` behind a switch; on a point-to-point mesh (``Cluster.peer_link_bytes_per_s``) the links to the
    ``ranks - 1`` others, so a pair of MI300X moves over one 64 GB/s Infinity Fabric link what eight move over seven."""
    if not cluster.peer_link_bytes_per_s:
        return cluster.intra.bandwidth_bytes_per_s
    return min(cluster.intra.bandwidth_bytes_per_s, max(1, ranks - 1) * cluster.peer_link_bytes_per_s)


RING_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
"""The kinds NCCL runs as collectives, each paying ``Cluster.collective_base_latency_s``; the rest (sends,
receives, all-to-alls, scatters and gathers) are grouped point-to-point sends in NCCL."""


def collective_latency_s(cluster: Cluster, kind: str, n: int, *, inter_node: bool, rails: int = 1) -> float:
    """The latency part of one collective over ``n`` ranks, ``rails`` of them on each node, as NCCL's tuning model
    charges its ring (``ncclTopoTuneModel``, ``src/graph/tuning.cc``): a base latency per collective
    (``Cluster.collective_base_latency_s``), then one latency per ring step, at the network's for the steps that
    cross a node and at the node's link for the rest. A ring over ``nodes`` nodes crosses them nodes - 1 times
    in an all-gather or reduce-scatter and 2 x nodes times in an all-reduce (NCCL's ``nInterSteps``, at most its
    2 (n - 1) steps); a multi-node all-reduce then takes ``Cluster.multinode_all_reduce_latency_factor`` x that. Kinds outside
    ``RING_COLLECTIVES`` are point-to-point: one latency per peer or step, no base. A broadcast is a binomial
    tree: ceil(log2 n) steps."""
    if n <= 1:
        return 0.0
    link = cluster.inter if inter_node else cluster.intra
    steps = algorithm_factors(kind, n)[0]
    if kind not in RING_COLLECTIVES:
        return steps * link.latency_s
    latency = cluster.collective_base_latency_s + steps * link.latency_s
    if inter_node and kind in ("all_reduce", "all_gather", "reduce_scatter"):
        nodes = -(-n // max(1, min(rails, n)))
        crossings = min(steps, 2 * nodes if kind == "all_reduce" else nodes - 1)
        latency = (cluster.collective_base_latency_s + crossings * cluster.inter.latency_s
                   + (steps - crossings) * cluster.intra.latency_s)
        if kind == "all_reduce":
            latency *= cluster.multinode_all_reduce_latency_factor
    return latency


def step_overhead_s(cluster: Cluster, n: int, *, burst: bool = False, tp: bool = False) -> float:
    """``Cluster.collective_step_overhead_s`` (``burst_step_overhead_s`` for a burst's op, ``tp_step_overhead_s``
    where calibrated for a tensor-parallel op) at group size n, else at the nearest calibrated size; 0 without it."""
    return _nearest(cluster.burst_step_overhead_s if burst else
                    cluster.tp_step_overhead_s if tp and cluster.tp_step_overhead_s else cluster.collective_step_overhead_s, n)


def tp_host_s(cluster: Cluster, kind: str, n: int) -> float:
    """Seconds of one tensor-parallel collective's in-step overhead that the rank computes
    (``Cluster.tp_step_compute_share`` of ``tp_step_overhead_s`` at n): ``parbench.sim.predict`` adds them to
    the micro-batch's compute, ``collective_cost_s`` leaves them out of the collective. 0 where the collective
    has no calibrated fit or the overhead is not tensor parallelism's own."""
    if not cluster.tp_step_compute_share or not cluster.tp_step_overhead_s or kind == "send" or _fitted(cluster, kind, n) is None:
        return 0.0
    return _nearest(cluster.tp_step_overhead_s, n) * _nearest(cluster.tp_step_compute_share, n)


def _nearest(by_n: dict[int, float], n: int) -> float:
    """A calibrated per-group-size value at n, else at the nearest calibrated size; 0 where none is."""
    return by_n[min(by_n, key=lambda k: (abs(k - n), k))] if by_n else 0.0


def _fitted(cluster: Cluster, kind: str, n: int) -> tuple[float, float] | None:
    """The calibrated (alpha, beta) at n, else rescaled from the nearest calibrated group size."""
    fits = cluster.collectives.get(kind)
    if not fits:
        return None
    if n in fits:
        return fits[n]
    m = min(fits, key=lambda k: abs(k - n))
    (a, b), (s_m, f_m), (s_n, f_n) = fits[m], algorithm_factors(kind, m), algorithm_factors(kind, n)
    return a * s_n / s_m, b * f_n / f_m


# --- presets --------------------------------------------------------------------------------------

GIB = 2**30
MIB = 2**20
# NCCL's latency model of its ring with the Simple protocol, the one that carries large buffers
# (``baseLat`` and ``hwLat`` in ``src/graph/tuning.cc``, NCCL 2.2x): every GPU preset's links take these.
RING_BASE_S = 8.4e-6
NVLINK_STEP_S = 3.4e-6
NET_STEP_S = 14e-6
RING_PLATEAU = 1.4
LATENCY_SOURCE = ("NCCL's tuning model (src/graph/tuning.cc, NCCL 2.2x: baseLat and hwLat of Ring/Simple): 8.4 us a "
                  "collective, 3.4 us a ring step over NVLink, 14 us a step across the network; a multi-node ring "
                  "all-reduce 1.4x (its 'plateau effect of ring'). NCCL's model picks its algorithm and protocol with "
                  "these; the simulator runs every collective as a Simple-protocol ring, as large buffers go")
# Fixed memory terms shared by every GPU preset (physical, not per model):
GPU_MEMORY_SOURCES = {
    "overlap_interference": "0.65: over every published dense row (173, each source and device, the held-out Nemotron-4 "
                            "15B and BLOOM rows left out) the best of a 0.05 grid "
                            "(parbench.sim.efficiency_fits.fit_overlap_interference), with the device spread, the H100's and "
                            "the A100's efficiencies fitted at it and it at them (a fixed point): 4.560% mean |error| against "
                            "4.576% / 4.580% at 0.6 / 0.7 and 4.903% at 0.4; the rows pin it loosely. It was 0.6 until "
                            "Megatron-Core's interleaved schedule synced each model chunk's gradients and parameters on its "
                            "own (overlap.chunked_gradient_exposed_s), which hides more of that traffic; 0.7 until pipeline "
                            "tensors went in tensor-parallel slices (Layout.pp_scatter_gather) and SC21 Table 1 refitted "
                            "the A100's GEMM efficiency from 0.70 to 0.68; 0.65 until Megatron-Core's gradient buckets "
                            "(Layout.megatron_grad_buckets), 0.6 until the optimizer step counted its mixed-precision "
                            "passes (timing.optimizer_pass_bytes_per_element); 0.5, fitted to llm-foundry's "
                            "19 FSDP rows with the H100's earlier pair, while the collectives' latencies were assumed. "
                            "Held out, Korthikanti et al.'s rows read 4.0% at 0.65, torchtitan's A100 rows 1.7% (1.5% at 0.6). "
                            "Contention as the limiter of overlap: arXiv 2512.10236, abstract",
    "memory_bytes": "usable device memory as nvidia-smi/NVML reports it: A100 80GB 81,920 MiB, H100 80GB 81,559 MiB, "
                    "H200 143,771 MiB (thundergolfer.com/blog/nvidia-gpu-memory-capacity, table)",
    "context_bytes": "CUDA context of a PyTorch process before any tensor: 723 MiB measured "
                     "(discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-memory-floor/73021; "
                     "~700+ MB in /t/high-gpu-memory-overhead/81330)",
    "comm_buffer_bytes": "NCCL_BUFFSIZE default 4 MiB per channel and direction (NCCL environment-variable docs) "
                         "x 2 directions x 16 channels (assumed) = 128 MiB per communicator",
    "fragmentation": "caching-allocator reserve beyond what tensors use, as a share of what a step allocates and frees "
                     "(activations, gathered parameters, loss buffers, buckets; weights, gradients and optimizer state "
                     "are allocated once): 0.13, fitted to torchtitan's reserved-memory figures (docs/performance.md, "
                     "H100 Tables 1-6, 18 rows): mean |error| 5.6% at 0.06, 3.6% at 0.11, 3.4% at 0.13, and at 0.14 "
                     "(3.35%) a published run that trained (llm-foundry's MPT-1B at 32K tokens on 8 H100) would no "
                     "longer fit. Measured on one H200 (the 1.3B GPT at batch 1, 4, 8): reserved less allocated peak "
                     "0.93, 1.22, 2.04 GB; this rule gives 0.58, 2.34, 4.68, a share of all the allocator holds 3.0, 4.4, 6.2",
    "backward_gemm_ratio": "1.0: cuBLAS takes a transposed operand as a layout flag (cublasGemmEx's transa/transb), and "
                           "the fitted gemm_efficiency is a forward + backward figure",
    "moe_expert_fixed_s": "370 us per expert a rank holds, per MoE block and micro-batch: fitted "
                          "(parbench.sim.efficiency_fits.fit_moe_expert_fixed_s, a 10 us grid) to Megatron-Bridge's "
                          "Qwen3-30B-A3B on 8 B200 (4096 tokens per micro-batch) and on 8 GB200 (16384), FP8, 16 experts "
                          "a rank: +199% and +47% without it (a cost per micro-batch, not per token, closes most of both), "
                          "+0.5% and -9.3% with it (the H100's efficiencies as fitted on every H100 source; 380 us with "
                          "the earlier pair, before NCCL's latencies and until the step waited for its slowest device). "
                          "Held out: Qwen3-235B-A22B on 64 B200 +80% -> +0.1%, on 256 GB200 (BF16, 4 experts a rank) "
                          "+7% -> -8.8%; the Megatron-LM Mixtral row (1 expert a rank) 5.2% -> 7.0%; Qwen3-30B-A3B on 16 "
                          "H100 (FP8 current scaling) +140% -> +65%, not explained",
    "rank_spread": "0.016: the spread of one device's speed across a cluster's devices, fitted on a 0.002 grid "
                   "from 0 to 0.024 (parbench.sim.efficiency_fits.rank_spread_errors) over the rows the overlap "
                   "interference is fitted on (173 dense rows, the held-out sources left out), the A100's and the "
                   "H100's efficiencies refitted at each point (a spread trades with them): 4.560% mean |error|, "
                   "4.577% / 4.566% at 0.014 / 0.018, 4.820% at 0. The rows pin it loosely: 0.02 reads 4.559%, "
                   "0.001 points lower, so fit_rank_spread now returns 0.02 (0.016 was the lower by as much before "
                   "Megatron-Core's chunks synced one by one); moving there would take the GEMM efficiencies to 0.73 "
                   "/ 0.69 for a difference the rows do not resolve, so the spread stays. "
                   "Persistent: Sinha et al., \"Not All GPUs Are Created Equal\" (SC22, arXiv 2208.11035, abstract) "
                   "measure an 8% (max 22%) average performance variation between the GPUs of one SKU in one "
                   "cluster (power management and manufacture), outliers 1.5x slower than the median. A step waits "
                   "for its slowest rank: 1 + 0.016 x E[max of n normals] (timing.slowest_of), 2.3% at 8 GPUs, 4.9% "
                   "at 512, 6.2% at 10,240",
    "collective_base_latency_s": LATENCY_SOURCE,
    "multinode_all_reduce_latency_factor": LATENCY_SOURCE,
    "transcendental_s_per_element": "0: GELU, SiLU and softmax kernels are memory-bound on these GPUs (the CUDA cores' "
                                    "float32 rate, 19.5-67 TFLOP/s by datasheet, leaves 50-100 FLOPs per element at "
                                    "the rate HBM delivers 2-byte elements read and written; one such function takes 10-30)",
}
GPU_FIXED = dict(context_bytes=723 * MIB, comm_buffer_bytes=128 * MIB, fragmentation=0.13, overlap_interference=0.65,
                 collective_base_latency_s=RING_BASE_S, multinode_all_reduce_latency_factor=RING_PLATEAU,
                 moe_expert_fixed_s=370e-6, rank_spread=0.016)
A100_SOURCES = {
    **GPU_MEMORY_SOURCES,
    "peak_flops": "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16/FP16 312 TFLOP/s dense",
    "peak_flops_fp8": "A100 has no FP8 tensor cores (datasheet)",
    "peak_flops_tf32": "A100 datasheet: TF32 156 TFLOP/s dense, FP32 19.5 (parbench.devices.DATASHEETS, the runner's MFU)",
    "memory_bandwidth_bytes_per_s": "A100 datasheet: 2,039 GB/s; x0.8 achievable (assumed, STREAM-like)",
    "intra": "A100 datasheet: NVLink 3 600 GB/s total = 300 GB/s per direction; x0.8 nccl-tests-style busbw (assumed)",
    "inter": "DGX A100 user guide: 8x ConnectX-6 HDR 200 Gb/s per node = 25 GB/s per GPU; x0.9 (assumed)",
    "gpus_per_node": "DGX A100: 8 GPUs per node",
    "gemm_efficiency": "0.72: fitted (the one constant minimising mean |error|, parbench.sim.efficiency_fits.fit_gemm_efficiency) "
                       "to the 10 rows of Narayanan et al. SC21 Table 1 (Megatron-LM GPT 1.7B-1T on 32-3072 A100, each "
                       "recomputing its layers' whole forward, the embedding and head not, its pipeline tensors sent in "
                       "tensor-parallel slices, SC21 sec. 4.1); 0.68 until the step waited for its slowest device (rank_spread: "
                       "5.6% at 3072 GPUs, 3.2% at 32); 0.70 while every tensor-parallel rank sent the whole "
                       "tensor; 0.69 while the optimizer step "
                       "left out its mixed-precision passes (timing.optimizer_pass_bytes_per_element), 0.70 while the model "
                       "recomputed the head too; SC21 Table 2 and MT-NLG held out (parbench validate --published)",
    "attention_efficiency": "0.35: fitted (parbench.sim.efficiency_fits.fit_foundry_efficiencies('a100-80gb', fit_gemm=False), "
                            "the GEMM efficiency kept; 0.34 before rank_spread) to llm-foundry's A100 rows (8, MPT 1B-70B at 2K-65K tokens), which ran "
                            "the Triton FlashAttention kernel, of FlashAttention-1's class: 25-40% of the A100's peak (Dao, "
                            "\"FlashAttention-2\", arXiv 2307.08691, 2023, abstract); torchtitan's A100 rows held out. "
                            "FlashAttention-2 runs take attention_kernels['flash2']",
    "attention_kernels": "flash2 0.50: FlashAttention-2 reaches 50-73% of the A100's peak (Dao, \"FlashAttention-2\", "
                         "arXiv 2307.08691, 2023, abstract), its backward (2.5x the forward's FLOPs) below its forward "
                         "(sec. 4.1), so forward + backward at the range's low end; not fitted. torch's "
                         "scaled_dot_product_attention runs this kernel since torch 2.2 (release notes)",
    "latency": LATENCY_SOURCE,
    "gemm_overhead_s": "assumed 6 us per GEMM (no A100 was measured; see the H100's for what the published rows say)",
}
H100_SOURCES = {
    **GPU_MEMORY_SOURCES,
    "peak_flops": "NVIDIA H100 Tensor Core GPU datasheet: SXM BF16 989 TFLOP/s dense (1,979 with sparsity)",
    "peak_flops_fp8": "H100 datasheet: SXM FP8 1,979 TFLOP/s dense (3,958 with sparsity)",
    "peak_flops_tf32": "H100 datasheet: SXM TF32 494.5 TFLOP/s dense (989 with sparsity), FP32 67 (parbench.devices.DATASHEETS)",
    "memory_bandwidth_bytes_per_s": "H100 datasheet: 3.35 TB/s; x0.8 achievable (assumed)",
    "intra": "H100 datasheet: NVLink 4 900 GB/s total = 450 GB/s per direction; x0.8 busbw (assumed)",
    "inter": "DGX H100 user guide: 8x ConnectX-7 NDR 400 Gb/s per node = 50 GB/s per GPU; x0.9 (assumed)",
    "gpus_per_node": "DGX H100: 8 GPUs per node",
    "gemm_efficiency": "0.68: fitted with attention_efficiency and fp8_gemm_share, the point of a grid (GEMM 0.58-0.70, "
                       "attention 0.17-0.23, FP8 share 0.80-1.0) with the lowest mean |error| over the 108 published "
                       "dense rows with a metric on the H100's tensor cores (llm-foundry's 11, torchtitan's 18 H100 and "
                       "2 H200, Megatron-Bridge's 4 H100, NeMo's 12 and 7 long-sequence, the DGX Cloud tables' 54; "
                       "parbench.sim.efficiency_fits.fit_hopper_efficiencies): 4.71%, against 4.76% at 0.69, 4.84% at "
                       "0.67 and 5.96% at (0.65, 0.19, 1.0), the pair llm-foundry's rows alone give "
                       "(fit_foundry_efficiencies). With the interference at 0.6 and a Megatron-Core interleaved "
                       "pipeline's gradients synced all at once it was the same point at 4.63%. It was 0.65 until every step waited for its slowest device "
                       "(rank_spread, fitted with it: 2.3% slower at 8 GPUs, 4.9% at 512), and 0.64 while the "
                       "collectives' latencies were assumed rather than NCCL's and the overlap interference was 0.5. "
                       "One H200 measured the 1.3B GPT's own GEMMs at 0.68 of peak (H200_SOURCES). "
                       "Cross-validated (leave_one_source_out): fitted without each source in turn, the grid lands on "
                       "(0.66-0.68, 0.19, 0.875-0.925) and predicts the left-out source's rows at 5.04% mean |error| "
                       "against the llm-foundry pair's 5.96% (per source: DGX Cloud 4.7 / 6.4, Megatron-Bridge 8.4 / "
                       "9.6, NeMo 2.8 / 3.3, NeMo long-sequence 0.9 / 1.9, torchtitan H100 6.3 / 6.5 better; "
                       "torchtitan H200 15.7 / 13.0, llm-foundry 6.4 / 5.9 worse; the mean of the seven sources' "
                       "means 6.47 / 6.65). The Nemotron-4 15B DGX Cloud rows, added later, are held out of every "
                       "fit. The mixtures of experts (the Megatron-LM Mixtral row, Megatron-Bridge's) "
                       "are held out",
    "fp8_gemm_share": "0.875: fitted with gemm_efficiency (above; 0.85 and 0.90 give 4.77% and 4.80% at their best GEMM "
                      "efficiency, 1.0, FP8 GEMMs at the BF16 share of their peak, 5.96% at 0.65; 0.90 before delayed "
                      "scaling's casts were counted without their amax pass). Below one as FP8 GEMMs "
                      "run: the same shape's prologue, epilogue and operand traffic weigh twice as much at twice the "
                      "math rate. scripts/gpu_compute_check.py's gemm_fp8 section measures it on the device it runs on",
    "attention_efficiency": "0.19: fitted with gemm_efficiency (above); on llm-foundry's 11 H100 rows alone too (their "
                            "16K-65K-token rows are mostly attention). FlashAttention-2 reaches 35% of the H100's BF16 peak in its forward "
                            "pass (Shah et al., \"FlashAttention-3\", arXiv 2407.08608, 2024, abstract) and less in "
                            "its backward (2.5x the forward's FLOPs); the held-out torchtitan 8B rows at 32K-262K "
                            "tokens imply 0.18-0.22 by hand (tokens/s x FLOPs per token, less the GEMM time)",
    "attention_kernels": "flash2: the fitted 0.19, FlashAttention-2's too (torchtitan's rows, which ran it "
                         "through torch's scaled_dot_product_attention, imply 0.18-0.22; measured on one H200: 0.21). flash3 0.33: "
                         "Hopper's asynchronous attention kernels (FlashAttention-3; cuDNN's fused attention, which "
                         "Transformer Engine runs on H100) are 1.5-2.0x FlashAttention-2 (Shah et al., \"FlashAttention-3\", "
                         "arXiv 2407.08608, 2024, abstract); 0.19 x 1.74, the ratio of cuDNN's to FlashAttention-2's "
                         "measured on an H200 (HOPPER_FLASH3_OVER_FLASH2); not fitted",
    "latency": LATENCY_SOURCE,
    "gemm_overhead_s": "assumed 5 us per GEMM. One H200 (scripts/gpu_compute_check.py, 2026-11-30) fits t = 22 us + "
                       "flops / (0.77 x peak) within 18% over its 20 bf16 GEMMs of 2048-16384 "
                       "(parbench.sim.efficiency_fits.fit_gemm_curve), but the published rows do not pin it: from 0 to "
                       "22 us, the efficiencies refitted over every H100 row each time (gemm_overhead_grid: 0.64-0.66, "
                       "0.19, FP8 share 0.875-0.90), each source's mean |error| moves by at most 1.8 points but the "
                       "held-out Nemotron-4 15B report's (4.5% at 0 us, 8.0% at 22 us); torchtitan's H200 rows are "
                       "lowest at 22 us (14.0%, 15.0% at 5 us), the DGX Cloud rows at 0-5 us (3.6%; 4.2% at 22 us), so "
                       "the assumption stays",
}
H100_96_SOURCES = {
    **H100_SOURCES,
    "memory_bytes": "torchtitan docs/performance.md (Grand Teton): H100 with 96GB HBM2e; the 80 GB parts expose "
                    "80 GiB less a driver reserve (A100 81,920 MiB, H100 81,559 MiB), so 96 GiB less the H100's 361 MiB",
    "memory_bandwidth_bytes_per_s": "torchtitan docs/performance.md: 2.4 TB/s peak; x0.8 achievable (assumed)",
    "inter": "torchtitan docs/performance.md: 400 Gb/s RDMA per GPU = 50 GB/s; x0.9 (assumed)",
    "peak_flops": "the H100 SXM datasheet's 989 TFLOP/s (torchtitan: the 500 W part's exact peak is unpublished, "
                  "\"between SXM and NVL\", 835 TFLOP/s dense by the H100 NVL datasheet; at their midpoint, 912, "
                  "these 18 rows' mean |error| goes from 6.7% to 7.8% with the H100 fit unmoved, so the SXM figure stays)",
    "gemm_efficiency": "the H100 SXM's 0.68, FP8 share 0.875 (same tensor cores; these rows are among those they are "
                       "fitted on). Before attention had its own efficiency, fitting them alone gave 0.48 (read then as "
                       "the 500 W power limit); it was the slower attention kernel",
    "attention_efficiency": "the H100 SXM's 0.19",
}

HOPPER_FLASH3_OVER_FLASH2 = 1.74
"""Hopper's asynchronous attention kernel over FlashAttention-2, forward + backward, measured on an H200
(``scripts/gpu_compute_check.py``, 2026-11-30, torch 2.11 + CUDA 13.0): causal bf16 attention at batch 8, 16
heads, 2048 tokens, head dim 128 through ``scaled_dot_product_attention``: cuDNN's fused attention (the kernel
Transformer Engine runs on Hopper) 0.383 + 0.967 ms, torch's FlashAttention-2 0.631 + 1.713 ms; 36.1% and 20.8%
of the 989 TFLOP/s peak. FlashAttention-3's abstract gives 1.5-2.0x."""


def float32_peaks(model: str) -> dict[str, float]:
    """A float32 run's matmul peaks (TF32 tensor cores, CUDA cores) from the datasheet the runner's MFU uses."""
    sheet = next(s for _, s in DATASHEETS if s.model == model)
    fp32 = sheet.peak_flops["fp32"]  # a device without TF32 matrix cores runs float32 matmuls at its fp32 peak
    return {"peak_flops_tf32": sheet.peak_flops.get("tf32", fp32), "peak_flops_fp32": fp32}


_A100 = dict(gpus_per_node=8, peak_flops=312e12, **float32_peaks("A100"), gemm_efficiency=0.72, attention_efficiency=0.35,
             attention_kernels={"flash2": 0.50}, gemm_overhead_s=6e-6, op_overhead_s=4e-6,
             memory_bandwidth_bytes_per_s=0.8 * 2039e9, intra=Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 300e9),
             inter=Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=0.9 * 25e9), overlap=1.0, **GPU_FIXED)
_H100 = dict(gpus_per_node=8, peak_flops=989e12, peak_flops_fp8=1979e12, **float32_peaks("H100 SXM"), gemm_efficiency=0.68, fp8_gemm_share=0.875, attention_efficiency=0.19,
             attention_kernels={"flash2": 0.19, "flash3": round(0.19 * HOPPER_FLASH3_OVER_FLASH2, 2)}, gemm_overhead_s=5e-6,
             op_overhead_s=3e-6, memory_bandwidth_bytes_per_s=0.8 * 3350e9,
             intra=Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 450e9),
             inter=Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=0.9 * 50e9), overlap=1.0, **GPU_FIXED)
H200_SOURCES = {
    **H100_SOURCES,
    "peak_flops": "NVIDIA H200 Tensor Core GPU datasheet: SXM BF16 1,979 TFLOP/s with sparsity = 989 dense (the H100's "
                  "tensor cores)",
    "peak_flops_fp8": "H200 datasheet: SXM FP8 3,958 TFLOP/s with sparsity = 1,979 dense",
    "memory_bytes": "H200 141 GB HBM3e; 143,771 MiB as NVML reports it (GPU_MEMORY_SOURCES)",
    "memory_bandwidth_bytes_per_s": "H200 datasheet: 4.8 TB/s; x0.8 achievable (assumed)",
    "intra": "H200 datasheet: NVLink 900 GB/s total = 450 GB/s per direction; x0.8 busbw (assumed)",
    "inter": "DGX H200: 8x ConnectX-7 400 Gb/s per node = 50 GB/s per GPU; x0.9 (assumed)",
    "gemm_efficiency": "the H100 SXM's fitted 0.68, FP8 share 0.875 and attention 0.19 (same tensor cores). Measured on one H200 "
                       "(scripts/gpu_compute_check.py, 2026-11-30): square bf16 GEMMs 0.70-0.81 "
                       "of peak, the 1.3B GPT's own GEMMs 0.68, FlashAttention-2 0.21; kept at the at-scale fit, which "
                       "also carries what one GPU alone does not (NCCL kernels sharing the SMs, a full node's power)",
}
A100_40_SOURCES = {
    **A100_SOURCES,
    "memory_bytes": "A100 40GB: 40,960 MiB as nvidia-smi reports the 40 GB part (half the 80 GB part's 81,920 MiB)",
    "memory_bandwidth_bytes_per_s": "A100 datasheet, 40GB column: HBM2 1,555 GB/s; x0.8 achievable (assumed)",
    "gemm_efficiency": "the A100 80GB's fitted 0.72 and attention 0.35 (same tensor cores and clocks)",
}
V100_DGX2H_SOURCES = {
    **GPU_MEMORY_SOURCES,
    "peak_flops": "130 TFLOP/s FP16 tensor-core dense: NVIDIA DGX-2H datasheet, 2.1 petaFLOPS for its 16 Tesla V100 "
                  "SXM3 32GB at the DGX-2H's clocks (131 each; the V100 SXM2 datasheet: 125); Shoeybi et al., "
                  "'Megatron-LM', arXiv 1909.08053, sec. 5.1.1: 39 TFLOP/s is '30% of the theoretical peak FLOPS for a "
                  "single GPU as configured in a DGX-2H server', and NVIDIA ADLR's 'MegatronLM's Supercharged V1.0' "
                  "(nv-adlr.github.io/MegatronLMV1): 62.4 TFLOP/s is 48% of it: 130",
    "peak_flops_tf32": "Volta has no TF32 tensor cores: float32 matmuls run on the CUDA cores, the V100 SXM2 datasheet's "
                       "15.7 TFLOP/s at the DGX-2H's clocks (x 130/125): 16.3 (parbench.devices.DATASHEETS)",
    "bf16": "Volta's tensor cores take fp16 alone (V100 datasheet: no BF16 figure)",
    "flash_attention": "FlashAttention needs Ampere or later (Dao, 'FlashAttention-2', arXiv 2307.08691; the flash-attn "
                       "package's requirements), so no flash kernel's rate is known here: eager attention by default",
    "memory_bytes": "V100 datasheet: 32 GB HBM2; 32,768 MiB as nvidia-smi's memory.total reports a Tesla V100-SXM3-32GB",
    "memory_bandwidth_bytes_per_s": "V100 datasheet: HBM2 900 GB/s; x0.8 achievable (assumed, as every preset's)",
    "intra": "Shoeybi et al. 2019, sec. 5: '300 GB/sec bandwidth between GPUs inside a server via NVSwitch' (six NVLink 2 "
             "links a GPU, 150 GB/s per direction; DGX-2 datasheet: NVSwitch, every GPU to every other at that rate); "
             "x0.8 busbw (assumed, as every preset's)",
    "inter": "the same section: '100 GB/sec of interconnect bandwidth between servers using 8 InfiniBand adapters per "
             "server' (8 x 100 Gb/s EDR) = 6.25 GB/s per GPU of 16; x0.9 (assumed, as every preset's)",
    "gpus_per_node": "DGX-2H: 16 V100 per server (the datasheet; Shoeybi et al. 2019: 32 servers, 512 GPUs)",
    "multinode_all_reduce_latency_factor": "1.9: NCCL's ring plateau factor before Ampere (ncclTopoGetAlgoTime in "
                                           "src/graph/tuning.cc; 1.4 from Ampere on)",
    "gemm_efficiency": "0.72, the A100's fitted figure (A100_SOURCES), not fitted on any V100 row: both are "
                       "Megatron-LM's GEMMs through cuBLAS on tensor cores of the same design lineage. Held out: "
                       "'MegatronLM's Supercharged V1.0' Table 1, 1.2B on 1 V100 and 4.2B on 4 (parbench validate "
                       "--published): +7.1% and -2.9% at 0.72. Fitted on those two rows alone (fit_gemm_efficiency) it "
                       "would be 0.80 (+0.6%, -8.3%: mean |error| 4.5% against 5.0%), two rows of opposite sign that "
                       "do not pin it",
    "attention_efficiency": "none: no flash kernel on Volta (flash_attention); eager attention is GEMMs at "
                            "gemm_efficiency and its scores through memory",
    "latency": LATENCY_SOURCE,
    "gemm_overhead_s": "assumed 6 us per GEMM, as the A100's",
}
EXPORT_NVLINK_SOURCE = ("TechPowerUp, 'NVIDIA Prepares H800 Adaptation of H100 GPU for the Chinese Market' (2023, "
                        "after Reuters): the A800 is the A100 with its chip-to-chip bandwidth cut from 600 GB/s to 400 GB/s")
A800_SOURCES = {
    **A100_SOURCES,
    "intra": f"{EXPORT_NVLINK_SOURCE}: NVLink 400 GB/s total = 200 GB/s per direction; x0.8 busbw (assumed, as the A100's)",
    "gemm_efficiency": "the A100 80GB's fitted 0.72 and attention 0.35 (the A100's die, memory and clocks; only NVLink differs)",
}
H800_SOURCES = {
    **H100_SOURCES,
    "peak_flops": "the H100 SXM's 989 TFLOP/s BF16 dense (the H800 SXM5 is the H100 SXM5's die and clocks; its export "
                  "limits cut NVLink and FP64, neither a training GEMM)",
    "peak_flops_fp8": "the H100 SXM's 1,979 TFLOP/s FP8 dense (same tensor cores)",
    "intra": "NVLink 400 GB/s total = 200 GB/s per direction (DeepSeek-AI, 'Insights into DeepSeek-V3: Scaling Challenges "
             "and Reflections on Hardware for AI Architectures', ISCA 2025, arXiv 2505.09343: the H800's NVLink cut from "
             "the H100's 900 GB/s to 400 GB/s, eight 400 Gb/s InfiniBand NICs a node to make up for it); x0.8 busbw "
             "(assumed, as every preset's): 160 GB/s, the figure DeepSeek-V3's report gives for the NVLink its all-to-all "
             "kernels reached ('NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times that of IB (50 GB/s)', "
             "arXiv 2412.19437, sec. 3.2.2)",
    "inter": "8x 400 Gb/s InfiniBand per node (the same two papers) = 50 GB/s per GPU; x0.9 (assumed)",
    "memory_bytes": "80 GB HBM3 as the H100 SXM's (the same stacks): 81,559 MiB as NVML reports the H100 (assumed the same)",
    "gemm_efficiency": "the H100 SXM's fitted 0.68, FP8 share 0.875, attention 0.19 (same tensor cores and clocks); no "
                       "published H800 row checks them",
}
JEAN_ZAY_RING_BUS_BYTES_PER_S = 4.0e9 * 2 * 31 / 32 / 1.529
"""Bus bandwidth of a 4.0 GB all-reduce over 32 ranks on 4 of Jean Zay's A100 nodes, timed by BigScience in a median
1.529 s (``JEAN_ZAY_SOURCES["inter"]``): 5.07 GB/s."""
JEAN_ZAY_SOURCES = {
    **A100_SOURCES,
    "inter": "measured: BigScience's all-reduce benchmark on 4 of Jean Zay's A100 nodes, 32 ranks "
             "(github.com/bigscience-workshop/bigscience, experiments/bandwidth/all_reduce_bench-a100-n4.txt @358e3c8 "
             "and all_reduce_bench.py): 4.0 GB of float32 in a median 1.529 s over its five trials (1.519-1.531 s), "
             "a bus bandwidth of 4e9 x 2 x 31/32 / 1.529 = 5.07 GB/s (the log's 'busbw: 40.5 Gbps'). The nodes have "
             "4 Omni-Path links at 100 Gb/s (the BLOOM README, train/tr11-176B-ml/README.md), yet NCCL 2.10.3's log "
             "there builds 2 channels that both leave a node via NET/IB/3 and enter via NET/IB/1: one NIC pair a "
             "ring (multi_rail_rings False), not one NIC per local rank, so a ring's crossing runs at 5.07 GB/s "
             "whether 1 or 8 of its ranks share a node (its 4-GPU-node run: 16 ranks, 4.98 GB/s, "
             "n4_a100_all_reduce_bench.txt @74c6c3d)",
    "multi_rail_rings": "the same log: every channel through the same NIC pair",
    "gpus_per_node": "the BLOOM README: 8 A100 80GB per node (NVLink inside, as an HGX A100 board; assumed the DGX A100's)",
}
BLACKWELL_SOURCES = {
    **H100_SOURCES,
    "peak_flops": "NVIDIA HGX B200 specifications (the GB200 NVL72 page's 'Individual Blackwell GPU Specifications', HGX "
                  "B200 column): FP16/BF16 4.5 PFLOPS with sparsity = 2,250 TFLOP/s dense",
    "peak_flops_fp8": "the same table: FP8 9 PFLOPS with sparsity = 4,500 TFLOP/s dense",
    "peak_flops_tf32": "the same table: TF32 2.2 PFLOPS with sparsity = 1,100 dense; FP32 75 TFLOP/s (parbench.devices.DATASHEETS)",
    "memory_bytes": "the same table: 180 GB HBM3E; usable as nvidia-smi reports a B200 (the convention of every "
                    "preset, GPU_MEMORY_SOURCES): 183,359 MiB (published nvidia-smi printouts of DGX B200 "
                    "nodes, drivers 570-595), 179.1 GiB, not 180e9 bytes (167.6 GiB)",
    "memory_bandwidth_bytes_per_s": "the same table: 7.7 TB/s; x0.8 achievable (assumed, as the H100's)",
    "intra": "fifth-generation NVLink 1.8 TB/s total = 900 GB/s per direction; x0.8 busbw (assumed, as the H100's)",
    "inter": "DGX B200: 8x ConnectX-7 400 Gb/s per node = 50 GB/s per GPU; x0.9 (assumed)",
    "mxfp8_gemm_share": "0.95: Transformer Engine's GEMM profiling tutorial (docs/examples/gemm_profiling/gemm_profiling.rst "
                        "@8f2e635) times one layer's twelve GEMMs (forward, input and weight gradients of a 5B model's four "
                        "Linears, 15,872 tokens) on a B300 with pre-quantized operands: 6.812 ms per-tensor FP8 (current "
                        "scaling), 7.161 ms MXFP8, 13.102 ms BF16; 6.812 / 7.161 = 0.951. Measured, not fitted",
    "gemm_efficiency": "the H100's fitted 0.68, FP8 share 0.875, attention 0.19 and flash3 0.33 (their fits on the H100's rows), not "
                       "refitted: checked on Megatron-Bridge's DGX-B200 and DGX-GB200 rows, held out "
                       "(parbench validate --published). The FP8 share carries over: Transformer Engine's GEMM profiling "
                       "tutorial (above) times one layer's pre-quantized GEMMs 1.92x faster in per-tensor FP8 than in BF16 "
                       "on a B300 (13.102 / 6.812 ms) and 1.90x on an H200 NVL (31.968 / 16.785 ms)",
}
GB200_SOURCES = {
    **BLACKWELL_SOURCES,
    "peak_flops": "NVIDIA GB200 NVL72 specifications ('Individual Blackwell GPU Specifications', GB200 NVL72 column): "
                  "FP16/BF16 5 PFLOPS with sparsity = 2,500 TFLOP/s dense",
    "peak_flops_fp8": "the same table: FP8 10 PFLOPS with sparsity = 5,000 TFLOP/s dense",
    "peak_flops_tf32": "the same table: TF32 2.5 PFLOPS with sparsity = 1,250 dense; FP32 80 TFLOP/s",
    "memory_bytes": "the same table: 186 GB HBM3E; usable as nvidia-smi reports a GB200: 189,471 MiB (published "
                    "nvidia-smi printouts of GB200 NVL72 trays), 185.0 GiB, not 186e9 bytes (173.2 GiB)",
    "memory_bandwidth_bytes_per_s": "the same table: 8 TB/s; x0.8 achievable (assumed)",
    "gpus_per_node": "GB200 NVL72: 72 GPUs in one NVLink domain (the rack), each at 1.8 TB/s",
    "inter": "beyond the rack, one ConnectX-7 400 Gb/s per GPU = 50 GB/s; x0.9 (assumed)",
}
BLACKWELL_ULTRA_SOURCES = {
    **BLACKWELL_SOURCES,
    "peak_flops": "Blackwell Ultra, HGX B300: FP16/BF16 2,250 TFLOP/s dense (verda.com/blog/gb300-nvl72-architecture, "
                  "per-GPU table without sparsity; NVIDIA's DGX B300 page: 72 PFLOPS sparse FP8 for 8 GPUs = 4,500 dense "
                  "FP8 per GPU, BF16 half of it): the B200's tensor-core peaks",
    "peak_flops_fp8": "the same table: FP8 4,500 TFLOP/s dense",
    "peak_flops_tf32": "the same table: TF32 1,100 TFLOP/s dense, FP32 75 (parbench.devices.DATASHEETS)",
    "memory_bytes": "the same table: 270 GB HBM3E (no published nvidia-smi printout found, so the decimal figure)",
    "memory_bandwidth_bytes_per_s": "the same table: 7.7 TB/s; x0.8 achievable (assumed, as every GPU preset's)",
    "inter": "DGX B300: 8x ConnectX-8 800 Gb/s, one per GPU = 100 GB/s; x0.9 (assumed)",
    "gemm_efficiency": "the Blackwell presets' (the H100's fitted 0.68, FP8 share 0.875, attention 0.19, flash3 0.33), "
                       "each x1.09 (0.74, 0.21, 0.36): Blackwell Ultra keeps Blackwell's BF16 and FP8 datasheet peaks, "
                       "yet Megatron-Bridge's tables (26.02, 26.02.01) run the same model, layout and precision 1.04-1.11x "
                       "faster on DGX-B300 than on DGX-B200, mean 1.09 over the four such pairs "
                       "(parbench.sim.efficiency_fits.same_layout_speedup); the board power (1.1 kW against 1.0 kW, the "
                       "same table) is the likely cause, not measured. The doubled exponential rate (10.7 against 5 "
                       "tera-exponentials/s, the same table) is not modelled separately",
}
GB300_SOURCES = {
    **BLACKWELL_ULTRA_SOURCES,
    "peak_flops": "Blackwell Ultra, GB300 NVL72: FP16/BF16 2,500 TFLOP/s dense (verda.com/blog/gb300-nvl72-architecture, "
                  "per-GPU table without sparsity; the rack's 360 PFLOPS dense FP8 / 72 = 5,000 FP8, BF16 half of it)",
    "peak_flops_fp8": "the same table: FP8 5,000 TFLOP/s dense",
    "peak_flops_tf32": "the same table: TF32 1,250 TFLOP/s dense, FP32 80",
    "memory_bytes": "the same table: 279 GB HBM3E (no published nvidia-smi printout found, so the decimal figure)",
    "memory_bandwidth_bytes_per_s": "the same table: 8 TB/s; x0.8 achievable (assumed)",
    "gpus_per_node": "GB300 NVL72: 72 GPUs in one NVLink domain (the rack), each at 1.8 TB/s",
    "inter": "beyond the rack, one ConnectX-8 800 Gb/s per GPU (72 in the rack) = 100 GB/s; x0.9 (assumed)",
    "gemm_efficiency": "the Blackwell presets' efficiencies x1.22 (0.83, attention 0.23, flash3 0.40): Megatron-Bridge's "
                       "tables (25.11, 26.02, 26.02.01) run the same model, layout and precision 1.19-1.23x faster on "
                       "DGX-GB300 than on DGX-GB200 at equal datasheet peaks, mean 1.22 over the five such pairs "
                       "(parbench.sim.efficiency_fits.same_layout_speedup); GB300's 1.4 kW board power against "
                       "GB200's 1.2 kW (the same table) is the likely cause, not measured",
}
BLACKWELL_ULTRA_SPEEDUP = {"b300": 1.09, "gb300-nvl72": 1.22}
"""Blackwell Ultra's compute over Blackwell's at equal datasheet peaks: the mean published ratio of its same-layout
pairs (``parbench.sim.efficiency_fits.same_layout_speedup``), applied to every tensor-core efficiency."""


def _sustained(preset: dict[str, Any], factor: float) -> dict[str, Any]:
    """A preset's GEMM and attention efficiencies scaled by ``factor`` (memory-bound work and links unchanged)."""
    return {**preset, "gemm_efficiency": round(preset["gemm_efficiency"] * factor, 2),
            "attention_efficiency": round(preset["attention_efficiency"] * factor, 2),
            "attention_kernels": {k: round(v * factor, 2) for k, v in preset["attention_kernels"].items()}}


MXFP8_OVER_TENSORWISE = 0.95
"""Blackwell's MXFP8 GEMMs over its per-tensor-scaled FP8 GEMMs of the same shapes (``Cluster.mxfp8_gemm_share``;
the figure and its source: ``BLACKWELL_SOURCES``)."""
_BLACKWELL = {**_H100, "peak_flops": 2250e12, "peak_flops_fp8": 4500e12, **float32_peaks("B200 (HGX)"),
              "mxfp8_gemm_share": MXFP8_OVER_TENSORWISE,
              "memory_bandwidth_bytes_per_s": 0.8 * 7700e9, "intra": Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 900e9)}
INSTINCT_SOURCES = {
    **H100_SOURCES,
    "peak_flops": "AMD Instinct MI300X datasheet: FP16/BF16 1,307.4 TFLOP/s dense (2,614.9 with sparsity; "
                  "parbench.devices.DATASHEETS)",
    "peak_flops_fp8": "the same datasheet: FP8 2,614.9 TFLOP/s dense",
    "peak_flops_tf32": "the same datasheet: TF32 653.7 TFLOP/s dense, FP32 163.4",
    "memory_bytes": "192 GiB: ROCm's GPU specifications table (rocm.docs.amd.com, reference/gpu-specs), VRAM (GiB)",
    "memory_bandwidth_bytes_per_s": "the same datasheet: 5.3 TB/s HBM3; x0.8 achievable (assumed, as every GPU preset's)",
    "intra": "eight GPUs a platform, each joined to every other by one Infinity Fabric link of 128 GB/s both ways (the "
             "datasheet's 896 GB/s of peer bandwidth over 7 links): 7 x 64 = 448 GB/s per direction to the node; x0.8 "
             "busbw (assumed, as NVLink's); 3.4 us a ring step (NCCL's NVLink figure, assumed for RCCL's xGMI)",
    "peer_link_bytes_per_s": "one Infinity Fabric link, 64 GB/s per direction, x0.8: what a pair of the node's GPUs "
                             "has between them (intra_bandwidth_bytes_per_s), a seventh of what all eight have",
    "inter": "8 x 400 Gb/s NICs a node, one per GPU (the MI300X platform's reference design, as the DGX H100's) = "
             "50 GB/s per GPU; x0.9 (assumed)",
    "gpus_per_node": "the AMD Instinct platform: 8 OAM GPUs on one universal baseboard",
    "gemm_efficiency": "the H100's fitted 0.68, FP8 share 0.875, attention 0.19 and kernel rates (assumed: no AMD row "
                       "enters any fit). Held out, MLPerf Training v5.1's two AMD Llama 3.1 8B runs, one node of 8 "
                       "MI355X or MI350X in FP8 (parbench.sim.published_memory._mlperf_llama8b_amd), come within "
                       "+5% and -8%; the MI350X ran 1.23x slower than the MI355X where their peaks differ by 1.09x (1000 "
                       "W against 1400 W: a sustained clock no datasheet states), which one shared efficiency cannot "
                       "follow",
}
MI325X_SOURCES = {
    **INSTINCT_SOURCES,
    "peak_flops": "AMD Instinct MI325X datasheet: the MI300X's compute, FP16/BF16 1,307.4 TFLOP/s dense",
    "memory_bytes": "256 GiB: ROCm's GPU specifications table, VRAM (GiB)",
    "memory_bandwidth_bytes_per_s": "the MI325X datasheet: 6 TB/s HBM3E; x0.8 achievable (assumed)",
}
MI355X_SOURCES = {
    **INSTINCT_SOURCES,
    "peak_flops": "AMD Instinct MI355X datasheet: FP16/BF16 2.5 PFLOP/s dense (2,516.6 TFLOP/s; "
                  "parbench.devices.DATASHEETS), 1400 W",
    "peak_flops_fp8": "the same datasheet: FP8 5.0 PFLOP/s dense (5,033.2 TFLOP/s)",
    "peak_flops_tf32": "CDNA 4 has no TF32 matrix type: float32 matmuls at the FP32 peak, 157.3 TFLOP/s",
    "memory_bytes": "288 GiB: ROCm's GPU specifications table, VRAM (GiB)",
    "memory_bandwidth_bytes_per_s": "the MI355X datasheet: 8 TB/s HBM3E; x0.8 achievable (assumed)",
    "intra": "the MI355X datasheet: 7 Infinity Fabric links of 153.6 GB/s both ways (1,075 GB/s of peer bandwidth), "
             "one to each of the platform's other seven GPUs: 537.6 GB/s per direction; x0.8 busbw (assumed)",
    "peer_link_bytes_per_s": "one Infinity Fabric link, 76.8 GB/s per direction, x0.8",
}
MI350X_SOURCES = {
    **MI355X_SOURCES,
    "peak_flops": "AMD Instinct MI350X datasheet: FP16/BF16 2.3 PFLOP/s dense (2,306.9 TFLOP/s, also "
                  "huggingface.co/hardware/mi350x), 1000 W: the MI355X's chip at a lower power limit",
    "peak_flops_fp8": "the same datasheet: FP8 4.6 PFLOP/s dense (4,613.7 TFLOP/s)",
    "peak_flops_tf32": "CDNA 4 has no TF32 matrix type: float32 matmuls at the FP32 peak, 144.2 TFLOP/s",
}
_MI300X = {**_H100, "peak_flops": 1307.4e12, "peak_flops_fp8": 2614.9e12, **float32_peaks("MI300X"),
           "memory_bandwidth_bytes_per_s": 0.8 * 5300e9,
           "intra": Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 7 * 64e9), "peer_link_bytes_per_s": 0.8 * 64e9}
_MI355X = {**_MI300X, "peak_flops": 2516.6e12, "peak_flops_fp8": 5033.2e12, **float32_peaks("MI355X"),
           "memory_bandwidth_bytes_per_s": 0.8 * 8000e9,
           "intra": Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 7 * 76.8e9), "peer_link_bytes_per_s": 0.8 * 76.8e9}
_V100_DGX2H = dict(gpus_per_node=16, peak_flops=130e12, peak_flops_tf32=16.3e12, peak_flops_fp32=16.3e12, bf16=False,
                   flash_attention=False, gemm_efficiency=0.72, gemm_overhead_s=6e-6, op_overhead_s=4e-6,
                   memory_bandwidth_bytes_per_s=0.8 * 900e9,
                   intra=Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 150e9),
                   inter=Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=0.9 * 100e9 / 16), overlap=1.0,
                   **{**GPU_FIXED, "multinode_all_reduce_latency_factor": 1.9})
PRESETS: dict[str, Cluster] = {
    "a100-80gb": Cluster(name="a100-80gb", memory_bytes=81920 * MIB, sources=A100_SOURCES, **_A100),
    "jean-zay-a100": Cluster(name="jean-zay-a100", memory_bytes=81920 * MIB, sources=JEAN_ZAY_SOURCES,
                             **{**_A100, "inter": Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=JEAN_ZAY_RING_BUS_BYTES_PER_S),
                                "multi_rail_rings": False}),
    "a100-40gb": Cluster(name="a100-40gb", memory_bytes=40960 * MIB, sources=A100_40_SOURCES,
                         **{**_A100, "memory_bandwidth_bytes_per_s": 0.8 * 1555e9}),
    "v100-dgx2h": Cluster(name="v100-dgx2h", memory_bytes=32768 * MIB, sources=V100_DGX2H_SOURCES, **_V100_DGX2H),
    "h100-sxm": Cluster(name="h100-sxm", memory_bytes=81559 * MIB, sources=H100_SOURCES, **_H100),
    "h200-sxm": Cluster(name="h200-sxm", memory_bytes=143771 * MIB, sources=H200_SOURCES,
                        **{**_H100, "memory_bandwidth_bytes_per_s": 0.8 * 4800e9}),
    "b200": Cluster(name="b200", memory_bytes=183359 * MIB, sources=BLACKWELL_SOURCES, **_BLACKWELL),
    "gb200-nvl72": Cluster(name="gb200-nvl72", memory_bytes=189471 * MIB, sources=GB200_SOURCES,
                           **{**_BLACKWELL, "peak_flops": 2500e12, "peak_flops_fp8": 5000e12, **float32_peaks("GB200"),
                              "memory_bandwidth_bytes_per_s": 0.8 * 8000e9, "gpus_per_node": 72}),
    "b300": Cluster(name="b300", memory_bytes=270 * 10**9, sources=BLACKWELL_ULTRA_SOURCES,
                    **_sustained({**_BLACKWELL, **float32_peaks("B300 (HGX)"),
                                  "inter": Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=0.9 * 100e9)}, BLACKWELL_ULTRA_SPEEDUP["b300"])),
    "gb300-nvl72": Cluster(name="gb300-nvl72", memory_bytes=279 * 10**9, sources=GB300_SOURCES,
                           **_sustained({**_BLACKWELL, "peak_flops": 2500e12, "peak_flops_fp8": 5000e12,
                                         **float32_peaks("GB300"), "memory_bandwidth_bytes_per_s": 0.8 * 8000e9,
                                         "gpus_per_node": 72, "inter": Link(latency_s=NET_STEP_S, bandwidth_bytes_per_s=0.9 * 100e9)},
                                        BLACKWELL_ULTRA_SPEEDUP["gb300-nvl72"])),
    "h800-sxm": Cluster(name="h800-sxm", memory_bytes=81559 * MIB, sources=H800_SOURCES,
                        **{**_H100, "intra": Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 200e9)}),
    "a800-80gb": Cluster(name="a800-80gb", memory_bytes=81920 * MIB, sources=A800_SOURCES,
                         **{**_A100, "intra": Link(latency_s=NVLINK_STEP_S, bandwidth_bytes_per_s=0.8 * 200e9)}),
    "h100-96gb": Cluster(name="h100-96gb", memory_bytes=96 * GIB - (81920 - 81559) * MIB, sources=H100_96_SOURCES,
                         **{**_H100, "memory_bandwidth_bytes_per_s": 0.8 * 2400e9}),
    "mi300x": Cluster(name="mi300x", memory_bytes=192 * GIB, sources=INSTINCT_SOURCES, **_MI300X),
    "mi325x": Cluster(name="mi325x", memory_bytes=256 * GIB, sources=MI325X_SOURCES,
                      **{**_MI300X, "memory_bandwidth_bytes_per_s": 0.8 * 6000e9}),
    "mi355x": Cluster(name="mi355x", memory_bytes=288 * GIB, sources=MI355X_SOURCES, **_MI355X),
    "mi350x": Cluster(name="mi350x", memory_bytes=288 * GIB, sources=MI350X_SOURCES,
                      **{**_MI355X, "peak_flops": 2306.9e12, "peak_flops_fp8": 4613.7e12, **float32_peaks("MI350X")}),
}


def cluster_figures(c: Cluster) -> dict[str, Any]:
    """The figures that tell presets apart, in display units: GPUs a node, dense peaks (TFLOP/s; FP8 0 where there is
    none), memory (GiB) and its achievable bandwidth, the links per GPU and direction as derated (GB/s), the GEMM
    efficiency, and what the devices lack. ``parbench simulate --list-clusters`` and the dashboard's what-if show them."""
    lacks = [n for n, on in (("no bf16", not c.bf16), ("no flash attention", not c.flash_attention)) if on]
    if c.peer_link_bytes_per_s:
        lacks.append(f"no switch: {c.peer_link_bytes_per_s / 1e9:.0f} GB/s a pair")
    return {"gpus_per_node": c.gpus_per_node, "tflops": c.peak_flops / 1e12, "fp8_tflops": c.peak_flops_fp8 / 1e12,
            "memory_gib": c.memory_bytes / GIB, "memory_gb_s": c.memory_bandwidth_bytes_per_s / 1e9,
            "intra_gb_s": c.intra.bandwidth_bytes_per_s / 1e9, "inter_gb_s": c.inter.bandwidth_bytes_per_s / 1e9,
            "gemm_efficiency": c.gemm_efficiency, "lacks": ", ".join(lacks)}


def cluster_summary(c: Cluster) -> str:
    """``cluster_figures`` as one line of prose (a calibrated CPU profile: its cores and measured rates)."""
    if c.cores:
        return (f"a calibrated CPU profile: {c.cores} cores shared by the ranks, GEMMs at "
                f"{c.peak_flops * c.gemm_efficiency / 1e9:.0f} GFLOP/s, memory at {c.memory_bandwidth_bytes_per_s / 1e9:.0f} "
                f"GB/s (`parbench calibrate`)")
    f = cluster_figures(c)
    fp8 = f", {f['fp8_tflops']:.0f} FP8" if f["fp8_tflops"] else ""
    return (f"{f['gpus_per_node']} GPUs a node; {f['tflops']:.0f} TFLOP/s dense{fp8}; {f['memory_gib']:.1f} GiB at "
            f"{f['memory_gb_s']:.0f} GB/s; {f['intra_gb_s']:.0f} GB/s a GPU inside a node, {f['inter_gb_s']:.2f} across "
            f"(each way, derated); GEMM efficiency {f['gemm_efficiency']:.2f}" + (f"; {f['lacks']}" if f["lacks"] else ""))


def _is_num(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and math.isfinite(v)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.isdigit()


_FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "int": (lambda v: _is_num(v) and float(v).is_integer(), "an integer"),  # 40e9 bytes in TOML is a float
    "float": (_is_num, "a finite number"),
    "Link": (lambda v: isinstance(v, Link) or isinstance(v, dict) and set(v) == {"latency_s", "bandwidth_bytes_per_s"}
             and all(map(_is_num, v.values())), "{latency_s, bandwidth_bytes_per_s} as numbers"),
    "dict[str, float]": (lambda v: isinstance(v, dict) and all(map(_is_num, v.values())), "an object of numbers"),
    "dict[str, str]": (lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                       "an object of strings"),
    "dict[int, float]": (lambda v: isinstance(v, dict) and all(map(_is_count, v)) and all(map(_is_num, v.values())),
                         "an object of rank counts to numbers"),
    "dict[int, dict[str, float]]": (
        lambda v: isinstance(v, dict) and all(map(_is_count, v)) and all(
            isinstance(rates, dict) and all(map(_is_num, rates.values())) for rates in v.values()),
        "an object of thread counts to {figure: number}"),
    "dict[str, dict[int, tuple[float, float]]]": (
        lambda v: isinstance(v, dict) and all(
            isinstance(by_n, dict) and all(map(_is_count, by_n)) and all(
                isinstance(x, (list, tuple)) and len(x) == 2 and all(map(_is_num, x)) for x in by_n.values())
            for by_n in v.values()),
        "an object of collectives to {rank count: [latency, bandwidth]}"),
}
"""What each ``Cluster`` annotation admits in a file: a wrong value is named before any arithmetic meets it."""


def _field_problems(data: dict[str, Any]) -> list[str]:
    required = [f.name for f in fields(Cluster) if f.default is MISSING and f.default_factory is MISSING]
    problems = [f"{k} is missing" for k in required if k not in data]
    for f in fields(Cluster):
        if f.name in data:
            ok, what = _FIELD_CHECKS[f.type]
            if not ok(data[f.name]):
                problems.append(f"{f.name}={data[f.name]!r} must be {what}")
    return problems


def cluster_from_dict(data: dict[str, Any]) -> Cluster:
    """A cluster from plain data (a TOML/JSON file or a saved profile); links as {latency_s, bandwidth_bytes_per_s}."""
    data = dict(data)
    known = {f.name for f in fields(Cluster)}
    unknown = sorted(set(data) - known - {"fit", "meta"})
    if unknown:
        raise ValueError(f"unknown cluster fields {unknown}; valid: {sorted(known)}")
    problems = _field_problems(data)
    if problems:
        raise ValueError("cluster fields: " + "; ".join(problems))
    data.update({f.name: int(data[f.name]) for f in fields(Cluster) if f.type == "int" and f.name in data})
    for level in ("intra", "inter"):
        if isinstance(data.get(level), dict):
            data[level] = Link(**data[level])
    for name in ("compute_slowdown", "collective_step_overhead_s", "burst_step_overhead_s", "tp_step_overhead_s",
                 "tp_step_compute_share", "fsdp_step_byte_overhead_s"):
        data[name] = {int(n): float(v) for n, v in (data.get(name) or {}).items()}
    data["threaded"] = {int(t): {k: float(v) for k, v in rates.items()} for t, rates in (data.get("threaded") or {}).items()}
    colls = data.get("collectives") or {}
    data["collectives"] = {k: {int(n): tuple(v) for n, v in by_n.items()} for k, by_n in colls.items()}
    return Cluster(**{k: v for k, v in data.items() if k in known})


def cluster_to_dict(c: Cluster) -> dict[str, Any]:
    """Plain data to save or edit: copies, so that editing it leaves the cluster (a preset, shared by the whole
    process) as it was."""
    out = {f.name: copy.deepcopy(getattr(c, f.name)) for f in fields(Cluster)}
    out["intra"], out["inter"] = dict(vars(c.intra)), dict(vars(c.inter))
    out["collectives"] = {k: {str(n): list(v) for n, v in by_n.items()} for k, by_n in c.collectives.items()}
    out["compute_slowdown"] = {str(n): v for n, v in c.compute_slowdown.items()}
    out["threaded"] = {str(t): dict(rates) for t, rates in c.threaded.items()}
    for name in ("collective_step_overhead_s", "burst_step_overhead_s", "tp_step_overhead_s", "tp_step_compute_share",
                 "fsdp_step_byte_overhead_s"):
        out[name] = {str(n): v for n, v in getattr(c, name).items()}
    return out


def profile_path(results_dir: str | Path = "results", host: str | None = None) -> Path:
    return Path(results_dir) / "calibration" / f"{host or socket.gethostname()}.json"


def cluster_files_dir(results_dir: str | Path = "results") -> Path:
    """Where ``parbench calibrate --nccl-tests`` writes a cluster file by default, and the dashboard finds them."""
    return Path(results_dir) / "clusters"


def cluster_files(results_dir: str | Path = "results") -> dict[str, Cluster | str]:
    """The cluster files under ``cluster_files_dir``, by path: each one's cluster, or why it does not read."""
    found: dict[str, Cluster | str] = {}
    for path in sorted(cluster_files_dir(results_dir).glob("*.json")):
        try:
            found[str(path)] = load_cluster(str(path))
        except (ValueError, OSError) as exc:
            found[str(path)] = str(exc)
    return found


def load_cluster(name: str, *, results_dir: str | Path = "results") -> Cluster:
    """A preset name, ``local`` (this host's calibrated profile), or a path to a .toml/.json file."""
    if name in PRESETS:
        return PRESETS[name]
    path = profile_path(results_dir) if name == "local" else Path(name)
    if not path.is_file():
        hint = "run `parbench calibrate` first" if name == "local" else f"presets: {', '.join(PRESETS)}, local"
        raise FileNotFoundError(f"no cluster {name!r} ({path} does not exist); {hint}")
    try:
        data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
        data = data.get("cluster", data) if isinstance(data, dict) else data  # a saved profile nests it
        if not isinstance(data, dict):
            raise ValueError(f"holds {type(data).__name__}, not an object of cluster fields")
        return cluster_from_dict(data)
    except (ValueError, UnicodeDecodeError) as exc:  # tomllib's and json's decode errors are ValueErrors
        hint = "; run `parbench calibrate` again" if name == "local" else ""
        raise ValueError(f"cluster {path}: {exc}{hint}") from None
