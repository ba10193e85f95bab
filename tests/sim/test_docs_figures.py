"""The validation figures README.md and docs/simulator.md state are the ones ``parbench validate --published``
computes today: a change to the model or to the published rows that moves one fails here until the docs say it."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from parbench.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def validated() -> dict:
    """``parbench validate --published --format json``, once for every check below (it takes seconds)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["validate", "--published", "--format", "json"]) in (0, 1)
    return json.loads(out.getvalue())


def _figures(v: dict) -> dict:
    """What the docs quote, computed: each judged source's (mean, max, met) at the docs' rounding, the trend
    signs, the layout pairs (``accuracy.pair_summary``'s keys) and the feasibility counts."""
    from parbench.sim.accuracy import LayoutPair, pair_summary

    t = v["published_targets"]
    judged = [(m["mean_abs_error_pct"], m["max_abs_error_pct"], False) for m in t["missed"]]
    means = {s["source"]: (s["mean_abs_error_pct"], s["max_abs_error_pct"]) for s in v["published_by_source"]}
    for s in v["published_memory_by_source"]:
        if s["metric_mean_abs_error_pct"] is not None:
            means.setdefault(s["source"], (s["metric_mean_abs_error_pct"], s["metric_max_abs_error_pct"]))
    judged += [(*means[name], True) for name in t["met"]]
    trends = list(v["published_trends"].values())
    pairs = pair_summary([LayoutPair(**{k: p[k] for k in LayoutPair.__dataclass_fields__}) for p in v["published_pairs"]])
    by = v["published_memory_by_source"]
    flat = v["published_scale_out"]
    return {"sources": sorted((round(a, 1), round(b, 1), met) for a, b, met in judged),
            "met": (len(t["met"]), len(judged)), "trends": (sum(s["match"] for s in trends), len(trends)), "pairs": pairs,
            "flatter": (flat["flatter"], len(trends)), "median_excess": round(flat["median_pct_per_doubling"], 2),
            "fit": (sum(s["ran_predicted_to_fit"] for s in by), sum(s["ran"] for s in by)),
            "oom": (sum(s["infeasible_predicted_not_to_fit"] for s in by), sum(s["infeasible"] for s in by))}


def _at_a_glance(doc: str) -> list[tuple[float, float, bool]]:
    """docs/simulator.md's "At a glance" table as (mean, max, within both targets) per source."""
    section = doc.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    row = r"^\|[^|\n]+\| *\d+ *\| *([\d.]+)% *\| *([\d.]+)% *\| *(yes|no) *\|$"
    rows = re.findall(row, section, flags=re.MULTILINE)
    return sorted((float(a), float(b), met == "yes") for a, b, met in rows)


def _ints(pattern: str, text: str) -> tuple[int, ...]:
    m = re.search(pattern, " ".join(text.split()))
    assert m, pattern
    return tuple(int(g) for g in m.groups())


def test_the_simulator_docs_at_a_glance_table_is_what_validate_computes(validated):
    doc = (ROOT / "docs" / "simulator.md").read_text()
    f = _figures(validated)
    assert _at_a_glance(doc) == f["sources"]
    assert _ints(r"Scaling-trend sign right on (\d+) of (\d+) published series", doc) == f["trends"]
    m = re.search(r"falls less than the published one in (\d+) of the (\d+) series \(median ([+-][\d.]+)% a doubling",
                  " ".join(doc.split()))
    assert m and ((int(m[1]), int(m[2])), float(m[3])) == (f["flatter"], f["median_excess"])


def test_the_readme_s_validation_figures_are_what_validate_computes(validated):
    readme = (ROOT / "README.md").read_text()
    f, p = _figures(validated), _figures(validated)["pairs"]
    assert _ints(r"max <= 12%; (\d+) of (\d+) on", readme) == f["met"]
    assert _ints(r"published pairs of layouts more and less than 5% apart \((\d+) of (\d+), (\d+) of (\d+)\)",
                 readme) == (p["decided_ordered"], p["decided"], p["close_ordered"], p["close"])
    assert _ints(r"the run published faster is predicted faster in (\d+) of the (\d+) pairs published more than 5% "
                 r"apart \((\d+) of (\d+) that differ in precision alone, (\d+) of (\d+) in the layout", readme) == (
        p["decided_ordered"], p["decided"], p["precision_ordered"], p["precision"], p["layout_ordered"], p["layout"])
    assert _ints(r"\((\d+) of (\d+) signs right; the predicted fall is the smaller in (\d+) of the (\d+)\)", readme) == (
        *f["trends"], *f["flatter"])
    assert _ints(r"must be predicted to fit \((\d+) of (\d+) do;", readme) == f["fit"]
    assert _ints(r"clearly infeasible must not \((\d+) of (\d+):", readme) == f["oom"]


def test_the_readme_s_megatron_bridge_and_memory_figures_are_what_the_model_gives():
    """README's held-out Megatron-Bridge rows split into dense models and mixtures of experts, and its peak-memory
    figures, against ``compare_runs`` today."""
    from statistics import mean

    from parbench.sim.published_memory import MBRIDGE_LATER, compare_runs, runs

    experts = {(r.source, r.name): bool(r.arch is not None and r.arch.experts) for r in runs()}
    rows = compare_runs()
    later = [r for r in rows if r["source"] == MBRIDGE_LATER and r["metric_error_pct"] is not None]
    split = {moe: [abs(r["metric_error_pct"]) for r in later if experts[r["source"], r["name"]] == moe]
             for moe in (False, True)}
    memory = [abs(r["memory_error_pct"]) for r in rows if r["memory_error_pct"] is not None]
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"\((\d+) rows: the (\d+) dense ones at a mean \|error\| of ([\d.]+)%, the (\d+) mixtures of experts "
                  r"at ([\d.]+)%", text)
    assert m and (int(m[1]), int(m[2]), float(m[3]), int(m[4]), float(m[5])) == (
        len(later), len(split[False]), round(mean(split[False]), 1), len(split[True]), round(mean(split[True]), 1))
    m = re.search(r"all (\d+) published peak-memory figures are within 10% \(mean ([\d.]+)%, max ([\d.]+)%", text)
    assert m and (int(m[1]), float(m[2]), float(m[3])) == (len(memory), round(mean(memory), 1), round(max(memory), 1))
    assert max(memory) <= 10
