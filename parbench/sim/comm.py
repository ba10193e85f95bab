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

import math
from dataclasses import dataclass
from functools import lru_cache

from parbench.config import DataMode, Strategy
from parbench.metrics.conventions import sent_bytes
from parbench.sim.layout import Layout
from parbench.sim.model import ModelSpec, Tensor
from parbench.sim.stages import Stage, stages

DDP_FIRST_BUCKET_BYTES = 1024 * 1024  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DDP_BUCKET_BYTES = 25 * 1024 * 1024  # DistributedDataParallel(bucket_cap_mb=25)
CATEGORIES = ("data", "parameter", "intermediate")


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

    @property
    def sent(self) -> int:
        return self.count * sent_bytes(self.kind, self.payload, self.n, is_root=self.root)


def ddp_buckets(tensor_bytes: list[int]) -> list[int]:
    """Bucket sizes after the reducer's rebuild: tensors in reverse order, a bucket closes once it
    reaches its cap (1 MiB for the first, 25 MiB after), as torch's compute_bucket_assignment_by_size."""
    buckets, current, cap = [], 0, DDP_FIRST_BUCKET_BYTES
    for b in reversed(tensor_bytes):
        current += b
        if current >= cap:
            buckets.append(current)
            current, cap = 0, DDP_BUCKET_BYTES
    if current:
        buckets.append(current)
    return buckets


def zero1_shards(numels: list[int], n: int) -> list[list[int]]:
    """ZeroRedundancyOptimizer's partition: largest tensor first to the rank holding least (stable sort)."""
    sizes, shards = [0] * n, [[] for _ in range(n)]
    for numel in sorted(numels, key=lambda x: -x):
        r = sizes.index(min(sizes))
        shards[r].append(numel)
        sizes[r] += numel
    return shards


def fsdp_padded_numel(t: Tensor, tp: int, n: int) -> int:
    """FSDP2 pads dim 0 of every (tp-local) parameter to a multiple of n (Shard(0) via torch.chunk)."""
    numel = t.local_numel(tp)
    rows = t.shape[0] if t.tp_split != "rows" else -(-t.shape[0] // tp)
    return math.ceil(rows / n) * n * (numel // rows)


def fsdp_groups(stage: Stage, tp: int) -> list[list[Tensor]]:
    """fully_shard per unit, then the root with what is left (pre and post): one collective group each."""
    groups = [list(u.params) for mods in stage.modules for u in mods]
    root = [t for t in stage.tensors if t.name.startswith(("pre.", "post."))]
    return [g for g in groups + [root] if g]


def _grad_ops(model: ModelSpec, layout: Layout, stage: Stage, pb: int, dp_rank_worst: bool = True) -> list[CommOp]:
    """Data-parallel gradient/parameter traffic of one stage rank over the dp group."""
    n, tp = layout.dp, layout.tp
    if n == 1:
        return []
    tensor_bytes = [t.local_numel(tp) * pb for t in stage.tensors]
    if layout.zero <= 1:
        ops = [CommOp("all_reduce", "parameter", b, n, "dp", phase="grad") for b in ddp_buckets(tensor_bytes)]
        if layout.zero == 1:  # each rank broadcasts the parameters it owns after its optimizer step
            own = max(sum(s) for s in zero1_shards([t.local_numel(tp) for t in stage.tensors], n)) * pb
            ops.append(CommOp("broadcast", "parameter", own, n, "dp", root=True))
        return ops
    pad = (lambda t: fsdp_padded_numel(t, tp, n)) if layout.fsdp2 else (lambda t: t.local_numel(tp))
    ops = []
    gathers = 2 if layout.zero == 3 else 1
    for group in fsdp_groups(stage, tp):
        s = sum(pad(t) for t in group) * pb
        ops.append(CommOp("all_gather", "parameter", s, n, "dp", count=gathers, phase="gather"))
        ops.append(CommOp("reduce_scatter", "parameter", s, n, "dp", phase="grad"))
    return ops


def _tp_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Megatron f/g: per micro-batch, one all-reduce per row-wise output (forward) and per column-wise
    input that needs a gradient (backward); with sequence parallelism each becomes all-gather + reduce-scatter."""
    t, mb, ab = layout.tp, layout.micro_batch_size, layout.precision.activation_bytes
    if t == 1:
        return []
    m = layout.micro_batches
    ops = []
    for chunk, units in zip(stage.chunks, stage.modules):
        for i, u in enumerate(units, start=chunk.lo):
            fwd = [mb * u.tp_row_out * ab] * u.tp_row_allreduces
            needs_grad = not (i == 0 and not model.pre.params)  # the mlp's first layer reads raw data
            bwd = [mb * w * ab for w in u.tp_col_inputs] if needs_grad else []
            for phase, sizes in (("forward", fwd), ("backward", bwd)):
                for s in sizes:
                    kinds = ("all_gather", "reduce_scatter") if layout.sequence_parallel else ("all_reduce",)
                    ops += [CommOp(k, "intermediate", s, t, "tp", count=m, phase=phase) for k in kinds]
    return ops


def _pp_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """Per micro-batch: the activation forward from every chunk but the last, its gradient backward
    from every chunk but the first (send S; the receiver's recv counts 0)."""
    if layout.pp == 1:
        return []
    mb, ab, m = layout.micro_batch_size, layout.precision.activation_bytes, layout.micro_batches
    shard = layout.tp if layout.sequence_parallel else 1  # Megatron's scatter/gather optimisation
    ops = []
    for c in stage.chunks:
        if not c.last:
            ops.append(CommOp("send", "intermediate", mb * model.units[c.hi - 1].out_elems_per_sample * ab // shard,
                              2, "pp", count=m, phase="forward"))
        if not c.first:
            ops.append(CommOp("send", "intermediate", mb * model.units[c.lo - 1].out_elems_per_sample * ab // shard,
                              2, "pp", count=m, phase="backward"))
    return ops


def _data_ops(model: ModelSpec, layout: Layout, stage: Stage) -> list[CommOp]:
    """``rank0`` data mode: the dp group's first rank scatters inputs and labels (two scatters of the
    global batch); a pipeline's first stage sends the labels to the last stage."""
    if layout.data_mode is not DataMode.RANK0:
        return []
    ops = []
    first = stage.chunks[0].first
    if layout.dp > 1 and layout.strategy is not Strategy.PS and first:
        b = layout.global_batch_size
        ops += [CommOp("scatter", "data", b * model.input_bytes_per_sample, layout.dp, "dp", root=True),
                CommOp("scatter", "data", b * model.label_bytes_per_sample, layout.dp, "dp", root=True)]
    if layout.pp > 1 and first:
        ops.append(CommOp("send", "data", layout.per_replica_batch * model.label_bytes_per_sample, 2, "pp"))
    return ops


def _ps_ops(model: ModelSpec, layout: Layout) -> dict[str, list[CommOp]]:
    """Parameter server (Li et al., OSDI 2014) with k servers: each worker pushes its gradient shard to
    each server and pulls the parameters back; a server sends its shard to every worker."""
    k, workers = max(layout.servers, 1), layout.dp
    psi = model.param_numel * layout.precision.param_bytes
    shard = psi // k
    worker = [CommOp("send", "parameter", shard, 2, "world", count=k, phase="grad")]
    server = [CommOp("send", "parameter", shard, 2, "world", count=workers)]
    return {"worker": worker, "server": server}


def rank_ops(model: ModelSpec, layout: Layout) -> dict[str, list[CommOp]]:
    """Ops per distinct rank role: ``stage{s}`` (the worst dp rank of pipeline stage s), ps ``server``."""
    pb = layout.precision.grad_bytes
    if layout.strategy is Strategy.PS:
        return _ps_ops(model, layout)
    out = {}
    for st in stages(model, layout.pp, layout.v):
        out[f"stage{st.rank}"] = (_grad_ops(model, layout, st, pb) + _tp_ops(model, layout, st)
                                  + _pp_ops(model, layout, st) + _data_ops(model, layout, st))
    return out


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
