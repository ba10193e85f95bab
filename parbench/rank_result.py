"""What one rank hands back to the launcher: its figures, typed (torch-free, so the parent reads it
without importing a model). ``parbench.record`` turns a list of these into one result record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class RankResult:
    """One rank's measurement (``parbench.runner.measure``). Byte figures are per step."""

    rank: int
    role: str
    """The rank's part in the strategy (``replica``, ``stage1``, ``server``, ...)."""
    step_times_s: list[float]
    """Wall seconds of every timed step on this rank's clock, steps back to back."""
    data_times_s: list[float] | None = None
    """Seconds each timed step's input took to make on this rank (None: the strategy reads none)."""
    compute_times_s: list[float]
    """Seconds of the compute-only steps (ddp under no_sync); empty where there are none."""
    losses: list[float | None]
    """Loss of every step run (warm-up, probe, timed); None on a rank that computes no loss."""
    comm_bytes_per_step: dict[str, int]
    """Bytes sent per category (``parbench.metrics.categories.CATEGORIES``), nccl-tests conventions."""
    comm_wire_bytes_per_step: int | None
    """What gloo's algorithms really send; None under nccl (it picks its own algorithms)."""
    comm_ops: list[dict[str, Any]]
    os_write_bytes_per_step: float | None
    """Socket bytes the OS counted per timed step; None under nccl (no write syscalls)."""
    peak_rss_bytes: int
    mem_param_bytes: int
    mem_grad_bytes: int
    mem_optim_bytes: int
    mem_activation_bytes: int
    mem_expert_param_bytes: int | None = None
    """Mixture-of-experts models: the expert share of the parameter, gradient and optimizer bytes."""
    mem_expert_grad_bytes: int | None = None
    mem_expert_optim_bytes: int | None = None
    cuda_allocated_peak_bytes: int | None = None
    cuda_reserved_peak_bytes: int | None = None
    cuda_device_used_bytes: int | None = None
    cuda_device_total_bytes: int | None = None
    device_name: str | None = None
    """The GPU this rank ran on (cuda only)."""
    param_count: int = 0
    """Parameter elements this rank holds (local shards of sharded tensors)."""
    train_flops_per_sample: float = 0.0
    """The workload's forward + backward FLOPs per sample (whole model, not this rank's share)."""
    tokens_per_sample: int | None = None
    """Tokens per sample for token workloads; None where a sample is not made of tokens."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Strategy-specific figures (``Trainer.extra``)."""
    comm_bytes_by_label: dict[str, int] = field(default_factory=dict)
    """Sent bytes by meter label (e.g. an MoE layer's dispatch, combine and count exchange)."""
    trace: dict[str, Any] = field(default_factory=dict)
    """The traced steps' breakdown and events (``parbench.metrics.tracing``), keyed with the rank."""
    moe_routing: list[Any] | None = None
    """moe: the router's per-step assignment statistics up to the last timed step; None otherwise."""
    comm_intra_node_bytes_per_step: int | None = None
    """Multi-node runs only: bytes sent to ranks on this rank's node / on other nodes."""
    comm_inter_node_bytes_per_step: int | None = None
    comm_inter_node_by_category: dict[str, int] | None = None
