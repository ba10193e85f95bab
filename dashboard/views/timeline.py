"""Timeline: one run's traced step as a Gantt chart, one row per rank (and its collectives in flight).

Reads the run's Chrome trace (``<results>/<source>/traces/<run_id>.json``, written by every run
since traced steps exist): the main-thread spans the breakdown sums, coloured by term."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from parbench import charts
from parbench.time_charts import timeline_figure

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Timeline"


def trace_file(run: pd.Series, results_dir: str) -> Path | None:
    rel = run.get("trace_file")
    if not isinstance(rel, str) or not rel:
        return None
    source = run.get("source")
    root = Path(results_dir) / source if isinstance(source, str) and source not in ("", ".") else Path(results_dir)
    path = root / rel
    return path if path.is_file() else None


def read_trace(path: Path) -> dict:
    """A Chrome trace as the runner writes it: ValueError when it is not JSON, not an object with a list of
    ``traceEvents``, or holds an event that is not an object with numeric ``ts`` (and ``dur``, where given)."""
    trace = json.loads(path.read_text())
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    num = (int, float)
    bad = next((e for e in events if not isinstance(e, dict) or not isinstance(e.get("ts", 0), num)
                or not isinstance(e.get("dur", 0), num) or not isinstance(e.get("args") or {}, dict)), None)
    if bad is not None:
        raise ValueError(f"an event {str(bad)[:80]} is not an object with numeric ts and dur")
    return trace


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
    try:
        trace = read_trace(path)
    except (OSError, ValueError) as exc:
        st.warning(f"Trace file `{path}` cannot be read ({exc}); the run's record and its breakdown are unaffected.")
        return
    steps = sorted({(e.get("args") or {}).get("traced_step") for e in trace["traceEvents"] if e.get("cat") == "step"})
    chosen = trace.get("otherData", {}).get("chosen_traced_step", 0)
    step = st.selectbox("traced step", steps, index=steps.index(chosen) if chosen in steps else 0, key="timeline-step")
    in_flight = st.checkbox("show collectives in flight (issue to completion)", value=True, key="timeline-in-flight")
    st.plotly_chart(timeline_figure(trace, step, in_flight=in_flight), key="timeline-gantt")
    st.caption(f"Trace file: `{path}` (open it in https://ui.perfetto.dev or chrome://tracing). The record's "
               f"breakdown uses traced step {chosen} (median duration).")
