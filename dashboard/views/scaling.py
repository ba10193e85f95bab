"""Scaling: throughput vs world size per layout series, and efficiency against the world-size-1 run."""

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
    st.caption("Strong scaling (fixed global batch), one panel per workload. A line joins the world sizes of one "
               "layout series (a hybrid keeps its tp and pp); every line starts at the world-size-1 run it is "
               "measured against. Efficiency E(W) = T(W) / (W x T(1)), T(1) = median throughput of the "
               "world-size-1 runs of the same workload and source. Points: median over repeats of one layout; "
               "error bars: min..max. The y axis turns logarithmic when the values span more than 10x. A grey band: the "
               "world sizes whose runs were oversubscribed (their ranks x threads outnumbered the host's CPUs, so the "
               "ranks took turns on the cores; records say so in `oversubscribed`): there the timings are a "
               "scheduler's as much as the layout's.")
