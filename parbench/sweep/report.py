"""The end-of-sweep summary: per point, the median over repeats and the spread.

Spread is the half-range over repeats relative to the median, ``(max - min) / 2 / median``
(with 2-5 repeats a range says more than a standard deviation; pytest-benchmark reports
min/max beside the median for the same reason).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from parbench.metrics import stats
from parbench.metrics.categories import CATEGORIES
from parbench.results import own_records
from parbench.summary import fmt_bytes, fmt_num
from parbench.sweep.grid import Plan


def sweep_records(results_dir: Path, sweep_id: str) -> list[dict[str, Any]]:
    """This sweep's records in ``<dir>/runs/``; for a (point, repeat) run twice, the latest ok one."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for rec in (r for r in own_records(results_dir) if r.get("sweep_id") == sweep_id):
        k = (rec["point_key"], rec["repeat"])
        old = latest.get(k)
        if old is None or (rec["status"] == "ok", rec["created_at"]) > (old["status"] == "ok", old["created_at"]):
            latest[k] = rec
    return list(latest.values())


def spread(values: list[float]) -> float:
    """(max - min) / 2 / median; 0 for one value."""
    m = stats.median(values)
    return (max(values) - min(values)) / 2 / m if m else 0.0


def _cell(values: list[float], scale: float = 1.0, spec: str = ".3g") -> str:
    if not values:
        return "-"
    s = f"{fmt_num(stats.median(values) * scale, spec)}"
    return s + (f" ±{spread(values) * 100:.0f}%" if len(values) > 1 else "")


def summary_table(plan: Plan, records: list[dict[str, Any]]) -> Table:
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_key[r["point_key"]].append(r)
    t = Table(title=f"sweep {plan.spec.sweep_id}: median ±spread over repeats (comm per rank per step)")
    for col in ("strategy", "W", "workload / variant", "ok/runs", "samples/s", "step ms", "peak RSS", "data", "parameter",
                "intermediate", "overhead s"):
        t.add_column(col, justify="left" if col in ("strategy", "workload / variant") else "right")
    for p in sorted(plan.points, key=lambda p: (p.config.workload.name, p.config.strategy.value, p.config.world_size)):
        recs = by_key.get(p.config.point_key(), [])
        ok = [r for r in recs if r["status"] == "ok"]
        col = lambda k: [r[k] for r in ok if r.get(k) is not None]  # noqa: E731
        variant = p.label.split(" ", 2)[2]  # the label is "<strategy> x<W> <workload and variant>"
        t.add_row(p.config.strategy.value, str(p.config.world_size), variant, f"{len(ok)}/{len(recs)}",
                  _cell(col("throughput_samples_per_s"), spec=".1f"), _cell(col("step_time_s_median"), 1e3, ".2f"),
                  fmt_bytes(stats.median(col("peak_rss_bytes"))) if ok else "-",
                  *(fmt_bytes(stats.median(col(f"comm_{c}_bytes_per_step"))) if ok else "-"
                    for c in CATEGORIES),
                  _cell(col("overhead_s"), spec=".2f"))
    return t


def overhead_by_world_size(records: list[dict[str, Any]]) -> dict[int, list[float]]:
    """The fixed per-run cost (``overhead_s``: wall time minus the timed steps) per world size."""
    out: dict[int, list[float]] = defaultdict(list)
    for r in records:
        if r["status"] == "ok" and r.get("overhead_s") is not None:
            out[r["world_size"]].append(r["overhead_s"])
    return dict(sorted(out.items()))


def print_summary(plan: Plan, outcome, results_dir: Path, wall_s: float, console: Console) -> None:
    records = sweep_records(results_dir, plan.spec.sweep_id)
    console.print(summary_table(plan, records))
    for s in plan.skipped:
        console.print(f"[yellow]skipped[/] {s.label}: {s.reason}")
    for r in outcome.failed:
        first = (r.get("error") or "").strip().splitlines()[:1]
        console.print(f"[red]{r['status']}[/] {r['strategy']} x{r['world_size']} {r['workload']} "
                      f"repeat {r['repeat']}: {first[0] if first else ''}")
    overhead = overhead_by_world_size(outcome.records)
    if overhead:
        parts = [f"W={w}: {stats.median(v):.2f} s (p10 {stats.quantile(v, .1):.2f}, p90 {stats.quantile(v, .9):.2f}, n={len(v)})"
                 for w, v in overhead.items()]
        console.print("per-run fixed overhead (wall time minus timed steps; launch, rendezvous, build, "
                      "warm-up and probe steps, teardown): " + "; ".join(parts))
    if outcome.first_launch_s is not None:
        console.print(f"first launch of this invocation (starts the forkserver, once): {outcome.first_launch_s:.2f} s")
    console.print(f"{len(outcome.records)} runs in {wall_s:.1f} s ({len(outcome.failed)} failed, "
                  f"{outcome.resumed} already recorded, {outcome.busy} running in another sweep, "
                  f"{len(plan.skipped)} points skipped)")
    console.print(f"results: {results_dir}/runs/  manifest: {results_dir}/sweeps/{plan.spec.sweep_id}/manifest.json")
    console.print(f"dashboard: parbench dashboard (serves {results_dir}/); table: parbench results --results-dir {results_dir}")
