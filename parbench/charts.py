"""The dashboard's charts as pure functions: a runs DataFrame in, a plotly Figure out.

Shared by the Streamlit app (``dashboard/``) and ``parbench report`` (one HTML file), so both
show the same figures. Torch-free: reads only what ``parbench.results.load`` returns.

Conventions:
- the unit is the *layout* (``parbench.layout_key``): runs are grouped by workload, layout key
  and source, medians are taken only over repeats of one group, and labels name the parts of the
  key that differ among the runs shown;
- every chart is split by workload (one facet per workload) and no ratio is ever taken across
  workloads;
- one colour per strategy (``STRATEGY_COLORS``) in every chart; the layouts of one strategy
  (world sizes, meshes) get lighter and darker shades of it; where bars are stacked by a category
  (memory parts, communication categories) the category is told apart by a fill pattern;
- every axis names its unit; bytes are shown in MiB (2**20), times in ms;
- call ``prepare(frame)`` once, and ``relabel(frame)`` after filtering it.
"""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from parbench import layout_key as lk
from parbench import time_charts
from parbench.figure_basics import empty_figure, ok_runs  # noqa: F401 - part of this module's interface
from parbench.metrics.breakdown import TERMS
from parbench.metrics.categories import CATEGORIES

MIB = 2**20

STRATEGY_ORDER = ("single", "ddp", "zero1", "zero2", "fsdp", "tp", "pipeline", "hybrid", "ps")

# plotly's D3 palette in STRATEGY_ORDER, grey for the single-process reference; fixed so a strategy
# keeps its colour whichever subset of strategies a filter leaves.
STRATEGY_COLORS: dict[str, str] = dict(zip(STRATEGY_ORDER, ("#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                            "#9467bd", "#8c564b", "#e377c2", "#17becf")))
UNKNOWN_COLOR = "#bcbd22"
# Shades of a strategy's colour for its 2nd, 3rd ... layout: + lighter (towards white), - darker.
SHADES = (0.0, -0.35, 0.45, -0.6, 0.7, -0.15, 0.25)
# Marker symbols by world size (told apart without relying on colour).
WORLD_SYMBOLS = {1: "circle", 2: "square", 4: "diamond", 8: "triangle-up", 16: "star", 32: "hexagon", 64: "cross"}

MEMORY_PARTS = {  # column -> legend name
    "mem_param_bytes": "parameters",
    "mem_grad_bytes": "gradients",
    "mem_optim_bytes": "optimizer state",
    "mem_activation_bytes": "activations",
}
MEMORY_PATTERNS = {"mem_param_bytes": "", "mem_grad_bytes": "/", "mem_optim_bytes": "x", "mem_activation_bytes": "."}

COMM_PARTS = {f"comm_{c}_bytes_per_step": c for c in CATEGORIES}  # column -> legend name
COMM_PATTERNS = dict(zip(COMM_PARTS, (".", "", "/")))
OP_PATTERNS = ("", "/", "x", ".", "\\", "-", "|", "+")

# A multi-rank run agrees with the single-process reference when every step's loss is within this.
LOSS_TOLERANCE = 1e-5

# How many runs a per-run chart draws by default (the newest ones): thousands of boxes or loss
# curves are unreadable and slow to render.
MAX_RUNS_PER_CHART = 40

# Metrics of the Compare view and the Overview table: column -> (label, scale, lower_is_better).
HEADLINE_METRICS: dict[str, tuple[str, float, bool]] = {
    "throughput_samples_per_s": ("throughput (samples/s)", 1.0, False),
    "step_time_s_median": ("step time median (ms)", 1e3, True),
    "step_time_s_iqr": ("step time IQR (ms)", 1e3, True),
    "exposed_comm_time_s": ("exposed comm time (ms)", 1e3, True),
    # the step-time breakdown of the traced steps (busiest rank): compute, exposed comm: data, ...
    "traced_step_time_s": ("traced step (ms)", 1e3, True),
    **{t: (f"{t[5:-2].replace('comm_exposed_', 'exposed comm: ')} (ms/step)", 1e3, True) for t in TERMS},
    "bubble_fraction": ("bubble fraction (mean over ranks)", 1.0, True),
    "achieved_flops_per_s_per_rank": ("achieved (GFLOP/s per rank)", 1e-9, False),
    "peak_rss_bytes": ("peak RSS (MiB)", 1 / MIB, True),
    **{c: (f"{name} (MiB)", 1 / MIB, True) for c, name in MEMORY_PARTS.items()},
    **{c: (f"comm {name} (MiB/step)", 1 / MIB, True) for c, name in COMM_PARTS.items()},
    "comm_total_bytes_per_step": ("comm total (MiB/step)", 1 / MIB, True),
    "comm_wire_bytes_per_step": ("comm wire (MiB/step)", 1 / MIB, True),
    "os_write_bytes_per_step": ("OS-measured sent (MiB/step)", 1 / MIB, True),
    "loss_max_abs_diff_vs_reference": ("max |loss diff| vs single", 1.0, True),
}

LABEL_COLUMNS = ("workload_label", "layout_label", "config_label", "run_label", "series_label", "short_id")


def strategy_color(strategy: str) -> str:
    return STRATEGY_COLORS.get(strategy, UNKNOWN_COLOR)


def shade(color: str, amount: float) -> str:
    """``color`` mixed towards white (amount > 0) or black (amount < 0) by |amount|."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    mixed = [round(c + (target - c) * abs(amount)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in mixed)


# --- preparing the frame ------------------------------------------------------------------


def prepare(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the key columns (``workload_key``, ``layout_key``, ``group_key``, ``series_key``) and the
    labels (``relabel``); sort by strategy order, world size, creation time."""
    df = frame.copy()
    if df.empty:
        for col in ("workload_key", "layout_key", "group_key", "series_key", *LABEL_COLUMNS):
            df[col] = pd.Series(dtype=str)
        return df
    layout = lk.part_frame(df, lk.LAYOUT_PARTS)
    series = _series_parts(df, layout)
    workload = lk.part_frame(df, lk.WORKLOAD_PARTS)
    source = df["source"].astype(str) if "source" in df.columns else pd.Series(".", index=df.index)
    df = df.assign(workload_key=lk.key(workload), layout_key=lk.key(layout),
                   workload_label=lk.labels(workload, lk.WORKLOAD_PARTS), source=source)
    df["group_key"] = df["workload_key"] + "#" + df["layout_key"] + "#" + source
    df["series_key"] = df["workload_key"] + "#" + lk.key(series) + "#" + source
    for part in lk.LAYOUT_PARTS:
        df[f"key.{part.name}"] = layout[part.name]
    for name in series.columns:
        df[f"series.{name}"] = series[name]
    rank = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    order = df["strategy"].map(lambda s: rank.get(s, len(rank)))
    df = df.assign(_order=order).sort_values(["_order", "world_size", "layout_key", "created_at"], kind="stable") \
           .drop(columns="_order").reset_index(drop=True)
    return relabel(df)


def _series_parts(df: pd.DataFrame, layout: pd.DataFrame) -> pd.DataFrame:
    """The layout key without what grows with the world size: one scaling line per series (a
    hybrid keeps its tp and pp and scales dp; other strategies derive the mesh from W)."""
    series = layout.drop(columns=["world_size"])
    hybrid = df["strategy"] == "hybrid"
    tp = pd.to_numeric(df.get("tp"), errors="coerce").astype("Int64")
    pp = pd.to_numeric(df.get("pp"), errors="coerce").astype("Int64")
    series.loc[hybrid, "mesh"] = [f"tp{a}·pp{b}" for a, b in zip(tp[hybrid], pp[hybrid])]
    return series


def source_name(source: str) -> str:
    """A results-directory source for people: '.' is the directory itself."""
    return "this directory" if source == "." else str(source)


def relabel(df: pd.DataFrame) -> pd.DataFrame:
    """Labels naming only the key parts that differ among these rows (call after filtering)."""
    if df.empty:
        return df
    layout = df[[f"key.{p.name}" for p in lk.LAYOUT_PARTS]].set_axis([p.name for p in lk.LAYOUT_PARTS], axis=1)
    series_spec = tuple(p for p in lk.LAYOUT_PARTS if p.name != "world_size")
    series = df[[f"series.{p.name}" for p in series_spec]].set_axis([p.name for p in series_spec], axis=1)
    many = df["source"].nunique() > 1  # name the source only when several are shown
    suffix = (" [" + df["source"].map(source_name) + "]") if many else pd.Series("", index=df.index)
    out = df.copy()
    out["layout_label"] = lk.labels(layout, lk.LAYOUT_PARTS) + suffix
    out["series_label"] = lk.labels(series, series_spec) + suffix
    out["config_label"] = out["layout_label"] + " · " + out["workload_label"]
    out["short_id"] = lk.short_id(out["run_id"])
    out["run_label"] = out["layout_label"] + " · " + out["short_id"]
    return out


def newest_source(df: pd.DataFrame) -> str | None:
    """The source whose newest record is the most recent (the user's latest measurements)."""
    if df.empty:
        return None
    return str(df.groupby("source")["created_at"].max().sort_values().index[-1])


def newest(df: pd.DataFrame, n: int = MAX_RUNS_PER_CHART) -> pd.DataFrame:
    """The n newest runs, kept in the frame's (strategy) order."""
    if len(df) <= n:
        return df
    keep = df.sort_values("created_at").index[-n:]
    return df.loc[df.index.isin(keep)]


def workloads(df: pd.DataFrame) -> list[str]:
    """Workload labels in first-seen order (the facets of every chart)."""
    return list(dict.fromkeys(df["workload_label"])) if not df.empty else []


def layout_colors(df: pd.DataFrame, by: str = "layout_key") -> dict[str, str]:
    """Colour per ``by`` value: its strategy's colour, shaded for the strategy's 2nd, 3rd ... value."""
    firsts = df.drop_duplicates(by)[[by, "strategy"]]
    colors, seen = {}, {}
    for value, strategy in zip(firsts[by], firsts["strategy"]):
        i = seen.get(strategy, 0)
        seen[strategy] = i + 1
        colors[value] = shade(strategy_color(strategy), SHADES[i % len(SHADES)])
    return colors


# --- grouping: medians over the repeats of one layout ---------------------------------------


GROUP_COLUMNS = ("group_key", "series_key", "workload_key", "workload_label", "layout_key", "layout_label",
                 "series_label", "config_label", "strategy", "world_size", "source")


def group_medians(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """One row per layout group (workload, layout key, source) of the ok runs: the median of each
    column over its repeats, their min and max (``<col>_min``, ``<col>_max``) and ``repeats``."""
    ok = ok_runs(df)
    cols = [c for c in columns if c in ok.columns]
    if ok.empty:
        return pd.DataFrame(columns=[*GROUP_COLUMNS, *cols, "repeats"])
    values = ok[cols].apply(pd.to_numeric, errors="coerce").assign(group_key=ok["group_key"])
    g = values.groupby("group_key", sort=False)[cols]
    stats = g.median().join(g.min().add_suffix("_min")).join(g.max().add_suffix("_max"))
    stats["repeats"] = ok.groupby("group_key", sort=False).size()
    firsts = ok.drop_duplicates("group_key").set_index("group_key")[list(GROUP_COLUMNS[1:])]
    return firsts.join(stats).reset_index()


def _facets(df: pd.DataFrame, *, title: str, rows_per_facet: list[int] | None = None,
            horizontal: bool = False, height: int = 520) -> tuple[go.Figure, dict[str, tuple[int, int]]]:
    """One subplot per workload: side by side (line charts) or stacked (horizontal bars, each as
    tall as its rows, 110 px apart for the axis and the next title). Returns the figure and
    workload -> (row, col)."""
    names = workloads(df)
    if horizontal:
        heights = rows_per_facet or [1] * len(names)
        spacing = min(110 / max(height - 170, 1), 0.9 / max(len(names) - 1, 1)) if len(names) > 1 else 0.0
        fig = make_subplots(rows=len(names), cols=1, subplot_titles=names, row_heights=heights,
                            vertical_spacing=spacing)
        cells = {w: (i + 1, 1) for i, w in enumerate(names)}
    else:
        cols = min(len(names), 2)
        rows = math.ceil(len(names) / cols)
        fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, horizontal_spacing=0.08,
                            vertical_spacing=0.15)
        cells = {w: (i // cols + 1, i % cols + 1) for i, w in enumerate(names)}
    # layout.meta names each facet's axes, so a reader (or a test) can tell which workload a trace shows
    axes = {w: fig.get_subplot(r, c).xaxis.plotly_name.replace("axis", "") for w, (r, c) in cells.items()}
    fig.update_layout(meta={"facets": axes})
    # the legend on the right, outside every facet: it never covers a subplot title or a bar
    fig.update_layout(title=title, legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top"),
                      margin=dict(t=90, r=20))
    return fig, cells


def _axis_titles(fig: go.Figure, cells: dict, *, x: str, y: str) -> None:
    """Every facet names its units (the first facet's axes are ``xaxis``/``yaxis``)."""
    for row, col in cells.values():
        fig.update_xaxes(title_text=x, row=row, col=col)
        fig.update_yaxes(title_text=y, row=row, col=col)


def _log_if_wide(fig: go.Figure, values: pd.Series, row: int, col: int) -> None:
    """A log axis when the values span more than 10x, so small and large layouts both read."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[v > 0]
    if len(v) and v.max() / v.min() > 10:
        fig.update_yaxes(type="log", row=row, col=col)


def _world_axis(fig: go.Figure, sizes: pd.Series, row: int, col: int) -> None:
    """Log2 x axis with a tick at every measured world size, padded by half an octave."""
    ws = sorted({int(w) for w in sizes.dropna()})
    if not ws:
        return
    lo, hi = math.log10(ws[0]) - 0.15, math.log10(ws[-1]) + 0.15
    fig.update_xaxes(type="log", tickvals=ws, ticktext=[str(w) for w in ws], range=[lo, hi], row=row, col=col)


# --- overview -----------------------------------------------------------------------------

OVERVIEW_COLUMNS: dict[str, str] = {  # column -> header; configuration (the layout key) first
    "short_id": "run",
    "source": "source",
    "workload_label": "workload",
    "strategy": "strategy",
    "world_size": "W",
    "key.mesh": "mesh",
    "key.schedule": "schedule",
    "key.micro_batches": "micro-batches",
    "key.virtual_stages": "virtual stages",
    "key.dp_mode": "dp mode",
    "key.servers": "servers",
    "backend": "backend",
    "oversubscribed": "oversubscribed",
    "data_mode": "data mode",
    "status": "status",
    "throughput_samples_per_s": "samples/s",
    "step_time_ms_median": "step ms (median)",
    "mem_total_MiB": "tensors MiB/rank",
    "peak_rss_MiB": "peak RSS MiB",
    "mfu_pct": "MFU %",
    "gpu_peak_MiB": "GPU alloc peak MiB",
    "gpu_used_pct": "GPU used % of device",
    "comm_MiB_per_step": "comm MiB/step/rank",
    "loss_max_abs_diff_vs_reference": "max |loss diff|",
    "error": "error",
    "created_at": "created",
    "run_id": "run id",
}


def overview_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run: configuration first (the layout key), then metrics in human units
    (ms, MiB), the error of a failed run, then the full run id."""
    out = df.assign(
        step_time_ms_median=pd.to_numeric(df["step_time_s_median"], errors="coerce") * 1e3,
        mem_total_MiB=sum(pd.to_numeric(df[c], errors="coerce") for c in MEMORY_PARTS) / MIB,
        peak_rss_MiB=pd.to_numeric(df["peak_rss_bytes"], errors="coerce") / MIB,
        mfu_pct=_numeric(df, "mfu") * 100,
        gpu_peak_MiB=_numeric(df, "cuda_allocated_peak_bytes") / MIB,
        gpu_used_pct=_numeric(df, "cuda_device_used_bytes") / _numeric(df, "cuda_device_total_bytes") * 100,
        comm_MiB_per_step=pd.to_numeric(df["comm_total_bytes_per_step"], errors="coerce") / MIB,
        source=df["source"].map(source_name))
    cols = [c for c in OVERVIEW_COLUMNS if c in out.columns]
    out = out.assign(**{c: out[c].fillna("") for c in cols if c.startswith("key.") or c == "error"})
    shown = out[cols].rename(columns=OVERVIEW_COLUMNS)
    empty = [c for c in cols if (c.startswith("key.") and (out[c] == "").all())
             or (c in OPTIONAL_COLUMNS and out[c].isna().all())]  # CPU-only runs: no MFU, no GPU memory
    return shown.drop(columns=[OVERVIEW_COLUMNS[c] for c in empty])


OPTIONAL_COLUMNS = ("mfu_pct", "gpu_peak_MiB", "gpu_used_pct", "oversubscribed")
"""Columns left out of the overview where no run shown has them (GPU figures; records older than the field)."""


def _numeric(df: pd.DataFrame, col: str) -> pd.Series:
    """A numeric column, NaN where the record has none (older records, CPU runs)."""
    return pd.to_numeric(df[col], errors="coerce") if col in df.columns else pd.Series(float("nan"), index=df.index)


GROUP_BY_CHOICES: dict[str, str] = {  # Overview "group by": column -> label (the table's header, W spelled out)
    "group_key": "layout (repeats of one layout)",
    **{c: "world size" if c == "world_size" else OVERVIEW_COLUMNS[c]
       for c in ("workload_label", "strategy", "world_size", "key.mesh", "key.schedule", "key.micro_batches",
                 "key.dp_mode", "backend", "data_mode", "source", "status")},
}


def grouped_table(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """Runs per value of ``by`` (ok and failed), and the medians of the headline numbers over the ok
    runs. Grouping by anything coarser than the layout pools different layouts: the medians then
    summarise, they do not measure one layout."""
    key = df[by].astype(object).where(df[by].notna(), "-")
    label = df["config_label"] if by == "group_key" else key
    table = overview_table(df).assign(_key=key.values, _label=label.values, _ok=(df["status"] == "ok").values)
    numeric = ["samples/s", "step ms (median)", "tensors MiB/rank", "peak RSS MiB", "comm MiB/step/rank"]
    ok = table[table["_ok"]]
    med = ok.groupby("_key", sort=False)[[c for c in numeric if c in ok.columns]].median()
    counts = table.groupby("_key", sort=False).agg(group=("_label", "first"), runs=("_ok", "size"), ok=("_ok", "sum"))
    return counts.join(med).reset_index(drop=True)


# --- landing: ranking per workload ----------------------------------------------------------

RANK_COLUMNS = ["throughput_samples_per_s", "step_time_s_median", "peak_rss_bytes", "comm_total_bytes_per_step",
                *MEMORY_PARTS]


def ranking(df: pd.DataFrame, budget_fraction: float = 1.0) -> pd.DataFrame:
    """Per workload, the layouts ranked by median throughput, with memory per rank (tensors of the
    busiest rank: parameters + gradients + optimizer + activations) and bytes sent per rank per step.

    ``fits``: memory per rank below ``budget_fraction`` x the single-process run's memory of the
    same workload (the question model parallelism answers: what trains a model that does not fit
    one process?); with no world-size-1 run every layout fits. ``fastest_fit`` marks the first
    layout that fits in each workload."""
    groups = group_medians(df, RANK_COLUMNS)
    if groups.empty:
        return groups.assign(rank=[], memory_bytes=[], budget_bytes=[], fits=[], fastest_fit=[])
    groups["memory_bytes"] = groups[list(MEMORY_PARTS)].sum(axis=1)
    single = groups[groups["world_size"] == 1].groupby("workload_key")["memory_bytes"].median()
    groups["budget_bytes"] = groups["workload_key"].map(single) * budget_fraction
    groups["fits"] = groups["budget_bytes"].isna() | (groups["memory_bytes"] < groups["budget_bytes"])
    groups = groups.sort_values(["workload_key", "throughput_samples_per_s"], ascending=[True, False], kind="stable")
    groups["rank"] = groups.groupby("workload_key").cumcount() + 1
    first_fit = groups[groups["fits"]].groupby("workload_key").head(1).index
    groups["fastest_fit"] = groups.index.isin(first_fit)
    order = {w: i for i, w in enumerate(workloads(df))}
    return groups.sort_values(["workload_label", "rank"], key=lambda s: s.map(order) if s.name == "workload_label" else s)


def pareto_mask(memory: pd.Series, throughput: pd.Series) -> pd.Series:
    """True where no other point has less-or-equal memory and higher throughput (the measured front)."""
    order = memory.sort_values(kind="stable").index
    best, keep = -math.inf, {}
    for i in order:
        keep[i] = throughput[i] > best
        best = max(best, throughput[i])
    return pd.Series(keep).reindex(memory.index)


def pareto_chart(df: pd.DataFrame) -> go.Figure:
    """Throughput vs memory per rank, one point per layout (median over repeats), per workload;
    the Pareto front (nothing both leaner and faster) joined by a line."""
    groups = ranking(df)
    if groups.empty:
        return empty_figure("Throughput vs memory per rank", "no successful runs")
    fig, cells = _facets(groups, title="Throughput vs memory per rank (each point: one layout; line: Pareto front)")
    colors = layout_colors(groups)
    shown = set()
    for wl, sub in groups.groupby("workload_label", sort=False):
        row, col = cells[wl]
        front = sub[pareto_mask(sub["memory_bytes"], sub["throughput_samples_per_s"])].sort_values("memory_bytes")
        fig.add_trace(go.Scatter(x=front["memory_bytes"] / MIB, y=front["throughput_samples_per_s"], mode="lines",
                                 line=dict(color="black", dash="dot"), name="Pareto front", legendgroup="front",
                                 showlegend="front" not in shown, hoverinfo="skip"), row=row, col=col)
        shown.add("front")
        for _, g in sub.iterrows():
            fig.add_trace(go.Scatter(
                x=[g["memory_bytes"] / MIB], y=[g["throughput_samples_per_s"]], mode="markers",
                name=g["layout_label"], legendgroup=g["layout_label"], showlegend=g["layout_label"] not in shown,
                marker=dict(color=colors[g["layout_key"]], size=12, symbol=_symbol(g["world_size"]),
                            line=dict(color="black", width=1)),
                hovertemplate=f"{g['layout_label']}: %{{y:.4g}} samples/s, %{{x:.3f}} MiB<extra>{wl}</extra>"),
                row=row, col=col)
            shown.add(g["layout_label"])
    _axis_titles(fig, cells, x="memory per rank, tensors (MiB)", y="throughput (samples/s)")
    return fig.update_layout(height=520, legend_title="layout")


def _symbol(world_size: object) -> str:
    try:
        return WORLD_SYMBOLS.get(int(world_size), "circle")
    except (TypeError, ValueError):
        return "circle"


# --- scaling ------------------------------------------------------------------------------


def scaling_points(df: pd.DataFrame) -> pd.DataFrame:
    """Median, min and max throughput over the repeats of each layout, and the strong-scaling
    efficiency E(W) = T(W) / (W * T(1)), T(1) = median throughput of the world-size-1 runs of the
    same workload and source (normally ``single``)."""
    pts = group_medians(df, ["throughput_samples_per_s"]).rename(columns={
        "throughput_samples_per_s": "median", "throughput_samples_per_s_min": "min",
        "throughput_samples_per_s_max": "max"})
    if pts.empty:
        return pts.assign(efficiency=[], efficiency_min=[], efficiency_max=[])
    base_key = pts["workload_key"] + "#" + pts["source"]
    t1 = pts[pts["world_size"] == 1].assign(_b=base_key).groupby("_b")["median"].median()
    linear = base_key.map(t1) * pts["world_size"]
    return pts.assign(efficiency=pts["median"] / linear, efficiency_min=pts["min"] / linear,
                      efficiency_max=pts["max"] / linear)


def _scaling_lines(pts: pd.DataFrame) -> pd.DataFrame:
    """Each series with the world-size-1 point of its workload and source prepended, so every line
    starts at the reference it is measured against (a directory of world-size-1 runs only: points)."""
    base, multi = pts[pts["world_size"] == 1], pts[pts["world_size"] > 1]
    if multi.empty:
        return base
    refs = base.drop_duplicates(["workload_key", "source"]).set_index(["workload_key", "source"], drop=False)
    series = multi.drop_duplicates("series_key").set_index("series_key")
    pieces = [refs.loc[[(w, src)]].assign(series_key=key)
              for key, w, src in zip(series.index, series["workload_key"], series["source"]) if (w, src) in refs.index]
    lines = pd.concat([*pieces, multi], ignore_index=True)
    return lines.assign(series_label=lines["series_key"].map(series["series_label"]),
                        strategy=lines["series_key"].map(series["strategy"]))


def _scaling_figure(pts: pd.DataFrame, y: str, lo: str, hi: str, title: str, yaxis: str,
                    runs: pd.DataFrame) -> go.Figure:
    lines = _scaling_lines(pts)
    fig, cells = _facets(pts, title=title)
    colors = layout_colors(lines, by="series_key")
    shown = set()
    for key, sub in lines.groupby("series_key", sort=False):
        sub = sub.sort_values("world_size")
        label, wl = sub["series_label"].iloc[-1], sub["workload_label"].iloc[-1]
        fig.add_trace(go.Scatter(
            x=sub["world_size"], y=sub[y], name=label, mode="lines+markers", legendgroup=label,
            showlegend=label not in shown, line=dict(color=colors[key]),
            marker=dict(symbol=[_symbol(w) for w in sub["world_size"]], size=9),
            error_y=dict(type="data", symmetric=False, array=sub[hi] - sub[y], arrayminus=sub[y] - sub[lo]),
            customdata=sub[["repeats", "layout_label"]],
            hovertemplate="%{customdata[1]}: %{y:.3g} (%{customdata[0]} repeats)<extra>" + wl + "</extra>"),
            row=cells[wl][0], col=cells[wl][1])
        shown.add(label)
    for wl, (row, col) in cells.items():
        sub = pts[pts["workload_label"] == wl]
        _world_axis(fig, sub["world_size"], row, col)
        _log_if_wide(fig, pd.concat([sub[lo], sub[hi]]), row, col)
    _axis_titles(fig, cells, x="world size (ranks)", y=yaxis)
    _shade_oversubscribed(fig, runs, cells)
    return fig.update_layout(legend_title="layout", height=520)


def oversubscribed_from(df: pd.DataFrame) -> dict[str, int]:
    """Per workload panel, the smallest world size whose ok runs recorded ``oversubscribed`` (their ranks x threads
    outnumbered the host's CPUs); panels without such a run are left out."""
    ok = ok_runs(df)
    if "oversubscribed" not in ok.columns:
        return {}
    over = ok[ok["oversubscribed"].eq(True)]
    return {str(wl): int(g["world_size"].min()) for wl, g in over.groupby("workload_label")}


def _shade_oversubscribed(fig: go.Figure, df: pd.DataFrame, cells: dict[str, tuple[int, int]]) -> None:
    """A grey band over the world sizes whose runs were oversubscribed: from halfway (on the log axis) between the
    largest world size that was not and the first that was, to the right edge."""
    ok = ok_runs(df)
    for wl, first in oversubscribed_from(df).items():
        if wl not in cells:
            continue
        sizes = pd.to_numeric(ok.loc[ok["workload_label"] == wl, "world_size"], errors="coerce")
        below = sizes[sizes < first]
        x0 = math.sqrt(below.max() * first) if len(below) else first / math.sqrt(2)
        row, col = cells[wl]
        fig.add_vrect(x0=x0, x1=sizes.max() * 2, row=row, col=col, fillcolor="gray", opacity=0.12, line_width=0)
        # an annotation on a log axis is placed by the logarithm of its x (a shape by x itself)
        fig.add_annotation(x=math.log10(x0), y=0, yref="y domain", xanchor="left", yanchor="bottom", showarrow=False,
                           text="oversubscribed", font={"size": 11, "color": "gray"}, row=row, col=col)


def scaling_throughput(df: pd.DataFrame) -> go.Figure:
    """Throughput vs world size per layout series; error bars span min..max over repeats. World sizes whose runs
    were oversubscribed (``oversubscribed_from``) sit in a grey band: their ranks took turns on the cores."""
    pts = scaling_points(df)
    if pts.empty:
        return empty_figure("Throughput vs world size", "no successful runs")
    return _scaling_figure(pts, "median", "min", "max", "Throughput vs world size (median, bars: min-max over repeats)",
                           "throughput (samples/s)", df)


def scaling_efficiency(df: pd.DataFrame) -> go.Figure:
    """E(W) = T(W) / (W * T(1)); 1.0 is perfect linear scaling."""
    pts = scaling_points(df).dropna(subset=["efficiency"])
    if pts.empty:
        return empty_figure("Scaling efficiency", "needs a world-size-1 run of the same workload")
    fig = _scaling_figure(pts, "efficiency", "efficiency_min", "efficiency_max",
                          "Scaling efficiency T(W) / (W x T(1))", "scaling efficiency (fraction of linear)", df)
    fig.add_hline(y=1.0, line_dash="dot", line_color="black", annotation_text="linear")
    return fig


# --- memory and communication (horizontal stacked bars, one facet per workload) -------------


def _busiest_rank_parts(row: dict, parts: dict[str, str]) -> dict[str, float]:
    """The parts of the rank whose sum is largest (from per_rank), else the record's max-over-ranks."""
    ranks = row.get("per_rank")
    if isinstance(ranks, list) and ranks:
        top = max(ranks, key=lambda r: sum(float(r.get(c) or 0) for c in parts))
        return {c: float(top.get(c) or 0) for c in parts}
    return {c: float(row.get(c) or 0) if not pd.isna(row.get(c)) else 0.0 for c in parts}


def stacked_groups(df: pd.DataFrame, parts: dict[str, str], extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """Median of each part (busiest rank) over the repeats of each layout; ``extra`` columns as well."""
    ok = ok_runs(df)
    if ok.empty:
        return pd.DataFrame(columns=[*GROUP_COLUMNS, *parts, *extra])
    # plain dicts, not iterrows: thousands of runs stay well under a second
    records = ok[["group_key", "per_rank", *parts, *[c for c in extra if c in ok.columns]]].to_dict("records")
    rows = [{"group_key": r["group_key"], **_busiest_rank_parts(r, parts),
             **{c: r.get(c) for c in extra}} for r in records]
    med = pd.DataFrame(rows).apply(lambda s: pd.to_numeric(s, errors="coerce") if s.name != "group_key" else s)
    med = med.groupby("group_key", sort=False).median()
    firsts = ok.drop_duplicates("group_key").set_index("group_key")[list(GROUP_COLUMNS[1:])]
    return firsts.join(med).reset_index()


def _stacked_bars(groups: pd.DataFrame, parts: dict[str, str], patterns: dict[str, str], *, title: str,
                  xaxis: str, label: str = "layout_label") -> tuple[go.Figure, dict]:
    """Horizontal bars, one per layout (its colour), stacked by part (pattern), a facet per workload.
    Every part has a legend entry (a grey swatch with its pattern), even a part that is zero."""
    sizes = groups.groupby("workload_label", sort=False).size()
    height = max(320, 26 * len(groups) + 110 * len(sizes) + 170)  # 26 px a bar, 110 a facet (axis, title)
    fig, cells = _facets(groups, title=title, rows_per_facet=[int(sizes[w]) for w in workloads(groups)],
                         horizontal=True, height=height)
    colors = layout_colors(groups)
    for wl, sub in groups.groupby("workload_label", sort=False):
        row, col = cells[wl]
        bar_colors = [colors[k] for k in sub["layout_key"]]
        for c, name in parts.items():
            # "replace" with a per-bar background: plotly's "overlay" mode warns "Invalid color
            # specifier" in the browser console when marker.color is an array
            pattern = dict(shape=patterns[c], fillmode="replace", bgcolor=bar_colors, fgcolor="white", solidity=0.45)
            fig.add_trace(go.Bar(y=sub[label], x=sub[c] / MIB, orientation="h", name=name, legendgroup=name,
                                 showlegend=False, marker=dict(color=bar_colors, pattern=pattern,
                                                               line=dict(color="black", width=0.5)),
                                 hovertemplate=f"{name}: %{{x:.4f}} MiB<extra>%{{y}}</extra>"), row=row, col=col)
        fig.update_yaxes(autorange="reversed", type="category", row=row, col=col)
    for c, name in parts.items():  # legend-only twins: the legend explains the pattern, not a colour
        pattern = dict(shape=patterns[c], fillmode="replace", bgcolor="#555555", fgcolor="white", solidity=0.45)
        fig.add_trace(go.Bar(y=[None], x=[None], orientation="h", name=name, legendgroup=name,
                             marker=dict(color="#555555", pattern=pattern)), row=1, col=1)
    _axis_titles(fig, cells, x=xaxis, y="layout")
    fig.update_layout(barmode="stack", legend_title="part (pattern)", height=height)
    return fig, cells


def memory_stacked(df: pd.DataFrame) -> go.Figure:
    """Tensor memory of the busiest rank, stacked parameters / gradients / optimizer / activations,
    with the process's peak RSS (CPU) or CUDA reserved peak (GPU) written beside each bar."""
    extra = ("peak_rss_bytes", "cuda_reserved_peak_bytes", "cuda_device_total_bytes")
    groups = stacked_groups(df, MEMORY_PARTS, extra)
    if groups.empty:
        return empty_figure("Memory per rank", "no successful runs")
    fig, cells = _stacked_bars(groups, MEMORY_PARTS, MEMORY_PATTERNS, xaxis="memory per rank (MiB)",
                               title="Memory of the busiest rank (median over repeats)")
    total = groups[list(MEMORY_PARTS)].sum(axis=1) / MIB
    context = [_memory_context(r) for r in groups.to_dict("records")]
    for wl, sub in groups.assign(_total=total, _context=context).groupby("workload_label", sort=False):
        fig.add_trace(go.Scatter(y=sub["layout_label"], x=sub["_total"], mode="text", text=sub["_context"],
                                 textposition="middle right", name="process peak (text)", legendgroup="context",
                                 showlegend=wl == workloads(groups)[0], hoverinfo="skip"),
                      row=cells[wl][0], col=cells[wl][1])
        fig.update_xaxes(range=[0, float(sub["_total"].max()) * 1.45 or 1], row=cells[wl][0], col=cells[wl][1])
    return fig


def _memory_context(row: dict) -> str:
    """What the process really held: CUDA reserved peak on a GPU, else peak RSS (mostly the torch runtime)."""
    cuda, total = row.get("cuda_reserved_peak_bytes"), row.get("cuda_device_total_bytes")
    if cuda is not None and not pd.isna(cuda):
        of = f" of {total / 2**30:,.1f} GiB" if total is not None and not pd.isna(total) else ""
        return f"  CUDA reserved {cuda / MIB:,.0f} MiB{of}"
    rss = row.get("peak_rss_bytes")
    return "" if rss is None or pd.isna(rss) else f"  RSS {rss / MIB:,.0f} MiB"


def memory_per_rank(run: pd.Series) -> go.Figure:
    """Every rank of one run (pipeline stages hold different layers), stacked by part."""
    ranks = run.get("per_rank")
    if not isinstance(ranks, list) or not ranks:
        return empty_figure("Memory per rank", "this record has no per-rank figures")
    frame = pd.DataFrame(ranks)
    groups = pd.DataFrame({
        "workload_label": run["workload_label"], "strategy": run["strategy"],
        "layout_key": "run",  # one colour: the run's strategy
        "rank_label": [f"rank {r['rank']} ({r.get('role', '')})" for r in ranks],
        **{c: frame.get(c, pd.Series([0] * len(frame))).fillna(0).astype(float) for c in MEMORY_PARTS}})
    fig, _ = _stacked_bars(groups, MEMORY_PARTS, MEMORY_PATTERNS, xaxis="memory (MiB)", label="rank_label",
                           title=f"Memory per rank: {run['run_label']}")
    return fig.update_yaxes(title_text="rank")


def comm_stacked(df: pd.DataFrame) -> go.Figure:
    """Bytes a rank sends per optimizer step (busiest rank), stacked data / parameter / intermediate."""
    groups = stacked_groups(df, COMM_PARTS)
    if groups.empty:
        return empty_figure("Communication per rank per step", "no successful runs")
    fig, _ = _stacked_bars(groups, COMM_PARTS, COMM_PATTERNS, xaxis="sent per rank (MiB/step)",
                           title="Communication per rank per step by category (busiest rank)")
    return fig


def comm_ops_frame(df: pd.DataFrame) -> pd.DataFrame:
    """One column per op/category of ``comm_ops`` (sent bytes per step), median over the repeats of a layout."""
    ok = ok_runs(df)
    rows = []
    for r in ok[["group_key", "comm_ops"]].to_dict("records") if not ok.empty else ():
        ops = r.get("comm_ops")
        rows.append({"group_key": r["group_key"], **{k: float(v.get("sent_bytes") or 0)
                                                       for k, v in (ops.items() if isinstance(ops, dict) else ())}})
    frame = pd.DataFrame(rows)
    if frame.empty or len(frame.columns) == 1:
        return pd.DataFrame(columns=list(GROUP_COLUMNS))
    med = frame.groupby("group_key", sort=False).median()
    firsts = ok.drop_duplicates("group_key").set_index("group_key")[list(GROUP_COLUMNS[1:])]
    return firsts.join(med.fillna(0)).reset_index()


def comm_ops_breakdown(df: pd.DataFrame) -> go.Figure:
    """Sent bytes per step per collective op and category, a bar per layout stacked by op (pattern)."""
    ops = comm_ops_frame(df)
    names = [c for c in ops.columns if c not in GROUP_COLUMNS]
    if ops.empty or not names:
        return empty_figure("Communication per op", "no communication recorded")
    parts = {n: n for n in sorted(names)}
    patterns = {n: OP_PATTERNS[i % len(OP_PATTERNS)] for i, n in enumerate(parts)}
    fig, _ = _stacked_bars(ops, parts, patterns, xaxis="sent per rank (MiB/step)",
                           title="Communication per op / category (busiest rank)")
    return fig.update_layout(legend_title="op / category (pattern)")


def comm_modeled_vs_os(df: pd.DataFrame) -> go.Figure:
    """Modeled bytes (nccl-tests convention, and what gloo really sends) vs /proc/self/io wchar."""
    ok = ok_runs(df).dropna(subset=["os_write_bytes_per_step"])
    if ok.empty:
        return empty_figure("Modeled vs OS-measured bytes", "no OS-measured bytes in these runs (null under nccl: "
                            "NVLink, shared memory and InfiniBand make no write syscalls)")
    fig = go.Figure()
    colors = layout_colors(ok)
    for strategy, sub in ok.groupby("strategy", sort=False):
        for col, symbol, what in (("comm_total_bytes_per_step", "circle-open", "modeled (convention)"),
                                  ("comm_wire_bytes_per_step", "circle", "modeled wire")):
            fig.add_trace(go.Scatter(
                x=sub[col].astype(float) / MIB, y=sub["os_write_bytes_per_step"].astype(float) / MIB,
                mode="markers", name=f"{strategy}: {what}", legendgroup=strategy,
                text=sub["run_label"] + " · " + sub["workload_label"],
                marker=dict(color=[colors[k] for k in sub["layout_key"]], symbol=symbol, size=10,
                            line=dict(color=strategy_color(strategy), width=1.5)),
                hovertemplate="%{text}: modeled %{x:.3f} MiB, OS %{y:.3f} MiB<extra></extra>"))
    top = float(max(ok["os_write_bytes_per_step"].astype(float).max(),
                    ok["comm_wire_bytes_per_step"].astype(float).max(skipna=True) or 0)) / MIB
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="OS = modeled",
                             line=dict(color="black", dash="dot")))
    fig.update_layout(title="Modeled vs OS-measured bytes per rank per step (busiest rank)",
                      xaxis_title="modeled sent (MiB/step)", yaxis_title="OS-measured written, wchar (MiB/step)")
    return fig


# --- step time ----------------------------------------------------------------------------


def step_time_box(df: pd.DataFrame, limit: int = MAX_RUNS_PER_CHART) -> go.Figure:
    """Every timed step of each run (the newest ``limit``), so noise is visible; a facet per workload."""
    runs = newest(ok_runs(df), limit)
    runs = runs[runs["step_times_s"].map(lambda t: isinstance(t, list) and len(t) > 0)] if not runs.empty else runs
    if runs.empty:
        return empty_figure("Step time distribution", "no step times in these runs")
    fig, cells = _facets(runs, title=f"Step time per run, every timed step ({len(runs)} runs)")
    colors = layout_colors(runs)
    for r in runs.to_dict("records"):
        row, col = cells[r["workload_label"]]
        fig.add_trace(go.Box(y=[t * 1e3 for t in r["step_times_s"]], name=r["run_label"], legendgroup=r["strategy"],
                             marker_color=colors[r["layout_key"]], boxpoints="all", jitter=0.4, pointpos=0,
                             showlegend=False, hovertemplate="%{y:.2f} ms<extra>" + r["run_label"] + "</extra>"),
                      row=row, col=col)
    _axis_titles(fig, cells, x="run (layout · run id)", y="step time (ms)")
    return fig.update_layout(height=560)


def step_time_shown(df: pd.DataFrame, limit: int = MAX_RUNS_PER_CHART) -> tuple[int, int]:
    """(runs drawn, ok runs with step times) for a chart of ``limit`` runs."""
    ok = ok_runs(df)
    total = int(ok["step_times_s"].map(lambda t: isinstance(t, list) and len(t) > 0).sum()) if not ok.empty else 0
    return min(total, limit), total


# --- correctness --------------------------------------------------------------------------


def _one_per_layout(df: pd.DataFrame) -> pd.DataFrame:
    """The newest ok run per layout group: one curve each."""
    ok = ok_runs(df)
    if ok.empty:
        return ok
    latest = ok.sort_values("created_at").groupby("group_key").tail(1)
    return ok.loc[ok.index.isin(latest.index)]


def loss_curves(df: pd.DataFrame) -> go.Figure:
    """Loss per step of each layout; the single-process reference drawn dashed and thick, last."""
    runs = newest(_one_per_layout(df))
    runs = runs[runs["losses"].map(lambda v: isinstance(v, list) and len(v) > 0)] if not runs.empty else runs
    if runs.empty:
        return empty_figure("Loss curves", "no losses in these runs")
    # the reference last, so its dashed line lies on top of the curves that match it
    runs = pd.concat([runs[runs["world_size"] != 1], runs[runs["world_size"] == 1]])
    fig, cells = _facets(runs, title="Loss per step (single-process reference dashed)")
    colors = layout_colors(runs)
    shown = set()
    for r in runs.to_dict("records"):
        ref = r["world_size"] == 1
        row, col = cells[r["workload_label"]]
        name = r["layout_label"] + (" (reference)" if ref else "")
        fig.add_trace(go.Scatter(
            x=list(range(len(r["losses"]))), y=r["losses"], mode="lines+markers", name=name,
            legendgroup=r["layout_label"], showlegend=name not in shown,
            line=dict(color=colors[r["layout_key"]], dash="dash" if ref else "solid", width=4 if ref else 2)),
            row=row, col=col)
        shown.add(name)
    _axis_titles(fig, cells, x="step (count)", y="loss (cross-entropy, nats)")
    return fig.update_layout(height=520)


def loss_diff(df: pd.DataFrame) -> go.Figure:
    """max |loss - single-process loss| per run on a log axis, with the ``LOSS_TOLERANCE`` line.

    An exact zero has no place on a log axis: it is drawn on the axis floor, a decade below the
    smallest non-zero difference, as an open marker ticked "0 (exact)", never as a measured 1e-12."""
    # every run, not the newest few: one marker each is cheap, and a cut would empty whole workloads
    ok = ok_runs(df).dropna(subset=["loss_max_abs_diff_vs_reference"])
    ok = ok[ok["world_size"] != 1] if not ok.empty else ok
    if ok.empty:
        return empty_figure("Difference to the reference", "no multi-rank runs with a reference loss")
    diff = ok["loss_max_abs_diff_vs_reference"].astype(float)
    # each run's own tolerance (it depends on its precision) where the record has one
    tol = pd.to_numeric(ok.get("loss_tolerance", pd.Series(index=ok.index, dtype=float)), errors="coerce") \
        .fillna(LOSS_TOLERANCE)
    nonzero = diff[diff > 0]
    floor = 10 ** math.floor(math.log10(min(nonzero.min(), tol.min()) / 10)) if len(nonzero) else 1e-9
    fig, cells = _facets(ok, title="max |loss - single-process loss| over the steps (dashed: the tolerance)")
    shown = set()
    for (wl, strategy), sub in ok.assign(_d=diff, _t=tol).groupby(["workload_label", "strategy"], sort=False):
        passed = sub["_d"] <= sub["_t"]
        fig.add_trace(go.Scatter(
            x=sub["run_label"], y=sub["_d"].where(sub["_d"] > 0, floor), mode="markers", name=strategy,
            legendgroup=strategy, showlegend=strategy not in shown,
            marker=dict(color=strategy_color(strategy), size=12, line=dict(color="black", width=1),
                        symbol=["circle-open" if d == 0 else ("circle" if p else "x") for d, p in zip(sub["_d"], passed)]),
            customdata=[["0 (exact)" if d == 0 else f"{d:.3g}", "pass" if p else "FAIL"] for d, p in zip(sub["_d"], passed)],
            hovertemplate="%{x}: %{customdata[0]} nats, %{customdata[1]}<extra></extra>"),
            row=cells[wl][0], col=cells[wl][1])
        shown.add(strategy)
    ticks = [floor] + [10.0 ** e for e in range(int(math.log10(floor)) + 1, 1)]
    for wl, (row, col) in cells.items():
        for t in sorted(set(tol[ok["workload_label"] == wl])):
            fig.add_hline(y=t, line_dash="dash", line_color="#d62728", row=row, col=col,
                          annotation_text=f"tolerance {t:g}: pass below", annotation_position="top left")
        fig.update_yaxes(type="log", tickvals=ticks, ticktext=["0 (exact)"] + [f"{t:.0e}" for t in ticks[1:]],
                         row=row, col=col)
    _axis_titles(fig, cells, x="run", y="max abs loss difference (nats, log)")
    return fig.update_layout(height=480)


# --- compare ------------------------------------------------------------------------------


def _baselines(df: pd.DataFrame, by: str, order: list[str]) -> dict[str, str]:
    """Each compared item -> the first item of the same workload (its ratio baseline)."""
    workload = df.drop_duplicates(by).set_index(by)["workload_key"]
    first: dict[str, str] = {}
    for item in order:
        first.setdefault(workload[item], item)
    return {item: first[workload[item]] for item in order}


def compare_table(df: pd.DataFrame, by: str = "run_label") -> pd.DataFrame:
    """Every headline metric side by side (median per ``by`` value) and its ratio to the first pick
    *of the same workload* (never across workloads)."""
    ok = ok_runs(df)
    if ok.empty:
        return pd.DataFrame()
    cols = [c for c in HEADLINE_METRICS if c in ok.columns]
    numeric = ok[cols].apply(pd.to_numeric, errors="coerce").assign(**{by: ok[by]})
    med = numeric.groupby(by, sort=False)[cols].median().T
    scale = pd.Series({c: HEADLINE_METRICS[c][1] for c in cols})
    table = med.mul(scale, axis=0)
    base = _baselines(ok, by, list(table.columns))
    for col in list(table.columns):
        if base[col] != col:
            table[f"{col} / {base[col]}"] = table[col] / table[base[col]].where(table[base[col]] != 0)
    table.index = [HEADLINE_METRICS[c][0] for c in cols]
    return table


def _short(item: str, row: pd.Series) -> str:
    """A compared item without its workload (the facet title names it)."""
    return item.replace(" · " + row["workload_label"], "")


RATIO_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)


def compare_ratios(df: pd.DataFrame, by: str = "run_label") -> go.Figure:
    """Ratio of each metric to the baseline of the same workload (1.0 = equal), a facet per workload.
    Metric labels say which way is better; a filled marker is better than the baseline, an open one worse."""
    table = compare_table(df, by)
    ratio_cols = [c for c in table.columns if " / " in str(c)]
    if not ratio_cols:
        return empty_figure("Ratios", "pick at least two layouts or runs of the same workload")
    ok = ok_runs(df)
    info = ok.drop_duplicates(by).set_index(by)
    colors = layout_colors(ok)
    lower = {HEADLINE_METRICS[c][0]: HEADLINE_METRICS[c][2] for c in HEADLINE_METRICS}
    metric_names = [f"{m} {'↓' if lower[m] else '↑'}" for m in table.index]
    fig, cells = _facets(info.loc[[c.split(" / ")[0] for c in ratio_cols]].reset_index(),
                         title="Ratio to the first pick of each workload (↑ higher is better, ↓ lower is better)")
    for col in ratio_cols:
        name, base = col.split(" / ")
        row = info.loc[name]
        values = table[col].astype(float)
        better = [(v < 1) if lower[m] else (v > 1) for m, v in zip(table.index, values)]
        fig.add_trace(go.Scatter(
            x=metric_names, y=values, name=f"{_short(name, row)} / {_short(base, info.loc[base])}", mode="markers",
            marker=dict(color=colors[row["layout_key"]], size=12, line=dict(color=colors[row["layout_key"]], width=2),
                        symbol=["circle" if b else "circle-open" for b in better]),
            hovertemplate="%{x}: %{y:.3g}x<extra>" + name + "</extra>"),
            row=cells[row["workload_label"]][0], col=cells[row["workload_label"]][1])
    for r, c in cells.values():
        fig.add_hline(y=1.0, line_dash="dot", line_color="black", row=r, col=c)
        fig.update_yaxes(type="log", tickvals=list(RATIO_TICKS), ticktext=[f"{t:g}" for t in RATIO_TICKS], row=r, col=c)
    _axis_titles(fig, cells, x="metric", y="ratio to baseline (dimensionless)")
    return fig.update_layout(height=560)


# Charts per section, in the order ``parbench report`` writes them (the dashboard views call the
# same functions). A new section: add a (title, charts) line here.
REPORT_SECTIONS: tuple[tuple[str, tuple[Callable[[pd.DataFrame], go.Figure], ...]], ...] = (
    ("Which layout?", (pareto_chart,)),
    ("Scaling", (scaling_throughput, scaling_efficiency)),
    ("Memory", (memory_stacked,)),
    ("Communication", (comm_stacked, comm_ops_breakdown, comm_modeled_vs_os)),
    ("Step time", (step_time_box,)),
    ("Where the time goes", (lambda df: time_charts.time_figure(df),)),
    ("Compare layouts", (lambda df: compare_ratios(df, by="config_label"),)),
    ("Correctness", (loss_curves, loss_diff)),
)


def ranking_table(ranked: pd.DataFrame) -> pd.DataFrame:
    """The ranking of one workload for people: rank, layout, throughput, memory, communication, verdict."""
    return pd.DataFrame({
        "rank": ranked["rank"].astype(int),
        "layout": ranked["layout_label"],
        "samples/s": ranked["throughput_samples_per_s"].round(1),
        "step ms": (ranked["step_time_s_median"] * 1e3).round(2),
        "memory MiB/rank": (ranked["memory_bytes"] / MIB).round(3),
        "peak RSS MiB": (ranked["peak_rss_bytes"] / MIB).round(0),
        "comm MiB/step/rank": (ranked["comm_total_bytes_per_step"] / MIB).round(3),
        "repeats": ranked["repeats"].astype(int),
        "fits": ranked["fits"].map({True: "yes", False: "no"}),
        "verdict": ["fastest that fits" if f else ("fastest" if r == 1 else "")
                    for f, r in zip(ranked["fastest_fit"], ranked["rank"])],
    }).reset_index(drop=True)
