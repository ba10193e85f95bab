"""Overview: every run that passes the sidebar filters, as a sortable table of headline metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Overview"


def render(ctx: "ViewContext") -> None:
    runs = ctx.runs
    ok = int((runs["status"] == "ok").sum())
    c1, c2, c3 = st.columns(3)
    c1.metric("runs", len(runs))
    c2.metric("ok", ok)
    c3.metric("failed / timed out", len(runs) - ok)
    st.caption("Click a column header to sort. Step time in ms, memory and bytes in MiB.")
    st.dataframe(charts.overview_table(runs), key="overview-table", hide_index=True)
