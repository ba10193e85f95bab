"""Exact agreement of predicted and counted bytes (and accounted memory) with real gloo runs of every
strategy the runner has (iterates parbench.strategies.BUILDERS, so new strategies join automatically)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from parbench.cli import main
from parbench.config import RunConfig, Strategy, WorkloadConfig
from parbench.launch import References, run
from parbench.results import host_cpus
from parbench.sim import PRESETS
from parbench.sim.calibrate import machine_drift
from parbench.sim.hardware import cluster_to_dict, profile_path
from parbench.sim.validate import summarize, validation_rows
from parbench.strategies import BUILDERS

TRANSFORMER = WorkloadConfig(name="transformer", layers=2)
WIDE_MLP = WorkloadConfig(name="mlp", layers=3, hidden=1024)  # 11.6 MB: two DDP buckets, odd remainders at n=3

# Small shapes per strategy; rank0 data mode where the strategy moves data, n=3 where integer division bites.
SHAPES: dict[Strategy, list[dict]] = {
    Strategy.SINGLE: [dict(world_size=1, workload=TRANSFORMER)],
    Strategy.DDP: [dict(world_size=3, workload=WIDE_MLP, data_mode="rank0"),
                   # transformers' Llama: its registration order (norms last) and its rotary buffers, which DDP
                   # broadcasts before every forward
                   dict(world_size=2, workload=WorkloadConfig(name="hf-llama", layers=2))],
    Strategy.PIPELINE: [dict(world_size=3, workload=WorkloadConfig(name="transformer", layers=3),
                             micro_batches=4, data_mode="rank0"),
                        dict(world_size=2, workload=WorkloadConfig(name="mlp", layers=3), micro_batches=4,
                             schedule="interleaved1f1b", virtual_stages=2)],
    Strategy.ZERO1: [dict(world_size=3, workload=TRANSFORMER, data_mode="rank0")],
    Strategy.ZERO2: [dict(world_size=3, workload=WorkloadConfig(name="mlp"))],
    Strategy.FSDP: [dict(world_size=2, workload=TRANSFORMER)],
    Strategy.TP: [dict(world_size=2, workload=TRANSFORMER), dict(world_size=2, workload=WorkloadConfig(name="mlp"))],
    Strategy.HYBRID: [dict(world_size=4, dp=2, tp=1, pp=2, micro_batches=2, workload=TRANSFORMER),
                      dict(world_size=4, dp=1, tp=2, pp=2, micro_batches=2, workload=TRANSFORMER),
                      dict(world_size=4, dp=2, tp=2, pp=1, dp_mode="fsdp", workload=TRANSFORMER, data_mode="rank0"),
                      dict(world_size=4, dp=2, tp=1, pp=2, dp_mode="fsdp", micro_batches=2, workload=TRANSFORMER),
                      # experts sharded over ep=2 inside dp=2, one MoE block per pipeline stage
                      dict(world_size=4, dp=2, tp=1, pp=2, ep=2, micro_batches=2,
                           workload=WorkloadConfig(name="moe", layers=2, router="balanced"))],
    # balanced routing: the bytes depend on the shapes only; T k = 64 assignments over 3 experts per
    # sequence in the second case is uneven (22, 21, 21), capped at 22 by the capacity
    Strategy.EP: [dict(world_size=2, workload=WorkloadConfig(name="moe", layers=2, router="balanced")),
                  dict(world_size=4, ep=2, workload=WorkloadConfig(name="moe", layers=4, moe_every=2, experts=6,
                                                                   top_k=2, capacity_factor=1.0, router="balanced"))],
    Strategy.PS: [dict(world_size=3, servers=1, workload=WorkloadConfig(name="mlp"), data_mode="rank0"),
                  dict(world_size=4, servers=2, workload=TRANSFORMER)],
}
STAND_IN = replace(PRESETS["a100-80gb"], name="cpu-stand-in", cores=host_cpus())
"""A profile these CPU runs' step times are compared with (``cores`` this host's, as on a profile ``parbench
calibrate`` measures here), without the minutes a calibration takes: the A100's figures stand in for this host's.
A preset describes a GPU, and validate compares no CPU run's time with one."""
CASES = [(s, i) for s in BUILDERS for i in range(len(SHAPES.get(s, [{}])))]
pytestmark = pytest.mark.hf  # one case runs transformers' Llama


def _config(strategy: Strategy, index: int) -> RunConfig:
    shape = dict(SHAPES.get(strategy, [dict(world_size=2)])[index])
    return RunConfig(strategy=strategy, global_batch_size=12, steps=1, warmup_steps=2, timeout_s=120, **shape)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One real run per case, all written to one results directory; runs of one workload and batch share
    their single-process reference, as a sweep's do (19 cases, 8 references)."""
    out = tmp_path_factory.mktemp("sim-agreement")
    references = References()
    records = {case: run(_config(*case), results_dir=out, references=references) for case in CASES}
    return out, records


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """``STAND_IN`` saved as a profile file, for ``--cluster FILE``."""
    path = tmp_path_factory.mktemp("stand-in") / "cpu-stand-in.json"
    path.write_text(json.dumps({"cluster": cluster_to_dict(STAND_IN)}))
    return path


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].value}-{c[1]}")
def test_bytes_and_memory_equal_the_runners(case, results):
    out, records = results
    rec = records[case]
    assert rec["status"] == "ok", rec.get("error")
    rows, skipped = validation_rows(out, PRESETS["a100-80gb"])
    row = next(r for r in rows if r["run_id"] == rec["run_id"])
    for c in ("data", "parameter", "intermediate"):
        assert row[f"comm_{c}_predicted"] == rec[f"comm_{c}_bytes_per_step"], c
    for k in ("param", "grad", "optim"):
        assert row[f"mem_{k}_predicted"] == rec[f"mem_{k}_bytes"], k


def test_an_ok_record_without_timings_is_skipped_by_name_not_a_crash(results, tmp_path, capsys):
    """A record that says ok but holds no step time (hand-edited, or written by another tool) cannot be
    compared: validate names it among the skipped and still compares every other run."""
    import shutil

    out, records = results
    shutil.copytree(out, tmp_path / "r")
    bare = dict(next(iter(records.values())), run_id="e" * 32, step_time_s_median=None, throughput_samples_per_s=None)
    (tmp_path / "r" / "runs" / f"{'e' * 32}.json").write_text(json.dumps(bare))
    assert main(["validate", "--results-dir", str(tmp_path / "r"), "--cluster", "a100-80gb"]) == 0
    printed = capsys.readouterr().out
    assert f"skipped {'e' * 32}: an ok record without a measured step time or throughput" in printed
    assert f"{len(records)} runs; comm bytes exact in {len(records)}" in printed


def test_a_record_whose_config_is_mistyped_is_skipped_by_name_in_validate_and_the_dashboard(
        results, tmp_path, capsys, monkeypatch):
    """An ok record whose ``config`` holds a value of the wrong JSON type (hand-edited): validate and the
    dashboard's Simulator view name the key and go on with every other run (it once ended both in an
    AttributeError; the scaling curves rebuilt every ok run's config, predicted or not)."""
    import shutil

    from streamlit.testing.v1 import AppTest

    from dashboard.data import RESULTS_DIR_ENV
    from parbench.sim.hardware import cluster_to_dict, profile_path

    out, records = results
    shutil.copytree(out, tmp_path / "r")
    first = next(iter(records.values()))
    mistyped = dict(first, run_id="d" * 32, config={**first["config"], "workload": {"name": True}})
    (tmp_path / "r" / "runs" / f"{'d' * 32}.json").write_text(json.dumps(mistyped))
    why = f"{'d' * 32}: ConfigError: config key workload.name is True, expected a string"
    assert main(["validate", "--results-dir", str(tmp_path / "r"), "--cluster", "a100-80gb"]) == 0
    printed = capsys.readouterr().out
    assert f"skipped {why}" in printed and f"{len(records)} runs; comm bytes exact in {len(records)}" in printed
    path = profile_path(tmp_path / "r")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cluster": cluster_to_dict(PRESETS["a100-80gb"])}))
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path / "r"))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=120)
    at.query_params["view"] = "simulator"
    at.run()
    assert not at.exception
    assert f"not predicted: {why}" in [w.value for w in at.warning]


def test_validate_command_summarises_every_run(results, stand_in, capsys):
    out, records = results
    rows, _ = validation_rows(out, STAND_IN)
    summary = summarize(rows)
    assert summary["runs"] == len(records) == summary["comm_bytes_exact"]
    assert summary["memory_max_error_pct"] == 0.0
    assert main(["validate", "--results-dir", str(out), "--cluster", str(stand_in)]) == 0
    printed = capsys.readouterr().out
    within = sum(r["world_size"] <= host_cpus() for r in records.values())  # the rest oversubscribed
    for group, n in (("within cores", within), ("oversubscribed", len(records) - within)):
        assert not n or f"\n{group}: {n} runs; comm bytes exact in {n}" in printed
    # the measured terms come from the profiled steps: validate says how much longer those ran
    traced = [r["traced_step_time_s"] / r["step_time_s_median"] for r in records.values()]
    expected = (sorted(traced)[len(traced) // 2] + sorted(traced)[(len(traced) - 1) // 2]) / 2 - 1
    assert f"the measured terms are the traced steps' (torch.profiler recording every operator, the comm meter " \
           f"intercepting it), a median {expected * 100:+.1f}% against the untraced steps; this profile has no " \
           f"tracing cost" in printed  # a preset: nothing measured what tracing costs, and validate says so
    # two layouts of one job (workload, batch, world size): every such pair of configurations, counted apart
    configs = {r.get("point_key") or r["run_id"]: r for r in records.values()}
    jobs = Counter((r["workload"], r["layers"], r["hidden"], r["global_batch_size"], r["world_size"], r["device"])
                   for r in configs.values())
    assert main(["validate", "--results-dir", str(out), "--cluster", str(stand_in), "--format", "json"]) == 0
    emitted = json.loads(capsys.readouterr().out)
    counts = [emitted["summary"][g] for g in ("within cores", "oversubscribed")]
    assert sum(len(emitted["layout_pairs"][g]) for g in ("within cores", "oversubscribed")) \
        == sum(c["pairs_decided"] + c["pairs_close"] for c in counts) == sum(n * (n - 1) // 2 for n in jobs.values()) > 0
    assert "layout order (two layouts of one workload, batch and world size)" in printed
    # each configuration's terms once, its repeats together
    assert "terms per configuration, measured (traced) / predicted ms" in printed
    assert sum(c["runs"] for c in emitted["terms_by_config"]) == len(records)
    assert len(emitted["terms_by_config"]) == len(configs)
    # the single-process run (one transformer) sets what its workload's runs share
    single = emitted["single_process"]["transformer"]
    assert single == {"runs": 1, "measured_over_predicted": pytest.approx(
        next(r["step_time_measured_s"] / r["step_time_predicted_s"] for r in rows if r["world_size"] == 1))}
    assert f"single-process runs, measured / predicted step: transformer x{single['measured_over_predicted']:.2f} " \
           "(1 run)" in printed
    # on the local profile, validate also says how steady the machine was while that profile was measured
    path = profile_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cluster": cluster_to_dict(PRESETS["a100-80gb"]),
                                "meta": machine_drift([1.0e-3, 1.3e-3, 1.1e-3])}))
    assert main(["validate", "--results-dir", str(out)]) == 0
    assert "calibration machine speed while measuring: the same compute probe took 1.00-1.30 ms over 3 readings, " \
           "drift 30%: UNSTEADY" in capsys.readouterr().out


def test_dashboard_figures_and_frame(results):
    """The Simulator view's pieces: the validation frame, the identity line, curves past the measured sizes."""
    from parbench.results import load
    from parbench.sim import charts
    from parbench.sim.validate import validation_frame

    out, records = results
    frame = validation_frame(out, STAND_IN)
    assert len(frame) == len(records) and frame["comm_bytes_exact"].all()
    fig = charts.predicted_vs_measured(frame)
    assert fig.data[-1].name == "identity"
    hybrids = next(t for t in fig.data if t.name == "hybrid")  # each point's hover tells its layout apart
    assert sorted(hybrids.text) == ["moe W=4 pp2 1f1b m2 batch 12", "transformer W=4 pp2 1f1b m2 batch 12",
                                    "transformer W=4 pp2 1f1b m2 batch 12", "transformer W=4 tp2 batch 12",
                                    "transformer W=4 tp2 pp2 1f1b m2 batch 12"]
    curves = charts.scaling_curves(load(out), STAND_IN)
    ddp = curves[curves["strategy"] == "ddp"]
    measured_ddp = max(r["world_size"] for r in records.values() if r["strategy"] == "ddp")
    assert ddp["world_size"].max() > measured_ddp  # 12 samples: ddp at 4 ranks was never run, only predicted
    assert len(charts.scaling_figure(curves, frame).data) >= 2


def test_dashboard_simulator_tab(results, monkeypatch):
    """The Simulator tab with a profile: the scatter with its identity line, the error table, the curves."""
    import json

    from streamlit.testing.v1 import AppTest

    from dashboard.data import RESULTS_DIR_ENV
    from parbench.sim.hardware import cluster_to_dict, profile_path

    out, records = results
    path = profile_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cluster": cluster_to_dict(STAND_IN)}))
    try:
        monkeypatch.setenv(RESULTS_DIR_ENV, str(out))
        app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
        at = AppTest.from_file(str(app), default_timeout=120)
        at.query_params["view"] = "simulator"  # the dashboard draws only the chosen view
        at.run()
        assert not at.exception
        scatter = json.loads(at.get_by_key("sim-predicted-vs-measured").proto.spec)
        assert scatter["data"][-1]["name"] == "identity"
        assert json.loads(at.get_by_key("sim-scaling").proto.spec)["data"]
        terms = json.loads(at.get_by_key("sim-terms").proto.spec)["data"]
        assert [t["name"] for t in terms] == ["measured (median)", "predicted (median)"]
        tables = [d.value for d in at.dataframe if "comm_bytes_exact" in d.value.columns]
        assert len(tables) == 1 and len(tables[0]) == len(records) and tables[0]["comm_bytes_exact"].all()
        # each configuration's terms, as validate lists them: one row each, its repeats counted
        from parbench.sim.validate import term_errors_by_config

        by_config = next(d.value for d in at.dataframe if "largest gap" in d.value.columns)
        configs = term_errors_by_config(validation_rows(out, STAND_IN)[0])
        assert len(by_config) == len(configs) and by_config["runs"].sum() == len(records)
        assert list(by_config["strategy"]) == [c["strategy"] for c in configs]
        hybrid = by_config[by_config["strategy"] == "hybrid"]
        assert sorted(hybrid["model parallel"]) == ["pp2 1f1b m2", "pp2 1f1b m2", "pp2 1f1b m2", "tp2", "tp2 pp2 1f1b m2"]
        assert all(" / " in cell for cell in by_config["compute"])
        # the layout order, counted as validate counts it on the same rows
        from parbench.sim.validate import measured_pairs, noise_floor, pair_counts

        rows, _ = validation_rows(out, STAND_IN)
        order = pair_counts(measured_pairs(rows, noise_floor(rows)["repeat_spread_median_pct"]))
        assert any(f"predicted faster in {order['pairs_decided_ordered']} of {order['pairs_decided']} pairs" in c.value
                   for c in at.caption)
        # and the single-process runs' ratio, as validate words it
        from parbench.sim.validate import single_process_ratios, single_process_words

        words = single_process_words(single_process_ratios(rows))
        assert words and any(c.value == words[0].upper() + words[1:] + "." for c in at.caption)
    finally:
        path.unlink()


def test_timing_mismatch_names_each_condition_the_profile_did_not_measure():
    """A CPU profile measured gloo, float32, one thread per rank, no loader workers, one node; each way a run
    departs from that is named, and a preset (a GPU) compares no CPU run's time."""
    from parbench.sim.validate import timing_mismatch

    ran = {"device": "cpu", "backend": "gloo", "precision": "fp32", "threads_per_rank": 1, "loader_workers": 0,
           "nodes": None}
    assert timing_mismatch(ran, STAND_IN) is None
    for change, words in [({"threads_per_rank": 2}, "2 threads per rank"), ({"precision": "bf16"}, "precision bf16"),
                          ({"loader_workers": 1}, "1 DataLoader workers per rank"), ({"nodes": 2}, "2 nodes"),
                          ({"backend": "mpi"}, "backend mpi"), ({"device": "cuda", "backend": "nccl"},
                                                                 "ran on cuda, backend nccl"),
                          ({"host_cpus": host_cpus() + 1}, f"{host_cpus() + 1} CPUs on its host")]:
        why = timing_mismatch({**ran, **change}, STAND_IN)
        assert why.startswith(words + f"; the profile cpu-stand-in measured this host's CPU ({host_cpus()} CPUs)"), \
            (change, why)
    assert why.endswith("with gloo, float32 and 1 thread per rank (threads within the CPUs), no loader workers, one node")
    assert timing_mismatch({**ran, "host_cpus": host_cpus()}, STAND_IN) is None
    assert timing_mismatch(ran, PRESETS["a100-80gb"]) == "ran on cpu; a100-80gb describes a GPU"
    assert timing_mismatch({**ran, "device": "cuda", "backend": "nccl"}, PRESETS["a100-80gb"]) is None


def test_a_run_not_measured_as_the_profile_was_has_its_bytes_compared_and_not_its_time(results, stand_in, tmp_path,
                                                                                      capsys, monkeypatch):
    """A run with two threads per rank, or in bfloat16 (60x slower matmuls on an AVX2 CPU), against a profile of
    one float32 thread per rank: its bytes and memory are still checked, its time sits apart with the reason, and
    no median, pair or term counts it. Against a GPU preset, no CPU run's time is compared."""
    import shutil

    out, records = results
    shutil.copytree(out, tmp_path / "r")
    first = records[(Strategy.FSDP, 0)]
    (tmp_path / "r" / "runs" / f"{'a' * 32}.json").write_text(json.dumps(dict(first, run_id="a" * 32,
                                                                               threads_per_rank=2)))
    (tmp_path / "r" / "runs" / f"{'b' * 32}.json").write_text(json.dumps(dict(first, run_id="b" * 32,
                                                                               precision="bf16")))
    assert main(["validate", "--results-dir", str(tmp_path / "r"), "--cluster", str(stand_in), "--format",
                 "json"]) == 0
    emitted = json.loads(capsys.readouterr().out)
    summary = emitted["summary"]
    assert summary["within cores"]["runs"] + summary["oversubscribed"]["runs"] == len(records)  # not the copies
    apart = emitted["summary"]["time not compared"]
    assert apart["runs"] == apart["comm_bytes_exact"] == 2 and apart["time_compared"] == 0
    assert sum(c["runs"] for c in emitted["terms_by_config"]) == len(records)
    assert main(["validate", "--results-dir", str(tmp_path / "r"), "--cluster", str(stand_in)]) == 0
    printed = capsys.readouterr().out
    assert "time not compared for 1 run: 2 threads per rank; the profile cpu-stand-in" in printed
    assert "time not compared for 1 run: precision bf16; the profile cpu-stand-in" in printed
    assert printed.count("  time not compared [") == 2  # the two runs' lines point at their reasons
    assert "\ntime not compared: 2 runs; comm bytes exact in 2; memory max error 0.00%; step time not compared" \
           in printed
    # the dashboard's Simulator view, on the same profile as the local one: the same reasons, as warnings
    from streamlit.testing.v1 import AppTest

    from dashboard.data import RESULTS_DIR_ENV

    path = profile_path(tmp_path / "r")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(stand_in.read_text())
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path / "r"))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py"), default_timeout=120)
    at.query_params["view"] = "simulator"
    at.run()
    assert not at.exception
    assert any(w.value.startswith("Calibration measured at a time the profile does not say") for w in at.warning)
    warnings = [w.value for w in at.warning if w.value.startswith("step time not compared")]
    assert sorted(w.split(";")[0] for w in warnings) == ["step time not compared for 1 run: 2 threads per rank",
                                                         "step time not compared for 1 run: precision bf16"]
    # the scaling chart's measured points: the runs whose time is compared, not the two copies
    scaling = json.loads(at.get_by_key("sim-scaling").proto.spec)["data"]
    fsdp = [t for t in scaling if t["name"] == "fsdp transformer (measured)"]
    assert len(fsdp) == 1 and _points(fsdp[0]["x"]) == [2]
    assert main(["validate", "--results-dir", str(out), "--cluster", "a100-80gb"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("  time not compared [1]\n") == len(records)  # each line points at the one reason,
    assert printed.count("ran on cpu; a100-80gb describes a GPU") == 1  # stated once under the table
    assert f"[1] time not compared for {len(records)} runs: ran on cpu; a100-80gb describes a GPU\n" in printed
    # one line per run, grouped by workload, then strategy and world size; the hybrids' degrees tell them apart
    lines = [line.split() for line in printed.splitlines() if line.endswith("  time not compared [1]")]
    assert len(lines) == len(records)
    keys = [(line[-9 - 3], line[0], int(line[1])) for line in lines]  # workload, strategy, W
    assert keys == sorted(keys)
    hybrids = sorted(" ".join(line[2:-12]) for line in lines if line[0] == "hybrid")
    assert hybrids == ["pp2 1f1b m2", "pp2 1f1b m2", "pp2 1f1b m2", "tp2", "tp2 pp2 1f1b m2"]
    assert f"\ntime not compared: {len(records)} runs; comm bytes exact in {len(records)}" in printed
    assert "step time |error|" not in printed


def _points(values) -> list:
    """A plotly trace's values as JSON carries them: a list, or numpy's bytes in base64 (``bdata``)."""
    import base64

    import numpy as np

    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def test_validate_says_how_far_apart_the_profile_and_the_runs_were_measured(results, tmp_path, capsys):
    """A profile carries its day's machine speed: validate says when it was measured and how many hours after it
    the runs compared were, flags more than a day apart, and says so where the profile predates the field."""
    import datetime as dt
    import shutil

    out, records = results
    shutil.copytree(out, tmp_path / "r")
    first = min(dt.datetime.fromisoformat(r["created_at"]) for r in records.values())
    last = max(dt.datetime.fromisoformat(r["created_at"]) for r in records.values())
    path = profile_path(tmp_path / "r")
    path.parent.mkdir(parents=True, exist_ok=True)
    for before_h, same_day in ((1.0, True), (30.0, False)):
        when = first - dt.timedelta(hours=before_h)
        path.write_text(json.dumps({"cluster": cluster_to_dict(STAND_IN), "meta": {"created_at": when.isoformat()}}))
        assert main(["validate", "--results-dir", str(tmp_path / "r")]) == 0
        printed = capsys.readouterr().out
        span = (last - when).total_seconds() / 3600
        line = (f"calibration measured {when.isoformat()}; the {len(records)} runs compared from +{before_h:.1f} to "
                f"+{span:.1f} h after it")
        assert line in printed
        assert ("more than 24 h apart" in printed) is not same_day
        assert main(["validate", "--results-dir", str(tmp_path / "r"), "--format", "json"]) == 0
        age = json.loads(capsys.readouterr().out)["calibration_age"]
        assert age["same_day"] is same_day and age["hours_after"][0] == pytest.approx(before_h)
    path.write_text(json.dumps({"cluster": cluster_to_dict(STAND_IN), "meta": {"created_at": "yesterday"}}))
    assert main(["validate", "--results-dir", str(tmp_path / "r")]) == 0
    assert "calibration measured at a time the profile does not say" in capsys.readouterr().out


def _two_thread_stand_in():
    """``STAND_IN`` on a 2-CPU host whose rates at two threads per rank were measured: GEMMs and memory twice as
    fast, an op's fixed cost and exp/erf as one thread's."""
    s = replace(STAND_IN, cores=2, peak_flops_tf32=0.0, peak_flops_fp32=0.0)  # float32 at the one peak, as calibrated
    return replace(s, threaded={2: {"peak_flops": 2 * s.peak_flops, "gemm_overhead_s": s.gemm_overhead_s,
                                    "op_overhead_s": s.op_overhead_s,
                                    "memory_bandwidth_bytes_per_s": 2 * s.memory_bandwidth_bytes_per_s,
                                    "stream_bandwidth_bytes_per_s": 2 * s.stream_bandwidth,
                                    "transcendental_s_per_element": s.transcendental_s_per_element}})


def test_a_run_of_two_threads_per_rank_is_compared_at_the_rates_measured_with_two(results):
    """A profile that measured two threads per rank compares a one-rank run of two threads at those rates (its
    prediction that of a profile whose one-thread figures are them, and faster than one thread's); two ranks of two
    threads on its two CPUs, or four threads it never measured, stay apart, named."""
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.predict import predict
    from parbench.sim.validate import (
        compare,
        layout_label,
        noise_floor,
        timing_mismatch,
    )

    _, records = results
    profile = _two_thread_stand_in()
    rec = records[(Strategy.SINGLE, 0)]
    two = dict(rec, threads_per_rank=2, host_cpus=2, config={**rec["config"], "threads": 2})
    one = dict(rec, host_cpus=2)
    row, row_one = compare(two, profile), compare(one, profile)
    assert row["time_not_compared"] is None and row_one["time_not_compared"] is None
    rates = profile.threaded[2]
    by_hand = replace(profile, threaded={}, peak_flops=rates["peak_flops"],
                      memory_bandwidth_bytes_per_s=rates["memory_bandwidth_bytes_per_s"],
                      stream_bandwidth_bytes_per_s=rates["stream_bandwidth_bytes_per_s"])
    cfg = RunConfig.from_dict(two["config"])
    assert row["step_time_predicted_s"] == predict(model_spec(cfg.workload), layout_from_run(cfg), by_hand).step_time_s
    assert row["step_time_predicted_s"] < row_one["step_time_predicted_s"]
    # a layout pair of the two is told apart by its threads, and they are two configurations, not repeats of one
    assert layout_label(row) == "single dp1 tp1 pp1 fp32 sharded 2 threads" and layout_label(row_one).endswith("sharded")
    assert noise_floor([{**row, "point_key": None}, {**row_one, "point_key": None}])["configs_repeated"] == 0
    pair = dict(two, world_size=2)
    assert timing_mismatch(pair, profile).startswith(
        "2 ranks x 2 threads on 2 CPUs; the profile cpu-stand-in measured this host's CPU (2 CPUs) with gloo, float32 "
        "and 1 or 2 threads per rank (threads within the CPUs)")
    assert timing_mismatch(dict(two, threads_per_rank=4), profile).startswith("4 threads per rank; ")
    assert timing_mismatch(dict(one, world_size=4), profile) is None  # one-thread ranks: the oversubscribed group
