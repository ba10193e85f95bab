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


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank (the "fractional ranking" Spearman's rho uses)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the ranks (ties averaged); NaN for
    fewer than two pairs or a constant side."""
    if len(a) != len(b) or len(a) < 2:
        return math.nan
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else math.nan
