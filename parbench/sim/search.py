"""Layout search: enumerate (dp, tp, pp, micro-batch, schedule, virtual stages, ZeRO stage, recompute),
reject layouts that break a rule or do not fit in memory (with the reason), rank the rest by predicted
throughput, and extract the throughput-vs-memory Pareto front."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

from parbench.config import Schedule, Strategy
from parbench.sim.hardware import Cluster
from parbench.sim.layout import Layout, Precision, Recompute
from parbench.sim.model import ModelSpec
from parbench.sim.predict import Prediction, predict

MICRO_BATCH_SIZES = (1, 2, 4, 8)
VIRTUAL_STAGES = (2, 4)


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    prediction: Prediction | None
    reason: str = ""
    """Why the layout was rejected ('' when feasible)."""

    @property
    def feasible(self) -> bool:
        return not self.reason


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tp_options(model: ModelSpec, cluster: Cluster, gpus: int) -> list[int]:
    """Tensor parallelism stays inside a node (Narayanan et al. 2021, takeaway 1) and divides the heads."""
    return [t for t in _divisors(gpus) if t <= cluster.gpus_per_node and model.heads % t == 0 and model.hidden % t == 0]


def layouts(model: ModelSpec, cluster: Cluster, *, gpus: int, global_batch: int,
            precision: Precision) -> Iterator[tuple[Layout | None, str]]:
    """Every combination, as (layout, '') or (None, reason) for combinations that break a rule."""
    for tp in _tp_options(model, cluster, gpus):
        for pp in _divisors(gpus // tp):
            dp = gpus // (tp * pp)
            if pp > len(model.units):
                yield None, f"pp={pp} > layers={len(model.units)}"
                continue
            if global_batch % dp:
                yield None, f"global_batch={global_batch} not divisible by dp={dp}"
                continue
            yield from _micro_layouts(model, tp=tp, pp=pp, dp=dp, global_batch=global_batch, precision=precision)


def _micro_layouts(model: ModelSpec, *, tp: int, pp: int, dp: int, global_batch: int, precision: Precision):
    per_replica = global_batch // dp
    for mb in MICRO_BATCH_SIZES:
        if per_replica % mb:
            continue
        m = per_replica // mb
        schedules = [(Schedule.ONE_F_ONE_B, 1)]
        if pp > 1:
            schedules += [(Schedule.INTERLEAVED_1F1B, v) for v in VIRTUAL_STAGES
                          if pp * v <= len(model.units) and m % pp == 0]
        for schedule, v in schedules:
            for zero in (0, 1, 2, 3) if dp > 1 else (0,):
                for recompute in Recompute:
                    yield Layout(strategy=Strategy.HYBRID, dp=dp, tp=tp, pp=pp, global_batch_size=global_batch,
                                 micro_batches=m, schedule=schedule, virtual_stages=v, zero=zero,
                                 recompute=recompute, sequence_parallel=tp > 1, precision=precision), ""


def search(model: ModelSpec, cluster: Cluster, *, gpus: int, global_batch: int, precision: Precision) -> list[Candidate]:
    """Every candidate, feasible ones first by descending throughput, then the rejected ones."""
    out = []
    for layout, reason in layouts(model, cluster, gpus=gpus, global_batch=global_batch, precision=precision):
        if layout is None:
            out.append(Candidate(layout=None, prediction=None, reason=reason))  # type: ignore[arg-type]
            continue
        p = predict(model, layout, cluster)
        out.append(Candidate(layout, p, "; ".join(p.reasons)))
    return sorted(out, key=lambda c: (not c.feasible, -(c.prediction.throughput_samples_per_s if c.prediction else 0)))


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """Feasible candidates no other beats on both throughput (higher) and peak memory (lower)."""
    pts = sorted((c for c in candidates if c.feasible), key=lambda c: (c.prediction.peak_memory_bytes,
                                                                       -c.prediction.throughput_samples_per_s))
    front, best = [], -1.0
    for c in pts:
        if c.prediction.throughput_samples_per_s > best:
            front.append(c)
            best = c.prediction.throughput_samples_per_s
    return front


def describe(layout: Layout) -> str:
    v = f" v={layout.virtual_stages}" if layout.schedule is Schedule.INTERLEAVED_1F1B else ""
    return (f"dp={layout.dp} tp={layout.tp} pp={layout.pp} mb={layout.micro_batch_size} m={layout.micro_batches} "
            f"{layout.schedule.value}{v} zero={layout.zero} recompute={layout.recompute.value}"
            f"{' sp' if layout.sequence_parallel else ''}")
