"""Workloads by name: built-ins in a registry that is plain data, plugins resolved by name.

``make`` is what every rank calls; ``check`` is what the parent calls before spawning: it builds
the workload once, runs its model on a two-sample batch of its own data, and refuses a strategy
that needs what the workload does not provide (a tp plan, enough pipeline units or split points).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import torch

from parbench.config import WORKLOAD_NAMES, ConfigError, WorkloadConfig, installed_plugins
from parbench.splits import contiguous_splits
from parbench.workloads import hf, mlp, moe, plugins, transformer
from parbench.workloads.base import StagedModel, Workload

if TYPE_CHECKING:
    from parbench.config import RunConfig

FACTORIES = {"mlp": mlp.make, "transformer": transformer.make, "hf-llama": hf.make_llama,
             "hf-gpt2": hf.make_gpt2, "moe": moe.make}
GENERIC_STRATEGIES = ("single", "ddp", "zero1", "zero2", "fsdp", "ps")
"""Strategies that need only build/batch/loss/optimizer: every workload runs under them."""
CHECK_BATCH = 2
"""Samples of the workload's own batch the parent pushes through its model before spawning."""

PRELOAD = {"hf-llama": ("parbench.workloads.hf_preload",), "hf-gpt2": ("parbench.workloads.hf_preload",)}
"""Modules worth importing once in the forkserver, before it forks ranks of a workload, rather than in
each rank (``preload_modules``)."""

assert tuple(FACTORIES) == WORKLOAD_NAMES, "config.WORKLOAD_NAMES must list the built-in factories"


def make(cfg: WorkloadConfig, seed: int) -> Workload:
    """The workload ``cfg.name`` names (built-in or plugin); bad plugins raise ConfigError."""
    factory = FACTORIES[cfg.name] if cfg.name in FACTORIES else plugins.resolve(cfg.name)
    try:
        workload = factory(cfg, seed)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code: report it as bad input with its name
        raise ConfigError(f"workload {cfg.name!r}: the factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload {cfg.name!r}: the factory returned {type(workload).__name__}, "
                          "not a parbench.workloads.Workload")
    return workload


def preload_modules(names: Iterable[str]) -> tuple[str, ...]:
    """What the forkserver should import for runs of the workloads ``names`` (``PRELOAD``), each once."""
    return tuple(dict.fromkeys(m for name in names for m in PRELOAD.get(name, ())))


@dataclass(frozen=True)
class ModelState:
    """A workload's model as one rank would hold it whole: parameters and the bytes of its weights, their gradients
    and its optimizer's state after a step."""

    params: int
    weight_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    optimizer: str


def model_state(cfg: RunConfig) -> ModelState | None:
    """The workload's model and optimizer built on the meta device (shapes, no storage), one optimizer step taken
    there so that its state exists (AdamW's moments appear at the first step); None where the build does not run
    there (``check``'s real build then names what is wrong). An optimizer that does not step on the meta device
    counts no state. Once per workload, seed and learning rate: a sweep's points share it."""
    return _model_state(cfg.workload, cfg.seed, cfg.lr)


@lru_cache(maxsize=64)
def _model_state(cfg: WorkloadConfig, seed: int, lr: float) -> ModelState | None:
    workload = make(cfg, seed)
    try:
        with torch.device("meta"):
            params = list(workload.build(seed).parameters())
    except Exception:  # noqa: BLE001 - user code: the real build reports it
        return None
    weights = sum(p.numel() * p.element_size() for p in params)
    state, name = 0, ""
    try:
        with torch.device("meta"):
            for p in params:
                p.grad = torch.empty_like(p)
            optimizer = workload.optimizer(params, lr)
            name = type(optimizer).__name__
            optimizer.step()
        state = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                    if isinstance(t, torch.Tensor) and t.dim() > 0)  # not AdamW's step count
    except Exception:  # noqa: BLE001 - user code: its state goes uncounted, a lower floor
        state = 0
    return ModelState(params=sum(p.numel() for p in params), weight_bytes=weights, grad_bytes=weights,
                      optimizer_bytes=state, optimizer=name)


def check(cfg: "RunConfig") -> tuple[Workload, StagedModel]:
    """Refuse, before any rank exists, a workload that cannot run ``cfg`` (ConfigError, exit 2); the workload and
    the model it built, where it can."""
    workload = make(cfg.workload, cfg.seed)
    name = cfg.workload.name  # what the user typed: a path names the plugin better than its own label
    model = _build(workload, cfg, name)
    _check_data(workload, cfg, name)
    _check_batch(workload, model, name)
    _check_optimizer(workload, model, cfg, name)
    _check_tp(workload, model, cfg, name)
    _check_pipeline(workload, model, cfg, name)
    return workload, model


def _build(workload: Workload, cfg: "RunConfig", name: str) -> StagedModel:
    try:
        model = workload.build(cfg.seed)
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"workload {name!r}: build({cfg.seed}) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, StagedModel):
        raise ConfigError(f"workload {name!r}: build() returned {type(model).__name__}, not a "
                          "StagedModel(pre, units, post); wrap a plain module as StagedModel(None, [module], None)")
    return model


def _check_data(workload: Workload, cfg: "RunConfig", name: str) -> None:
    """A Dataset holds at least one global batch; a batch_slice equals the rows of the whole batch
    (else each rank would train on samples the single-process reference never sees)."""
    if workload.dataset is not None:
        try:
            size = len(workload.dataset)
        except Exception as exc:
            raise ConfigError(f"workload {name!r}: len(dataset) raised {type(exc).__name__}: {exc}; a map-style "
                              "Dataset has a length") from exc
        if size < cfg.global_batch_size:
            raise ConfigError(f"workload {name!r}: its dataset has {size} samples, fewer than "
                              f"global_batch_size={cfg.global_batch_size}")
        return
    if workload.batch_slice is None or workload.batch is None:
        return  # one form only: nothing to compare
    try:
        whole, part = workload.batch(0, CHECK_BATCH), workload.batch_slice(0, CHECK_BATCH, 1, CHECK_BATCH)
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"workload {name!r}: batch/batch_slice raised {type(exc).__name__}: {exc}") from exc
    if not all(torch.equal(w[1:], p) for w, p in zip(whole, part)):
        raise ConfigError(f"workload {name!r}: batch_slice(0, {CHECK_BATCH}, 1, {CHECK_BATCH}) differs from "
                          f"batch(0, {CHECK_BATCH})[1:]; a slice must be the same rows of the whole batch")


def _check_batch(workload: Workload, model: StagedModel, name: str) -> None:
    """Forward + loss on CHECK_BATCH samples of the workload's own data, without gradients."""
    try:
        x, y = workload.sample(CHECK_BATCH)
    except Exception as exc:  # noqa: BLE001
        what = "its dataset" if workload.dataset is not None else f"batch(0, {CHECK_BATCH})"
        raise ConfigError(f"workload {name!r}: {what} raised {type(exc).__name__}: {exc}") from exc
    for what, t in (("inputs", x), ("targets", y)):
        if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != CHECK_BATCH:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ConfigError(f"workload {name!r}: batch(step, {CHECK_BATCH}) must return ({CHECK_BATCH}, ...)-shaped "
                              f"tensors (samples first); {what} are {got}")
    try:
        with torch.no_grad():
            loss = workload.loss(model(x), y)
    except Exception as exc:  # noqa: BLE001
        raise ConfigError(f"workload {name!r}: its model does not fit its batch (inputs {tuple(x.shape)} "
                          f"{x.dtype}, targets {tuple(y.shape)} {y.dtype}): {type(exc).__name__}: {exc}") from exc
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ConfigError(f"workload {name!r}: loss(output, targets) must return a scalar tensor, got "
                          f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__}")


def _check_optimizer(workload: Workload, model: StagedModel, cfg: RunConfig, name: str) -> None:
    """Something to train, and an optimizer over it: every strategy steps ``optimizer(params, lr)``, and DDP
    refuses a model without a trainable parameter (both once ended a run in a rank's traceback)."""
    params = list(model.parameters())
    if not any(p.requires_grad for p in params):
        raise ConfigError(f"workload {name!r}: its model has no parameter that requires a gradient, so there is "
                          "nothing to train and no gradient to communicate")
    try:
        optimizer = workload.optimizer(params, cfg.lr)
    except Exception as exc:
        raise ConfigError(f"workload {name!r}: optimizer(params, lr={cfg.lr:g}) raised {type(exc).__name__}: "
                          f"{exc}") from exc
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(f"workload {name!r}: optimizer(params, lr) returned {type(optimizer).__name__}, not a "
                          "torch.optim.Optimizer")


def _check_tp(workload: Workload, model: StagedModel, cfg: "RunConfig", name: str) -> None:
    if cfg.tp <= 1:
        return
    if not workload.supports_tp:
        raise ConfigError(f"workload {name!r} provides no tensor-parallel plan (Workload.tp_plan is None), "
                          f"so tp={cfg.tp} cannot run; it runs under {', '.join(GENERIC_STRATEGIES)}"
                          + (" and pipeline" if len(model.units) > 1 else ""))
    _check_tp_plan(workload, model, name)


def _check_tp_plan(workload: Workload, model: StagedModel, name: str) -> None:
    """The plan a workload gives (``Workload.tp_plan``) is a non-empty {module path: ParallelStyle} dict over
    modules the model has."""
    try:
        plan = workload.tp_plan(model)
    except Exception as exc:
        raise ConfigError(f"workload {name!r}: tp_plan(model) raised {type(exc).__name__}: {exc}") from exc
    from torch.distributed.tensor.parallel import ParallelStyle

    if not (isinstance(plan, dict) and plan
            and all(isinstance(k, str) and isinstance(v, ParallelStyle) for k, v in plan.items())):
        raise ConfigError(f"workload {name!r}: tp_plan(model) must return a non-empty {{module path: ParallelStyle}} "
                          f"dict (ColwiseParallel(), RowwiseParallel(), ...), got {_short(plan)}")
    missing = [path for path in plan if "*" not in path and not _has(model, path)]
    if missing:
        raise ConfigError(f"workload {name!r}: its tp plan names modules the model lacks: {', '.join(missing)}")


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def _has(model: StagedModel, path: str) -> bool:
    try:
        model.get_submodule(path)
        return True
    except AttributeError:
        return False


def _check_pipeline(workload: Workload, model: StagedModel, cfg: "RunConfig", name: str) -> None:
    """Stages must begin at units the workload allows; the pipeline splits units evenly
    (parbench.splits.contiguous_splits), so those starts must all be allowed."""
    if not cfg.uses_pipeline:
        return
    n = len(model.units)
    chunks = cfg.chunks
    allowed = workload.stage_starts(n)
    bad = [p for p in allowed if not 1 <= p < n]
    if bad:
        raise ConfigError(f"workload {name!r}: split point(s) {bad} do not exist: the model has {n} units, "
                          f"so a stage can begin at units 1..{n - 1}")
    if chunks > len(allowed) + 1:
        raise ConfigError(f"workload {name!r} has {n} pipeline unit(s) and {len(allowed)} split point(s): "
                          f"at most {len(allowed) + 1} stages, but pp={cfg.pp} needs {chunks}")

    starts = [lo for lo, _ in contiguous_splits(n, chunks)[1:]]
    if not set(starts) <= set(allowed):
        raise ConfigError(f"workload {name!r}: {chunks} even stages begin at units {starts}, but the "
                          f"workload allows splits only at {list(allowed)}")


def catalog() -> list[dict[str, str]]:
    """Built-ins and installed plugins, for ``parbench workloads`` (nothing is imported)."""
    rows = [{"name": n, "source": f"built-in ({FACTORIES[n].__module__})"} for n in FACTORIES]
    rows += [{"name": n, "source": f"plugin {target}"} for n, target in sorted(installed_plugins().items())]
    return rows


def describe(name: str, seed: int = 0, timeout_s: float | None = None) -> dict[str, Any]:
    """Build a workload at its default shape and say what it provides; a ConfigError where ``parbench run
    --workload NAME`` would refuse it (the same checks; a plugin's code bounded by ``timeout_s``, default a run's)."""
    from parbench.config import RunConfig
    from parbench.workloads.plugins import plugin_deadline

    cfg = RunConfig(workload=WorkloadConfig(name=name), seed=seed,
                    **({} if timeout_s is None else {"timeout_s": timeout_s}))
    with plugin_deadline(cfg):
        workload, model = check(cfg)
        problem = None
        if workload.supports_tp:
            try:
                _check_tp_plan(workload, model, name)
            except ConfigError as exc:
                problem = str(exc)
    return {
        "name": name,
        "description": workload.description,
        "parameters": sum(p.numel() for p in model.parameters()),
        "pipeline_units": len(model.units),
        "tp_plan": workload.supports_tp and not problem,
        "tp_plan_problem": problem,
        "forward_flops_per_sample": workload.forward_flops_per_sample,
    }


__all__ = ["FACTORIES", "GENERIC_STRATEGIES", "StagedModel", "Workload", "catalog", "check", "describe", "make"]
