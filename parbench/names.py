"""The names every layer shares, torch-free and import-free: enums, the error type, fixed vocabularies.

This module imports nothing from parbench, so anything (the configuration, the simulator, the
dashboard) can import it without pulling in torch or forming an import circle.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ConfigError(ValueError):
    """A configuration that cannot run; the message names every offending factor."""


class Strategy(str, enum.Enum):
    SINGLE = "single"
    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    FSDP = "fsdp"
    TP = "tp"
    PIPELINE = "pipeline"
    HYBRID = "hybrid"
    PS = "ps"
    EP = "ep"


class Schedule(str, enum.Enum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED_1F1B = "interleaved1f1b"


class DataMode(str, enum.Enum):
    SHARDED = "sharded"  # every rank materialises only its own shard: no data traffic
    RANK0 = "rank0"  # rank 0 reads the global batch and scatters it: data traffic


class Backend(str, enum.Enum):
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"


class DataParallelMode(str, enum.Enum):
    """How the data-parallel dimension of a hybrid mesh replicates the model."""

    DDP = "ddp"
    FSDP = "fsdp"


WORKLOAD_NAMES = ("mlp", "transformer", "hf-llama", "hf-gpt2", "moe")
"""Built-in workloads; plugins are named ``module:factory``, ``path/file.py:factory`` or by entry point."""
TOKEN_WORKLOADS = ("transformer", "hf-llama", "hf-gpt2", "moe")
"""Workloads whose shape is (layers, hidden, heads, seq_len, vocab_size)."""
PLUGIN_GROUP = "parbench.workloads"
"""The entry-point group installed plugins register their factories in."""
DEVICES = ("cpu", "cuda")
RUN_PRECISIONS = ("fp32", "tf32", "bf16")
"""Precisions the runner trains in (the simulator's presets add fp8)."""
DATASETS = ("synthetic", "digits", "mnist")
MAX_LAYERS = 10_000
"""The deepest model a run or a prediction takes: ten times the deepest transformer trained in print (DeepNet,
Wang et al. 2022, 1,000 layers). Building a model and predicting one walk its layers (a prediction 0.2 ms each on
this project's 2-core machine), so a mistyped depth of 10^9 would run for days where it is refused at once."""
FAULTS = ("raise", "hang", "crash", "nan")
"""What ``inject_fault`` can make a rank do: raise an exception, hang, die by SIGKILL, or poison its
parameters with NaN (the loss turns non-finite on every rank that shares them)."""


@dataclass(frozen=True)
class Fault:
    """``RANK:KIND:STEP``: rank RANK does KIND at step STEP (steps counted from 0 over warm-up,
    probe and timed steps)."""

    rank: int
    kind: str
    step: int

    @classmethod
    def parse(cls, text: str) -> "Fault":
        parts = text.split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit() or parts[1] not in FAULTS:
            raise ConfigError(f"inject_fault={text!r}: expected RANK:KIND:STEP with KIND one of "
                              f"{', '.join(FAULTS)} (e.g. 1:hang:3)")
        return cls(rank=int(parts[0]), kind=parts[1], step=int(parts[2]))
