"""The Streamlit app under ``streamlit.testing.v1.AppTest`` on the real-run fixture."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.data import RESULTS_DIR_ENV, directory_signature
from dashboard.views import VIEWS
from parbench import charts

from .conftest import APP, FIXTURE_RESULTS, decode, fixture_records

CHART_KEYS = ("scaling-throughput", "scaling-efficiency", "memory-stacked", "memory-per-rank", "comm-stacked",
              "comm-ops", "comm-modeled-vs-os", "step-time-box", "compare-ratios", "loss-curves", "loss-diff")


def run_app(monkeypatch, results_dir: Path) -> AppTest:
    monkeypatch.setenv(RESULTS_DIR_ENV, str(results_dir))
    at = AppTest.from_file(str(APP), default_timeout=60)
    return at.run()


def figure(at: AppTest, key: str) -> dict:
    return json.loads(at.get_by_key(key).proto.spec)


def trace_names(at: AppTest, key: str) -> set[str]:
    return {t["name"] for t in figure(at, key)["data"]}


def test_app_renders_every_view_and_chart(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    assert not at.exception
    assert [t.label for t in at.tabs] == [v.TITLE for _, v in VIEWS]
    for key in CHART_KEYS:
        assert figure(at, key)["data"], key
    assert len(at.dataframe[0].value) == len(fixture_records())
    assert not at.warning


def test_scaling_chart_carries_the_records_data(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    fig = figure(at, "scaling-throughput")
    ddp = next(t for t in fig["data"] if t["name"].startswith("ddp"))
    assert decode(ddp["x"]) == [2, 4]
    x4 = [r for r in fixture_records() if r["strategy"] == "ddp" and r["world_size"] == 4][0]
    assert decode(ddp["y"])[1] == pytest.approx(x4["throughput_samples_per_s"])
    assert ddp["line"]["color"] == charts.STRATEGY_COLORS["ddp"]


def test_sidebar_filter_changes_every_view(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    assert any(n.startswith("ddp") for n in trace_names(at, "scaling-throughput"))
    at.sidebar.multiselect(key="filter-strategy").set_value(["single", "pipeline"]).run()
    assert not at.exception
    assert not any(n.startswith("ddp") for n in trace_names(at, "scaling-throughput"))
    assert trace_names(at, "loss-diff") == {"pipeline"}
    assert len(at.dataframe[0].value) == 4
    at.sidebar.multiselect(key="filter-world_size").set_value([1]).run()
    assert "pipeline" not in {n.split(" ")[0] for n in trace_names(at, "scaling-throughput")}


def test_sidebar_directory_field_switches_results(monkeypatch, tmp_path):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    at.sidebar.text_input(key="results_dir").set_value(str(FIXTURE_RESULTS / "archive")).run()
    assert not at.exception
    assert len(at.dataframe[0].value) == 1


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_empty_or_missing_directory_shows_how_to_produce_results(monkeypatch, tmp_path, make):
    target = tmp_path / "results"
    if make == "empty":
        (target / "runs").mkdir(parents=True)
    at = run_app(monkeypatch, target)
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "parbench sweep" in text and "parbench run" in text and str(target) in text
    assert not at.tabs


def test_corrupt_record_is_a_visible_warning_and_skipped(monkeypatch, results_copy):
    bad = results_copy / "runs" / "broken.json"
    bad.write_text('{"run_id": "x", "status": "ok", ')  # a half-written record
    at = run_app(monkeypatch, results_copy)
    assert not at.exception
    assert any("broken.json" in w.value for w in at.warning)
    assert len(at.dataframe[0].value) == len(fixture_records())


def test_cache_key_changes_when_a_record_changes(results_copy):
    before = directory_signature(str(results_copy))
    assert directory_signature(str(results_copy)) == before
    (results_copy / "runs" / "new.json").write_text(json.dumps(fixture_records()[0] | {"run_id": "new"}))
    assert directory_signature(str(results_copy)) != before


def test_dashboard_command_serves_streamlit_on_loopback(monkeypatch, capsys):
    import parbench.commands.dashboard as cmd
    from parbench.cli import main

    calls = []
    monkeypatch.setattr(cmd.os, "execve", lambda path, argv, env: calls.append((argv, env)))
    main(["dashboard", "--results-dir", str(FIXTURE_RESULTS), "--port", "8599"])
    assert "http://127.0.0.1:8599" in capsys.readouterr().out
    argv, env = calls[0]
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1" and argv[argv.index("--server.port") + 1] == "8599"
    assert env[RESULTS_DIR_ENV] == str(FIXTURE_RESULTS.resolve()) and argv[-1] == str(FIXTURE_RESULTS.resolve())


def test_failed_run_with_null_metrics_is_listed_not_charted(monkeypatch, results_copy):
    rec = fixture_records()[3] | {"run_id": "f" * 32, "status": "failed", "error": "rank 1: killed",
                                  "failed_rank": 1, "per_rank": None, "comm_ops": None, "losses": None,
                                  "step_times_s": None, "throughput_samples_per_s": None}
    (results_copy / "runs" / "failed.json").write_text(json.dumps(rec))
    at = run_app(monkeypatch, results_copy)
    assert not at.exception
    assert "failed" in at.sidebar.multiselect(key="filter-status").options
    assert len(at.dataframe[0].value) == len(fixture_records()) + 1
    at.sidebar.multiselect(key="filter-status").set_value(["failed"]).run()
    assert not at.exception
    assert "no successful runs" in json.dumps(figure(at, "scaling-throughput")["layout"])


def test_compare_view_ratios_follow_the_picked_runs(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    pick = at.multiselect(key="compare-pick")
    assert pick.value == ["single x1 · mlp L1 H512 B64", "ddp x2 · mlp L1 H512 B64"]
    single = statistics.median(r["throughput_samples_per_s"] for r in fixture_records()
                               if r["world_size"] == 1 and r["layers"] == 1)
    x4 = [r for r in fixture_records() if r["world_size"] == 4][0]["throughput_samples_per_s"]
    pick.set_value(["single x1 · mlp L1 H512 B64", "ddp x4 · mlp L1 H512 B64"]).run()
    ratios = figure(at, "compare-ratios")["data"]
    assert [t["name"] for t in ratios] == ["ddp x4 · mlp L1 H512 B64 / single x1 · mlp L1 H512 B64"]
    assert decode(ratios[0]["y"])[0] == pytest.approx(x4 / single)
    assert ratios[0]["marker"]["color"] == charts.STRATEGY_COLORS["ddp"]


def test_app_renders_the_committed_reference_sweep(monkeypatch):
    """Every strategy's real records (results/reference/, what a fresh clone shows) render in every view."""
    reference = Path(__file__).resolve().parents[2] / "results" / "reference"
    at = run_app(monkeypatch, reference)
    assert not at.exception
    for key in CHART_KEYS:
        assert figure(at, key)["data"], key
    names = trace_names(at, "scaling-throughput")  # "<strategy> · <workload>"
    plotted = {n.split(" · ")[0] for n in names}
    assert {"single", "ddp", "zero1", "zero2", "fsdp", "tp", "pipeline", "hybrid", "ps"} <= plotted, names
    assert not at.warning
