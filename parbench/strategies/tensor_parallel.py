"""Megatron-style tensor parallelism (Shoeybi et al. 2019) with DTensor's ``parallelize_module``.

The workload's ``tp_plan()`` pairs a column-wise Linear (weight rows split, output sharded on
the last dim, so attention heads split across ranks) with a row-wise Linear (weight columns
split, partial sums all-reduced). Every rank sees the whole batch. Per step (Megatron's g and f
operators): one all-reduce of each row-wise layer's output in forward, and one of each column-wise
layer's input gradient in backward (none for a layer fed by the data itself, the mlp's first);
each sends 2(t-1)/t x S with S = rows x features x 4 bytes (rows = B, or B x T tokens). The
transformer's separate q/k/v projections cost three backward all-reduces per block where a
fused qkv would cost one (counted with the meter): 6 per block in all.
"""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module

from parbench.metrics.comm import Category
from parbench.strategies.base import RankContext, Trainer, replica_input
from parbench.strategies.data_parallel import sgd_step


def apply_tp(ctx: RankContext, model: nn.Module, mesh: DeviceMesh) -> dict:
    """Shard ``model`` in place over ``mesh`` with the workload's plan; returns the plan."""
    plan = ctx.workload.tp_plan(model)
    parallelize_module(model, mesh, plan)
    return plan


def build_tp(*, ctx: RankContext) -> Trainer:
    cfg = ctx.config
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,), mesh_dim_names=("tp",))
    ctx.meter.assign(mesh.get_group("tp"), Category.INTERMEDIATE)  # activations and their gradients
    model = ctx.workload.build(cfg.seed).to(ctx.device)
    apply_tp(ctx, model, mesh)
    optimizer = ctx.workload.optimizer(list(model.parameters()), cfg.lr)
    feed, batch = replica_input(ctx, dp_rank=0, dp_size=1)  # every rank: the whole batch
    return Trainer(step=sgd_step(ctx, model, optimizer, batch), params=list(model.parameters()),
                   optimizer=optimizer, role=f"tp shard {ctx.rank}", feed=feed)
