"""Figures of the step-time breakdown (torch-free, pure: DataFrame or trace -> plotly Figure).

The dashboard's *Time* and *Timeline* views and ``parbench report`` draw with these.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from parbench.figure_basics import empty_figure, ok_runs
from parbench.metrics.breakdown import TERM_OF, TERMS

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
    ok = ok_runs(df)
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
        return empty_figure("Where the step time goes", "no run with a step-time breakdown")
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


IN_FLIGHT_COLOR = "#b07aa1"


def step_spans(trace: dict[str, Any], step: int) -> pd.DataFrame:
    """Spans of traced step ``step`` on every rank: rank, lane (0 = main thread), name, cat, start/end ms
    relative to the step's earliest start."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    windows = {e["pid"]: (e["ts"], e["ts"] + e["dur"]) for e in events
               if e.get("cat") == "step" and (e.get("args") or {}).get("traced_step") == step}
    if not windows:
        return pd.DataFrame(columns=["rank", "lane", "name", "cat", "start_ms", "end_ms"])
    origin = min(a for a, _ in windows.values())
    rows = []
    for e in events:
        lo_hi = windows.get(e["pid"])
        if e.get("cat") == "step" or lo_hi is None or not (lo_hi[0] <= e["ts"] <= lo_hi[1]):
            continue
        rows.append({"rank": e["pid"], "lane": e["tid"], "name": e["name"], "cat": e["cat"],
                     "start_ms": (e["ts"] - origin) / 1e3, "end_ms": (e["ts"] + e["dur"] - origin) / 1e3})
    return pd.DataFrame(rows)


def timeline_figure(trace: dict[str, Any], step: int | None = None, *, in_flight: bool = True) -> go.Figure:
    """Horizontal bars: one row per rank (plus one per lane of collectives in flight), coloured by term."""
    step = trace.get("otherData", {}).get("chosen_traced_step", 0) if step is None else step
    spans = step_spans(trace, step)
    if spans.empty:
        return empty_figure("Timeline", "this trace has no spans for that step")
    if not in_flight:
        spans = spans[spans["lane"] == 0]
    spans = spans.assign(row=[f"rank {r}" if lane == 0 else f"rank {r} · in flight {lane}"
                              for r, lane in zip(spans["rank"], spans["lane"])])
    order = sorted(spans["row"].unique(), key=lambda s: (int(s.split()[1]), s))
    fig = go.Figure()
    for cat, part in spans.groupby("cat", sort=False):
        term = TERM_OF.get(cat)  # a span label of the main thread, else an op in flight
        name, color = TERM_STYLE[term] if term else (f"in flight: {cat.split('.', 1)[-1]}", IN_FLIGHT_COLOR)
        fig.add_trace(go.Bar(y=part["row"], x=part["end_ms"] - part["start_ms"], base=part["start_ms"],
                             orientation="h", name=name, marker=dict(color=color, line=dict(width=0)),
                             customdata=part[["name"]], hovertemplate="%{customdata[0]}: %{base:.3f} ms + "
                             "%{x:.3f} ms<extra>%{y}</extra>"))
    fig.update_layout(barmode="overlay", title=f"Traced step {step}: every rank", xaxis_title="time in the step (ms)",
                      yaxis=dict(categoryorder="array", categoryarray=order[::-1], title=""), legend_title="term",
                      height=160 + 40 * len(order))
    return fig


