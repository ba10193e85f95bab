"""What a training run of a given length costs at a predicted step: its steps, its days and its GPU-hours.

A run of T tokens takes ceil(T / tokens per step) whole steps, each at the predicted step time; its GPU-hours are
its seconds x its GPUs / 3600, the unit in which model cards report what a training run used. What the step does not
hold is left out and said so: failures and restarts, evaluation, checkpoints, a batch ramp-up, the job's start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
"""Count suffixes as token counts are written (15.6T, 300B): powers of 1000."""
LEFT_OUT = "no failures, restarts, evaluation, checkpoints or batch ramp-up"


@dataclass(frozen=True, kw_only=True)
class TrainingRun:
    tokens: int
    """tokens the run trains on"""
    steps: int
    """whole optimizer steps: ceil(tokens / tokens per step)"""
    seconds: float
    """steps x the predicted step time"""
    gpu_hours: float
    """seconds x GPUs / 3600"""

    @property
    def days(self) -> float:
        return self.seconds / 86400

    def as_dict(self) -> dict:
        return {"tokens": self.tokens, "steps": self.steps, "seconds": self.seconds, "days": self.days,
                "gpu_hours": self.gpu_hours}


def training_run(tokens: int, *, tokens_per_step: int, step_time_s: float, gpus: int) -> TrainingRun:
    """A run of ``tokens`` at ``tokens_per_step`` a step of ``step_time_s`` on ``gpus`` devices."""
    if tokens < 1 or tokens_per_step < 1 or gpus < 1 or step_time_s <= 0:
        raise ValueError(f"tokens={tokens}, tokens_per_step={tokens_per_step} and gpus={gpus} must be >= 1, "
                         f"step_time_s={step_time_s} > 0")
    steps = -(-tokens // tokens_per_step)
    seconds = steps * step_time_s
    return TrainingRun(tokens=tokens, steps=steps, seconds=seconds, gpu_hours=seconds * gpus / 3600)


def parse_tokens(text: str) -> int:
    """A token count as written on the command line: 15600000000000, 15.6e12 or 15.6T (K, M, B or G, T: powers of
    1000); ValueError naming the text where it is none, or below one token."""
    s = text.strip().upper()
    scale = SUFFIXES.get(s[-1:], 1)
    try:
        value = float(s[:-1] if s[-1:] in SUFFIXES else s) * scale
    except ValueError:
        raise ValueError(f"{text!r} is not a token count (e.g. 15.6T, 300B, 2e12)") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{text!r} must be at least one token")
    return round(value)


def format_count(x: float) -> str:
    """4 significant figures with the largest suffix at or below ``x`` (21.29M, 1.5T): how cards print GPU-hours."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if x >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"
