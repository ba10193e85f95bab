"""Turn the ranks' figures into one result record (schema in parbench.results.SCHEMA)."""

from __future__ import annotations

import math
from typing import Any, Sequence

from parbench import devices
from parbench.config import MOE_KEYS, RunConfig
from parbench.metrics import breakdown, stats
from parbench.metrics.categories import CATEGORIES
from parbench.names import TOKEN_WORKLOADS, Strategy
from parbench.rank_result import RankResult
from parbench.results import SCHEMA_VERSION, new_run_id, oversubscribed, provenance


def config_columns(cfg: RunConfig) -> dict[str, Any]:
    w = cfg.workload
    transformer = w.name in TOKEN_WORKLOADS
    return {
        "point_key": cfg.point_key(),
        "strategy": cfg.strategy.value,
        "world_size": cfg.world_size,
        "backend": cfg.backend.value,
        "device": cfg.device,
        "precision": cfg.precision,
        "workload": w.name,
        "layers": w.layers,
        "hidden": w.hidden,
        "heads": w.heads if transformer else None,
        "seq_len": w.seq_len if transformer else None,
        "vocab_size": w.vocab_size if transformer else None,
        "dataset": w.dataset,
        "global_batch_size": cfg.global_batch_size,
        "micro_batches": cfg.micro_batches,
        "schedule": cfg.schedule.value if cfg.uses_pipeline else None,
        "virtual_stages": cfg.virtual_stages,
        "dp": cfg.dp,
        "tp": cfg.tp,
        "pp": cfg.pp,
        "dp_mode": cfg.dp_mode.value,
        "servers": cfg.servers if cfg.strategy is Strategy.PS else None,
        "steps": cfg.steps,
        "warmup_steps": cfg.warmup_steps,
        "seed": cfg.seed,
        "threads_per_rank": cfg.threads,
        "data_mode": cfg.data_mode.value,
        "ep": cfg.ep,
        **{key: (getattr(w, key) if w.name == "moe" else None) for key in MOE_KEYS},
        "data_in_step": cfg.data_in_step,
        "loader_workers": cfg.loader_workers,
        "config": cfg.to_dict(),
    }


def _base(cfg: RunConfig, wall: float) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "run_id": new_run_id(), "sweep_id": None, "repeat": 0,
            **config_columns(cfg), **provenance(), "wall_time_s": wall,
            "oversubscribed": oversubscribed(cfg.world_size, cfg.threads, cfg.device)}


def failed_record(cfg: RunConfig, outcome, wall: float) -> dict[str, Any]:
    return {**_base(cfg, wall), "status": outcome.status, "error": outcome.error,
            "failed_rank": outcome.failed_rank}


def step_losses(ranks: list[RankResult]) -> list[float]:
    """Global loss per step: the mean over the ranks that computed one (equal shards => global mean)."""
    n_steps = len(ranks[0].losses)
    out = []
    for i in range(n_steps):
        vals = [r.losses[i] for r in ranks if r.losses[i] is not None]
        out.append(sum(vals) / len(vals) if vals else math.nan)
    return out


def max_abs_diff(a: Sequence[float], b: Sequence[float] | None) -> float | None:
    """max |a_i - b_i|; NaN when any difference is NaN, inf when one is infinite, never a finite
    number then (Python's ``max()`` skips a NaN that is not first: ``max([0.0, nan]) == 0.0``)."""
    if not b or len(a) != len(b):
        return None
    diffs = [abs(x - y) for x, y in zip(a, b)]
    return math.nan if any(math.isnan(d) for d in diffs) else max(diffs)


def first_non_finite(losses: Sequence[float]) -> int | None:
    """Index of the first loss that is NaN or infinite, else None."""
    return next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)


def _diverged_error(losses: Sequence[float], step: int) -> str:
    return (f"loss became {losses[step]} at step {step} of {len(losses)} (warm-up, probe and timed steps "
            f"counted from 0); the run finished and its figures are kept, but it is not a valid training run")


def build_record(cfg: RunConfig, ranks: list[RankResult], wall: float, *,
                 reference_losses: list[float] | None = None, reference_error: str | None = None) -> dict[str, Any]:
    rec = {**_base(cfg, wall), "status": "ok", "error": None, "failed_rank": None}
    times = slowest_rank(ranks, "step_times_s")
    timed = sum(times)
    rec.update(stats.summary(times, "step_time_s"))
    rec["step_times_s"] = times
    rec["throughput_samples_per_s"] = cfg.global_batch_size * len(times) / timed
    tokens = ranks[0].tokens_per_sample
    rec["throughput_tokens_per_s"] = rec["throughput_samples_per_s"] * tokens if tokens else None
    rec.update(_compute_split(ranks, rec["step_time_s_median"]))
    if cfg.device == "cuda":
        rec["gpu_name"] = ranks[0].device_name or rec["gpu_name"]  # the device rank 0 really ran on
    rec["time_data_s"] = _data_time(ranks)
    rec.update(_breakdown(ranks))
    rec.update(_flops(cfg, ranks[0].train_flops_per_sample, rec["step_time_s_median"],
                      rec["gpu_name"] if cfg.device == "cuda" else None))
    rec.update(_memory(ranks))
    rec.update(_comm(ranks))
    rec.update(_moe(ranks, probe=cfg.warmup_steps))
    losses = step_losses(ranks)
    rec["losses"] = losses
    rec["loss_final"] = losses[-1]
    rec["loss_max_abs_diff_vs_reference"] = max_abs_diff(losses, reference_losses)
    rec["reference_error"] = reference_error
    rec["loss_tolerance"] = devices.LOSS_TOLERANCE[cfg.precision]
    bad = first_non_finite(losses)
    if bad is not None:
        rec.update(status="diverged", error=_diverged_error(losses, bad))
    rec["per_rank"] = [_per_rank(r) for r in ranks]
    rec["overhead_s"] = wall - timed
    return rec


def slowest_rank(ranks: list[RankResult], field: str) -> list[float]:
    """Seconds of every step of ``field`` (``step_times_s``, ``compute_times_s``): the slowest rank's
    clock for that step. Each rank clocks its steps back to back; the strategy's collectives keep the
    ranks within a step of each other."""
    return [max(per_rank) for per_rank in zip(*(getattr(r, field) for r in ranks))]


def _compute_split(ranks, step_median: float) -> dict[str, Any]:
    if not ranks[0].compute_times_s:
        return {"compute_time_s_median": None, "exposed_comm_time_s": None}
    c = stats.median(slowest_rank(ranks, "compute_times_s"))
    return {"compute_time_s_median": c, "exposed_comm_time_s": step_median - c}


def _data_time(ranks: list[RankResult]) -> float | None:
    """Seconds per step the slowest-reading rank took to make its input (its median over the timed
    steps); in the step time only with data_in_step. None when no rank reads data."""
    medians = [m for m in map(_rank_data_time, ranks) if m is not None]
    return max(medians) if medians else None


def _rank_data_time(r: RankResult) -> float | None:
    """One rank's input making, seconds per step: the median over its timed steps (None: reads none)."""
    return stats.median(r.data_times_s) if r.data_times_s else None


def _breakdown(ranks: list[RankResult]) -> dict[str, Any]:
    """The step-time breakdown of the traced steps (``parbench.metrics.breakdown``)."""
    traces = [r.trace for r in ranks]
    if any(t is None or not t.get("steps") for t in traces):
        return breakdown.empty_columns()
    columns = breakdown.record_columns(traces)
    for entry, r in zip(columns["breakdown_per_rank"], ranks):
        entry["role"] = r.role
        entry["time_data_s"] = _rank_data_time(r)
    return columns


def _flops(cfg: RunConfig, per_sample: int, step_median: float, gpu_name: str | None) -> dict[str, Any]:
    per_step = per_sample * cfg.global_batch_size
    achieved = per_step / cfg.world_size / step_median
    basis = devices.peak_basis(gpu_name, cfg.precision)
    return {"model_flops_per_step": per_step, "achieved_flops_per_s_per_rank": achieved,
            "mfu": achieved / basis.peak_flops if basis.peak_flops else None, **basis.as_record()}


def _memory(ranks: list[RankResult]) -> dict[str, Any]:
    keys = ("peak_rss_bytes", "mem_param_bytes", "mem_grad_bytes", "mem_optim_bytes", "mem_activation_bytes",
            "cuda_allocated_peak_bytes", "cuda_reserved_peak_bytes", "cuda_device_used_bytes",
            "cuda_device_total_bytes", *EXPERT_MEMORY)
    return {k: (max(getattr(r, k) for r in ranks) if getattr(ranks[0], k) is not None else None) for k in keys}


def _comm(ranks: list[RankResult]) -> dict[str, Any]:
    out = {f"comm_{c}_bytes_per_step": max(r.comm_bytes_per_step[c] for r in ranks) for c in CATEGORIES}
    busiest = max(ranks, key=lambda r: sum(r.comm_bytes_per_step.values()))
    out["comm_total_bytes_per_step"] = sum(busiest.comm_bytes_per_step.values())
    wire = [r.comm_wire_bytes_per_step for r in ranks]
    out["comm_wire_bytes_per_step"] = None if None in wire else max(wire)  # null under nccl: not gloo's algorithms
    out["comm_ops"] = busiest.comm_ops
    os_bytes = [r.os_write_bytes_per_step for r in ranks]
    out["os_write_bytes_per_step"] = None if None in os_bytes else max(os_bytes)
    return out


MOE_LABELS = {"moe_dispatch": "comm_moe_dispatch_bytes_per_step", "moe_combine": "comm_moe_combine_bytes_per_step",
              "moe_counts": "comm_moe_counts_bytes_per_step",
              "moe_expert_grad": "comm_expert_grad_bytes_per_step",
              "moe_non_expert_grad": "comm_non_expert_grad_bytes_per_step"}
"""Meter labels (parbench.workloads.moe, parbench.strategies.expert_parallel) -> record fields."""
EXPERT_MEMORY = ("mem_expert_param_bytes", "mem_expert_grad_bytes", "mem_expert_optim_bytes")


def _moe(ranks: list[RankResult], *, probe: int) -> dict[str, Any]:
    """All-to-all bytes by direction (max over ranks), tokens per expert (summed over ranks),
    load imbalance and dropped share; all None for dense models."""
    out = {field: None for field in (*MOE_LABELS.values(), *MOE_RECORD)}
    if ranks[0].moe_routing is None:
        return out
    for label, field in MOE_LABELS.items():
        out[field] = max(r.comm_bytes_by_label.get(label, 0) for r in ranks)
    routed = _summed(ranks, "routed")  # [step][layer][expert], every rank's tokens
    kept = _summed(ranks, "kept")
    out["moe_routed_tokens_per_expert_per_step"] = routed
    out["moe_tokens_per_expert_per_step"] = kept
    out["moe_tokens_per_expert_per_rank"] = [[sum(col) for col in zip(*r.moe_routing[probe]["kept"])]
                                             for r in ranks]
    out["moe_load_imbalance_per_step"] = [max(max(layer) / (sum(layer) / len(layer)) for layer in step)
                                          for step in routed]
    out["moe_load_imbalance_median"] = stats.median(out["moe_load_imbalance_per_step"])
    out["moe_dropped_fraction_per_step"] = [1 - _total(k) / _total(r) for k, r in zip(kept, routed)]
    out["moe_dropped_fraction"] = 1 - sum(map(_total, kept)) / sum(map(_total, routed))
    return out


MOE_RECORD = ("moe_routed_tokens_per_expert_per_step", "moe_tokens_per_expert_per_step",
              "moe_tokens_per_expert_per_rank", "moe_load_imbalance_per_step", "moe_load_imbalance_median",
              "moe_dropped_fraction_per_step", "moe_dropped_fraction")


def _summed(ranks: list[RankResult], key: str) -> list[list[list[int]]]:
    steps = len(ranks[0].moe_routing)
    return [[[sum(vals) for vals in zip(*layers)] for layers in zip(*(r.moe_routing[i][key] for r in ranks))]
            for i in range(steps)]


def _total(step: list[list[int]]) -> int:
    return sum(sum(layer) for layer in step)


def _per_rank(r: RankResult) -> dict[str, Any]:
    keep = ("rank", "role", "peak_rss_bytes", "mem_param_bytes", "mem_grad_bytes", "mem_optim_bytes",
            "mem_activation_bytes", "cuda_allocated_peak_bytes", "cuda_reserved_peak_bytes",
            "cuda_device_used_bytes", "cuda_device_total_bytes", "device_name", "comm_wire_bytes_per_step",
            "os_write_bytes_per_step", "comm_ops", "extra",
            *EXPERT_MEMORY, "comm_bytes_by_label", "moe_routing")
    out = {k: getattr(r, k) for k in keep}
    out.update({f"comm_{c}_bytes_per_step": r.comm_bytes_per_step[c] for c in CATEGORIES})
    out["time_data_s"] = _rank_data_time(r)
    out["losses"] = r.losses
    return out
