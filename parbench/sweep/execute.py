"""Run a Plan: resume, claim, launch, record, manifest. Failure-isolating and concurrency-safe.

Resume: a (point_key, repeat) already recorded ``ok`` with this sweep_id in ``<dir>/runs/`` is
not run again (``force`` reruns it). Only ``<dir>/runs/`` counts, never a committed reference
sweep elsewhere under the directory.

Concurrency: before running a (point, repeat) a sweep takes an exclusive ``flock`` on
``<dir>/sweeps/<sweep_id>/claims/<point_key>-r<repeat>.lock``; the kernel drops it when the
holder dies (even by kill -9), so a second sweep of the same grid never runs a point twice at
the same time and never waits on a dead one. Records are one file each, written by rename.

Across nodes (``execute_nodes``): one torchrun job per run, resume decided by node 0 alone and
published to the others; see the section "across nodes" below.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from parbench.config import ConfigError
from parbench.multinode import NodeLayout
from parbench.results import check_writable, is_storage_error, now_iso, provenance, write_json_atomic, write_record
from parbench.sweep.manifests import mark_dead_interrupted
from parbench.sweep.grid import AXES_BY_STRATEGY, Plan, Point, Skipped


@dataclass
class SweepOutcome:
    sweep_id: str
    records: list[dict[str, Any]] = field(default_factory=list)
    """Records written by this invocation."""
    resumed: int = 0
    """Runs skipped because an ok record of them was already there."""
    busy: int = 0
    """Runs skipped because another sweep held their claim."""
    interrupted: bool = False
    storage_error: str | None = None
    """Set when a record or claim could not be written (disk full, quota, read-only): the sweep stopped."""
    manifest_written: bool = True
    """False when even the final manifest could not be written (it still reads ``running``)."""
    first_launch_s: float | None = None
    """Wall time of this invocation's first launch (it starts the forkserver: paid once)."""

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r["status"] != "ok"]


# --- resume --------------------------------------------------------------------------------


def recorded_ok(results_dir: Path, sweep_id: str) -> set[tuple[str, int]]:
    """(point_key, repeat) of this sweep's ok records in ``<dir>/runs/`` (corrupt files ignored)."""
    done = set()
    for path in (results_dir / "runs").glob("*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("sweep_id") == sweep_id and rec.get("status") == "ok":
            done.add((rec.get("point_key"), rec.get("repeat")))
    return done


@contextlib.contextmanager
def claim(results_dir: Path, sweep_id: str, key: str, repeat: int) -> Iterator[Path | None]:
    """The claim file, locked for this process; None when another live sweep holds it."""
    path = results_dir / "sweeps" / sweep_id / "claims" / f"{key}-r{repeat}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield path
    finally:
        os.close(fd)  # closing drops the lock


def _claimed_done(path: Path, results_dir: Path) -> bool:
    """True when the claim names an ok record that exists (another sweep finished it meanwhile)."""
    run_id = path.read_text().strip()
    return bool(run_id) and (results_dir / "runs" / f"{run_id}.json").exists()


# --- running -------------------------------------------------------------------------------


ProgressFn = Callable[[str, Point, int, dict[str, Any] | None], None]
"""(event, point, repeat, record): event is ``start``, ``done`` or ``skip``."""


def execute(plan: Plan, results_dir: str | Path, *, force: bool = False,
            progress: ProgressFn | None = None) -> SweepOutcome:
    results_dir = Path(results_dir)
    check_writable(results_dir)  # ConfigError before the first run
    mark_dead_interrupted(results_dir)  # earlier sweeps killed mid-way stop reading "running"
    spec = plan.spec
    outcome = SweepOutcome(sweep_id=spec.sweep_id)
    progress = progress or (lambda *a: None)
    done = set() if force else recorded_ok(results_dir, spec.sweep_id)
    manifest = _manifest(plan, results_dir, force)
    references = launch_references()
    with _reserve(results_dir, manifest) as release:
        try:
            _write_manifest(results_dir, spec.sweep_id, manifest)
            for point in plan.points:
                for repeat in range(spec.repeats):
                    _one(point, repeat, results_dir, done, references, outcome, progress, force)
        except KeyboardInterrupt:
            outcome.interrupted = True
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            outcome.storage_error = f"{exc.strerror} ({exc.filename or results_dir})"
        finally:
            release()  # the reserved space now takes the final manifest, even on a full disk
            _finish_manifest(results_dir, manifest, outcome)
    return outcome


def _finish_manifest(results_dir: Path, manifest: dict[str, Any], outcome: SweepOutcome) -> None:
    status = "interrupted" if outcome.interrupted else "failed" if outcome.storage_error else "finished"
    manifest.update(_tally(outcome), end_time=now_iso(), status=status)
    if outcome.storage_error:
        manifest["error"] = f"results could not be written: {outcome.storage_error}"
    try:
        _write_manifest(results_dir, outcome.sweep_id, manifest)
    except OSError as exc:
        if not is_storage_error(exc):
            raise
        outcome.manifest_written = False


@contextlib.contextmanager
def _reserve(results_dir: Path, manifest: dict[str, Any]) -> Iterator[Callable[[], None]]:
    """Disk space set aside for the final manifest (both copies, with every run id), released just
    before it is written: a disk that fills up during the sweep still gets an honest manifest."""
    size = 2 * (len(json.dumps(manifest)) + 40 * manifest["runs_planned"]) + 16 * 1024
    path = results_dir / "sweeps" / manifest["sweep_id"] / f".reserve-{os.getpid()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    except OSError as exc:
        path.unlink(missing_ok=True)
        if not is_storage_error(exc):
            raise
        raise ConfigError(f"results directory {results_dir}: no room for the sweep's manifest "
                          f"({size // 1024} KiB): {exc.strerror}") from None
    try:
        yield lambda: path.unlink(missing_ok=True)
    finally:
        path.unlink(missing_ok=True)


def launch_references():
    """The sweep's reference cache (``parbench.launch`` imports torch: only once a sweep runs)."""
    from parbench.launch import References

    return References()


def _one(point: Point, repeat: int, results_dir: Path, done: set, references,
         outcome: SweepOutcome, progress: ProgressFn, force: bool) -> None:
    key = point.config.point_key()
    if (key, repeat) in done:
        outcome.resumed += 1
        progress("skip", point, repeat, None)
        return
    with claim(results_dir, outcome.sweep_id, key, repeat) as claim_path:
        if claim_path is None or (not force and _claimed_done(claim_path, results_dir)):
            outcome.busy += claim_path is None
            outcome.resumed += claim_path is not None
            progress("skip", point, repeat, None)
            return
        progress("start", point, repeat, None)
        record = _run(point, repeat, results_dir, outcome.sweep_id, references)
        if outcome.first_launch_s is None:
            outcome.first_launch_s = record.get("wall_time_s")
        if record["status"] == "ok":
            claim_path.write_text(record["run_id"])
    outcome.records.append(record)
    progress("done", point, repeat, record)


def _run(point: Point, repeat: int, results_dir: Path, sweep_id: str, references) -> dict[str, Any]:
    """One launch; anything that goes wrong in this process too becomes a failed record."""
    from parbench import launch

    cfg = point.config
    t0 = time.perf_counter()
    try:
        return launch.run(cfg, results_dir=results_dir, sweep_id=sweep_id, repeat=repeat,
                          references=references)  # repeats and strategies share one reference
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - isolate: one broken point never ends the sweep
        if isinstance(exc, OSError) and is_storage_error(exc):
            raise  # a full disk ends the sweep: no later record could be written either
        return _failed(cfg, exc, time.perf_counter() - t0, sweep_id, repeat, results_dir)


def _failed(cfg, exc: BaseException, wall_s: float, sweep_id: str, repeat: int, results_dir: Path) -> dict[str, Any]:
    """A failed record (written) for an error raised in the sweep process itself."""
    from parbench.record import failed_record

    err = SimpleNamespace(status="failed", error=f"sweep process: {type(exc).__name__}: {exc}", failed_rank=None)
    record = failed_record(cfg, err, wall_s)
    record.update(sweep_id=sweep_id, repeat=repeat)
    write_record(results_dir, record)
    return record


# --- manifest ------------------------------------------------------------------------------


def _manifest(plan: Plan, results_dir: Path, force: bool) -> dict[str, Any]:
    spec = plan.spec
    return {
        "sweep_id": spec.sweep_id,
        "name": spec.name,
        "source": spec.source,
        "spec": spec.values,
        "strategies_resolved": list(plan.strategies),
        "combination_rules": {"single": "world_size 1 only", "others": "world_size >= 2",
                              **{s.value: list(a) for s, a in AXES_BY_STRATEGY.items()}},
        "points": [{"point_key": p.config.point_key(), "label": p.label, "config": p.config.to_dict()}
                   for p in plan.points],
        "skipped": [{"label": s.label, "reason": s.reason} for s in plan.skipped],
        "repeats": spec.repeats,
        "runs_planned": plan.runs,
        "force": force,
        "results_dir": str(results_dir),
        "pid": os.getpid(),
        "environment": provenance(),
        "start_time": now_iso(),
        "end_time": None,
        "status": "running",
    }


def _tally(outcome: SweepOutcome) -> dict[str, Any]:
    return {"runs_ok": sum(r["status"] == "ok" for r in outcome.records),
            "runs_failed": len(outcome.failed), "runs_resumed": outcome.resumed,
            "runs_busy_elsewhere": outcome.busy, "run_ids": [r["run_id"] for r in outcome.records]}


def _write_manifest(results_dir: Path, sweep_id: str, manifest: dict[str, Any]) -> None:
    """``manifest.json`` is this invocation's; earlier invocations of the same sweep stay as
    ``manifest-<start>-<pid>.json`` beside it, so concurrent or resumed sweeps lose nothing."""
    folder = results_dir / "sweeps" / sweep_id
    stamp = manifest["start_time"].replace(":", "").replace("+0000", "Z")
    write_json_atomic(folder / f"manifest-{stamp}-{manifest['pid']}.json", manifest)
    write_json_atomic(folder / "manifest.json", manifest)


# --- across nodes --------------------------------------------------------------------------
#
# ``parbench sweep FILE --nnodes N ...`` on every node: each expands the same grid in the same
# order and runs, point after point, its part of one torchrun job per run (``multinode.run_node``).
# Run i of the job list rendezvouses on port ``base + 1 + i`` (c10d: endpoint port + 1 + i and
# rdzv id ``<id>-<i>``): a node that finishes run i early can never join run i's store, still open
# on a slower node, for run i + 1. Which runs to do is decided once, by node 0 (resume from its
# results directory), and published through a TCPStore on the base port that the other nodes
# read before their first launch: no node skips a run another one waits in. Without a node 0
# (c10d rendezvous) there is no such store: resume is off and every node runs every run.

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
        manifest = _manifest(the_plan, results_dir, force) | _node_fields(layout)
        _write_manifest(results_dir, outcome.sweep_id, manifest)
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
            manifest.update(_tally(outcome), end_time=now_iso(), status=status)
            _write_manifest(results_dir, outcome.sweep_id, manifest)
    return outcome


def _node_fields(layout: NodeLayout) -> dict[str, Any]:
    return {"launcher": "torchrun", "nodes": layout.nnodes, "ranks_per_node": layout.nproc_per_node,
            "rendezvous": "c10d" if layout.rdzv_endpoint else "static", "base_port": _base_port(layout)}


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
    """Node 0 hosts it on the base port (its torchrun runs use the ports above); the others connect."""
    import datetime

    import torch.distributed as dist

    return dist.TCPStore(layout.master_addr, layout.master_port, is_master=layout.node_rank == 0,
                         wait_for_workers=False, timeout=datetime.timedelta(seconds=PLAN_TIMEOUT_S))


def _plan_error(detail: str) -> None:
    raise ConfigError(f"multi-node sweep: every node must run the same sweep: {detail}")


def _run_node(point: Point, repeat: int, results_dir: Path, sweep_id: str, references,
              layout: NodeLayout) -> dict[str, Any] | None:
    """One run's torchrun job on this node; the record where rank 0 was, else None."""
    from parbench import launch, multinode

    cfg = point.config
    t0 = time.perf_counter()
    try:
        return multinode.run_node(cfg, layout, results_dir=results_dir, sweep_id=sweep_id, repeat=repeat,
                                  references=references)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - isolate: one broken point never ends the sweep
        if layout.node_rank != 0:
            print(f"node {layout.node_rank}: {point.label} r{repeat}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        return _failed(cfg, exc, time.perf_counter() - t0, sweep_id, repeat, results_dir)
