"""Run configuration: one frozen dataclass per concept, all validation lives here.

A bad configuration dies in ``__post_init__`` with every factor named, before a single
rank process is spawned (torchtitan's ``ParallelDims`` is the model for this).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import hashlib
import json
import math
import os
import typing
from dataclasses import dataclass, field
from typing import Any

from parbench.names import (DATASETS, FAULTS, MAX_LAYERS, PLUGIN_GROUP, Fault, TOKEN_WORKLOADS, WORKLOAD_NAMES, Backend,  # noqa: F401
                            ConfigError, DataMode, DataParallelMode, Schedule, Strategy)
from parbench.layout import ParallelLayout
from parbench.validation import validate_run

DEFAULT_LAYERS = {"mlp": 1, "transformer": 4, "hf-llama": 2, "hf-gpt2": 2, "moe": 4}
DEFAULT_HIDDEN = {"mlp": 512, "transformer": 64, "hf-llama": 64, "hf-gpt2": 64, "moe": 64}
# plugins build their own optimizer; 1e-3 (AdamW's usual value) is their default learning rate
DEFAULT_LR = collections.defaultdict(lambda: 1e-3, {"mlp": 0.01, "transformer": 1e-3})
ROUTERS = ("learned", "balanced")
"""moe routing: ``learned`` (softmax top-k of the router's logits) or ``balanced`` (token t of a
sequence picks experts (t*k + j) mod E, j < k: every expert gets the same share; gates stay the
router's softmax so it still trains)."""


def installed_plugins() -> dict[str, str]:
    """Entry points of group ``parbench.workloads``: {name: "module:factory"} (stdlib only, no import)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=PLUGIN_GROUP)}


def _normalise_workload_name(name: str) -> str:
    """A file path becomes absolute: ranks fork from a server whose working directory may differ."""
    if name in WORKLOAD_NAMES or name in installed_plugins():
        return name
    target, sep, attr = name.rpartition(":")  # ``module.path:factory`` or ``path/to/file.py:factory``
    if not (sep and target and attr.isidentifier()):
        raise ConfigError(
            f"unknown workload {name!r}; valid: {', '.join(WORKLOAD_NAMES)}, an installed plugin "
            f"({', '.join(installed_plugins()) or 'none installed'}), 'package.module:factory' or "
            f"'path/to/file.py:factory'")
    if target.endswith(".py"):
        return f"{os.path.abspath(target)}:{attr}"
    return name


@functools.cache
def _field_kinds(cls: type) -> dict[str, tuple[type, ...]]:
    """The types each init field of a config dataclass accepts (``str | None``: both)."""
    hints = typing.get_type_hints(cls)
    return {f.name: typing.get_args(hints[f.name]) or (hints[f.name],) for f in dataclasses.fields(cls) if f.init}


def _json_kind_ok(value: Any, kind: type) -> bool:
    if kind is type(None):
        return value is None
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return isinstance(value, str)
    if dataclasses.is_dataclass(kind):
        return isinstance(value, dict)
    return isinstance(value, kind)


_JSON_KIND_NAMES = {type(None): "null", bool: "true or false", int: "an integer", float: "a number"}


def _checked_fields(cls: type, data: Any, where: str) -> dict[str, Any]:
    """``data`` (parsed JSON) as keyword arguments of ``cls``, every key known and every value of a type
    the field takes (enums by their string values), else ConfigError naming the key."""
    if not isinstance(data, dict):
        raise ConfigError(f"config {where.rstrip('.') or 'object'} is {data!r}, expected an object")
    kinds = _field_kinds(cls)
    for key, value in data.items():
        if key not in kinds:
            raise ConfigError(f"unknown config key {where}{key}; valid: {', '.join(kinds)}")
        if not any(_json_kind_ok(value, k) for k in kinds[key]):
            names = " or ".join(_JSON_KIND_NAMES.get(k, "an object" if dataclasses.is_dataclass(k) else "a string")
                                for k in kinds[key])
            raise ConfigError(f"config key {where}{key} is {value!r}, expected {names}")
    return dict(data)


def _parse_enum(enum_type: type[enum.Enum], value: Any, what: str) -> enum.Enum:
    try:
        return enum_type(value)
    except ValueError:
        raise ConfigError(f"unknown {what} {value!r}; valid: {', '.join(m.value for m in enum_type)}") from None


@dataclass(frozen=True, kw_only=True)
class WorkloadConfig:
    """The model and its data. Shape fields a workload does not use stay at their defaults."""

    name: str = "mlp"
    """A built-in (``mlp``: the seed documents' 784-512-10 MNIST classifier; ``transformer``: GPT-style
    decoder; ``hf-llama``/``hf-gpt2``: transformers architectures from a config, random weights), an
    installed plugin's entry-point name, ``package.module:factory`` or ``path/to/file.py:factory``."""
    layers: int = 0
    """mlp: hidden layers (default 1: the seed's 784-512-10); transformer / hf-*: decoder blocks
    (default 4 / 2); plugins: passed through (0 = the plugin's own default)."""
    hidden: int = 0
    """mlp: hidden width (default 512); transformer / hf-*: model width d_model (default 64);
    plugins: passed through (0 = the plugin's own default)."""
    heads: int = 4
    """transformer / hf-*: attention heads (must divide hidden)."""
    seq_len: int = 32
    """transformer / hf-*: tokens per sample."""
    vocab_size: int = 256
    """transformer / hf-*: vocabulary size."""
    dataset: str = "synthetic"
    """mlp data: ``synthetic`` (seeded, in-process), ``digits`` (scikit-learn's 8x8 digits, upsampled
    to 28x28), or ``mnist`` (an IDX directory given by ``dataset_path``)."""
    dataset_path: str | None = None
    """The MNIST IDX directory for ``dataset=mnist``."""
    experts: int = 4
    """moe: experts per MoE layer (each the transformer's MLP, hidden -> 4 hidden -> hidden)."""
    top_k: int = 2
    """moe: experts each token is sent to (softmax gate, top-k)."""
    capacity_factor: float = 1.25
    """moe: an expert takes at most ceil(capacity_factor x seq_len x top_k / experts) assignments
    per sequence (GShard's capacity with one sequence per group); later ones are dropped."""
    moe_every: int = 1
    """moe: every moe_every-th block (blocks moe_every-1, 2 moe_every-1, ...) has experts; the others
    keep the dense MLP."""
    router: str = "learned"
    """moe: ``learned`` or ``balanced`` (forced uniform routing, for exact byte checks)."""
    aux_loss_weight: float = 0.01
    """moe: weight of the load-balancing loss E x sum_e f_e P_e (Switch Transformer, Fedus et al. 2021)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", _normalise_workload_name(self.name))
        for key, defaults in (("layers", DEFAULT_LAYERS), ("hidden", DEFAULT_HIDDEN)):
            if getattr(self, key) == 0:
                object.__setattr__(self, key, defaults.get(self.name, 0))
        for key in ("layers", "hidden", "heads", "seq_len", "vocab_size"):
            low = 0 if self.is_plugin and key in ("layers", "hidden") else 1
            if getattr(self, key) < low:
                raise ConfigError(f"workload {key}={getattr(self, key)} must be >= {low}")
        if self.layers > MAX_LAYERS:
            raise ConfigError(f"workload layers={self.layers} is more than {MAX_LAYERS:,} (ten times the deepest "
                              "published transformer)")
        if self.name in TOKEN_WORKLOADS and self.hidden % self.heads:
            raise ConfigError(f"heads={self.heads} does not divide hidden={self.hidden}")
        self._validate_moe()
        if self.dataset not in DATASETS:
            raise ConfigError(f"unknown dataset {self.dataset!r}; valid: {', '.join(DATASETS)}")
        if self.dataset != "synthetic" and self.name != "mlp" and not self.is_plugin:
            raise ConfigError(f"dataset={self.dataset!r} applies to the mlp workload only (plugins may read it too)")
        if self.dataset == "mnist" and not self.dataset_path:
            raise ConfigError("dataset='mnist' needs dataset_path (a directory of MNIST IDX files)")
        self._refuse_unused()

    def _refuse_unused(self) -> None:
        """A built-in workload refuses a field it does not read set away from its default (``--workload transformer
        --experts 8`` once ran a dense model without a word); plugins get every field and read what they like."""
        if self.is_plugin:
            return
        if self.dataset_path is not None and self.dataset != "mnist":
            raise ConfigError(f"dataset_path={self.dataset_path!r} applies to dataset='mnist' only "
                              f"(dataset={self.dataset!r})")
        read = {"name", "layers", "hidden", "dataset", "dataset_path", *self.shape()}
        for f in dataclasses.fields(self):
            if f.name not in read and getattr(self, f.name) != f.default:
                raise ConfigError(f"{f.name}={getattr(self, f.name)!r} does not apply to the {self.name} workload, "
                                  f"which reads {', '.join(k for k in self.shape())}"
                                  + (" and its dataset" if self.name == "mlp" else ""))

    def _validate_moe(self) -> None:
        if self.experts < 1 or self.top_k < 1 or self.moe_every < 1:
            raise ConfigError(f"experts={self.experts}, top_k={self.top_k} and moe_every={self.moe_every} must be >= 1")
        if self.top_k > self.experts:
            raise ConfigError(f"top_k={self.top_k} > experts={self.experts}: a token cannot pick more experts than exist")
        if not (math.isfinite(self.capacity_factor) and self.capacity_factor > 0):
            raise ConfigError(f"capacity_factor={self.capacity_factor} must be a finite number > 0")
        if self.router not in ROUTERS:
            raise ConfigError(f"unknown router {self.router!r}; valid: {', '.join(ROUTERS)}")
        if not (math.isfinite(self.aux_loss_weight) and self.aux_loss_weight >= 0):
            raise ConfigError(f"aux_loss_weight={self.aux_loss_weight} must be a finite number >= 0")

    @property
    def moe_layers(self) -> int:
        """Blocks with experts (moe only; 0 for every other workload)."""
        return self.layers // self.moe_every if self.name == "moe" else 0

    @property
    def is_plugin(self) -> bool:
        """Loaded from outside parbench (entry point or ``module:factory``)."""
        return self.name not in WORKLOAD_NAMES

    @property
    def pipeline_units(self) -> int | None:
        """Layers a pipeline can split between: the mlp's Linear layers, the decoders' blocks;
        None for plugins (known only once built: ``parbench.workloads.check`` builds it)."""
        if self.is_plugin:
            return None
        return self.layers + 1 if self.name == "mlp" else self.layers

    def shape(self) -> dict[str, int]:
        """The shape fields that matter for this workload (stored beside every record)."""
        if self.name == "mlp":
            return {"layers": self.layers, "hidden": self.hidden}
        keys = ("layers", "hidden", "heads", "seq_len", "vocab_size")
        if self.name == "moe":
            keys += MOE_KEYS
        return {k: getattr(self, k) for k in keys}


MOE_KEYS = ("experts", "top_k", "capacity_factor", "moe_every", "router", "aux_loss_weight")
"""The moe workload's own shape fields (stored beside every moe record)."""


@dataclass(frozen=True, kw_only=True)
class RunConfig(ParallelLayout):
    """One measurement: a strategy on a workload at a world size. The mesh and micro-batching
    fields, and their rules, are ``ParallelLayout``'s; a single strategy derives its degrees."""

    dp: int = 0
    """Data-parallel degree for ``hybrid`` (0 = derive from the strategy)."""
    tp: int = 0
    """Tensor-parallel degree for ``hybrid`` (0 = derive from the strategy)."""
    pp: int = 0
    """Pipeline degree for ``hybrid`` (0 = derive from the strategy)."""
    global_batch_size: int = 64
    """Samples per optimizer step, over all replicas."""
    strategy: Strategy = Strategy.SINGLE
    """The parallelism strategy (``parbench.strategies.BUILDERS``)."""
    world_size: int = 1
    """Rank processes of the run."""
    backend: Backend = Backend.GLOO
    """torch.distributed process-group backend; nccl needs device=cuda."""
    device: str = "cpu"
    """``cpu`` or ``cuda``; nccl needs cuda."""
    precision: str = "fp32"
    """``fp32``; ``tf32`` (fp32 tensors, TF32 tensor-core matmuls: cuda only); ``bf16`` (autocast
    compute on fp32 master weights, bf16 gradient all-reduce / FSDP traffic: half the bytes)."""
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    ep: int = 0
    """Expert-parallel degree (strategy ``ep``, or ``hybrid`` with tp = 1): experts sharded over groups
    of ep consecutive data-parallel ranks; 0 = world_size for ``ep``, 1 otherwise."""
    dp_mode: DataParallelMode = DataParallelMode.DDP
    """How hybrid's data-parallel dimension replicates the model: ddp, or fsdp (sharded)."""
    servers: int = 1
    """Parameter-server ranks (``ps`` only); the other ranks are workers."""
    steps: int = 10
    """Timed steps."""
    warmup_steps: int = 2
    """Untimed steps first (>= 2: the first step infers pipeline shapes and allocates DDP's
    buckets, the second rebuilds them in gradient order and broadcasts the new assignment; the
    probe step after them must see steady-state traffic only)."""
    seed: int = 0
    """Seed of the model's initialisation and of the data."""
    threads: int = 1
    """Intra-op threads per rank (torch.set_num_threads)."""
    data_mode: DataMode = DataMode.SHARDED
    """How ranks get their batch: sharded (each makes its own slice: no data traffic) or rank0
    (rank 0 reads the global batch and scatters it: data traffic)."""
    data_in_step: bool = False
    """Prepare each step's input inside the timed step (end-to-end numbers) instead of just before
    it (the default: data off the critical path, as a loader's workers would have it ready).
    ``time_data_s`` is measured either way. rank0's scatter is communication: always in the step."""
    loader_workers: int = 0
    """DataLoader worker processes per rank for Dataset workloads (digits, mnist, a plugin's Dataset);
    0: the rank loads in its own process (on 2 cores, workers would compete with the ranks)."""
    pin_memory: bool = False
    """DataLoader pin_memory: page-locked batches for faster copies to a GPU (cuda runs only)."""
    prefetch_factor: int = 2
    """Batches each DataLoader worker loads ahead (with loader_workers > 0)."""
    lr: float = 0.0
    """Learning rate (default: 0.01 for the mlp's SGD, 1e-3 for the transformer's AdamW)."""
    timeout_s: float = 300.0
    """Wall-clock limit for the whole run; every rank is killed when it passes."""
    inject_fault: str | None = None
    """Testing aid: ``RANK:KIND:STEP`` makes rank RANK ``raise``, ``hang``, ``crash`` (SIGKILL) or
    produce a ``nan`` loss at step STEP, to show the failure paths (``--inject-fault 1:hang:3``).
    Carried in the config because ranks fork from a server that does not see the launching
    process's environment."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise strings into enums once, here
        set_(self, "strategy", _parse_enum(Strategy, self.strategy, "strategy"))
        set_(self, "backend", _parse_enum(Backend, self.backend, "backend"))
        set_(self, "schedule", _parse_enum(Schedule, self.schedule, "schedule"))
        set_(self, "data_mode", _parse_enum(DataMode, self.data_mode, "data mode"))
        set_(self, "dp_mode", _parse_enum(DataParallelMode, self.dp_mode, "dp mode"))
        if isinstance(self.workload, dict):
            set_(self, "workload", WorkloadConfig(**self.workload))
        set_(self, "lr", self.lr or DEFAULT_LR[self.workload.name])
        derived = self.derived_degrees()
        for degree in self.DEGREES:
            set_(self, degree, getattr(self, degree) or derived[degree])
        set_(self, "ep", self.ep or (self.world_size if self.strategy is Strategy.EP else 1))
        validate_run(self)
        if self.inject_fault is not None:
            self._check_fault(Fault.parse(self.inject_fault))

    def _check_fault(self, fault: Fault) -> None:
        last = self.warmup_steps + self.steps  # warm-up, probe and timed steps: 0..last
        if fault.rank >= self.world_size:
            raise ConfigError(f"inject_fault={self.inject_fault!r}: rank {fault.rank} >= world_size={self.world_size}")
        if fault.step > last:
            raise ConfigError(f"inject_fault={self.inject_fault!r}: step {fault.step} is never reached (the run "
                              f"takes steps 0..{last}: {self.warmup_steps} warm-up, 1 probe, {self.steps} timed)")

    def derived_degrees(self) -> dict[str, int]:
        """The degrees a single strategy implies: its one degree spans the world (ps: the workers),
        the others are 1; hybrid takes them from the user (unset ones are 1)."""
        if self.strategy is Strategy.HYBRID:
            return {d: getattr(self, d) or 1 for d in self.DEGREES}
        spans = {Strategy.TP: "tp", Strategy.PIPELINE: "pp"}.get(self.strategy, "dp")
        size = max(self.world_size - self.servers, 1) if self.strategy is Strategy.PS else self.world_size
        return {d: size if d == spans else 1 for d in self.DEGREES}

    @property
    def uses_pipeline(self) -> bool:
        return self.pp > 1 or self.strategy is Strategy.PIPELINE

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (enums as their values)."""
        return json.loads(json.dumps(dataclasses.asdict(self), default=lambda e: e.value))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """A config as ``to_dict`` wrote it (a record's ``config``); ConfigError names an unknown key or a
        value of the wrong JSON type before any field is used."""
        data = _checked_fields(cls, data, "")
        data["workload"] = WorkloadConfig(**_checked_fields(WorkloadConfig, data.get("workload", {}), "workload."))
        return cls(**data)

    def point_key(self) -> str:
        """Stable identity of what is measured (timeout excluded): resumed sweeps match on it."""
        d = self.to_dict()
        d.pop("timeout_s")
        # fields added later drop out at their neutral values, so older records keep their keys
        if d["ep"] == 1:
            d.pop("ep")
        if self.workload.name != "moe":
            for key in MOE_KEYS:
                d["workload"].pop(key)
        return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    def reference(self) -> "RunConfig":
        """The single-process run every strategy's losses are compared with."""
        return dataclasses.replace(
            self, strategy=Strategy.SINGLE, world_size=1, micro_batches=1, dp=0, tp=0, pp=0, ep=0,
            servers=1, virtual_stages=1, data_mode=DataMode.SHARDED, schedule=Schedule.ONE_F_ONE_B,
            data_in_step=False, loader_workers=0, pin_memory=False, prefetch_factor=2,
            dp_mode=DataParallelMode.DDP, inject_fault=None,
            # one rank on the run's device at the run's precision: gloo on the CPU, the run's own
            # backend on a GPU (gloo's point-to-point takes no CUDA tensors)
            backend=self.backend if self.device == "cuda" else Backend.GLOO,
        )
