"""Simulator: predictions of parbench.sim for every measured run (predicted vs measured, errors), and
predicted scaling curves past the measured world sizes, on this host's calibrated profile."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Simulator"
HOW = "No calibrated profile in `{dir}/calibration/`: run `parbench calibrate` (a few minutes), then reload."


def render(ctx: "ViewContext") -> None:
    from parbench.sim import charts
    from parbench.sim.hardware import load_cluster
    from parbench.sim.validate import summarize, validation_rows

    try:
        cluster = load_cluster("local", results_dir=ctx.results_dir)
    except FileNotFoundError:
        st.info(HOW.format(dir=ctx.results_dir))
        return
    rows, skipped = validation_rows(ctx.results_dir, cluster)
    ids = set(ctx.runs["run_id"]) if "run_id" in ctx.runs else set()
    rows = [r for r in rows if r["run_id"] in ids]
    if not rows:
        st.info("No ok runs under the current filters: run `parbench sweep` or `parbench run`.")
        return
    import pandas as pd

    frame = pd.DataFrame(rows)
    s = summarize(rows)
    st.caption(f"{s['runs']} runs; communication bytes exact in {s['comm_bytes_exact']}; memory max error "
               f"{s['memory_max_error_pct']:.2f}%; step-time |error| median {s['step_time_median_error_pct']:.1f}%, "
               f"max {s['step_time_max_error_pct']:.1f}%; throughput Spearman {s['throughput_spearman']:.2f}")
    st.plotly_chart(charts.predicted_vs_measured(frame), key="sim-predicted-vs-measured")
    st.dataframe(frame, key="sim-error-table", hide_index=True)
    ok = ctx.runs[ctx.runs["status"] == "ok"]
    st.plotly_chart(charts.scaling_figure(charts.scaling_curves(ok, cluster), frame), key="sim-scaling")
    for line in skipped:
        st.warning(f"not predicted: {line}")
