"""A synchronous parameter server (Li et al., OSDI 2014; the seed documents' second example).

Ranks 0..k-1 are servers, each owning a contiguous 1/k of the flattened parameters and the
optimizer state for it; ranks k..W-1 are the N workers. Per step a worker computes gradients on
its shard of the batch, pushes gradient chunk j to server j and pulls fresh parameter chunk j
back. Per step: a worker sends Psi (push) and receives Psi (pull); server j receives N x Psi_j and
sends N x Psi_j, with Psi_j ~ Psi / k. Point-to-point send/recv on the world group, so every
byte passes the comm meter (same-host RPC would bypass the sockets the OS counter sees).

Each push (and each pull) goes out as one ``batch_isend_irecv``: under NCCL, whose point-to-point
operations on one communicator share one stream, separate ``isend`` calls would run one after
another, while a batch is one group call whose transfers to different servers overlap, as the
separate sockets of gloo let them. So the timings mean the same on both backends.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from parbench.metrics.comm import Category
from parbench.metrics.memory import param_bytes
from parbench.strategies.base import RankContext, Trainer, replica_input
from parbench.splits import contiguous_splits


def build_ps(*, ctx: RankContext) -> Trainer:
    cfg = ctx.config
    k = cfg.servers
    ctx.meter.assign(None, Category.PARAMETER)  # pushes and pulls: gradients and parameters
    # every rank must create the workers' group (a collective), servers included
    workers = dist.new_group(list(range(k, ctx.world_size)))
    model = ctx.workload.build(cfg.seed).to(ctx.device)
    bounds = contiguous_splits(sum(p.numel() for p in model.parameters()), k)
    if ctx.rank < k:
        return _server(ctx, model, bounds)
    return _worker(ctx, model, bounds, workers)


def _server(ctx: RankContext, model: nn.Module, bounds: list[tuple[int, int]]) -> Trainer:
    cfg, j = ctx.config, ctx.rank
    lo, hi = bounds[j]
    shard = nn.Parameter(parameters_to_vector(model.parameters())[lo:hi].detach().clone())
    del model  # a server keeps only its shard
    optimizer = ctx.workload.optimizer([shard], cfg.lr)
    n_workers = ctx.world_size - cfg.servers
    worker_ranks = range(cfg.servers, ctx.world_size)

    def step(i: int) -> None:
        pushed = [torch.empty_like(shard) for _ in worker_ranks]
        _exchange(dist.irecv, [(buf, w) for buf, w in zip(pushed, worker_ranks)])  # every worker's push
        shard.grad = torch.stack(pushed).sum(dim=0).div_(n_workers)  # mean of the shard-mean gradients
        optimizer.step()
        _exchange(dist.isend, [(shard.detach(), w) for w in worker_ranks])  # workers pull the new values

    extra = {"ps_received_bytes_per_step": n_workers * shard.numel() * shard.element_size(),
             "ps_sent_bytes_per_step": n_workers * shard.numel() * shard.element_size()}
    return Trainer(step=step, params=[shard], optimizer=optimizer, role=f"server {j}", extra=extra)


def _worker(ctx: RankContext, model: nn.Module, bounds: list[tuple[int, int]],
            group: dist.ProcessGroup) -> Trainer:
    cfg = ctx.config
    params = list(model.parameters())
    n_workers, index = ctx.world_size - cfg.servers, ctx.rank - cfg.servers
    feed, batch = replica_input(ctx, dp_rank=index, dp_size=n_workers, group=group, src=cfg.servers)

    def step(i: int) -> torch.Tensor:
        x, y = batch(i)
        model.zero_grad(set_to_none=False)
        loss = ctx.workload.loss(model(x), y)
        loss.backward()
        grads = torch.cat([p.grad.reshape(-1) for p in params])
        _exchange(dist.isend, [(grads[lo:hi], j) for j, (lo, hi) in enumerate(bounds)])  # push
        fresh = torch.empty_like(grads)
        _exchange(dist.irecv, [(fresh[lo:hi], j) for j, (lo, hi) in enumerate(bounds)])  # pull
        vector_to_parameters(fresh, params)
        return loss.detach()

    psi = param_bytes(params)
    extra = {"ps_sent_bytes_per_step": psi, "ps_received_bytes_per_step": psi}
    return Trainer(step=step, params=params, optimizer=None, role=f"worker {index}", extra=extra, feed=feed)


def _exchange(op, pairs: list[tuple[torch.Tensor, int]]) -> None:
    """One batch of sends or receives (tensor, peer), then wait for all of it: a push must land
    before this rank moves on."""
    for work in dist.batch_isend_irecv([dist.P2POp(op, tensor, peer) for tensor, peer in pairs]):
        work.wait()
