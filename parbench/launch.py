"""Start ``world_size`` rank processes with torch.multiprocessing, watch them, and build the record.

The launcher owns the rendezvous (a TCPStore on 127.0.0.1, port chosen by the kernel, so two
runs never race for a port), a deadline, and the rank processes: a rank that fails or hangs
ends the run, and every rank process is killed before ``launch`` returns.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from parbench.config import ConfigError, RunConfig
from parbench.record import build_record, failed_record
from parbench.validation import check_environment, check_host_capacity

POLL_S = 0.02
# Rank processes fork from a server that has imported torch and parbench once, so a launch
# costs a fork, not an interpreter start plus `import torch` per rank.
multiprocessing.set_forkserver_preload(["torch", "torch.distributed", "parbench.runner"])


def prestart() -> None:
    """Start the forkserver now (it imports torch in the background, ~2-10 s on a busy 2-core
    machine) so that the caller's own set-up overlaps with it instead of preceding the first launch."""
    from multiprocessing import forkserver

    forkserver.ensure_running()


@dataclass
class RankOutcome:
    results: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    failed_rank: int | None = None


def launch(cfg: RunConfig) -> tuple[RankOutcome, float]:
    """Run the ranks; (outcome, wall seconds). Never leaves a rank process behind."""
    check_environment(cfg)
    check_host_capacity(cfg.world_size, cfg.device)
    check_implemented(cfg)
    out_dir = Path(tempfile.mkdtemp(prefix="parbench-run-"))
    store = dist.TCPStore("127.0.0.1", 0, cfg.world_size + 1, is_master=True, wait_for_workers=False)
    t0 = time.perf_counter()
    context = mp.start_processes(
        _entry, args=(cfg.world_size, store.port, cfg.to_dict(), str(out_dir)),
        nprocs=cfg.world_size, join=False, start_method="forkserver",
    )
    try:
        outcome = _watch(context.processes, out_dir, cfg)
    finally:
        _kill_all(context.processes)
        wall = time.perf_counter() - t0
        shutil.rmtree(out_dir, ignore_errors=True)
        del store
    return outcome, wall


def check_implemented(cfg: RunConfig) -> None:
    from parbench.strategies import BUILDERS

    if cfg.strategy not in BUILDERS:
        have = ", ".join(s.value for s in BUILDERS)
        raise ConfigError(f"strategy={cfg.strategy.value} is not implemented yet; implemented: {have}")


def _entry(rank: int, world_size: int, port: int, config: dict, out_dir: str) -> None:
    from parbench.runner import rank_entry

    rank_entry(rank, world_size, port, config, out_dir)


def _watch(procs, out_dir: Path, cfg: RunConfig) -> RankOutcome:
    """Poll until every rank has a result, one fails, or the deadline passes."""
    deadline = time.monotonic() + cfg.timeout_s
    done = [out_dir / f"rank{r}.json" for r in range(len(procs))]
    while True:
        if all(p.exists() for p in done):
            return RankOutcome(results=[_read(p) for p in done])
        dead = [r for r, proc in enumerate(procs) if proc.exitcode is not None and not done[r].exists()]
        if dead or list(out_dir.glob("rank*.error.json")):
            time.sleep(0.5)  # let the other ranks' errors land: the first one is the cause
            return _failure(out_dir, procs, dead)
        if time.monotonic() > deadline:
            missing = [r for r in range(len(procs)) if not done[r].exists()]
            return RankOutcome(status="timeout", failed_rank=missing[0] if missing else None,
                               error=f"timed out after {cfg.timeout_s:g} s; ranks without a result: {missing}")
        time.sleep(POLL_S)


def _failure(out_dir: Path, procs, dead: list[int]) -> RankOutcome:
    """The cause: a rank that died without a word (a signal: SIGKILL from the OOM killer, a
    segfault), else the earliest error a rank reported (later ones are peers losing their connection)."""
    errors = sorted((_read(p) for p in out_dir.glob("rank*.error.json")), key=lambda e: e["time"])
    silent = [r for r in dead if r not in {e["rank"] for e in errors}]
    if errors and not silent:
        err = errors[0]
        tail = err.get("traceback", "").strip().splitlines()[-3:]
        return RankOutcome(status="failed", failed_rank=err["rank"],
                           error=f"rank {err['rank']}: {err['error']}\n" + "\n".join(tail))
    rank = silent[0]
    code = procs[rank].exitcode
    return RankOutcome(status="failed", failed_rank=rank,
                       error=f"rank {rank} died with exit code {code} ({_signal_name(code)}) before writing its result")


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit {code}"


def _kill_all(procs) -> None:
    """SIGKILL every rank still alive and reap it: no orphans, no zombies."""
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=5)


def run(cfg: RunConfig, *, results_dir: str | Path | None = "results", sweep_id: str | None = None,
        repeat: int = 0, references: "References | None" = None) -> dict[str, Any]:
    """Launch one run and write its record and trace (when ``results_dir`` is given); returns the record."""
    record, ranks = measure_run(cfg, sweep_id=sweep_id, repeat=repeat, references=references)
    if results_dir is not None:
        save(results_dir, record, ranks)
    return record


def measure_run(cfg: RunConfig, *, sweep_id: str | None = None, repeat: int = 0,
                references: "References | None" = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Launch one run: (its record, the ranks' figures; empty unless ok). Writes nothing.
    The reference is computed only once the run succeeded, so a run that hangs costs one timeout."""
    outcome, wall = launch(cfg)
    if outcome.status == "ok":
        losses, why = (references or References()).of(cfg)
        record = build_record(cfg, outcome.results, wall, reference_losses=losses, reference_error=why)
    else:
        record = failed_record(cfg, outcome, wall)
    record.update(sweep_id=sweep_id, repeat=repeat)
    return record, outcome.results if outcome.status == "ok" else []


def save(results_dir: str | Path, record: dict[str, Any], ranks: list[dict[str, Any]]) -> None:
    """Write the run's Chrome trace (runs with traced steps), then its record, which points to it.
    A trace that cannot be written costs the trace only (``trace_file`` null), never the record; a
    record that cannot be written takes its trace with it (the error propagates)."""
    from parbench import results, trace

    if ranks:
        try:
            record["trace_file"] = trace.write_trace(results_dir, record, ranks)
        except OSError as exc:
            record["trace_file"] = None
            warnings.warn(f"trace of run {record['run_id']} not written: {exc}", stacklevel=2)
    try:
        results.write_record(results_dir, record)
    except OSError:
        if record.get("trace_file"):
            (Path(results_dir) / record["trace_file"]).unlink(missing_ok=True)  # no trace without its record
        raise


@dataclass
class References:
    """Single-process reference losses, one per reference configuration, shared by the repeats and
    strategies of a sweep: (losses, None), or (None, why the reference could not run)."""

    cache: dict[str, tuple[list[float] | None, str | None]] = field(default_factory=dict)

    def of(self, cfg: RunConfig) -> tuple[list[float] | None, str | None]:
        ref = cfg.reference()
        if ref.point_key() not in self.cache:
            self.cache[ref.point_key()] = reference_losses(ref)
        return self.cache[ref.point_key()]


def reference_losses(ref: RunConfig) -> tuple[list[float] | None, str | None]:
    """The reference: the same workload, global batch, seed and precision as one rank on the run's
    device, launched like any run, so the run's timeout bounds it (a GPU-sized model on one CPU
    thread in this process would look like a hang). One loss per step the run took (warm-up, probe
    and timed). A reference that cannot run (the model does not fit one device, the timeout) gives
    no losses and the reason, which the record keeps."""
    outcome, _ = launch(ref)
    if outcome.status != "ok":
        return None, f"reference {outcome.status}: {outcome.error}"
    return [float(v) for v in outcome.results[0]["losses"]], None
