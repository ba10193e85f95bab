"""One prediction: bytes, memory, time and throughput of a layout on a cluster, per rank and step, with the
step broken into the terms the runner measures.

Step time of a pipeline: m beats of its slowest stage (a beat: one micro-batch's compute + the communication
on its critical path), plus the fill and drain, one beat of every other stage, over v. That is the makespan
of m identical jobs through a flow shop, sum_s t_s + (m-1) max_s t_s (GPipe's forwards, then its backwards;
1F1B's steady state is the slowest stage's too): before the slowest stage starts its first micro-batch the
stages ahead of it run theirs, and after its last backward they run theirs. With equal
stages it is Narayanan et al.'s (SC 2021, sec. 2.2) (m + (p-1)/v) beats, a bubble fraction (p-1)/(v m);
stages that are lighter than the slowest (the first, without the head and the loss) shorten the bubble. Plus what the data-parallel and parameter traffic leaves exposed after overlapping the
compute it may run under (one rule per collective class: ``parbench.sim.overlap``), plus the optimizer
step and the step's other work. No link can carry more than its bandwidth: the step is at least the
busiest link's total communication time. MFU = model FLOPs / (step time x world size x peak)
(Chowdhery et al., PaLM, 2022, appendix B).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from parbench.config import Strategy
from parbench.metrics.breakdown import TERMS  # the runner's breakdown columns: predicted with the same names
from parbench.metrics.categories import CATEGORIES
from parbench.sim.comm import CommOp, by_collective, bytes_by_category, fsdp_rounds, rank_ops, stage_local_numels, zero1_shards
from parbench.sim.framework import between_operators_s, micro_batch_overheads_s, optimizer_overhead_s
from parbench.sim.hardware import Cluster, collective_cost_s, collective_time_s, tp_host_s
from parbench.sim.layout import Layout, Recompute
from parbench.sim.memory import Memory, ps_memory, stages_memory, state_numels
from parbench.sim.model import ModelSpec, expert_local
from parbench.sim.overlap import (chunked_gather_exposed_s, chunked_gradient_exposed_s, context_parallel_exposed_s,
                                  expert_exchange_exposed_s, gradient_exposed_s, pipeline_send_exposed_s,
                                  prefetch_exposed_s, tensor_parallel_exposed_s)
from parbench.sim.stages import Stage, stages
from parbench.sim.timing import (ZERO_TIME, ChunkTime, chunk_times_s, data_time_s, fp32_grad_pass_s,
                                 optimizer_pass_bytes_per_element, optimizer_time_s, oversubscription, slowest_of,
                                 training_ops)


@dataclass(frozen=True)
class Prediction:
    comm_bytes: dict[str, int]
    """Per category, the max over ranks (as the record's comm_*_bytes_per_step)."""
    comm_total_bytes: int
    comm_by_collective: dict[str, int]
    memory: Memory
    """Each kind: the max over ranks (as the record's mem_*_bytes)."""
    peak_memory_bytes: int
    """The largest per-rank total (``Memory.total_bytes``: states, activations, transient buffers, fixed terms)."""
    step_time_s: float
    compute_time_s: float
    bubble_time_s: float
    comm_time_s: float
    """Exposed communication: what no compute hides (sum of the three ``time_comm_exposed_*`` terms)."""
    throughput_samples_per_s: float
    tokens_per_s: float
    model_flops_per_step: int
    """3 x forward GEMM FLOPs incl. attention scores (PaLM's model FLOPs, Chowdhery et al. 2022, app. B)."""
    mfu: float
    world_size: int
    peak_memory: Memory | None = None
    """The breakdown of the rank with the largest total: its kinds sum to ``peak_memory_bytes`` (``memory``'s
    per-kind maxima can come from different pipeline stages)."""
    feasible: bool = True
    reasons: tuple[str, ...] = field(default=())
    terms: dict[str, float] = field(default_factory=dict)
    """The step broken into ``TERMS`` (seconds per step, summing to ``step_time_s``)."""
    compute_parts_s: dict[str, float] = field(default_factory=dict)
    """``time_compute_s`` split into forward, backward and recompute seconds per step."""
    comm_total_s: dict[str, float] = field(default_factory=dict)
    """Per category, all the seconds its collectives take on the critical stage, hidden or not."""
    comm_latency_s: dict[str, float] = field(default_factory=dict)
    """Per category, the seconds of its collectives that do not grow with their bytes (``op_latency_s``: ring
    steps' latencies and fixed costs), on the stage rank that spends the most on them: where this nears
    ``comm_total_s``, fewer and larger messages, not a faster link, would shorten the communication."""
    link_time_s: dict[str, float] = field(default_factory=dict)
    """Per link level (``intra``, ``inter``), the busiest rank's seconds of communication over it."""
    data_time_s: float = 0.0
    """Preparing a step's input on the busiest rank (the record's ``time_data_s``), in or out of the step."""
    hardware_flops_per_step: int = 0
    """Model FLOPs plus recomputation (``hardware_flops_per_step``)."""
    hfu: float = 0.0
    """Hardware FLOPs utilisation: hardware FLOPs / (step time x ranks x peak). Compare it with figures
    that count recomputation (Megatron-LM's achieved teraFLOP/s, MosaicML's HFU); ``mfu`` with PaLM-style
    MFU (torchtitan, Llama 3, MosaicML's MFU)."""
    slowest_device: float = 1.0
    """The compute of the step's slowest device over a typical one's (``timing.slowest_of``): the share of
    ``time_compute_s`` that the spread of the devices' speed adds is 1 - 1 / this."""

    def as_dict(self) -> dict:
        d = dict(vars(self))
        d["memory"] = self.memory.as_dict()
        d["peak_memory"] = self.peak_memory.as_dict() if self.peak_memory else None
        d["reasons"] = list(self.reasons)
        return d


def is_inter_node(c: Cluster, layout: Layout, group: str) -> bool:
    """Megatron's rank order (tp innermost, then cp, dp, pp): a group leaves the node when its span does."""
    g, inner = c.gpus_per_node, layout.tp * layout.cp
    if group == "tp":
        return layout.tp > g
    if group == "cp":
        return inner > g
    if group == "dp":
        return layout.tp * layout.shard_group > g
    if group == "replicate":
        return inner * layout.dp > g
    if group == "pp":
        return inner * layout.dp >= g
    if group == "ep":  # ep consecutive dp ranks; folded over whole experts, ep consecutive ranks
        return (1 if layout.whole_experts else inner) * layout.ep > g
    if group == "edp":  # the ranks holding the same experts stride over the whole dp dimension
        return layout.tp * layout.shard_group > g
    return layout.world_size > g


def ranks_per_node(c: Cluster, layout: Layout, group: str) -> int:
    """How many ranks of one ``group`` share a node under the same rank order (tp innermost, then dp, pp)."""
    g, inner = c.gpus_per_node, layout.tp * getattr(layout, "cp", 1)
    if group == "tp":
        return min(layout.tp, g)
    if group == "dp":
        return 1 if inner >= g else min(layout.dp, g // inner)
    if group == "world":
        return min(layout.world_size, g)
    if group == "ep":
        if layout.whole_experts:
            return min(layout.ep, g)
        return 1 if inner >= g else min(layout.ep, g // inner)
    return 1


def _placement(c: Cluster, layout: Layout, op: CommOp) -> dict:
    """How an op's group sits on the cluster, as ``collective_time_s`` and ``collective_cost_s`` take it."""
    return {"inter_node": is_inter_node(c, layout, op.group), "rails": ranks_per_node(c, layout, op.group),
            "burst": op.burst, "tp": op.group == "tp",
            "fsdp": op.phase == "gather" or (layout.zero == 3 and op.kind == "reduce_scatter")}


def op_time_s(c: Cluster, layout: Layout, op: CommOp, per: int = 1) -> float:
    """Seconds of ``op.count / per`` executions of the op."""
    return op.count / per * collective_time_s(c, op.kind, op.payload, op.n, **_placement(c, layout, op))


def op_latency_s(c: Cluster, layout: Layout, op: CommOp) -> float:
    """Of ``op_time_s``, the seconds that do not grow with the op's bytes: ``collective_cost_s``'s fixed part
    (ring steps' latencies and fixed costs, a calibrated fit's alpha and in-step overhead), per execution."""
    if op.n <= 1 or (op.payload <= 0 and op.kind != "barrier"):
        return 0.0
    return op.count * collective_cost_s(c, op.kind, op.n, **_placement(c, layout, op))[0]


@dataclass(frozen=True)
class StageTime:
    """One pipeline stage rank: compute per micro-batch, exposed communication, optimizer and the rest."""

    chunk: ChunkTime
    """Compute per micro-batch."""
    exposed_mb: float
    """Intermediate communication on the critical path per micro-batch (tensor, pipeline, context)."""
    exposed_tail: dict[str, float]
    """Per category, exposed seconds per step outside the micro-batch beat (gradients, gathers, scatters)."""
    optimizer: float
    other: float
    comm_total: dict[str, float]
    link: dict[str, float]
    comm_latency: dict[str, float] = field(default_factory=dict)
    """Per category, the seconds of ``comm_total`` that do not grow with the bytes (``op_latency_s``)."""
    data: float = 0.0
    """Seconds to prepare the rank's input for one step (in ``other`` only when the data is in the step)."""
    drainable: float = 0.0
    """Of ``exposed_tail["parameter"]``, the gradient reduction's exposed seconds after this rank's last backward."""
    between: float = 0.0
    """Of ``chunk``'s seconds per micro-batch, those between operators (``Cluster.between_op_s``, and the
    wrappers' share, ``parbench.sim.framework.between_operators_s``): ``other``."""

    @property
    def beat(self) -> float:
        return self.chunk.total + self.exposed_mb

    @property
    def tail(self) -> float:
        return sum(self.exposed_tail.values()) + self.optimizer + self.other


def _op_costs(c: Cluster, layout: Layout, ops: Sequence[CommOp]) -> dict[CommOp, tuple[float, float]]:
    """Each distinct op's (``op_time_s``, ``op_latency_s``), worked out once for a stage rank's ops."""
    out: dict[CommOp, tuple[float, float]] = {}
    for op in ops:
        if op in out:
            continue
        if op.n <= 1 or (op.payload <= 0 and op.kind != "barrier"):
            out[op] = (0.0, 0.0)
            continue
        fixed, per_byte = collective_cost_s(c, op.kind, op.n, **_placement(c, layout, op))
        out[op] = (op.count * (fixed + per_byte * op.payload), op.count * fixed)
    return out


def _seconds(costs: dict[CommOp, tuple[float, float]], ops: Sequence[CommOp], pick) -> float:
    return sum(costs[op][0] for op in ops if pick(op))


def _links(c: Cluster, layout: Layout, ops: Sequence[CommOp], costs: dict[CommOp, tuple[float, float]]) -> dict[str, float]:
    out = {"intra": 0.0, "inter": 0.0}
    for op in ops:
        out["inter" if is_inter_node(c, layout, op.group) else "intra"] += costs[op][0]
    return out


def _micro_batch_exposed(c: Cluster, layout: Layout, ops: Sequence[CommOp], chunk: ChunkTime,
                         costs: dict[CommOp, tuple[float, float]]) -> float:
    """Tensor-parallel, pipeline and context-parallel traffic per micro-batch, after its overlap rule."""
    m, hide = layout.micro_batches, c.overlap
    tp = _seconds(costs, ops, lambda op: op.group == "tp") / m
    pp = _seconds(costs, ops, lambda op: op.group == "pp" and op.phase in ("forward", "backward")) / m
    cp = _seconds(costs, ops, lambda op: op.group == "cp") / m
    ep = _seconds(costs, ops, lambda op: op.group == "ep") / m
    return (expert_exchange_exposed_s(ep, chunk.total, overlap=layout.moe_a2a_overlap, hide=hide,
                                      interference=c.overlap_interference)
            + tensor_parallel_exposed_s(tp, chunk.gemm, layout.tp, overlap=layout.tp_comm_overlap, hide=hide)
            + pipeline_send_exposed_s(pp, chunk.total, overlap=layout.overlap_p2p_comm, hide=hide,
                                      interference=c.overlap_interference)
            + context_parallel_exposed_s(cp, chunk.attention, layout.cp, hide=hide))


def chunk_shares(layout: Layout, st: Stage) -> tuple[float, ...]:
    """Each model chunk's share of a stage rank's parameters, in its order on the rank, where Megatron-Core's
    interleaved schedule syncs the chunks one by one (``overlap.chunked_gradient_exposed_s``); else ()."""
    if not layout.megatron_grad_buckets or layout.v <= 1:
        return ()
    numels = [sum(n) for n in st.chunk_local_numels(layout.tp)]
    return tuple(n / sum(numels) for n in numels) if len(numels) == layout.v and sum(numels) else ()


def _parameter_exposed(c: Cluster, layout: Layout, ops: Sequence[CommOp], chunk: ChunkTime,
                       costs: dict[CommOp, tuple[float, float]], *, ps: bool, shares: tuple[float, ...] = ()) -> float:
    """Data-parallel gradient (and FSDP gather) traffic after overlap with the compute it may hide under.
    ``shares``: ``chunk_shares``."""
    grad = [op for op in ops if op.phase == "grad"]
    gather = [op for op in ops if op.phase == "gather"]
    g_s = _seconds(costs, grad, lambda op: True)
    if gather:  # FSDP: gathers and reduce-scatters share the dp link through forward and backward
        a_s = _seconds(costs, gather, lambda op: True)
        gathers, scatters = fsdp_rounds(layout)
        units = sum(op.count for op in gather) // gathers  # identical units are merged into one op
        if c.cores and layout.pp == 1:
            # a CPU computes as its host thread issues. FSDP2's forward gathers wait in full (its implicit
            # prefetch is a host running ahead of a device), and it calls its reduce-scatter synchronously
            # (``foreach_reduce``: a GPU runs it on a stream of its own). Only its explicit backward prefetch,
            # the next unit's gather issued before this unit's backward, can hide.
            forward = a_s * layout.micro_batches / gathers  # one forward gather per micro-batch (ZeRO-3: of two)
            hidden = prefetch_exposed_s(a_s - forward, layout.micro_batches * chunk.backward, units,
                                        hide=c.overlap, interference=c.overlap_interference)
            return forward + g_s + hidden
        # the micro-batches whose compute the rounds run under: every one where each re-gathers, else one
        window = min(layout.micro_batches, max(gathers, scatters)) * chunk.total
        return prefetch_exposed_s(a_s + g_s, window, units, hide=c.overlap, interference=c.overlap_interference)
    buckets = 0 if (layout.flat_grad_allreduce or ps) else sum(op.count for op in grad)
    if shares and buckets:  # the first chunk's buckets, every other chunk one (``comm.ddp_bucket_counts``)
        return chunked_gradient_exposed_s(g_s, shares, (chunk.backward + chunk.recompute) / layout.v,
                                          min(layout.pp, layout.micro_batches), buckets - len(shares) + 1,
                                          hide=c.overlap, interference=c.overlap_interference)
    return gradient_exposed_s(g_s, chunk.backward + chunk.recompute, buckets, hide=c.overlap,
                              interference=c.overlap_interference)


def _stage_time(c: Cluster, model: ModelSpec, layout: Layout, st: Stage, ops: Sequence[CommOp], slow: float,
                *, ps: bool = False, chunks: dict | None = None) -> StageTime:
    """``chunks``: chunk times already worked out for this layout, by their units' shapes and ends (an interleaved
    pipeline's chunks are mostly alike)."""
    chunk, chunks = ZERO_TIME, {} if chunks is None else chunks
    for ch, units in zip(st.chunks, st.modules):
        key = (tuple(u.shape_key for u in units), ch.first, ch.last)
        if key not in chunks:
            chunks[key] = chunk_times_s(c, model, layout, units, first=ch.first, last=ch.last)
        chunk = chunk + chunks[key]
    over = oversubscription(c, layout.world_size)  # host work slows as compute does when cores are shared
    wrappers = micro_batch_overheads_s(c, model, layout, st)
    host = sum(wrappers.values()) * over
    chunk = chunk.scaled(slow * c.work_scale) + ChunkTime(host / 3, 2 * host / 3, 0.0, 0.0, 0.0)  # as the compute it wraps
    # the share of tensor parallelism's in-step collective overhead that the rank computes (``tp_host_s``)
    tp_host = {ph: sum(op.count * tp_host_s(c, op.kind, op.n) for op in ops
                       if op.group == "tp" and op.phase == ph and op.n > 1 and op.payload > 0) / layout.micro_batches
               for ph in ("forward", "backward")}
    if tp_host["forward"] or tp_host["backward"]:
        chunk = chunk + ChunkTime(tp_host["forward"], tp_host["backward"], 0.0, 0.0, 0.0)
    params, grads, optim, tensors = state_numels(model, layout, st)
    if layout.fp32_grad_pass_per_micro_batch:  # part of every micro-batch's backward
        chunk = chunk + ChunkTime(0.0, fp32_grad_pass_s(c, params) * slow, 0.0, 0.0, 0.0)
    costs = _op_costs(c, layout, ops)
    tail = dict.fromkeys(CATEGORIES, 0.0)
    shares = chunk_shares(layout, st)
    tail["parameter"] = _parameter_exposed(c, layout, ops, chunk, costs, ps=ps, shares=shares)
    # a gradient reduction that follows the rank's last backward (FSDP's gathers run under its forwards too)
    drainable = 0.0 if any(op.phase == "gather" for op in ops) else tail["parameter"]
    gathers = [op for op in ops if op.phase == "next_forward"]  # under the next step's first forward
    if gathers and shares:
        tail["parameter"] += chunked_gather_exposed_s(_seconds(costs, gathers, lambda op: True), shares,
                                                      chunk.forward / layout.v, min(layout.pp, layout.micro_batches),
                                                      sum(op.count for op in gathers) - len(shares) + 1,
                                                      hide=c.overlap, interference=c.overlap_interference)
    elif gathers:
        tail["parameter"] += prefetch_exposed_s(_seconds(costs, gathers, lambda op: True), chunk.forward,
                                                sum(op.count for op in gathers), hide=c.overlap,
                                                interference=c.overlap_interference)
    for op in ops:
        if op.phase == "step":  # before or after the compute: nothing to hide under
            tail[op.category] += costs[op][0]
    if layout.moe_a2a_overlap:  # the first forward and the last backward have no micro-batch to pair with
        tail["intermediate"] += _seconds(costs, ops, lambda op: op.group == "ep") / layout.micro_batches
    totals = {k: _seconds(costs, ops, lambda op, k=k: op.category == k) for k in CATEGORIES}
    latency = {k: sum(costs[op][1] for op in ops if op.category == k) for k in CATEGORIES}
    data = data_time_s(c, model, _data_samples(layout)) * slow if (st.chunks[0].first or st.chunks[-1].last) else 0.0
    other = data if layout.data_in_step else 0.0  # else prepared ahead of the step, off its critical path
    operators = sum(training_ops(model, units, first=ch.first, last=ch.last) for ch, units in zip(st.chunks, st.modules))
    return StageTime(chunk=chunk, exposed_mb=_micro_batch_exposed(c, layout, ops, chunk, costs), exposed_tail=tail,
                     drainable=drainable,
                     optimizer=_optimizer_s(c, model, layout, st, optim, tensors, grads) * slow
                     + optimizer_overhead_s(c, model, layout, st) * over, other=other, data=data,
                     comm_total=totals, link=_links(c, layout, ops, costs), comm_latency=latency,
                     between=operators * min(c.between_op_s, c.training_op_overhead_s) * slow
                     + between_operators_s(c, wrappers) * over)


def _optimizer_s(c: Cluster, model: ModelSpec, layout: Layout, st: Stage, elements: int, tensors: int,
                 grads: int) -> float:
    """The stage's optimizer step and zero_grad on its slowest rank. torch's ZeroRedundancyOptimizer (the
    runner's ZeRO-1) gives each rank whole tensors (``zero1_shards``), so one rank may own few large tensors
    and another many small ones: with a cost per operator the one with more tensors can take longer although
    it holds fewer elements. It zeroes every gradient, its shard's or not (its ``param_groups`` hold every
    parameter; ``Optimizer.zero_grad`` walks them)."""
    passes = optimizer_pass_bytes_per_element(layout)
    if layout.zero == 1 and layout.fsdp2:
        numels = stage_local_numels(model, layout.pp, layout.split, layout.tp)[st.rank]
        return max(optimizer_time_s(c, model, sum(shard), len(shard), grads, layout.fused_elementwise,
                                    zeroed_tensors=len(numels), pass_bytes=passes)
                   for shard in zero1_shards(numels, layout.shard_group))
    return optimizer_time_s(c, model, elements, tensors, grads, layout.fused_elementwise, pass_bytes=passes)


def _data_samples(layout: Layout) -> int:
    """Samples one rank prepares per step: its replica's share, or the whole batch where rank 0 scatters it."""
    from parbench.config import DataMode

    return layout.global_batch_size if layout.data_mode is DataMode.RANK0 else layout.per_replica_batch


def step_terms(cluster: Cluster, layout: Layout, times: list[StageTime], extra_parameter_s: float = 0.0) -> dict[str, float]:
    """The ``TERMS`` of one step: the slowest stage sets the beat (compute, intermediate, bubble), the stage
    with the longest tail sets the rest (the runner's timed steps run back to back: no barrier). A stage's tail
    starts earlier the later the stage: in the cooldown the last micro-batch's gradient walks back through the
    ranks, so rank r finishes its backward one chunk-backward of each earlier rank before rank 0 does, and that
    much of its gradient reduction (``StageTime.drainable``) runs while they compute (Megatron-Core leaves these
    stages' gradients in one bucket for that reason: ``comm.ddp_bucket_counts``). Then no link may carry more
    than its bandwidth: a shortfall against the busiest link is exposed communication."""
    m, v = layout.micro_batches, layout.v
    beat = max(times, key=lambda t: t.beat)
    drained, slack = [], 0.0  # per stage, the seconds of its reduction the earlier stages' drain hides
    for t in times:
        drained.append(min(t.drainable, slack))
        slack += (t.chunk.backward + t.chunk.recompute) / v
    r = max(range(len(times)), key=lambda i: times[i].tail - drained[i])
    last = times[r]
    terms = {"time_compute_s": m * (beat.chunk.total - beat.between),
             "time_comm_exposed_data_s": last.exposed_tail["data"],
             "time_comm_exposed_parameter_s": last.exposed_tail["parameter"] - drained[r] + extra_parameter_s,
             "time_comm_exposed_intermediate_s": m * beat.exposed_mb + last.exposed_tail["intermediate"],
             "time_bubble_s": (sum(t.beat for t in times) - beat.beat) / v,  # the other stages fill and drain
             "time_optimizer_s": last.optimizer, "time_other_s": last.other + m * beat.between}
    busiest = max(max(t.link.values()) for t in times) + extra_parameter_s
    shortfall = busiest - sum(terms.values())
    totals = comm_totals(times, extra_parameter_s)
    for k in sorted(CATEGORIES, key=lambda k: -totals[k]):  # the link, not the compute, bounds this step
        if shortfall <= 0:
            break
        key = f"time_comm_exposed_{k}_s"
        add = min(shortfall, totals[k] - terms[key])
        terms[key] += max(add, 0.0)
        shortfall -= max(add, 0.0)
    return terms


def comm_totals(times: list[StageTime], extra_parameter_s: float = 0.0) -> dict[str, float]:
    """Per category, the most seconds any stage rank spends in its collectives (hidden or not)."""
    return {k: max(t.comm_total[k] for t in times) + (extra_parameter_s if k == "parameter" else 0.0) for k in CATEGORIES}


def ranks_memory(model: ModelSpec, layout: Layout, cluster: Cluster) -> list[Memory]:
    """What each rank of a distinct kind holds at its peak (every pipeline stage; a parameter server's worker
    and server), ``model`` whole as given: each MoE layer's experts/ep a rank."""
    model = expert_local(model, layout.ep, layout.whole_experts)
    if layout.strategy is Strategy.PS:
        return ps_memory(model, layout)
    return stages_memory(model, layout, stages(model, layout.pp, layout.split), cluster)


def memory_shortfall(mems: Sequence[Memory], cluster: Cluster) -> str:
    """Why the busiest rank does not fit on the device (its peak and what makes it up), or '' where it fits."""
    worst = max(mems, key=lambda mm: mm.total_bytes)
    if worst.total_bytes <= cluster.memory_bytes:
        return ""
    return (f"needs {format_bytes(worst.total_bytes)} per rank > {format_bytes(cluster.memory_bytes)} ("
            + ", ".join(f"{k.removesuffix('_bytes')} {format_bytes(v)}" for k, v in worst.as_dict().items() if v) + ")")


def predict(model: ModelSpec, layout: Layout, cluster: Cluster, *, memory: Sequence[Memory] = ()) -> Prediction:
    """Predict one layout; infeasible (memory) layouts are still predicted, with ``reasons``. ``memory``: the
    layout's ``ranks_memory``, where the caller has it already (a search checks the fit first)."""
    mems = list(memory) or ranks_memory(model, layout, cluster)
    model = expert_local(model, layout.ep, layout.whole_experts)  # experts/ep of each MoE layer a rank
    ops = rank_ops(model, layout)
    cats = {name: bytes_by_category(o) for name, o in ops.items()}
    comm_bytes = {k: max(c[k] for c in cats.values()) for k in CATEGORIES}
    busiest = max(ops, key=lambda name: sum(cats[name].values()))
    sts = stages(model, layout.pp, layout.split)
    kinds = [mm.as_dict() for mm in mems]
    memory = Memory(**{k: max(d[k] for d in kinds) for k in kinds[0]})
    slowest = slowest_of(cluster, layout.world_size)
    slow = oversubscription(cluster, layout.world_size) * cluster.step_scale * slowest
    ps = layout.strategy is Strategy.PS
    times, timed, chunks = [], {}, {}
    for st in sts:
        mine = ops.get(f"stage{st.rank}", ops.get("worker", ()))
        key = (st.shape_key, tuple(mine))  # a pipeline's middle stages: the same shapes and ops, timed once
        if key not in timed:
            timed[key] = _stage_time(cluster, model, layout, st, mine, slow, ps=ps, chunks=chunks)
        times.append(timed[key])
    server_s = sum(op_time_s(cluster, layout, op) for op in ops["server"]) if ps else 0.0
    server_latency = sum(op_latency_s(cluster, layout, op) for op in ops["server"]) if ps else 0.0
    terms = step_terms(cluster, layout, times, server_s)
    step = sum(terms.values())
    flops = 3 * model.forward_flops_per_sample * layout.global_batch_size
    hw_flops = hardware_flops_per_step(model, layout)
    worst = max(mems, key=lambda mm: mm.total_bytes)
    peak = worst.total_bytes
    shortfall = memory_shortfall(mems, cluster)
    reasons = (shortfall,) if shortfall else ()
    beat = max(times, key=lambda t: t.beat)
    m = layout.micro_batches
    parts = {"forward": m * beat.chunk.forward, "backward": m * beat.chunk.backward, "recompute": m * beat.chunk.recompute}
    mfu_peak = cluster.mfu_peak_flops(layout.precision.gemm_dtype)
    return Prediction(
        comm_bytes=comm_bytes, comm_total_bytes=sum(cats[busiest].values()),
        comm_by_collective=by_collective(ops[busiest]), memory=memory, peak_memory_bytes=peak, peak_memory=worst,
        step_time_s=step, compute_time_s=terms["time_compute_s"], bubble_time_s=terms["time_bubble_s"],
        comm_time_s=sum(terms[f"time_comm_exposed_{k}_s"] for k in CATEGORIES),
        throughput_samples_per_s=layout.global_batch_size / step,
        tokens_per_s=layout.global_batch_size * model.tokens_per_sample / step, model_flops_per_step=flops,
        mfu=flops / (step * layout.world_size * mfu_peak), world_size=layout.world_size,
        feasible=not reasons, reasons=reasons, terms=terms, compute_parts_s=parts,
        comm_total_s=comm_totals(times, server_s), data_time_s=max(t.data for t in times),
        comm_latency_s={k: max(t.comm_latency[k] for t in times) + (server_latency if k == "parameter" else 0.0)
                        for k in CATEGORIES},
        link_time_s={k: max(t.link[k] for t in times) for k in ("intra", "inter")},
        hardware_flops_per_step=hw_flops, hfu=hw_flops / (step * layout.world_size * mfu_peak), slowest_device=slowest)


def hardware_flops_per_step(model: ModelSpec, layout: Layout) -> int:
    """FLOPs the devices really execute: the model FLOPs plus the recomputed forwards (full: the whole
    forward of ``recomputed_fraction`` of the layers; selective: the eager attention core; ops: half the
    GEMMs outside the attention core) and flash
    attention's backward recompute of QK^T. Narayanan et al. 2021's eq. (3) ("achieved teraFLOP/s")
    and MosaicML's HFU count this way; MFU (PaLM, Chowdhery et al. 2022, app. B) does not."""
    gemm, core = _unit_flops(model)
    extra = layout.recomputed_fraction * gemm
    if layout.recompute is Recompute.SELECTIVE and layout.attention == "eager":
        extra += core
    if layout.recompute is Recompute.OPS:  # every other GEMM outside the attention core runs again
        extra += (gemm - core) / 2
    if layout.attention == "flash":
        extra += core / 2  # the QK^T half of the core runs again in backward
    return int((3 * model.forward_flops_per_sample + extra) * layout.global_batch_size)


@lru_cache(maxsize=256)
def _unit_flops(model: ModelSpec) -> tuple[int, int]:
    """Forward FLOPs per sample of the layers' GEMMs, and of their attention core (QK^T and AV)."""
    return (sum(g.flops for u in model.units for g in u.gemms),
            sum(g.flops for u in model.units for g in u.gemms if g.batched > 1))


def format_bytes(n: float) -> str:
    """Binary units (2^30 = GiB, 2^40 = TiB), as nvidia-smi and torch report device memory."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"
