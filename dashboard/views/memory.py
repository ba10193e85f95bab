"""Memory: peak per rank stacked by part per strategy, and every rank of one chosen run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Memory"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.memory_stacked(ctx.runs), key="memory-stacked")
    ok = charts.ok_runs(ctx.runs)
    if ok.empty:
        return
    labels = ok["run_label"].tolist()
    default = next((i for i, s in enumerate(ok["strategy"]) if s == "pipeline"), 0)
    label = st.selectbox("run for the per-rank view (pipeline stages differ)", labels, index=default,
                         key="memory-run")
    run = ok[ok["run_label"] == label].iloc[0]
    st.plotly_chart(charts.memory_per_rank(run), key="memory-per-rank")
    st.caption("Parameters, gradients and optimizer state are summed tensor sizes; activations are the "
               "peak bytes saved for backward. Peak RSS (whole process, mostly torch) is in the Overview.")
