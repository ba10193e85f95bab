"""Clusters the simulator predicts for: GPU node presets (every figure with its source), a user
cluster file (TOML or JSON), and this machine's calibrated profile (``parbench calibrate``).

Collective time follows the alpha-beta (latency-bandwidth) model per algorithm (Thakur, Rabenseifner
& Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005; bus bandwidth
factors of nccl-tests doc/PERFORMANCE.md): ring all-reduce 2(n-1) alpha + 2(n-1)/n S/B, all-gather and
reduce-scatter (n-1) alpha + (n-1)/n S/B, broadcast (binomial tree) ceil(log2 n) alpha + S/B, send alpha + S/B.
Rings are used inside and across nodes (NCCL's default ring algorithm): the latency of one collective grows
as (n-1) alpha, so at large n, where each rank's share of a bucket or unit shrinks, latency dominates.
"""

from __future__ import annotations

import json
import math
import socket
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

CALIBRATION_DIR = Path("results") / "calibration"


@dataclass(frozen=True, kw_only=True)
class Link:
    """One level of the network, per GPU (rank) and direction."""

    latency_s: float
    bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.latency_s < 0 or self.bandwidth_bytes_per_s <= 0:
            raise ValueError(f"link latency_s={self.latency_s} must be >= 0 and bandwidth={self.bandwidth_bytes_per_s} > 0")


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """A homogeneous cluster: nodes of ``gpus_per_node`` devices, a fast link inside, a slower one across."""

    name: str
    gpus_per_node: int
    peak_flops: float
    """Dense FLOP/s of one device at the training dtype (the MFU denominator)."""
    gemm_efficiency: float
    """Fraction of peak a large GEMM reaches; small GEMMs pay ``gemm_overhead_s`` on top."""
    gemm_overhead_s: float
    """Fixed cost of one GEMM (launch, tile quantisation): t = overhead + flops / (peak x efficiency)."""
    op_overhead_s: float
    """Fixed cost of any other operator call (kernel launch, framework dispatch): the optimizer's ops."""
    autograd_op_overhead_s: float = 0.0
    """Fixed cost per operator on the training path (module call, autograd recording, backward node);
    0 = ``op_overhead_s`` (GPUs: launch-bound; CPUs: the framework's own cost dominates small models)."""
    memory_bandwidth_bytes_per_s: float
    """Achievable memory bandwidth of memory-bound operators (elementwise, norms, optimizer)."""
    memory_bytes: int
    intra: Link
    inter: Link
    overlap: float = 1.0
    """Fraction of backward compute that data-parallel gradient communication can hide under."""
    cores: int = 0
    """CPU profiles: cores shared by all ranks (compute slows by ranks/cores beyond it); 0 = one device per rank."""
    step_scale: float = 1.0
    """Calibrated CPU profiles: a measured reference training step (the runner's own workloads, one
    process) / the op-level prediction of it; multiplies every compute term (1 = trust the op model)."""
    compute_slowdown: dict[int, float] = field(default_factory=dict)
    """Calibrated CPU profiles: per-rank compute time with n ranks computing at once / alone (n -> factor):
    cores shared with each other, with the calibration's own collectives threads and with other jobs."""
    collectives: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)
    """Calibrated fits: kind -> group size -> (alpha_s, seconds per payload byte), used where present."""
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def training_op_overhead_s(self) -> float:
        return self.autograd_op_overhead_s or self.op_overhead_s

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node={self.gpus_per_node} must be >= 1")
        if not 0 < self.gemm_efficiency <= 1:
            raise ValueError(f"gemm_efficiency={self.gemm_efficiency} must be in (0, 1]")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"overlap={self.overlap} must be in [0, 1]")
        if self.peak_flops <= 0 or self.memory_bandwidth_bytes_per_s <= 0 or self.memory_bytes <= 0:
            raise ValueError("peak_flops, memory_bandwidth_bytes_per_s and memory_bytes must be > 0")


# Algorithm factors: (latency steps, bandwidth factor on the payload S) per collective, n ranks.
def algorithm_factors(kind: str, n: int) -> tuple[float, float]:
    """nccl-tests PERFORMANCE.md bus-bandwidth factors; ring steps for latency, binomial tree for broadcast."""
    if n <= 1:
        return 0.0, 0.0
    if kind == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "scatter", "all_to_all"):
        return float(n - 1), (n - 1) / n
    if kind == "broadcast":
        return float(math.ceil(math.log2(n))), 1.0
    return 1.0, 1.0  # send (recv costs the sender's time)


def collective_time_s(cluster: Cluster, kind: str, payload: int, n: int, *, inter_node: bool) -> float:
    """Seconds for one collective of full-buffer ``payload`` bytes over ``n`` ranks."""
    if n <= 1 or (payload <= 0 and kind != "barrier"):
        return 0.0
    fitted = _fitted(cluster, kind, n)
    if fitted is not None:
        alpha, beta = fitted
        return alpha + beta * payload
    link = cluster.inter if inter_node else cluster.intra
    steps, factor = algorithm_factors(kind, n)
    return steps * link.latency_s + factor * payload / link.bandwidth_bytes_per_s


def _fitted(cluster: Cluster, kind: str, n: int) -> tuple[float, float] | None:
    """The calibrated (alpha, beta) at n, else rescaled from the nearest calibrated group size."""
    fits = cluster.collectives.get(kind)
    if not fits:
        return None
    if n in fits:
        return fits[n]
    m = min(fits, key=lambda k: abs(k - n))
    (a, b), (s_m, f_m), (s_n, f_n) = fits[m], algorithm_factors(kind, m), algorithm_factors(kind, n)
    return a * s_n / s_m, b * f_n / f_m


# --- presets --------------------------------------------------------------------------------------

A100_SOURCES = {
    "peak_flops": "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16/FP16 312 TFLOP/s dense",
    "memory_bytes": "A100 datasheet: 80 GB HBM2e (SXM)",
    "memory_bandwidth_bytes_per_s": "A100 datasheet: 2,039 GB/s; x0.8 achievable (assumed, STREAM-like)",
    "intra": "A100 datasheet: NVLink 3 600 GB/s total = 300 GB/s per direction; x0.8 nccl-tests-style busbw (assumed)",
    "inter": "DGX A100 user guide: 8x ConnectX-6 HDR 200 Gb/s per node = 25 GB/s per GPU; x0.9 (assumed)",
    "gpus_per_node": "DGX A100: 8 GPUs per node",
    "gemm_efficiency": "cuBLAS large-GEMM BF16 on A100 reaches ~80% of peak (assumed; Megatron-LM reports 52% MFU end to end)",
    "latency": "assumed ~5 us per NVLink step, ~8 us per InfiniBand step (typical nccl-tests small-message latencies)",
}
H100_SOURCES = {
    "peak_flops": "NVIDIA H100 Tensor Core GPU datasheet: SXM BF16 989 TFLOP/s dense (1,979 with sparsity)",
    "memory_bytes": "H100 datasheet: 80 GB HBM3 (SXM)",
    "memory_bandwidth_bytes_per_s": "H100 datasheet: 3.35 TB/s; x0.8 achievable (assumed)",
    "intra": "H100 datasheet: NVLink 4 900 GB/s total = 450 GB/s per direction; x0.8 busbw (assumed)",
    "inter": "DGX H100 user guide: 8x ConnectX-7 NDR 400 Gb/s per node = 50 GB/s per GPU; x0.9 (assumed)",
    "gpus_per_node": "DGX H100: 8 GPUs per node",
    "gemm_efficiency": "cuBLAS large-GEMM BF16 on H100 reaches ~70% of dense peak (assumed)",
    "latency": "assumed ~4 us per NVLink step, ~8 us per InfiniBand step",
}

PRESETS: dict[str, Cluster] = {
    "a100-80gb": Cluster(
        name="a100-80gb", gpus_per_node=8, peak_flops=312e12, gemm_efficiency=0.80, gemm_overhead_s=6e-6,
        op_overhead_s=4e-6, memory_bandwidth_bytes_per_s=0.8 * 2039e9, memory_bytes=80 * 10**9,
        intra=Link(latency_s=5e-6, bandwidth_bytes_per_s=0.8 * 300e9),
        inter=Link(latency_s=8e-6, bandwidth_bytes_per_s=0.9 * 25e9), overlap=1.0, sources=A100_SOURCES),
    "h100-sxm": Cluster(
        name="h100-sxm", gpus_per_node=8, peak_flops=989e12, gemm_efficiency=0.70, gemm_overhead_s=5e-6,
        op_overhead_s=3e-6, memory_bandwidth_bytes_per_s=0.8 * 3350e9, memory_bytes=80 * 10**9,
        intra=Link(latency_s=4e-6, bandwidth_bytes_per_s=0.8 * 450e9),
        inter=Link(latency_s=8e-6, bandwidth_bytes_per_s=0.9 * 50e9), overlap=1.0, sources=H100_SOURCES),
}


def cluster_from_dict(data: dict[str, Any]) -> Cluster:
    """A cluster from plain data (a TOML/JSON file or a saved profile); links as {latency_s, bandwidth_bytes_per_s}."""
    data = dict(data)
    known = {f.name for f in fields(Cluster)}
    unknown = sorted(set(data) - known - {"fit", "meta"})
    if unknown:
        raise ValueError(f"unknown cluster fields {unknown}; valid: {sorted(known)}")
    for level in ("intra", "inter"):
        if isinstance(data.get(level), dict):
            data[level] = Link(**data[level])
    data["compute_slowdown"] = {int(n): float(v) for n, v in (data.get("compute_slowdown") or {}).items()}
    colls = data.get("collectives") or {}
    data["collectives"] = {k: {int(n): tuple(v) for n, v in by_n.items()} for k, by_n in colls.items()}
    return Cluster(**{k: v for k, v in data.items() if k in known})


def cluster_to_dict(c: Cluster) -> dict[str, Any]:
    out = {f.name: getattr(c, f.name) for f in fields(Cluster)}
    out["intra"], out["inter"] = vars(c.intra), vars(c.inter)
    out["collectives"] = {k: {str(n): list(v) for n, v in by_n.items()} for k, by_n in c.collectives.items()}
    out["compute_slowdown"] = {str(n): v for n, v in c.compute_slowdown.items()}
    return out


def profile_path(results_dir: str | Path = "results", host: str | None = None) -> Path:
    return Path(results_dir) / "calibration" / f"{host or socket.gethostname()}.json"


def load_cluster(name: str, *, results_dir: str | Path = "results") -> Cluster:
    """A preset name, ``local`` (this host's calibrated profile), or a path to a .toml/.json file."""
    if name in PRESETS:
        return PRESETS[name]
    path = profile_path(results_dir) if name == "local" else Path(name)
    if not path.is_file():
        hint = "run `parbench calibrate` first" if name == "local" else f"presets: {', '.join(PRESETS)}, local"
        raise FileNotFoundError(f"no cluster {name!r} ({path} does not exist); {hint}")
    data = tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())
    return cluster_from_dict(data.get("cluster", data))
