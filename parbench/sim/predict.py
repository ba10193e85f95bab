"""One prediction: bytes, memory, time, throughput and MFU of a layout on a cluster, per rank and step.

Step time of the slowest pipeline stage (Narayanan et al., SC 2021, sec. 2.2): (m + (p-1)/v) x
(t_f + t_b + per-micro-batch communication), i.e. the bubble fraction (p-1)/(v m); plus the data-parallel
gradient communication not hidden under the last backward (Li et al., VLDB 2020: bucketed all-reduce
overlaps backward), plus the optimizer step. MFU = model FLOPs / (step time x world size x peak)
(Chowdhery et al., PaLM, 2022, appendix B).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parbench.config import Strategy
from parbench.sim.comm import CATEGORIES, CommOp, by_collective, bytes_by_category, rank_ops
from parbench.sim.hardware import Cluster, collective_time_s
from parbench.sim.layout import Layout
from parbench.sim.memory import Memory, ps_memory, stage_memory, state_numels
from parbench.sim.model import ModelSpec
from parbench.sim.stages import stages
from parbench.sim.timing import chunk_times_s, data_time_s, optimizer_time_s, oversubscription


@dataclass(frozen=True)
class Prediction:
    comm_bytes: dict[str, int]
    """Per category, the max over ranks (as the record's comm_*_bytes_per_step)."""
    comm_total_bytes: int
    comm_by_collective: dict[str, int]
    memory: Memory
    """Each kind: the max over ranks (as the record's mem_*_bytes)."""
    peak_memory_bytes: int
    """The largest per-rank total (params + grads + optimizer + activations)."""
    step_time_s: float
    compute_time_s: float
    bubble_time_s: float
    comm_time_s: float
    """Communication on the critical path (tensor/pipeline per micro-batch + exposed gradient traffic)."""
    throughput_samples_per_s: float
    tokens_per_s: float
    model_flops_per_step: int
    mfu: float
    world_size: int
    feasible: bool = True
    reasons: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        d = dict(vars(self))
        d["memory"] = dict(vars(self.memory))
        d["reasons"] = list(self.reasons)
        return d


def is_inter_node(c: Cluster, layout: Layout, group: str) -> bool:
    """Megatron's rank order (tp innermost, then dp, then pp): a group leaves the node when its span does."""
    g = c.gpus_per_node
    if group == "tp":
        return layout.tp > g
    if group == "dp":
        return layout.tp * layout.dp > g
    if group == "pp":
        return layout.tp * layout.dp >= g
    return layout.world_size > g


def op_time_s(c: Cluster, layout: Layout, op: CommOp, per: int = 1) -> float:
    """Seconds of ``op.count / per`` executions of the op."""
    return op.count / per * collective_time_s(c, op.kind, op.payload, op.n, inter_node=is_inter_node(c, layout, op.group))


def _stage_time(c: Cluster, model: ModelSpec, layout: Layout, st, ops: list[CommOp], slow: float) -> dict[str, float]:
    m = layout.micro_batches
    fwd = bwd = 0.0
    for chunk, units in zip(st.chunks, st.modules):
        f, b = chunk_times_s(c, model, layout, units, first=chunk.first, last=chunk.last)
        fwd, bwd = fwd + f * slow, bwd + b * slow
    per_mb = sum(op_time_s(c, layout, op, per=m) for op in ops if op.phase in ("forward", "backward"))
    grad = sum(op_time_s(c, layout, op) for op in ops if op.phase == "grad")
    gather = sum(op_time_s(c, layout, op) for op in ops if op.phase == "gather")
    serial = sum(op_time_s(c, layout, op) for op in ops if op.phase == "step")
    exposed = max(grad - c.overlap * bwd, 0.0) + max(gather - c.overlap * m * (fwd + bwd), 0.0)
    params, grads, optim, tensors = state_numels(model, layout, st)
    opt = optimizer_time_s(c, model, optim, tensors, grads) * slow
    if st.chunks[0].first or st.chunks[-1].last:  # ranks that feed inputs or score targets build the batch
        opt += data_time_s(c, model, layout.global_batch_size) * slow
    return {"mb": fwd + bwd + per_mb, "compute": fwd + bwd, "tp_pp": per_mb, "tail": exposed + serial + opt}


def predict(model: ModelSpec, layout: Layout, cluster: Cluster) -> Prediction:
    """Predict one layout; infeasible (memory) layouts are still predicted, with ``reasons``."""
    ops = rank_ops(model, layout)
    cats = {name: bytes_by_category(o) for name, o in ops.items()}
    comm_bytes = {k: max(c[k] for c in cats.values()) for k in CATEGORIES}
    busiest = max(ops, key=lambda name: sum(cats[name].values()))
    sts = stages(model, layout.pp, layout.v)
    mems = ps_memory(model, layout) if layout.strategy is Strategy.PS else [stage_memory(model, layout, st) for st in sts]
    memory = Memory(*(max(getattr(mm, k) for mm in mems) for k in ("param_bytes", "grad_bytes", "optim_bytes", "activation_bytes")))
    slow = oversubscription(cluster, layout.world_size) * cluster.step_scale
    times = [_stage_time(cluster, model, layout, st, ops.get(f"stage{st.rank}", ops.get("worker", [])), slow) for st in sts]
    m, p, v = layout.micro_batches, layout.pp, layout.v
    t_mb = max(t["mb"] for t in times)
    bubble = (p - 1) / v * t_mb
    tail = max(t["tail"] for t in times)
    if layout.strategy is Strategy.PS:
        tail += sum(op_time_s(cluster, layout, op) for op in ops["server"])
    # the runner closes every timed step with a barrier (calibrated profiles carry its measured cost)
    barrier = collective_time_s(cluster, "barrier", 0, layout.world_size, inter_node=False) if "barrier" in cluster.collectives else 0.0
    step = m * t_mb + bubble + tail + barrier
    flops = 3 * model.forward_flops_per_sample * layout.global_batch_size
    peak = max(mm.total_bytes for mm in mems)
    reasons = ()
    if peak > cluster.memory_bytes:
        reasons = (f"needs {peak / 2**30:.1f} GiB per rank > {cluster.memory_bytes / 2**30:.1f} GiB "
                   f"(params {memory.param_bytes / 2**30:.1f}, grads {memory.grad_bytes / 2**30:.1f}, "
                   f"optimizer {memory.optim_bytes / 2**30:.1f}, activations {memory.activation_bytes / 2**30:.1f} GiB)",)
    comm_crit = max(t["tp_pp"] for t in times) * m + tail
    return Prediction(
        comm_bytes=comm_bytes, comm_total_bytes=sum(cats[busiest].values()),
        comm_by_collective=by_collective(ops[busiest]), memory=memory, peak_memory_bytes=peak,
        step_time_s=step, compute_time_s=max(t["compute"] for t in times) * m, bubble_time_s=bubble,
        comm_time_s=comm_crit, throughput_samples_per_s=layout.global_batch_size / step,
        tokens_per_s=layout.global_batch_size * model.tokens_per_sample / step, model_flops_per_step=flops,
        mfu=flops / (step * layout.world_size * cluster.peak_flops), world_size=layout.world_size,
        feasible=not reasons, reasons=reasons)
