"""Which parameters, units and boundaries each pipeline rank holds (torch-free mirror of
``parbench.strategies.pipeline``: contiguous chunks, earlier chunks take the remainder; rank r holds
chunks r, r + pp, ... as in the interleaved layout of Narayanan et al., SC 2021)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from parbench.sim.layout import Layout
from parbench.sim.model import ModelSpec, Tensor, Unit
from parbench.splits import contiguous_splits


@dataclass(frozen=True)
class Chunk:
    index: int
    lo: int
    hi: int
    first: bool
    last: bool


@dataclass(frozen=True)
class Stage:
    """One pipeline rank: its chunks, the modules they hold, and their parameter tensors in order."""

    rank: int
    chunks: tuple[Chunk, ...]
    modules: tuple[tuple[Unit, ...], ...]
    """Per chunk: the FSDP units it wraps (pre/post join the chunk's root module)."""
    tensors: tuple[Tensor, ...]
    """Every parameter tensor of the stage in registration order (pre, units, post per chunk)."""


@lru_cache(maxsize=4096)
def stages(model: ModelSpec, pp: int, v: int) -> tuple[Stage, ...]:
    n = pp * v
    bounds = contiguous_splits(len(model.units), n)
    out = []
    for rank in range(pp):
        chunks, modules, tensors = [], [], []
        for index in range(rank, n, pp):
            lo, hi = bounds[index]
            c = Chunk(index, lo, hi, index == 0, index == n - 1)
            chunks.append(c)
            units = model.units[lo:hi]
            modules.append(units)
            copy = (model.tied_head_copy,) if c.last and not c.first and model.tied_head_copy else ()
            tensors += [*(model.pre.params if c.first else ()), *(t for u in units for t in u.params),
                        *(model.post.params if c.last else ()), *copy]
        out.append(Stage(rank, tuple(chunks), tuple(modules), tuple(tensors)))
    return tuple(out)
