"""Run a Plan: resume, claim, launch, record, manifest. Failure-isolating and concurrency-safe.

Resume: a (point_key, repeat) already recorded ``ok`` with this sweep_id in ``<dir>/runs/`` is
not run again (``force`` reruns it). Only ``<dir>/runs/`` counts, never a committed reference
sweep elsewhere under the directory.

Concurrency: before running a (point, repeat) a sweep takes an exclusive ``flock`` on
``<dir>/sweeps/<sweep_id>/claims/<point_key>-r<repeat>.lock``; the kernel drops it when the
holder dies (even by kill -9), so a second sweep of the same grid never runs a point twice at
the same time and never waits on a dead one. Records are one file each, written by rename.
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

from parbench.results import now_iso, provenance, write_json_atomic, write_record
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
    spec = plan.spec
    outcome = SweepOutcome(sweep_id=spec.sweep_id)
    progress = progress or (lambda *a: None)
    done = set() if force else recorded_ok(results_dir, spec.sweep_id)
    manifest = _manifest(plan, results_dir, force)
    _write_manifest(results_dir, spec.sweep_id, manifest)
    references: dict[str, list[float]] = {}
    try:
        for point in plan.points:
            for repeat in range(spec.repeats):
                _one(point, repeat, results_dir, done, references, outcome, progress, force)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        manifest.update(_tally(outcome), end_time=now_iso(),
                        status="interrupted" if outcome.interrupted else "finished")
        _write_manifest(results_dir, spec.sweep_id, manifest)
    return outcome


def _one(point: Point, repeat: int, results_dir: Path, done: set, references: dict,
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


def _run(point: Point, repeat: int, results_dir: Path, sweep_id: str, references: dict) -> dict[str, Any]:
    """One launch; anything that goes wrong in this process too becomes a failed record."""
    from parbench import launch
    from parbench.record import failed_record

    cfg = point.config
    t0 = time.perf_counter()
    try:
        ref = cfg.reference()
        if ref.point_key() not in references:  # repeats and strategies share one reference
            references[ref.point_key()] = launch.single_process_losses(ref)
        return launch.run(cfg, results_dir=results_dir, sweep_id=sweep_id, repeat=repeat,
                          reference_losses=references[ref.point_key()])
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - isolate: one broken point never ends the sweep
        err = SimpleNamespace(status="failed", error=f"sweep process: {type(exc).__name__}: {exc}", failed_rank=None)
        record = failed_record(cfg, err, time.perf_counter() - t0)
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
