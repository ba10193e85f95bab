"""Experts: where a mixture of experts sends its tokens, how uneven that is, and what it costs.

- tokens per expert per rank (heat map, one run): assignments each rank dispatched to each expert in
  the probe step, summed over the MoE layers (``moe_tokens_per_expert_per_rank``);
- load imbalance over steps: max_e / mean_e of the routed assignments per step (worst MoE layer),
  beside the capacity factor (an expert receiving more than capacity_factor x the mean drops the
  rest) and the share of assignments dropped;
- all-to-all bytes next to the other traffic: per run, the token dispatch, combine and count
  exchange (intermediate) beside the expert and non-expert gradient all-reduces (parameter) and
  whatever else each category holds.

Runs of the moe workload only; dense workloads have none of these fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Experts"
MIB = 2**20
# (record field, label, category): the parts of a run's traffic the Experts view stacks
BYTE_PARTS = (
    ("comm_moe_dispatch_bytes_per_step", "all-to-all dispatch", "intermediate"),
    ("comm_moe_combine_bytes_per_step", "all-to-all combine", "intermediate"),
    ("comm_moe_counts_bytes_per_step", "count exchange", "intermediate"),
    ("comm_expert_grad_bytes_per_step", "expert gradients", "parameter"),
    ("comm_non_expert_grad_bytes_per_step", "non-expert gradients", "parameter"),
)
HOW_TO = ("No mixture-of-experts runs pass the filters. Produce some: `parbench sweep parbench/sweeps/moe.toml` "
          "or `parbench run --workload moe --strategy ep --world-size 2`.")


def moe_runs(df: pd.DataFrame) -> pd.DataFrame:
    """Successful runs that recorded routing (moe workload, any strategy)."""
    ok = charts.ok_runs(df)
    if ok.empty or "moe_load_imbalance_per_step" not in ok.columns:
        return ok.iloc[0:0]
    return ok[ok["moe_load_imbalance_per_step"].map(lambda v: isinstance(v, list) and len(v) > 0)]


def tokens_heatmap(run: pd.Series) -> go.Figure:
    """Assignments rank r dispatched to expert e in the probe step (all MoE layers)."""
    z = run["moe_tokens_per_expert_per_rank"]
    fig = go.Figure(go.Heatmap(z=z, x=[f"expert {e}" for e in range(len(z[0]))],
                               y=[f"rank {r}" for r in range(len(z))], colorscale="Blues",
                               colorbar={"title": "tokens"}, texttemplate="%{z}"))
    fig.update_layout(title=f"Tokens per expert per rank, probe step: {run['run_label']}", height=120 + 40 * len(z))
    return fig.update_yaxes(autorange="reversed")


def imbalance_figure(df: pd.DataFrame) -> go.Figure:
    """Per run: load imbalance per step (top) and the share of assignments dropped (bottom); the
    capacity factor as a dotted line, the level above which the busiest expert must drop."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("load imbalance max/mean (worst MoE layer)", "assignments dropped"))
    colors = charts.layout_colors(df)
    for _, run in df.iterrows():
        steps = list(range(len(run["moe_load_imbalance_per_step"])))
        color = colors.get(run["layout_key"])
        fig.add_trace(go.Scatter(x=steps, y=run["moe_load_imbalance_per_step"], name=run["run_label"],
                                 mode="lines+markers", line={"color": color}, legendgroup=run["run_id"]), row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=run["moe_dropped_fraction_per_step"], name=run["run_label"],
                                 mode="lines+markers", line={"color": color}, legendgroup=run["run_id"],
                                 showlegend=False), row=2, col=1)
    for cf in sorted({float(c) for c in df["capacity_factor"].dropna()}):
        fig.add_hline(y=cf, line_dash="dot", annotation_text=f"capacity factor {cf:g}", row=1, col=1)
    fig.update_yaxes(tickformat=".0%", row=2, col=1)
    fig.update_xaxes(title_text="step (warm-up, probe, timed)", row=2, col=1)
    return fig.update_layout(title="Routing balance over steps", height=560)


def bytes_frame(df: pd.DataFrame) -> pd.DataFrame:
    """MiB per rank per step of each MoE part and of the rest of its category (max over ranks)."""
    rows = []
    for _, run in df.iterrows():
        row = {"run": run["run_label"]}
        for category in ("data", "parameter", "intermediate"):
            named = sum(run.get(f) or 0 for f, _, c in BYTE_PARTS if c == category)
            rest = (run.get(f"comm_{category}_bytes_per_step") or 0) - named
            row[f"other {category}"] = max(rest, 0) / MIB
        for field, label, _ in BYTE_PARTS:
            row[label] = (run.get(field) or 0) / MIB
        rows.append(row)
    return pd.DataFrame(rows)


def bytes_figure(df: pd.DataFrame) -> go.Figure:
    frame = bytes_frame(df)
    fig = go.Figure()
    order = [label for _, label, _ in BYTE_PARTS] + ["other parameter", "other intermediate", "other data"]
    for label in order:
        if frame[label].any():
            fig.add_trace(go.Bar(y=frame["run"], x=frame[label], name=label, orientation="h"))
    return fig.update_layout(barmode="stack", title="All-to-all and gradient traffic per rank per step",
                             xaxis_title="sent per rank (MiB/step, busiest rank per part)",
                             height=160 + 36 * len(frame))


def render(ctx: "ViewContext") -> None:
    runs = moe_runs(ctx.runs)
    if runs.empty:
        st.info(HOW_TO)
        return
    labels = list(runs["run_label"])
    chosen = st.selectbox("run for the heat map", labels, key="experts-run")
    st.plotly_chart(tokens_heatmap(runs[runs["run_label"] == chosen].iloc[0]), key="experts-heatmap")
    st.plotly_chart(imbalance_figure(runs), key="experts-imbalance")
    st.plotly_chart(bytes_figure(runs), key="experts-bytes")
    st.caption("Dispatch: tokens travelling to their experts' ranks (and, backward, the gradients of the combined "
               "outputs); combine: the experts' outputs travelling back (and the gradients of the dispatched "
               "tokens). Each rank counts what leaves it: its all-to-all input minus its own share. The count "
               "exchange (E int64 per MoE layer) is intermediate traffic: it sizes the token exchange. Dense "
               "strategies (ddp, fsdp) run every expert locally: no all-to-all, more gradient traffic.")
