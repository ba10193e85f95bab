"""The workload interface: a model made of pipeline units, deterministic data, loss and FLOPs.

Every model is a ``StagedModel``: ``pre`` (e.g. embeddings), a list of ``units`` (the layers a
pipeline may split between), and ``post`` (e.g. the head). A pipeline stage is the same class
holding a slice of the units, so the single-process model and every stage share one forward.

A workload is a ``Workload`` returned by a factory ``(cfg: WorkloadConfig, seed: int) -> Workload``.
The built-ins (``mlp``, ``transformer``, ``hf-*``) and plugins use this one interface; strategies
use nothing else. Its data comes in one of three forms (``parbench.data`` feeds each rank from it):

- ``batch_slice(step, global_batch_size, lo, hi)``: samples lo..hi-1 of a step's global batch,
  made without the others, so a data-parallel rank prepares only its own slice (the built-ins);
- ``batch(step, global_batch_size)``: the whole global batch; a rank makes it and keeps its rows;
- ``dataset``: a map-style ``torch.utils.data.Dataset`` of (input, target) samples, read through a
  ``DataLoader`` with a ``DistributedSampler``, as a training job reads it (digits, MNIST, plugins).

What a workload can run follows from what it provides:

- any workload: single, ddp, zero1, zero2, fsdp, ps (they need build, batch, loss, optimizer);
- ``tp`` and hybrids with tp > 1: ``tp_plan``;
- ``pipeline`` and hybrids with pp > 1: at least as many units (or ``split_points`` + 1) as stages.

``parbench.workloads.check`` verifies this before any rank is spawned.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


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


SAMPLE_BLOCK = 8
"""Samples drawn together from one generator by ``sample_rows``. Per sample, a generator of its own
costs ~10 us (hashing, seeding Mersenne Twister, a small draw): more than drawing the whole batch at
once; blocks of 8 made a 32-sample mlp slice 2x cheaper than one generator per sample (measured here)."""


def sample_rows(seed: int, step: int, lo: int, hi: int, salt: str,
                draw: Callable[[torch.Generator, int], tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
    """Samples lo..hi-1 of a step's global batch. Block b (samples 8b..8b+7) is ``draw(g, 8)`` with g
    keyed on (seed, step, salt, b), so a sample does not depend on which rank makes it or how the batch
    is split: any slice equals the same rows of the whole batch, and a rank draws only the blocks its
    slice touches (its own samples, plus at most 7 at either end when the slice is not aligned to 8)."""
    first, last = lo // SAMPLE_BLOCK, (hi - 1) // SAMPLE_BLOCK
    blocks = [draw(step_generator(seed, step, f"{salt}:{b}"), SAMPLE_BLOCK) for b in range(first, last + 1)]
    start = lo - first * SAMPLE_BLOCK
    return tuple(torch.cat(parts)[start:start + hi - lo] for parts in zip(*blocks))


@dataclass(frozen=True)
class Workload:
    """What a strategy needs from a model: build it, feed it, score it, count its FLOPs.

    ``build``, ``loss`` and ``optimizer`` are required (checked in ``__post_init__``); they default to
    None only so that ``batch`` may be left out for ``dataset`` or ``batch_slice``."""

    name: str
    build: Callable[[int], StagedModel] = None
    """seed -> the full model, initialised deterministically."""
    batch: Callable[[int, int], Batch] | None = None
    """(step, global_batch_size) -> (inputs, targets) of the whole global batch (``rows`` reads either)."""
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = None
    """(output, targets) -> mean loss over the samples given."""
    optimizer: Callable[[list[nn.Parameter], float], torch.optim.Optimizer] = None
    forward_flops_per_sample: int = 0
    """Multiply-adds x 2 of one sample's forward pass (the 6N-style estimate's 2N)."""
    tokens_per_sample: int | None = None
    tp_plan: Callable[[StagedModel], dict] | None = None
    """model -> {module path: ParallelStyle} for torch's parallelize_module, or None if unsupported."""
    split_points: tuple[int, ...] | None = None
    """Unit indices where a pipeline stage may begin (each in 1..len(units)-1); None: any unit boundary."""
    description: str = ""
    """One line for ``parbench workloads``."""
    # data besides (or instead of) batch; kept last so positional construction still works
    batch_slice: Callable[[int, int, int, int], Batch] | None = None
    """(step, global_batch_size, lo, hi) -> samples lo..hi-1 of that global batch, equal to
    ``batch(step, global_batch_size)[lo:hi]`` but made without the other samples."""
    dataset: Any = None
    """A map-style torch Dataset of (input, target) samples, instead of ``batch``/``batch_slice``:
    read through a DataLoader with a DistributedSampler (``parbench.data``)."""

    def __post_init__(self) -> None:
        given = [k for k in ("batch", "batch_slice") if getattr(self, k) is not None]
        for key in ("build", "loss", "optimizer", *given):
            if not callable(getattr(self, key)):
                raise ValueError(f"workload {self.name!r}: {key} must be callable, got {type(getattr(self, key)).__name__}")
        self._check_data(given)
        if not isinstance(self.forward_flops_per_sample, int) or self.forward_flops_per_sample < 0:
            raise ValueError(f"workload {self.name!r}: forward_flops_per_sample={self.forward_flops_per_sample!r} "
                             "must be an int >= 0 (0 = unknown)")
        if self.tokens_per_sample is not None and self.tokens_per_sample < 1:
            raise ValueError(f"workload {self.name!r}: tokens_per_sample={self.tokens_per_sample} must be >= 1")
        points = self.split_points
        if points is not None and (list(points) != sorted(set(points)) or any(p < 1 for p in points)):
            raise ValueError(f"workload {self.name!r}: split_points={points} must be increasing unit indices >= 1")

    def _check_data(self, given: list[str]) -> None:
        """Exactly one source of data: a Dataset, or batch and/or batch_slice (``given``)."""
        if self.dataset is not None and given:
            raise ValueError(f"workload {self.name!r}: give a dataset or {' and '.join(given)}, not both")
        if self.dataset is None and not given:
            raise ValueError(f"workload {self.name!r}: needs data: batch, batch_slice or dataset")
        if self.dataset is not None and not (hasattr(self.dataset, "__getitem__") and hasattr(self.dataset, "__len__")):
            raise ValueError(f"workload {self.name!r}: dataset must be a map-style torch Dataset "
                             f"(__getitem__ and __len__), got {type(self.dataset).__name__}")

    def rows(self, step: int, size: int, lo: int, hi: int) -> Batch:
        """Samples lo..hi-1 of step's global batch of ``size``: only those when the workload can make a
        slice (``batch_slice``), else the whole batch cut down (a Dataset is read by ``parbench.data``)."""
        if self.batch_slice is not None:
            return self.batch_slice(step, size, lo, hi)
        x, y = self.batch(step, size)
        return x[lo:hi], y[lo:hi]

    def sample(self, n: int) -> Batch:
        """The first n samples of its data (shapes and dtypes for checks and receive buffers)."""
        if self.batch is not None:
            return self.batch(0, n)  # unsliced: a batch that is not samples-first must show as such
        if self.batch_slice is not None:
            return self.batch_slice(0, n, 0, n)
        from torch.utils.data import default_collate

        return tuple(default_collate([self.dataset[i] for i in range(min(n, len(self.dataset)))]))

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
