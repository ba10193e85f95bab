"""Communication each rank issues per optimizer step, op by op, with the runner's conventions.

Every op is a (kind, category, payload S, group size n, root?) tuple; the bytes a rank sends are
``parbench.metrics.conventions.sent_bytes`` of it (nccl-tests PERFORMANCE.md conventions, integer
division per op), exactly as ``parbench.metrics.comm.CommMeter`` counts the runner's real ops.
Sources of the op sequences: DDP's bucketed all-reduce (Li et al., VLDB 2020; torch's reducer rebuilds
buckets after the first step with a 1 MiB first bucket then 25 MiB), ZeRO (Rajbhandari et al., SC 2020),
Megatron tensor parallelism's f/g all-reduces (Shoeybi et al. 2019) and sequence parallelism's
all-gather/reduce-scatter pairs (Korthikanti et al. 2022), pipeline send/recv per micro-batch per boundary.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from operator import attrgetter
from types import MappingProxyType

from parbench.config import DataMode, Strategy
from parbench.metrics.categories import CATEGORIES
from parbench.metrics.conventions import sent_bytes
from parbench.sim.layout import Layout
from parbench.sim.model import INT64_BYTES, ModelSpec, Tensor, input_needs_grad
from parbench.sim.stages import Stage, stages

DDP_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DDP_BUCKET_BYTES = 25 * 1024 * 1024  # DistributedDataParallel(bucket_cap_mb=25)


@dataclass(frozen=True)
class CommOp:
    kind: str
    category: str
    payload: int
    """Full-buffer bytes S (nccl-tests' size)."""
    n: int
    group: str
    """Mesh dimension of the group: dp, tp, pp or world (placement decides the link level)."""
    count: int = 1
    root: bool = False
    phase: str = "step"
    """When it runs: ``forward``/``backward`` per micro-batch (on the critical path), ``grad`` (may
    overlap backward), ``step`` (before/after compute)."""
    sent_each: int | None = None
    """Bytes sent per execution where the convention's (n-1)/n x S does not hold (uneven all-to-all)."""
    burst: bool = False
    """Issued back to back with the ops around it, no compute between (``hardware.BURST_SUFFIX``)."""

    @property
    def sent(self) -> int:
        if self.sent_each is not None:
            return self.count * self.sent_each
        return self.count * sent_bytes(self.kind, self.payload, self.n, is_root=self.root)


def ddp_buckets(tensor_bytes: list[int], cap_bytes: int = 0) -> list[int]:
    """Bucket sizes after the reducer's rebuild: tensors in reverse order, a bucket closes once it
    reaches its cap (1 MiB for the first, 25 MiB after), as torch's compute_bucket_assignment_by_size.
    ``cap_bytes``: one cap for every bucket, the first too (Megatron-Core's grad buffer,
    ``Layout.grad_bucket_elements``)."""
    buckets, current, cap = [], 0, cap_bytes or DDP_FIRST_BUCKET_BYTES
    for b in reversed(tensor_bytes):
        current += b
        if current >= cap:
            buckets.append(current)
            current, cap = 0, cap_bytes or DDP_BUCKET_BYTES
    if current:
        buckets.append(current)
    return buckets


def zero1_shards(numels: list[int] | tuple[int, ...], n: int) -> list[list[int]]:
    """ZeroRedundancyOptimizer's partition: largest tensor first to the rank holding least (stable sort;
    ties go to the lowest rank, as its ``_get_min_index``)."""
    heap = [(0, r) for r in range(n)]
    shards: list[list[int]] = [[] for _ in range(n)]
    for numel in sorted(numels, key=lambda x: -x):
        size, r = heapq.heappop(heap)
        shards[r].append(numel)
        heapq.heappush(heap, (size + numel, r))
    return shards


@lru_cache(maxsize=4096)
def stage_local_numels(model: ModelSpec, pp: int, v: int, tp: int) -> tuple[tuple[int, ...], ...]:
    """Per stage: each parameter tensor's tensor-parallel-local elements, in registration order."""
    return tuple(st.local_numels(tp) for st in stages(model, pp, v))


@lru_cache(maxsize=4096)
def stage_numels(model: ModelSpec, pp: int, v: int, tp: int) -> tuple[int, ...]:
    """Per stage: the tensor-parallel-local elements of all its parameters."""
    return tuple(sum(local) for local in stage_local_numels(model, pp, v, tp))


@lru_cache(maxsize=4096)
def stage_expert_numels(model: ModelSpec, pp: int, v: int, tp: int) -> tuple[int, ...]:
    """Per stage: the tensor-parallel-local elements of its experts' tensors (0 for a dense model)."""
    return tuple(st.expert_numel(tp) for st in stages(model, pp, v))


@lru_cache(maxsize=4096)
def stage_fp8_numels(model: ModelSpec, pp: int, v: int, tp: int) -> tuple[int, ...]:
    """Per stage: the tensor-parallel-local elements of its blocks' Linear tensors, the weights an FP8 recipe
    casts. The embedding, the head and the norms keep the parameters' dtype: Transformer Engine's FP8 covers its
    own modules (Megatron's output layer is not one), torchao's float8 converter skips the head."""
    return tuple(sum(t.local_numel(tp) for units in st.modules for u in units for t in u.params if t.linear)
                 for st in stages(model, pp, v))


def gathered_bytes(layout: Layout, key: tuple, rank: int, numel: int, *, experts: bool = False) -> int:
    """Bytes of an all-gather of ``numel`` of a stage's sharded parameters: the parameters' gathered dtype
    (``Layout.gather_elem_bytes``), but 1 byte for the blocks' Linear weights where FP8 weights are gathered
    (``Layout.fp8_all_gather``; Megatron-Core gathers them as a uint8 buffer), at their share of the stage's
    elements (``experts``: expert tensors only, every one a Linear weight)."""
    gb = layout.gather_elem_bytes
    if not layout.fp8_all_gather:
        return numel * gb
    if experts:
        return numel
    expert = stage_expert_numels(*key)[rank] if layout.ep > 1 else 0
    total, fp8 = stage_numels(*key)[rank] - expert, stage_fp8_numels(*key)[rank] - expert
    return round(numel * (fp8 + (total - fp8) * gb) / max(total, 1))


@lru_cache(maxsize=4096)
def zero1_max_shard(model: ModelSpec, pp: int, v: int, tp: int, dp: int, stage: int) -> tuple[int, int]:
    """(elements, tensors) of the biggest ZeRO-1 shard of a stage (by AdamW state: 8 B/elem + 4 B/tensor)."""
    own = max(zero1_shards(stage_local_numels(model, pp, v, tp)[stage], dp), key=lambda sh: 2 * sum(sh) + len(sh))
    return sum(own), len(own)


@lru_cache(maxsize=4096)
def fsdp_group_numels(model: ModelSpec, pp: int, v: int, tp: int, dp: int, stage: int, padded: bool) -> tuple[int, ...]:
    """Elements per FSDP unit group of a stage (padded as FSDP2 pads, or textbook)."""
    st = stages(model, pp, v)[stage]
    if not padded:  # the units' own sums, and the root's
        units = [u.param_numel(tp) for mods in st.modules for u in mods if u.params]
        return tuple(units + ([sum(t.local_numel(tp) for t in st.root)] if st.root else []))
    return tuple(sum(fsdp_padded_numel(t, tp, dp) for t in g) for g in fsdp_groups(st, tp))


def fsdp_padded_numel(t: Tensor, tp: int, n: int) -> int:
    """FSDP2 pads dim 0 of every (tp-local) parameter to a multiple of n (Shard(0) via torch.chunk)."""
    numel = t.local_numel(tp)
    rows = t.shape[0] if t.tp_split != "rows" else -(-t.shape[0] // tp)
    return math.ceil(rows / n) * n * (numel // rows)


def fsdp_groups(stage: Stage, tp: int) -> list[list[Tensor]]:
    """fully_shard per unit, then the root with what is left (pre and post): one collective group each."""
    groups = [list(u.params) for mods in stage.modules for u in mods]
    return [g for g in groups + [list(stage.root)] if g]


def _grad_ops(model: ModelSpec, layout: Layout, stage: Stage, pb: int) -> list[CommOp]:
    """Data-parallel gradient/parameter traffic of one stage rank over the dp group."""
    whole = layout.whole_experts and model.arch is not None and model.arch.experts > 0
    if layout.dp * layout.cp == 1 and not whole:
        return []
    key = (model, layout.pp, layout.split, layout.tp)
    if layout.ep > 1 or whole:
        return _ep_grad_ops(layout, key, stage.rank, pb)
    if layout.flat_grad_allreduce:
        numel = stage_numels(*key)[stage.rank]
        ops = [CommOp("all_reduce", "parameter", numel * pb, layout.dp, "dp", phase="grad")]
        if layout.zero == 1:  # DeepSpeed's BF16 optimizer: each rank updates its shard, then all-gathers the weights
            ops.append(CommOp("all_gather", "parameter", gathered_bytes(layout, key, stage.rank, numel), layout.dp, "dp",
                              phase="step"))
        return ops
    if layout.zero >= 2:
        return _fsdp_ops(layout, key, stage.rank, pb) + _hsdp_ops(layout, key, stage.rank, pb)
    if layout.zero == 1 and not layout.fsdp2:
        return _zero1_textbook_ops(layout, key, stage.rank, pb)
    return _ddp_ops(layout, key, stage.rank, pb)


def _ddp_ops(layout: Layout, key: tuple, rank: int, pb: int) -> list[CommOp]:
    """DDP's bucketed all-reduce; torch's ZeRO-1 adds each rank's broadcast of the parameters it owns."""
    n = layout.shard_group
    held = layout.grad_elem_bytes  # DDP fills its buckets with the held gradients; a comm hook may compress each
    ops = [CommOp("all_reduce", "parameter", b // held * pb, n, "dp", count=c, phase="grad")
           for b, c in ddp_bucket_counts(*key, rank, held, layout.grad_bucket_elements)]
    if key[0].buffer_bytes:  # DDP(broadcast_buffers=True): rank 0's buffers before the forward
        ops.append(CommOp("broadcast", "parameter", key[0].buffer_bytes, n, "dp", root=True))
    if layout.zero == 1:  # ZeroRedundancyOptimizer: each rank broadcasts the bucket of whole tensors it owns
        # each owner broadcasts its float32 master parameters (no communication dtype applies)
        ops += _zero1_broadcasts(zero1_shards(stage_local_numels(*key)[rank], n), n, layout.precision.param_bytes)
    return ops


def _zero1_broadcasts(shards: list[list[int]], n: int, pb: int) -> list[CommOp]:
    """One broadcast per rank, of the flat bucket holding the parameters it owns (the runner's
    ``ZeroRedundancyOptimizer(parameters_as_bucket_view=True)``; a rank owning none broadcasts a one-element
    float32 placeholder): every rank takes part in all n, and the rank owning the most bytes sends its own. The
    time is a latency per bucket, at the cost of an op in a burst: ``_sync_params`` issues every broadcast
    asynchronously, back to back, then waits for them all. Timed after compute, as the calibration times the
    other collectives, a broadcast of 1 KiB at 2 gloo ranks on this project's 2-core VM took 0.6-1.3 ms; 32 in a
    row, 0.15-0.55 ms each."""
    busiest = max(range(len(shards)), key=lambda r: sum(shards[r]))
    buckets = Counter((sum(shard) * pb or 4, r == busiest) for r, shard in enumerate(shards))
    return [CommOp("broadcast", "parameter", size, n, "dp", count=c, root=root, burst=True)
            for (size, root), c in buckets.items()]


def _ep_grad_ops(layout: Layout, key: tuple, rank: int, pb: int) -> list[CommOp]:
    """Expert parallelism: the non-expert gradients over the dp ranks, the rank's expert gradients over the
    dp/ep ranks holding the same experts; each one flat all-reduce, or under Megatron's distributed optimizer
    (zero=1) a reduce-scatter of the gradients and an all-gather of the updated weights, per group."""
    experts = stage_expert_numels(*key)[rank]
    dense = stage_numels(*key)[rank] - experts
    groups = [(dense, layout.dp, "dp")] + ([(experts, layout.expert_dp, "edp")]
                                           if layout.expert_dp > 1 and experts else [])
    if layout.zero != 1 or layout.fsdp2:
        return [CommOp("all_reduce", "parameter", numel * pb, n, g, phase="grad") for numel, n, g in groups]
    phase = "next_forward" if layout.overlap_param_gather else "step"
    return [op for numel, n, g in groups
            for op in (CommOp("reduce_scatter", "parameter", numel * pb, n, g, phase="grad"),
                       CommOp("all_gather", "parameter", gathered_bytes(layout, key, rank, numel, experts=g == "edp"),
                              n, g, phase=phase))]


def _ep_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Per MoE layer and micro-batch: the count exchange (all-to-all of E int64), then the kept
    assignments' hidden vectors to their experts' ranks and back, forward and again backward
    (their gradients): 4 token all-to-alls. Rank r sends what leaves it: dispatch sum_{s != r} a_s,
    combine (ep-1) a_r, with a_s the rows for rank s's experts (balanced routing, per sequence
    ``Unit.moe_assignments_per_sample``), times ``moe_imbalance`` for the busiest rank. Dispatch carries
    the norm's output (``stream_bytes``), combine the experts' outputs (the activations' dtype), and their
    gradients go back in the same dtypes."""
    ep = layout.ep
    if ep == 1:
        return []
    row = model.hidden // layout.tp
    out_b, in_b = layout.precision.activation_bytes, stream_bytes(model, layout)
    seqs = layout.micro_batch_size
    ops = []
    # MoE blocks of equal routing exchange the same: each distinct one is worked out once, counted per block
    blocks = Counter(u.moe_assignments_per_sample for units in stage.modules for u in units
                     if u.moe_assignments_per_sample)
    for assignments, layers in blocks.items():
        e = len(assignments)
        per = e // ep
        shares = [sum(assignments[s * per:(s + 1) * per]) * seqs * row for s in range(ep)]
        # dispatch, then (after the experts) combine: two all-to-alls one after the other, each with its
        # own buffer; rank r sends the others' rows out and its own rows' results back
        dispatch = [(sum(shares) - shares[r]) * in_b for r in range(ep)]
        combine = [(ep - 1) * shares[r] * out_b for r in range(ep)]
        busiest = max(range(ep), key=lambda r: dispatch[r] + combine[r])
        m, k = layout.micro_batches * layers, layout.moe_imbalance
        ops.append(CommOp("all_to_all", "intermediate", e * INT64_BYTES, ep, "ep", count=m, phase="forward"))
        for phase in ("forward", "backward"):  # backward: the combine's gradient, then the dispatch's
            ops += [CommOp("all_to_all", "intermediate", int(sum(shares) * b * k), ep, "ep", count=m, phase=phase,
                           sent_each=int(sent[busiest] * k))
                    for b, sent in ((in_b, dispatch), (out_b, combine))]
    return ops


def _zero1_textbook_ops(layout: Layout, key: tuple, rank: int, pb: int) -> list[CommOp]:
    """ZeRO-1 as in the paper (and Megatron's distributed optimizer): reduce-scatter the gradients,
    all-gather the updated parameters, bucket by bucket: 2(n-1)/n x Psi in all. The gather carries the
    parameters' dtype, not the gradients' (bf16 reduces float32 gradients but gathers bf16 weights:
    Megatron-Core's distributed optimizer gathers its parameter buffer, which holds the model's dtype)."""
    buckets, n = ddp_bucket_counts(*key, rank, pb, layout.grad_bucket_elements), layout.shard_group
    phase = "next_forward" if layout.overlap_param_gather else "step"
    return ([CommOp("reduce_scatter", "parameter", b, n, "dp", count=c, phase="grad") for b, c in buckets]
            + [CommOp("all_gather", "parameter", gathered_bytes(layout, key, rank, b // pb), n, "dp", count=c, phase=phase)
               for b, c in buckets])


def fsdp_rounds(layout: Layout) -> tuple[int, int]:
    """(all-gathers, reduce-scatters) of each FSDP unit per step. ZeRO-3 gathers for forward and again for
    backward, ZeRO-2 once; with gradient accumulation every micro-batch gathers and reduce-scatters again;
    under torch's pipeline schedules FSDP2 re-gathers for every micro-batch's forward and once for backward
    (the stage stays unsharded until its last backward): m + 1 gathers, as measured."""
    m = layout.micro_batches
    gathers = 2 if layout.zero == 3 else 1
    if layout.zero == 3 and layout.pp > 1:
        return m + 1, 1
    if layout.pp == 1:
        return gathers * m, m
    return gathers, 1


def _fsdp_ops(layout: Layout, key: tuple, rank: int, pb: int) -> list[CommOp]:
    """Per FSDP unit: all-gather the parameters, reduce-scatter the gradients, ``fsdp_rounds`` times each."""
    n = layout.shard_group
    gathers, scatters = fsdp_rounds(layout)
    ops = []
    for numel in fsdp_group_numels(*key, n, rank, layout.fsdp2):
        ops.append(CommOp("all_gather", "parameter", gathered_bytes(layout, key, rank, numel), n, "dp", count=gathers,
                          phase="gather"))
        ops.append(CommOp("reduce_scatter", "parameter", numel * pb, n, "dp", count=scatters, phase="grad"))
    return ops


def _hsdp_ops(layout: Layout, key: tuple, rank: int, pb: int) -> list[CommOp]:
    """HSDP: after the reduce-scatter inside a shard group, each rank all-reduces its gradient shard with
    the ranks holding the same shard in the other ``replicate`` groups (Zhao et al., VLDB 2023, sec. 3.2.2)."""
    if layout.replicate == 1:
        return []
    n = layout.shard_group
    shard = sum(fsdp_group_numels(*key, n, rank, layout.fsdp2)) // n
    return [CommOp("all_reduce", "parameter", shard * pb, layout.replicate, "replicate", phase="grad")]


@lru_cache(maxsize=4096)
def ddp_bucket_counts(model: ModelSpec, pp: int, v: int, tp: int, stage: int, elem_bytes: int,
                      cap_elements: int = 0) -> tuple[tuple[int, int], ...]:
    """A stage's DDP buckets (``ddp_buckets``) as (bucket bytes, buckets of that size), in the order each size
    first occurs: equal buckets are one op with a count (``merge``), and a model of thousands of tensors fills
    thousands of buckets. ``cap_elements``: Megatron-Core's bucket of that many parameters (0: torch's). Megatron
    wraps each model chunk in a DDP of its own and buckets only the first pipeline stage's first chunk: every
    other chunk reduces as one bucket ("Turn off bucketing if we are on a pipeline stage that is not the first
    (since data-parallel communication on these stages is not on the critical path)", and
    ``disable_bucketing=(model_chunk_idx > 0)``: ``megatron/core/distributed/distributed_data_parallel.py``,
    ``megatron/training/training.py``). Those stages finish their backward first (``predict.step_terms``)."""
    if not cap_elements:
        buckets = ddp_buckets([x * elem_bytes for x in stage_local_numels(model, pp, v, tp)[stage]])
        return tuple(Counter(buckets).items())
    buckets = []
    for index, numels in enumerate(stages(model, pp, v)[stage].chunk_local_numels(tp)):
        sizes = [x * elem_bytes for x in numels]
        buckets += ddp_buckets(sizes, cap_elements * elem_bytes) if stage == 0 and index == 0 else [sum(sizes)]
    return tuple(Counter(b for b in buckets if b).items())


def tp_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Megatron f/g: per micro-batch, one all-reduce per row-wise output (forward) and per column-wise
    input that needs a gradient (backward); with sequence parallelism each becomes all-gather + reduce-scatter."""
    t, mb, ab = layout.tp, layout.micro_batch_size, layout.precision.activation_bytes
    rb = stream_bytes(model, layout)  # a column-wise Linear's input is a norm's output
    if t == 1:
        return []
    m = layout.micro_batches
    # full recomputation repeats a checkpointed layer's forward collectives, but for the output projection's
    # reduction where the replay stops early (Layout.recompute_early_stop); under sequence parallelism the
    # all-gather of the MLP's input still runs again (the gate and up projections replay)
    share = layout.recomputed_fraction
    kinds = ("all_gather", "reduce_scatter") if layout.sequence_parallel else ("all_reduce",)
    # units of one shape issue the same collectives: each (shape, pre/post or not, input gradient or not) once,
    # with how many of them the stage holds
    members: dict[tuple[int, bool, bool], list] = {}
    for chunk, units in zip(stage.chunks, stage.modules):
        chunk_members = [(i, u) for i, u in enumerate(units, start=chunk.lo)]
        chunk_members = (([(-1, model.pre)] if chunk.first else []) + chunk_members
                         + ([(-2, model.post)] if chunk.last else []))
        for i, u in chunk_members:
            key = (u.shape_key, i < 0, input_needs_grad(model, i))
            if key in members:
                members[key][2] += 1
            else:
                members[key] = [i, u, 1]
    counts: dict[tuple[int, str, str], float] = {}
    for i, u, n in members.values():
        if u.tp_row_allreduces:
            stops = layout.recompute_early_stop and not u.moe_assignments_per_sample
            for k in kinds:
                replayed = 0 if i < 0 else u.tp_row_allreduces - (1 if stops and k != "all_gather" else 0)
                key = (mb * u.tp_row_out * ab // layout.cp, "forward", k)
                counts[key] = counts.get(key, 0) + (u.tp_row_allreduces + share * replayed) * m * n
        if not input_needs_grad(model, i):
            continue
        for w in u.tp_col_inputs:
            for k in kinds:
                key = (mb * w * rb // layout.cp, "backward", k)
                counts[key] = counts.get(key, 0) + m * n
    return [CommOp(k, "intermediate", size, t, "tp", count=round(c), phase=phase)
            for (size, phase, k), c in counts.items()]


def _cp_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Ring attention over cp ranks (Liu et al. 2023; Megatron-Core's context parallelism): per layer and
    micro-batch, each rank passes its K and V blocks (b x s/cp x (k_width + v_width)) to the next rank cp - 1
    times in forward; backward passes K/V again and their gradients dK/dV around the ring. Category
    intermediate; it overlaps the blocks' attention compute (phase ``ring``)."""
    if layout.cp == 1 or model.arch is None:
        return []
    layers = sum(c.hi - c.lo for c in stage.chunks)
    block = layout.micro_batch_size * model.seq_len // layout.cp * (model.arch.k_width + model.arch.v_width) // layout.tp
    block *= layout.precision.activation_bytes
    steps = (layout.cp - 1) * layers * layout.micro_batches
    redo = 1 + layout.recomputed_fraction  # a recomputed forward passes its K/V around again
    return [CommOp("send", "intermediate", block, 2, "cp", count=int(steps * redo), phase="ring"),
            CommOp("send", "intermediate", block, 2, "cp", count=2 * steps, phase="ring")]


def _embedding_copy_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """A word embedding the last stage holds a copy of (a tied head, or the embedding multi-token prediction
    reads), split over pipeline stages: the first and last stage all-reduce its gradient so their copies stay
    equal (Shoeybi et al. 2019; Megatron-LM's embedding group, which takes in the MTP stage)."""
    if model.embedding_copy is None or layout.chunks == 1 or not (stage.chunks[0].first or stage.chunks[-1].last):
        return []
    size = model.embedding_copy.local_numel(layout.tp) * layout.grad_elem_bytes
    return [CommOp("all_reduce", "parameter", size, 2, "pp", phase="step")]


def stream_bytes(model: ModelSpec, layout: Layout) -> int:
    """Bytes per element of a transformer's residual stream and of its norms' outputs, which pipeline
    boundaries and the gradients of column-wise Linears' inputs carry: float32 under torch.autocast, which
    keeps the embedding, the residual adds and layer_norm in float32 (``Precision.residual_bytes``). The mlp
    has no residual stream: its layers pass Linear outputs, in the activations' dtype."""
    return layout.precision.residual_bytes if model.arch is not None else layout.precision.activation_bytes


def _pp_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Per micro-batch: the activation forward from every chunk but the last, its gradient backward
    from every chunk but the first (send S; the receiver's recv counts 0 bytes). Under ``pp_blocking_p2p``
    the receives are ops of their own too (0 bytes sent, a transfer's time on the receiver's path). Under
    ``pp_scatter_gather`` (tp > 1, no sequence parallelism) each rank sends its 1/tp slice and every received
    tensor is all-gathered over the tp ranks."""
    if layout.pp == 1:
        return []
    mb, ab, m = layout.micro_batch_size, stream_bytes(model, layout), layout.micro_batches
    gathered = layout.pp_scatter_gather and layout.tp > 1 and not layout.sequence_parallel
    shard = (layout.tp if layout.sequence_parallel or gathered else 1) * layout.cp  # tp slices; cp's share
    ops = []
    for c in stage.chunks:
        out = mb * model.units[c.hi - 1].out_elems_per_sample * ab // shard
        inp = mb * model.units[c.lo - 1].out_elems_per_sample * ab // shard if not c.first else 0
        if not c.last:
            ops.append(CommOp("send", "intermediate", out, 2, "pp", count=m, phase="forward"))
        if not c.first:
            ops.append(CommOp("send", "intermediate", inp, 2, "pp", count=m, phase="backward"))
        received = [(b, ph) for b, ph, edge in ((inp, "forward", c.first), (out, "backward", c.last)) if not edge]
        if layout.pp_blocking_p2p:  # the receives, blocking on their own: the input forward, the gradient back
            ops += [CommOp("recv", "intermediate", b, 2, "pp", count=m, phase=ph) for b, ph in received]
        if gathered:  # the receiver makes the whole tensor of the slices
            ops += [CommOp("all_gather", "intermediate", b * layout.tp, layout.tp, "tp", count=m, phase=ph)
                    for b, ph in received]
    return ops


def _data_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """``rank0`` data mode: the dp group's first rank scatters inputs and labels (two scatters of the
    global batch); under a pipeline, each replica's first stage reads its shard and sends the labels
    to its last stage instead."""
    if layout.data_mode is not DataMode.RANK0:
        return []
    ops = []
    first = stage.chunks[0].first
    if layout.dp > 1 and layout.pp == 1 and layout.strategy is not Strategy.PS and first:
        b = layout.global_batch_size
        ops += [CommOp("scatter", "data", b * model.input_bytes_per_sample, layout.dp, "dp", root=True),
                CommOp("scatter", "data", b * model.label_bytes_per_sample, layout.dp, "dp", root=True)]
    if layout.pp > 1 and first:
        ops.append(CommOp("send", "data", layout.per_replica_batch * model.label_bytes_per_sample, 2, "pp"))
    return ops


def ps_shards(numel: int, k: int) -> list[int]:
    """Elements of each server's contiguous shard of the flat parameters, earlier shards taking the remainder."""
    base, extra = divmod(numel, k)
    return [base + (1 if j < extra else 0) for j in range(k)]


def _ps_ops(model: ModelSpec, layout: Layout) -> dict[str, list[CommOp]]:
    """Parameter server (Li et al., OSDI 2014) with k servers: a worker pushes gradient chunk j to server j
    (Psi in all); server j sends its fresh chunk to each of the N workers (N x Psi_j). ``rank0`` data mode:
    the first worker scatters inputs and labels among the workers."""
    k, workers, pb = max(layout.servers, 1), layout.dp, layout.precision.param_bytes
    shards = ps_shards(model.param_numel, k)
    worker = [CommOp("send", "parameter", s * pb, 2, "world", phase="grad") for s in shards]
    if layout.data_mode is DataMode.RANK0 and workers > 1:
        b = layout.global_batch_size
        worker += [CommOp("scatter", "data", b * model.input_bytes_per_sample, workers, "world", root=True),
                   CommOp("scatter", "data", b * model.label_bytes_per_sample, workers, "world", root=True)]
    server = [CommOp("send", "parameter", shards[0] * pb, 2, "world", count=workers)]
    return {"worker": merge(worker), "server": server}


@lru_cache(maxsize=1024)
def rank_ops(model: ModelSpec, layout: Layout) -> Mapping[str, tuple[CommOp, ...]]:
    """Ops per distinct rank role: ``stage{s}`` (the worst dp rank of pipeline stage s), ps ``server``.
    Read-only and cached: they depend on the model and the layout, not on the cluster (a fit predicts each
    layout on many clusters)."""
    if layout.strategy is Strategy.PS:
        return MappingProxyType({k: tuple(v) for k, v in _ps_ops(model, layout).items()})
    pb = layout.grad_reduce_bytes
    out, built = {}, {}
    for st in stages(model, layout.pp, layout.split):
        # stages of equal shapes that receive equal activations hold and send the same: a pipeline's middle
        # stages are built once
        key = (st.shape_key, tuple(model.units[c.lo - 1].out_elems_per_sample for c in st.chunks if not c.first))
        if key not in built:
            built[key] = tuple(merge(_grad_ops(model, layout, st, pb) + tp_ops(model, layout, st)
                                     + _pp_ops(model, layout, st) + _data_ops(model, layout, st)
                                     + _cp_ops(model, layout, st) + _embedding_copy_ops(model, layout, st)
                                     + _ep_ops(model, layout, st)))
        out[f"stage{st.rank}"] = built[key]
    return MappingProxyType(out)


_IDENTITY = attrgetter(*(f.name for f in fields(CommOp) if f.name != "count"))
"""Every field of an op but its count: what tells ops apart."""


def merge(ops: list[CommOp]) -> list[CommOp]:
    """Identical ops folded into one with their counts summed (bytes stay per-op integer divisions), in the
    order each first occurs."""
    first: dict[tuple, CommOp] = {}
    counts: dict[tuple, int] = {}
    for op in ops:
        key = _IDENTITY(op)
        first.setdefault(key, op)
        counts[key] = counts.get(key, 0) + op.count
    return [op if op.count == counts[key] else replace(op, count=counts[key]) for key, op in first.items()]


def bytes_by_category(ops: list[CommOp]) -> dict[str, int]:
    out = dict.fromkeys(CATEGORIES, 0)
    for op in ops:
        out[op.category] += op.sent
    return out


def by_collective(ops: list[CommOp]) -> dict[str, int]:
    """``{"all_reduce/parameter": sent bytes}`` as the record's comm_ops keys."""
    out: dict[str, int] = {}
    for op in ops:
        key = f"{op.kind}/{op.category}"
        out[key] = out.get(key, 0) + op.sent
    return dict(sorted(out.items()))
