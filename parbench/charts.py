"""The dashboard's charts as pure functions: a runs DataFrame in, a plotly Figure out.

Shared by the Streamlit app (``dashboard/``) and ``parbench report`` (one HTML file), so both
show the same figures. Torch-free: reads only what ``parbench.results.load`` returns.

Conventions:
- one fixed colour per strategy (``STRATEGY_COLORS``) in every chart; where bars are stacked by
  a category (memory parts, communication categories) the bar keeps its strategy's colour and
  the category is told apart by a fill pattern (``*_PATTERNS``);
- every axis names its unit; bytes are shown in MiB (2**20), times in ms;
- call ``prepare(frame)`` once; it adds the label columns the charts group by.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd
import plotly.graph_objects as go

MIB = 2**20

STRATEGY_ORDER = ("single", "ddp", "zero1", "zero2", "fsdp", "tp", "pipeline", "hybrid", "ps")

# plotly's D3 palette with grey for the single-process reference; fixed so a strategy keeps
# its colour whichever subset of strategies a filter leaves.
STRATEGY_COLORS: dict[str, str] = {
    "single": "#7f7f7f",
    "ddp": "#1f77b4",
    "zero1": "#ff7f0e",
    "zero2": "#2ca02c",
    "fsdp": "#d62728",
    "tp": "#9467bd",
    "pipeline": "#8c564b",
    "hybrid": "#e377c2",
    "ps": "#17becf",
}
UNKNOWN_COLOR = "#bcbd22"

MEMORY_PARTS = {  # column -> legend name
    "mem_param_bytes": "parameters",
    "mem_grad_bytes": "gradients",
    "mem_optim_bytes": "optimizer state",
    "mem_activation_bytes": "activations",
}
MEMORY_PATTERNS = {"mem_param_bytes": "", "mem_grad_bytes": "/", "mem_optim_bytes": "x", "mem_activation_bytes": "."}

COMM_PARTS = {
    "comm_data_bytes_per_step": "data",
    "comm_parameter_bytes_per_step": "parameter",
    "comm_intermediate_bytes_per_step": "intermediate",
}
COMM_PATTERNS = {"comm_data_bytes_per_step": ".", "comm_parameter_bytes_per_step": "",
                 "comm_intermediate_bytes_per_step": "/"}

# What makes two runs "the same workload" (strong scaling: fixed global batch).
WORKLOAD_KEY = ("workload", "layers", "hidden", "heads", "seq_len", "vocab_size", "dataset", "global_batch_size")

# How many runs a per-run chart draws at most (the newest ones): thousands of boxes or loss
# curves are unreadable and slow to render.
MAX_RUNS_PER_CHART = 40

# Metrics of the Compare view and the Overview table: column -> (label, scale, lower_is_better).
HEADLINE_METRICS: dict[str, tuple[str, float, bool]] = {
    "throughput_samples_per_s": ("throughput (samples/s)", 1.0, False),
    "step_time_s_median": ("step time median (ms)", 1e3, True),
    "step_time_s_iqr": ("step time IQR (ms)", 1e3, True),
    "exposed_comm_time_s": ("exposed comm time (ms)", 1e3, True),
    "achieved_flops_per_s_per_rank": ("achieved (GFLOP/s per rank)", 1e-9, False),
    "peak_rss_bytes": ("peak RSS (MiB)", 1 / MIB, True),
    "mem_param_bytes": ("parameters (MiB)", 1 / MIB, True),
    "mem_grad_bytes": ("gradients (MiB)", 1 / MIB, True),
    "mem_optim_bytes": ("optimizer state (MiB)", 1 / MIB, True),
    "mem_activation_bytes": ("activations (MiB)", 1 / MIB, True),
    "comm_data_bytes_per_step": ("comm data (MiB/step)", 1 / MIB, True),
    "comm_parameter_bytes_per_step": ("comm parameter (MiB/step)", 1 / MIB, True),
    "comm_intermediate_bytes_per_step": ("comm intermediate (MiB/step)", 1 / MIB, True),
    "comm_total_bytes_per_step": ("comm total (MiB/step)", 1 / MIB, True),
    "comm_wire_bytes_per_step": ("comm wire (MiB/step)", 1 / MIB, True),
    "os_write_bytes_per_step": ("OS-measured sent (MiB/step)", 1 / MIB, True),
    "loss_max_abs_diff_vs_reference": ("max |loss diff| vs single", 1.0, True),
}


def strategy_color(strategy: str) -> str:
    return STRATEGY_COLORS.get(strategy, UNKNOWN_COLOR)


# --- preparing the frame ------------------------------------------------------------------


def prepare(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``workload_label``, ``group_label`` (strategy xW), ``config_label`` (group and workload) and
    ``run_label``; sort by strategy order."""
    df = frame.copy()
    if df.empty:
        for col in ("workload_label", "group_label", "config_label", "run_label"):
            df[col] = pd.Series(dtype=str)
        return df
    df["workload_label"] = df.apply(_workload_label, axis=1)
    df["group_label"] = df["strategy"].astype(str) + " x" + df["world_size"].astype("Int64").astype(str)
    df["config_label"] = df["group_label"] + " · " + df["workload_label"]
    df["run_label"] = df["group_label"] + " " + df["run_id"].astype(str).str[:6]
    rank = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    order = df["strategy"].map(lambda s: rank.get(s, len(rank)))
    return df.assign(_order=order).sort_values(["_order", "world_size", "created_at"], kind="stable") \
             .drop(columns="_order").reset_index(drop=True)


def _workload_label(row: pd.Series) -> str:
    label = f"{row['workload']} L{_int(row['layers'])} H{_int(row['hidden'])}"
    if row["workload"] == "transformer":
        label += f" heads{_int(row['heads'])} T{_int(row['seq_len'])}"
    return label + f" B{_int(row['global_batch_size'])}"


def _int(v: object) -> str:
    return "?" if v is None or pd.isna(v) else str(int(v))


def ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if not df.empty else df


def newest(df: pd.DataFrame, n: int = MAX_RUNS_PER_CHART) -> pd.DataFrame:
    """The n newest runs, kept in the frame's (strategy) order."""
    if len(df) <= n:
        return df
    keep = df.sort_values("created_at").index[-n:]
    return df.loc[df.index.isin(keep)]


def empty_figure(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False,
                      annotations=[dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")])
    return fig


# --- overview -----------------------------------------------------------------------------

OVERVIEW_COLUMNS = ("run_id", "source", "strategy", "workload_label", "world_size", "backend", "status",
                    "throughput_samples_per_s", "step_time_s_median", "peak_rss_bytes",
                    "comm_total_bytes_per_step", "loss_max_abs_diff_vs_reference", "created_at")


def overview_table(df: pd.DataFrame) -> pd.DataFrame:
    """Headline columns with units in their names (step time in ms, bytes in MiB)."""
    out = df[[c for c in OVERVIEW_COLUMNS if c in df.columns]].copy()
    out["step_time_s_median"] = out["step_time_s_median"].astype(float) * 1e3
    out["peak_rss_bytes"] = out["peak_rss_bytes"].astype(float) / MIB
    out["comm_total_bytes_per_step"] = out["comm_total_bytes_per_step"].astype(float) / MIB
    return out.rename(columns={"workload_label": "workload", "step_time_s_median": "step_time_ms_median",
                               "peak_rss_bytes": "peak_rss_MiB", "comm_total_bytes_per_step": "comm_MiB_per_step"})


# --- scaling ------------------------------------------------------------------------------


def scaling_points(df: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max throughput over repeats per (strategy, workload, world size), and the
    strong-scaling efficiency E(W) = T(W) / (W * T(1)), T(1) = median throughput of the
    world-size-1 runs of the same workload (any strategy, normally ``single``)."""
    ok = ok_runs(df).dropna(subset=["throughput_samples_per_s"])
    if ok.empty:
        return pd.DataFrame(columns=["strategy", "workload_label", "world_size", "median", "min", "max",
                                     "repeats", "efficiency", "efficiency_min", "efficiency_max"])
    g = ok.groupby(["strategy", "workload_label", "world_size"], sort=False)["throughput_samples_per_s"]
    pts = g.agg(["median", "min", "max", "count"]).rename(columns={"count": "repeats"}).reset_index()
    base = ok[ok["world_size"] == 1].groupby("workload_label")["throughput_samples_per_s"].median()
    t1 = pts["workload_label"].map(base) * pts["world_size"]
    return pts.assign(efficiency=pts["median"] / t1, efficiency_min=pts["min"] / t1,
                      efficiency_max=pts["max"] / t1)


def _scaling_figure(pts: pd.DataFrame, y: str, lo: str, hi: str, title: str, yaxis: str) -> go.Figure:
    fig = go.Figure()
    workloads = list(dict.fromkeys(pts["workload_label"]))
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    for (strategy, wl), sub in pts.groupby(["strategy", "workload_label"], sort=False):
        sub = sub.sort_values("world_size")
        name = strategy if len(workloads) == 1 else f"{strategy} · {wl}"
        fig.add_trace(go.Scatter(
            x=sub["world_size"], y=sub[y], name=name, mode="lines+markers", legendgroup=strategy,
            line=dict(color=strategy_color(strategy), dash=dashes[workloads.index(wl) % len(dashes)]),
            error_y=dict(type="data", symmetric=False, array=sub[hi] - sub[y], arrayminus=sub[y] - sub[lo]),
            customdata=sub[["repeats"]], hovertemplate="W=%{x}: %{y:.3g} (%{customdata[0]} repeats)"))
    fig.update_layout(title=title, xaxis_title="world size (ranks)", yaxis_title=yaxis, legend_title="strategy")
    fig.update_xaxes(type="log", dtick=0.30102999566)  # log2 ticks: 1, 2, 4, 8 ...
    return fig


def scaling_throughput(df: pd.DataFrame) -> go.Figure:
    """Throughput vs world size per strategy; error bars span min..max over repeats."""
    pts = scaling_points(df)
    if pts.empty:
        return empty_figure("Throughput vs world size", "no successful runs")
    return _scaling_figure(pts, "median", "min", "max", "Throughput vs world size (median, bars: min-max over repeats)",
                           "throughput (samples/s)")


def scaling_efficiency(df: pd.DataFrame) -> go.Figure:
    """E(W) = T(W) / (W * T(1)); 1.0 is perfect linear scaling."""
    pts = scaling_points(df).dropna(subset=["efficiency"])
    if pts.empty:
        return empty_figure("Scaling efficiency", "needs a world-size-1 run of the same workload")
    fig = _scaling_figure(pts, "efficiency", "efficiency_min", "efficiency_max",
                          "Scaling efficiency T(W) / (W x T(1))", "scaling efficiency (fraction of linear)")
    fig.add_hline(y=1.0, line_dash="dot", line_color="black", annotation_text="linear")
    return fig


# --- memory and communication (stacked, strategy colour + category pattern) ---------------


def _busiest_rank_parts(row: dict, parts: dict[str, str]) -> dict[str, float]:
    """The parts of the rank whose sum is largest (from per_rank), else the record's max-over-ranks."""
    ranks = row.get("per_rank")
    if isinstance(ranks, list) and ranks:
        top = max(ranks, key=lambda r: sum(float(r.get(c) or 0) for c in parts))
        return {c: float(top.get(c) or 0) for c in parts}
    return {c: float(row.get(c) or 0) if not pd.isna(row.get(c)) else 0.0 for c in parts}


def stacked_groups(df: pd.DataFrame, parts: dict[str, str]) -> pd.DataFrame:
    """Median of each part over the ok runs of each (strategy, world size, workload), busiest rank."""
    ok = ok_runs(df)
    if ok.empty:
        return pd.DataFrame(columns=["strategy", "group_label", "workload_label", *parts])
    # plain dicts, not iterrows: thousands of runs stay well under a second
    records = ok[["strategy", "group_label", "workload_label", "per_rank", *parts]].to_dict("records")
    rows = [{"strategy": r["strategy"], "group_label": r["group_label"], "workload_label": r["workload_label"],
             **_busiest_rank_parts(r, parts)} for r in records]
    return pd.DataFrame(rows).groupby(["strategy", "group_label", "workload_label"], sort=False).median().reset_index()


def _stacked_bars(groups: pd.DataFrame, parts: dict[str, str], patterns: dict[str, str], x: pd.Series,
                  title: str, yaxis: str, xaxis: str) -> go.Figure:
    fig = go.Figure()
    colors = [strategy_color(s) for s in groups["strategy"]]
    for col, name in parts.items():
        pattern = dict(shape=patterns[col], fillmode="overlay", fgcolor="white", solidity=0.4)
        fig.add_trace(go.Bar(x=x, y=groups[col] / MIB, name=name, legendgroup=name, showlegend=False,
                             marker=dict(color=colors, pattern=pattern, line=dict(color="black", width=0.5)),
                             hovertemplate=f"{name}: %{{y:.3f}} MiB<extra>%{{x}}</extra>"))
        # legend-only twin in neutral grey: the legend explains the pattern, not a strategy colour
        fig.add_trace(go.Bar(x=[None], y=[None], name=name, legendgroup=name,
                             marker=dict(color="#555555", pattern=pattern)))
    fig.update_layout(barmode="stack", title=title, yaxis_title=yaxis, xaxis_title=xaxis, legend_title="part (pattern)")
    return fig


def _group_x(groups: pd.DataFrame) -> pd.Series:
    many = groups["workload_label"].nunique() > 1
    return groups["group_label"] + (" · " + groups["workload_label"] if many else "")


def memory_stacked(df: pd.DataFrame) -> go.Figure:
    """Peak memory of the busiest rank, stacked parameters / gradients / optimizer / activations."""
    groups = stacked_groups(df, MEMORY_PARTS)
    if groups.empty:
        return empty_figure("Memory per rank", "no successful runs")
    return _stacked_bars(groups, MEMORY_PARTS, MEMORY_PATTERNS, _group_x(groups),
                         "Memory of the busiest rank (median over runs)", "memory per rank (MiB)",
                         "strategy x world size")


def memory_per_rank(run: pd.Series) -> go.Figure:
    """Every rank of one run (pipeline stages hold different layers), stacked by part."""
    ranks = run.get("per_rank")
    if not isinstance(ranks, list) or not ranks:
        return empty_figure("Memory per rank", "this record has no per-rank figures")
    frame = pd.DataFrame(ranks)
    groups = pd.DataFrame({"strategy": [run["strategy"]] * len(frame),
                           **{c: frame.get(c, pd.Series([0] * len(frame))).fillna(0).astype(float) for c in MEMORY_PARTS}})
    x = [f"rank {r['rank']} ({r.get('role', '')})" for r in ranks]
    return _stacked_bars(groups, MEMORY_PARTS, MEMORY_PATTERNS, pd.Series(x),
                         f"Memory per rank: {run['run_label']}", "memory (MiB)", "rank")


def comm_stacked(df: pd.DataFrame) -> go.Figure:
    """Bytes a rank sends per optimizer step (busiest rank), stacked data / parameter / intermediate."""
    groups = stacked_groups(df, COMM_PARTS)
    if groups.empty:
        return empty_figure("Communication per rank per step", "no successful runs")
    return _stacked_bars(groups, COMM_PARTS, COMM_PATTERNS, _group_x(groups),
                         "Communication per rank per step by category (busiest rank)", "sent per rank (MiB/step)",
                         "strategy x world size")


def comm_ops_frame(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, op/category) from ``comm_ops``, median over runs of a group."""
    rows = []
    for r in ok_runs(df)[["strategy", "group_label", "comm_ops"]].to_dict("records"):
        ops = r.get("comm_ops")
        for key, v in (ops.items() if isinstance(ops, dict) else ()):
            rows.append({"strategy": r["strategy"], "group_label": r["group_label"], "op": key,
                         "count": float(v.get("count") or 0), "sent_bytes": float(v.get("sent_bytes") or 0),
                         "wire_bytes": float(v.get("wire_bytes") or 0)})
    if not rows:
        return pd.DataFrame(columns=["strategy", "group_label", "op", "count", "sent_bytes", "wire_bytes"])
    return pd.DataFrame(rows).groupby(["strategy", "group_label", "op"], sort=False).median().reset_index()


def comm_ops_breakdown(df: pd.DataFrame) -> go.Figure:
    """Sent bytes per step per collective op and category, one bar group per strategy x world size."""
    ops = comm_ops_frame(df)
    if ops.empty:
        return empty_figure("Communication per op", "no communication recorded")
    fig = go.Figure()
    for (strategy, group), sub in ops.groupby(["strategy", "group_label"], sort=False):
        fig.add_trace(go.Bar(x=sub["op"], y=sub["sent_bytes"] / MIB, name=group, legendgroup=strategy,
                             marker_color=strategy_color(strategy), customdata=sub[["count"]],
                             hovertemplate="%{x}: %{y:.3f} MiB in %{customdata[0]} ops<extra>" + group + "</extra>"))
    fig.update_layout(barmode="group", title="Communication per op / category (busiest rank)",
                      xaxis_title="op / category", yaxis_title="sent per rank (MiB/step)", legend_title="strategy x W")
    return fig


def comm_modeled_vs_os(df: pd.DataFrame) -> go.Figure:
    """Modeled bytes (nccl-tests convention, and what gloo really sends) vs /proc/self/io wchar."""
    ok = ok_runs(df).dropna(subset=["os_write_bytes_per_step"])
    if ok.empty:
        return empty_figure("Modeled vs OS-measured bytes", "no OS-measured bytes in these runs (null under nccl: "
                            "NVLink, shared memory and InfiniBand make no write syscalls)")
    fig = go.Figure()
    for strategy, sub in ok.groupby("strategy", sort=False):
        for col, symbol, what in (("comm_total_bytes_per_step", "circle-open", "modeled (convention)"),
                                  ("comm_wire_bytes_per_step", "circle", "modeled wire")):
            fig.add_trace(go.Scatter(
                x=sub[col].astype(float) / MIB, y=sub["os_write_bytes_per_step"].astype(float) / MIB,
                mode="markers", name=f"{strategy}: {what}", legendgroup=strategy, text=sub["run_label"],
                marker=dict(color=strategy_color(strategy), symbol=symbol, size=10),
                hovertemplate="%{text}: modeled %{x:.3f} MiB, OS %{y:.3f} MiB"))
    top = float(max(ok["os_write_bytes_per_step"].astype(float).max(),
                    ok["comm_wire_bytes_per_step"].astype(float).max(skipna=True) or 0)) / MIB
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="OS = modeled",
                             line=dict(color="black", dash="dot")))
    fig.update_layout(title="Modeled vs OS-measured bytes per rank per step (busiest rank)",
                      xaxis_title="modeled sent (MiB/step)", yaxis_title="OS-measured written, wchar (MiB/step)")
    return fig


# --- step time ----------------------------------------------------------------------------


def step_time_box(df: pd.DataFrame) -> go.Figure:
    """Every timed step of each run (newest ``MAX_RUNS_PER_CHART``), so noise is visible."""
    runs = newest(ok_runs(df))
    fig = go.Figure()
    for _, r in runs.iterrows():
        times = r.get("step_times_s")
        if not isinstance(times, list) or not times:
            continue
        fig.add_trace(go.Box(y=[t * 1e3 for t in times], name=r["run_label"], legendgroup=r["strategy"],
                             marker_color=strategy_color(r["strategy"]), boxpoints="all", jitter=0.4,
                             pointpos=0, showlegend=False))
    if not fig.data:
        return empty_figure("Step time distribution", "no step times in these runs")
    fig.update_layout(title="Step time per run (every timed step)", yaxis_title="step time (ms)",
                      xaxis_title="run (strategy x world size, run id)")
    return fig


# --- correctness --------------------------------------------------------------------------


def _one_per_config(df: pd.DataFrame) -> pd.DataFrame:
    """The newest ok run per (strategy, world size, workload): one curve each."""
    ok = ok_runs(df)
    if ok.empty:
        return ok
    latest = ok.sort_values("created_at").groupby(["strategy", "world_size", "workload_label"]).tail(1)
    return ok.loc[ok.index.isin(latest.index)]


def loss_curves(df: pd.DataFrame) -> go.Figure:
    """Loss per step of each strategy; the single-process reference drawn dashed and thick."""
    fig = go.Figure()
    runs = newest(_one_per_config(df))
    # the reference last, so its dashed line lies on top of the curves that match it
    runs = pd.concat([runs[runs["strategy"] != "single"], runs[runs["strategy"] == "single"]]) if not runs.empty else runs
    for _, r in runs.iterrows():
        losses = r.get("losses")
        if not isinstance(losses, list) or not losses:
            continue
        ref = r["strategy"] == "single"
        fig.add_trace(go.Scatter(
            x=list(range(len(losses))), y=losses, mode="lines+markers",
            name=f"{r['group_label']} · {r['workload_label']}" + (" (reference)" if ref else ""),
            legendgroup=r["strategy"],
            line=dict(color=strategy_color(r["strategy"]), dash="dash" if ref else "solid", width=4 if ref else 2)))
    if not fig.data:
        return empty_figure("Loss curves", "no losses in these runs")
    fig.update_layout(title="Loss per step (single-process reference dashed)", xaxis_title="step (count)",
                      yaxis_title="loss (cross-entropy, nats)")
    return fig


def loss_diff(df: pd.DataFrame) -> go.Figure:
    """max |loss - single-process loss| per run, log scale (float32 agreement is ~1e-7..1e-5)."""
    ok = newest(ok_runs(df).dropna(subset=["loss_max_abs_diff_vs_reference"]))
    ok = ok[ok["strategy"] != "single"] if not ok.empty else ok
    if ok.empty:
        return empty_figure("Difference to the reference", "no multi-rank runs with a reference loss")
    fig = go.Figure()
    for strategy, sub in ok.groupby("strategy", sort=False):
        # clip exact zeros so they still show on the log axis
        fig.add_trace(go.Scatter(x=sub["run_label"], y=sub["loss_max_abs_diff_vs_reference"].astype(float).clip(lower=1e-12),
                                 mode="markers", name=strategy, marker=dict(color=strategy_color(strategy), size=12)))
    fig.update_layout(title="max |loss - single-process loss| over the steps", yaxis_type="log",
                      yaxis_title="max abs loss difference (nats, log)", xaxis_title="run")
    return fig


# --- compare ------------------------------------------------------------------------------


def compare_table(df: pd.DataFrame, by: str = "run_label") -> pd.DataFrame:
    """Every headline metric side by side (median per ``by`` value) and its ratio to the first column."""
    ok = ok_runs(df)
    if ok.empty:
        return pd.DataFrame()
    cols = [c for c in HEADLINE_METRICS if c in ok.columns]
    numeric = ok[cols].apply(pd.to_numeric, errors="coerce").assign(**{by: ok[by]})
    med = numeric.groupby(by, sort=False)[cols].median().T
    scale = pd.Series({c: HEADLINE_METRICS[c][1] for c in cols})
    table = med.mul(scale, axis=0)
    base = table.columns[0]
    for col in table.columns[1:]:
        table[f"{col} / {base}"] = table[col] / table[base].where(table[base] != 0)
    table.index = [HEADLINE_METRICS[c][0] for c in cols]
    return table


def compare_ratios(df: pd.DataFrame, by: str = "run_label") -> go.Figure:
    """Ratio of each metric to the first selection (1.0 = equal), one bar colour per strategy."""
    table = compare_table(df, by)
    ratio_cols = [c for c in table.columns if " / " in str(c)]
    if not ratio_cols:
        return empty_figure("Ratios", "pick at least two runs or strategies")
    strategies = ok_runs(df).groupby(by, sort=False)["strategy"].first()
    fig = go.Figure()
    for col in ratio_cols:
        name = col.split(" / ")[0]
        fig.add_trace(go.Scatter(x=table.index, y=table[col], name=col, mode="markers",
                                 marker=dict(color=strategy_color(strategies.get(name, "")), size=12)))
    fig.add_hline(y=1.0, line_dash="dot", line_color="black")
    fig.update_layout(title=f"Ratio to {table.columns[0]}", yaxis_title="ratio (dimensionless)",
                      xaxis_title="metric", yaxis_type="log")
    return fig


# Charts per section, in the order ``parbench report`` writes them (the dashboard views call the
# same functions). A new section: add a (title, charts) line here.
REPORT_SECTIONS: tuple[tuple[str, tuple[Callable[[pd.DataFrame], go.Figure], ...]], ...] = (
    ("Scaling", (scaling_throughput, scaling_efficiency)),
    ("Memory", (memory_stacked,)),
    ("Communication", (comm_stacked, comm_ops_breakdown, comm_modeled_vs_os)),
    ("Step time", (step_time_box,)),
    ("Compare strategies", (lambda df: compare_ratios(df, by="config_label"),)),
    ("Correctness", (loss_curves, loss_diff)),
)
