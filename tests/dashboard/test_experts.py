"""The Experts view on real records: ``fixtures/moe/runs`` holds the 8 records of one run of
``parbench sweep parbench/sweeps/moe.toml`` (single x1, ep x2, ep x4 at ep=4 and ep=2, ddp and fsdp
x2 and x4; moe L2 H64 T32, 4 experts top-2, capacity 1.25, learned router; torch 2.13 CPU, gloo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.data import RESULTS_DIR_ENV
from dashboard.views import experts

from .conftest import APP, decode

MOE = Path(__file__).parent / "fixtures" / "moe"
RECORDS = [json.loads(p.read_text()) for p in sorted((MOE / "runs").glob("*.json"))]


def figure(at: AppTest, key: str) -> dict:
    return json.loads(at.get_by_key(key).proto.spec)


def test_experts_view_draws_the_recorded_routing_and_bytes(monkeypatch):
    monkeypatch.setenv(RESULTS_DIR_ENV, str(MOE))
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    at = at.radio(key="view").set_value("experts").run()
    assert not at.exception
    chosen = at.selectbox(key="experts-run").value
    ep2 = next(label for label in at.selectbox(key="experts-run").options if label.startswith("ep x2"))
    at = at.selectbox(key="experts-run").set_value(ep2).run()
    record = next(r for r in RECORDS if r["strategy"] == "ep" and r["world_size"] == 2)
    heat = figure(at, "experts-heatmap")["data"][0]
    assert decode(heat["z"]) == record["moe_tokens_per_expert_per_rank"] and chosen
    imbalance = figure(at, "experts-imbalance")["data"]
    assert len([t for t in imbalance if t.get("showlegend") is not False]) == len(RECORDS)  # every strategy routes
    bars = {t["name"]: t for t in figure(at, "experts-bytes")["data"]}
    row = decode(bars["all-to-all dispatch"]["y"]).index(ep2)
    assert decode(bars["all-to-all dispatch"]["x"])[row] * experts.MIB == record["comm_moe_dispatch_bytes_per_step"]


@pytest.mark.slow
def test_no_moe_runs_says_how_to_make_them(monkeypatch, tmp_path):
    from .conftest import FIXTURE_RESULTS

    monkeypatch.setenv(RESULTS_DIR_ENV, str(FIXTURE_RESULTS))
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    at = at.radio(key="view").set_value("experts").run()
    assert not at.exception
    assert any("parbench/sweeps/moe.toml" in i.value for i in at.info)
