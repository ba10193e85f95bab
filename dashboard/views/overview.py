"""Runs: every run that passes the sidebar filters, configuration first; group by any key, download
as CSV, and send selected runs to Compare."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from dashboard.views import compare
from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Runs"
NO_GROUP = "(one row per run)"

COLUMN_FORMATS = {  # header -> printf-style format of st.column_config.NumberColumn
    "samples/s": "%.1f", "step ms (median)": "%.2f", "tensors MiB/rank": "%.3f", "peak RSS MiB": "%.0f",
    "MFU %": "%.1f", "GPU alloc peak MiB": "%.0f", "GPU used % of device": "%.0f",
    "comm MiB/step/rank": "%.3f", "max |loss diff|": "%.1e",
}


def render(ctx: "ViewContext") -> None:
    runs = ctx.runs
    ok = int((runs["status"] == "ok").sum())
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("runs", len(runs))
    c2.metric("ok", ok)
    c3.metric("failed / timed out", len(runs) - ok)
    c4.metric("layouts", runs["group_key"].nunique())
    choices = {NO_GROUP: None, **{label: col for col, label in charts.GROUP_BY_CHOICES.items()}}
    group = st.selectbox("group by", list(choices), key="overview-group")
    table = charts.overview_table(runs)
    config = {h: st.column_config.NumberColumn(h, format=f) for h, f in COLUMN_FORMATS.items()}
    st.download_button("Download these runs as CSV", table.to_csv(index=False).encode(), "parbench-runs.csv",
                       "text/csv", key="overview-csv")
    if choices[group] is not None:
        st.caption("Medians over the ok runs of each group. Groups coarser than a layout pool different layouts: "
                   "read them as a summary, not as one measurement.")
        st.dataframe(charts.grouped_table(runs, choices[group]), key="overview-grouped", hide_index=True,
                     column_config=config)
        return
    st.caption("Click a column header to sort; tick rows (left edge) and press the button to compare them.")
    event = st.dataframe(table, key="overview-table", hide_index=True, column_config=config, on_select="rerun",
                         selection_mode="multi-row")
    rows = list(event.selection.rows) if event is not None and hasattr(event, "selection") else []
    picked = runs.iloc[rows]
    picked = picked[picked["status"] == "ok"]
    st.button(f"Compare the {len(picked)} selected ok runs", key="overview-to-compare", disabled=len(picked) < 2,
              on_click=compare.send_runs, args=(picked["run_id"].tolist(), runs))
