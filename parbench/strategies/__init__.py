"""Strategy registry: plain data mapping each Strategy to where the function that builds its Trainer lives.

A builder's module is imported when a rank builds that strategy, not when the registry is read: the
parent checks a plan against the registry without importing FSDP, DTensor and the pipelining schedules
(they bring torch._dynamo: ~3.5 s of a 2-core machine's time per process, on top of torch's own ~3 s),
and a torchrun worker imports only the strategy it runs. The forkserver imports every one once
(``parbench.strategies.every``), so a forked rank imports none.
"""

from __future__ import annotations

import importlib
from typing import Callable

from parbench.config import Strategy
from parbench.strategies import precision
from parbench.strategies.base import RankContext, Trainer

BUILDERS: dict[Strategy, str] = {
    Strategy.SINGLE: "data_parallel:build_single",
    Strategy.DDP: "data_parallel:build_ddp",
    Strategy.PIPELINE: "pipeline:build_pipeline",
    Strategy.ZERO1: "sharded:build_zero1",
    Strategy.ZERO2: "sharded:build_zero2",
    Strategy.FSDP: "sharded:build_fsdp",
    Strategy.TP: "tensor_parallel:build_tp",
    Strategy.HYBRID: "hybrid:build_hybrid",
    Strategy.PS: "parameter_server:build_ps",
    Strategy.EP: "expert_parallel:build_ep",
}
"""Strategy -> ``module:function`` inside this package."""
MODULES: tuple[str, ...] = tuple(dict.fromkeys(f"{__name__}.{where.split(':')[0]}" for where in BUILDERS.values()))
"""Every module the registry names, in its order."""


def builder(strategy: Strategy) -> Callable[..., Trainer]:
    """The function that builds ``strategy``'s Trainer (its module imported now)."""
    module, function = BUILDERS[strategy].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def build(ctx: RankContext) -> Trainer:
    """The strategy's trainer, its steps run at the configured precision (autocast for bf16)."""
    precision.configure(ctx.config.precision, ctx.device)
    trainer = builder(ctx.config.strategy)(ctx=ctx)
    return precision.with_precision(trainer, ctx.config.precision, ctx.device)


__all__ = ["BUILDERS", "MODULES", "RankContext", "Trainer", "build", "builder"]
