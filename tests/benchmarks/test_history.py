"""Saved benchmark runs: loading them torch-free, and choosing a baseline from the same machine only."""

from __future__ import annotations

import json

import pytest

from parbench.bench import history


def _run(path, *, node, cpu, when, commit, median):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "machine_info": {"node": node, "cpu": {"brand_raw": cpu}}, "datetime": when,
        "commit_info": {"id": commit, "dirty": False},
        "benchmarks": [{"name": "test_step[ddp-timed]", "group": "step-ddp", "extra_info": {"mode": "timed"},
                        "stats": {"median": median, "iqr": 0.001, "min": median / 2, "max": median * 2, "rounds": 7}}],
    }))


def test_load_history_and_same_machine_baseline(tmp_path):
    d = tmp_path / "benchmarks" / "Linux-CPython-3.11-64bit"
    _run(d / "0001_a.json", node="here", cpu="cpu A", when="2026-01-01T00:00:00", commit="a", median=0.02)
    _run(d / "0002_b.json", node="here", cpu="cpu A", when="2026-01-02T00:00:00", commit="b", median=0.03)
    _run(d / "0003_c.json", node="elsewhere", cpu="cpu A", when="2026-01-03T00:00:00", commit="c", median=0.01)
    (d / "0004_corrupt.json").write_text("{not json")
    frame = history.load_history(tmp_path / "benchmarks")
    assert list(frame["commit"]) == ["a", "b", "c"] and list(frame["median_s"]) == [0.02, 0.03, 0.01]
    assert history.latest_baseline(tmp_path / "benchmarks", ("here", "cpu A")).name == "0002_b.json"
    assert history.latest_baseline(tmp_path / "benchmarks", ("new machine", "cpu A")) is None
    # one consecutive pair on one machine (a -> b: 0.02 -> 0.03 s); c is another machine's run
    assert history.noise(frame) == pytest.approx({"pairs": 1, "p50_pct": 50.0, "p90_pct": 50.0, "max_pct": 50.0})


@pytest.mark.parametrize("edit", [
    {"machine_info": ["here"]}, {"datetime": 20260105}, {"commit_info": "abc"}, {"benchmarks": {"a": 1}},
    {"benchmarks": ["test_step"]}, {"benchmarks": [{"name": "t", "stats": {"median": "fast"}}]},
    {"benchmarks": [{"name": "t", "stats": [0.1]}]}, {"machine_info": {"node": "here", "cpu": "cpu A"}},
])
def test_a_run_edited_out_of_shape_is_skipped_like_a_corrupt_one(tmp_path, edit):
    """A saved run whose fields have other types than pytest-benchmark writes is no run: the history and
    the baseline skip it (it once ended the dashboard's history view in an AttributeError or TypeError)."""
    d = tmp_path / "benchmarks"
    _run(d / "0001_a.json", node="here", cpu="cpu A", when="2026-01-01T00:00:00", commit="a", median=0.02)
    _run(d / "0002_b.json", node="here", cpu="cpu A", when="2026-01-02T00:00:00", commit="b", median=0.03)
    doc = json.loads((d / "0002_b.json").read_text())
    (d / "0002_b.json").write_text(json.dumps({**doc, **edit}))
    assert list(history.load_history(d)["commit"]) == ["a"]
    assert history.latest_baseline(d, ("here", "cpu A")).name == "0001_a.json"


def test_empty_history_has_every_column(tmp_path):
    frame = history.load_history(tmp_path / "nothing")
    assert frame.empty and list(frame.columns) == list(history.COLUMNS)


def test_dashboard_benchmark_history_view(tmp_path, monkeypatch):
    """The registered view plots one line per benchmark over the saved runs (streamlit AppTest)."""
    import shutil
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parents[2]
    results = tmp_path / "results"
    shutil.copytree(root / "tests" / "dashboard" / "fixtures" / "results", results)
    d = results / "benchmarks" / "Linux-CPython-3.11-64bit"
    _run(d / "0001_a.json", node="here", cpu="cpu A", when="2026-01-01T00:00:00", commit="a" * 40, median=0.02)
    _run(d / "0002_b.json", node="here", cpu="cpu A", when="2026-01-02T00:00:00", commit="b" * 40, median=0.03)
    monkeypatch.setenv("PARBENCH_RESULTS_DIR", str(results))
    at = AppTest.from_file(str(root / "dashboard" / "app.py"), default_timeout=60)
    at.query_params["view"] = "bench_history"  # the dashboard draws only the chosen view
    at.run()
    assert not at.exception
    fig = json.loads(at.get_by_key("bench-history-chart").proto.spec)
    assert [t["name"] for t in fig["data"]] == ["test_step[ddp-timed]"]
    assert len(fig["data"][0]["x"]) == 2
