"""Built-in workloads, by name (a registry that is plain data)."""

from __future__ import annotations

from parbench.config import WorkloadConfig
from parbench.workloads import mlp, transformer
from parbench.workloads.base import StagedModel, Workload

FACTORIES = {"mlp": mlp.make, "transformer": transformer.make}


def make(cfg: WorkloadConfig, seed: int) -> Workload:
    return FACTORIES[cfg.name](cfg, seed)


__all__ = ["FACTORIES", "StagedModel", "Workload", "make"]
