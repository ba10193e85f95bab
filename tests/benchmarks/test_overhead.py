"""The overhead gate: exact arithmetic, and a real injected slowdown that must make it fail."""

from __future__ import annotations

import pytest

from parbench.bench import gate, harness, overhead


def test_overhead_figures_exact():
    o = overhead.overhead("ddp", bare_s=[0.010, 0.012, 0.020], instrumented_s=[0.0102, 0.030, 0.0206])
    assert o.bare_s_min == 0.010 and o.ratio_min == pytest.approx(1.02, abs=1e-12)
    assert o.ratio_median == pytest.approx(1.03, abs=1e-12)  # ratios 1.02, 2.5, 1.03
    assert o.passes(1.03) and not o.passes(1.01)
    with pytest.raises(ValueError):
        overhead.overhead("ddp", [0.01], [])
    gated = overhead.overhead("ddp", [0.010, 0.012], [0.5, 0.5], loop_cost_s=[0.0004, 0.0002])
    assert gated.ratio_loop == pytest.approx(1.02, abs=1e-12) and gated.passes(1.03)  # direct ratio 50 ignored


def test_injected_slowdown_fails_the_overhead_gate():
    """A sleep inside every instrumented step (real ranks, ddp at world size 2) trips the gate."""
    spec = harness.BenchSpec(run=harness.bench_config("ddp"), blocks=2, steps_per_block=1, inject_delay_s=0.05)
    times = harness.launch_bench(spec)[0]["times"]
    timed = overhead.from_times("ddp", times, "timed")
    assert timed.loop_cost_s >= 0.05 and not timed.passes(), timed.describe()
    assert not overhead.from_times("ddp", times, "metered").passes()


def test_gate_reads_overhead_from_a_saved_run():
    def bench(name, ratio):
        return {"name": name, "extra_info": {"mode": "timed", "strategy": "ddp", "overhead_ratio_gated": ratio,
                                             "overhead_ratio_min": 2.0, "overhead_ratio_median": 2.0}}

    ok = {"benchmarks": [bench("test_step[ddp-timed]", 1.01), {"name": "test_results_load", "extra_info": {}}]}
    bad = {"benchmarks": [bench("test_step[ddp-timed]", 1.01), bench("test_step[tp-timed]", 1.08)]}
    assert gate.overhead_failures(ok, bound=1.03) == []
    assert [f.split(":")[0] for f in gate.overhead_failures(bad, bound=1.03)] == ["test_step[tp-timed]"]
    assert gate.overhead_failures({"benchmarks": []}, bound=1.03) == ["no benchmark carries an overhead ratio"]


BENCH_FILE = '''
import os, time

def test_sleep(benchmark):
    benchmark.pedantic(time.sleep, args=(float(os.environ["SLEEP_S"]),), rounds=5)
'''


def test_timing_gate_fails_on_a_slowdown_vs_a_same_machine_baseline(tmp_path):
    """The gate's own pytest command: a 50x slower median trips median:300%; the same speed does not."""
    import os
    import subprocess

    from parbench.bench import history

    (tmp_path / "test_sleep_bench.py").write_text(BENCH_FILE)
    storage = tmp_path / "storage"

    def run(sleep_s: str, baseline):
        cmd = gate.pytest_command(storage, baseline, gate.THRESHOLD, target=str(tmp_path / "test_sleep_bench.py"))
        return subprocess.run(cmd + ["-p", "no:cacheprovider", "--rootdir", str(tmp_path)], cwd=tmp_path,
                              env={**os.environ, "SLEEP_S": sleep_s}, capture_output=True, text=True)

    assert run("0.001", None).returncode == 0
    baseline = history.latest_baseline(storage)
    assert baseline is not None  # saved with this machine's host and CPU
    assert run("0.001", baseline).returncode == 0
    slow = run("0.05", baseline)
    assert slow.returncode != 0 and "Performance has regressed" in slow.stdout + slow.stderr
