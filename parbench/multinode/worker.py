"""What one torchrun worker does: rendezvous from the environment, run the rank, gather to rank 0.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node's index) and
MASTER_ADDR/MASTER_PORT (the agent's store); ``dist.rendezvous("env://")`` turns them into a
store. ``PARBENCH_MULTINODE_DIR`` is the node's exchange folder: ``config.json`` in, and out
``rank0.pkl`` (global rank 0 only: every rank's figures and placement) or ``rank<R>.error.json``.

Run as ``python -m torch.distributed.run ... -m parbench.multinode.worker``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
from pathlib import Path
from typing import Any

import torch.distributed as dist

from parbench import runner
from parbench.config import RunConfig
from parbench.distributed import Group, RankInfo, rank_main
from parbench.multinode.meter import NodeAwareMeter

DIR_ENV = "PARBENCH_MULTINODE_DIR"
NODE_NAME_ENV = "PARBENCH_NODE_NAME"


def node_of_rank(world_size: int, local_world_size: int) -> tuple[int, ...]:
    """torchrun assigns global ranks node by node: rank r lives on node r // local_world_size."""
    return tuple(r // local_world_size for r in range(world_size))


def main() -> None:
    out = Path(os.environ[DIR_ENV])
    cfg = RunConfig.from_dict(json.loads((out / "config.json").read_text()))
    timeout = datetime.timedelta(seconds=cfg.timeout_s)
    rank_main(node_rank, cfg, rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
              connect=lambda: next(dist.rendezvous("env://", timeout=timeout))[0], out_dir=out,
              local_rank=int(os.environ["LOCAL_RANK"]),
              group=Group(backend=cfg.backend.value, device=cfg.device, threads=cfg.threads, timeout_s=cfg.timeout_s))


def node_rank(cfg: RunConfig, info: RankInfo) -> dict[str, Any] | None:
    """The rank function: the runner's own measurement with a node-aware meter, gathered to rank 0
    after the timed steps (nothing here is metered); every rank's figures on rank 0, else None."""
    nodes = node_of_rank(info.world_size, int(os.environ["LOCAL_WORLD_SIZE"]))
    if nodes[info.rank] != int(os.environ["GROUP_RANK"]):
        raise RuntimeError(f"rank {info.rank} is on node {os.environ['GROUP_RANK']}, expected {nodes[info.rank]}")
    ctx, trainer = runner.prepare(cfg, info, meter_factory=lambda **kw: NodeAwareMeter(node_of_rank=nodes, **kw))
    meter = ctx.meter
    result = dataclasses.replace(runner.measure(ctx, trainer),
                                 comm_intra_node_bytes_per_step=sum(meter.intra_node.values()),
                                 comm_inter_node_bytes_per_step=sum(meter.inter_node.values()),
                                 comm_inter_node_by_category=dict(meter.inter_node))
    where = {"rank": info.rank, "node": nodes[info.rank], "local_rank": int(os.environ["LOCAL_RANK"]),
             "host": os.environ.get(NODE_NAME_ENV) or socket.gethostname()}
    gathered: list[Any] | None = [None] * info.world_size if info.rank == 0 else None
    dist.gather_object((result, where), gathered, dst=0)
    if info.rank != 0:
        return None
    return {"ranks": [g[0] for g in gathered], "placement": [g[1] for g in gathered]}


if __name__ == "__main__":
    main()
