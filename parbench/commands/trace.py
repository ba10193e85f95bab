"""``parbench trace RUN_ID``: where a run's Chrome trace is, and where its step time went."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="a run's trace file (Perfetto / chrome://tracing) and its step-time breakdown",
                       description=__doc__)
    p.add_argument("run_id", metavar="RUN_ID", help="run id, or a unique prefix of one")
    p.add_argument("--results-dir", default="results", help="results directory holding the run and its trace")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from pathlib import Path

    from parbench.config import ConfigError
    from parbench.results import read_records
    from parbench.trace import find_trace, summary

    records, _ = read_records(a.results_dir, warn=False)
    matches = [r for r in records if str(r["run_id"]).startswith(a.run_id)]
    if len({r["run_id"] for r in matches}) != 1:
        found = "no run" if not matches else f"{len(matches)} runs"
        raise ConfigError(f"run id {a.run_id!r}: {found} in {a.results_dir}/ match (see `parbench results`)")
    record = matches[0]
    root = Path(a.results_dir) / record["source"] if record.get("source") not in (None, ".") else Path(a.results_dir)
    path = find_trace(record["run_id"], [root, a.results_dir])
    print(f"trace: {path} (open in https://ui.perfetto.dev or chrome://tracing)" if path
          else f"trace: none for run {record['run_id']} (older record, failed run, or traces not kept)")
    print(summary(record))
    return 0
