"""Scaling: throughput vs world size per strategy, and efficiency against the world-size-1 run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Scaling"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.scaling_throughput(ctx.runs), key="scaling-throughput")
    st.plotly_chart(charts.scaling_efficiency(ctx.runs), key="scaling-efficiency")
    st.caption("Strong scaling (fixed global batch). Efficiency E(W) = T(W) / (W x T(1)), T(1) = median "
               "throughput of the world-size-1 runs of the same workload. Error bars: min..max over repeats.")
