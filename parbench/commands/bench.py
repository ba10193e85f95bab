"""``parbench bench``: the golden file, the overhead measurement and the CI gates."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="parbench's own benchmarks and regression gates", description=__doc__)
    actions = p.add_subparsers(dest="bench_command", required=True, metavar="ACTION")
    g = actions.add_parser("golden", help="compare every strategy's deterministic figures with the golden file")
    g.add_argument("--update", action="store_true", help="write the measured figures to the golden file")
    g.add_argument("--reason", default="", help="why the figures changed (required with --update)")
    g.add_argument("--path", required=True, help="the golden file (a checkout keeps it beside its benchmark tests)")
    g.set_defaults(handler=handle_golden)
    o = actions.add_parser("overhead", help="instrumented vs bare step time of each strategy")
    o.add_argument("--strategy", action="append", help="repeatable; default every implemented strategy")
    o.add_argument("--blocks", type=int, default=7, help="measurement blocks (the median over them is reported)")
    o.add_argument("--steps-per-block", type=int, default=2, help="training steps per block")
    o.add_argument("--workload", default=None, help="mlp or transformer at its default shape "
                                                    "(default: the fixed benchmark shape, a 2-block transformer)")
    o.add_argument("--global-batch-size", type=int, default=None, help="default: the benchmark's 16")
    o.set_defaults(handler=handle_overhead)
    c = actions.add_parser("gate", help="the CI gates: golden, overhead, timing vs a same-machine baseline")
    c.add_argument("--suite", required=True, help="the benchmark test directory (pytest runs it with benchmarks on)")
    c.add_argument("--storage", default="results/benchmarks", help="pytest-benchmark storage directory")
    c.add_argument("--threshold", default=None, help="pytest-benchmark compare-fail expression (default median:300%%)")
    c.set_defaults(handler=handle_gate)
    n = actions.add_parser("noise", help="run-to-run spread of the saved runs' medians (to choose the threshold)")
    n.add_argument("--storage", default="results/benchmarks", help="pytest-benchmark storage directory")
    n.set_defaults(handler=handle_noise)


def handle_golden(a: argparse.Namespace) -> int:
    from parbench.bench import golden

    path = a.path
    measured = golden.measure_all()
    if a.update:
        changed = golden.update(measured, a.reason, path)  # GoldenError (a ValueError) without a reason
        print(f"{path}: {len(changed)} figures changed" + "".join(f"\n  {c}" for c in changed[:40]))
        return 0
    problems = golden.check(measured, path)
    print("\n".join(problems) if problems else f"{path}: every figure matches")
    return 1 if problems else 0


def handle_overhead(a: argparse.Namespace) -> int:
    from parbench.bench import harness, overhead
    from parbench.config import ConfigError, WorkloadConfig

    changes = {"workload": WorkloadConfig(name=a.workload)} if a.workload else {}
    if a.global_batch_size:
        changes["global_batch_size"] = a.global_batch_size
    for strategy in a.strategy or harness.implemented_strategies():
        try:
            run = harness.bench_config(strategy, **changes)
        except ConfigError as exc:
            print(f"{harness.Strategy(strategy).value:>10}: skipped ({exc})")
            continue
        spec = harness.BenchSpec(run=run, blocks=a.blocks, steps_per_block=a.steps_per_block)
        times = harness.launch_bench(spec)[0]["times"]
        print(overhead.from_times(harness.Strategy(strategy).value, times, "timed").describe())
        metered = overhead.from_times(harness.Strategy(strategy).value, times, "metered")
        print(f"{'':>10}  all meters on / bare = {metered.ratio_min:.3f} (probe step only, not gated)")
    return 0


def handle_gate(a: argparse.Namespace) -> int:
    from pathlib import Path

    from parbench.bench import gate
    from parbench.config import ConfigError

    suite = Path(a.suite)
    if not suite.is_dir():  # before pytest starts: its own message would be "no benchmark run"
        raise ConfigError(f"--suite {a.suite}: no such directory (the directory of the benchmark tests)")
    # a directory without pytest-benchmark tests would run whatever tests it holds, under the gate's timing
    if not any("benchmark" in f.read_text(errors="replace") for f in suite.glob("test_*.py")):
        raise ConfigError(f"--suite {a.suite}: no test_*.py there uses pytest-benchmark's `benchmark` fixture "
                          "(the directory of the benchmark tests)")
    return gate.run(a.storage, suite=a.suite, threshold=a.threshold or gate.THRESHOLD)


def handle_noise(a: argparse.Namespace) -> int:
    from parbench.bench import history

    frame = history.load_history(a.storage)
    n = history.noise(frame)
    print(f"{frame['file'].nunique()} saved runs, {n['pairs']} consecutive pairs: |median change| "
          f"p50 {n['p50_pct']:.1f}%, p90 {n['p90_pct']:.1f}%, max {n['max_pct']:.1f}%")
    return 0
