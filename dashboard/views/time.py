"""Time: where the step time goes, per layout: compute, exposed communication by category, bubble,
optimizer, other (the busiest rank of each run's traced step, median over runs), next to the
simulator's predicted terms (``pred_time_*`` columns) where a record carries them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from parbench import charts
from parbench.metrics.breakdown import TERMS

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Time"
PRED = "pred_"
"""Prefix of the simulator's predicted terms beside the measured ones (``pred_time_compute_s``, ...)."""

TERM_STYLE: dict[str, tuple[str, str]] = {  # term -> (legend name, colour)
    "time_compute_s": ("compute", "#4c78a8"),
    "time_comm_exposed_data_s": ("comm: data", "#f2cf5b"),
    "time_comm_exposed_parameter_s": ("comm: parameter", "#e45756"),
    "time_comm_exposed_intermediate_s": ("comm: intermediate", "#f58518"),
    "time_bubble_s": ("bubble (waiting for a peer)", "#9d9d9d"),
    "time_optimizer_s": ("optimizer", "#54a24b"),
    "time_other_s": ("other", "#d8d8d8"),
}


def breakdown_groups(df: pd.DataFrame) -> pd.DataFrame:
    """Median of every term (and predicted term, when present) per layout, over ok runs with a breakdown."""
    ok = charts.ok_runs(df)
    if ok.empty or "time_compute_s" not in ok.columns:
        return pd.DataFrame()
    ok = ok[pd.to_numeric(ok["time_compute_s"], errors="coerce").notna()]
    if ok.empty:
        return pd.DataFrame()
    cols = [c for c in (*TERMS, *(PRED + t for t in TERMS), "traced_step_time_s", "step_time_s_median") if c in ok.columns]
    values = ok[cols].apply(pd.to_numeric, errors="coerce")
    # one group per workload + layout + source (never pool two workloads' numbers)
    labels = ok.groupby("group_key", sort=False)["config_label"].first()
    medians = values.assign(group_key=ok["group_key"]).groupby("group_key", sort=False).median()
    return medians.assign(config_label=labels).reset_index()


def has_predictions(groups: pd.DataFrame) -> bool:
    pred = [PRED + t for t in TERMS if PRED + t in groups.columns]
    return bool(pred) and groups[pred].notna().any().any()


def time_figure(df: pd.DataFrame) -> go.Figure:
    """Stacked bars in ms per layout; a 'predicted' bar beside each 'measured' one when predicted."""
    groups = breakdown_groups(df)
    if groups.empty:
        return charts.empty_figure("Where the step time goes", "no run with a step-time breakdown")
    kinds = [("measured", "")] + ([("predicted", PRED)] if has_predictions(groups) else [])
    fig = go.Figure()
    for term, (name, color) in TERM_STYLE.items():
        for kind, prefix in kinds:
            col = prefix + term
            y = groups[col] * 1e3 if col in groups.columns else pd.Series([None] * len(groups))
            x = [groups["config_label"].tolist(), [kind] * len(groups)] if len(kinds) > 1 else groups["config_label"]
            fig.add_trace(go.Bar(x=x, y=y, name=name, legendgroup=name, showlegend=kind == "measured",
                                 marker=dict(color=color, line=dict(color="black", width=0.5),
                                             pattern=dict(shape="/" if prefix else "")),
                                 hovertemplate=f"{kind} {name}: %{{y:.3f}} ms<extra>%{{x}}</extra>"))
    fig.update_layout(barmode="stack", title="Where the step time goes (busiest rank, median over runs)",
                      yaxis_title="time per step (ms)", xaxis_title="layout", legend_title="term")
    return fig


def terms_table(df: pd.DataFrame) -> pd.DataFrame:
    """The figure's numbers in ms, one row per layout, with each term's share of the traced step."""
    groups = breakdown_groups(df)
    if groups.empty:
        return groups
    out = pd.DataFrame({"layout": groups["config_label"]})
    for term, (name, _) in TERM_STYLE.items():
        out[f"{name} (ms)"] = groups[term] * 1e3
        if PRED + term in groups.columns:
            out[f"predicted {name} (ms)"] = groups[PRED + term] * 1e3
    out["traced step (ms)"] = groups["traced_step_time_s"] * 1e3
    out["timed step median (ms)"] = groups["step_time_s_median"] * 1e3
    return out


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
               "the slowest rank. Hatched bars: the simulator's prediction for the same run (`parbench calibrate` "
               "first; `parbench validate` lists the errors).")
