"""What every strategy gets (a RankContext) and returns (a Trainer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from parbench import data
from parbench.config import DataMode, RunConfig
from parbench.data import Feed
from parbench.metrics.comm import Category, CommMeter
from parbench.metrics.memory import local_tensor
from parbench.workloads.base import Batch, Workload


@dataclass
class RankContext:
    """One rank's view of the run; built once by the runner and passed explicitly (no globals)."""

    config: RunConfig
    rank: int
    world_size: int
    device: torch.device
    workload: Workload
    meter: CommMeter


@dataclass
class Trainer:
    """A strategy's answer: how this rank runs one optimizer step, and what it holds."""

    step: Callable[[int], torch.Tensor | None]
    """step index -> this rank's loss for the step (None on ranks that compute no loss)."""
    params: list[nn.Parameter]
    """Parameters this rank stores (local shards), for memory accounting."""
    optimizer: torch.optim.Optimizer | None
    role: str = "replica"
    compute_only_step: Callable[[int], object] | None = None
    """The same step without gradient communication (ddp's no_sync), when the strategy has one."""
    extra: dict = field(default_factory=dict)
    """Strategy-specific figures for the record (e.g. modeled vs padded bytes)."""
    feed: Feed | None = None
    """This rank's input pipeline; the runner prepares step i's input with ``feed.prepare(i)``
    before the step begins (None: the rank reads no data, e.g. a parameter server)."""
    expert_params: list[nn.Parameter] | None = None
    """Mixture-of-experts workloads: the expert parameters among ``params`` (memory split); else None."""
    routing: Callable[[], list[dict]] | None = None
    """Mixture-of-experts workloads: per step run so far, this rank's tokens per [moe layer][expert]."""


def moe_fields(model: nn.Module) -> dict:
    """``expert_params`` and ``routing`` of a Trainer holding ``model`` (empty for dense models).
    Call it after sharding: the parameters are then the ones this rank stores."""
    from parbench.workloads import moe  # noqa: PLC0415 - only mixture-of-experts models need it

    if not moe.moe_layers(model):
        return {}
    experts = [p for name, p in model.named_parameters() if moe.is_expert_parameter(name)]
    return {"expert_params": experts, "routing": lambda: moe.routing_history(model)}


def replica_input(ctx: RankContext, *, dp_rank: int, dp_size: int, group: dist.ProcessGroup | None = None,
                  src: int = 0) -> tuple[Feed, Callable[[int], Batch]]:
    """This data-parallel replica's input: the Feed that makes it before each step, and what the
    step does with it.

    ``sharded``: the Feed makes only this replica's slice of the global batch; the step takes it (no
    traffic). ``rank0``: the group's first rank makes the whole batch, and the step scatters it:
    a real transfer between ranks, so it stays in the step (counted as *data*).
    """
    cfg = ctx.config
    if cfg.data_mode is DataMode.SHARDED or dp_size == 1:
        feed = Feed(data.replica_source(cfg, ctx.workload, dp_rank=dp_rank, dp_size=dp_size))
        return feed, lambda i: data.to_device(feed.take(i), ctx.device)
    reader = dp_rank == 0
    feed = Feed(data.replica_source(cfg, ctx.workload, dp_rank=0, dp_size=1) if reader else data.nothing)
    shapes = templates(ctx, cfg.global_batch_size // dp_size)
    return feed, lambda i: scatter_batch(ctx, feed.take(i), shapes, dp_rank=dp_rank, dp_size=dp_size,
                                         group=group, src=src)


def scatter_batch(ctx: RankContext, full: Batch | tuple[None, None], shapes: Batch, *, dp_rank: int,
                  dp_size: int, group: dist.ProcessGroup | None, src: int) -> Batch:
    """Scatter the global batch ``full`` (held by the group's first rank) in dp_size equal chunks
    into fresh buffers shaped like ``shapes``."""
    out = []
    with ctx.meter.category(Category.DATA):
        for whole, template in zip(full, shapes):
            buf = torch.empty_like(template)
            chunks = list(whole.to(ctx.device).chunk(dp_size)) if dp_rank == 0 else None
            dist.scatter(buf, chunks, src=src, group=group)
            out.append(buf)
    return out[0], out[1]


def templates(ctx: RankContext, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty tensors shaped like n samples (every rank knows the shapes without reading data)."""
    x, y = ctx.workload.sample(1)
    return (torch.empty((n, *x.shape[1:]), dtype=x.dtype, device=ctx.device),
            torch.empty((n, *y.shape[1:]), dtype=y.dtype, device=ctx.device))


def allreduce_grads(params: list[nn.Parameter], group: dist.ProcessGroup, dp: int,
                    dtype: torch.dtype = torch.float32) -> Callable[[], None]:
    """DDP's job done by hand under a pipeline: one flat all-reduce of the stage's gradients per
    step (DDP with one bucket), 2(dp-1)/dp x Psi_stage bytes (in ``dtype``: bf16 halves them).
    DDP itself cannot wrap a stage here: its reducer sees one backward per micro-batch and its
    bucket rebuild asserts (torch 2.13)."""

    def sync() -> None:
        grads = [local_tensor(p.grad) for p in params]  # tp-sharded grads: this rank's shard
        flat = _flatten_dense_tensors(grads).to(dtype)
        dist.all_reduce(flat, group=group)  # synchronises the replicas: every one waits for the sum
        flat.div_(dp)
        for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
            g.copy_(synced)

    return sync
