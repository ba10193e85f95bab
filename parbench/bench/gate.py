"""The CI gates in one command (``parbench bench gate``), for a noisy 2-core machine.

1. **golden**: the suite's golden test compares every strategy's deterministic figures with the
   committed golden file, exactly (it also runs in the default test run);
2. **overhead**: the runner's timed loop vs the strategy's bare loop on prebuilt inputs (ddp: plain
   torch DDP on one prebuilt batch), the same processes:
   ``1 + loop cost / fastest bare step <= TIMED_BOUND`` for every strategy (``overhead.py``); a
   strategy over the bound is measured again in up to two fresh launches and fails only if it is over every time;
3. **timing**: pytest-benchmark's ``--benchmark-compare-fail=median:THRESHOLD`` against the newest
   saved run **from this machine** (same host and CPU model). A fresh CI machine has none: the run
   is saved and becomes the baseline, and nothing is compared (a baseline from another machine
   would trip or hide regressions by itself).

All three run in one pytest invocation of the benchmark suite (``--suite``) with benchmarks enabled;
the run is saved under the storage directory with pytest-benchmark's machine and commit info.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from parbench.bench import history
from parbench.bench.overhead import TIMED_BOUND

# Above the run-to-run noise measured here (5 runs of unchanged code, load average 9-18: consecutive
# medians changed by up to 212%; README, "Benchmarks and regression gates"; `parbench bench noise`).
THRESHOLD = "median:300%"


def pytest_command(storage: Path, baseline: Path | None, threshold: str, target: str) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", target, "--benchmark-enable",
           f"--benchmark-storage=file://{storage}", "--benchmark-autosave",
           "--benchmark-columns=median,iqr,min,max,rounds", "--benchmark-sort=fullname"]
    if baseline is not None:
        cmd += [f"--benchmark-compare={baseline}", f"--benchmark-compare-fail={threshold}"]
    return cmd


def overhead_failures(doc: dict[str, Any], bound: float = TIMED_BOUND) -> list[str]:
    """Every runner-timed benchmark whose overhead ratio exceeds ``bound`` (none at all is a failure)."""
    gated = [b for b in doc["benchmarks"] if (b.get("extra_info") or {}).get("overhead_ratio_gated") is not None
             and b["extra_info"].get("mode") == "timed"]
    if not gated:
        return ["no benchmark carries an overhead ratio"]
    return [f"{b['name']}: 1 + loop/bare = {b['extra_info']['overhead_ratio_gated']:.4f} > {bound:.2f}"
            for b in gated if b["extra_info"]["overhead_ratio_gated"] > bound]


def overhead_table(doc: dict[str, Any]) -> list[str]:
    rows = [b for b in doc["benchmarks"] if "overhead_ratio_min" in (b.get("extra_info") or {})]
    def gated(e):
        return f"gated 1 + loop/bare {e['overhead_ratio_gated']:.4f}; " if e.get("overhead_ratio_gated") else ""

    return [f"  {e['strategy']:>10} {e['mode']:>8}/bare: {gated(e)}direct min-ratio {e['overhead_ratio_min']:.4f}, "
            f"median of rounds {e['overhead_ratio_median']:.4f}" for e in (b["extra_info"] for b in rows)]


def run(storage: str | Path, *, suite: str | Path, bound: float = TIMED_BOUND, threshold: str = THRESHOLD) -> int:
    """Run the gates over the benchmark suite ``suite``; 0 if all pass. Saves the run under ``storage``
    (both relative to the working directory)."""
    storage = Path(storage).resolve()
    baseline = history.latest_baseline(storage)
    print(f"timing gate: baseline {baseline}" if baseline else
          "timing gate: no saved run from this machine; this run becomes the baseline, nothing compared")
    before = set(history.run_files(storage))
    rc = subprocess.call(pytest_command(storage, baseline, threshold, target=str(suite)))
    saved = sorted(set(history.run_files(storage)) - before)
    if not saved:
        print("gate: pytest saved no benchmark run")
        return rc or 1
    doc = json.loads(saved[-1].read_text())
    print(f"saved {saved[-1]}\noverhead (bound {bound:.2f} on timed/bare):", *overhead_table(doc), sep="\n")
    # a failing strategy is measured again in fresh launches: a barrier delayed by another job's burst
    # does not repeat, a real overhead does (measured here under a load average of 10-14: pipeline's
    # 7.3% re-measured at 4.6%)
    failures = [f for f in overhead_failures(doc, bound) if not any(_remeasure_ok(f, bound) for _ in range(REMEASURES))]
    for f in failures:
        print(f"overhead gate FAILED: {f}")
    return rc or (1 if failures else 0)


REMEASURES = 2
"""Fresh launches a strategy over the bound gets before it fails: on a quiet machine hybrid once read
6.2% and re-measured at 3.6%; a real overhead (the injected-slowdown test) is over every time."""


def _remeasure_ok(failure: str, bound: float) -> bool:
    from parbench.bench import harness, overhead

    strategy = failure.split("[", 1)[1].split("-", 1)[0] if "[" in failure else None
    if strategy is None:
        return False
    spec = harness.BenchSpec(run=harness.bench_config(strategy), blocks=3, steps_per_block=2)
    again = overhead.from_times(strategy, harness.launch_bench(spec)[0]["times"], "timed")
    print(f"overhead gate: {failure}; re-measured: {again.describe(bound)}")
    return again.passes(bound)
