"""Shared fixtures: one launch per strategy per session, reused by the step benchmarks and the golden gate.

With ``--benchmark-disable`` (the default run, pyproject addopts) each strategy runs a single block
of each mode: the golden figures are still exact, the benchmarks run once as smoke tests.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from parbench.bench import harness

# Benchmark mode: 7 rounds x 3 modes x 2 steps per strategy (see README, "Benchmarks and regression gates").
BENCH_BLOCKS, BENCH_STEPS_PER_BLOCK = 7, 2


@pytest.fixture(scope="session")
def benchmarks_enabled(request) -> bool:
    opt = request.config.getoption
    return bool(opt("benchmark_enable", default=False) or not opt("benchmark_disable", default=False))


@pytest.fixture(scope="session")
def launched(benchmarks_enabled) -> Callable[[harness.Strategy], tuple[harness.BenchSpec, list[dict[str, Any]]]]:
    """strategy -> (spec, rank results), launched once per session."""
    cache: dict = {}

    def get(strategy):
        if strategy not in cache:
            blocks, steps = (BENCH_BLOCKS, BENCH_STEPS_PER_BLOCK) if benchmarks_enabled else (1, 1)
            spec = harness.BenchSpec(run=harness.bench_config(strategy), blocks=blocks, steps_per_block=steps)
            cache[strategy] = (spec, harness.launch_bench(spec))
        return cache[strategy]

    return get


@pytest.fixture
def record_timings(benchmark) -> Callable[[list[float], dict[str, Any]], None]:
    """Feed timings measured in the rank processes to pytest-benchmark's stats, with extra_info.

    pytest-benchmark times calls in this process; a step runs in W rank processes, so the ranks
    time it and the values go in through the fixture's stats object (``_make_stats``, the
    pytest-benchmark 5 internals that ``pedantic`` itself uses).
    """

    def record(seconds: list[float], extra: dict[str, Any]) -> None:
        benchmark.extra_info.update(extra)
        if benchmark.disabled:
            benchmark._mode = "disabled"  # used, nothing to time (the fixture warns otherwise)
            return
        stats = benchmark._make_stats(1)
        for s in seconds:
            stats.update(s)
        benchmark._mode = "timings measured in the rank processes"

    return record
