"""Grid expansion: a SweepSpec -> the runnable points and the skipped ones (each with its reason).

Strategy-specific axes multiply only the points they apply to (``AXES_BY_STRATEGY``), so the grid
holds no junk: micro-batches and schedules only pipeline points, meshes only hybrid ones, servers
only ps. ``single`` runs at world size 1 only; every other strategy at world sizes >= 2 (at 1 it
would be ``single`` again). A point that is still infeasible (RunConfig raises ConfigError, the
strategy is not implemented, the backend is not built in) is kept as a ``Skipped`` with its reason.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Iterator

from parbench.config import ConfigError, RunConfig, Schedule, Strategy, WorkloadConfig
from parbench.layout import ParallelLayout, meshes
from parbench.sweep.spec import SweepSpec

# Which spec axes multiply which strategy's points (plain data; the rest use RunConfig defaults).
AXES_BY_STRATEGY: dict[Strategy, tuple[str, ...]] = {
    Strategy.PIPELINE: ("micro_batches", "schedules"),
    Strategy.HYBRID: ("meshes", "dp_modes", "micro_batches", "schedules"),
    Strategy.PS: ("servers",),
    Strategy.EP: ("eps",),
}


@dataclass(frozen=True)
class Point:
    """One runnable grid point (repeated ``spec.repeats`` times)."""

    config: RunConfig
    label: str


@dataclass(frozen=True)
class Skipped:
    label: str
    reason: str


@dataclass(frozen=True)
class Plan:
    spec: SweepSpec
    points: tuple[Point, ...]
    skipped: tuple[Skipped, ...]
    strategies: tuple[str, ...]
    """The strategies the grid asked for (``all`` resolved against the registry at run time)."""

    @property
    def runs(self) -> int:
        return len(self.points) * self.spec.repeats


def resolve_strategies(spec: SweepSpec) -> tuple[str, ...]:
    """``all``: every strategy in parbench.strategies.BUILDERS, read now (more are being added)."""
    if spec.strategies != "all":
        return tuple(spec.strategies)
    from parbench.strategies import BUILDERS

    return tuple(s.value for s in Strategy if s in BUILDERS)


def plan(spec: SweepSpec, *, single_host: bool = True, environment: bool = True) -> Plan:
    """Expand the grid; raise ConfigError (naming the file) when no point is runnable.

    ``single_host``: every rank of a point runs on this host (not a multi-node sweep), so a world
    size beyond what this host's memory holds is skipped, with the reason. ``environment``: check
    each point against this machine (backends, GPUs, the workload built once); off when the sweep
    runs elsewhere (``parbench slurm`` writes a script for other machines)."""
    points: dict[str, Point] = {}
    skipped: list[Skipped] = []
    strategies = resolve_strategies(spec)
    checked: dict[str, str | None] = {}
    for kwargs, label in _candidates(spec, strategies):
        if isinstance(kwargs, str):  # the combination rules found no variant: the reason
            skipped.append(Skipped(label, kwargs))
            continue
        try:
            cfg = _config(spec, kwargs, checked if environment else None, single_host)
        except ConfigError as exc:
            skipped.append(Skipped(label, str(exc)))
            continue
        points.setdefault(cfg.point_key(), Point(cfg, label))  # the same measurement twice runs once
    if not points:
        reasons = "; ".join(f"{s.label}: {s.reason}" for s in skipped[:5]) or "no strategy/world-size combination"
        raise ConfigError(f"{spec.source}: the grid has no runnable point ({reasons})")
    return Plan(spec=spec, points=tuple(points.values()), skipped=tuple(skipped), strategies=strategies)


# RunConfig fields the environment/workload check does not depend on: points differing only in
# these share one check (it builds the model and runs a forward pass, ~50 ms-0.5 s per call).
_CHECK_IGNORES = ("global_batch_size", "data_mode", "steps", "warmup_steps", "timeout_s", "threads", "lr",
                  "data_in_step", "loader_workers")


def _config(spec: SweepSpec, kwargs: dict[str, Any], checked: dict[str, str | None] | None,
            single_host: bool) -> RunConfig:
    """The point's RunConfig; ``checked`` caches environment checks (None: no environment check)."""
    from parbench import preflight

    if single_host:  # first: a world size the host cannot hold is the reason, whatever else is off
        preflight.check_host_capacity(kwargs["world_size"], kwargs.get("device", "cpu"))
    cfg = RunConfig(**kwargs)  # ConfigError: infeasible point
    preflight.check_implemented(cfg)
    if checked is None:
        return cfg
    key = json.dumps({k: v for k, v in cfg.to_dict().items() if k not in _CHECK_IGNORES}, sort_keys=True)
    if key not in checked:
        try:
            preflight.check_environment(cfg)
            checked[key] = None
        except ConfigError as exc:
            checked[key] = str(exc)
    if checked[key] is not None:
        raise ConfigError(checked[key])
    return cfg


def _candidates(spec: SweepSpec, strategies: tuple[str, ...]) -> Iterator[tuple[dict[str, Any] | str, str]]:
    """(RunConfig kwargs, label) for every combination the combination rules allow; (reason,
    label) where a strategy has no variant at a world size (hybrid at 2: no two-degree mesh)."""
    common = dict(steps=spec.steps, warmup_steps=spec.warmup_steps, timeout_s=spec.timeout_s,
                  seed=spec.seed, threads=spec.threads, data_in_step=spec.data_in_step,
                  loader_workers=spec.loader_workers)
    for workload in _workloads(spec):
        for name, ws, backend, device, precision, gbs, data_mode in itertools.product(
                strategies, spec.world_sizes, spec.backends, spec.devices, spec.precisions,
                spec.global_batch_sizes, spec.data_modes):
            strategy = Strategy(name)
            if (strategy is Strategy.SINGLE) != (ws == 1):
                continue  # single is the world-size-1 point; at 1 every other strategy is single again
            if device == "cpu" and (backend == "nccl" or precision == "tf32"):
                continue  # cross-product artefacts, like single at world size > 1: nccl and tf32 are GPU-only
            base = dict(common, strategy=strategy, world_size=ws, backend=backend, device=device,
                        precision=precision, workload=workload, global_batch_size=gbs, data_mode=data_mode)
            variants = list(_variants(spec, strategy, ws))
            if not variants:
                yield (f"no {name} mesh of world_size={ws} in meshes={spec.meshes or 'derived'} "
                       "(needs dp*tp*pp = world_size with two or more degrees > 1)"), _label(base, {})
            for extra in variants:
                yield base | extra, _label(base, extra)


def _workloads(spec: SweepSpec) -> Iterator[WorkloadConfig]:
    """Each [[workloads]] table, its list-valued shape keys multiplied out."""
    for i, table in enumerate(spec.workloads):
        lists = {k: v for k, v in table.items() if isinstance(v, list)}
        scalars = {k: v for k, v in table.items() if not isinstance(v, list)}
        for combo in itertools.product(*lists.values()):
            try:
                yield WorkloadConfig(**scalars, **dict(zip(lists, combo)))
            except ConfigError as exc:
                raise ConfigError(f"{spec.source}: key 'workloads'[{i}]: {exc}") from None


def _variants(spec: SweepSpec, strategy: Strategy, ws: int) -> Iterator[dict[str, Any]]:
    if strategy is Strategy.PS:
        yield from ({"servers": s} for s in spec.servers)
    elif strategy is Strategy.EP:
        yield from ({"ep": e} for e in spec.eps)
    elif strategy is Strategy.PIPELINE:
        yield from _pipeline_variants(spec)
    elif strategy is Strategy.HYBRID:
        for mesh, mode in itertools.product(_meshes(spec, ws), spec.dp_modes):
            yield from ((mesh | {"dp_mode": mode} | v) for v in (_pipeline_variants(spec) if mesh["pp"] > 1 else [{}]))
    else:
        yield {}


def _pipeline_variants(spec: SweepSpec) -> Iterator[dict[str, Any]]:
    for mb, schedule in itertools.product(spec.micro_batches, spec.schedules):
        interleaved = schedule == Schedule.INTERLEAVED_1F1B.value
        for vs in (spec.virtual_stages if interleaved else [1]):
            yield {"micro_batches": mb, "schedule": schedule, "virtual_stages": vs}


def _meshes(spec: SweepSpec, ws: int) -> list[dict[str, int]]:
    """The spec's meshes of this world size, or every mesh of ws ranks with at least two
    degrees > 1 (a mesh with one is a single strategy, measured as that strategy)."""
    if spec.meshes:
        return [m for m in (dict(zip(ParallelLayout.DEGREES, m)) for m in spec.meshes) if math.prod(m.values()) == ws]
    return [m for m in meshes(ws) if sum(d > 1 for d in m.values()) >= 2]


def _label(base: dict[str, Any], extra: dict[str, Any]) -> str:
    w: WorkloadConfig = base["workload"]
    short = {"layers": "L", "hidden": "d", "heads": "h", "seq_len": "T", "vocab_size": "V", "experts": "E",
             "top_k": "k", "capacity_factor": "cf", "moe_every": "every", "router": "", "aux_loss_weight": "aux"}
    shape = "".join(f"{short.get(k, k)}{v}" for k, v in w.shape().items())
    parts = [f"{base['strategy'].value} x{base['world_size']}", f"{w.name}:{shape}", f"gbs={base['global_batch_size']}"]
    if "dp" in extra:
        parts.append(f"mesh=dp{extra['dp']}.tp{extra['tp']}.pp{extra['pp']}/{extra['dp_mode']}")
    if "micro_batches" in extra:
        vs = f"x{extra['virtual_stages']}" if extra["virtual_stages"] > 1 else ""
        parts.append(f"{extra['schedule']}{vs} mb={extra['micro_batches']}")
    if extra.get("ep"):
        parts.append(f"ep={extra['ep']}")
    if "servers" in extra:
        parts.append(f"servers={extra['servers']}")
    for key, default, shown in (("backend", "gloo", "{}"), ("device", "cpu", "{}"), ("precision", "fp32", "{}"),
                                ("data_mode", "sharded", "data={}")):  # named where not the default
        if base[key] != default:
            parts.append(shown.format(base[key]))
    if base.get("data_in_step"):
        parts.append("data-in-step")
    return " ".join(parts)
