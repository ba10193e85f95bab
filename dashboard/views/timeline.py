"""Timeline: one run's traced step as a Gantt chart, one row per rank (and its collectives in flight).

Reads the run's Chrome trace (``<results>/<source>/traces/<run_id>.json``, written by every run
since traced steps exist): the main-thread spans the breakdown sums, coloured by term."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard.views.time import TERM_STYLE
from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Timeline"
LABEL_TERM = {"compute": "time_compute_s", "optimizer": "time_optimizer_s", "bubble": "time_bubble_s",
              "other": "time_other_s", "comm_data": "time_comm_exposed_data_s",
              "comm_parameter": "time_comm_exposed_parameter_s", "comm_intermediate": "time_comm_exposed_intermediate_s"}
IN_FLIGHT_COLOR = "#b07aa1"


def trace_file(run: pd.Series, results_dir: str) -> Path | None:
    rel = run.get("trace_file")
    if not isinstance(rel, str) or not rel:
        return None
    source = run.get("source")
    root = Path(results_dir) / source if isinstance(source, str) and source not in ("", ".") else Path(results_dir)
    path = root / rel
    return path if path.is_file() else None


def step_spans(trace: dict[str, Any], step: int) -> pd.DataFrame:
    """Spans of traced step ``step`` on every rank: rank, lane (0 = main thread), name, cat, start/end ms
    relative to the step's earliest start."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    windows = {e["pid"]: (e["ts"], e["ts"] + e["dur"]) for e in events
               if e.get("cat") == "step" and (e.get("args") or {}).get("traced_step") == step}
    if not windows:
        return pd.DataFrame(columns=["rank", "lane", "name", "cat", "start_ms", "end_ms"])
    origin = min(a for a, _ in windows.values())
    rows = []
    for e in events:
        lo_hi = windows.get(e["pid"])
        if e.get("cat") == "step" or lo_hi is None or not (lo_hi[0] <= e["ts"] <= lo_hi[1]):
            continue
        rows.append({"rank": e["pid"], "lane": e["tid"], "name": e["name"], "cat": e["cat"],
                     "start_ms": (e["ts"] - origin) / 1e3, "end_ms": (e["ts"] + e["dur"] - origin) / 1e3})
    return pd.DataFrame(rows)


def timeline_figure(trace: dict[str, Any], step: int | None = None, *, in_flight: bool = True) -> go.Figure:
    """Horizontal bars: one row per rank (plus one per lane of collectives in flight), coloured by term."""
    step = trace.get("otherData", {}).get("chosen_traced_step", 0) if step is None else step
    spans = step_spans(trace, step)
    if spans.empty:
        return charts.empty_figure("Timeline", "this trace has no spans for that step")
    if not in_flight:
        spans = spans[spans["lane"] == 0]
    spans = spans.assign(row=[f"rank {r}" if lane == 0 else f"rank {r} · in flight {lane}"
                              for r, lane in zip(spans["rank"], spans["lane"])])
    order = sorted(spans["row"].unique(), key=lambda s: (int(s.split()[1]), s))
    fig = go.Figure()
    for cat, part in spans.groupby("cat", sort=False):
        term = LABEL_TERM.get(cat)
        name, color = TERM_STYLE[term] if term else (f"in flight: {cat.split('.', 1)[-1]}", IN_FLIGHT_COLOR)
        fig.add_trace(go.Bar(y=part["row"], x=part["end_ms"] - part["start_ms"], base=part["start_ms"],
                             orientation="h", name=name, marker=dict(color=color, line=dict(width=0)),
                             customdata=part[["name"]], hovertemplate="%{customdata[0]}: %{base:.3f} ms + "
                             "%{x:.3f} ms<extra>%{y}</extra>"))
    fig.update_layout(barmode="overlay", title=f"Traced step {step}: every rank", xaxis_title="time in the step (ms)",
                      yaxis=dict(categoryorder="array", categoryarray=order[::-1], title=""), legend_title="term",
                      height=160 + 40 * len(order))
    return fig


def render(ctx: "ViewContext") -> None:
    ok = charts.ok_runs(ctx.runs)
    traced = ok[[trace_file(r, ctx.results_dir) is not None for _, r in ok.iterrows()]] if not ok.empty else ok
    if traced.empty:
        st.info("No run here has a trace file. Every new `parbench run` / `parbench sweep` writes one to "
                "`<results>/traces/<run_id>.json` (also viewable in Perfetto or chrome://tracing).")
        return
    labels = list(traced["run_label"])
    label = st.selectbox("run", labels, key="timeline-run")
    run = traced.iloc[labels.index(label)]
    path = trace_file(run, ctx.results_dir)
    trace = json.loads(path.read_text())
    steps = sorted({(e.get("args") or {}).get("traced_step") for e in trace["traceEvents"] if e.get("cat") == "step"})
    chosen = trace.get("otherData", {}).get("chosen_traced_step", 0)
    step = st.selectbox("traced step", steps, index=steps.index(chosen) if chosen in steps else 0, key="timeline-step")
    in_flight = st.checkbox("show collectives in flight (issue to completion)", value=True, key="timeline-in-flight")
    st.plotly_chart(timeline_figure(trace, step, in_flight=in_flight), key="timeline-gantt")
    st.caption(f"Trace file: `{path}` (open it in https://ui.perfetto.dev or chrome://tracing). The record's "
               f"breakdown uses traced step {chosen} (median duration).")
