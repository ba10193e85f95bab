"""Pipeline parallelism with torch.distributed.pipelining: GPipe, 1F1B and interleaved 1F1B.

The model's units are split into ``pp x virtual_stages`` contiguous chunks; rank r holds chunks
r, r + pp, ... (the interleaved layout of Narayanan et al., SC 2021). Per micro-batch each stage
boundary carries the activation forward and its gradient backward (*intermediate* bytes).
Bubble fraction (p-1)/(m+p-1) for GPipe/1F1B (Huang et al. 2019; Narayanan et al. 2021).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

from parbench.config import DataMode, Schedule
from parbench.metrics.comm import Category
from parbench.strategies.base import RankContext, Trainer, shard_bounds
from parbench.workloads.base import StagedModel
from parbench.splits import contiguous_splits

SCHEDULES = {Schedule.GPIPE: ScheduleGPipe, Schedule.ONE_F_ONE_B: Schedule1F1B,
             Schedule.INTERLEAVED_1F1B: ScheduleInterleaved1F1B}


def stage_module(model: StagedModel, lo: int, hi: int, *, first: bool, last: bool) -> StagedModel:
    return StagedModel(model.pre if first else None, list(model.units[lo:hi]), model.post if last else None)


def build_stages(ctx: RankContext, *, pp_rank: int, pp_size: int, group: dist.ProcessGroup | None,
                 model: StagedModel | None = None,
                 wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
                 ) -> tuple[list[PipelineStage], list[torch.nn.Module]]:
    """This rank's PipelineStages (one per virtual stage) and their modules.

    ``wrap`` (hybrids) turns each stage module into its data-parallel form (DDP or FSDP) before
    the stage is built; PipelineStage then syncs gradients only on the last micro-batch."""
    cfg = ctx.config
    chunks = pp_size * (cfg.virtual_stages if cfg.schedule is Schedule.INTERLEAVED_1F1B else 1)
    model = model or ctx.workload.build(cfg.seed)
    bounds = contiguous_splits(len(model.units), chunks)
    stages, modules = [], []
    for index in range(pp_rank, chunks, pp_size):
        lo, hi = bounds[index]
        module = stage_module(model, lo, hi, first=index == 0, last=index == chunks - 1).to(ctx.device)
        module = wrap(module) if wrap is not None else module
        stages.append(PipelineStage(module, index, chunks, ctx.device, group=group))
        modules.append(module)
    return stages, modules


def make_schedule(ctx: RankContext, stages: list[PipelineStage]):
    cfg = ctx.config
    loss = ctx.workload.loss
    if cfg.schedule is Schedule.INTERLEAVED_1F1B:
        return ScheduleInterleaved1F1B(stages, n_microbatches=cfg.micro_batches, loss_fn=loss)
    return SCHEDULES[cfg.schedule](stages[0], n_microbatches=cfg.micro_batches, loss_fn=loss)


def pipeline_step(ctx: RankContext, stages, schedule, optimizer, *, pp_rank: int, pp_size: int,
                  dp_rank: int, dp_size: int, ranks: list[int],
                  sync_grads: Callable[[], None] | None = None):
    """One optimizer step through the schedule; the first stage feeds inputs, the last scores targets.
    ``sync_grads`` (hybrid dp x pp) averages gradients across replicas between schedule and update."""
    first = any(s.is_first for s in stages)
    last = any(s.is_last for s in stages)

    def step(i: int) -> torch.Tensor | None:
        x, y = _stage_data(ctx, i, first=first, last=last, dp_rank=dp_rank, dp_size=dp_size, ranks=ranks)
        optimizer.zero_grad(set_to_none=False)
        losses: list[torch.Tensor] = []
        args = (x,) if first else ()
        schedule.step(*args, target=y, losses=losses)
        if sync_grads is not None:
            sync_grads()
        optimizer.step()
        return torch.stack(losses).mean().detach() if last else None

    return step


def _stage_data(ctx: RankContext, step: int, *, first: bool, last: bool, dp_rank: int, dp_size: int,
                ranks: list[int]):
    """Inputs for the first stage, targets for the last. ``rank0`` mode reads both on the first
    stage and sends the targets to the last stage: that transfer is *data*."""
    if not (first or last):
        return None, None
    size = ctx.config.global_batch_size
    lo, hi = shard_bounds(size, dp_size, dp_rank)
    sharded = ctx.config.data_mode is DataMode.SHARDED or len(ranks) == 1
    if sharded or first:
        x, y = (t[lo:hi].to(ctx.device) for t in ctx.workload.batch(step, size))
    if sharded or (first and last):
        return (x if first else None), (y if last else None)
    with ctx.meter.category(Category.DATA):
        if first:
            dist.send(y.contiguous(), dst=ranks[-1])
            return x, None
        _, template = ctx.workload.batch(0, 1)
        y = torch.empty((hi - lo, *template.shape[1:]), dtype=template.dtype, device=ctx.device)
        dist.recv(y, src=ranks[0])
        return None, y


def build_pipeline(*, ctx: RankContext) -> Trainer:
    ctx.meter.assign(None, Category.INTERMEDIATE)  # stage-to-stage send/recv on the world group
    stages, modules = build_stages(ctx, pp_rank=ctx.rank, pp_size=ctx.world_size, group=None)
    params = [p for m in modules for p in m.parameters()]
    optimizer = ctx.workload.optimizer(params, ctx.config.lr)
    schedule = make_schedule(ctx, stages)
    step = pipeline_step(ctx, stages, schedule, optimizer, pp_rank=ctx.rank, pp_size=ctx.world_size,
                         dp_rank=0, dp_size=1, ranks=list(range(ctx.world_size)))
    return Trainer(step=step, params=params, optimizer=optimizer,
                   role="stage " + ",".join(str(s.stage_index) for s in stages))
