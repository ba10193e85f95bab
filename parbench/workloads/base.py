"""The workload interface: a model made of pipeline units, deterministic data, loss and FLOPs.

Every model is a ``StagedModel``: ``pre`` (e.g. embeddings), a list of ``units`` (the layers a
pipeline may split between), and ``post`` (e.g. the head). A pipeline stage is the same class
holding a slice of the units, so the single-process model and every stage share one forward.

A workload is a ``Workload`` returned by a factory ``(cfg: WorkloadConfig, seed: int) -> Workload``.
The built-ins (``mlp``, ``transformer``, ``hf-*``) and plugins use this one interface; strategies
use nothing else. What a workload can run follows from what it provides:

- any workload: single, ddp, zero1, zero2, fsdp, ps (they need build, batch, loss, optimizer);
- ``tp`` and hybrids with tp > 1: ``tp_plan``;
- ``pipeline`` and hybrids with pp > 1: at least as many units (or ``split_points`` + 1) as stages.

``parbench.workloads.check`` verifies this before any rank is spawned.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


class StagedModel(nn.Module):
    """pre -> units... -> post; a stage of a pipeline keeps only its slice of this."""

    def __init__(self, pre: nn.Module | None, units: list[nn.Module], post: nn.Module | None) -> None:
        super().__init__()
        self.pre = pre if pre is not None else nn.Identity()
        self.units = nn.ModuleList(units)
        self.post = post if post is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        for unit in self.units:
            x = unit(x)
        return self.post(x)


def step_generator(seed: int, step: int, salt: str = "") -> torch.Generator:
    """A generator whose stream depends only on (seed, step, salt): same batch on every rank and strategy."""
    digest = hashlib.sha256(f"{seed}:{step}:{salt}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


@dataclass(frozen=True)
class Workload:
    """What a strategy needs from a model: build it, feed it, score it, count its FLOPs."""

    name: str
    build: Callable[[int], StagedModel]
    """seed -> the full model, initialised deterministically."""
    batch: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]
    """(step, global_batch_size) -> (inputs, targets) of the whole global batch."""
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """(output, targets) -> mean loss over the samples given."""
    optimizer: Callable[[list[nn.Parameter], float], torch.optim.Optimizer]
    forward_flops_per_sample: int
    """Multiply-adds x 2 of one sample's forward pass (the 6N-style estimate's 2N)."""
    tokens_per_sample: int | None = None
    tp_plan: Callable[[StagedModel], dict] | None = None
    """model -> {module path: ParallelStyle} for torch's parallelize_module, or None if unsupported."""
    shrink_for_tp: Callable[[StagedModel, int], None] | None = None
    """(model, tp) -> None: adapt attributes that depend on local head counts after sharding."""
    split_points: tuple[int, ...] | None = None
    """Unit indices where a pipeline stage may begin (each in 1..len(units)-1); None: any unit boundary."""
    description: str = ""
    """One line for ``parbench workloads``."""

    def __post_init__(self) -> None:
        for key in ("build", "batch", "loss", "optimizer"):
            if not callable(getattr(self, key)):
                raise ValueError(f"workload {self.name!r}: {key} must be callable, got {type(getattr(self, key)).__name__}")
        if not isinstance(self.forward_flops_per_sample, int) or self.forward_flops_per_sample < 0:
            raise ValueError(f"workload {self.name!r}: forward_flops_per_sample={self.forward_flops_per_sample!r} "
                             "must be an int >= 0 (0 = unknown)")
        if self.tokens_per_sample is not None and self.tokens_per_sample < 1:
            raise ValueError(f"workload {self.name!r}: tokens_per_sample={self.tokens_per_sample} must be >= 1")
        points = self.split_points
        if points is not None and (list(points) != sorted(set(points)) or any(p < 1 for p in points)):
            raise ValueError(f"workload {self.name!r}: split_points={points} must be increasing unit indices >= 1")

    @property
    def supports_tp(self) -> bool:
        return self.tp_plan is not None

    def stage_starts(self, n_units: int) -> tuple[int, ...]:
        """Unit indices where a stage may begin, besides 0."""
        return tuple(self.split_points) if self.split_points is not None else tuple(range(1, n_units))

    @property
    def train_flops_per_sample(self) -> int:
        """Forward + backward = 3 x forward (backward costs two matmuls per forward matmul; Kaplan et al. 2020)."""
        return 3 * self.forward_flops_per_sample
