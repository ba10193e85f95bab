"""How much of each class of communication a step can hide under compute, one rule per class.

Every rule returns the *exposed* seconds of a class given its total seconds (each collective already
costs (n-1) x alpha per ring step plus its bytes over the link: ``parbench.sim.hardware``) and the
compute it may overlap with. Each rule keeps 0 <= exposed <= total, and exposed never falls when the
total rises (a slower link never makes a step faster). ``hide`` is the cluster's ``overlap``: the
fraction of the overlappable compute that communication can actually run under (1 on GPUs, where
collectives run on their own stream; measured on a calibrated CPU, where gloo's threads share the cores
with compute).

What is hidden is not free. ``interference`` is the fraction of the hidden seconds a collective still adds:
NCCL's collectives run as kernels on the GPU's SMs and share its memory bandwidth with the compute they
overlap, which slows that compute (contention is a major limiter of overlap in "Design Space
Exploration of DMA based Finer-Grain Compute Communication Overlap", arXiv 2512.10236, abstract). It applies
to the data-parallel, FSDP, overlapped pipeline-send and overlapped expert-exchange rules, whose traffic runs under whole forward and
backward passes (GEMMs and the memory-bound kernels between them). Tensor-parallel overlap (Transformer
Engine's userbuffers, torch's async tensor parallelism) pipelines chunks through copy engines and peer reads
and takes none. Ring attention's K/V exchange takes none either: it runs under the attention kernel alone,
which keeps its working set in on-chip memory (FlashAttention is "IO-aware", it reduces "the number of memory
reads/writes between GPU high bandwidth memory (HBM) and GPU on-chip SRAM": Dao et al. 2022, abstract), so the
exchange's HBM traffic does not slow it.

Sources, per rule:
- data-parallel gradients (DDP buckets, ZeRO/FSDP reduce-scatter): Li et al., "PyTorch Distributed",
  VLDB 2020, sec. 3.2.3 and fig. 6: a bucket's all-reduce starts when its last gradient is ready, so
  bucket traffic runs under the rest of the backward pass, and the bucket that becomes ready last
  (the first layers' gradients) is exposed in full;
- FSDP parameter all-gathers: Zhao et al., "PyTorch FSDP", VLDB 2023, sec. 3.3 (forward and backward
  prefetch): unit i+1's all-gather runs under unit i's compute; the first unit's gather has nothing
  to hide under; the reduce-scatters share the same link during backward;
- tensor-parallel all-reduces (Megatron f/g, Shoeybi et al. 2019): the next GEMM consumes the
  all-reduced activation, so they sit on the critical path; with ``tp_comm_overlap`` (Wang et al.,
  "Overlap Communication with Dependent Computation via Decomposition", ASPLOS 2023) the collective is
  split into tp chunks pipelined with the GEMM that produces or consumes it: one chunk stays exposed;
- pipeline sends: torch's and Megatron's 1F1B/GPipe/interleaved schedules wait for a micro-batch's
  activation (gradient) before computing on it, so one transfer per micro-batch per boundary lies on
  the critical path (Narayanan et al., SC 2021, sec. 2.2 and 4.1). Megatron-LM's interleaved schedule
  with ``overlap_p2p_comm`` (``Layout.overlap_p2p_comm``) issues each transfer before the compute of
  another chunk and waits for it after: the transfers run under the micro-batch's compute, and only
  their excess over it is exposed;
- expert-parallel token all-to-alls: exposed (the experts wait for their tokens), or under Megatron-Core's
  combined 1F1B (``--overlap-moe-expert-parallel-comm``) hidden under the compute of the micro-batch paired
  with theirs, forward with backward ("EP A2A in forward step is hidden by the attention/mlp computation in
  the backward step, and vice versa": ``megatron.core.pipeline_parallel.combined_1f1b``); a step's first
  forward and last backward have no partner;
- context-parallel K/V exchange (ring attention: Liu et al., "Ring Attention with Blockwise
  Transformers", 2023; Megatron-Core context parallelism): cp-1 K/V block transfers per attention
  layer, each under the attention of the block already held, so only the excess over that attention
  compute is exposed;
- the distributed optimizer's parameter all-gathers under ``--overlap-param-gather`` (Megatron-Core:
  "overlap parameter all-gather with fprop"): dispatched bucket by bucket as the next forward reaches
  each bucket's layers, so they follow the prefetch rule under the first micro-batch's forward;
- both under Megatron-Core's interleaved schedule, chunk by chunk: it wraps each model chunk in a DDP of its
  own and hands the schedule one gradient and one parameter sync function per chunk (``grad_sync_func``,
  ``param_sync_func``, ``megatron/core/pipeline_parallel/schedules.py``,
  ``forward_backward_pipelining_with_interleaving``). A chunk's reduce-scatter starts as soon as its last
  micro-batch's backward ends, while the chunks below it still run theirs; the next chunk's gather starts
  with this chunk's first forward, min(pp, m) micro-batches before that chunk needs it. The chunks' traffic
  queues on the one data-parallel link (``chunked_gradient_exposed_s``, ``chunked_gather_exposed_s``). NeMo's
  documentation says the same of its recipes: with pipeline parallelism "the granularity of DP communication
  becomes the Transformer layers per virtual pipeline stage", and the overlap "exposes only one DP communication
  chunk" (``docs/source/features/optimizations/communication_overlap.rst``). torch's pipeline schedules reduce
  each stage module's gradients in its last backward too, but FSDP2 ends that backward by making the compute
  stream wait for the module's reduce-scatters (``FSDPParamGroup.finalize_backward``, called from
  ``_root_post_backward_final_callback`` on the last backward): they cannot run under the next chunk's backward,
  so torch's layouts keep the rule of one micro-batch.
"""

from __future__ import annotations


def contended_s(exposed_s: float, total_s: float, interference: float) -> float:
    """The exposed seconds plus ``interference`` x the hidden ones (0 <= result <= total, rising with both)."""
    return exposed_s + interference * (total_s - exposed_s)


def gradient_exposed_s(total_s: float, backward_s: float, buckets: int, *, hide: float, interference: float = 0.0) -> float:
    """DDP / reduce-scatter under the last micro-batch's backward: max(total - hide x backward, last bucket).
    ``buckets`` = 0 means one flat buffer after backward (Megatron's local DDP): nothing overlaps."""
    if total_s <= 0:
        return 0.0
    if buckets <= 0:
        return total_s
    last_bucket = total_s / buckets
    exposed = min(total_s, max(total_s - hide * backward_s * (buckets - 1) / buckets, last_bucket))
    return contended_s(exposed, total_s, interference)


def prefetch_exposed_s(total_s: float, compute_s: float, units: int, *, hide: float, interference: float = 0.0) -> float:
    """FSDP all-gathers (and the reduce-scatters sharing their link) prefetched one unit ahead: all but
    one unit's compute can hide traffic; one unit's share is always exposed."""
    if total_s <= 0:
        return 0.0
    units = max(units, 1)
    exposed = min(total_s, max(total_s - hide * compute_s * (units - 1) / units, total_s / units))
    return contended_s(exposed, total_s, interference)


def chunked_gradient_exposed_s(total_s: float, shares: tuple[float, ...], backward_s: float, group: int,
                               first_buckets: int, *, hide: float, interference: float = 0.0) -> float:
    """The gradient reduce-scatters of v model chunks under Megatron-Core's interleaved schedule. ``shares``: each
    chunk's part of ``total_s``, in its order on the rank; ``backward_s``: one chunk's backward (and recompute) of
    one micro-batch; ``group``: the micro-batches the schedule runs a chunk for in a row (min(pp, m)). The backward
    finishes the chunks last first: chunk j's last micro-batch ends j x group chunk-backwards before the rank's last
    backward, and its reduce-scatter queues on the link from then. The first chunk's ``first_buckets`` become ready
    one by one through its last backward (``gradient_exposed_s``'s buckets) and join the queue; what the queue
    still holds when the backward ends is exposed."""
    if total_s <= 0:
        return 0.0
    v, step = len(shares), hide * group * backward_s
    end = (v - 1) * step  # the rank's last backward ends; chunk j's at (v - 1 - j) x step
    free = float("-inf")  # when the link has sent what was queued
    for j in range(v - 1, 0, -1):
        free = max((v - 1 - j) * step, free) + total_s * shares[j]
    buckets, last = max(first_buckets, 1), hide * backward_s
    for k in range(1, buckets + 1):
        free = max(end - last + last * k / buckets, free) + total_s * shares[0] / buckets
    return contended_s(min(total_s, max(free - end, 0.0)), total_s, interference)


def chunked_gather_exposed_s(total_s: float, shares: tuple[float, ...], forward_s: float, group: int,
                             first_buckets: int, *, hide: float, interference: float = 0.0) -> float:
    """The distributed optimizer's parameter all-gathers of v model chunks under Megatron-Core's interleaved schedule
    (``chunked_gradient_exposed_s``'s arguments, ``forward_s`` one chunk's forward of one micro-batch). The first
    chunk's gather runs bucket by bucket under its first forward (``prefetch_exposed_s``); chunk k's starts with
    chunk k - 1's first forward and must end before chunk k's, group chunk-forwards later, on one link: each wait is
    exposed."""
    if total_s <= 0:
        return 0.0
    step = hide * group * forward_s
    start = prefetch_exposed_s(total_s * shares[0], forward_s, first_buckets, hide=hide)  # chunk 0's first forward
    free = total_s * shares[0]
    for share in shares[1:]:
        free = max(start, free) + total_s * share
        start = max(start + step, free)
    return contended_s(min(total_s, start - (len(shares) - 1) * step), total_s, interference)


def tensor_parallel_exposed_s(total_s: float, gemm_s: float, tp: int, *, overlap: bool, hide: float) -> float:
    """Exposed in full, unless decomposed and overlapped with the GEMMs: then one of tp chunks stays exposed."""
    if total_s <= 0:
        return 0.0
    if not overlap:
        return total_s
    return min(total_s, max(total_s - hide * gemm_s, total_s / max(tp, 1)))


def pipeline_send_exposed_s(total_s: float, compute_s: float = 0.0, *, overlap: bool = False, hide: float = 1.0,
                            interference: float = 0.0) -> float:
    """Per micro-batch and boundary, the transfer precedes the compute that needs it. ``overlap``: the
    micro-batch's transfers run under its ``compute_s`` (every chunk's forward and backward), the excess exposed."""
    return _excess_exposed_s(total_s, compute_s, overlap=overlap, hide=hide, interference=interference)


def expert_exchange_exposed_s(total_s: float, compute_s: float = 0.0, *, overlap: bool = False, hide: float = 1.0,
                              interference: float = 0.0) -> float:
    """A micro-batch's token all-to-alls: the experts wait for their tokens, so they are exposed. ``overlap``
    (Megatron-Core's combined 1F1B, ``Layout.moe_a2a_overlap``): they run under the compute of the micro-batch
    paired with it (its forward's under the other's backward, and the reverse), the excess exposed."""
    return _excess_exposed_s(total_s, compute_s, overlap=overlap, hide=hide, interference=interference)


def _excess_exposed_s(total_s: float, compute_s: float, *, overlap: bool, hide: float, interference: float) -> float:
    """Exposed in full, or where ``overlap`` its excess over ``hide`` x ``compute_s``, the hidden rest contended."""
    if total_s <= 0:
        return 0.0
    if not overlap:
        return total_s
    return contended_s(min(total_s, max(total_s - hide * compute_s, 0.0)), total_s, interference)


def context_parallel_exposed_s(total_s: float, attention_s: float, cp: int, *, hide: float) -> float:
    """Ring attention: cp-1 K/V transfers each under one block's attention; the excess is exposed (no
    interference: the attention kernel works from on-chip memory, see the module's note)."""
    if total_s <= 0 or cp <= 1:
        return max(total_s, 0.0) if cp > 1 else 0.0
    return min(total_s, max(total_s - hide * attention_s * (cp - 1) / cp, 0.0))
