"""The simulate command end to end (table and JSON), its input errors, and the published comparison."""

from __future__ import annotations

import json

from parbench.cli import main
from parbench.sim.published import compare_published

ISSUE_EXAMPLE = ["simulate", "--workload", "transformer", "--layers", "96", "--hidden", "12288", "--heads", "96",
                 "--seq", "2048", "--cluster", "h100-sxm", "--gpus", "1024", "--dp", "16", "--tp", "8", "--pp", "8",
                 "--micro-batch", "1", "--global-batch", "1024", "--schedule", "1f1b", "--zero", "1",
                 "--recompute", "selective"]


def test_issue_example_as_json(capsys):
    assert main(ISSUE_EXAMPLE + ["--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    p, layout = out["prediction"], out["layout"]
    assert (layout["dp"], layout["tp"], layout["pp"], layout["micro_batches"]) == (16, 8, 8, 64)
    assert p["world_size"] == 1024 and p["step_time_s"] > 0 and 0 < p["mfu"] < 1
    assert set(p["comm_bytes"]) == {"data", "parameter", "intermediate"} and p["comm_bytes"]["data"] == 0
    assert p["throughput_samples_per_s"] == 1024 / p["step_time_s"]


def test_issue_example_as_table(capsys):
    assert main(ISSUE_EXAMPLE) == 0
    out = capsys.readouterr().out
    assert "h100-sxm: 1024 ranks, dp=16 tp=8 pp=8" in out and "MFU" in out and "all_reduce/intermediate" in out


def test_bad_layout_exits_2_with_the_factors(capsys):
    assert main(["simulate", "--layers", "4", "--hidden", "256", "--gpus", "12", "--tp", "8"]) == 2
    assert "tp x pp x cp = 8 x 1 x 1 does not divide gpus=12" in capsys.readouterr().err


def test_user_cluster_file(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(
        'name = "mine"\ngpus_per_node = 4\npeak_flops = 100e12\ngemm_efficiency = 0.5\ngemm_overhead_s = 1e-5\n'
        'op_overhead_s = 1e-5\nmemory_bandwidth_bytes_per_s = 1e12\nmemory_bytes = 40e9\n'
        'intra = {latency_s = 1e-5, bandwidth_bytes_per_s = 1e11}\ninter = {latency_s = 2e-5, bandwidth_bytes_per_s = 1e10}\n')
    assert main(["simulate", "--layers", "4", "--hidden", "512", "--heads", "8", "--gpus", "8",
                 "--cluster", str(tmp_path / "c.toml"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"] == "mine"


def test_search_prints_ranking_rejections_and_front(capsys):
    assert main(["simulate", "--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "1024",
                 "--gpus", "16", "--global-batch", "64", "--cluster", "a100-80gb", "--search", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "top 3 by throughput" in out and "Pareto front" in out and "rejected" in out


def test_validate_published_runs_without_a_local_profile(tmp_path, capsys):
    """Every published row printed with its source and table, then per source the error and the trends."""
    assert main(["validate", "--published", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "local runs not compared" in out
    rows = compare_published()
    for r in rows:
        assert f"{r['source']}, {r['table']}" in out
    assert out.count("ok") + out.count("WRONG") == sum(1 for s in {r["series"] for r in rows} if s)
