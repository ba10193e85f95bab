"""The pure chart functions on the committed real-run fixture: layouts told apart, workloads and sources
never pooled, exact values recomputed from the raw records, fixed colours, units, readable axes."""

from __future__ import annotations

import statistics

import pandas as pd
import pytest

from parbench import charts
from parbench.results import load

from .conftest import FIXTURE_RESULTS, MESHES, decode, fixture_records, mesh

MLP, TRANSFORMER = "mlp L3 H128 B48", "transformer L4 H32 heads4 T16 V128 B48"


@pytest.fixture(scope="module")
def everything() -> pd.DataFrame:
    return charts.prepare(load(FIXTURE_RESULTS))


@pytest.fixture(scope="module")
def reference(everything) -> pd.DataFrame:
    """The reference source alone, relabelled as the dashboard does after its source filter."""
    return charts.relabel(everything[everything["source"] == "reference"])


def ref_records(**match) -> list[dict]:
    return [r for r in fixture_records("reference") if all(r[k] == v for k, v in match.items())]


def traces_by_axis(fig: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for t in fig["data"]:
        out.setdefault(t.get("xaxis", "x"), []).append(t)
    return out


def facet_axes(fig: dict) -> dict[str, str]:
    """Workload -> x axis name of its facet (the figure's ``layout.meta``)."""
    return fig["layout"]["meta"]["facets"]


# --- the layout key --------------------------------------------------------------------------


def test_three_hybrid_meshes_are_three_layouts_labelled_by_their_mesh(reference):
    hybrid = reference[reference["strategy"] == "hybrid"]
    assert hybrid["group_key"].nunique() == 6  # 3 meshes x 2 workloads
    assert set(hybrid["layout_label"]) == {f"hybrid x4 {m}" for m in MESHES}
    for _, row in hybrid.iterrows():
        assert row["layout_label"] == f"hybrid x4 {mesh(row)}"
    # parts with one value among the runs shown stay out of the labels
    assert set(reference.loc[reference["strategy"] == "ddp", "layout_label"]) == {"ddp x2", "ddp x4"}
    assert set(reference.loc[reference["strategy"] == "pipeline", "layout_label"]) == {"pipeline x2"}


def test_labels_name_only_what_differs_within_the_selection(everything):
    ddp = charts.relabel(everything[(everything["strategy"] == "ddp") & (everything["source"] == "reference")
                                    & (everything["world_size"] == 2)])
    assert set(ddp["layout_label"]) == {"ddp x2"} and set(ddp["workload_label"]) == {MLP, TRANSFORMER}
    both = charts.relabel(everything[everything["strategy"] == "single"])  # two sources shown: say which
    assert set(both["layout_label"]) == {"single x1 [this directory]", "single x1 [reference]"}
    assert everything["short_id"].str.len().eq(8).all()


def test_medians_only_over_repeats_of_one_layout(reference):
    groups = charts.group_medians(reference, ["throughput_samples_per_s"]).set_index("layout_label")
    for m in MESHES:
        recs = [r for r in ref_records(strategy="hybrid", workload="transformer") if mesh(r) == m]
        row = groups[(groups.index == f"hybrid x4 {m}") & (groups["workload_label"] == TRANSFORMER)].iloc[0]
        tput = [r["throughput_samples_per_s"] for r in recs]
        assert (row["throughput_samples_per_s"], row["repeats"]) == (statistics.median(tput), 2)
        assert row["throughput_samples_per_s_min"] == min(tput) and row["throughput_samples_per_s_max"] == max(tput)


def test_layout_key_tolerates_records_without_newer_fields(everything):
    old = load(FIXTURE_RESULTS).drop(columns=["dp_mode", "servers", "data_mode"])
    prepared = charts.prepare(old)
    assert prepared["group_key"].nunique() == everything["group_key"].nunique()


# --- scaling ---------------------------------------------------------------------------------


def test_scaling_one_line_per_mesh_joined_to_the_single_process_run(reference):
    fig = charts.scaling_throughput(reference).to_plotly_json()
    axes = facet_axes(fig)
    assert set(axes) == {MLP, TRANSFORMER}
    on = traces_by_axis(fig)
    for wl, workload in ((MLP, "mlp"), (TRANSFORMER, "transformer")):
        single = statistics.median(r["throughput_samples_per_s"] for r in ref_records(strategy="single", workload=workload))
        traces = {t["name"]: t for t in on[axes[wl]]}
        assert {"hybrid tp2·pp2", "hybrid tp1·pp2", "hybrid tp2·pp1", "ddp", "pipeline", "tp", "zero2"} == set(traces)
        for m in MESHES:
            t = traces[f"hybrid tp{m[6]}·pp{m[10]}"]
            tput = [r["throughput_samples_per_s"] for r in ref_records(strategy="hybrid", workload=workload) if mesh(r) == m]
            assert decode(t["x"]) == [1, 4]
            assert decode(t["y"]) == pytest.approx([single, statistics.median(tput)])
        ddp = traces["ddp"]
        assert decode(ddp["x"]) == [1, 2, 4] and decode(ddp["y"])[0] == pytest.approx(single)


def test_scaling_axes_log_when_wide_and_ticks_at_measured_world_sizes(reference, everything):
    fig = charts.scaling_throughput(reference).to_plotly_json()["layout"]
    assert fig["xaxis"]["type"] == "log" and list(fig["xaxis"]["tickvals"]) == [1, 2, 4]
    mlp = [r["throughput_samples_per_s"] for r in ref_records(workload="mlp")]
    assert (fig["yaxis"].get("type") == "log") == (max(mlp) / min(mlp) > 10)
    one = charts.relabel(everything[everything["run_id"] == fixture_records(".")[0]["run_id"]])
    lay = charts.scaling_throughput(one).to_plotly_json()["layout"]["xaxis"]
    w = fixture_records(".")[0]["world_size"]
    assert list(lay["tickvals"]) == [w] and lay["range"][0] > -0.5 and lay["range"][1] < 1.0  # not 0.25 .. 16


def test_efficiency_uses_the_same_workload_and_source(reference):
    pts = charts.scaling_points(reference)
    row = pts[(pts["layout_label"] == "ddp x4") & (pts["workload_label"] == TRANSFORMER)].iloc[0]
    single = statistics.median(r["throughput_samples_per_s"] for r in ref_records(strategy="single", workload="transformer"))
    x4 = ref_records(strategy="ddp", world_size=4, workload="transformer")[0]["throughput_samples_per_s"]
    assert row["efficiency"] == pytest.approx(x4 / (4 * single))


# --- stacked bars ----------------------------------------------------------------------------


@pytest.mark.parametrize("build, parts", [(charts.memory_stacked, charts.MEMORY_PARTS),
                                          (charts.comm_stacked, charts.COMM_PARTS)])
def test_stacked_bars_horizontal_faceted_growing_with_a_complete_legend(reference, build, parts):
    fig = build(reference).to_plotly_json()
    bars = [t for t in fig["data"] if t["type"] == "bar" and t.get("showlegend") is False]
    assert {t["orientation"] for t in bars} == {"h"}
    legend = [t["name"] for t in fig["data"] if t.get("showlegend") is not False and t["type"] == "bar"]
    assert legend == list(parts.values())  # every part keyed, zero or not
    labels = {y for t in bars for y in t["y"]}
    assert {f"hybrid x4 {m}" for m in MESHES} <= labels
    layouts = reference[reference["status"] == "ok"]["group_key"].nunique()
    assert fig["layout"]["height"] >= 26 * layouts
    assert set(facet_axes(fig)) == {MLP, TRANSFORMER}


def test_memory_bar_values_and_process_context(reference):
    fig = charts.memory_stacked(reference).to_plotly_json()
    axes = facet_axes(fig)
    rec = [r for r in ref_records(strategy="hybrid", workload="transformer") if mesh(r) == "dp1·tp2·pp2"]
    busiest = [max(r["per_rank"], key=lambda p: sum(p[c] for c in charts.MEMORY_PARTS)) for r in rec]
    params = next(t for t in fig["data"] if t["name"] == "parameters" and t.get("showlegend") is False
                  and t["xaxis"] == axes[TRANSFORMER])
    i = list(params["y"]).index("hybrid x4 dp1·tp2·pp2")
    assert decode(params["x"])[i] == pytest.approx(statistics.median(b["mem_param_bytes"] for b in busiest) / charts.MIB)
    text = next(t for t in fig["data"] if t.get("mode") == "text" and t["xaxis"] == axes[TRANSFORMER])
    rss = statistics.median(r["peak_rss_bytes"] for r in rec) / charts.MIB
    assert f"RSS {rss:,.0f} MiB" in text["text"][list(text["y"]).index("hybrid x4 dp1·tp2·pp2")]


def test_colours_strategy_everywhere_world_sizes_told_apart(reference):
    colors = charts.layout_colors(reference)
    by_label = dict(zip(reference["layout_label"], reference["layout_key"]))
    assert colors[by_label["ddp x2"]] == charts.STRATEGY_COLORS["ddp"]
    assert colors[by_label["ddp x4"]] != colors[by_label["ddp x2"]]
    assert len({colors[by_label[f"hybrid x4 {m}"]] for m in MESHES}) == 3
    from parbench.sim.charts import predicted_vs_measured
    frame = pd.DataFrame({"strategy": ["ddp", "tp"], "workload": ["mlp", "mlp"], "world_size": [2, 2],
                          "step_time_measured_s": [0.01, 0.2], "step_time_predicted_s": [0.012, 0.1]})
    sim = predicted_vs_measured(frame).to_plotly_json()
    assert [t["marker"]["color"] for t in sim["data"][:2]] == [charts.STRATEGY_COLORS["ddp"], charts.STRATEGY_COLORS["tp"]]
    assert sim["layout"]["xaxis"]["type"] == sim["layout"]["yaxis"]["type"] == "log"


# --- compare, correctness, step time -----------------------------------------------------------


def test_compare_never_divides_across_workloads(reference):
    picks = ["single x1 · " + MLP, "ddp x2 · " + MLP, "single x1 · " + TRANSFORMER, "ddp x4 · " + TRANSFORMER]
    chosen = reference[reference["config_label"].isin(picks)]
    chosen = chosen.assign(_o=chosen["config_label"].map(picks.index)).sort_values("_o")
    table = charts.compare_table(chosen, by="config_label")
    ratios = [c for c in table.columns if " / " in c]
    assert ratios == [f"{picks[1]} / {picks[0]}", f"{picks[3]} / {picks[2]}"]
    x4 = ref_records(strategy="ddp", world_size=4, workload="transformer")[0]["throughput_samples_per_s"]
    single = statistics.median(r["throughput_samples_per_s"] for r in ref_records(strategy="single", workload="transformer"))
    assert table.loc["throughput (samples/s)", ratios[1]] == pytest.approx(x4 / single)
    fig = charts.compare_ratios(chosen, by="config_label").to_plotly_json()
    axes = facet_axes(fig)
    names = {t["xaxis"]: t["name"] for t in fig["data"]}
    assert names == {axes[MLP]: "ddp x2 / single x1", axes[TRANSFORMER]: "ddp x4 / single x1"}


def test_compare_ratio_ticks_read_as_ratios_and_say_which_way_is_better(reference):
    chosen = reference[reference["config_label"].isin(["single x1 · " + MLP, "ddp x2 · " + MLP])]
    fig = charts.compare_ratios(chosen, by="config_label").to_plotly_json()
    y = fig["layout"]["yaxis"]
    assert y["type"] == "log" and "0.5" in y["ticktext"] and "0.2" in y["ticktext"]
    assert y["tickvals"][y["ticktext"].index("0.5")] == 0.5
    x = list(fig["data"][0]["x"])
    assert "throughput (samples/s) ↑" in x and "step time median (ms) ↓" in x


def test_loss_diff_exact_zero_is_zero_and_the_tolerance_is_drawn(reference):
    runs = reference.copy()
    i = runs.index[(runs["strategy"] == "ddp")][0]
    runs.loc[i, "loss_max_abs_diff_vs_reference"] = 0.0
    fig = charts.loss_diff(runs).to_plotly_json()
    ys = [(t["name"], v, s) for t in fig["data"] for v, s in zip(decode(t["y"]), t["marker"]["symbol"])]
    floor = min(v for _, v, _ in ys)
    assert floor < min(v for v in runs["loss_max_abs_diff_vs_reference"].dropna() if v > 0)
    assert ("ddp", floor, "circle-open") in ys
    axis = fig["layout"]["yaxis"]
    assert axis["ticktext"][0] == "0 (exact)" and axis["tickvals"][0] == floor
    assert any(s.get("y0") == charts.LOSS_TOLERANCE for s in fig["layout"]["shapes"])
    # a bf16 run is judged by its own tolerance: 1e-3 passes under 5e-2, fails under 1e-5
    j = runs.index[(runs["strategy"] == "tp")][0]
    runs.loc[j, "loss_max_abs_diff_vs_reference"] = 1e-3
    symbol = lambda f: next(s for t in f["data"] if t["name"] == "tp"  # noqa: E731
                            for v, s in zip(decode(t["y"]), t["marker"]["symbol"]) if v == 1e-3)
    assert symbol(charts.loss_diff(runs).to_plotly_json()) == "x"
    runs["loss_tolerance"] = None
    runs.loc[j, "loss_tolerance"] = 5e-2
    bf16 = charts.loss_diff(runs).to_plotly_json()
    assert symbol(bf16) == "circle" and any(s.get("y0") == 5e-2 for s in bf16["layout"]["shapes"])


def test_step_time_labels_carry_the_workload_and_say_how_many(reference):
    shown, total = charts.step_time_shown(reference, 5)
    assert (shown, total) == (5, int((reference["status"] == "ok").sum()))
    fig = charts.step_time_box(reference, 5).to_plotly_json()
    assert len(fig["data"]) == 5 and set(facet_axes(fig)) <= {MLP, TRANSFORMER}
    first = charts.newest(reference, 5).iloc[0]
    trace = next(t for t in fig["data"] if t["name"] == first["run_label"])
    assert decode(trace["y"]) == pytest.approx([t * 1e3 for t in first["step_times_s"]])


# --- landing, overview -----------------------------------------------------------------------


def test_ranking_per_workload_fastest_and_fastest_that_fits(reference):
    ranked = charts.ranking(reference)
    for wl, workload in ((MLP, "mlp"), (TRANSFORMER, "transformer")):
        sub = ranked[ranked["workload_label"] == wl]
        assert list(sub["rank"]) == list(range(1, len(sub) + 1))
        assert sub["throughput_samples_per_s"].is_monotonic_decreasing
        recs = [r for r in fixture_records("reference") if r["workload"] == workload]
        key = lambda r: (r["strategy"], r["world_size"], mesh(r) if r["strategy"] == "hybrid" else "")  # noqa: E731
        medians = {k: statistics.median(r["throughput_samples_per_s"] for r in recs if key(r) == k) for k in map(key, recs)}
        best = max(medians, key=medians.get)
        assert sub.iloc[0]["throughput_samples_per_s"] == pytest.approx(medians[best])
        mem = lambda r: sum(max(r["per_rank"], key=lambda p: sum(p[c] for c in charts.MEMORY_PARTS))[c]  # noqa: E731
                            for c in charts.MEMORY_PARTS)
        single = statistics.median(mem(r) for r in recs if r["world_size"] == 1)
        fits = {k: statistics.median(mem(r) for r in recs if key(r) == k) < single for k in medians}
        fastest_fit = max((k for k in medians if fits[k]), key=medians.get)
        assert sub[sub["fastest_fit"]].iloc[0]["throughput_samples_per_s"] == pytest.approx(medians[fastest_fit])


def test_pareto_front_of_what_was_measured():
    mem = pd.Series([1.0, 2.0, 3.0, 4.0])
    tput = pd.Series([10.0, 5.0, 20.0, 20.0])
    assert pareto_list(mem, tput) == [True, False, True, False]
    assert pareto_list(mem[::-1], tput[::-1]) == [False, True, False, True]


def pareto_list(mem, tput) -> list[bool]:
    return charts.pareto_mask(mem, tput).tolist()


def test_overview_table_configuration_first_short_ids_and_errors(everything):
    table = charts.overview_table(everything)
    assert list(table.columns[:5]) == ["run", "source", "workload", "strategy", "W"]
    assert table.columns.get_loc("mesh") < table.columns.get_loc("samples/s")
    failed = table[table["status"] == "failed"]
    assert len(failed) == 1 and "rank 1" in failed["error"].iloc[0]
    assert table["run"].str.len().eq(8).all()
    grouped = charts.grouped_table(everything, "group_key")
    assert grouped["runs"].sum() == len(everything) and len(grouped) == everything["group_key"].nunique()


# x axes that name categories, not quantities (no unit to show)
CATEGORICAL_X = ("metric", "run", "run (layout · run id)")


def test_every_report_chart_has_axis_units_and_handles_empty(everything):
    empty = charts.prepare(load(FIXTURE_RESULTS / "missing"))
    for _, builders in charts.REPORT_SECTIONS:
        for build in builders:
            fig = build(everything).to_plotly_json()
            layout = fig["layout"]
            if not fig["data"]:  # a placeholder ("no ... in these runs") draws no axes
                assert layout["annotations"][0]["text"], layout
                continue
            assert "(" in layout["xaxis"]["title"]["text"] or layout["xaxis"]["title"]["text"] in CATEGORICAL_X
            y = layout["yaxis"]["title"]["text"]
            assert "(" in y or y == "layout", y
            build(empty)  # an empty frame gives a placeholder figure, never an exception


def test_runs_table_shows_mfu_and_gpu_memory_only_where_measured(everything):
    assert not {"MFU %", "GPU alloc peak MiB", "GPU used % of device"} & set(charts.overview_table(everything).columns)
    gpu = everything.head(2).assign(mfu=[0.4, None], cuda_allocated_peak_bytes=[3 * 2**20, None],
                                    cuda_device_used_bytes=[20 * 2**30, None], cuda_device_total_bytes=[80 * 2**30, None])
    table = charts.overview_table(gpu)
    assert table["MFU %"].iloc[0] == pytest.approx(40.0) and table["GPU alloc peak MiB"].iloc[0] == 3
    assert table["GPU used % of device"].iloc[0] == pytest.approx(25.0) and pd.isna(table["MFU %"].iloc[1])


def test_layout_pairs_on_log_axes_that_span_every_pair_and_read_as_ratios():
    """Rate ratios compose by multiplication: both axes are logarithmic, their range (log10 units) holds every pair,
    a misordered one (below 1) included, and their ticks are ratios; an 18x pair leaves the 1-3x ones readable."""
    import math

    from parbench.sim.accuracy import LayoutPair
    from parbench.sim.charts import RATIO_TICKS, layout_pairs_figure

    pairs = [LayoutPair("a", "b", ("s", "s"), 18.6, 15.2, ("global_batch_size",)),
             LayoutPair("c", "d", ("s", "s"), 1.3, 0.8, ("tp",)),
             LayoutPair("e", "f", ("s", "s"), 1.1, 1.2, ("precision",))]
    fig = layout_pairs_figure(pairs)
    x, y = fig.layout.xaxis, fig.layout.yaxis
    assert x.type == y.type == "log" and tuple(x.tickvals) == tuple(y.tickvals) == RATIO_TICKS
    assert 10 ** x.range[0] < 1 and 10 ** x.range[1] > 18.6
    assert 10 ** y.range[0] < 0.8 and 10 ** y.range[1] > 18.6
    # the log range gives 1-1.3x over 8% of the axis; a linear one, under 2%
    assert (math.log10(1.3) - math.log10(1.0)) / (x.range[1] - x.range[0]) > 0.08
    drawn = [v for t in fig.data if t.mode == "markers" for v in t.x]
    assert sorted(drawn) == [1.1, 1.3, 18.6]


def test_runs_table_says_which_runs_were_oversubscribed_where_recorded(everything):
    """Records older than the field leave the column out; where a run recorded it, the table shows it."""
    assert "oversubscribed" not in charts.overview_table(everything.assign(oversubscribed=None)).columns
    marked = everything.head(2).assign(oversubscribed=[True, False])
    assert list(charts.overview_table(marked)["oversubscribed"]) == [True, False]


def test_scaling_charts_shade_the_world_sizes_whose_runs_were_oversubscribed(everything):
    """Runs above two ranks recorded as oversubscribed (a 2-CPU host): each panel with such runs gets a band from
    sqrt(2 x 4) (halfway on the log axis) to the right edge, labelled; records without the field get none."""
    import math

    assert not charts.scaling_throughput(everything).to_plotly_json()["layout"].get("shapes")
    marked = everything.assign(oversubscribed=everything["world_size"] > 2)
    for build in (charts.scaling_throughput, charts.scaling_efficiency):
        layout = build(marked).to_plotly_json()["layout"]
        bands = [s for s in layout["shapes"] if s["type"] == "rect"]
        panels = {wl for wl, g in charts.ok_runs(marked).groupby("workload_label") if (g["world_size"] > 2).any()}
        assert len(bands) == len(panels) > 0
        assert all(b["x0"] == pytest.approx(math.sqrt(2 * 4)) for b in bands)
        assert sum(a["text"] == "oversubscribed" for a in layout["annotations"]) == len(panels)
