"""``parbench report``: one self-contained HTML file with the dashboard's charts."""

from __future__ import annotations

import json
import re

from parbench import charts
from parbench.cli import main

from .conftest import FIXTURE_RESULTS, fixture_records


def plotly_figures(html: str) -> list[dict]:
    """The figure data of every ``Plotly.newPlot(id, data, layout, config)`` call in the page."""
    calls = re.findall(r'Plotly\.newPlot\(\s*"[^"]+",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{"responsive"', html, flags=re.S)
    return [{"data": json.loads(d), "layout": json.loads(l)} for d, l in calls]


def test_report_is_self_contained_with_every_section(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["report", "--results-dir", str(FIXTURE_RESULTS), "--out", str(out)]) == 0
    assert f"{out} ({len(fixture_records())} runs" in capsys.readouterr().out
    html = out.read_text()
    assert html.count("<script") >= 1 and not re.search(r'<script[^>]+src="https?://', html)  # no CDN
    assert len(html) > 1_000_000  # plotly.js itself is inlined, so the file opens offline
    for title, _ in charts.REPORT_SECTIONS:
        assert f"<h2>{title}</h2>" in html
    figures = plotly_figures(html)
    assert len(figures) == sum(len(b) for _, b in charts.REPORT_SECTIONS)
    names = {t.get("name") for f in figures for t in f["data"]}
    assert {"ddp", "pipeline"} <= {n.split(" ")[0] for n in names if n}
    for run_id in (r["run_id"] for r in fixture_records()):
        assert run_id in html  # the overview table lists every run


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
