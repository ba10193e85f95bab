"""Run a Plan: resume, claim, launch, record, manifest. Failure-isolating and concurrency-safe.

Resume: a (point_key, repeat) already recorded ``ok`` with this sweep_id in ``<dir>/runs/`` is
not run again (``force`` reruns it). Only ``<dir>/runs/`` counts, never a committed reference
sweep elsewhere under the directory.

Concurrency: before running a (point, repeat) a sweep takes an exclusive ``flock`` on
``<dir>/sweeps/<sweep_id>/claims/<point_key>-r<repeat>.lock``; the kernel drops it when the
holder dies (even by kill -9), so a second sweep of the same grid never runs a point twice at
the same time and never waits on a dead one. Records are one file each, written by rename.

Across nodes: ``parbench.sweep.nodes`` (the same sweep on every node, resume decided by node 0).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from parbench.config import ConfigError
from parbench.results import (check_writable, is_storage_error, now_iso, provenance, recorded_ok, write_json_atomic,
                              write_record)
from parbench.sweep.manifests import mark_dead_interrupted
from parbench.sweep.grid import AXES_BY_STRATEGY, Plan, Point


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
    manifest = new_manifest(plan, results_dir, force)
    references = launch_references()
    with _reserve(results_dir, manifest) as release:
        try:
            write_manifest(results_dir, spec.sweep_id, manifest)
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
    manifest.update(tally(outcome), end_time=now_iso(), status=status)
    if outcome.storage_error:
        manifest["error"] = f"results could not be written: {outcome.storage_error}"
    try:
        write_manifest(results_dir, outcome.sweep_id, manifest)
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
        return failed_run(cfg, exc, time.perf_counter() - t0, sweep_id, repeat, results_dir)


def failed_run(cfg, exc: BaseException, wall_s: float, sweep_id: str, repeat: int, results_dir: Path) -> dict[str, Any]:
    """A failed record (written) for an error raised in the sweep process itself."""
    from parbench.record import failed_record

    err = SimpleNamespace(status="failed", error=f"sweep process: {type(exc).__name__}: {exc}", failed_rank=None)
    record = failed_record(cfg, err, wall_s)
    record.update(sweep_id=sweep_id, repeat=repeat)
    write_record(results_dir, record)
    return record


# --- manifest ------------------------------------------------------------------------------


def new_manifest(plan: Plan, results_dir: Path, force: bool) -> dict[str, Any]:
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


def tally(outcome: SweepOutcome) -> dict[str, Any]:
    return {"runs_ok": sum(r["status"] == "ok" for r in outcome.records),
            "runs_failed": len(outcome.failed), "runs_resumed": outcome.resumed,
            "runs_busy_elsewhere": outcome.busy, "run_ids": [r["run_id"] for r in outcome.records]}


def write_manifest(results_dir: Path, sweep_id: str, manifest: dict[str, Any]) -> None:
    """``manifest.json`` is this invocation's; earlier invocations of the same sweep stay as
    ``manifest-<start>-<pid>.json`` beside it, so concurrent or resumed sweeps lose nothing."""
    folder = results_dir / "sweeps" / sweep_id
    stamp = manifest["start_time"].replace(":", "").replace("+0000", "Z")
    write_json_atomic(folder / f"manifest-{stamp}-{manifest['pid']}.json", manifest)
    write_json_atomic(folder / "manifest.json", manifest)
