"""What one torchrun worker does: rendezvous from the environment, run the rank, gather to rank 0.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node's index) and
MASTER_ADDR/MASTER_PORT (the agent's store); ``dist.rendezvous("env://")`` turns them into a
store. ``PARBENCH_MULTINODE_DIR`` is the node's exchange folder: ``config.json`` in, and out
``ranks.json`` (global rank 0 only: every rank's figures) or ``rank<R>.error.json``.

Run as ``python -m torch.distributed.run ... -m parbench.multinode.worker``.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import traceback
from pathlib import Path
from typing import Any

import torch.distributed as dist

import parbench.runner as runner
from parbench.config import RunConfig
from parbench.results import write_json_atomic
from parbench.multinode.meter import NodeAwareMeter, meter_class

DIR_ENV = "PARBENCH_MULTINODE_DIR"
NODE_NAME_ENV = "PARBENCH_NODE_NAME"


def node_of_rank(world_size: int, local_world_size: int) -> tuple[int, ...]:
    """torchrun assigns global ranks node by node: rank r lives on node r // local_world_size."""
    return tuple(r // local_world_size for r in range(world_size))


def main() -> None:
    out = Path(os.environ[DIR_ENV])
    rank = int(os.environ["RANK"])
    try:
        cfg = RunConfig.from_dict(json.loads((out / "config.json").read_text()))
        result, where = _run(cfg, rank)
        _gather_and_write(result, where, out, rank)
    except BaseException as exc:  # noqa: BLE001 - the node's parbench reads failures from files
        write_json_atomic(out / f"rank{rank}.error.json", {"rank": rank, "error": f"{type(exc).__name__}: {exc}",
                                                       "traceback": traceback.format_exc()})
        os._exit(1)
    runner._teardown()  # barrier, destroy, os._exit(0) (FIELD_NOTES: exit-time SIGABRT)


def _run(cfg: RunConfig, rank: int) -> tuple[dict[str, Any], dict[str, Any]]:
    world, local_world = int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_WORLD_SIZE"])
    nodes = node_of_rank(world, local_world)
    if nodes[rank] != int(os.environ["GROUP_RANK"]):
        raise RuntimeError(f"rank {rank} is on node {os.environ['GROUP_RANK']}, expected {nodes[rank]}")
    store, _, _ = next(dist.rendezvous("env://", timeout=datetime.timedelta(seconds=cfg.timeout_s)))
    made: list[NodeAwareMeter] = []
    # run_rank builds its CommMeter by name; this worker swaps in the node-aware one so the
    # runner's own steps (warm-up, probe, timed loop, fault hooks) stay the single source.
    runner.CommMeter = meter_class(nodes, made)
    result = runner.run_rank(cfg, rank=rank, world_size=world, store=store,
                             local_rank=int(os.environ["LOCAL_RANK"]))
    meter = made[-1]
    result["comm_intra_node_bytes_per_step"] = sum(meter.intra_node.values())
    result["comm_inter_node_bytes_per_step"] = sum(meter.inter_node.values())
    result["comm_inter_node_by_category"] = dict(meter.inter_node)
    where = {"rank": rank, "node": nodes[rank], "local_rank": int(os.environ["LOCAL_RANK"]),
             "host": os.environ.get(NODE_NAME_ENV) or socket.gethostname()}
    return result, where


def _gather_and_write(result: dict[str, Any], where: dict[str, Any], out: Path, rank: int) -> None:
    """Every rank's figures to global rank 0, after the timed steps (nothing here is metered)."""
    gathered: list[Any] | None = [None] * dist.get_world_size() if rank == 0 else None
    dist.gather_object((result, where), gathered, dst=0)
    if rank == 0:
        write_json_atomic(out / "ranks.json", {"ranks": [g[0] for g in gathered], "placement": [g[1] for g in gathered]})


if __name__ == "__main__":
    main()
