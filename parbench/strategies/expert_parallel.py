"""Expert parallelism (GShard, Lepikhin et al. 2020; DeepSpeed-MoE; Megatron-LM's expert parallel):
the experts of every MoE layer are sharded over an ``ep`` group, everything else is data-parallel.

Layout: world_size ranks, each with its own shard of the batch (data parallelism over every rank);
ranks r with the same r // ep form an ep group (ep consecutive ranks, the busiest traffic between
neighbours), which holds experts/ep experts per rank; ranks with the same r % ep hold the same
experts and form an expert-data-parallel group of world_size/ep ranks (ep inside dp, as
DeepSpeed-MoE and Megatron-LM lay it out).

Per step and MoE layer, each rank (``parbench.workloads.moe``):
1. exchanges its per-expert token counts (all_to_all of E int64: the split sizes of step 2);
2. dispatches its kept assignments to their experts' ranks (all_to_all_single, uneven splits);
3. runs its local experts and combines the outputs back (the same all-to-all reversed).
Backward repeats 2 and 3 on the gradients, in the opposite directions.

Gradients, averaged by hand after backward (one flat all-reduce each, DDP with one bucket): the
non-expert ones over every rank, the expert ones over the expert-data-parallel group. Both are
divided by world_size: an expert's gradient already sums the contributions of every rank in its
ep group, whose tokens it served.

Categories: the token all-to-alls and the count exchange are *intermediate* (activations and
their gradients, and the routing metadata sized by them); both gradient all-reduces *parameter*.
"""

from __future__ import annotations

from typing import Callable

import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from parbench.metrics.comm import Category
from parbench.strategies.base import RankContext, Trainer, allreduce_grads, moe_fields, replica_input
from parbench.strategies import precision
from parbench.strategies.data_parallel import sgd_step
from parbench.workloads import moe

EXPERT_GRAD, NON_EXPERT_GRAD = "moe_expert_grad", "moe_non_expert_grad"
"""Labels of the two gradient all-reduces in the record's ``comm_bytes_by_label``."""


def build_ep(*, ctx: RankContext) -> Trainer:
    cfg = ctx.config
    mesh, model, sync = sharded_model(ctx)
    fields = moe_fields(model)
    optimizer = ctx.workload.optimizer(list(model.parameters()), cfg.lr)
    feed, batch = replica_input(ctx, dp_rank=ctx.rank, dp_size=ctx.world_size)
    return Trainer(step=sgd_step(ctx, model, optimizer, batch, sync_grads=sync), params=list(model.parameters()),
                   optimizer=optimizer, role=f"ep{mesh.get_local_rank('ep')} edp{mesh.get_local_rank('edp')}",
                   feed=feed, **fields)


def sharded_model(ctx: RankContext) -> tuple[DeviceMesh, nn.Module, Callable[[], None]]:
    """The mesh (edp, ep), this rank's model (every MoE layer keeping its experts/ep experts) and the
    gradient averaging to run after backward."""
    cfg = ctx.config
    mesh = init_device_mesh(ctx.device.type, (cfg.world_size // cfg.ep, cfg.ep), mesh_dim_names=("edp", "ep"))
    model = ctx.workload.build(cfg.seed).to(ctx.device)  # every expert first: the same init as single
    shard_experts(ctx, model, group=mesh.get_group("ep"), rank=mesh.get_local_rank("ep"), size=cfg.ep)
    edp = mesh.get_group("edp") if mesh["edp"].size() > 1 else None
    params = list(model.parameters())
    return mesh, model, gradient_sync(ctx, params, moe_fields(model)["expert_params"], dense_group=dist.group.WORLD,
                                      expert_group=edp, n=cfg.world_size)


def shard_experts(ctx: RankContext, model: nn.Module, *, group: dist.ProcessGroup, rank: int, size: int) -> None:
    """Every MoE layer of ``model`` keeps its experts/size experts and exchanges tokens over ``group``."""
    placement = moe.Placement(group=group, rank=rank, size=size, meter=ctx.meter)
    for layer in moe.moe_layers(model):
        layer.shard(placement)


def gradient_sync(ctx: RankContext, params: list[nn.Parameter], experts: list[nn.Parameter], *,
                  dense_group: dist.ProcessGroup, expert_group: dist.ProcessGroup | None, n: int):
    """Average the non-expert gradients over ``dense_group`` (every data-parallel rank) and the expert
    ones over ``expert_group`` (the ranks holding the same experts; None: nobody else does); both
    divided by n, the data-parallel ranks (see the module docstring)."""
    expert_ids = {id(p) for p in experts}
    dense = [p for p in params if id(p) not in expert_ids]
    dtype = precision.reduce_dtype(ctx.config.precision)
    sync_dense = allreduce_grads(dense, dense_group, n, dtype)
    sync_experts = allreduce_grads(experts, expert_group, n, dtype) if expert_group is not None else None

    def sync() -> None:
        # synchronisation points: each all-reduce waits for every rank of its group
        with ctx.meter.category(Category.PARAMETER):
            with ctx.meter.label(NON_EXPERT_GRAD):
                sync_dense()
            if sync_experts is None:
                for p in experts:
                    p.grad.div_(n)  # nobody else holds these experts: only the mean over ranks is left
                return
            with ctx.meter.label(EXPERT_GRAD):
                sync_experts()

    return sync


def expert_groups(mesh: DeviceMesh, ep: int) -> tuple[dist.ProcessGroup, dist.ProcessGroup | None]:
    """(ep group, expert-data-parallel group) of this rank inside a (pp, dp, tp) mesh's dp dimension:
    ep consecutive dp ranks, and the dp ranks with the same index in their ep group. Every rank
    creates every group, in the same order (``new_group`` is collective over the world)."""
    grid, me = mesh.mesh, dist.get_rank()
    mine_ep = mine_edp = None
    for i in range(grid.shape[0]):
        for k in range(grid.shape[2]):
            dp_ranks = grid[i, :, k].tolist()
            for ranks in [dp_ranks[c:c + ep] for c in range(0, len(dp_ranks), ep)]:
                group = dist.new_group(ranks)
                mine_ep = group if me in ranks else mine_ep
            for ranks in [dp_ranks[j::ep] for j in range(ep)]:
                group = dist.new_group(ranks)
                mine_edp = group if me in ranks else mine_edp
    return mine_ep, (mine_edp if len(grid[0, :, 0]) > ep else None)
