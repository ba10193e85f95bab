"""Every rule a run configuration must satisfy, each with a message that names the factors.

``validate_run`` is pure (no torch) and runs in ``RunConfig.__post_init__``; what this machine
can do is asked in ``parbench.preflight``. Both run before any rank process is spawned.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from parbench.layout import ParallelLayout, tp_misfit
from parbench.names import DEVICES, RUN_PRECISIONS, TOKEN_WORKLOADS, ConfigError, DataParallelMode, Schedule, Strategy

if TYPE_CHECKING:
    from parbench.config import RunConfig


SEED_LIMIT = 2**63


def validate_run(c: "RunConfig") -> None:
    """Raise ConfigError for the first rule ``c`` breaks."""
    for rule in (_positive, _single, _degrees, ParallelLayout.check_layout, _pipeline, _tensor_parallel, _servers,
                 _gloo_cuda, _experts, _loader):
        rule(c)


MINIMUMS = {"world_size": 1, "steps": 1, "warmup_steps": 2, "threads": 1, "servers": 1, "seed": 0,
            "loader_workers": 0, "prefetch_factor": 1, "ep": 0, "global_batch_size": 1, "micro_batches": 1,
            "virtual_stages": 1}
"""The least value of each integer field (the sweep's keys take their bounds from here too)."""
CHOICES = {"device": DEVICES, "precision": RUN_PRECISIONS}
"""The values of the string fields that are not enums."""


TIMEOUT_LIMIT_S = 1e9
"""The longest run timeout: the rendezvous store takes it as a timedelta (OverflowError from about 8.6e13 s) and a
plugin's check as an alarm (setitimer: OverflowError at 1e12 s on this project's Linux VM); 1e9 s bounds nothing a
person waits for anyway."""


def _positive(c: "RunConfig") -> None:
    for key in ("world_size", "steps", "warmup_steps", "threads", "servers", "prefetch_factor"):
        if getattr(c, key) < MINIMUMS[key]:
            raise ConfigError(f"{key}={getattr(c, key)} must be >= {MINIMUMS[key]}")
    for key in ("timeout_s", "lr"):  # `not x > 0` also catches NaN, which compares false with anything
        value = getattr(c, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not value > 0:
            raise ConfigError(f"{key}={value!r} must be a finite number > 0")
    if c.timeout_s > TIMEOUT_LIMIT_S:
        raise ConfigError(f"timeout_s={c.timeout_s:g} must be at most {TIMEOUT_LIMIT_S:g} s (31 years)")
    if isinstance(c.seed, bool) or not isinstance(c.seed, int) or not 0 <= c.seed < SEED_LIMIT:
        raise ConfigError(f"seed={c.seed!r} must be an integer in [0, 2**63) (torch.manual_seed's int64 range)")
    for key, valid in CHOICES.items():
        if getattr(c, key) not in valid:
            raise ConfigError(f"unknown {key} {getattr(c, key)!r}; valid: {', '.join(valid)}")
    if c.precision == "tf32" and c.device != "cuda":
        raise ConfigError("precision=tf32 is a CUDA tensor-core mode; on device=cpu use fp32 or bf16")


def _single(c: "RunConfig") -> None:
    if c.strategy is Strategy.SINGLE and c.world_size != 1:
        raise ConfigError(f"strategy=single runs one process, got world_size={c.world_size}")


def _degrees(c: "RunConfig") -> None:
    if c.strategy is Strategy.PS:
        return
    c.check_mesh_size(c.world_size)
    derived, got = c.derived_degrees(), {d: getattr(c, d) for d in c.DEGREES}
    if c.strategy is not Strategy.HYBRID and got != derived:
        show = lambda degrees: ", ".join(f"{d}={v}" for d, v in degrees.items())  # noqa: E731
        raise ConfigError(f"strategy={c.strategy.value} at world_size={c.world_size} sets {show(derived)} itself; "
                          f"got {show(got)} (explicit degrees need strategy=hybrid)")


def _pipeline(c: "RunConfig") -> None:
    if not c.uses_pipeline:
        if c.micro_batches != 1:
            raise ConfigError(f"micro_batches={c.micro_batches} applies to pipeline schedules only (pp={c.pp})")
        return
    units = c.workload.pipeline_units  # None for a plugin: parbench.workloads.check counts its units
    if units is not None and c.chunks > units:
        raise ConfigError(
            f"pipeline needs {c.chunks} stages (pp={c.pp} x virtual_stages={c.v}) but the {c.workload.name} "
            f"has only {units} splittable layers (layers={c.workload.layers})"
        )
    if c.schedule is Schedule.ONE_F_ONE_B and c.micro_batches < c.pp:
        # torch.distributed.pipelining.Schedule1F1B refuses fewer micro-batches than stages
        raise ConfigError(f"schedule=1f1b needs micro_batches >= pp, got micro_batches={c.micro_batches} and "
                          f"pp={c.pp} (use more micro-batches, or schedule=gpipe)")


def _tensor_parallel(c: "RunConfig") -> None:
    if c.tp == 1:
        return
    w = c.workload
    if w.is_plugin:
        return  # a plugin's shape is its own: parbench.workloads.check asks it for a tp plan
    misfit = tp_misfit(c.tp, hidden=w.hidden, heads=w.heads if w.name in TOKEN_WORKLOADS else None)
    if misfit:
        raise ConfigError(misfit)


def _servers(c: "RunConfig") -> None:
    if c.strategy is not Strategy.HYBRID and c.dp_mode is not DataParallelMode.DDP:
        raise ConfigError(f"dp_mode={c.dp_mode.value} applies to strategy=hybrid only, got strategy={c.strategy.value}")
    if c.strategy is not Strategy.PS:
        if c.servers != 1:
            raise ConfigError(f"servers={c.servers} applies to strategy=ps only, got strategy={c.strategy.value}")
        return
    workers = c.world_size - c.servers
    if workers < 1:
        raise ConfigError(f"ps needs at least one worker: servers={c.servers} >= world_size={c.world_size}")


def _loader(c: "RunConfig") -> None:
    if c.loader_workers < 0:
        raise ConfigError(f"loader_workers={c.loader_workers} must be >= 0 (0 = load in the rank's own process)")
    if c.pin_memory and c.device != "cuda":
        raise ConfigError("pin_memory=True speeds copies to a GPU only; it needs device=cuda")
    for key in ("data_in_step", "pin_memory"):
        if not isinstance(getattr(c, key), bool):
            raise ConfigError(f"{key}={getattr(c, key)!r} must be true or false")


def _gloo_cuda(c: "RunConfig") -> None:
    """gloo moves CUDA tensors in collectives (through host memory) but its point-to-point send and
    recv take CPU tensors only: the pipeline's activations and the parameter server's push/pull."""
    if c.backend.value != "gloo" or c.device != "cuda":
        return
    if c.uses_pipeline or c.strategy is Strategy.PS:
        raise ConfigError(f"strategy={c.strategy.value} sends tensors point-to-point, which gloo does not do for "
                          "device=cuda; use backend=nccl with device=cuda, or device=cpu")


def _experts(c: "RunConfig") -> None:
    """ep: experts sharded over groups of ep ranks inside the data-parallel dimension (strategy ep,
    or a hybrid mesh's dp dimension with tp = 1)."""
    w = c.workload
    if c.strategy not in (Strategy.EP, Strategy.HYBRID) and c.ep != 1:
        raise ConfigError(f"ep={c.ep} applies to strategy=ep or hybrid only, got strategy={c.strategy.value}")
    if c.strategy is Strategy.HYBRID and c.ep != 1:
        if c.tp > 1 or c.dp_mode is not DataParallelMode.DDP:
            raise ConfigError(f"hybrid ep={c.ep} composes with dp (dp_mode=ddp) and pp; got tp={c.tp}, "
                              f"dp_mode={c.dp_mode.value} (expert parallelism with tp or fsdp is not implemented)")
    elif c.strategy is not Strategy.EP:
        return
    if w.name != "moe":
        raise ConfigError(f"ep shards experts: it needs workload=moe, got workload={w.name}")
    if w.experts % c.ep:
        raise ConfigError(f"ep={c.ep} does not divide experts={w.experts}: every rank of an ep group "
                          "must hold the same number of experts")
