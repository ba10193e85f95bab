"""``parbench report``: the dashboard's charts as one self-contained HTML file (no server, no CDN).

Torch-free: reads the results directory through ``parbench.results.load``. The page opens with a
summary (when, which commit and host, which sweep and source, and the ranking of the layouts per
workload), then a table of contents, the charts of ``parbench.charts.REPORT_SECTIONS``, the
simulator's predicted vs measured when this directory holds a calibrated profile, and last the
raw runs (a CSV download and a collapsed table). plotly.js is embedded once, so the file opens
offline; every figure follows the page width.
"""

from __future__ import annotations

import base64
import html
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from parbench import charts
from parbench.results import load

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>parbench report</title>
<style>
body{{font-family:sans-serif;margin:1.5em auto;padding:0 1.5em;max-width:1400px}}
table{{border-collapse:collapse;font-size:0.85em;max-width:100%}} td,th{{border:1px solid #ccc;padding:2px 6px}}
.scroll{{overflow-x:auto}} .warn{{background:#fff3cd;padding:0.5em}} .figure{{width:100%}}
nav ol{{columns:2}} .best{{font-weight:bold}}
</style>
</head><body>
<h1 id="summary">parbench report</h1>
{summary}
{warnings}
{body}
</body></html>
"""
FIGURE_CONFIG = {"responsive": True, "displaylogo": False}


def anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _figure(fig: go.Figure, first: bool) -> str:
    """One figure as a div that follows the page width; plotly.js inline with the first one only."""
    fig.update_layout(autosize=True, width=None)
    return '<div class="figure">' + fig.to_html(full_html=False, include_plotlyjs="inline" if first else False,
                                                config=FIGURE_CONFIG, default_width="100%") + "</div>"


def summary_html(runs: pd.DataFrame, all_runs: pd.DataFrame, source: str, results_dir: str) -> str:
    """When, what and where, then the headline (the ranking of the layouts) per workload."""
    def listed(col: str) -> str:
        values = [str(v) for v in runs[col].dropna().unique()] if col in runs else []
        return html.escape(", ".join(values[:5]) + (f" (+{len(values) - 5} more)" if len(values) > 5 else "")) or "-"

    sources = sorted(all_runs["source"].unique(), key=str)
    ok = int((runs["status"] == "ok").sum())
    items = [
        ("report written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("measured", f"{html.escape(str(runs['created_at'].min()))} to {html.escape(str(runs['created_at'].max()))}"),
        ("results", f"<code>{html.escape(results_dir)}</code>, source <b>{html.escape(charts.source_name(source))}</b>"
                    + (f" (newest of {len(sources)}: {html.escape(', '.join(map(charts.source_name, sources)))}; "
                       "sources are never pooled)" if len(sources) > 1 else "")),
        ("runs", f"{len(runs)} ({ok} ok, {len(runs) - ok} failed or timed out), "
                 f"{runs['group_key'].nunique()} layouts"),
        ("sweep", listed("sweep_id")), ("git commit", listed("git_commit")), ("host", listed("hostname")),
        ("CPU / GPU", listed("cpu_model") + " / " + listed("gpu_name")), ("torch", listed("torch_version")),
    ]
    parts = ["<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in items) + "</table>"]
    ranked = charts.ranking(runs)
    for wl, sub in ranked.groupby("workload_label", sort=False):
        best = sub.iloc[0]
        parts.append(f"<h3>{html.escape(wl)}</h3><p>Fastest: <b>{html.escape(best['layout_label'])}</b> "
                     f"({best['throughput_samples_per_s']:,.1f} samples/s); ranked by median throughput over the "
                     "repeats of each layout, memory = tensor bytes of the busiest rank.</p>")
        parts.append('<div class="scroll">' + charts.ranking_table(sub).to_html(index=False) + "</div>")
    return "\n".join(parts)


def simulator_section(results_dir: str | Path, runs: pd.DataFrame) -> list[go.Figure]:
    """Predicted vs measured step time for these runs, when the directory holds a calibrated profile (the runs
    whose time it can predict: ``parbench.sim.validate.timing_mismatch``)."""
    from parbench.sim import charts as sim_charts
    from parbench.sim.hardware import load_cluster
    from parbench.sim.validate import timed, validation_rows

    try:
        cluster = load_cluster("local", results_dir=results_dir)
    except (FileNotFoundError, ValueError):
        return []
    rows, _ = validation_rows(str(results_dir), cluster)
    ids = set(runs["run_id"])
    frame = pd.DataFrame([r for r in timed(rows) if r["run_id"] in ids])
    return [sim_charts.predicted_vs_measured(frame)] if not frame.empty else []


def raw_runs_html(runs: pd.DataFrame) -> str:
    """Every run: a CSV download (a data: link, works offline) and the table, collapsed."""
    table = charts.overview_table(runs)
    csv = base64.b64encode(table.to_csv(index=False).encode()).decode()
    return (f'<p><a download="parbench-runs.csv" href="data:text/csv;base64,{csv}">Download the {len(runs)} runs '
            f'as CSV</a></p><details><summary>Show the table</summary><div class="scroll">'
            + table.to_html(index=False, float_format="%.4g") + "</div></details>")


def build_html(runs: pd.DataFrame, problems: list[str], results_dir: str, source: str | None = None) -> str:
    """The whole page for one source (default: the newest); ``source="all"`` shows every source, labelled."""
    all_runs = charts.prepare(runs)
    warn = "".join(f'<p class="warn">Skipped a corrupt result record: {html.escape(p)}</p>' for p in problems)
    if all_runs.empty:
        body = "<p>No results. Produce some with <code>parbench sweep</code> or <code>parbench run ...</code>.</p>"
        return PAGE.format(summary=f"<p>No runs in <code>{html.escape(results_dir)}</code>.</p>", warnings=warn, body=body)
    source = source or charts.newest_source(all_runs)
    shown = charts.relabel(all_runs if source == "all" else all_runs[all_runs["source"] == source])
    sections = [(title, [build(shown) for build in builders]) for title, builders in charts.REPORT_SECTIONS]
    sim = simulator_section(results_dir, shown)
    if sim:
        sections.append(("Simulator: predicted vs measured", sim))
    toc = "".join(f'<li><a href="#{anchor(t)}">{html.escape(t)}</a></li>' for t, _ in sections)
    parts = [f'<nav><h2>Contents</h2><ol>{toc}<li><a href="#all-runs">All runs</a></li></ol></nav>']
    first = True
    for title, figures in sections:
        parts.append(f'<h2 id="{anchor(title)}">{html.escape(title)}</h2>')
        for fig in figures:
            parts.append(_figure(fig, first))
            first = False
    parts.append('<h2 id="all-runs">All runs</h2>' + raw_runs_html(shown))
    return PAGE.format(summary=summary_html(shown, all_runs, source, results_dir), warnings=warn, body="\n".join(parts))


def write_report(results_dir: str | Path, out: str | Path, source: str | None = None) -> tuple[Path, int, list[str]]:
    """Write the report; returns (path, number of runs shown, corrupt-record problems)."""
    problems: list[str] = []
    runs = load(results_dir, problems=problems)
    sources = set(map(str, runs["source"].unique())) if not runs.empty else set()
    if source not in (None, "all") and source not in sources:
        from parbench.config import ConfigError

        raise ConfigError(f"--source {source!r}: no such source in {results_dir} "
                          f"(sources: {', '.join(sorted(sources)) or 'none'}, or all)")
    source = source or (charts.newest_source(runs) if not runs.empty else None)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_html(runs, problems, str(results_dir), source), encoding="utf-8")
    return out, len(runs) if source in ("all", None) else int((runs["source"] == source).sum()), problems
