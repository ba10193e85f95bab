"""Single-process reference and data parallelism (DDP; ZeRO-1 is in sharded.py).

DDP (Li et al., VLDB 2020): every rank holds the whole model, computes gradients on its shard of the
batch, and a bucketed ring all-reduce averages them: 2(n-1)/n x Psi bytes sent per rank per step.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from parbench.metrics.comm import Category
from parbench.strategies import precision
from parbench.strategies.base import RankContext, Trainer, replica_input, moe_fields


def sgd_step(ctx: RankContext, model: nn.Module, optimizer: torch.optim.Optimizer,
             batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]], *,
             sync_grads: Callable[[], None] | None = None) -> Callable[[int], torch.Tensor]:
    """The plain training step every data-parallel flavour shares: zero, forward, loss, backward,
    (``sync_grads``: gradient averaging done by hand), step."""

    def step(i: int) -> torch.Tensor:
        x, y = batch(i)
        optimizer.zero_grad(set_to_none=False)
        loss = ctx.workload.loss(model(x), y)
        loss.backward()
        if sync_grads is not None:
            sync_grads()
        optimizer.step()
        return loss.detach()

    return step


def wrap_ddp(ctx: RankContext, module: nn.Module, *, mesh=None) -> DistributedDataParallel:
    """DDP over the world group (or ``mesh``'s), bound to this rank's GPU on cuda, with the
    precision's gradient all-reduce (bf16: half the bytes)."""
    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddp = DistributedDataParallel(module, device_ids=ids, device_mesh=mesh)
    precision.register_ddp_hook(ddp, ctx.config.precision, mesh.get_group() if mesh is not None else None)
    return ddp


def build_single(*, ctx: RankContext) -> Trainer:
    model = ctx.workload.build(ctx.config.seed).to(ctx.device)
    optimizer = ctx.workload.optimizer(list(model.parameters()), ctx.config.lr)
    feed, batch = replica_input(ctx, dp_rank=0, dp_size=1)
    return Trainer(step=sgd_step(ctx, model, optimizer, batch), params=list(model.parameters()),
                   optimizer=optimizer, role="single", feed=feed, **moe_fields(model))


def build_ddp(*, ctx: RankContext) -> Trainer:
    model = ctx.workload.build(ctx.config.seed).to(ctx.device)
    ctx.meter.assign(None, Category.PARAMETER)  # the reducer all-reduces gradients on the world group
    ddp = wrap_ddp(ctx, model)
    optimizer = ctx.workload.optimizer(list(ddp.parameters()), ctx.config.lr)
    feed, batch = replica_input(ctx, dp_rank=ctx.rank, dp_size=ctx.world_size)
    train = sgd_step(ctx, ddp, optimizer, batch)

    def compute_only(i: int) -> torch.Tensor:
        with ddp.no_sync():  # the same step with the gradient all-reduce skipped
            return train(i)

    return Trainer(step=train, params=list(model.parameters()), optimizer=optimizer,
                   compute_only_step=compute_only, feed=feed, **moe_fields(model))
