"""Benchmark history: parbench's own benchmark timings per saved run (results/benchmarks/, pytest-benchmark JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from parbench.bench import history

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Benchmark history"
HOW = ("No saved benchmark runs in `{dir}`. Record one with `parbench bench gate` "
       "(or `pytest tests/benchmarks --benchmark-enable --benchmark-autosave "
       "--benchmark-storage=file://results/benchmarks`).")


def render(ctx: "ViewContext") -> None:
    directory = Path(ctx.results_dir) / "benchmarks"
    frame = history.load_history(directory)
    if frame.empty:
        st.info(HOW.format(dir=directory))
        return
    groups = sorted(frame["group"].dropna().unique())
    group = st.selectbox("benchmark group", ["(all)"] + groups, key="bench-history-group")
    shown = frame if group == "(all)" else frame[frame["group"] == group]
    st.caption(f"{frame['file'].nunique()} saved runs; median per benchmark, IQR as error bars. "
               "Compare only runs from the same machine (host and CPU in the table below).")
    st.plotly_chart(history.history_figure(shown), key="bench-history-chart")
    st.dataframe(shown[["datetime", "commit", "node", "cpu", "benchmark", "median_s", "iqr_s", "rounds"]],
                 key="bench-history-table", hide_index=True)
