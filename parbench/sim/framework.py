"""Host work of torch's distributed wrappers, per micro-batch and per optimizer step.

torch's tensor parallelism and FSDP2 hold parameters as DTensors; every operator on a DTensor goes
through DTensor's Python dispatch (sharding propagation, wrapping and unwrapping the local tensor), and
FSDP2 runs Python hooks around each unit (copying parameters into and out of the flat all-gather
buffer, one DTensor per parameter). On a CPU this host time adds to the step; on a GPU the host queues
kernels ahead of the device, so it hides unless the host is the bottleneck, and the GPU presets leave
these costs at 0.

Measured on this machine by ``parbench calibrate`` (``parbench.sim.calibrate.measure_framework``) on the
runner's own workloads in a one-rank process group, as differences against the same model without the
wrapper, so compute and communication (both modelled elsewhere) cancel:

- ``tp_linear_overhead_s`` and ``tp_byte_overhead_s``: one forward + backward of a Linear parallelised by
  ``parallelize_module``, and each byte its functional all-reduces carry (the same probe at two batch sizes:
  the fixed part per Linear, the part that grows with the activations per byte);
- ``fsdp_unit_overhead_s``, ``fsdp_param_overhead_s`` and ``fsdp_byte_overhead_s``: FSDP2's hooks for one
  micro-batch's forward + backward, per ``fully_shard`` unit, per parameter tensor in it and per byte of the
  parameters it gathers (the copies into and out of its flat buffers: the mlp probe at two widths, same
  units and tensors, gives the cost per byte; the two probes' equations then the rest);
- ``dtensor_op_overhead_s``: one optimizer operator on a DTensor parameter beyond the plain tensor's;
- ``pipeline_action_overhead_s``: torch.distributed.pipelining's schedule per micro-batch and stage, a
  one-stage schedule against the same micro-batches in a plain loop;
- ``ddp_param_overhead_s`` and ``ddp_byte_overhead_s``: DistributedDataParallel's reducer per parameter tensor
  (its autograd hook) and per gradient byte (the copies into and out of its buckets), one micro-batch's
  forward + backward against the plain model, the two probes' equations solved;
- ``tracing_fsdp_scale``, ``tracing_tp_scale`` and their ``*_between_share``: FSDP2's and tensor parallelism's
  cost again, untraced and traced as the step-time breakdown traces a step, each beside its plain twin: the
  traced cost as a multiple of the untraced, and the share of it on the calling thread outside every operator
  (the hooks' and DTensor's Python), which a traced step's breakdown reads as "other" (``Cluster.traced``).

FSDP2 skips its all-gather and reduce-scatter paths on a one-rank mesh (it copies the shard straight into
the unsharded parameter), so its costs are measured on a two-rank group whose collectives do nothing
(torch's fake process group): the copy into and out of the flat all-gather buffer, the reduce-scatter's
copy-in of the gradients, and the Python around both, as FSDP2 runs them on two or more ranks. Tensor
parallelism is measured there too, against a plain model with one rank's shard shapes: on one rank DTensor
has no partial sums to reduce, so its redistribution and functional collectives never run.
"""

from __future__ import annotations

from parbench.config import Strategy
from parbench.sim.comm import tp_ops
from parbench.sim.hardware import Cluster
from parbench.sim.layout import Layout
from parbench.sim.model import ModelSpec
from parbench.sim.stages import Stage
from parbench.sim.timing import ADAMW_OPS_PER_TENSOR, SGD_OPS_PER_TENSOR


def wraps_with_torch(layout: Layout) -> tuple[bool, bool]:
    """(torch tensor parallelism, torch FSDP2) on this layout: the runner's layouts use both."""
    return layout.fsdp2 and layout.tp > 1, layout.fsdp2 and layout.zero >= 2 and layout.shard_group > 1


def _wrapped_linears(stage: Stage) -> set[str]:
    """Module names of the Linears ``parallelize_module`` wraps in the stage: one sharded weight each."""
    return {t.name.removesuffix(".weight") for t in stage.tensors if t.tp_split != "none"
            and t.name.endswith(".weight") and not t.name.startswith(("pre.", "post."))}


def tp_linears(stage: Stage) -> int:
    """Linears torch's tensor parallelism wraps in the stage (column- or row-wise)."""
    return len(_wrapped_linears(stage))


def dtensor_params(layout: Layout, stage: Stage) -> int:
    """Parameter tensors of the stage that are DTensors: all under FSDP2; under torch tensor parallelism
    the parallelised Linears' weights and biases (a row-wise Linear's bias too, as a replicated DTensor)."""
    tp, fsdp = wraps_with_torch(layout)
    if fsdp:
        return len(stage.tensors)
    if not tp:
        return 0
    wrapped = _wrapped_linears(stage)
    return sum(1 for t in stage.tensors if t.name.rsplit(".", 1)[0] in wrapped)


def fsdp_units(stage: Stage) -> int:
    """``fully_shard`` units of the stage: one per layer, and one root per model chunk (embeddings, final
    norm, head, where the chunk holds them)."""
    return sum(len(units) for units in stage.modules) + len(stage.chunks)


def reduces_with_ddp(layout: Layout) -> bool:
    """The runner's replicated data parallelism (ddp, zero1, hybrid dp x tp) wraps the model in torch's DDP;
    its hybrid dp x pp all-reduces one flat buffer by hand instead."""
    return (layout.fsdp2 and layout.dp > 1 and layout.zero <= 1 and not layout.flat_grad_allreduce
            and layout.strategy in (Strategy.DDP, Strategy.ZERO1, Strategy.HYBRID))


def ddp_grad_bytes(layout: Layout, stage: Stage) -> int:
    """Bytes of the gradients DDP's buckets hold on a rank of ``stage`` (its tensor-parallel shards)."""
    return sum(t.local_numel(layout.tp) for t in stage.tensors) * layout.grad_elem_bytes


def fsdp_gathered_bytes(layout: Layout, stage: Stage) -> int:
    """Bytes of the parameters FSDP2 gathers on a rank of ``stage`` (its tensor-parallel shards, in the dtype
    they are gathered in)."""
    return sum(t.local_numel(layout.tp) for t in stage.tensors) * layout.gather_elem_bytes


def pipelines_with_torch(layout: Layout) -> bool:
    """The runner's pipelines are torch.distributed.pipelining schedules."""
    return layout.fsdp2 and layout.pp > 1


def tp_allreduce_bytes(model: ModelSpec, layout: Layout, stage: Stage) -> float:
    """Bytes the stage's tensor-parallel collectives carry per micro-batch (forward + backward)."""
    return sum(op.payload * op.count for op in tp_ops(model, layout, stage)) / layout.micro_batches


def micro_batch_overheads_s(c: Cluster, model: ModelSpec, layout: Layout, stage: Stage) -> dict[str, float]:
    """Host seconds each wrapper (``tp``, ``pipeline``, ``ddp``, ``fsdp``) adds to one micro-batch's forward +
    backward on a rank of ``stage`` (a pipeline's schedule: once per stage the rank holds)."""
    tp, fsdp = wraps_with_torch(layout)
    out = dict.fromkeys(("tp", "pipeline", "ddp", "fsdp"), 0.0)
    if tp:
        out["tp"] = tp_linears(stage) * c.tp_linear_overhead_s + tp_allreduce_bytes(model, layout, stage) * c.tp_byte_overhead_s
    if pipelines_with_torch(layout):
        out["pipeline"] = len(stage.chunks) * c.pipeline_action_overhead_s
    if reduces_with_ddp(layout):
        out["ddp"] = len(stage.tensors) * c.ddp_param_overhead_s + ddp_grad_bytes(layout, stage) * c.ddp_byte_overhead_s
    if fsdp:
        out["fsdp"] = (fsdp_units(stage) * c.fsdp_unit_overhead_s + len(stage.tensors) * c.fsdp_param_overhead_s
                       + fsdp_gathered_bytes(layout, stage) * c.fsdp_byte_overhead_s)
    return out


def micro_batch_overhead_s(c: Cluster, model: ModelSpec, layout: Layout, stage: Stage) -> float:
    """Host seconds the wrappers add to one micro-batch's forward + backward on a rank of ``stage``."""
    return sum(micro_batch_overheads_s(c, model, layout, stage).values())


def between_operators_s(c: Cluster, overheads: dict[str, float]) -> float:
    """Of the wrappers' host seconds (``micro_batch_overheads_s``), those between operators
    (``Cluster.fsdp_between_share`` and ``tp_between_share``: 0 in an untraced prediction). DDP's reducer runs
    in C++ autograd hooks and the pipeline's actions are a small part of its step: theirs stays in compute."""
    return overheads["fsdp"] * c.fsdp_between_share + overheads["tp"] * c.tp_between_share


def optimizer_overhead_s(c: Cluster, model: ModelSpec, layout: Layout, stage: Stage) -> float:
    """Host seconds the optimizer step spends dispatching its operators on DTensor parameters (the same
    operators per tensor as ``parbench.sim.timing.optimizer_time_s`` counts)."""
    ops = ADAMW_OPS_PER_TENSOR if model.optimizer == "adamw" else SGD_OPS_PER_TENSOR
    return dtensor_params(layout, stage) * ops * c.dtensor_op_overhead_s
