"""A parallel layout: the mesh degrees and the micro-batching of one training step, torch-free.

One home for what a layout is and which layouts are valid (torchtitan's ``ParallelDims`` is the
model): ``RunConfig`` (what the runner runs) and ``sim.Layout`` (what the simulator predicts) both
are a ``ParallelLayout`` plus their own fields, so a rule written here holds for both.

Adding a mesh degree is one field, its name in the class's ``DEGREES``, and a rule if it has one
(``sim.Layout`` adds context parallelism, ``cp``, that way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Iterator

from parbench.names import ConfigError, Schedule

@dataclass(frozen=True, kw_only=True)
class ParallelLayout:
    """Mesh degrees, global batch and pipeline schedule; validated by ``check_layout``."""

    DEGREES: ClassVar[tuple[str, ...]] = ("dp", "tp", "pp")
    """The mesh dimensions; their product is the number of ranks the mesh spans."""
    dp: int = 1
    """Data-parallel replicas."""
    tp: int = 1
    """Tensor-parallel degree (Megatron-style: layers split across ranks)."""
    pp: int = 1
    """Pipeline stages."""
    global_batch_size: int = 1
    """Samples per optimizer step, over all replicas."""
    micro_batches: int = 1
    """Micro-batches per step and replica (pipeline schedules)."""
    schedule: Schedule = Schedule.ONE_F_ONE_B
    """Pipeline schedule: gpipe, 1f1b or interleaved1f1b."""
    virtual_stages: int = 1
    """Model chunks per pipeline rank (interleaved 1F1B only)."""
    ep: int = 1
    """Expert-parallel degree: each MoE layer's experts sharded over groups of ep consecutive dp ranks.
    A degree inside dp, not a mesh dimension of its own (so not in ``DEGREES``): ep divides dp."""

    def __post_init__(self) -> None:
        self.check_layout()

    def check_layout(self) -> None:
        """Raise ConfigError, naming the factors, for the first layout rule broken."""
        for key in (*self.DEGREES, "global_batch_size", "micro_batches", "virtual_stages"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key}={getattr(self, key)} must be >= 1")
        if self.ep < 1 or self.ep_ranks % self.ep:
            raise ConfigError(self.ep_misfit())
        per_step = self.dp * self.micro_batches
        if self.global_batch_size % per_step:
            raise ConfigError(f"global_batch_size={self.global_batch_size} is not divisible by dp x micro_batches "
                              f"= {self.dp} x {self.micro_batches} = {per_step} (data-parallel replicas x "
                              "micro-batches per replica)")
        if not self.uses_pipeline:
            return
        if self.interleaved and self.virtual_stages < 2:
            raise ConfigError("schedule=interleaved1f1b needs virtual_stages >= 2")
        if not self.interleaved and self.virtual_stages != 1:
            raise ConfigError(f"virtual_stages={self.virtual_stages} applies to schedule=interleaved1f1b only")
        if self.interleaved and self.micro_batches % self.pp:
            raise ConfigError(f"interleaved1f1b needs micro_batches={self.micro_batches} divisible by pp={self.pp}")

    def check_mesh_size(self, world_size: int) -> None:
        """The mesh spans exactly ``world_size`` ranks."""
        if self.mesh_size != world_size:
            product = "*".join(str(getattr(self, d)) for d in self.DEGREES)
            raise ConfigError(f"{'*'.join(self.DEGREES)}={product}={self.mesh_size} != world_size={world_size}")

    @property
    def ep_ranks(self) -> int:
        """Ranks each expert-parallel group is drawn from: the data-parallel ones."""
        return self.dp

    def ep_misfit(self) -> str:
        return (f"ep={self.ep} does not divide dp={self.dp} (expert parallelism runs inside data parallelism: "
                "ep groups of ep consecutive data-parallel ranks)")

    @property
    def mesh_size(self) -> int:
        """Ranks the mesh spans: the product of the degrees."""
        return math.prod(getattr(self, d) for d in self.DEGREES)

    @property
    def uses_pipeline(self) -> bool:
        return self.pp > 1

    @property
    def interleaved(self) -> bool:
        return self.schedule is Schedule.INTERLEAVED_1F1B

    @property
    def v(self) -> int:
        """Model chunks per pipeline rank: virtual stages under interleaved 1F1B, else 1."""
        return self.virtual_stages if self.interleaved else 1

    @property
    def chunks(self) -> int:
        """Model chunks in the pipeline: pp x v (Narayanan et al. 2021, interleaved schedule)."""
        return self.pp * self.v

    @property
    def per_replica_batch(self) -> int:
        """Samples one data-parallel replica processes per step."""
        return self.global_batch_size // self.dp

    @property
    def micro_batch_size(self) -> int:
        return self.per_replica_batch // self.micro_batches


def tp_misfit(tp: int, *, hidden: int, heads: int | None) -> str | None:
    """Why ``tp`` cannot split a model of this width and head count (Megatron splits heads and the
    hidden dimension evenly across ranks), or None when it can."""
    if hidden % tp:
        return f"tp={tp} does not divide hidden={hidden}"
    if heads is not None and heads % tp:
        return f"tp={tp} does not divide heads={heads}"
    return None


def meshes(world_size: int, degrees: tuple[str, ...] = ParallelLayout.DEGREES) -> Iterator[dict[str, int]]:
    """Every assignment of ``degrees`` whose product is ``world_size`` (each degree a divisor), in
    lexicographic order of the degrees."""
    def split(n: int, degrees: tuple[str, ...]) -> Iterator[dict[str, int]]:
        if len(degrees) == 1:
            yield {degrees[0]: n}
            return
        for d in (d for d in range(1, n + 1) if n % d == 0):
            for rest in split(n // d, degrees[1:]):
                yield {degrees[0]: d, **rest}

    yield from split(world_size, degrees)
