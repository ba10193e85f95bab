"""``parbench report``: the dashboard's charts as one self-contained HTML file (no server, no CDN).

Torch-free: reads the results directory through ``parbench.results.load`` and draws the figures
of ``parbench.charts.REPORT_SECTIONS``; plotly.js is embedded once, so the file opens offline.
"""

from __future__ import annotations

import html
import warnings
from pathlib import Path

import pandas as pd

from parbench import charts
from parbench.results import load

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>parbench report</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;font-size:0.85em}}
td,th{{border:1px solid #ccc;padding:2px 6px}} .warn{{background:#fff3cd;padding:0.5em}}</style>
</head><body>
<h1>parbench report</h1>
<p>{summary}</p>
{warnings}
{body}
</body></html>
"""


def build_html(runs: pd.DataFrame, problems: list[str], source: str) -> str:
    """The whole page: a runs table, then one heading and its charts per report section."""
    runs = charts.prepare(runs)
    warn = "".join(f'<p class="warn">Skipped a corrupt result record: {html.escape(p)}</p>' for p in problems)
    summary = f"{len(runs)} runs from <code>{html.escape(source)}</code>"
    if runs.empty:
        body = "<p>No results. Produce some with <code>parbench sweep</code> or <code>parbench run ...</code>.</p>"
        return PAGE.format(summary=summary, warnings=warn, body=body)
    parts = ["<h2>Overview</h2>", charts.overview_table(runs).to_html(index=False, float_format="%.4g")]
    first = True
    for title, builders in charts.REPORT_SECTIONS:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        for build in builders:
            # plotly.js goes inline once (the first figure); the rest reuse it.
            parts.append(build(runs).to_html(full_html=False, include_plotlyjs="inline" if first else False))
            first = False
    return PAGE.format(summary=summary, warnings=warn, body="\n".join(parts))


def write_report(results_dir: str | Path, out: str | Path) -> tuple[Path, int, list[str]]:
    """Write the report; returns (path, number of runs, corrupt-record problems)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load(results_dir)
    problems = [str(w.message) for w in caught if "corrupt result record" in str(w.message)]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_html(runs, problems, str(results_dir)), encoding="utf-8")
    return out, len(runs), problems
