"""Time: where the step time goes, per layout: compute, exposed communication by category, bubble,
optimizer, other (the busiest rank of each run's traced step, median over runs), next to the
simulator's predicted terms (``pred_time_*`` columns) where a record carries them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from parbench.metrics.breakdown import TERMS
from parbench.time_charts import PRED, terms_table, time_figure

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Time"


def with_predictions(runs: pd.DataFrame, results_dir: str) -> pd.DataFrame:
    """``runs`` with the simulator's ``pred_time_*`` terms per run, when the records do not carry them
    and a calibrated profile of this machine exists (``parbench calibrate``); else unchanged."""
    from parbench.sim.hardware import load_cluster
    from parbench.sim.validate import validation_rows

    if any(PRED + t in runs.columns for t in TERMS):
        return runs
    try:
        rows, _ = validation_rows(results_dir, load_cluster("local", results_dir=results_dir))
    except (FileNotFoundError, ValueError):
        return runs
    pred = {r["run_id"]: r for r in rows}
    return runs.assign(**{PRED + t: runs["run_id"].map(lambda i, t=t: pred.get(i, {}).get(PRED + t)) for t in TERMS})


def render(ctx: "ViewContext") -> None:
    runs = with_predictions(ctx.runs, ctx.results_dir)
    fig = time_figure(runs)
    st.plotly_chart(fig, key="time-breakdown")
    table = terms_table(runs)
    if table.empty:
        st.info("No run here has a step-time breakdown (records written before traced steps existed). "
                "Any new `parbench run` or `parbench sweep` measures one; `parbench trace RUN_ID` prints it.")
        return
    st.dataframe(table, key="time-table", hide_index=True)
    st.caption("Measured on dedicated traced steps after the timed ones: operators from torch.profiler, "
               "each collective's issue and completion from the communication meter (the profiler sees no "
               "gloo traffic). Bubble: waiting for a peer that had not sent yet, and the end-of-step wait for "
               "the slowest rank. The profiler's cost per recorded operator makes a traced step longer than a timed "
               "one (the last two columns; on a 2-core CPU a median +27% on the simulator check's runs, +55% on the "
               "committed reference sweep's smaller ones), most in op-dense terms such as an eager "
               "optimizer. Hatched bars: the simulator's prediction for the same run, traced: the calibrated "
               "profile's tracing cost per operator added (`parbench calibrate` first; `parbench validate` lists "
               "the errors).")
