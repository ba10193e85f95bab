"""A multi-node sweep: ``parbench sweep FILE --nnodes N ...`` on every node: each expands the same grid
in the same order and runs, point after point, its part of one torchrun job per run
(``multinode.launch.run_node``). Run i of the job list rendezvouses on port ``base + 1 + i`` (c10d:
endpoint port + 1 + i and rdzv id ``<id>-<i>``): a node that finishes run i early can never join run
i's store, still open on a slower node, for run i + 1. Which runs to do is decided once, by node 0
(resume from its results directory), and published through a TCPStore on the base port that the
other nodes read before their first launch: no node skips a run another one waits in. Without a node
0 (c10d rendezvous) there is no such store: resume is off and every node runs every run.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from parbench.config import ConfigError
from parbench.multinode import NodeLayout
from parbench.results import now_iso, recorded_ok
from parbench.sweep.execute import (ProgressFn, SweepOutcome, failed_run, launch_references, new_manifest, tally,
                                    write_manifest)
from parbench.sweep.grid import Plan, Point, Skipped
from parbench.sweep.manifests import mark_dead_interrupted

PLAN_KEY = "parbench/sweep/plan"
PLAN_TIMEOUT_S = 600.0
"""How long node 0 waits for the others to read the plan, and they for node 0 to publish it."""


def for_layout(the_plan: Plan, layout: NodeLayout) -> Plan:
    """The points of world size nnodes x nproc_per_node; the rest become skipped, with why."""
    fits = tuple(p for p in the_plan.points if p.config.world_size == layout.world_size)
    why = f"world_size != nnodes x nproc_per_node = {layout.nnodes} x {layout.nproc_per_node}"
    skipped = tuple(Skipped(p.label, why) for p in the_plan.points if p not in fits)
    if not fits:
        raise ConfigError(f"{the_plan.spec.source}: no point of world_size={layout.world_size} "
                          f"(= nnodes x nproc_per_node) in the grid")
    last_port = _base_port(layout) + len(fits) * the_plan.spec.repeats
    if last_port > 65535:
        raise ConfigError(f"{len(fits) * the_plan.spec.repeats} runs need ports {_base_port(layout) + 1}.."
                          f"{last_port}: pick a lower --master-port")
    return replace(the_plan, points=fits, skipped=the_plan.skipped + skipped)


def _base_port(layout: NodeLayout) -> int:
    return int(layout.rdzv_endpoint.rsplit(":", 1)[1]) if layout.rdzv_endpoint else layout.master_port


def run_layout(layout: NodeLayout, index: int) -> NodeLayout:
    """The layout of run ``index``: its own rendezvous port (and c10d job id), equal on every node."""
    if layout.rdzv_endpoint:
        host, port = layout.rdzv_endpoint.rsplit(":", 1)
        return replace(layout, rdzv_endpoint=f"{host}:{int(port) + 1 + index}", rdzv_id=f"{layout.rdzv_id}-{index}")
    return replace(layout, master_port=layout.master_port + 1 + index)


def node_runs(the_plan: Plan) -> list[tuple[int, Point, int]]:
    """(index, point, repeat) of every run, in the order every node goes through them."""
    runs = [(p, r) for p in the_plan.points for r in range(the_plan.spec.repeats)]
    return [(i, p, r) for i, (p, r) in enumerate(runs)]


def execute_nodes(the_plan: Plan, results_dir: str | Path, layout: NodeLayout, *, force: bool = False,
                  progress: ProgressFn | None = None) -> SweepOutcome:
    """This node's part of a multi-node sweep (``the_plan`` already passed through ``for_layout``).

    Node 0 (``--node-rank 0``) writes the records and the manifest; the others write nothing.
    """
    results_dir = Path(results_dir)
    outcome = SweepOutcome(sweep_id=the_plan.spec.sweep_id)
    progress = progress or (lambda *a: None)
    runs = node_runs(the_plan)
    writer = layout.node_rank == 0
    manifest = None
    if writer:
        mark_dead_interrupted(results_dir)
        manifest = new_manifest(the_plan, results_dir, force) | {
            "launcher": "torchrun", "nodes": layout.nnodes, "ranks_per_node": layout.nproc_per_node,
            "rendezvous": "c10d" if layout.rdzv_endpoint else "static", "base_port": _base_port(layout)}
        write_manifest(results_dir, outcome.sweep_id, manifest)
    status = "failed"  # stays so when an error (a node with another grid) ends the sweep
    try:
        todo = set(share_plan(the_plan, layout, results_dir, force))
        references = launch_references()
        for index, point, repeat in runs:
            if index not in todo:
                outcome.resumed += 1
                progress("skip", point, repeat, None)
                continue
            progress("start", point, repeat, None)
            record = _run_node(point, repeat, results_dir, outcome.sweep_id, references, run_layout(layout, index))
            if record is not None:  # (first_launch_s stays None: no forkserver to start)
                outcome.records.append(record)
            progress("done", point, repeat, record)
        status = "finished"
    except KeyboardInterrupt:
        outcome.interrupted, status = True, "interrupted"
    finally:
        if manifest is not None:
            manifest.update(tally(outcome), end_time=now_iso(), status=status)
            write_manifest(results_dir, outcome.sweep_id, manifest)
    return outcome


def share_plan(the_plan: Plan, layout: NodeLayout, results_dir: Path, force: bool) -> list[int]:
    """The indices of the runs every node does: node 0 decides (resume) and publishes, the others read.

    Raises ConfigError on a node whose grid differs from node 0's (a different sweep file): node 0
    learns it from that node's answer and raises too, so no node waits for a run that never forms.
    """
    runs = node_runs(the_plan)
    if layout.rdzv_endpoint:  # c10d: no node is known to be node 0 until torchrun ranks them
        if not force:
            print("multi-node sweep with --rdzv-endpoint: resume is off (no node 0 to decide it); "
                  "every run is done again. Use --master-addr/--master-port to resume.")
        return [i for i, _, _ in runs]
    mine = {"sweep_id": the_plan.spec.sweep_id, "runs": [f"{p.config.point_key()}-r{r}" for _, p, r in runs]}
    try:
        store = _plan_store(layout)
        if layout.node_rank == 0:
            done = set() if force else recorded_ok(results_dir, the_plan.spec.sweep_id)
            return _publish(store, layout, mine | {"todo": [i for i, p, r in runs if (p.config.point_key(), r) not in done]})
        return _read(store, layout, mine)
    except RuntimeError as exc:  # DistStoreError: a node did not come within PLAN_TIMEOUT_S
        raise ConfigError(f"multi-node sweep: the plan exchange on {layout.master_addr}:{layout.master_port} "
                          f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def _publish(store, layout: NodeLayout, the_plan: dict[str, Any]) -> list[int]:
    """Node 0: set the plan, wait for every other node's answer ("ok" or why its grid differs)."""
    store.set(PLAN_KEY, json.dumps(the_plan))
    acks = [f"{PLAN_KEY}/ack{k}" for k in range(1, layout.nnodes)]
    store.wait(acks)
    wrong = [f"node {k}: {store.get(key).decode()}" for k, key in enumerate(acks, 1) if store.get(key) != b"ok"]
    if wrong:
        _plan_error("; ".join(wrong))
    return the_plan["todo"]


def _read(store, layout: NodeLayout, mine: dict[str, Any]) -> list[int]:
    """Another node: read node 0's plan, answer whether this node's grid is the same."""
    published = json.loads(store.get(PLAN_KEY))
    same = {k: published[k] for k in mine} == mine
    store.set(f"{PLAN_KEY}/ack{layout.node_rank}",
              "ok" if same else f"its grid (sweep {mine['sweep_id']}, {len(mine['runs'])} runs) differs "
                                f"from node 0's (sweep {published['sweep_id']}, {len(published['runs'])} runs)")
    if not same:
        _plan_error(f"this node's grid differs from node 0's (sweep {mine['sweep_id']} vs {published['sweep_id']})")
    return published["todo"]


def _plan_store(layout: NodeLayout):
    """Node 0 hosts it on the base port (its torchrun runs use the ports above), listening on
    ``--master-addr`` only (a plain TCPStore would listen on every interface); the others connect."""
    import datetime

    import torch.distributed as dist

    from parbench.distributed.store import master_store

    if layout.node_rank == 0:
        try:
            return master_store(layout.nnodes, host=layout.master_addr, port=layout.master_port,
                                timeout_s=PLAN_TIMEOUT_S)
        except OSError as exc:
            raise ConfigError(f"multi-node sweep: node 0 cannot listen on --master-addr {layout.master_addr}:"
                              f"{layout.master_port}: {exc.strerror} (it must be an address of node 0)") from None
    return dist.TCPStore(layout.master_addr, layout.master_port, is_master=False,
                         timeout=datetime.timedelta(seconds=PLAN_TIMEOUT_S))


def _plan_error(detail: str) -> None:
    raise ConfigError(f"multi-node sweep: every node must run the same sweep: {detail}")


def _run_node(point: Point, repeat: int, results_dir: Path, sweep_id: str, references,
              layout: NodeLayout) -> dict[str, Any] | None:
    """One run's torchrun job on this node; the record where rank 0 was, else None."""
    from parbench.multinode.launch import run_node

    cfg = point.config
    t0 = time.perf_counter()
    try:
        return run_node(cfg, layout, results_dir=results_dir, sweep_id=sweep_id, repeat=repeat,
                                  references=references)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - isolate: one broken point never ends the sweep
        if layout.node_rank != 0:
            print(f"node {layout.node_rank}: {point.label} r{repeat}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        return failed_run(cfg, exc, time.perf_counter() - t0, sweep_id, repeat, results_dir)
