"""Fitting the latency-bandwidth (alpha-beta) model t = alpha + beta x to measurements, pure Python.

Weighted least squares on relative error (weights 1/t^2) so that small and large sizes count alike
(Hockney, "The communication challenge for MPP", Parallel Computing 1994, defines the model);
the error of a fit is reported on held-out sizes it never saw, and each parameter's confidence as its
standard error (the weighted residual variance times the inverse normal matrix; any regression text,
e.g. Draper & Smith, "Applied Regression Analysis", ch. 9). A fit that is not physical (a rate above what
the machine can move, an infinite rate, a clamped negative intercept, a held-out error above
``HELDOUT_LIMIT_PCT``, median over the held-out sizes) is not used: the measured point estimates replace it
(``point_estimates``).
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
    alpha_se: float = math.nan
    """Standard error of alpha (same unit)."""
    beta_se: float = math.nan
    clamped: bool = False
    """The unconstrained fit gave a negative alpha or beta, clamped to 0 (a sign the model does not fit)."""

    def predict(self, x: float) -> float:
        return self.alpha + self.beta * x


HELDOUT_LIMIT_PCT = 25.0


def fit_alpha_beta(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Minimise sum(((alpha + beta x) - y) / y)^2; alpha and beta clamped to >= 0 (refit when clamped)."""
    return _fit(xs, ys)[:2]


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float, bool]:
    """(alpha, beta, se(alpha), se(beta), clamped) of the weighted least-squares line."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"need >= 2 points of (x, y), got {len(xs)} and {len(ys)}")
    if not (all(map(math.isfinite, xs)) and all(1e-150 <= y <= 1e150 for y in ys)):
        raise ValueError("x must be finite and y within 1e-150 to 1e150: each point weighs 1/y^2")
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
    clamped = alpha < 0 or beta < 0
    if alpha < 0:
        alpha, beta = 0.0, sxy / sxx
    if beta < 0:
        alpha, beta = sy / sw, 0.0
    dof = max(len(xs) - 2, 1)
    s2 = sum(wi * (alpha + beta * x - y) ** 2 for wi, x, y in zip(w, xs, ys)) / dof
    return alpha, beta, math.sqrt(s2 * sxx / det), math.sqrt(s2 * sw / det), clamped


def pct_errors(alpha: float, beta: float, xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    return [abs(alpha + beta * x - y) / y * 100 for x, y in zip(xs, ys)]


def fit_with_holdout(xs: Sequence[float], ys: Sequence[float], *, every: int = 3) -> Fit:
    """Fit on all points but every ``every``-th (from the second), report the error on those held out."""
    held = [i for i in range(len(xs)) if i % every == 1] if len(xs) >= 4 else []
    train = [i for i in range(len(xs)) if i not in held]
    alpha, beta, a_se, b_se, clamped = _fit([xs[i] for i in train], [ys[i] for i in train])
    tr = pct_errors(alpha, beta, [xs[i] for i in train], [ys[i] for i in train])
    ho = pct_errors(alpha, beta, [xs[i] for i in held], [ys[i] for i in held])
    return Fit(alpha, beta, stats.median(tr), stats.median(ho) if ho else math.nan, max(ho) if ho else math.nan,
               alpha_se=a_se, beta_se=b_se, clamped=clamped)


def unphysical(fit: Fit, *, max_rate: float = math.inf) -> list[str]:
    """Why a fit cannot describe the machine ([] when it can); ``max_rate``: the fastest physical rate
    (units of x per second), e.g. the memory bandwidth for a link's bandwidth."""
    reasons = []
    if fit.beta <= 0:
        reasons.append("infinite rate (slope 0)")
    elif 1 / fit.beta > max_rate:
        reasons.append(f"rate {1 / fit.beta:.3g}/s above the physical limit {max_rate:.3g}/s")
    if fit.clamped:
        reasons.append("negative intercept or slope (clamped)")
    if fit.heldout_error_pct > HELDOUT_LIMIT_PCT:
        reasons.append(f"held-out error {fit.heldout_error_pct:.0f}% > {HELDOUT_LIMIT_PCT:.0f}%")
    return reasons


def point_estimates(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(alpha, beta) from the measurements themselves: alpha = the fastest of the two smallest sizes' times
    (latency), beta = the median over the largest third of sizes of their time above alpha per unit (the
    whole time where it is not above): both > 0 when the times are, and one noisy point moves neither far."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    alpha = min(ys[i] for i in order[:2])
    top = order[-max(1, len(order) // 3):]
    return alpha, stats.median([(ys[i] - alpha if ys[i] > alpha else ys[i]) / xs[i] for i in top])
