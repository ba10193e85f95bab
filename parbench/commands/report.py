"""parbench report: the dashboard's charts as one self-contained HTML file, for sharing (opens offline)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="write the dashboard's charts as one HTML file", description=__doc__)
    p.add_argument("--results-dir", default="results", help="results directory to read")
    p.add_argument("--out", default=None, help="HTML file to write (default: <results-dir>/report.html)")
    p.add_argument("--source", default=None,
                   help="results folder to report (e.g. reference); 'all' shows every source, labelled "
                        "(default: the newest source)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from pathlib import Path

    from parbench.config import ConfigError
    from parbench.report import write_report
    from parbench.results import check_readable

    root = check_readable(a.results_dir)
    out = Path(a.out) if a.out else root / "report.html"
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give an HTML file name")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # before the charts are built, not after
        out, n, problems = write_report(root, out, a.source)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot be written: {exc.strerror} ({exc.filename})") from None
    for p in problems:
        print(f"warning: skipped corrupt result record {p}", file=sys.stderr)
    print(f"report: {out} ({n} runs, {out.stat().st_size / 2**20:.1f} MiB, opens offline)")
    return 0
