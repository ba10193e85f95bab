"""The Time and Timeline views on real-run fixture records given a known step-time breakdown."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dashboard.views import time as time_view
from parbench import charts, time_charts
from parbench.metrics.breakdown import record_columns
from parbench.results import load
from parbench.trace import write_trace

from .conftest import decode
from .test_app import figure, run_app, show


def _op(kind, issue, done, peer):
    return {"op": kind, "category": "intermediate", "bytes": 64, "peer": peer, "issue_s": issue, "done_s": done}


def pipeline_ranks() -> list[dict]:
    """Two stages, one traced step of 8 s: rank 0 computes 0-4 and sends; rank 1 waits, computes 4.5-8."""
    r0 = {"start_s": 0.0, "returned_s": 4.2, "end_s": 8.0, "compute": [(0, 4)], "optimizer": [],
          "comm": [_op("send", 4.0, 4.2, 1)]}
    r1 = {"start_s": 0.0, "returned_s": 8.0, "end_s": 8.0, "compute": [(0, 1), (4.5, 7.5)], "optimizer": [(7.5, 8.0)],
          "comm": [_op("recv", 1.0, 4.5, 0)]}
    return [{"rank": 0, "host": "h", "steps": [r0]}, {"rank": 1, "host": "h", "steps": [r1]}]


@pytest.fixture
def traced_results(results_copy: Path) -> Path:
    """The fixture results with the pipeline run given the breakdown and trace of ``pipeline_ranks``."""
    path = next(p for p in results_copy.rglob("runs/*.json") if json.loads(p.read_text())["strategy"] == "pipeline")
    rec = json.loads(path.read_text())
    traces = pipeline_ranks()
    rec.update(record_columns(traces))
    rec["trace_file"] = write_trace(path.parent.parent, rec, [{"role": f"stage {r}", "trace": t}
                                                             for r, t in enumerate(traces)])
    path.write_text(json.dumps(rec))
    return results_copy


def test_time_bars_carry_the_busiest_ranks_terms(traced_results):
    frame = charts.prepare(load(traced_results))
    fig = time_charts.time_figure(frame)
    bars = {t["name"]: decode(t["y"]) for t in fig.to_plotly_json()["data"]}
    expected = record_columns(pipeline_ranks())  # rank 1: 4.0 s compute + 0.5 s optimizer
    for term, (name, _) in time_charts.TERM_STYLE.items():
        assert bars[name] == [pytest.approx(expected[term] * 1e3)]
    assert sum(b[0] for b in bars.values()) == pytest.approx(8000.0)  # the terms fill the traced step


def test_predicted_terms_stand_beside_the_measured_ones(traced_results):
    frame = charts.prepare(load(traced_results))
    assert not time_charts.has_predictions(time_charts.breakdown_groups(frame))
    frame["pred_time_compute_s"] = [3.0 if s == "pipeline" else None for s in frame["strategy"]]
    fig = time_charts.time_figure(frame).to_plotly_json()
    compute = [t for t in fig["data"] if t["name"] == "compute"]
    assert [t["x"][1][0] for t in compute] == ["measured", "predicted"]
    assert decode(compute[1]["y"]) == [3000.0]


def test_timeline_rows_fill_each_ranks_step(traced_results):
    trace = json.loads(next(traced_results.rglob("traces/*.json")).read_text())
    fig = time_charts.timeline_figure(trace, in_flight=False).to_plotly_json()
    per_row: dict[str, float] = {}
    for t in fig["data"]:
        for row, width in zip(decode(t["y"]) if isinstance(t["y"], dict) else t["y"], decode(t["x"])):
            per_row[row] = per_row.get(row, 0.0) + width
    assert per_row == {"rank 0": pytest.approx(8000.0), "rank 1": pytest.approx(8000.0)}
    names = {t["name"] for t in fig["data"]}
    assert {"compute", "bubble (waiting for a peer)", "comm: intermediate", "optimizer"} <= names


def test_app_shows_time_and_timeline_views(monkeypatch, traced_results):
    at = run_app(monkeypatch, traced_results, source=["reference", "."], view="time")
    assert not at.exception
    titles = at.radio(key="view").options
    assert "Time" in titles and "Timeline" in titles
    assert figure(at, "time-breakdown")["data"]
    show(at, "timeline")
    assert not at.exception
    assert figure(at, "timeline-gantt")["data"]


@pytest.mark.parametrize("content, why", [
    ('{"traceEvents": [{"ph": "X", "ts": 0', "Expecting"),
    ("[3]", "not a Chrome trace: no traceEvents list"),
    ('{"traceEvents": [{"ph": "X", "ts": "late", "dur": 1}]}', "is not an object with numeric ts and dur"),
])
def test_timeline_names_a_trace_file_it_cannot_read(monkeypatch, traced_results, content, why):
    """A trace file cut short or edited by hand: the Timeline view warns with the file and the reason, the
    record's own figures stand; never an exception."""
    path = next(p for p in traced_results.rglob("runs/*.json") if json.loads(p.read_text())["strategy"] == "pipeline")
    rec = json.loads(path.read_text())
    (path.parent.parent / rec["trace_file"]).write_text(content)
    at = show(run_app(monkeypatch, traced_results, source=["reference", "."], view="time"), "timeline")
    assert not at.exception
    [warning] = [w.value for w in at.warning]
    assert rec["trace_file"] in warning and why in warning and "record and its breakdown are unaffected" in warning


def test_compare_has_the_breakdown_rows(traced_results):
    frame = charts.prepare(load(traced_results))
    table = charts.compare_table(frame[frame["strategy"].isin(["pipeline", "single"])], "run_label")
    pipeline = next(c for c in table.columns if str(c).startswith("pipeline") and " / " not in str(c))
    expected = record_columns(pipeline_ranks())
    assert table.loc["compute (ms/step)", pipeline] == pytest.approx(expected["time_compute_s"] * 1e3)
    assert table.loc["bubble (ms/step)", pipeline] == pytest.approx(expected["time_bubble_s"] * 1e3)


def test_views_say_what_to_do_without_breakdowns(monkeypatch, results_copy):
    at = run_app(monkeypatch, results_copy, view="time")
    assert not at.exception and "step-time breakdown" in " ".join(i.value for i in at.info)
    show(at, "timeline")
    assert not at.exception and "trace file" in " ".join(i.value for i in at.info)


def test_with_a_calibrated_profile_the_simulators_terms_stand_beside(traced_results):
    from parbench.sim.hardware import PRESETS, cluster_to_dict, profile_path

    frame = charts.prepare(load(traced_results))
    assert time_view.with_predictions(frame, str(traced_results)) is frame  # no profile: unchanged
    path = profile_path(traced_results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cluster": cluster_to_dict(replace(PRESETS["a100-80gb"], cores=64))}))  # a CPU profile's shape
    runs = time_view.with_predictions(frame, str(traced_results))
    pipeline = runs[runs["time_compute_s"].notna()]
    assert pipeline["pred_time_compute_s"].notna().all() and (pipeline["pred_time_compute_s"] > 0).all()
    kinds = {t["x"][1][0] for t in time_charts.time_figure(runs).to_plotly_json()["data"] if t["name"] == "compute"}
    assert kinds == {"measured", "predicted"}


def test_report_has_the_breakdown_section(traced_results, tmp_path):
    from parbench.report import write_report

    out = tmp_path / "report.html"
    write_report(traced_results, out, source="all")
    html = out.read_text()
    assert "Where the time goes" in html and "comm: intermediate" in html
