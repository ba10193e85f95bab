"""Which parameters, units and boundaries each pipeline rank holds (torch-free mirror of
``parbench.strategies.pipeline``: contiguous chunks, earlier chunks take the remainder; rank r holds
chunks r, r + pp, ... as in the interleaved layout of Narayanan et al., SC 2021)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate, chain

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
    holders: tuple[Unit, ...]
    """Every unit whose parameters the stage holds, in registration order: per chunk pre (first chunk), its
    units, post (last chunk) and the embedding's copy (``ModelSpec.embedding_copy``, as a unit of its own)."""
    root: tuple[Tensor, ...] = ()
    """The tensors of pre, post and the copy: what the root module wraps (FSDP's last group)."""
    chunk_holders: tuple[int, ...] = ()
    """Per chunk, how many of ``holders`` are its own (in order; empty: all of them the one chunk's)."""

    @cached_property
    def tensors(self) -> tuple[Tensor, ...]:
        """Every parameter tensor of the stage in registration order."""
        return tuple(t for h in self.holders for t in h.params)

    def local_numels(self, tp: int) -> tuple[int, ...]:
        """Each parameter tensor's tensor-parallel-local elements, in registration order."""
        return tuple(chain.from_iterable(h.local_numels(tp) for h in self.holders))

    def chunk_local_numels(self, tp: int) -> tuple[tuple[int, ...], ...]:
        """``local_numels`` per chunk: each model chunk's own tensors (Megatron wraps each chunk in its own DDP)."""
        out, start = [], 0
        for n in self.chunk_holders or (len(self.holders),):
            out.append(tuple(chain.from_iterable(h.local_numels(tp) for h in self.holders[start:start + n])))
            start += n
        return tuple(out)

    def expert_numel(self, tp: int) -> int:
        """Tensor-parallel-local elements of the experts' tensors the stage holds."""
        return sum(h.expert_numel(tp) for h in self.holders)

    @cached_property
    def shape_key(self) -> int:
        """One number per distinct stage up to its rank and its tensors' names: its chunks' places in the model,
        its units (``Unit.shape_key``), its tensors' shapes and whether they are the root's (pre, post). Stages
        with equal keys take equal time and send the same bytes: a pipeline's middle stages are timed once."""
        tensors = tuple((t.name.startswith(("pre.", "post.")), t.shape, t.tp_split, t.expert, t.linear)
                        for t in self.tensors)
        key = (tuple((c.first, c.last) for c in self.chunks), tuple(tuple(u.shape_key for u in m) for m in self.modules),
               tensors)
        return _STAGE_KEYS.setdefault(key, len(_STAGE_KEYS))


_STAGE_KEYS: dict[tuple, int] = {}
"""Stage shapes seen in this process -> their ``Stage.shape_key``."""


@lru_cache(maxsize=4096)
def stages(model: ModelSpec, pp: int, v: int | tuple[int, ...]) -> tuple[Stage, ...]:
    """The pipeline ranks of ``model``: ``v`` chunks per rank, contiguous (``Layout.split``), or the layers of
    every chunk in order (``Layout.chunk_layers``, which must add up to the model's layers)."""
    if isinstance(v, tuple):
        if sum(v) != len(model.units) or len(v) % pp:
            raise ValueError(f"chunk_layers={v} must add up to the model's {len(model.units)} layers "
                             f"in a multiple of pp={pp} chunks")
        n, ends = len(v), list(accumulate(v))
        bounds = list(zip([0, *ends[:-1]], ends))
    else:  # the blocks split evenly; multi-token-prediction layers join the last chunk (Megatron-LM's default)
        n = pp * v
        bounds = contiguous_splits(model.blocks, n)
        bounds[-1] = (bounds[-1][0], len(model.units))
    copy = Unit(params=(model.embedding_copy,), gemms=(), out_elems_per_sample=0) if model.embedding_copy else None
    out = []
    for rank in range(pp):
        chunks, modules, holders, root, counts = [], [], [], [], []
        for index in range(rank, n, pp):
            lo, hi = bounds[index]
            c = Chunk(index, lo, hi, index == 0, index == n - 1)
            chunks.append(c)
            units = model.units[lo:hi]
            modules.append(units)
            ends = ((model.pre,) if c.first else (), (model.post,) if c.last else (),
                    (copy,) if c.last and not c.first and copy else ())
            own = [*ends[0], *units, *ends[1], *ends[2]]
            holders += own
            counts.append(len(own))
            root += [t for u in (*ends[0], *ends[1], *ends[2]) for t in u.params]
        out.append(Stage(rank, tuple(chunks), tuple(modules), tuple(holders), tuple(root), tuple(counts)))
    return tuple(out)


def megatron_pipeline_layout(text: str) -> tuple[int, ...]:
    """The layers of every chunk from Megatron-LM's ``pipeline_model_parallel_layout`` string: ``t`` a
    transformer layer, ``m`` a multi-token-prediction layer (last chunk only, after its blocks), ``E`` the
    embedding (first chunk only), ``L`` the loss and head (last chunk only), ``|`` between chunks, ``x*n`` and
    ``(...)*n`` repeating, commas and spaces ignored. For example ``"Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"``: 40
    chunks of 2 layers but one of 3 and the last of 1; ``"Et*4|(t*4|)*14,tmL"``: the last chunk a block and
    the MTP layer."""
    flat = _expand(text.replace(",", "").replace(" ", ""))
    if set(flat) - set("tmEL|"):
        raise ValueError(f"pipeline layout {text!r}: only t, m, E, L, |, *n and parentheses are understood")
    chunks = flat.split("|")
    if "m" in "".join(chunks[:-1]) or "t" in chunks[-1].partition("m")[2]:
        raise ValueError(f"pipeline layout {text!r}: multi-token-prediction layers m close the last chunk, after its blocks")
    if "E" in "".join(chunks[1:]) or flat.count("E") != 1 or not chunks[0].startswith("E"):
        raise ValueError(f"pipeline layout {text!r}: the embedding E opens the first chunk, once")
    if "L" in "".join(chunks[:-1]) or flat.count("L") != 1 or not chunks[-1].endswith("L"):
        raise ValueError(f"pipeline layout {text!r}: the loss L closes the last chunk, once")
    return tuple(c.count("t") + c.count("m") for c in chunks)


def account_for_ends(blocks: int, chunks: int, mtp: int = 0) -> tuple[int, ...]:
    """The layers of every chunk under Megatron-LM's ``account_for_embedding_in_pipeline_split`` and
    ``account_for_loss_in_pipeline_split``: the embedding and the loss each count as one layer of the even split,
    so blocks + 2 fill the chunks evenly and the first and the last chunk hold one block fewer (Llama 3.1 405B's
    126 blocks over 64 chunks: 1, 2 x 62, 1). Multi-token-prediction layers join the last chunk."""
    per, rest = divmod(blocks + 2, chunks)
    if rest or per < 2:
        raise ValueError(f"accounting for the embedding and the loss needs blocks + 2 = {blocks + 2} to split into "
                         f"{chunks} chunks of 2 or more layers each")
    return (per - 1, *(per,) * (chunks - 2), per - 1 + mtp) if chunks > 1 else (blocks + mtp,)


def _expand(text: str) -> str:
    """``(...)*n`` and ``x*n`` written out, innermost groups first."""
    group = re.compile(r"\(([^()]*)\)\*(\d+)")
    while group.search(text):
        text = group.sub(lambda m: m.group(1) * int(m.group(2)), text)
    if "(" in text or ")" in text:
        raise ValueError(f"pipeline layout: unbalanced or unrepeated parentheses in {text!r}")
    return re.sub(r"([tmEL])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
