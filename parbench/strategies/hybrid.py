"""Hybrid layouts on one DeviceMesh (pp, dp, tp) with the degrees given explicitly (--dp/--tp/--pp).

Ranks are laid out tp innermost (tensor-parallel peers are neighbours: the most frequent traffic),
pp outermost (torchtitan's order). Categories follow the mesh dimension a collective runs on:
dp -> parameter (gradient all-reduce, or FSDP's all-gather / reduce-scatter), tp and pp ->
intermediate (activations and their gradients). Each dp replica reads its own shard of the batch.
"""

from __future__ import annotations

from typing import Callable

from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from parbench.config import DataParallelMode
from parbench.metrics.comm import Category
from parbench.strategies.base import RankContext, Trainer, allreduce_grads, moe_fields, replica_input
from parbench.strategies import precision
from parbench.strategies.data_parallel import sgd_step, wrap_ddp
from parbench.strategies.pipeline import pipeline_trainer
from parbench.strategies.sharded import shard_model
from parbench.strategies.tensor_parallel import apply_tp


def build_mesh(ctx: RankContext) -> DeviceMesh:
    """The one mesh of the run; categories are assigned per dimension's process group."""
    cfg = ctx.config
    mesh = init_device_mesh(ctx.device.type, (cfg.pp, cfg.dp, cfg.tp), mesh_dim_names=("pp", "dp", "tp"))
    ctx.meter.assign(mesh.get_group("dp"), Category.PARAMETER)
    ctx.meter.assign(mesh.get_group("tp"), Category.INTERMEDIATE)
    ctx.meter.assign(mesh.get_group("pp"), Category.INTERMEDIATE)
    return mesh


def data_parallel_wrap(ctx: RankContext, mesh: DeviceMesh) -> Callable[[nn.Module], nn.Module]:
    """What the dp dimension does to a module: nothing (dp=1, or ddp under a pipeline: see
    ``allreduce_grads``), DDP, or FSDP2 (ZeRO-3) over mesh["dp"]."""
    cfg = ctx.config
    if cfg.dp == 1 or (cfg.pp > 1 and cfg.dp_mode is DataParallelMode.DDP):
        return lambda module: module
    if cfg.dp_mode is DataParallelMode.FSDP:
        def fsdp(module: nn.Module) -> nn.Module:
            shard_model(module, mesh["dp"], reshard_after_forward=True, precision_name=cfg.precision)
            return module
        return fsdp
    return lambda module: wrap_ddp(ctx, module, mesh=mesh["dp"])


def build_hybrid(*, ctx: RankContext) -> Trainer:
    cfg = ctx.config
    mesh = build_mesh(ctx)
    model = ctx.workload.build(cfg.seed).to(ctx.device)
    # Composition order TP, then PP, then DP (torchtitan's parallelize_llama, picotron's train.py):
    # TP rewrites layers into DTensor shards in place; PP then cuts the (sharded) model into
    # stages; DP comes last because it wraps exactly the local parameters each rank ends up holding.
    # Expert parallelism lives inside dp (ep groups of consecutive dp ranks): it shards the experts
    # before PP cuts the model, and then owns the dp gradient averaging (experts over their own group).
    if cfg.tp > 1:
        apply_tp(ctx, model, mesh["tp"])
    experts = _shard_experts(ctx, mesh, model)
    wrap = data_parallel_wrap(ctx, mesh) if experts is None else (lambda module: module)
    dp_rank = mesh.get_local_rank("dp")
    if cfg.pp > 1:
        return _pipelined(ctx, mesh, model, wrap, dp_rank, experts)
    wrapped = wrap(model)
    optimizer = ctx.workload.optimizer(list(wrapped.parameters()), cfg.lr)
    dp_group = mesh.get_group("dp")
    src = mesh["dp"].mesh.tolist()[0]  # global rank that reads the replica batch in rank0 mode
    feed, batch = replica_input(ctx, dp_rank=dp_rank, dp_size=cfg.dp, group=dp_group, src=src)
    sync = experts(list(model.parameters())) if experts is not None else None
    return Trainer(step=sgd_step(ctx, wrapped, optimizer, batch, sync_grads=sync), params=list(model.parameters()),
                   optimizer=optimizer, role=_role(mesh), feed=feed, **moe_fields(model))


def _shard_experts(ctx: RankContext, mesh: DeviceMesh, model: nn.Module):
    """ep > 1: shard the experts over ep groups inside dp; returns params -> their gradient sync."""
    cfg = ctx.config
    if cfg.ep == 1:
        return None
    from parbench.strategies.expert_parallel import expert_groups, gradient_sync, shard_experts  # noqa: PLC0415

    ep_group, edp_group = expert_groups(mesh, cfg.ep)
    shard_experts(ctx, model, group=ep_group, rank=mesh.get_local_rank("dp") % cfg.ep, size=cfg.ep)
    experts = moe_fields(model)["expert_params"]
    return lambda params: gradient_sync(ctx, params, [p for p in experts if any(p is q for q in params)],
                                        dense_group=mesh.get_group("dp"), expert_group=edp_group, n=cfg.dp)


def _pipelined(ctx: RankContext, mesh: DeviceMesh, model: nn.Module,
               wrap: Callable[[nn.Module], nn.Module], dp_rank: int, experts=None) -> Trainer:
    cfg = ctx.config
    manual = cfg.dp > 1 and cfg.dp_mode is DataParallelMode.DDP
    dtype = precision.reduce_dtype(cfg.precision)

    def sync_for(params: list[nn.Parameter]) -> Callable[[], None] | None:
        if experts is not None:
            return experts(params)
        return allreduce_grads(params, mesh.get_group("dp"), cfg.dp, dtype) if manual else None

    return pipeline_trainer(ctx, pp_rank=mesh.get_local_rank("pp"), group=mesh.get_group("pp"), dp_rank=dp_rank,
                            dp_size=cfg.dp, ranks=mesh["pp"].mesh.tolist(), role=_role(mesh) + " ", sync_for=sync_for,
                            model=model, wrap=wrap)


def _role(mesh: DeviceMesh) -> str:
    return " ".join(f"{name}{mesh.get_local_rank(name)}" for name in ("pp", "dp", "tp"))

