"""The Streamlit app under ``streamlit.testing.v1.AppTest`` on the real-run fixture (two sources)."""

from __future__ import annotations

import json
import math
import re
import socket
import statistics
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.data import RESULTS_DIR_ENV, directory_signature
from dashboard.views import VIEWS
from parbench import charts

from .conftest import APP, FIXTURE_RESULTS, MESHES, decode, fixture_records

VIEW_CHARTS = {  # view key -> chart keys it must draw on the fixture
    "landing": ("landing-pareto",),
    "scaling": ("scaling-throughput", "scaling-efficiency"),
    "memory": ("memory-stacked", "memory-per-rank"),
    "communication": ("comm-stacked", "comm-ops", "comm-modeled-vs-os"),
    "step_time": ("step-time-box",),
    "compare": ("compare-ratios",),
    "correctness": ("loss-curves", "loss-diff"),
    "simulator": ("sim-whatif-memory", "sim-whatif-time", "sim-published"),
}
TITLES = {k: m.TITLE for k, m in VIEWS}


def run_app(monkeypatch, results_dir: Path, **query) -> AppTest:
    monkeypatch.setenv(RESULTS_DIR_ENV, str(results_dir))
    at = AppTest.from_file(str(APP), default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def show(at: AppTest, view: str) -> AppTest:
    return at.radio(key="view").set_value(view).run()


def figure(at: AppTest, key: str) -> dict:
    return json.loads(at.get_by_key(key).proto.spec)


def trace_names(at: AppTest, key: str) -> set[str]:
    return {t["name"] for t in figure(at, key)["data"]}


def test_every_view_renders_its_charts(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source=["reference", "."])
    assert not at.exception
    assert at.radio(key="view").options == [v.TITLE for _, v in VIEWS]
    for view, keys in VIEW_CHARTS.items():
        show(at, view)
        assert not at.exception, view
        for key in keys:
            assert figure(at, key)["data"], key
    assert not at.warning


def test_default_is_the_newest_source_and_says_so(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    assert at.sidebar.multiselect(key="filter-source").value == ["."]
    caption = at.caption[0].value
    assert "this directory" in caption and "(newest) of 2" in caption and "1 other source(s) hidden" in caption
    show(at, "overview")
    assert len(at.dataframe[0].value) == len(fixture_records("."))


def test_sources_not_pooled_when_both_are_picked(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="scaling")
    at.sidebar.multiselect(key="filter-source").set_value([".", "reference"]).run()
    names = trace_names(at, "scaling-throughput")
    assert {"ddp [this directory]", "ddp [reference]"} <= names


def test_three_meshes_are_three_layouts_in_every_chart(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference", view="memory")
    for view, key, axis in (("memory", "memory-stacked", "y"), ("communication", "comm-stacked", "y")):
        show(at, view)
        labels = {y for t in figure(at, key)["data"] if t["type"] == "bar" for y in t["y"] if y}
        assert {f"hybrid x4 {m}" for m in MESHES} <= labels, view
    show(at, "scaling")
    assert {"hybrid tp2·pp2", "hybrid tp1·pp2", "hybrid tp2·pp1"} <= trace_names(at, "scaling-throughput")


def test_filters_live_in_the_url_and_restore_from_it(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference", strategy=["single", "ddp"], view="scaling")
    assert at.sidebar.multiselect(key="filter-strategy").value == ["single", "ddp"]
    assert at.radio(key="view").value == "scaling"
    assert {n.split(" ")[0] for n in trace_names(at, "scaling-throughput")} == {"ddp"}
    at.sidebar.multiselect(key="filter-world_size").set_value([1, 2]).run()
    assert at.query_params["world_size"] == ["1", "2"] and at.query_params["strategy"] == ["single", "ddp"]
    assert at.query_params["view"] in ("scaling", ["scaling"])
    assert at.query_params["source"] in ("reference", ["reference"])


def test_directory_change_resets_the_filters(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS)
    at.sidebar.multiselect(key="filter-strategy").set_value(["ddp"]).run()
    at.sidebar.text_input(key="results_dir").set_value(str(FIXTURE_RESULTS / "reference")).run()
    assert not at.exception
    strategies = at.sidebar.multiselect(key="filter-strategy")
    assert strategies.value == strategies.options and "pipeline" in strategies.options


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_missing_and_empty_directories_are_told_apart(monkeypatch, tmp_path, make):
    target = tmp_path / "results"
    if make == "empty":
        (target / "runs").mkdir(parents=True)
    at = run_app(monkeypatch, target)
    assert not at.exception
    text = " ".join(e.value for e in [*at.info, *at.error])
    assert "parbench sweep" in text and str(target) in text
    assert ("does not exist" in text) == (make == "missing") and ("holds no run records" in text) == (make == "empty")


def test_compare_picks_survive_mode_and_view_switches(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference", view="compare")
    layouts = [f"hybrid x4 {m} · transformer L4 H32 heads4 T16 V128 B48" for m in MESHES]
    at.multiselect(key="compare-pick-layouts").set_value(layouts).run()
    at.radio(key="compare-mode").set_value("single runs").run()
    at.radio(key="compare-mode").set_value("layouts (median over repeats)").run()
    assert at.multiselect(key="compare-pick-layouts").value == layouts
    show(at, "scaling")
    show(at, "compare")
    assert at.multiselect(key="compare-pick-layouts").value == layouts
    names = trace_names(at, "compare-ratios")
    assert names == {f"hybrid x4 {m} / hybrid x4 {MESHES[0]}" for m in MESHES[1:]}


def test_compare_ratio_follows_the_picks_within_one_workload(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference", view="compare")
    mlp = "mlp L3 H128 B48"
    at.multiselect(key="compare-pick-layouts").set_value(
        [f"single x1 · {mlp}", f"ddp x4 · {mlp}", "single x1 · transformer L4 H32 heads4 T16 V128 B48"]).run()
    ratios = figure(at, "compare-ratios")["data"]
    assert [t["name"] for t in ratios] == ["ddp x4 / single x1"]  # the transformer pick has no partner
    single = statistics.median(r["throughput_samples_per_s"] for r in fixture_records("reference")
                               if r["world_size"] == 1 and r["workload"] == "mlp")
    x4 = [r for r in fixture_records("reference") if r["world_size"] == 4 and r["strategy"] == "ddp"
          and r["workload"] == "mlp"][0]["throughput_samples_per_s"]
    assert decode(ratios[0]["y"])[0] == pytest.approx(x4 / single)


def test_landing_names_the_fastest_layout_per_workload(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference")
    text = " ".join(m.value for m in at.markdown)
    for workload in ("mlp", "transformer"):
        recs = [r for r in fixture_records("reference") if r["workload"] == workload]
        best = max(recs, key=lambda r: r["throughput_samples_per_s"])  # one repeat's max: find the layout
        assert f"Fastest: **{best['strategy']} x{best['world_size']}" in text
    assert len([d for d in at.dataframe if "verdict" in d.value.columns]) == 2


def test_failed_run_is_listed_with_its_error_not_charted(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="overview")
    table = at.dataframe[0].value
    failed = table[table["status"] == "failed"]
    assert len(failed) == 1 and "rank 1" in failed["error"].iloc[0]
    at.sidebar.multiselect(key="filter-status").set_value(["failed"]).run()
    show(at, "scaling")
    assert not at.exception and "no successful runs" in json.dumps(figure(at, "scaling-throughput")["layout"])


def test_overview_group_by_and_csv(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, source="reference", view="overview")
    assert at.get_by_key("overview-csv") is not None
    at.selectbox(key="overview-group").set_value("layout (repeats of one layout)").run()
    grouped = at.dataframe[0].value
    assert len(grouped) == len({(r["workload"], r["strategy"], r["world_size"], r["dp"], r["tp"], r["pp"])
                                for r in fixture_records("reference")})


def test_simulator_what_if_needs_no_calibration(monkeypatch):
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    assert not at.exception
    assert "GiB" in figure(at, "sim-whatif-memory")["layout"]["title"]["text"]
    assert "MFU" in figure(at, "sim-whatif-time")["layout"]["title"]["text"]
    assert any("parbench calibrate" in i.value for i in at.info)
    at.number_input(key="sim-tp").set_value(3).run()  # 3 does not divide 32 heads
    assert not at.exception


def test_simulator_names_a_calibrated_profile_it_cannot_read(monkeypatch, tmp_path):
    """A half-written calibration/vm.json: the view warns with the file and the way out, shows the rest, and
    offers no `local` cluster; never an exception."""
    import shutil

    shutil.copytree(FIXTURE_RESULTS, tmp_path / "r")
    (tmp_path / "r" / "calibration").mkdir()
    (tmp_path / "r" / "calibration" / f"{socket.gethostname()}.json").write_text('{"cluster": {"name": ')
    at = run_app(monkeypatch, tmp_path / "r", view="simulator")
    assert not at.exception
    [warning] = [w.value for w in at.warning if "calibrated profile cannot be read" in w.value]
    assert "calibration/" in warning and "run `parbench calibrate` again" in warning
    assert "local" not in at.selectbox(key="sim-cluster").options
    assert figure(at, "sim-published")["data"]


def test_simulator_what_if_shows_the_nearest_published_runs(monkeypatch):
    """The panel's default (GPT-3 2.7B, dp 8, on the first preset, an A100) beside its three nearest published rows,
    each on the A100's tensor cores, with the error ``parbench.sim.accuracy`` computes for it; a TP that leaves
    the layout invalid shows no table and no exception."""
    from parbench.commands.simulate import layout_for
    from parbench.sim.accuracy import nearest_published
    from parbench.sim.hardware import PRESETS

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    assert not at.exception
    [table] = [d.value for d in at.dataframe if "published run" in d.value.columns]
    cluster = PRESETS[at.selectbox(key="sim-cluster").value]
    what = _default_what_if()
    expected = nearest_published(what.model(), layout_for(what.command_args(), cluster), cluster)
    assert list(table["published run"]) == [r.name for r in expected] and len(table) == 3
    assert list(table["error %"]) == [round(r.error_pct, 1) for r in expected]
    assert list(table["ran as"]) == [r.software or "(flags of its own)" for r in expected]
    assert list(table["this layout differs in"]) == [", ".join(r.differs) or "-" for r in expected]
    assert all("A100" in s or "SC21" in s or "MT-NLG" in s or "llm-foundry" in s for s in table["source"])


def _default_what_if():
    from parbench.sim import whatif

    return whatif.WhatIf(shape=whatif.MODEL_PRESETS["GPT-3 2.7B"], dp=8, micro_batches=8)


def test_simulator_shows_the_published_runs_without_calibration(monkeypatch, capsys):
    """The published comparison (``validate --published``) in the view: one row of points per source with a
    metric, the per-source table, the layouts split into fixed and per-micro-batch parts, and one layer alone.
    Its count of sources within the targets is the command's."""
    from parbench.cli import main
    from parbench.sim.published import compare_layers
    from parbench.sim.published_memory import compare_runs

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    assert not at.exception
    runs = compare_runs()
    with_metric = {r["source"] for r in runs if r["metric"]}
    traces = figure(at, "sim-published")["data"]
    assert len({t["name"] for t in traces}) == len(traces) == len(with_metric)  # one distinct row per source
    assert sum(len(t["x"]) for t in traces) == sum(r["metric_error_pct"] is not None for r in runs)
    # rates throughout: MT-NLG's iteration times, predicted 8.2-11.6% short, plot as 8.9-13.1% faster
    mt = next(t for t in traces if t["name"].startswith("Smith et al. 2022"))
    expected = sorted(r["published"] / r["predicted"] - 1 for r in runs if r["source"].startswith("Smith et al."))
    assert sorted(x / 100 for x in mt["x"]) == pytest.approx(expected) and min(mt["x"]) > 8.5
    frames = [d.value for d in at.dataframe]
    sources = next(f for f in frames if "memory mean |error| %" in f.columns)
    assert set(sources["source"]) == {r["source"] for r in runs}
    # each source's max |error| floor, as validate --published gives it
    from parbench.sim.accuracy import indistinct_runs, source_floors
    from parbench.sim.published_memory import MBRIDGE_LATER

    floors = dict(zip(sources["source"], sources["max |error| floor %"]))
    assert floors[MBRIDGE_LATER] == round(source_floors(indistinct_runs())[MBRIDGE_LATER], 1) > 12
    # each source against the per-source targets, counted from the table's own mean and max columns
    verdicts = dict(zip(sources["source"], sources["within 5% / 12%"]))
    figures = zip(sources["source"], sources["mean |error| %"], sources["max |error| %"])
    expected = {name: "-" if mean is None or math.isnan(mean) else "yes" if mean <= 5 and worst <= 12 else "no"
                for name, mean, worst in figures}
    assert {k: v.split(":")[0] for k, v in verdicts.items()} == expected
    assert verdicts[MBRIDGE_LATER] == "no: mean, max"
    met = sum(v == "yes" for v in verdicts.values())
    judged = sum(v != "-" for v in verdicts.values())
    assert any(f"{met} of {judged} sources are within both" in c.value for c in at.caption)
    assert main(["validate", "--published", "--format", "json"]) == 0
    targets = json.loads(capsys.readouterr().out)["published_targets"]
    assert (met, judged) == (len(targets["met"]), len(targets["met"]) + len(targets["missed"]))
    splits = next(f for f in frames if "fixed published s" in f.columns)
    assert "MT-NLG 530B" in set(splits["layout"])
    layers = next(f for f in frames if "predicted ms" in f.columns)  # Korthikanti et al. 2022, Table 4
    assert list(layers["published ms"]) == [19.6, 19.0, 27.2, 20.9, 20.3]
    assert list(layers["error %"]) == [round(r["error_pct"], 1) for r in compare_layers()]


def test_simulator_shows_the_published_layout_pairs(monkeypatch):
    """``validate --published``'s layout pairs in the view: every pair a point, published ratio against predicted,
    the pairs that differ in precision alone as their own series; the misordered pairs below 1 (seventeen: nine
    published more than 5% apart, eight closer); the caption counts them as ``pair_summary`` does."""
    from parbench.sim.accuracy import layout_pairs, pair_summary

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    assert not at.exception
    pairs = layout_pairs()
    traces = [t for t in figure(at, "sim-published-pairs")["data"] if t["mode"] == "markers"]
    assert sorted(t["name"] for t in traces) == ["differ in precision alone", "differ in the layout"]
    points = sorted((round(x, 9), round(y, 9)) for t in traces for x, y in zip(t["x"], t["y"]))
    assert points == sorted((round(p.published_ratio, 9), round(p.predicted_ratio, 9)) for p in pairs)
    precision = next(t for t in traces if t["name"] == "differ in precision alone")
    assert len(precision["x"]) == sum(p.precision_only for p in pairs)
    below = [y for _, y in points if y < 1]
    assert len(below) == sum(not p.ordered for p in pairs) == 17
    assert sum(not p.ordered and p.decided for p in pairs) == 9
    s = pair_summary(pairs)
    assert any(f"predicted faster in {s['decided_ordered']} of {s['decided']} pairs" in c.value for c in at.caption)


def test_corrupt_record_is_a_visible_warning_and_skipped(monkeypatch, results_copy):
    (results_copy / "runs" / "broken.json").write_text('{"run_id": "x", "status": "ok", ')  # half-written
    at = run_app(monkeypatch, results_copy, view="overview")
    assert not at.exception
    assert any("broken.json" in w.value for w in at.warning)
    assert len(at.dataframe[0].value) == len(fixture_records("."))


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
    port = str(cmd.free_port())
    main(["dashboard", "--results-dir", str(FIXTURE_RESULTS), "--port", port])
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().out
    argv, env = calls[0]
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1" and argv[argv.index("--server.port") + 1] == port
    assert env[RESULTS_DIR_ENV] == str(FIXTURE_RESULTS.resolve()) and argv[-1] == str(FIXTURE_RESULTS.resolve())


def test_dashboard_on_a_port_in_use_exits_2_before_streamlit_starts(monkeypatch, capsys):
    """Once streamlit started and printed its own error; now the port is tried first."""
    import socket

    import parbench.commands.dashboard as cmd
    from parbench.cli import main

    monkeypatch.setattr(cmd.os, "execve", lambda *a: pytest.fail("streamlit started on a port in use"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["dashboard", "--results-dir", str(FIXTURE_RESULTS), "--port", str(port)]) == 2
    assert f"--port {port}: 127.0.0.1:{port} cannot be used (Address already in use)" in capsys.readouterr().err


def test_app_renders_the_committed_reference_sweep(monkeypatch):
    """Every strategy's real records (results/reference/, what a fresh clone shows) render."""
    reference = Path(__file__).resolve().parents[2] / "results" / "reference"
    at = run_app(monkeypatch, reference, view="scaling")
    assert not at.exception and not at.warning
    names = trace_names(at, "scaling-throughput")
    plotted = {n.split(" ")[0] for n in names}
    assert set(charts.STRATEGY_ORDER) - {"single"} <= plotted, names


def test_simulator_what_if_takes_context_and_expert_parallelism_and_interleaving(monkeypatch):
    """The panel's mesh reaches the prediction: Mixtral 8x7B on 8 H100 with ep 8 holds an eighth of each layer's
    experts a rank, as ``parbench simulate --model mixtral-8x7b --gpus 8 --ep 8`` predicts it (flash attention on a
    GPU preset, as the command line defaults); cp 2 on a 32768-token model halves the tokens a rank holds and
    doubles the GPUs; a pipeline on the interleaved schedule without virtual stages, and a tp that does not divide
    the heads, are named as invalid, never an exception."""
    from parbench.commands.simulate import layout_for
    from parbench.sim import whatif
    from parbench.sim.hardware import PRESETS
    from parbench.sim.predict import predict

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("mixtral-8x7b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    at.number_input(key="sim-ep").set_value(8).run()
    assert not at.exception
    what = whatif.WhatIf(shape=whatif.MODEL_PRESETS["mixtral-8x7b"], dp=8, ep=8, micro_batches=8)
    cluster = PRESETS["h100-sxm"]
    layout = layout_for(what.command_args(), cluster)
    assert layout.ep == 8 and layout.attention == "flash"
    expected = predict(what.model(), layout, cluster)
    title = figure(at, "sim-whatif-memory")["layout"]["title"]["text"]
    assert f"{expected.peak_memory_bytes / 2**30:.1f} GiB" in title
    at.number_input(key="sim-cp").set_value(2).run()
    assert not at.exception and any("16 GPUs" in c.value for c in at.caption)
    at.number_input(key="sim-pp").set_value(2).run()
    at.selectbox(key="sim-schedule").set_value("interleaved1f1b").run()
    assert not at.exception and any("virtual_stages >= 2" in e.value for e in at.error)
    at.number_input(key="sim-v").set_value(2).run()
    assert not at.exception and not at.error
    at.number_input(key="sim-tp").set_value(3).run()
    assert not at.exception and any("tp=3 does not divide heads=32" in e.value for e in at.error)
    # whole experts: ep 8 folded over tp 2 x dp 4, as --expert-tp 1 predicts it; then the combined 1F1B
    for key, value in (("sim-pp", 1), ("sim-cp", 1), ("sim-schedule", "1f1b"), ("sim-v", 1), ("sim-tp", 2),
                       ("sim-dp", 4)):
        (at.selectbox if key == "sim-schedule" else at.number_input)(key=key).set_value(value).run()
    assert any("ep=8 does not divide dp=4" in e.value for e in at.error)
    at.checkbox(key="sim-etp").check().run()
    assert not at.exception and not at.error
    folded = whatif.WhatIf(shape=whatif.MODEL_PRESETS["mixtral-8x7b"], dp=4, tp=2, ep=8, micro_batches=8,
                           whole_experts=True)
    layout = layout_for(folded.command_args(), cluster)
    assert layout.whole_experts and layout.ep == 8
    expected = predict(folded.model(), layout, cluster)
    assert f"{expected.peak_memory_bytes / 2**30:.1f} GiB" in figure(at, "sim-whatif-memory")["layout"]["title"]["text"]
    at.checkbox(key="sim-a2a").check().run()
    assert not at.exception and not at.error


@pytest.mark.slow
def test_simulator_search_ranks_every_layout_as_the_command_line_does(monkeypatch, capsys):
    """The search panel runs ``parbench simulate --search`` for the what-if's model and cluster, and shows that
    command: Llama 3 8B on 16 H100 at 128 samples a step lays out as many layouts, fits as many and ranks the same
    ten first, at the same throughput, as the command's JSON; its chart marks the best and draws the Pareto front;
    the result stays while other widgets change, and nothing is searched before the button is pressed."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    assert not [d for d in at.dataframe if "GiB per rank" in d.value.columns]
    at.number_input(key="sim-search-gpus").set_value(16)
    at.number_input(key="sim-search-batch").set_value(128)
    at.button(key="FormSubmitter:sim-search-form-Search every layout").click().run()
    assert not at.exception
    [command] = [c.value for c in at.code if c.value.endswith("--search")]
    assert "--gpus=16" in command and "--global-batch=128" in command
    main([*shlex.split(command)[1:], "--format", "json"])
    cli = json.loads(capsys.readouterr().out)
    [table] = [d.value for d in at.dataframe if "GiB per rank" in d.value.columns]
    assert list(table["layout"]) == [r["layout"] for r in cli["top"]]
    assert list(table["samples/s"]) == [round(r["throughput_samples_per_s"], 3) for r in cli["top"]]
    [counts] = [c.value for c in at.caption if c.value.startswith(f"{cli['evaluated']} layouts, {cli['feasible']} fit")]
    nearest = cli["rejected_examples"][0]  # the command's nearest to fitting, as the panel names it
    assert nearest["peak_memory_bytes"] > 81559 * 2**20 and f"over: {nearest['layout']}." in counts
    names = trace_names(at, "sim-search-chart")
    assert {"Pareto front", "best"} <= names and "dp only" in names
    at.number_input(key="sim-dp").set_value(4).run()
    assert [d for d in at.dataframe if "GiB per rank" in d.value.columns]
    # a training run typed in the what-if prices every ranked layout, as the command's --train-tokens does
    at.text_input(key="sim-train-tokens").set_value("1T").run()
    [command] = [c.value for c in at.code if "--search" in c.value]
    assert command.endswith("--search --train-tokens=1T")
    main([*shlex.split(command)[1:], "--format", "json"])
    cli = json.loads(capsys.readouterr().out)
    [table] = [d.value for d in at.dataframe if "GiB per rank" in d.value.columns]
    assert list(table["days"]) == [round(r["training_run"]["days"], 2) for r in cli["top"]]
    assert list(table["GPU-hours"]) == [round(r["training_run"]["gpu_hours"]) for r in cli["top"]]


@pytest.mark.slow
def test_a_searched_layout_opens_in_the_what_if_panel(monkeypatch, capsys):
    """Opening the search's best layout sets the what-if panel's mesh, ZeRO stage and replicas, recomputation and
    micro-batching to it: the panel then predicts the memory and throughput the command's JSON gives that layout
    (an HSDP layout here, which the panel's replicas input carries)."""
    from parbench.cli import main

    main(["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "16", "--global-batch", "128",
          "--search", "--format", "json"])
    cli = json.loads(capsys.readouterr().out)
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    at.number_input(key="sim-search-gpus").set_value(16)
    at.number_input(key="sim-search-batch").set_value(128)
    at.button(key="FormSubmitter:sim-search-form-Search every layout").click().run()
    pick = next(i for i, r in enumerate(cli["top"]) if "replicate=" in r["layout"])
    at.selectbox(key="sim-search-pick").set_value(pick).run()
    at.button(key="sim-search-open").click().run()
    assert not at.exception and not at.error
    chosen = cli["top"][pick]
    assert at.number_input(key="sim-replicate").value == int(re.search(r"replicate=(\d+)", chosen["layout"]).group(1)) > 1
    assert f"{chosen['peak_memory_bytes'] / 2**30:.1f} GiB" in figure(at, "sim-whatif-memory")["layout"]["title"]["text"]
    assert f"{chosen['throughput_samples_per_s']:,.2f} samples/s" in figure(at, "sim-whatif-time")["layout"]["title"]["text"]


def test_fp8_on_a_device_without_fp8_tensor_cores_is_named_not_a_crash(monkeypatch):
    """FP8 on an A100 (no FP8 peak): the what-if panel and the search say so, as the command does, where the
    prediction used to divide by the zero peak."""
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-cluster").set_value("a100-80gb").run()
    at.selectbox(key="sim-precision").set_value("fp8").run()
    assert not at.exception and any("a100-80gb has no FP8 peak" in e.value for e in at.error)
    at.button(key="FormSubmitter:sim-search-form-Search every layout").click().run()
    assert not at.exception and any(e.value.startswith("Cannot search") and "no FP8 peak" in e.value for e in at.error)


def test_the_what_if_panel_shows_the_command_that_predicts_the_same(monkeypatch, capsys):
    """Under the what-if's charts, the ``parbench simulate`` command of its layout: run, it predicts the step time and
    memory the panel shows (Llama 3 8B, tp 2, pp 2 interleaved, ZeRO 1, selective recomputation on 16 H100)."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    for key, value in (("sim-dp", 4), ("sim-tp", 2), ("sim-pp", 2), ("sim-v", 2), ("sim-mb", 4)):
        at.number_input(key=key).set_value(value).run()
    at.selectbox(key="sim-schedule").set_value("interleaved1f1b").run()
    at.selectbox(key="sim-zero").set_value(1).run()
    at.selectbox(key="sim-recompute").set_value("selective").run()
    assert not at.exception and not at.error
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert main([*shlex.split(command)[1:], "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["prediction"]
    assert f"Step time {p['step_time_s'] * 1e3:,.1f} ms" in figure(at, "sim-whatif-time")["layout"]["title"]["text"]
    assert f"{p['peak_memory_bytes'] / 2**30:.1f} GiB" in figure(at, "sim-whatif-memory")["layout"]["title"]["text"]
    at.selectbox(key="sim-model").set_value("GPT-3 2.7B").run()
    assert not [c for c in at.code if c.value.startswith("parbench simulate")]


def test_simulator_shows_a_rows_file_and_names_what_is_wrong_with_a_bad_one(monkeypatch, tmp_path):
    """``validate --rows`` in the view: the example file's eight runs, one row of points per source, each point
    the rate error ``compare_rows`` gives; a missing file is named, nothing drawn."""
    from parbench.commands.simulate import command_prediction
    from parbench.sim.rows import compare_rows, load_rows

    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rows.toml"
    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.text_input(key="sim-rows-file").set_value(str(example)).run()
    assert not at.exception
    rows = compare_rows(load_rows(example), command_prediction)
    traces = figure(at, "sim-rows")["data"]
    assert len(traces) == len({r["source"] for r in rows}) == 4
    expected = sorted((r["published"] / r["predicted"] - 1 if r["metric"] == "s_per_iteration"
                       else r["predicted"] / r["published"] - 1) * 100 for r in rows)
    assert sorted(x for t in traces for x in t["x"]) == pytest.approx(expected)
    table = next(d.value for d in at.dataframe if "simulate" in d.value.columns)
    assert list(table["error %"]) == [round(r["metric_error_pct"], 1) for r in rows]
    at.text_input(key="sim-rows-file").set_value(str(tmp_path / "none.toml")).run()
    assert not at.exception and any("does not exist" in e.value for e in at.error)
    with pytest.raises(KeyError):
        at.get_by_key("sim-rows")


def test_the_what_if_predicts_under_the_training_software_chosen(monkeypatch):
    """Choosing NeMo's software runs the layout with its flags (here sequence parallelism and the tensor-parallel
    overlap at tp 2, bf16 gradient reduction): the panel's step is what ``parbench simulate --software nemo``
    predicts, and differs from torch's."""
    from dataclasses import replace

    from parbench.commands.simulate import predict_for
    from parbench.sim.hardware import PRESETS

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.number_input(key="sim-tp").set_value(2).run()
    torch_title = figure(at, "sim-whatif-time")["layout"]["title"]["text"]
    at.selectbox(key="sim-software").set_value("nemo").run()
    assert not at.exception
    what = replace(_default_what_if(), tp=2, software="nemo")
    cluster = PRESETS[at.selectbox(key="sim-cluster").value]
    layout, p = predict_for(what.command_args(), what.model(), cluster)
    assert layout.sequence_parallel and layout.tp_comm_overlap
    title = figure(at, "sim-whatif-time")["layout"]["title"]["text"]
    assert title.startswith(f"Step time {p.step_time_s * 1e3:,.1f} ms") and title != torch_title


def test_the_what_if_takes_an_fp8_scaling_recipe_under_fp8_only(monkeypatch):
    """The FP8 scaling choice is off until the precision is fp8; NeMo's software then runs Transformer Engine's delayed
    scaling, and choosing per-tensor scaling (an amax pass per cast) gives what ``--fp8-scaling tensorwise``
    predicts, a longer step; the search beside it is asked with the same recipe. MXFP8 on the H100 is refused with
    the reason (no block-scaled FP8 GEMMs) and predicted once the cluster is a B200."""
    from dataclasses import replace

    from parbench.commands.simulate import predict_for
    from parbench.sim.hardware import PRESETS

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    assert at.selectbox(key="sim-fp8-scaling").disabled
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    at.selectbox(key="sim-software").set_value("nemo").run()
    at.selectbox(key="sim-precision").set_value("fp8").run()
    assert not at.exception and not at.selectbox(key="sim-fp8-scaling").disabled
    what = replace(_default_what_if(), software="nemo", precision="fp8")
    steps = {}
    for choice in ("delayed", "tensorwise"):
        at.selectbox(key="sim-fp8-scaling").set_value(choice).run()
        assert not at.exception
        layout, p = predict_for(replace(what, fp8_scaling=choice).command_args(), what.model(), PRESETS["h100-sxm"])
        assert layout.fp8_scaling == choice
        title = figure(at, "sim-whatif-time")["layout"]["title"]["text"]
        assert title.startswith(f"Step time {p.step_time_s * 1e3:,.1f} ms"), (choice, title)
        steps[choice] = p.step_time_s
    assert steps["delayed"] < steps["tensorwise"]
    assert predict_for(what.command_args(), what.model(), PRESETS["h100-sxm"])[0].fp8_scaling == "delayed"
    # MXFP8 needs Blackwell's block-scaled GEMMs: on the H100 the panel says why, on a B200 it predicts
    at.selectbox(key="sim-fp8-scaling").set_value("mxfp8").run()
    assert not at.exception
    assert any("Not a valid layout: --fp8-scaling mxfp8: cluster h100-sxm has no block-scaled FP8 GEMMs" in e.value
               for e in at.error)
    at.selectbox(key="sim-cluster").set_value("b200").run()
    assert not at.exception and not at.error
    layout, p = predict_for(replace(what, fp8_scaling="mxfp8").command_args(), what.model(), PRESETS["b200"])
    assert figure(at, "sim-whatif-time")["layout"]["title"]["text"].startswith(f"Step time {p.step_time_s * 1e3:,.1f} ms")


def test_simulator_what_if_predicts_devices_screened_to_one_speed(monkeypatch, capsys):
    """GPUs of one kind differ in speed and every step waits for the slowest: the panel says by how much (Llama 3
    8B under ZeRO 3 on 8 H100s: 1 + 0.016 x 1.42360, Tippett's expected largest of 8 normals), and "devices screened
    to one speed" predicts a shorter step, the one its command line (``--rank-spread 0``) prints."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    at.selectbox(key="sim-zero").set_value(3).run()
    assert not at.exception and not at.error
    assert any(f"slowest of the 8 devices: +{0.016 * 1.42360:.1%} over" in c.value for c in at.caption)
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert "--rank-spread" not in command
    assert main([*shlex.split(command)[1:], "--format", "json"]) == 0
    spread = json.loads(capsys.readouterr().out)["prediction"]
    at.checkbox(key="sim-screened").check().run()
    assert not at.exception and not any("slowest of the" in c.value for c in at.caption)
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert command.endswith("--rank-spread 0")
    assert main([*shlex.split(command)[1:], "--format", "json"]) == 0
    screened = json.loads(capsys.readouterr().out)["prediction"]
    assert screened["step_time_s"] < spread["step_time_s"] and screened["slowest_device"] == 1.0
    title = figure(at, "sim-whatif-time")["layout"]["title"]["text"]
    assert f"Step time {screened['step_time_s'] * 1e3:,.1f} ms" in title, title


def test_simulator_what_if_prices_a_training_run_as_the_command_line_does(monkeypatch, capsys):
    """A token count typed under the what-if adds the run's steps, days and GPU-hours at the predicted step, and
    ``--train-tokens`` to the command line shown, which prints the same figures; a count that is none is named."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("h100-sxm").run()
    at.selectbox(key="sim-zero").set_value(3).run()
    at.text_input(key="sim-train-tokens").set_value("1T").run()
    assert not at.exception and not at.error
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert command.endswith("--train-tokens 1T")
    assert main([*shlex.split(command)[1:], "--format", "json"]) == 0
    run = json.loads(capsys.readouterr().out)["training_run"]
    assert any(f"A run of 1T tokens: {run['steps']:,} steps, {run['days']:.4g} days on 8 GPUs" in c.value
               for c in at.caption)
    at.text_input(key="sim-train-tokens").set_value("lots").run()
    assert not at.exception and any("'lots' is not a token count" in e.value for e in at.error)


def test_simulator_what_if_on_volta_predicts_fp16_and_names_bf16_as_not_there(monkeypatch, capsys):
    """The V100 preset in the panel: picked after the panel opened at bf16, the prediction is refused with the
    command line's reason (no bf16 tensor cores); at fp16 it predicts what its command line prints, beside the
    Megatron-LM v1.0 rows measured on that machine."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama2-7b").run()
    at.selectbox(key="sim-cluster").set_value("v100-dgx2h").run()
    assert not at.exception
    assert any("--precision bf16: cluster v100-dgx2h has no bf16 tensor cores" in e.value for e in at.error)
    assert any(c.value.startswith("16 GPUs a node; 130 TFLOP/s dense; 32.0 GiB") and c.value.endswith(
        "GEMM efficiency 0.72; no bf16, no flash attention") for c in at.caption)
    at.selectbox(key="sim-precision").set_value("fp16").run()
    assert not at.exception and not at.error
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert "--cluster v100-dgx2h" in command and "--precision=fp16" in command
    assert main([*shlex.split(command)[1:], "--format", "json"]) in (0, 3)  # 3: predicted, but over 32 GiB a GPU
    step = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert figure(at, "sim-whatif-time")["layout"]["title"]["text"].startswith(f"Step time {step * 1e3:,.1f} ms")
    [table] = [d.value for d in at.dataframe if "published run" in d.value.columns]
    assert len(table) == 2 and all("V100" in name for name in table["published run"])


def test_simulator_what_if_on_instinct_names_its_links_and_the_amd_rows(monkeypatch, capsys):
    """The MI355X preset in the panel: its caption says the node has no switch (a pair of GPUs shares one Infinity
    Fabric link), the prediction is what its command line prints, and at fp8 the nearest published runs are AMD's
    MLPerf Llama 3.1 8B runs on that device."""
    import shlex

    from parbench.cli import main

    at = run_app(monkeypatch, FIXTURE_RESULTS, view="simulator")
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("mi355x").run()
    at.selectbox(key="sim-precision").set_value("fp8").run()
    assert not at.exception and not at.error
    assert any(c.value.startswith("8 GPUs a node; 2517 TFLOP/s dense, 5033 FP8; 288.0 GiB")
               and c.value.endswith("no switch: 61 GB/s a pair") for c in at.caption)
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert "--cluster mi355x" in command
    assert main([*shlex.split(command)[1:], "--format", "json"]) in (0, 3)
    step = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert figure(at, "sim-whatif-time")["layout"]["title"]["text"].startswith(f"Step time {step * 1e3:,.1f} ms")
    [table] = [d.value for d in at.dataframe if "published run" in d.value.columns]
    assert any("MI355X" in name for name in table["published run"])


def test_a_cluster_file_written_from_nccl_tests_logs_is_a_what_if_choice(monkeypatch, tmp_path, capsys):
    """`parbench calibrate --nccl-tests` writes into the results directory's clusters/ by default; the what-if
    lists that file beside the presets and predicts on it what its command line does; a file there that is no
    cluster is left out with a warning, not an error."""
    import shlex
    import shutil

    from parbench.cli import main
    from tests.sim.test_nccl_tests import log_text

    results = tmp_path / "results"
    shutil.copytree(FIXTURE_RESULTS, results)
    log = tmp_path / "all_reduce_2nodes.log"
    log.write_text(log_text("all_reduce", ["a"] * 8 + ["b"] * 8, 70e-6, 40e9))
    assert main(["calibrate", "--nccl-tests", str(log), "--results-dir", str(results)]) == 0
    written = results / "clusters" / "h100-sxm-measured.json"
    assert f"wrote {written}" in capsys.readouterr().out
    (results / "clusters" / "broken.json").write_text("[1, 2]")
    at = run_app(monkeypatch, results, view="simulator")
    assert str(written) in at.selectbox(key="sim-cluster").options
    assert not [o for o in at.selectbox(key="sim-cluster").options if o.endswith("broken.json")]
    assert any("broken.json left out" in w.value for w in at.warning)
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value(str(written)).run()
    assert not at.exception
    [command] = [c.value for c in at.code if c.value.startswith("parbench simulate")]
    assert f"--cluster {written}" in command
    assert main([*shlex.split(command)[1:], "--format", "json"]) in (0, 3)
    step = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert figure(at, "sim-whatif-time")["layout"]["title"]["text"].startswith(f"Step time {step * 1e3:,.1f} ms")


def test_simulator_what_if_on_the_local_cpu_profile_offers_float32_alone(monkeypatch, tmp_path):
    """A CPU profile is calibrated in float32: picked after a GPU preset (whose bf16 default the precision box
    held), the what-if moves to fp32, its one option, and predicts; never the refusal `parbench simulate` gives
    bf16 on it."""
    import json
    import shutil
    from dataclasses import replace

    from parbench.sim.hardware import PRESETS, cluster_to_dict

    shutil.copytree(FIXTURE_RESULTS, tmp_path / "r")
    (tmp_path / "r" / "calibration").mkdir()
    cpu = replace(PRESETS["a100-80gb"], name="cpu-like", cores=2)
    (tmp_path / "r" / "calibration" / f"{socket.gethostname()}.json").write_text(
        json.dumps({"cluster": cluster_to_dict(cpu)}))
    at = run_app(monkeypatch, tmp_path / "r", view="simulator")
    assert at.selectbox(key="sim-precision").value == "bf16"
    at.selectbox(key="sim-cluster").set_value("local").run()
    assert not at.exception
    assert at.selectbox(key="sim-precision").value == "fp32" and at.selectbox(key="sim-precision").options == ["fp32"]
    assert not [e.value for e in at.error]


def test_simulator_what_if_takes_the_threads_per_rank_the_local_profile_measured(monkeypatch, tmp_path):
    """A CPU profile that measured two threads per rank offers 1 or 2 (a GPU preset, 1 alone); two threads predict at
    their rates, the command shown says `--threads=2`, and eight ranks of two threads on two cores are refused."""
    import json
    import shutil
    from dataclasses import replace

    from parbench.sim.hardware import PRESETS, cluster_to_dict

    shutil.copytree(FIXTURE_RESULTS, tmp_path / "r")
    (tmp_path / "r" / "calibration").mkdir()
    # float32 matmuls at the one peak, as on a calibrated profile (no TF32 or CUDA-core figure of their own)
    cpu = replace(PRESETS["a100-80gb"], name="cpu-like", cores=2, peak_flops_tf32=0.0, peak_flops_fp32=0.0)
    cpu = replace(cpu, threaded={2: {"peak_flops": 2 * cpu.peak_flops}})
    (tmp_path / "r" / "calibration" / f"{socket.gethostname()}.json").write_text(
        json.dumps({"cluster": cluster_to_dict(cpu)}))
    at = run_app(monkeypatch, tmp_path / "r", view="simulator")
    assert at.selectbox(key="sim-threads").options == ["1"] and at.selectbox(key="sim-threads").disabled
    at.selectbox(key="sim-model").set_value("llama3-8b").run()
    at.selectbox(key="sim-cluster").set_value("local").run()
    assert at.selectbox(key="sim-threads").options == ["1", "2"]
    at.number_input(key="sim-dp").set_value(1).run()
    one = [c.value for c in at.code if "parbench simulate" in c.value]
    time_one = json.loads(at.get_by_key("sim-whatif-time").proto.spec)["data"]
    at.selectbox(key="sim-threads").set_value(2).run()
    assert not at.exception and not at.error
    [command] = [c.value for c in at.code if "parbench simulate" in c.value]
    assert one and "--threads" not in one[0] and "--threads=2" in command
    assert json.loads(at.get_by_key("sim-whatif-time").proto.spec)["data"] != time_one
    at.number_input(key="sim-dp").set_value(8).run()
    assert any("8 ranks x 2 threads > 2 cores" in e.value for e in at.error)
