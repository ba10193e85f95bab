"""ZeRO (Rajbhandari et al., SC 2020) on torch's own machinery: ZeRO-1, ZeRO-2 and ZeRO-3/FSDP.

Per rank per step, with Psi the parameter bytes and n ranks (nccl-tests conventions):

- ``zero1``: DDP's ring all-reduce of the gradients, 2(n-1)/n x Psi, then every rank updates
  only its optimizer shard and broadcasts the parameters it owns (Psi_own bytes as the root).
  Textbook ZeRO-1 (reduce-scatter + all-gather) sends 2(n-1)/n x Psi in all; torch's
  ZeroRedundancyOptimizer all-reduces the full gradient instead, so it sends Psi_own more.
  Its parameters live in one flat bucket per owning rank (``parameters_as_bucket_view``), so the
  step ends in n broadcasts, one per rank's bucket, not one per parameter tensor (torch's default).
  Measured on the simulator check's decoder (4 layers, 69 tensors) at 2 gloo ranks on a 2-core
  machine, two runs each, alternating: a step of 121 and 127 ms broadcasting tensor by tensor (p10-p90
  112-139 and 122-141 ms), 102 and 98 ms by bucket (96-113 and 91-105 ms).
- ``zero2``: FSDP2 ``fully_shard(reshard_after_forward=False)``: one all-gather of the parameters
  (forward) and one reduce-scatter of the gradients (backward): 2(n-1)/n x Psi_padded.
- ``fsdp`` (ZeRO-3): parameters re-gathered for backward: 3(n-1)/n x Psi_padded.

Psi_padded: FSDP2 pads every parameter's dim 0 to a multiple of n. gloo performs reduce-scatter
as an all-reduce, so its wire bytes for that part are twice the convention (``comm_wire_bytes``).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer

from parbench.metrics.comm import Category
from parbench.metrics.memory import param_bytes
from parbench.strategies.base import RankContext, Trainer, replica_input, moe_fields
from parbench.strategies import precision
from parbench.strategies.data_parallel import sgd_step, wrap_ddp
from parbench.workloads.base import StagedModel


def padded_numel(shape: torch.Size | tuple[int, ...], n: int) -> int:
    """Elements of a parameter once FSDP2 pads its dim 0 to a multiple of n (Shard(0), torch.chunk)."""
    if not shape:
        return n  # a scalar becomes one element per rank
    rows = math.ceil(shape[0] / n) * n
    return rows * math.prod(shape[1:])


def fsdp_bytes_per_step(params: list[nn.Parameter], n: int, *, reshard_after_forward: bool) -> dict[str, int]:
    """Bytes one rank sends per step under FSDP2 when every module re-gathers alike.

    All-gathers: (n-1)/n x Psi_padded once (forward) or twice (forward, backward); reduce-scatter:
    (n-1)/n x Psi_padded. ``modeled`` is the textbook figure on unpadded Psi; ``wire`` counts
    gloo's reduce-scatter as the all-reduce it is (2x).
    """
    psi = param_bytes(params)
    padded = sum(padded_numel(tuple(p.shape), n) * p.element_size() for p in params)
    gathers = 2 if reshard_after_forward else 1
    one = lambda size: (n - 1) * size // n  # noqa: E731 - all-gather / reduce-scatter share (n-1)/n x S
    return {"modeled": (gathers + 1) * one(psi), "counted": (gathers + 1) * one(padded),
            "wire": gathers * one(padded) + 2 * one(padded)}


def shard_model(model: StagedModel | nn.Module, mesh: DeviceMesh, *, reshard_after_forward: bool,
                precision_name: str = "fp32") -> None:
    """fully_shard each unit (one all-gather per layer, prefetchable), then the root for what is left.

    ``reshard_after_forward`` is passed explicitly to the root too: left to FSDP2's default the
    root keeps its parameters gathered after forward, which would blur the ZeRO-2/3 contrast.
    bf16: ``MixedPrecisionPolicy`` gathers bf16 parameters and reduce-scatters bf16 gradients.
    """
    policy = precision.fsdp_policy(precision_name)
    for unit in getattr(model, "units", []):
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)


def build_zero1(*, ctx: RankContext) -> Trainer:
    cfg = ctx.config
    model = ctx.workload.build(cfg.seed).to(ctx.device)
    ctx.meter.assign(None, Category.PARAMETER)  # gradient all-reduce and parameter broadcasts
    ddp = wrap_ddp(ctx, model)
    optimizer = ZeroRedundancyOptimizer(
        list(ddp.parameters()), parameters_as_bucket_view=True,
        optimizer_class=lambda params, **_: ctx.workload.optimizer(params, cfg.lr))
    feed, batch = replica_input(ctx, dp_rank=ctx.rank, dp_size=ctx.world_size)
    params = list(model.parameters())
    psi = param_bytes(params)
    own = param_bytes([p for g in optimizer.optim.param_groups for p in g["params"]])  # this rank's shard
    n = ctx.world_size
    extra = {"modeled_comm_parameter_bytes_per_step": 2 * (n - 1) * psi // n,
             "zero1_broadcast_bytes_per_step": own}
    return Trainer(step=sgd_step(ctx, ddp, optimizer, batch), params=params, optimizer=optimizer,
                   role=f"zero1 shard {ctx.rank}", extra=extra, feed=feed, **moe_fields(model))


def build_fsdp(*, ctx: RankContext, reshard_after_forward: bool = True) -> Trainer:
    cfg = ctx.config
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,), mesh_dim_names=("dp",))
    ctx.meter.assign(mesh.get_group("dp"), Category.PARAMETER)
    model = ctx.workload.build(cfg.seed).to(ctx.device)
    figures = fsdp_bytes_per_step(list(model.parameters()), ctx.world_size,
                                  reshard_after_forward=reshard_after_forward)
    shard_model(model, mesh, reshard_after_forward=reshard_after_forward, precision_name=cfg.precision)
    optimizer = ctx.workload.optimizer(list(model.parameters()), cfg.lr)  # after sharding: on the shards
    feed, batch = replica_input(ctx, dp_rank=ctx.rank, dp_size=ctx.world_size)
    extra = {"modeled_comm_parameter_bytes_per_step": figures["modeled"],
             "padded_comm_parameter_bytes_per_step": figures["counted"],
             "modeled_wire_bytes_per_step": figures["wire"]}
    return Trainer(step=sgd_step(ctx, model, optimizer, batch), params=list(model.parameters()),
                   optimizer=optimizer, role=f"{cfg.strategy.value} shard {ctx.rank}", extra=extra,
                   feed=feed, **moe_fields(model))


def build_zero2(*, ctx: RankContext) -> Trainer:
    return build_fsdp(ctx=ctx, reshard_after_forward=False)
