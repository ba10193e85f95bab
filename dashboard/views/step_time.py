"""Step time: the distribution of every timed step per run, so noise is visible."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Step time"


def render(ctx: "ViewContext") -> None:
    _, total = charts.step_time_shown(ctx.runs, 0)
    if total == 0:
        st.info("No successful run with step times under the current filters.")
        return
    limit = total if total <= 5 else st.slider("runs shown (the newest)", 1, total, min(total, charts.MAX_RUNS_PER_CHART),
                                               key="step-time-limit")
    shown, _ = charts.step_time_shown(ctx.runs, limit)
    st.caption(f"{shown} of {total} runs shown (the newest); each box is one run, one panel per workload. Steps run "
               "back to back; each is the slowest rank's clock. Compare runs measured together: a shared CPU swings timings 2-4x.")
    st.plotly_chart(charts.step_time_box(ctx.runs, limit), key="step-time-box")
