"""``parbench results``: what is in a results directory, one row per run; ``--export`` to CSV/Parquet."""

from __future__ import annotations

import argparse
import os
import sys

from parbench.results import STATUSES

COLUMNS = ("run", "source", "sweep", "workload", "layout", "rep", "status", "samples/s", "step ms", "peak RSS",
           "comm/step", "created")
"""Configuration first (the short run id, where it came from, the workload and the layout key), then metrics."""
NARROW = {140: ("sweep", "created", "peak RSS"), 110: ("rep", "source")}
"""Columns left out below a terminal width (the run id finds the rest in ``--export``)."""
NUMERIC = ("samples/s", "step ms", "peak RSS", "comm/step", "created")


def add_parser(sub) -> None:
    p = sub.add_parser("results", help="list the runs in a results directory; export them",
                       description=__doc__)
    p.add_argument("--results-dir", default="results", help="results directory to list")
    p.add_argument("--sweep", default=None, help="only this sweep_id")
    p.add_argument("--status", default=None, choices=STATUSES, help="only runs with this status")
    p.add_argument("--breakdown", action="store_true",
                   help="show where the step time goes (ms per step, busiest rank) instead of the summary columns")
    p.add_argument("--export", default=None, metavar="FILE", help="write every matching run to FILE (.csv or .parquet)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from rich.console import Console

    from parbench.config import ConfigError
    from parbench.results import check_output_file, check_readable, export, load
    from parbench.sweep.manifests import sweep_rows

    root = check_readable(a.results_dir)
    if a.export:
        if not a.export.endswith((".csv", ".parquet")):
            raise ConfigError(f"--export {a.export}: use a .csv or .parquet file name")
        check_output_file(a.export, "--export")
    problems: list[str] = []
    frame = load(root, problems=problems)
    for p in problems:  # skipped files, named
        print(f"warning: skipped corrupt result record {p}", file=sys.stderr)
    if a.sweep:
        known = sorted(set(frame["sweep_id"].dropna()))
        if a.sweep not in known:
            raise ConfigError(f"--sweep {a.sweep}: no run of that sweep in {root}; sweeps there: "
                              f"{', '.join(known) or 'none'}")
        frame = frame[frame["sweep_id"] == a.sweep]
    if a.status:
        frame = frame[frame["status"] == a.status]
    # a terminal (or $COLUMNS): fit its width; a pipe: wide enough that no cell folds
    console = Console() if Console().is_terminal or os.environ.get("COLUMNS") else Console(width=200)
    if a.export:
        console.print(f"wrote {len(frame)} runs to {export(frame, a.export)}")
        return 0
    console.print(breakdown_table(frame, a.results_dir) if a.breakdown else table(frame, a.results_dir, console.width))
    unreadable: list[str] = []
    sweeps = [r for r in sweep_rows(root, unreadable) if not a.sweep or r["sweep_id"] == a.sweep]
    for p in unreadable:
        print(f"warning: skipped unreadable sweep manifest {p}", file=sys.stderr)
    if sweeps:
        console.print(sweeps_table(sweeps))
    return 0


def sweeps_table(rows: list[dict]):
    """One row per sweep manifest; a sweep whose process died mid-way shows as interrupted."""
    from rich.table import Table

    t = Table(title=f"{len(rows)} sweeps")
    for head in ("sweep", "status", "ok", "failed", "planned", "started", "ended"):
        t.add_column(head)
    for r in rows:
        t.add_row(*(("-" if r[k] is None else str(r[k])) for k in
                    ("sweep_id", "status", "runs_ok", "runs_failed", "runs_planned", "start_time", "end_time")))
    return t


def table(frame, results_dir: str, width: int = 200):
    """One row per run: a short run id, the workload with its shape, the layout (only the key parts that
    differ among these runs, e.g. the mesh of a hybrid), then the headline numbers. Below a width of
    140 / 110 columns the less telling columns (``NARROW``) are left out so the rest fits."""
    from rich.table import Table

    from parbench.layout_key import layout_labels, short_id, workload_labels
    from parbench.summary import fmt_bytes, fmt_num

    dropped = {c for limit, cols in NARROW.items() if width < limit for c in cols}
    shown = [c for c in COLUMNS if c not in dropped]
    over = "oversubscribed" in frame and frame["oversubscribed"].eq(True).any()
    t = Table(title=f"{len(frame)} runs in {results_dir}/",
              caption="*: oversubscribed (the ranks x threads outnumbered the host's CPUs: compare its timings as ratios "
                      "within one run)" if over else None)
    for head in shown:
        t.add_column(head, justify="right" if head in NUMERIC else "left", no_wrap=head in ("run", "status"))
    if frame.empty:
        return t
    frame = frame.assign(_layout=layout_labels(frame), _workload=workload_labels(frame), _id=short_id(frame["run_id"]))
    frame = frame.sort_values(["source", "sweep_id", "_workload", "strategy", "world_size", "_layout", "created_at"],
                              na_position="first")
    for r in frame.to_dict("records"):
        ok = r["status"] == "ok"
        rank = _text(r.get("failed_rank"), int)
        cells = {
            "run": r["_id"], "source": str(r["source"]), "sweep": _text(r["sweep_id"]), "workload": r["_workload"],
            "layout": r["_layout"], "rep": _text(r["repeat"], int),
            "status": r["status"] if ok or rank == "-" else f"{r['status']} (rank {rank})",
            "samples/s": fmt_num(r["throughput_samples_per_s"], ".1f") if ok else "-",
            "step ms": (fmt_num(r["step_time_s_median"] * 1e3, ".2f") + ("*" if r.get("oversubscribed") is True else "")
                        if ok else "-"),
            "peak RSS": fmt_bytes(r["peak_rss_bytes"]) if ok else "-",
            "comm/step": fmt_bytes(r["comm_total_bytes_per_step"]) if ok else "-",
            "created": str(r["created_at"])[:16].replace("T", " "),
        }
        t.add_row(*(cells[c] for c in shown))
    return t


def _text(value, kind=str) -> str:
    """A cell: '-' for a missing value (None or NaN), else ``kind(value)``."""
    return "-" if value is None or value != value else str(kind(value))


def breakdown_table(frame, results_dir: str):
    """One row per run: the step-time breakdown's terms in ms (busiest rank), '-' where not measured."""
    from rich.table import Table

    from parbench.metrics.breakdown import TERMS, short_name
    from parbench.summary import fmt_num

    t = Table(title=f"where the step time goes: {len(frame)} runs in {results_dir}/ (ms per traced step)")
    for head in ("run", "strategy", "W", "workload", "step"):
        t.add_column(head)
    for head in (*map(short_name, TERMS), "bubble frac"):
        t.add_column(head, justify="right")
    frame = frame.sort_values(["source", "strategy", "world_size", "created_at"], na_position="first")
    for _, r in frame.iterrows():
        measured = r.get("time_compute_s") is not None and r["time_compute_s"] == r["time_compute_s"]
        cells = [fmt_num(r[term] * 1e3, ".2f") if measured else "-" for term in TERMS]
        frac = r.get("bubble_fraction")
        t.add_row(str(r["run_id"])[:8], str(r["strategy"]), str(r["world_size"]), str(r["workload"]),
                  fmt_num(r["traced_step_time_s"] * 1e3, ".2f") if measured else "-", *cells,
                  fmt_num(frac, ".3f") if measured and frac is not None and frac == frac else "-")
    return t
