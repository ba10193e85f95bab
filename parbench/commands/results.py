"""``parbench results``: what is in a results directory, one row per run; ``--export`` to CSV/Parquet."""

from __future__ import annotations

import argparse
import sys
import warnings

from parbench.results import STATUSES

COLUMNS = (("source", "source"), ("sweep_id", "sweep"), ("strategy", "strategy"), ("world_size", "W"),
           ("workload", "workload"), ("repeat", "rep"), ("status", "status"))


def add_parser(sub) -> None:
    p = sub.add_parser("results", help="list the runs in a results directory; export them",
                       description=__doc__)
    p.add_argument("--results-dir", default="results")
    p.add_argument("--sweep", default=None, help="only this sweep_id")
    p.add_argument("--status", default=None, choices=STATUSES, help="only runs with this status")
    p.add_argument("--export", default=None, metavar="FILE", help="write every matching run to FILE (.csv or .parquet)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from rich.console import Console

    from parbench.config import ConfigError
    from parbench.results import check_output_file, check_readable, export, load

    root = check_readable(a.results_dir)
    if a.export:
        if not a.export.endswith((".csv", ".parquet")):
            raise ConfigError(f"--export {a.export}: use a .csv or .parquet file name")
        check_output_file(a.export, "--export")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = load(root)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    if a.sweep:
        known = sorted(set(frame["sweep_id"].dropna()))
        if a.sweep not in known:
            raise ConfigError(f"--sweep {a.sweep}: no run of that sweep in {root}; sweeps there: "
                              f"{', '.join(known) or 'none'}")
        frame = frame[frame["sweep_id"] == a.sweep]
    if a.status:
        frame = frame[frame["status"] == a.status]
    console = Console() if Console().is_terminal else Console(width=200)
    if a.export:
        console.print(f"wrote {len(frame)} runs to {export(frame, a.export)}")
        return 0
    console.print(table(frame, a.results_dir))
    return 0


def table(frame, results_dir: str):
    from rich.table import Table

    from parbench.summary import fmt_bytes, fmt_num

    t = Table(title=f"{len(frame)} runs in {results_dir}/")
    for _, head in COLUMNS:
        t.add_column(head)
    for head in ("samples/s", "step ms", "peak RSS", "comm/step", "overhead s", "created"):
        t.add_column(head, justify="right")
    frame = frame.sort_values(["source", "sweep_id", "strategy", "world_size", "created_at"], na_position="first")
    for _, r in frame.iterrows():
        ok = r["status"] == "ok"
        t.add_row(*(str(r[c]) if r[c] is not None else "-" for c, _ in COLUMNS),
                  fmt_num(r["throughput_samples_per_s"], ".1f") if ok else "-",
                  fmt_num(r["step_time_s_median"] * 1e3, ".2f") if ok else "-",
                  fmt_bytes(r["peak_rss_bytes"]) if ok else "-",
                  fmt_bytes(r["comm_total_bytes_per_step"]) if ok else "-",
                  fmt_num(r["overhead_s"], ".2f") if ok else "-", str(r["created_at"]))
    return t
