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
    runs span orders of magnitude; equal relative errors lie at equal distances from the line). Runs whose time
    is not compared (``parbench.sim.validate.timing_mismatch``: no prediction) are left out."""
    fig = go.Figure()
    frame = _predicted(frame)
    if frame.empty:
        return fig.update_layout(title="no runs to validate")
    for strategy, g in frame.groupby("strategy", sort=False):
        fig.add_trace(go.Scatter(x=g["step_time_measured_s"] * 1e3, y=g["step_time_predicted_s"] * 1e3,
                                 mode="markers", name=str(strategy), marker=dict(color=strategy_color(str(strategy)), size=10),
                                 text=[_run_words(r) for r in g.to_dict("records")]))
    values = pd.concat([frame["step_time_measured_s"], frame["step_time_predicted_s"]]) * 1e3
    lo, hi = float(values[values > 0].min()) / 1.5, float(values.max()) * 1.5
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="identity",
                             line=dict(dash="dash", color="gray")))
    return fig.update_layout(title="Step time: predicted vs measured (ms, log-log)", xaxis_title="measured (ms)",
                             yaxis_title="predicted (ms)", xaxis_type="log", yaxis_type="log")


def _run_words(row: dict) -> str:
    """A validation row as a point's hover names it: workload, world size, model-parallel degrees, batch, threads."""
    from parbench.sim.validate import model_parallel

    degrees = model_parallel(row)
    threads = row.get("threads_per_rank") or 1
    return (f"{row['workload']} W={row['world_size']}" + (f" {degrees}" if degrees != "-" else "")
            + (f" batch {row['global_batch_size']}" if row.get("global_batch_size") else "")
            + (f" {threads} threads" if threads > 1 else ""))


def _predicted(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a validation frame that carry a predicted step time."""
    return frame[frame["step_time_predicted_s"].notna()] if "step_time_predicted_s" in frame else frame


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
    which term the model gets wrong. Terms no run measured show the prediction alone; runs without a prediction
    (their time not compared) are left out."""
    from parbench.sim.predict import TERMS

    fig = go.Figure()
    frame = _predicted(frame)
    if frame.empty:
        return fig.update_layout(title="no runs to validate")
    labels = [t[len("time_"):-len("_s")].replace("comm_exposed_", "exposed ") for t in TERMS]
    measured = [frame[t].dropna().median() * 1e3 if t in frame and frame[t].notna().any() else None for t in TERMS]
    predicted = [frame[f"pred_{t}"].median() * 1e3 for t in TERMS]
    fig.add_trace(go.Bar(x=labels, y=measured, name="measured (median)"))
    fig.add_trace(go.Bar(x=labels, y=predicted, name="predicted (median)"))
    return fig.update_layout(barmode="group", yaxis_title="ms per step", title="step time by term")


def published_errors_figure(rows: list[dict], title: str = "Published runs", against: str = "published") -> go.Figure:
    """Every published run with a metric (``published_memory.compare_runs``): its predicted rate against the
    published one in %, one row of points per source, the per-source targets shaded (|mean| <= 5%, each row
    within 12%). Rates throughout (an iteration time t becomes 1/t), so right of zero is always predicted
    faster than published. ``title``: what the rows are, ``against``: what their figures are (a rows file's runs,
measured, are drawn the same way)."""
    fig = go.Figure()
    have = [r for r in rows if r.get("metric_error_pct") is not None]
    if not have:
        return fig.update_layout(title=f"{title}: none with a metric")
    fig.add_vrect(x0=-5, x1=5, fillcolor="green", opacity=0.08, line_width=0)
    for x in (-12, 12):
        fig.add_vline(x=x, line={"dash": "dot", "color": "gray"})
    for source in dict.fromkeys(r["source"] for r in have):
        mine = [r for r in have if r["source"] == source]
        label = source[:56]
        fig.add_trace(go.Scatter(x=[_rate_error_pct(r) for r in mine], y=[label] * len(mine), mode="markers",
                                 name=label, text=[f"{r['name']} ({r['cluster']}, {r['gpus']} GPUs)" for r in mine],
                                 hovertemplate="%{text}: %{x:+.1f}%<extra></extra>", marker={"size": 9}))
    return fig.update_layout(title=f"{title}: predicted vs {against} throughput per row (%, shaded: within 5%; "
                                   "dotted: 12%)", xaxis_title=f"predicted faster (+) or slower (-) than {against}, %",
                             showlegend=False,
                             height=160 + 40 * len({r["source"] for r in have}))


def layout_pairs_figure(pairs: list) -> go.Figure:
    """``accuracy.layout_pairs``: each pair's published rate ratio (faster over slower, >= 1) against the ratio
    predicted for the same two runs, pairs that differ in precision alone apart from the others. Above the dashed
    line at 1 the model orders the pair as published; on the diagonal it has the ratio too. Left of the dotted
    line the two were published closer than the margin (ties). Both axes are logarithmic: ratios compose by
    multiplication, and one pair far apart (BLOOM's batch 16 against 2048: 18x) would otherwise press the
    others, 1-3x apart, into a corner."""
    import math

    from parbench.sim.accuracy import PAIR_MARGIN_PCT

    fig = go.Figure()
    if not pairs:
        return fig.update_layout(title="no published layout pairs")
    top = max(max(p.published_ratio, p.predicted_ratio) for p in pairs) * 1.1
    low = min(min(p.predicted_ratio for p in pairs), 1.0) / 1.1
    fig.add_hrect(y0=low, y1=1.0, fillcolor="red", opacity=0.07, line_width=0)
    fig.add_hline(y=1.0, line={"dash": "dash", "color": "gray"})
    fig.add_vline(x=1 + PAIR_MARGIN_PCT / 100, line={"dash": "dot", "color": "gray"})
    fig.add_trace(go.Scatter(x=[1.0, top], y=[1.0, top], mode="lines", line={"color": "lightgray"},
                             name="predicted = published", hoverinfo="skip"))
    for label, mine in (("differ in precision alone", [p for p in pairs if p.precision_only]),
                        ("differ in the layout", [p for p in pairs if not p.precision_only])):
        if mine:
            fig.add_trace(go.Scatter(
                x=[p.published_ratio for p in mine], y=[p.predicted_ratio for p in mine], mode="markers", name=label,
                text=[f"{p.faster} | {p.slower} (differ in {', '.join(p.differs)})" for p in mine],
                hovertemplate="%{text}: published %{x:.3f}x, predicted %{y:.3f}x<extra></extra>", marker={"size": 9}))
    return fig.update_layout(title="Published layout pairs (one model, device and GPU count): the faster run's rate "
                                   "over the slower's", xaxis_title="published ratio",
                             yaxis_title="predicted ratio (below 1: misordered)", xaxis_type="log", yaxis_type="log",
                             xaxis_range=[math.log10(1 / 1.1), math.log10(top)],
                             yaxis_range=[math.log10(low), math.log10(top)],  # a log axis's range is in log10 units
                             xaxis_tickvals=RATIO_TICKS, yaxis_tickvals=RATIO_TICKS)


RATIO_TICKS = (0.5, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50)
"""Where the layout pairs' log axes are labelled (plotly's own labels a log axis's 20 as "2")."""


def _rate_error_pct(row: dict) -> float:
    """A row's error as a rate: tokens/s and MFU as they are, an iteration time's (published / predicted - 1)."""
    if row["metric"] == "s_per_iteration":
        return (row["published"] / row["predicted"] - 1) * 100
    return row["metric_error_pct"]


def published_split_frame(splits: dict[str, dict]) -> pd.DataFrame:
    """``published.fixed_and_per_micro_batch`` as a table: per layout, the micro-batch counts and the fixed and
    per-micro-batch ("per-mb") parts of the step, published beside predicted (seconds)."""
    return pd.DataFrame([{"layout": name, "micro-batches": f"{s['micro_batches'][0]}-{s['micro_batches'][-1]}",
                          "per-mb published s": round(s["per_micro_batch_s_published"], 4),
                          "per-mb predicted s": round(s["per_micro_batch_s_predicted"], 4),
                          "per-mb error %": round(s["per_micro_batch_error_pct"], 1),
                          "fixed published s": round(s["fixed_s_published"], 2),
                          "± (one step 1% off)": round(s["fixed_s_published_spread"], 2),
                          "fixed predicted s": round(s["fixed_s_predicted"], 2)}
                         for name, s in splits.items()])
