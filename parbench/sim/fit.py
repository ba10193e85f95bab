"""Fitting the latency-bandwidth (alpha-beta) model t = alpha + beta x to measurements, pure Python.

Weighted least squares on relative error (weights 1/t^2) so that small and large sizes count alike
(Hockney, "The communication challenge for MPP", Parallel Computing 1994, defines the model);
the error of a fit is reported on held-out sizes it never saw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from parbench.metrics import stats


@dataclass(frozen=True)
class Fit:
    alpha: float
    """Intercept: seconds at size 0 (latency, launch overhead)."""
    beta: float
    """Seconds per unit of size (1 / bandwidth or 1 / throughput)."""
    train_error_pct: float
    heldout_error_pct: float
    """Median absolute percentage error on the held-out points (nan when none were held out)."""
    heldout_max_error_pct: float

    def predict(self, x: float) -> float:
        return self.alpha + self.beta * x


def fit_alpha_beta(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Minimise sum(((alpha + beta x) - y) / y)^2; alpha and beta clamped to >= 0 (refit when clamped)."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"need >= 2 points of (x, y), got {len(xs)} and {len(ys)}")
    w = [1.0 / (y * y) for y in ys]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs))
    sy = sum(wi * y for wi, y in zip(w, ys))
    sxx = sum(wi * x * x for wi, x in zip(w, xs))
    sxy = sum(wi * x * y for wi, x, y in zip(w, xs, ys))
    det = sw * sxx - sx * sx
    if det == 0:
        raise ValueError("all sizes are equal: cannot separate latency from bandwidth")
    beta = (sw * sxy - sx * sy) / det
    alpha = (sy - beta * sx) / sw
    if alpha < 0:
        alpha, beta = 0.0, sxy / sxx
    if beta < 0:
        alpha, beta = sy / sw, 0.0
    return alpha, beta


def pct_errors(alpha: float, beta: float, xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    return [abs(alpha + beta * x - y) / y * 100 for x, y in zip(xs, ys)]


def fit_with_holdout(xs: Sequence[float], ys: Sequence[float], *, every: int = 3) -> Fit:
    """Fit on all points but every ``every``-th (from the second), report the error on those held out."""
    held = [i for i in range(len(xs)) if i % every == 1] if len(xs) >= 4 else []
    train = [i for i in range(len(xs)) if i not in held]
    alpha, beta = fit_alpha_beta([xs[i] for i in train], [ys[i] for i in train])
    tr = pct_errors(alpha, beta, [xs[i] for i in train], [ys[i] for i in train])
    ho = pct_errors(alpha, beta, [xs[i] for i in held], [ys[i] for i in held])
    return Fit(alpha, beta, stats.median(tr), stats.median(ho) if ho else math.nan, max(ho) if ho else math.nan)
