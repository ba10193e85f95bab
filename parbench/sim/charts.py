"""Figures of the simulator's validation (plotly, torch-free): predicted vs measured with the identity line,
and predicted scaling curves carried past the measured world sizes. Pure functions: DataFrame -> Figure."""

from __future__ import annotations

import dataclasses

import pandas as pd
import plotly.graph_objects as go

from parbench.charts import strategy_color
from parbench.config import ConfigError, RunConfig, Strategy
from parbench.sim.hardware import Cluster
from parbench.sim.layout import layout_from_run
from parbench.sim.model import model_spec
from parbench.sim.predict import predict

SCALING_WORLD_SIZES = (1, 2, 4, 8, 16, 32, 64)


def predicted_vs_measured(frame: pd.DataFrame) -> go.Figure:
    """Step time, predicted against measured, one point per run, with y = x, on log-log axes (the
    runs span orders of magnitude; equal relative errors lie at equal distances from the line)."""
    fig = go.Figure()
    if frame.empty:
        return fig.update_layout(title="no runs to validate")
    for strategy, g in frame.groupby("strategy", sort=False):
        fig.add_trace(go.Scatter(x=g["step_time_measured_s"] * 1e3, y=g["step_time_predicted_s"] * 1e3,
                                 mode="markers", name=str(strategy), marker=dict(color=strategy_color(str(strategy)), size=10),
                                 text=g["workload"] + " W=" + g["world_size"].astype(str)))
    values = pd.concat([frame["step_time_measured_s"], frame["step_time_predicted_s"]]) * 1e3
    lo, hi = float(values[values > 0].min()) / 1.5, float(values.max()) * 1.5
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="identity",
                             line=dict(dash="dash", color="gray")))
    return fig.update_layout(title="Step time: predicted vs measured (ms, log-log)", xaxis_title="measured (ms)",
                             yaxis_title="predicted (ms)", xaxis_type="log", yaxis_type="log")


def scaling_curves(records: pd.DataFrame, cluster: Cluster) -> pd.DataFrame:
    """Predicted throughput of each measured (strategy, workload) configuration at every world size of
    SCALING_WORLD_SIZES that the configuration allows (the others are skipped, as the runner would refuse them)."""
    rows = []
    seen = set()
    for rec in records.to_dict("records"):
        cfg = RunConfig.from_dict(rec["config"])
        key = (cfg.strategy, cfg.workload, cfg.global_batch_size)
        if key in seen or cfg.strategy in (Strategy.SINGLE, Strategy.HYBRID):
            continue
        seen.add(key)
        for w in SCALING_WORLD_SIZES:
            try:
                c = dataclasses.replace(cfg, world_size=w, dp=0, tp=0, pp=0)
                p = predict(model_spec(c.workload), layout_from_run(c), cluster)
            except (ConfigError, ValueError):
                continue
            rows.append({"strategy": cfg.strategy.value, "workload": cfg.workload.name, "world_size": w,
                         "throughput_predicted": p.throughput_samples_per_s})
    return pd.DataFrame(rows)


def scaling_figure(curves: pd.DataFrame, measured: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    if curves.empty:
        return fig.update_layout(title="no configuration to extrapolate")
    for (strategy, workload), g in curves.groupby(["strategy", "workload"]):
        fig.add_trace(go.Scatter(x=g["world_size"], y=g["throughput_predicted"], mode="lines",
                                 name=f"{strategy} {workload} (predicted)", line=dict(color=strategy_color(strategy))))
        m = measured[(measured["strategy"] == strategy) & (measured["workload"] == workload)]
        if not m.empty:
            fig.add_trace(go.Scatter(x=m["world_size"], y=m["throughput_measured"], mode="markers",
                                     name=f"{strategy} {workload} (measured)",
                                     marker=dict(color=strategy_color(strategy), size=10)))
    return fig.update_layout(title="Throughput vs world size: measured points, predicted curves",
                             xaxis_title="world size", xaxis_type="log", yaxis_title="samples/s")


def terms_figure(frame: pd.DataFrame) -> go.Figure:
    """The step broken into the runner's terms, measured beside predicted (medians over the runs shown, ms):
    which term the model gets wrong. Terms no run measured show the prediction alone."""
    from parbench.sim.predict import TERMS

    fig = go.Figure()
    if frame.empty:
        return fig.update_layout(title="no runs to validate")
    labels = [t[len("time_"):-len("_s")].replace("comm_exposed_", "exposed ") for t in TERMS]
    measured = [frame[t].dropna().median() * 1e3 if t in frame and frame[t].notna().any() else None for t in TERMS]
    predicted = [frame[f"pred_{t}"].median() * 1e3 for t in TERMS]
    fig.add_trace(go.Bar(x=labels, y=measured, name="measured (median)"))
    fig.add_trace(go.Bar(x=labels, y=predicted, name="predicted (median)"))
    return fig.update_layout(barmode="group", yaxis_title="ms per step", title="step time by term")
