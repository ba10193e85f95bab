"""One run on this host: check it, spawn its ranks (``parbench.runner.run_rank``), build and write
its record; the single-process reference is launched the same way."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parbench import preflight
from parbench.config import ConfigError, RunConfig
from parbench.distributed import Outcome, spawn
from parbench.rank_result import RankResult
from parbench.record import build_record, failed_record


def launch(cfg: RunConfig) -> Outcome:
    """Check ``cfg`` on this machine (ConfigError before any process exists), then run its ranks."""
    from parbench.runner import run_rank
    from parbench.workloads import preload_modules

    preflight.check(cfg)
    return spawn(cfg.world_size, run_rank, cfg, timeout_s=cfg.timeout_s, backend=cfg.backend.value,
                 device=cfg.device, threads=cfg.threads, preload=preload_modules([cfg.workload.name]))


def run(cfg: RunConfig, *, results_dir: str | Path | None = "results", sweep_id: str | None = None,
        repeat: int = 0, references: "References | None" = None) -> dict[str, Any]:
    """Launch one run and write its record and trace (when ``results_dir`` is given); returns the record."""
    record, ranks = measure_run(cfg, sweep_id=sweep_id, repeat=repeat, references=references)
    if results_dir is not None:
        save(results_dir, record, ranks)
    return record


def measure_run(cfg: RunConfig, *, sweep_id: str | None = None, repeat: int = 0,
                references: "References | None" = None) -> tuple[dict[str, Any], list[RankResult]]:
    """Launch one run: (its record, the ranks' figures; empty unless ok). Writes nothing.
    The reference is computed only once the run succeeded, so a run that hangs costs one timeout."""
    outcome = launch(cfg)
    wall = outcome.wall_s
    if outcome.status == "ok":
        losses, why = (references or References()).of(cfg)
        record = build_record(cfg, outcome.results, wall, reference_losses=losses, reference_error=why)
    else:
        record = failed_record(cfg, outcome, wall)
    record.update(sweep_id=sweep_id, repeat=repeat)
    return record, outcome.results if outcome.status == "ok" else []


def save(results_dir: str | Path, record: dict[str, Any], ranks: list[RankResult]) -> None:
    """Write the run's Chrome trace (runs with traced steps), then its record, which points to it.
    A trace that cannot be written costs the trace only (``trace_file`` null), never the record; a
    record that cannot be written takes its trace with it (the error propagates)."""
    from parbench import results, trace

    if ranks:
        try:
            traces = [{"role": r.role, "trace": r.trace} for r in ranks]
            record["trace_file"] = trace.write_trace(results_dir, record, traces)
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
    try:
        outcome = launch(ref)
    except ConfigError as exc:  # e.g. the whole model on one GPU: the run stands, without its reference
        return None, f"reference refused: {exc}"
    if outcome.status != "ok":
        return None, f"reference {outcome.status}: {outcome.error}"
    return [float(v) for v in outcome.results[0].losses], None

