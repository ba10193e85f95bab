"""What-if: one layout of one model on one cluster, predicted without any run or calibration.

Torch-free figures for the dashboard's Simulator view: the memory of the busiest rank stacked
against the device's capacity, and the step time split into compute, pipeline bubble, exposed
communication and the rest (optimizer, data), with MFU. The model shapes below are published
ones, so a user can ask "what would GPT-3 2.7B need on 16 H100s?" before measuring anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from parbench.config import Schedule, WorkloadConfig
from parbench.sim.architecture import Architecture
from parbench.sim.hardware import Cluster
from parbench.sim.layout import Layout, Recompute
from parbench.sim.model import ModelSpec, architecture_spec, model_spec
from parbench.sim.models import MODELS
from parbench.sim.predict import Prediction
from parbench.sim.published import PUBLISHED, SEQ, VOCAB

GIB = 2**30


@dataclass(frozen=True, kw_only=True)
class Shape:
    """A decoder-only transformer: layers, width, heads, sequence length and vocabulary."""

    layers: int
    hidden: int
    heads: int
    seq_len: int = SEQ
    vocab_size: int = VOCAB
    source: str = ""
    arch: Architecture | None = None
    """A full architecture (GQA, gated MLP, tied embeddings) where the preset has one; None: a GPT shape."""


# Brown et al. 2020 ("Language Models are Few-Shot Learners"), table 2.1: n_layers, d_model, n_heads,
# context 2048; the vocabulary is Megatron-LM's padded GPT-2 BPE (51200).
MODEL_PRESETS: dict[str, Shape] = {
    "GPT-3 2.7B": Shape(layers=32, hidden=2560, heads=32, source="Brown et al. 2020, table 2.1"),
    "GPT-3 6.7B": Shape(layers=32, hidden=4096, heads=32, source="Brown et al. 2020, table 2.1"),
    "GPT-3 13B": Shape(layers=40, hidden=5120, heads=40, source="Brown et al. 2020, table 2.1"),
    "GPT-3 175B": Shape(layers=96, hidden=12288, heads=96, source="Brown et al. 2020, table 2.1"),
    # each published GPT shape once, under its first row's name (a row with an architecture of its own, BLOOM's,
    # is a model preset below)
    **{p.name: Shape(layers=p.layers, hidden=p.hidden, heads=p.heads, source=p.source) for p in PUBLISHED
       if p.arch is None
       and p is next(q for q in PUBLISHED if (q.layers, q.hidden, q.heads) == (p.layers, p.hidden, p.heads))},
    **{name: Shape(layers=m.arch.layers, hidden=m.arch.hidden, heads=m.arch.heads, seq_len=m.arch.seq_len,
                   vocab_size=m.arch.vocab, source=m.source, arch=m.arch) for name, m in MODELS.items()},
}


@dataclass(frozen=True, kw_only=True)
class WhatIf:
    """The inputs of the what-if panel (a mesh of dp x tp x pp x cp devices)."""

    shape: Shape
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    """Context parallelism: each rank of a cp group holds seq / cp tokens of every sample (ring attention)."""
    ep: int = 1
    """Expert parallelism (mixtures of experts): each rank of an ep group, inside dp, holds experts / ep."""
    whole_experts: bool = False
    """Routed experts held whole, ep folded over tp x cp x dp (``Layout.expert_tp`` 1)."""
    moe_a2a_overlap: bool = False
    """Megatron-Core's combined 1F1B (``Layout.moe_a2a_overlap``)."""
    replicate: int = 1
    """HSDP under ZeRO-3: the dp ranks split into this many replicas, each sharding over dp / replicate ranks."""
    micro_batch_size: int = 1
    micro_batches: int = 1
    zero: int = 0
    recompute: Recompute = Recompute.NONE
    precision: str = "bf16"
    schedule: Schedule = Schedule.ONE_F_ONE_B
    virtual_stages: int = 1
    """Chunks per pipeline rank (the interleaved schedule needs 2 or more)."""
    sequence_parallel: bool = False
    """Sequence parallelism on; False leaves it to the software (NeMo's and torchtitan's turn it on with tp)."""
    software: str = "torch"
    """``parbench simulate --software``: the training software whose flags run the layout."""
    fp8_scaling: str = ""
    """``parbench simulate --fp8-scaling`` under fp8 precision; '' the software's recipe."""
    threads: int = 1
    """``parbench simulate --threads``: intra-op threads per rank on a CPU profile that measured that many."""

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def command_args(self) -> list[str]:
        """The ``parbench simulate`` flags of this layout (the model and cluster aside): the dashboard builds the
        layout from them with the command's own parser (``parbench.commands.simulate.layout_for``), so it takes the
        command's default software, attention and checks, and predicts what the command predicts."""
        flags = {"gpus": self.gpus, "dp": self.dp, "tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep,
                 "replicate": self.replicate, "micro-batch": self.micro_batch_size,
                 "global-batch": self.dp * self.micro_batches * self.micro_batch_size, "schedule": self.schedule.value,
                 "virtual-stages": self.virtual_stages, "zero": self.zero, "recompute": self.recompute.value,
                 "precision": self.precision}
        return [*(f"--{k}={v}" for k, v in flags.items()), f"--software={self.software}",
                *(["--sequence-parallel"] if self.sequence_parallel else []),
                *(["--expert-tp=1"] if self.whole_experts else []),
                *(["--overlap-moe-expert-parallel-comm"] if self.moe_a2a_overlap else []),
                *([f"--fp8-scaling={self.fp8_scaling}"] if self.fp8_scaling and self.precision == "fp8" else []),
                *([f"--threads={self.threads}"] if self.threads != 1 else [])]

    def model(self) -> ModelSpec:
        s = self.shape
        if s.arch is not None:
            return architecture_spec(s.arch, megatron=True)
        wl = WorkloadConfig(name="transformer", layers=s.layers, hidden=s.hidden, heads=s.heads, seq_len=s.seq_len,
                            vocab_size=s.vocab_size)
        return model_spec(wl, megatron=True)


def time_parts(p: Prediction) -> dict[str, float]:
    """Step time in seconds: compute, pipeline bubble, communication on the critical path, and the
    rest of the step (optimizer, data; step time minus the three)."""
    rest = max(p.step_time_s - p.compute_time_s - p.bubble_time_s - p.comm_time_s, 0.0)
    return {"compute": p.compute_time_s, "pipeline bubble": p.bubble_time_s,
            "exposed communication": p.comm_time_s, "optimizer and other": rest}


MEMORY_KINDS = {"param_bytes": "parameters", "grad_bytes": "gradients", "optim_bytes": "optimizer state",
                "activation_bytes": "activations", "unsharded_bytes": "gathered parameters (FSDP)",
                "loss_bytes": "logits and loss", "buffer_bytes": "gradient buckets",
                "context_bytes": "CUDA context and communicators", "fragmentation_bytes": "allocator fragmentation"}
MEMORY_COLORS = {"parameters": "#1f77b4", "gradients": "#ff7f0e", "optimizer state": "#2ca02c",
                 "activations": "#d62728", "gathered parameters (FSDP)": "#9467bd", "logits and loss": "#8c564b",
                 "gradient buckets": "#e377c2", "CUDA context and communicators": "#7f7f7f",
                 "allocator fragmentation": "#bcbd22"}
TIME_COLORS = {"compute": "#1f77b4", "pipeline bubble": "#bcbd22", "exposed communication": "#d62728",
               "optimizer and other": "#7f7f7f"}


def memory_figure(p: Prediction, cluster: Cluster) -> go.Figure:
    """The busiest rank's memory stacked by kind, against the device capacity (a vertical line)."""
    parts = {MEMORY_KINDS[k]: v for k, v in (p.peak_memory or p.memory).as_dict().items() if v}  # the peak rank: its bars sum to the peak
    fig = go.Figure()
    for name, value in parts.items():
        fig.add_trace(go.Bar(y=["busiest rank"], x=[value / GIB], orientation="h", name=name,
                             marker_color=MEMORY_COLORS[name], hovertemplate=f"{name}: %{{x:.2f}} GiB<extra></extra>"))
    cap = cluster.memory_bytes / GIB
    fig.add_vline(x=cap, line_color="black", line_dash="dash", annotation_text=f"capacity {cap:.0f} GiB")
    verdict = "fits" if p.feasible else "does NOT fit"
    # the legend on the right, one entry a line: a horizontal legend of nine parts covers the bar; the figure grows
    # with the parts so that each entry shows (a legend taller than the plot area is cut and scrolls)
    fig.update_layout(barmode="stack", height=max(300, 190 + 20 * len(parts)), title=f"Memory per rank: {p.peak_memory_bytes / GIB:.1f} GiB, {verdict}",
                      xaxis_title="memory per rank (GiB)", yaxis_title="", legend_orientation="v", legend_x=1.02,
                      xaxis_range=[0, max(cap, p.peak_memory_bytes / GIB) * 1.1])
    return fig


def time_figure(p: Prediction) -> go.Figure:
    """Step time split into its parts, with throughput and MFU in the title."""
    fig = go.Figure()
    for name, seconds in time_parts(p).items():
        fig.add_trace(go.Bar(y=["step"], x=[seconds * 1e3], orientation="h", name=name, marker_color=TIME_COLORS[name],
                             hovertemplate=f"{name}: %{{x:.1f}} ms<extra></extra>"))
    fig.update_layout(barmode="stack", height=260, legend_orientation="v", legend_x=1.02, xaxis_title="time per step (ms)",
                      title=f"Step time {p.step_time_s * 1e3:,.1f} ms: {p.throughput_samples_per_s:,.2f} samples/s, "
                            f"MFU {p.mfu:.1%}")
    return fig


SEARCH_PLOTTED = 1500
"""The search chart plots at most this many layouts (the fastest) besides the Pareto front: a chart of every one
of a large search's 15,000 would send megabytes to the browser, and the slow ones crowd the bottom of it."""


def mesh_family(layout: Layout) -> str:
    """Which dimensions besides data parallelism a layout splits the model over: "dp only", "tp", "tp x pp", ..."""
    parts = [name for name, degree in (("tp", layout.tp), ("pp", layout.pp), ("cp", layout.cp), ("ep", layout.ep))
             if degree > 1]
    return " x ".join(parts) or "dp only"


def search_rows(candidates: list, top: int, run=None) -> list[dict]:
    """The ``top`` fastest feasible layouts of a search (``parbench.sim.search.search``'s order) as table rows:
    throughput, MFU, memory, the step and where it goes, and the layout as ``parbench simulate`` prints it; with
    ``run`` (a candidate's ``run_cost.TrainingRun``), what a training run costs on it, as ``--train-tokens`` prints."""
    from parbench.sim.search import describe

    rows = []
    for rank, c in enumerate((c for c in candidates if c.feasible), start=1):
        if rank > top:
            break
        p = c.prediction
        cost = {"days": round(run(c).days, 2), "GPU-hours": round(run(c).gpu_hours)} if run else {}
        rows.append({"rank": rank, "layout": describe(c.layout), "samples/s": round(p.throughput_samples_per_s, 3),
                     "MFU %": round(p.mfu * 100, 1), "GiB per rank": round(p.peak_memory_bytes / GIB, 2), **cost,
                     "step s": round(p.step_time_s, 3), **{f"{k} s": round(v, 3) for k, v in time_parts(p).items()}})
    return rows


def search_figure(candidates: list, cluster: Cluster) -> go.Figure:
    """Every feasible layout of a search (the fastest ``SEARCH_PLOTTED``) as throughput against memory per rank,
    one color per mesh family, the Pareto front as a line, the best layout marked, the device's capacity a line."""
    from parbench.sim.search import describe, pareto_front

    feasible = [c for c in candidates if c.feasible]
    shown, front = feasible[:SEARCH_PLOTTED], pareto_front(candidates)
    fig = go.Figure()
    families: dict[str, list] = {}
    for c in shown:
        families.setdefault(mesh_family(c.layout), []).append(c)
    for family, members in families.items():
        fig.add_trace(go.Scattergl(
            x=[c.prediction.peak_memory_bytes / GIB for c in members],
            y=[c.prediction.throughput_samples_per_s for c in members], mode="markers", name=family,
            marker={"size": 6, "opacity": 0.6}, text=[describe(c.layout) for c in members],
            customdata=[c.prediction.mfu * 100 for c in members],
            hovertemplate="%{text}<br>%{y:.4g} samples/s, MFU %{customdata:.1f}%, %{x:.1f} GiB<extra></extra>"))
    if front:
        fig.add_trace(go.Scatter(x=[c.prediction.peak_memory_bytes / GIB for c in front],
                                 y=[c.prediction.throughput_samples_per_s for c in front], mode="lines+markers",
                                 name="Pareto front", line={"color": "black", "shape": "hv"}, marker={"size": 5},
                                 text=[describe(c.layout) for c in front],
                                 hovertemplate="%{text}<br>%{y:.4g} samples/s, %{x:.1f} GiB<extra>front</extra>"))
    if feasible:
        best = feasible[0]
        fig.add_trace(go.Scatter(x=[best.prediction.peak_memory_bytes / GIB], y=[best.prediction.throughput_samples_per_s],
                                 mode="markers", name="best", marker={"symbol": "star", "size": 16, "color": "gold",
                                                                      "line": {"color": "black", "width": 1}},
                                 text=[describe(best.layout)], hovertemplate="%{text}<extra>best</extra>"))
    cap = cluster.memory_bytes / GIB
    fig.add_vline(x=cap, line_color="black", line_dash="dash", annotation_text=f"capacity {cap:.0f} GiB")
    more = f"; the fastest {SEARCH_PLOTTED} shown" if len(feasible) > SEARCH_PLOTTED else ""
    fig.update_layout(title=f"{len(feasible)} layouts fit{more}: throughput against memory per rank",
                      xaxis_title="memory per rank (GiB)", yaxis_title="samples/s", height=480, legend_orientation="v",
                      legend_x=1.02)
    return fig
