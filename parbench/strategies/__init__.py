"""Strategy registry: plain data mapping each Strategy to the function that builds its Trainer."""

from __future__ import annotations

from parbench.config import Strategy
from parbench.strategies import (data_parallel, expert_parallel, hybrid, parameter_server, pipeline, precision, sharded,
                                 tensor_parallel)
from parbench.strategies.base import RankContext, Trainer

BUILDERS = {
    Strategy.SINGLE: data_parallel.build_single,
    Strategy.DDP: data_parallel.build_ddp,
    Strategy.PIPELINE: pipeline.build_pipeline,
    Strategy.ZERO1: sharded.build_zero1,
    Strategy.ZERO2: sharded.build_zero2,
    Strategy.FSDP: sharded.build_fsdp,
    Strategy.TP: tensor_parallel.build_tp,
    Strategy.HYBRID: hybrid.build_hybrid,
    Strategy.PS: parameter_server.build_ps,
    Strategy.EP: expert_parallel.build_ep,
}


def build(ctx: RankContext) -> Trainer:
    """The strategy's trainer, its steps run at the configured precision (autocast for bf16)."""
    precision.configure(ctx.config.precision, ctx.device)
    trainer = BUILDERS[ctx.config.strategy](ctx=ctx)
    return precision.with_precision(trainer, ctx.config.precision, ctx.device)


__all__ = ["BUILDERS", "RankContext", "Trainer", "build"]
