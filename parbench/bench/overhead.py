"""The overhead gate: how much slower a step is under parbench's instrumentation than in a bare loop.

Both sides are measured in the same rank processes, in interleaved blocks (``harness``), so the
machine's load hits both alike. The gate statistic is the ratio of the *fastest* block of each
mode, ``min(instrumented) / min(bare)``: interference from other processes only ever adds time,
so each mode's fastest block is its least-disturbed cost (the estimator timeit and
pytest-benchmark's docs recommend on shared machines). The median of the per-round ratios is
reported beside it as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass

from parbench.metrics import stats

# What the runner's timed loop (two barriers per step, a clock, /proc/self/io) may add to a step.
TIMED_BOUND = 1.03


@dataclass(frozen=True, kw_only=True)
class Overhead:
    """Instrumented vs bare step time of one strategy, measured in the same processes."""

    strategy: str
    bare_s_min: float
    """Fastest bare block, seconds per step."""
    ratio_min: float
    """min(instrumented blocks) / min(bare blocks): the gated figure."""
    ratio_median: float
    """Median over rounds of instrumented / bare (the same round): a cross-check."""
    ratio_spread: tuple[float, float]
    """(p10, p90) of the per-round ratios: how noisy the machine was."""

    def passes(self, bound: float = TIMED_BOUND) -> bool:
        return self.ratio_min <= bound

    def describe(self, bound: float = TIMED_BOUND) -> str:
        verdict = "ok" if self.passes(bound) else "FAIL"
        return (f"{self.strategy:>10}: instrumented/bare = {self.ratio_min:.4f} (bound {bound:.2f}, {verdict}); "
                f"median of rounds {self.ratio_median:.4f}, p10-p90 {self.ratio_spread[0]:.3f}-"
                f"{self.ratio_spread[1]:.3f}; bare step {self.bare_s_min * 1e3:.2f} ms")


def overhead(strategy: str, bare_s: list[float], instrumented_s: list[float]) -> Overhead:
    """Overhead from per-block seconds per step; block k of each list belongs to round k."""
    if not bare_s or len(bare_s) != len(instrumented_s):
        raise ValueError(f"need one instrumented block per bare block, got {len(instrumented_s)} and {len(bare_s)}")
    ratios = [i / b for i, b in zip(instrumented_s, bare_s)]
    return Overhead(strategy=strategy, bare_s_min=min(bare_s), ratio_min=min(instrumented_s) / min(bare_s),
                    ratio_median=stats.median(ratios),
                    ratio_spread=(stats.quantile(ratios, 0.1), stats.quantile(ratios, 0.9)))


def from_times(strategy: str, times: dict[str, list[float]], mode: str = "timed") -> Overhead:
    """Overhead of ``mode`` (``timed`` or ``metered``) from a rank's ``times`` (harness output)."""
    return overhead(strategy, times["bare_s"], times[f"{mode}_s"])
