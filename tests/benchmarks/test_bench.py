"""pytest-benchmark benchmarks: a step of every strategy (bare, runner-timed, all meters on), the fixed
cost of a launch, and loading a large results directory. Every benchmark carries its deterministic
figures in ``extra_info``."""

from __future__ import annotations

import copy

import pytest

from parbench.bench import golden, harness, overhead
from parbench.launch import run
from parbench.results import load, write_record

STRATEGIES = harness.implemented_strategies()
N_RECORDS = 2000


def _figures(spec, ranks) -> dict:
    """Deterministic figures for extra_info: the golden entry (shape, per-rank bytes and counts)."""
    return golden.entry(spec, ranks)


@pytest.mark.parametrize("mode", harness.MODES)
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.value)
def test_step(strategy, mode, launched, benchmark, record_timings):
    """One training step, seconds per step of each block; ``timed`` is what a record reports."""
    spec, ranks = launched(strategy)
    times = ranks[0]["times"]  # barriers end every block together: rank 0's clock is the run's
    benchmark.group = f"step-{strategy.value}"
    extra = {"strategy": strategy.value, "mode": mode, "steps_per_block": spec.steps_per_block,
             **_figures(spec, ranks)}
    if mode != "bare":
        o = overhead.from_times(strategy.value, times, mode)
        extra.update(overhead_ratio_gated=o.ratio_loop, loop_cost_s=o.loop_cost_s, overhead_ratio_min=o.ratio_min, overhead_ratio_median=o.ratio_median,
                     overhead_ratio_p10=o.ratio_spread[0], overhead_ratio_p90=o.ratio_spread[1])
    record_timings(times[f"{mode}_s"], extra)
    assert len(times[f"{mode}_s"]) == spec.blocks and min(times[f"{mode}_s"]) > 0
    assert len(times["timed_step_times_s"]) == spec.blocks * spec.steps_per_block


def test_launch_overhead(benchmarks_enabled, record_timings):
    """Fixed cost of one run: wall_time_s - timed steps (spawn, rendezvous, build, warm-up, teardown)."""
    cfg = harness.bench_config("ddp")
    records = [run(cfg, results_dir=None) for _ in range(3 if benchmarks_enabled else 1)]
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    record_timings([r["overhead_s"] for r in records],
                   {"world_size": cfg.world_size, "comm_parameter_bytes_per_step": records[0]["comm_parameter_bytes_per_step"],
                    "mem_param_bytes": records[0]["mem_param_bytes"],
                    "wall_time_s": [r["wall_time_s"] for r in records]})
    assert all(0 < r["overhead_s"] < r["wall_time_s"] for r in records)


@pytest.fixture(scope="module")
def large_results_dir(tmp_path_factory):
    """2000 synthetic records (copies of one real-looking record with distinct ids and steps)."""
    root = tmp_path_factory.mktemp("results")
    template = _synthetic_record()
    for i in range(N_RECORDS):
        rec = copy.deepcopy(template)
        rec.update(run_id=f"{i:032x}", steps=10 + i % 7, step_time_s_median=0.01 + i * 1e-6)
        write_record(root, rec)
    return root


def test_results_load(large_results_dir, benchmark):
    benchmark.extra_info.update(n_records=N_RECORDS,
                                bytes_on_disk=sum(p.stat().st_size for p in large_results_dir.rglob("*.json")))
    frame = benchmark.pedantic(load, args=(large_results_dir,), rounds=5, warmup_rounds=1)
    assert len(frame) == N_RECORDS and frame["steps"].sum() == sum(10 + i % 7 for i in range(N_RECORDS))


def _synthetic_record() -> dict:
    from parbench.results import SCHEMA

    rec = {key: None for key in SCHEMA}
    rec.update(schema_version=1, status="ok", strategy="ddp", world_size=2, workload="mlp", layers=1,
               hidden=512, global_batch_size=64, step_times_s=[0.01] * 10, losses=[2.3] * 10,
               config={"strategy": "ddp", "world_size": 2, "global_batch_size": 64,
                       "workload": {"name": "mlp", "layers": 1, "hidden": 512}},
               per_rank=[{"rank": r, "mem_param_bytes": 1_628_200, "comm_parameter_bytes_per_step": 1_628_200}
                         for r in range(2)],
               comm_ops={"all_reduce/parameter": {"count": 1, "payload_bytes": 1_628_200,
                                                  "sent_bytes": 1_628_200, "wire_bytes": 1_628_200}})
    return rec
