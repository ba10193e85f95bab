"""The workload interface: a model made of pipeline units, deterministic data, loss and FLOPs.

Every model is a ``StagedModel``: ``pre`` (e.g. embeddings), a list of ``units`` (the layers a
pipeline may split between), and ``post`` (e.g. the head). A pipeline stage is the same class
holding a slice of the units, so the single-process model and every stage share one forward.
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

    @property
    def train_flops_per_sample(self) -> int:
        """Forward + backward = 3 x forward (backward costs two matmuls per forward matmul; Kaplan et al. 2020)."""
        return 3 * self.forward_flops_per_sample
