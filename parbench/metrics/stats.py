"""Small, pure statistics (pytest-benchmark's stats.py is the model): medians and spreads, no bare means."""

from __future__ import annotations

import math
from typing import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default, Hyndman & Fan type 7)."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


def iqr(values: Sequence[float]) -> float:
    return quantile(values, 0.75) - quantile(values, 0.25)


def summary(values: Sequence[float], prefix: str) -> dict[str, float]:
    """``{prefix}_median``, ``_p10``, ``_p90``, ``_iqr`` of the values."""
    return {
        f"{prefix}_median": median(values),
        f"{prefix}_p10": quantile(values, 0.10),
        f"{prefix}_p90": quantile(values, 0.90),
        f"{prefix}_iqr": iqr(values),
    }
