"""The pure chart functions on the committed real-run fixture: exact data, fixed colours, units."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pandas as pd
import pytest

from parbench import charts
from parbench.results import load

from .conftest import FIXTURE_RESULTS, decode, fixture_records


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return charts.prepare(load(FIXTURE_RESULTS))


def test_prepare_labels_and_strategy_order(runs):
    assert list(runs["strategy"]) == ["single"] * 3 + ["ddp"] * 3 + ["pipeline"]
    assert set(runs["workload_label"]) == {"mlp L1 H512 B64", "mlp L2 H512 B64"}
    assert set(runs["source"]) == {".", "archive"}
    assert charts.prepare(load(FIXTURE_RESULTS / "missing")).empty


def test_scaling_points_are_median_min_max_over_repeats(runs):
    recs = [r for r in fixture_records() if r["strategy"] == "ddp" and r["world_size"] == 2]
    tput = [r["throughput_samples_per_s"] for r in recs]
    single = [r["throughput_samples_per_s"] for r in fixture_records()
              if r["world_size"] == 1 and r["layers"] == 1]
    pts = charts.scaling_points(runs).set_index(["strategy", "workload_label", "world_size"])
    row = pts.loc[("ddp", "mlp L1 H512 B64", 2)]
    assert (row["median"], row["min"], row["max"], row["repeats"]) == (statistics.median(tput), min(tput), max(tput), 2)
    assert row["efficiency"] == pytest.approx(statistics.median(tput) / (2 * statistics.median(single)))
    # pipeline's reference is the single run of *its* workload (2 layers), not the 1-layer one
    pipe = [r for r in fixture_records() if r["strategy"] == "pipeline"][0]
    ref = [r for r in fixture_records() if r["world_size"] == 1 and r["layers"] == 2][0]
    assert pts.loc[("pipeline", "mlp L2 H512 B64", 2), "efficiency"] == pytest.approx(
        pipe["throughput_samples_per_s"] / (2 * ref["throughput_samples_per_s"]))


def test_scaling_figure_traces_colours_and_error_bars(runs):
    fig = charts.scaling_throughput(runs).to_plotly_json()
    ddp = next(t for t in fig["data"] if t["name"].startswith("ddp"))
    assert decode(ddp["x"]) == [2, 4]
    assert ddp["line"]["color"] == charts.STRATEGY_COLORS["ddp"]
    tput = sorted(r["throughput_samples_per_s"] for r in fixture_records() if r["strategy"] == "ddp" and r["world_size"] == 2)
    assert decode(ddp["error_y"]["array"])[0] == pytest.approx(tput[1] - statistics.median(tput))
    assert fig["layout"]["xaxis"]["title"]["text"] == "world size (ranks)"
    assert "samples/s" in fig["layout"]["yaxis"]["title"]["text"]


def test_memory_uses_busiest_rank_of_per_rank(runs):
    pipe = runs[runs["strategy"] == "pipeline"].iloc[0]
    busiest = max(pipe["per_rank"], key=lambda r: sum(r[c] for c in charts.MEMORY_PARTS))
    groups = charts.stacked_groups(runs, charts.MEMORY_PARTS).set_index("group_label")
    assert groups.loc["pipeline x2", "mem_param_bytes"] == busiest["mem_param_bytes"]
    per_rank = charts.memory_per_rank(pipe).to_plotly_json()
    params = next(t for t in per_rank["data"] if t["name"] == "parameters" and t["showlegend"] is False)
    assert decode(params["y"]) == pytest.approx([r["mem_param_bytes"] / charts.MIB for r in pipe["per_rank"]])
    assert params["marker"]["color"] == [charts.STRATEGY_COLORS["pipeline"]] * 2
    assert per_rank["layout"]["yaxis"]["title"]["text"] == "memory (MiB)"


def test_communication_categories_ops_and_os_bytes(runs):
    groups = charts.stacked_groups(runs, charts.COMM_PARTS).set_index("group_label")
    ddp2 = [r for r in fixture_records() if r["strategy"] == "ddp" and r["world_size"] == 2][0]
    assert groups.loc["ddp x2", "comm_parameter_bytes_per_step"] == ddp2["comm_parameter_bytes_per_step"]
    assert groups.loc["pipeline x2", "comm_intermediate_bytes_per_step"] > 0
    ops = charts.comm_ops_frame(runs)
    assert set(ops["op"]) == {"all_reduce/parameter", "send/intermediate", "recv/intermediate"}
    fig = charts.comm_modeled_vs_os(runs).to_plotly_json()
    wire = next(t for t in fig["data"] if t["name"] == "ddp: modeled wire")
    assert len(decode(wire["x"])) == 3 and "MiB/step" in fig["layout"]["yaxis"]["title"]["text"]


def test_step_time_and_loss_charts_carry_every_value(runs):
    box = charts.step_time_box(runs).to_plotly_json()
    assert len(box["data"]) == len(runs)
    first = runs.iloc[0]
    trace = next(t for t in box["data"] if t["name"] == first["run_label"])
    assert decode(trace["y"]) == pytest.approx([t * 1e3 for t in first["step_times_s"]])
    curves = charts.loss_curves(runs).to_plotly_json()["data"]
    assert curves[-1]["line"]["dash"] == "dash"  # the single reference is drawn last, on top
    diff = charts.loss_diff(runs).to_plotly_json()
    assert {t["name"] for t in diff["data"]} == {"ddp", "pipeline"} and diff["layout"]["yaxis"]["type"] == "log"


def test_compare_table_ratios(runs):
    ok = runs[runs["group_label"].isin(["ddp x2", "ddp x4"])]
    table = charts.compare_table(ok, by="group_label")
    x2 = statistics.median(r["throughput_samples_per_s"] for r in fixture_records()
                           if r["strategy"] == "ddp" and r["world_size"] == 2)
    x4 = [r for r in fixture_records() if r["world_size"] == 4][0]["throughput_samples_per_s"]
    assert table.loc["throughput (samples/s)", "ddp x4 / ddp x2"] == pytest.approx(x4 / x2)


# x axes that name categories, not quantities (no unit to show)
CATEGORICAL_X = ("strategy x world size", "op / category", "metric", "run", "run (strategy x world size, run id)")


def test_every_report_chart_has_axis_units_and_handles_empty(runs):
    empty = charts.prepare(load(FIXTURE_RESULTS / "missing"))
    for _, builders in charts.REPORT_SECTIONS:
        for build in builders:
            layout = build(runs).to_plotly_json()["layout"]
            assert "(" in layout["yaxis"]["title"]["text"], layout["yaxis"]  # numeric: unit in brackets
            x = layout["xaxis"]["title"]["text"]
            assert "(" in x or x in CATEGORICAL_X, x
            build(empty)  # an empty frame gives a placeholder figure, never an exception


def test_dashboard_and_report_never_import_torch():
    code = ("import sys; sys.path.insert(0, '.'); import dashboard.data, dashboard.views, parbench.report, "
            "parbench.charts, parbench.commands.dashboard, parbench.commands.report; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=FIXTURE_RESULTS.parents[3])
    assert out.stdout.strip() == "False"
