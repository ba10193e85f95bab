"""Sweep manifests on disk: which sweep is still running, and marking the dead ones ``interrupted``.

A manifest says ``status: running`` from the sweep's start until its end. A sweep killed with
kill -9 (or by the OOM killer, or a power cut) never gets to rewrite it; the next ``parbench
sweep`` into the same directory marks such a manifest ``interrupted``, and ``parbench results``
shows it so without writing anything. A manifest counts as dead when it was written on this host
and its process is gone, or its pid now belongs to a process that started after the manifest
(the pid was reused). A manifest from another host (node 0 of a multi-node sweep) is left alone.

Torch-free: ``parbench results`` imports this.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from pathlib import Path
from typing import Any, Iterator

from parbench.results import now_iso, write_json_atomic


MANIFEST_TYPES: dict[str, type] = {
    **dict.fromkeys(("sweep_id", "status", "start_time", "end_time", "error"), str),
    **dict.fromkeys(("pid", "runs_ok", "runs_failed", "runs_planned"), int), "environment": dict}
"""Types of the manifest fields that ``parbench results`` and a later sweep read (null allowed)."""
_KIND_NAMES = {str: "a string", int: "an integer", dict: "an object"}


def manifest_problem(manifest: Any) -> str | None:
    """Why a parsed manifest cannot be read (not an object, the first wrong-typed field), else None."""
    if not isinstance(manifest, dict):
        return f"not a sweep manifest (a JSON {type(manifest).__name__}, not an object)"
    for key, kind in MANIFEST_TYPES.items():
        value = manifest.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            return f"field {key!r} is {value!r} ({type(value).__name__}), expected {_KIND_NAMES[kind]}"
    return None


def iter_manifests(results_dir: str | Path, problems: list[str] | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """(path, manifest) of every readable ``sweeps/*/manifest*.json`` under the directory; an unreadable or
    mistyped one is skipped, and named in ``problems`` when it is given."""
    for path in sorted(Path(results_dir).glob("sweeps/*/manifest*.json")):
        try:
            manifest = json.loads(path.read_text())
            problem = manifest_problem(manifest)
        except (OSError, ValueError) as exc:
            problem = str(exc)
        if problem is None:
            yield path, manifest
        elif problems is not None:
            problems.append(f"{path}: {problem}")


def process_start_epoch(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch, from /proc), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(float(l.split()[1]) for l in Path("/proc/stat").read_text().splitlines() if l.startswith("btime"))
    except (OSError, StopIteration, ValueError):
        return None
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def holder_is_dead(manifest: dict[str, Any]) -> bool:
    """True when the process that wrote this running manifest is certainly gone."""
    host = (manifest.get("environment") or {}).get("hostname")
    pid = manifest.get("pid")
    if host != socket.gethostname() or not isinstance(pid, int):
        return False  # another host's sweep: this host cannot tell
    started = process_start_epoch(pid)
    if started is None:
        return True
    try:
        written = _dt.datetime.fromisoformat(manifest["start_time"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return False
    return started > written + 1  # the pid was reused by a younger process (clock-tick slack)


def effective_status(manifest: dict[str, Any]) -> str:
    """The manifest's status, with a dead ``running`` sweep reported as ``interrupted``."""
    status = manifest.get("status", "?")
    return "interrupted" if status == "running" and holder_is_dead(manifest) else status


def mark_dead_interrupted(results_dir: str | Path) -> list[Path]:
    """Rewrite every dead ``running`` manifest as ``interrupted``; the paths rewritten."""
    marked = []
    for path, manifest in iter_manifests(results_dir):
        if manifest.get("status") == "running" and holder_is_dead(manifest):
            manifest.update(status="interrupted", interrupted_found_at=now_iso(),
                            interrupted_reason=f"process {manifest.get('pid')} ended without finishing the sweep "
                                               "(killed, or its host went down)")
            write_json_atomic(path, manifest)
            marked.append(path)
    for leftover in Path(results_dir).glob("sweeps/*/.reserve-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if not (pid.isdigit() and process_start_epoch(int(pid)) is not None):
            leftover.unlink(missing_ok=True)  # a killed sweep's disk-space reserve
    return marked


def sweep_rows(results_dir: str | Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per sweep (its current ``manifest.json``): id, effective status, runs, times; a manifest
    that cannot be read is named in ``problems``."""
    rows = []
    for path, m in iter_manifests(results_dir, problems):
        if path.name != "manifest.json":
            continue
        rows.append({"sweep_id": m.get("sweep_id", path.parent.name), "status": effective_status(m),
                     "runs_ok": m.get("runs_ok"), "runs_failed": m.get("runs_failed"),
                     "runs_planned": m.get("runs_planned"), "start_time": m.get("start_time"),
                     "end_time": m.get("end_time"), "error": m.get("error")})
    return rows
