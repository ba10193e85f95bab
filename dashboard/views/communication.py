"""Communication: bytes per rank per step by category and per op, and modeled vs OS-measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Communication"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.comm_stacked(ctx.runs), key="comm-stacked")
    st.plotly_chart(charts.comm_ops_breakdown(ctx.runs), key="comm-ops")
    st.plotly_chart(charts.comm_modeled_vs_os(ctx.runs), key="comm-modeled-vs-os")
    st.caption("Modeled bytes follow the nccl-tests conventions (all-reduce 2(n-1)/n x S, all-gather "
               "(n-1)/n x S, send S); 'wire' is what gloo really sends (its reduce-scatter is an all-reduce). "
               "OS-measured: /proc/self/io wchar of the busiest rank.")
