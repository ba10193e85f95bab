"""The overhead gate: how much slower a step is under parbench's instrumentation than in a bare loop.

Both sides are measured in the same rank processes (``harness``). The bare side is the lower bound
a user would write, on inputs built before it starts: for ddp a plain torch ``DistributedDataParallel``
loop on one prebuilt batch, for the other strategies their own step with its inputs made ahead. The
timed side is the runner's timed loop, inputs made before it, as a run does. Two figures:

* **direct**: interleaved blocks of bare and instrumented steps, ``min(instrumented) / min(bare)``
  (interference only ever adds time, so each mode's fastest block is its least-disturbed cost,
  the estimator timeit recommends) and the median of the per-round ratios. On a shared 2-core
  machine these swing by tens of percent between rounds: they cannot resolve 3%.
* **gated**: ``1 + loop_cost / min(bare)``, where ``loop_cost`` is what the runner's timed loop adds
  per step (a clock per step; two barriers and two OS counter reads per chunk), measured on an empty
  step in 10 chunks of 10 and
  taken at its fastest chunk. The cost is small and repeated many times, so it is resolvable;
  dividing by the *fastest* bare step makes the ratio an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from parbench.metrics import stats

# What the runner's timed loop (a clock per step, a barrier pair and /proc/self/io per chunk of
# steps) may add to a step. Its steps run back to back, so the cost is a clock read plus a barrier
# pair shared by the chunk's steps: 1.002-1.022 per strategy at world size 2 on 2 cores (README,
# "Benchmarks and regression gates").
TIMED_BOUND = 1.03


@dataclass(frozen=True, kw_only=True)
class Overhead:
    """Instrumented vs bare step time of one strategy, measured in the same processes."""

    strategy: str
    bare_s_min: float
    """Fastest bare block, seconds per step."""
    ratio_min: float
    """min(instrumented blocks) / min(bare blocks): the direct A/B figure."""
    ratio_median: float
    """Median over rounds of instrumented / bare (the same round): a cross-check."""
    ratio_spread: tuple[float, float]
    """(p10, p90) of the per-round ratios: how noisy the machine was."""

    loop_cost_s: float | None = None
    """Seconds per step the timed loop adds around an empty step (fastest chunk), if measured."""

    @property
    def ratio_loop(self) -> float | None:
        """1 + loop_cost / fastest bare step: the gated figure."""
        return None if self.loop_cost_s is None else 1 + self.loop_cost_s / self.bare_s_min

    def passes(self, bound: float = TIMED_BOUND) -> bool:
        return (self.ratio_loop if self.ratio_loop is not None else self.ratio_min) <= bound

    def describe(self, bound: float = TIMED_BOUND) -> str:
        verdict = "ok" if self.passes(bound) else "FAIL"
        gated = f"1 + loop/bare = {self.ratio_loop:.4f}" if self.ratio_loop is not None else ""
        return (f"{self.strategy:>10}: {gated} (bound {bound:.2f}, {verdict}); direct min-ratio {self.ratio_min:.4f}, "
                f"median of rounds {self.ratio_median:.4f}, p10-p90 {self.ratio_spread[0]:.3f}-"
                f"{self.ratio_spread[1]:.3f}; bare step {self.bare_s_min * 1e3:.2f} ms")


def overhead(strategy: str, bare_s: list[float], instrumented_s: list[float],
             loop_cost_s: list[float] | None = None) -> Overhead:
    """Overhead from per-block seconds per step; block k of each list belongs to round k."""
    if not bare_s or len(bare_s) != len(instrumented_s):
        raise ValueError(f"need one instrumented block per bare block, got {len(instrumented_s)} and {len(bare_s)}")
    ratios = [i / b for i, b in zip(instrumented_s, bare_s)]
    return Overhead(strategy=strategy, bare_s_min=min(bare_s), ratio_min=min(instrumented_s) / min(bare_s),
                    ratio_median=stats.median(ratios),
                    ratio_spread=(stats.quantile(ratios, 0.1), stats.quantile(ratios, 0.9)),
                    loop_cost_s=min(loop_cost_s) if loop_cost_s else None)


def from_times(strategy: str, times: dict[str, list[float]], mode: str = "timed") -> Overhead:
    """Overhead of ``mode`` (``timed`` or ``metered``) from a rank's ``times`` (harness output)."""
    loop = times.get("loop_cost_s") if mode == "timed" else None
    return overhead(strategy, times["bare_s"], times[f"{mode}_s"], loop)
