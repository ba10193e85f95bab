"""``parbench report``: one self-contained HTML file, summary first, the charts, the raw runs last."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from parbench import charts
from parbench.cli import main
from parbench.report import anchor

from .conftest import FIXTURE_RESULTS, decode, fixture_records


def plotly_figures(html: str) -> list[dict]:
    """The figure data of every ``Plotly.newPlot(id, data, layout, config)`` call in the page."""
    calls = re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"responsive"', html, flags=re.S)
    return [{"data": json.loads(d), "layout": json.loads(l)} for d, l in calls]


def test_report_summary_first_then_contents_charts_and_raw_runs_last(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out)]) == 0
    own = fixture_records(".")
    assert f"{out} ({len(own)} runs" in capsys.readouterr().out  # the newest source only
    html = out.read_text()
    assert html.count("<script") >= 1 and not re.search(r'<script[^>]+src="https?://', html)  # no CDN
    assert len(html) > 1_000_000  # plotly.js itself is inlined, so the file opens offline
    order = [html.index(s) for s in ("report written", "git commit", "Fastest:", "<h2>Contents</h2>",
                                     'id="scaling"', 'id="all-runs"', "Download the")]
    assert order == sorted(order)
    assert "newest of 2" in html and "sources are never pooled" in html
    for title, _ in charts.REPORT_SECTIONS:
        assert f'<a href="#{anchor(title)}">' in html and f'<h2 id="{anchor(title)}">' in html
    figures = plotly_figures(html)
    assert len(figures) == sum(len(b) for _, b in charts.REPORT_SECTIONS)
    names = {t.get("name") for f in figures for t in f["data"]}
    assert {"ddp", "hybrid tp2·pp1"} <= names
    assert all(f["layout"].get("width") is None for f in figures)  # every figure follows the page width
    for rec in own:
        assert rec["run_id"][:8] in html
    assert not any(r["run_id"][:8] in html for r in fixture_records("reference"))


def test_report_other_source_and_all(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out), "--source", "reference"]) == 0
    assert f"({len(fixture_records('reference'))} runs" in capsys.readouterr().out
    html = out.read_text()
    assert "hybrid x4 dp1·tp2·pp2" in html and "hybrid x4 dp2·tp2·pp1" in html
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out), "--source", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_report_compare_section_never_divides_across_workloads(tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out), "--source", "reference"]) == 0
    figures = plotly_figures(out.read_text())
    ratios = next(f for f in figures if f["layout"]["title"]["text"].startswith("Ratio to the first pick"))
    facets = ratios["layout"]["meta"]["facets"]
    for t in ratios["data"]:
        if " / " in t["name"]:
            assert t["name"].endswith("/ single x1")  # each workload's own single-process run
            assert t["xaxis"] in facets.values()


def test_report_empty_and_corrupt(tmp_path, capsys, results_copy):
    empty = tmp_path / "empty.html"
    (tmp_path / "none").mkdir()
    assert main(["report", "--results-dir", str(tmp_path / "none"), "--out", str(empty)]) == 0
    assert "parbench sweep" in empty.read_text() and "Plotly.newPlot" not in empty.read_text()
    (results_copy / "runs" / "broken.json").write_text("not json")
    out = tmp_path / "r.html"
    assert main(["report", "--results-dir", str(results_copy), "--out", str(out)]) == 0
    assert "broken.json" in capsys.readouterr().err
    html = out.read_text()
    assert 'class="warn"' in html and "broken.json" in html and "Plotly.newPlot" in html


def test_report_has_a_simulator_section_when_predictions_exist(tmp_path, results_copy):
    from parbench.sim.hardware import PRESETS, cluster_to_dict, profile_path

    out = tmp_path / "r.html"
    assert main(["report", "--results-dir", str(results_copy), "--out", str(out)]) == 0
    assert "Simulator: predicted vs measured" not in out.read_text()  # no calibrated profile: no section
    path = profile_path(results_copy)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cluster": cluster_to_dict(replace(PRESETS["a100-80gb"], cores=64))}))  # a CPU profile's shape
    assert main(["report", "--results-dir", str(results_copy), "--out", str(out)]) == 0
    html = out.read_text()
    assert f'<a href="#{anchor("Simulator: predicted vs measured")}">' in html
    scatter = plotly_figures(html)[-1]
    assert scatter["layout"]["xaxis"]["type"] == "log" and scatter["data"][-1]["name"] == "identity"
    ok = [r for r in fixture_records(".") if r["status"] == "ok"]
    assert 0 < sum(len(decode(t["x"])) for t in scatter["data"][:-1]) <= len(ok)  # the newest source's runs


def test_report_to_a_place_it_cannot_write_exits_2_naming_it(tmp_path, capsys):
    """--out under a file (its directory cannot be made): exit 2 with the path and the reason, no traceback."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "r.html"
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out)]) == 2
    assert f"--out {out}: cannot be written: " in capsys.readouterr().err
