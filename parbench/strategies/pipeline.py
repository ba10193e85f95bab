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

from parbench import data
from parbench.config import DataMode, Schedule
from parbench.data import Feed
from parbench.metrics.comm import Category
from parbench.strategies.base import RankContext, Trainer, templates
from parbench.workloads.base import StagedModel
from parbench.splits import contiguous_splits

SCHEDULES = {Schedule.GPIPE: ScheduleGPipe, Schedule.ONE_F_ONE_B: Schedule1F1B,
             Schedule.INTERLEAVED_1F1B: ScheduleInterleaved1F1B}


def build_stages(ctx: RankContext, *, pp_rank: int, group: dist.ProcessGroup | None, model: StagedModel | None = None,
                 wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
                 ) -> tuple[list[PipelineStage], list[torch.nn.Module]]:
    """This rank's PipelineStages (one per virtual stage) and their modules.

    ``wrap`` (hybrids) turns each stage module into its data-parallel form (DDP or FSDP) before
    the stage is built; PipelineStage then syncs gradients only on the last micro-batch."""
    cfg = ctx.config
    model = model or ctx.workload.build(cfg.seed)
    bounds = contiguous_splits(len(model.units), cfg.chunks)
    stages, modules = [], []
    for index in range(pp_rank, cfg.chunks, cfg.pp):
        lo, hi = bounds[index]  # the first chunk keeps the model's pre, the last its post
        pre, post = model.pre if index == 0 else None, model.post if index == cfg.chunks - 1 else None
        module = StagedModel(pre, list(model.units[lo:hi]), post).to(ctx.device)
        module = wrap(module) if wrap is not None else module
        stages.append(PipelineStage(module, index, cfg.chunks, ctx.device, group=group))
        modules.append(module)
    return stages, modules


def pipeline_trainer(ctx: RankContext, *, pp_rank: int, group: dist.ProcessGroup | None, dp_rank: int, dp_size: int,
                     ranks: list[int], role: str = "", sync_for: Callable[[list], Callable[[], None] | None] | None = None,
                     **stage_args) -> Trainer:
    """This rank's stages (``build_stages``), their optimizer and one optimizer step through the schedule.
    ``sync_for(params)`` (hybrid dp x pp): what averages the stages' gradients across replicas."""
    stages, modules = build_stages(ctx, pp_rank=pp_rank, group=group, **stage_args)
    params = [p for m in modules for p in m.parameters()]
    optimizer = ctx.workload.optimizer(params, ctx.config.lr)
    feed, step = pipeline_step(ctx, stages, optimizer, dp_rank=dp_rank, dp_size=dp_size, ranks=ranks,
                               sync_grads=sync_for(params) if sync_for is not None else None)
    return Trainer(step=step, params=params, optimizer=optimizer, feed=feed,
                   role=role + "stage " + ",".join(str(s.stage_index) for s in stages))


def pipeline_step(ctx: RankContext, stages, optimizer, *, dp_rank: int, dp_size: int, ranks: list[int],
                  sync_grads: Callable[[], None] | None = None) -> tuple[Feed, Callable[[int], torch.Tensor | None]]:
    """(this rank's input Feed, one optimizer step through the schedule); the first stage feeds
    inputs, the last scores targets. ``sync_grads`` (hybrid dp x pp) averages gradients across
    replicas between schedule and update."""
    cfg = ctx.config
    first = any(s.is_first for s in stages)
    last = any(s.is_last for s in stages)
    feed, stage_data = stage_input(ctx, first=first, last=last, dp_rank=dp_rank, dp_size=dp_size, ranks=ranks)
    # interleaved 1F1B drives every virtual stage of this rank; GPipe and 1F1B drive its one stage
    schedule = SCHEDULES[cfg.schedule](stages if cfg.interleaved else stages[0], n_microbatches=cfg.micro_batches,
                                       loss_fn=ctx.workload.loss)

    def step(i: int) -> torch.Tensor | None:
        x, y = stage_data(i)
        optimizer.zero_grad(set_to_none=False)
        losses: list[torch.Tensor] = []
        args = (x,) if first else ()
        schedule.step(*args, target=y, losses=losses)
        if sync_grads is not None:
            sync_grads()
        optimizer.step()
        return torch.stack(losses).mean().detach() if last else None

    return feed, step


def stage_input(ctx: RankContext, *, first: bool, last: bool, dp_rank: int, dp_size: int,
                ranks: list[int]) -> tuple[Feed, Callable[[int], tuple]]:
    """Inputs for the first stage, targets for the last, this replica's slice; middle stages read
    nothing. ``sharded``: first and last stage each make the slice before the step. ``rank0``: the
    first stage makes it and, inside the step, sends the targets to the last stage: that transfer is *data*."""
    cfg = ctx.config
    sharded = cfg.data_mode is DataMode.SHARDED or len(ranks) == 1
    reads = first or (last and sharded)
    feed = Feed(data.replica_source(cfg, ctx.workload, dp_rank=dp_rank, dp_size=dp_size) if reads else data.nothing)

    def take(i: int) -> tuple:
        x, y = data.to_device(feed.take(i), ctx.device)
        return (x if first else None), (y if last else None)

    if sharded or first == last:  # both or neither: nothing to send
        return feed, take
    _, labels = templates(ctx, cfg.global_batch_size // dp_size)

    def exchange(i: int) -> tuple:
        x, y = data.to_device(feed.take(i), ctx.device)
        with ctx.meter.category(Category.DATA):
            if first:
                dist.send(y.contiguous(), dst=ranks[-1])
                return x, None
            y = torch.empty_like(labels)
            dist.recv(y, src=ranks[0])
            return None, y

    return feed, exchange


def build_pipeline(*, ctx: RankContext) -> Trainer:
    ctx.meter.assign(None, Category.INTERMEDIATE)  # stage-to-stage send/recv on the world group
    return pipeline_trainer(ctx, pp_rank=ctx.rank, group=None, dp_rank=0, dp_size=1, ranks=list(range(ctx.world_size)))
