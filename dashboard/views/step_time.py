"""Step time: the distribution of every timed step per run, so noise is visible."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Step time"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.step_time_box(ctx.runs), key="step-time-box")
    st.caption(f"Each box is one run (the newest {charts.MAX_RUNS_PER_CHART} shown); steps are delimited "
               "by barriers. Compare runs measured together: a shared CPU swings timings 2-4x.")
