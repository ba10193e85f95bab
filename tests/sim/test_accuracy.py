"""The published rows shown beside a prediction: a published layout finds itself first with the README's own step
time, only rows on the same tensor cores are candidates, a mixture of experts is compared with mixtures of experts,
a device without published runs says so, and the CLI prints and emits them."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from parbench.cli import main
from parbench.sim.accuracy import distance, nearest_lines, nearest_published, traits
from parbench.sim.hardware import PRESETS
from parbench.sim.model import architecture_spec
from parbench.sim.predict import predict
from parbench.sim.published_memory import compare_runs, runs

DGXC_70B_FP8 = "Llama 3.1 70B FP8 64 H100 TP 4 PP 4 CP 2 VP 5 GBS 128"
"""DGX Cloud's ``llama3.1/README_70b.md`` (NeMo 24.09): 11.01 s a step on 64 H100 in FP8."""


def _run(name: str):
    return next(r for r in runs() if r.name == name)


def test_a_published_layout_finds_itself_first_with_the_readmes_step_time():
    run = _run(DGXC_70B_FP8)
    model = architecture_spec(run.arch, megatron=True)
    [first, *_] = nearest_published(model, run.layout, PRESETS["h100-sxm"])
    assert (first.name, first.distance, first.published_step_s) == (DGXC_70B_FP8, 0.0, 11.01)
    predicted = predict(model, run.layout, PRESETS["h100-sxm"]).step_time_s
    assert math.isclose(first.predicted_step_s, predicted)
    assert math.isclose(first.error_pct, (predicted / 11.01 - 1) * 100)
    # the same figure `parbench validate --published` reports for the row (its metric is the step time)
    [row] = [r for r in compare_runs() if r["name"] == DGXC_70B_FP8]
    assert math.isclose(first.error_pct, row["metric_error_pct"])


def test_the_distance_counts_a_doubled_gpu_count_a_quarter_and_fp8_one():
    base = _run(DGXC_70B_FP8)
    twice = _run("Llama 3.1 70B FP8 128 H100 TP 4 PP 4 CP 2 VP 5 GBS 256")
    bf16 = _run("Llama 3.1 70B BF16 64 H100 TP 4 PP 4 CP 2 VP 5 GBS 128")
    mine = traits(base.arch, base.layout)
    assert distance(mine, traits(twice.arch, twice.layout)) == 0.25
    assert distance(mine, traits(bf16.arch, bf16.layout)) == 1.0


def test_only_rows_on_the_same_tensor_cores_are_candidates():
    """The H100 SXM, the 96 GB H100 and the H200 share the H100's 989 TFLOP/s; the A100s theirs of 312 (the DGX
    A100's and Jean Zay's, where BLOOM trained)."""
    run = _run(DGXC_70B_FP8)
    model = architecture_spec(run.arch, megatron=True)
    hopper = nearest_published(model, run.layout, PRESETS["h100-sxm"], k=10_000)
    ampere = nearest_published(model, run.layout, PRESETS["a100-80gb"], k=10_000)
    assert {r.cluster for r in hopper} == {"h100-sxm", "h100-96gb", "h200-sxm"}
    assert {r.cluster for r in ampere} == {"a100-80gb", "jean-zay-a100"}
    dense = sum(1 for r in runs() if r.ran and r.metric and r.cluster in ("h100-sxm", "h100-96gb", "h200-sxm")
                and not r.arch.experts)
    assert len(hopper) == dense
    moe = next(r for r in runs() if r.name.startswith("gpt-oss-120b 64 H100"))
    experts = nearest_published(architecture_spec(moe.arch, megatron=True), moe.layout, PRESETS["h100-sxm"], k=10_000)
    assert "Mixtral 8x7B on 64 H100" in {r.name for r in experts}  # Megatron-LM's MoE row joins the tables' rows
    assert len(experts) == sum(1 for r in runs() if r.ran and r.metric and r.arch.experts
                               and r.cluster in ("h100-sxm", "h100-96gb", "h200-sxm"))


def test_a_mixture_of_experts_is_compared_with_mixtures_of_experts():
    run = next(r for r in runs() if r.name.startswith("gpt-oss-120b 64 H100"))
    nearby = nearest_published(architecture_spec(run.arch, megatron=True), run.layout, PRESETS["h100-sxm"])
    assert nearby[0].distance == 0 and run.name in {r.name for r in nearby if r.distance == 0}
    assert all(r.name.startswith(("gpt-oss", "qwen3", "deepseek", "Mixtral")) for r in nearby)


def test_a_mixture_of_experts_laid_out_like_a_dense_run_still_meets_mixtures_of_experts():
    """Llama 3 70B's shape with 8 experts, top 2, in DGX Cloud's 70B layout (no expert parallelism): the dense
    70B rows match its every degree, yet its error is the experts' path, so only mixtures of experts are shown."""
    run = _run(DGXC_70B_FP8)
    moe = architecture_spec(replace(run.arch, experts=8, top_k=2), megatron=True)
    nearby = nearest_published(moe, run.layout, PRESETS["h100-sxm"])
    assert len(nearby) == 3
    assert all(r.name.startswith(("gpt-oss", "qwen3", "deepseek", "Mixtral")) for r in nearby)


def test_a_device_no_run_was_published_on_says_so():
    run = _run(DGXC_70B_FP8)
    odd = replace(PRESETS["h100-sxm"], peak_flops=123e12)
    assert nearest_published(architecture_spec(run.arch, megatron=True), run.layout, odd) == []
    assert "none of this model's kind on a device of this one's 123 TFLOP/s peak" in nearest_lines([], odd)[0]


def test_simulate_prints_and_emits_the_nearest_published_runs(capsys):
    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "4",
            "--cp", "2", "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--global-batch", "128", "--seq",
            "8192", "--zero", "1", "--precision", "fp8", "--software", "nemo"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "nearest published runs (same tensor cores)" in out
    assert "Llama 3.1 70B FP8 64 H100 TP 4 PP 4 CP 2 VP 5 GBS 128" in out
    assert main([*args, "--format", "json"]) == 0
    nearby = json.loads(capsys.readouterr().out)["published_nearest"]
    assert len(nearby) == 3 and nearby[0]["published_step_s"] == 11.01
    assert math.isclose(nearby[0]["error_pct"], (nearby[0]["predicted_step_s"] / 11.01 - 1) * 100)


def test_search_shows_the_nearest_published_runs_of_its_best_layout(capsys):
    args = ["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "8", "--global-batch", "16",
            "--search", "--top", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    best = out.split("top 1 by throughput:")[1].splitlines()[2].split(maxsplit=3)[3]
    assert f"the best layout, {best}:" in out and "nearest published runs (same tensor cores)" in out
    assert main([*args, "--format", "json"]) == 0
    nearby = json.loads(capsys.readouterr().out)["published_nearest_to_best"]
    assert len(nearby) == 3 and all(r["cluster"] in ("h100-sxm", "h100-96gb", "h200-sxm") for r in nearby)


def test_published_runs_the_model_cannot_tell_apart_and_the_floor_they_set(capsys):
    """Cisco's MLPerf Training v5.1 and v6.0 runs of Llama 3.1 8B on 16 nodes of 8 H100 (TP 2, one micro-batch of one
    8192-token sequence on each of 64 data-parallel ranks, FP8 with its parameters gathered as such) took 0.4754 and
    0.3496 s a step, a year of software apart: one prediction for both, so no model of these inputs is within
    (b - a) / (a + b) of both. torchtitan's 70B 2D row and its AsyncTP twin share a layout too: the layout does not
    describe async tensor parallelism."""
    from parbench.sim.accuracy import indistinct_runs

    groups = indistinct_runs()
    [mlperf] = [g for g in groups if any(n.startswith("MLPerf v6.0 Llama 3.1 8B FP8 128 H100") for n in g.names)]
    old, new = 0.4754, 0.3496
    assert sorted(mlperf.published_step_s) == [new, old]
    assert mlperf.spread_pct == pytest.approx((old / new - 1) * 100) == pytest.approx(35.98, abs=0.01)
    assert mlperf.floor_pct == pytest.approx((old - new) / (old + new) * 100)
    # the floor is a bound: the balanced prediction meets it, any other one (the model's own) does worse
    balanced = 2 * new * old / (new + old)
    for p in (balanced, mlperf.predicted_step_s, new, old):
        worst = max(abs(p / s - 1) for s in mlperf.published_step_s) * 100
        assert worst >= mlperf.floor_pct - 1e-9
    assert max(abs(balanced / s - 1) for s in mlperf.published_step_s) * 100 == pytest.approx(mlperf.floor_pct)
    assert [g.spread_pct for g in groups] == sorted((g.spread_pct for g in groups), reverse=True)
    # the largest: Megatron-Bridge's Qwen3-30B-A3B on 16 H100 in one layout, 9058 tokens/s per GPU in the 26.02.01
    # container and 5113 in 26.02
    assert groups[0].names[0].startswith("qwen3-30b-a3b 16 H100 FP8-CS MBS 1")
    assert groups[0].spread_pct == pytest.approx((9058 / 5113 - 1) * 100)
    assert any(set(g.names) == {"Llama 3.1 70B FSDP 32 TP 8 2D", "Llama 3.1 70B FSDP 32 TP 8 2D + AsyncTP"} for g in groups)
    assert all(len(g.names) >= 2 for g in groups)
    assert main(["validate", "--published"]) == 0
    out = capsys.readouterr().out
    assert "published runs the model cannot tell apart" in out and "  36.0%  15.2%" in out
    assert main(["validate", "--published", "--format", "json"]) == 0
    emitted = json.loads(capsys.readouterr().out)["published_indistinct"]
    assert emitted[0]["floor_pct"] == pytest.approx(groups[0].floor_pct) and len(emitted) == len(groups)


def test_each_source_has_the_max_error_its_own_rows_of_the_same_inputs_put_out_of_reach(capsys):
    """Made-up groups: source A has two rows of one input at 10 and 15 s, and one row beside B's in another group;
    B has one row in each group. A's floor is (15 - 10) / (15 + 10) = 20%; B has no two rows alike, so it is
    absent, and rows from two sources do not bound either one. On the published rows, Megatron-Bridge's later
    rows hold Qwen3-30B-A3B on 16 H100 at 9058 and 5113 tokens/s per GPU in one layout: no model is within
    (9058 - 5113) / (9058 + 5113) = 27.8% of both, above the 12% the source is held to."""
    from parbench.sim.accuracy import Indistinct, indistinct_runs, source_floors
    from parbench.sim.published_memory import MBRIDGE_LATER

    groups = [Indistinct(("a1", "a2"), ("A", "A"), ("t", "t"), (10.0, 15.0), 12.0),
              Indistinct(("a3", "b1", "b2"), ("A", "B", "C"), ("t", "t", "t"), (10.0, 20.0, 40.0), 12.0)]
    assert source_floors(groups) == {"A": pytest.approx(20.0)}
    floors = source_floors(indistinct_runs())
    assert floors[MBRIDGE_LATER] == pytest.approx((9058 - 5113) / (9058 + 5113) * 100, abs=0.05)
    assert main(["validate", "--published", "--format", "json"]) == 0
    by_source = {s["source"]: s for s in json.loads(capsys.readouterr().out)["published_memory_by_source"]}
    assert by_source[MBRIDGE_LATER]["metric_max_floor_pct"] == floors[MBRIDGE_LATER] > 12
    assert by_source["Narayanan et al. SC21"]["metric_max_floor_pct"] == 0.0


def test_published_layout_pairs_and_whether_the_model_orders_them(capsys):
    """Two published runs of one model on one device and GPU count in two layouts, their rates (tokens per second)
    in a ratio, published and predicted. The published ratios from the tables' own figures: torchtitan's 405B on
    512 H100 at 100 tokens/s per GPU (1F1B) and 128 (interleaved 1F1B); Megatron-Bridge's 405B on 1024 H100 at 292
    (global batch 512) and 311 (1536); DGX Cloud's Llama 3.1 70B on 64 H100, one global batch, 14.72 s a step in
    BF16 and 11.01 s in FP8. Every pair is found, by a brute-force pass over all pairs of runs."""
    from parbench.sim.accuracy import PAIR_MARGIN_PCT, layout_pairs, pair_summary
    from parbench.sim.published_memory import timed_runs

    pairs = layout_pairs()
    timed = timed_runs()
    by_name = {r.name: r for r in timed}

    def ratio(faster: str, slower: str):
        [p] = [p for p in pairs if (p.faster, p.slower) == (faster, slower)]
        return p

    tt = ratio("Llama 3.1 405B FSDP 8 TP 8 PP 8 interleaved1f1b", "Llama 3.1 405B FSDP 8 TP 8 PP 8 1f1b")
    assert tt.published_ratio == pytest.approx(128 / 100) and tt.decided and tt.ordered
    assert set(tt.differs) == {"micro_batches", "schedule", "virtual_stages"} and not tt.precision_only
    mb = ratio("llama3-405b 1024 H100 MBS 1 TP 8 PP 8 CP 2 VP 8 GBS 1536", "llama3-405b 1024 H100 MBS 1 TP 8 PP 8 CP 2 VP 8 GBS 512")
    assert mb.published_ratio == pytest.approx(311 / 292)
    dgxc = ratio(DGXC_70B_FP8, "Llama 3.1 70B BF16 64 H100 TP 4 PP 4 CP 2 VP 5 GBS 128")
    assert dgxc.published_ratio == pytest.approx(14.72 / 11.01) and dgxc.precision_only
    expected = sum(1 for i, a in enumerate(timed) for b in timed[i + 1:]
                   if a.layout != b.layout and a.cluster == b.cluster and a.layout.world_size == b.layout.world_size
                   and replace(a.arch, name="") == replace(b.arch, name=""))
    # 84, the 8 BF16/FP8 pairs of the held-out Nemotron-4 15B, the H100 Qwen3-235B pair, BLOOM's two batches,
    # Megatron-Bridge's 8 runs of one layout in FP8-CS and in MXFP8 (Layout.fp8_scaling), and the 9 of BigScience's
    # layout search (8 within its four shapes run in two or three layouts, and its BLOOM-shaped row beside BLOOM's
    # one-micro-batch step; the other BLOOM step has its layout, so they are one prediction), and MLPerf v4.0's two
    # beside v4.1's 512-GPU run and v3.1's 10,752-GPU one, and Cisco's two MLPerf v5.1 Llama 3.1 8B runs each beside
    # DGX Cloud's two Llama 3.1 8B rows on as many H100 (64 and 128), and the 36 of DGX Cloud's 25.05.04 release (its
    # BF16 / FP8 and GBS pairs on GB200 and H100, and its rows beside the earlier DGX Cloud and Megatron-Bridge ones),
    # and the 5 of Cisco's MLPerf v6.0 H100 runs (each beside DGX Cloud's two Llama 3.1 8B rows on as many H100, the
    # 64-GPU one beside Cisco's v5.1 TP 1 run; its 128-GPU run has the v5.1 TP 2 run's layout, one prediction), and
    # 3 that the FP8 parameters' gather tells apart (DGX Cloud's recipes gather them as such, NeMo 24.07's launcher
    # configs do not: its Llama 3 8B and 70B and Nemotron-4 340B rows beside DGX Cloud's in the same layouts)
    assert len(pairs) == expected == 161
    for p in pairs:
        a, b = by_name[p.faster], by_name[p.slower]
        assert a.cluster == b.cluster and a.layout.world_size == b.layout.world_size and a.layout != b.layout
        assert p.published_ratio >= 1 and p.differs
        assert all(getattr(a.layout, f) != getattr(b.layout, f) for f in p.differs)
    s = pair_summary(pairs)
    assert s["decided"] == sum((p.published_ratio - 1) * 100 > PAIR_MARGIN_PCT for p in pairs) == 133
    assert s["decided"] + s["close"] == len(pairs) and s["precision"] + s["layout"] == s["decided"]
    # nine pairs apart by more than 5% are misordered, listed first, the widest first: Qwen3-30B-A3B on 16 H100
    # at 9058 tokens/s per GPU (26.02.01) against 5275 (25.11), which the same layout ran at 5113 in 26.02;
    # DeepSeek-V3 on 256 GB200, FP8 on PP 8 and EP 32 28% faster than BF16 on PP 4 and EP 64; four of BigScience's
    # layout search, TP 4 ahead of TP 8 by 19% (MBS 2 and 4) and 7% (MBS 2 and 4), which the model puts 2-6% the
    # other way: its TP 4 rows carry their gradient all-reduce at the ring bandwidth measured on those nodes, and
    # its TP 8 rows miss a cost of their own (6-20% fast); Llama 3.1 8B on 128 H100, DGX Cloud's BF16 TP 1 x CP 2
    # at GBS 2048 16% ahead of Cisco's MLPerf FP8 TP 2 at GBS 64 (one micro-batch a step), which the model puts 6%
    # behind; and GPT-OSS on 64 H100 at micro-batch 1 (two containers) 6% faster than at 4. Every pair of one
    # layout in FP8 current scaling and in MXFP8 is ordered (the current-scaling run faster by 4-10%): MXFP8's
    # GEMMs run at 0.95 of the per-tensor kernels' rate on Blackwell (``Cluster.mxfp8_gemm_share``)
    wrong = [p for p in pairs if p.decided and not p.ordered]
    assert [p.faster.split(" seq ")[0] for p in wrong] == [
        "qwen3-30b-a3b 16 H100 FP8-CS MBS 1", "deepseek-v3 256 GB200 MBS 1",
        "14336 x 70 (64 heads) 384 A100 TP 4 PP 12 DP 8 MBS 2", "14336 x 70 (64 heads) 384 A100 TP 4 PP 12 DP 8 MBS 4",
        "Llama 3.1 8B BF16 128 H100 TP 1 PP 1 CP 2 VP 1 GBS 2048",
        "13312 x 82 (64 heads) 384 A100 TP 4 PP 12 DP 8 MBS 2", "13312 x 82 (64 heads) 384 A100 TP 4 PP 12 DP 8 MBS 4",
        "gpt-oss-120b 64 H100 BF16 MBS 1", "gpt-oss-120b 64 H100 BF16 MBS 1"]
    scaling = [p for p in pairs if p.decided and set(p.differs) == {"fp8_scaling", "fp8_all_gather"}]
    assert len(scaling) == 6 and all(p.ordered and "FP8-MX" in p.slower for p in scaling)
    assert wrong[0].published_ratio == pytest.approx(9058 / 5275)
    assert pairs[:9] == wrong and s["decided_ordered"] == 124
    assert main(["validate", "--published"]) == 0
    out = capsys.readouterr().out
    assert f"predicted faster in 124 of 133 pairs\npublished more than 5% apart ({s['precision_ordered']} of" in out
    assert ("   1.280x    0.980x  WRONG dp, pp, micro_batches, ep, te_fp8, fp8_scaling, precision, chunk_layers: "
            "deepseek-v3") in out
    assert main(["validate", "--published", "--format", "json"]) == 0
    emitted = json.loads(capsys.readouterr().out)["published_pairs"]
    assert len(emitted) == 161 and emitted[0]["faster"] == wrong[0].faster and not emitted[0]["ordered"]


@pytest.mark.slow
def test_search_says_how_many_layouts_lie_within_the_margin_its_order_was_checked_at(capsys):
    """The layouts predicted within 5% of the best one's throughput (counted here over every feasible layout the
    search lists), and the published pairs' record beside them: their order is closer than the one the model
    was checked on."""
    from parbench.sim.accuracy import layout_pairs, pair_summary

    args = ["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "8", "--global-batch", "16",
            "--search"]
    assert main([*args, "--top", "100000", "--format", "json"]) == 0
    emitted = json.loads(capsys.readouterr().out)
    rates = [r["throughput_samples_per_s"] for r in emitted["top"]]
    assert len(rates) == emitted["feasible"] and rates == sorted(rates, reverse=True)
    close = sum(r * 1.05 >= rates[0] for r in rates[1:])
    assert emitted["within_margin_of_best"] == close > 0
    assert main([*args, "--top", "1"]) == 0
    out = capsys.readouterr().out
    s = pair_summary(layout_pairs())
    assert (f"  {close} other layouts are predicted within 5% of it, closer than the order the model was checked on: "
            f"published layout pairs more than 5% apart are predicted in their published order in "
            f"{s['decided_ordered']} of {s['decided']}, closer ones in {s['close_ordered']} of {s['close']}") in out


PRECISION_NAMES = {("fp8", False): "fp8", ("", True): "fp16", ("", False): "bf16"}
"""A published row's precision as ``--precision`` names it: (GEMM dtype, fp16 loss scaling)."""


def test_the_software_each_published_row_ran_gives_its_layout_through_the_command_line():
    """For every published row whose software flags ``software_of`` names, ``parbench simulate`` with the row's mesh
    and those flags builds a layout equal to the row's in every software-set field: the command line can predict
    each of those rows as it ran, and the name is what each source states (NVIDIA's recipes NeMo; SC21 and
    Korthikanti et al. Megatron-LM of 2021-22; MT-NLG and BLOOM Megatron-DeepSpeed)."""
    from parbench.commands.simulate import layout_for
    from parbench.sim.accuracy import SOFTWARE_FIELDS, software_of
    from parbench.sim.published_memory import timed_runs

    named = 0
    by_source = {}
    for run in timed_runs():
        moe = bool(run.arch.experts)
        software = software_of(run.layout, moe=moe)
        by_source.setdefault(run.source.split(" ")[0], set()).add(software)
        if not software:
            continue
        lay = run.layout
        argv = [f"--gpus={lay.world_size}", f"--tp={lay.tp}", f"--pp={lay.pp}", f"--cp={lay.cp}", f"--zero={lay.zero}",
                f"--global-batch={lay.global_batch_size}", f"--micro-batch={lay.micro_batch_size}",
                f"--schedule={lay.schedule.value}", f"--virtual-stages={lay.virtual_stages}",
                f"--precision={PRECISION_NAMES[lay.precision.gemm_dtype, lay.precision.loss_scaling]}",
                *software.split()]
        built = layout_for(argv, PRESETS[run.cluster])
        # the FP8 recipe and the FP8 weights' gather: --fp8-scaling and --[no-]fp8-all-gather on any software
        wrong = [f for f in SOFTWARE_FIELDS if getattr(built, f) != getattr(lay, f) and (moe or f != "moe_saved_outputs")
                 and f not in ("fp8_scaling", "fp8_all_gather")]
        assert not wrong, (run.name, software, wrong)
        named += 1
    assert named == len(timed_runs())  # every row's software is a --software and its flags
    assert by_source["torchtitan"] == {"--software torchtitan", "--software torchtitan --no-compiled-loss",
                                       "--software torchtitan --unfused-elementwise"}
    assert by_source["NVIDIA"] == by_source["Megatron-Bridge"] == {"--software nemo"}
    assert by_source["Narayanan"] == {"--software megatron-lm-2021"}
    assert by_source["Smith"] == by_source["BigScience"] == {"--software megatron-deepspeed"}
    assert by_source["llm-foundry"] == {"--software llm-foundry --reentrant-checkpoint"}


def test_simulate_says_how_its_layout_differs_from_the_software_the_nearest_runs_ran(capsys):
    """The DGX Cloud layout under torch's software (the default) is told the rows beside it ran NeMo's flags and
    which of its own differ; under --software nemo nothing differs and no such line is printed."""
    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "4",
            "--cp", "2", "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--global-batch", "128",
            "--zero", "1", "--precision", "bf16", "--vocab", "128512"]
    main(args)
    out = capsys.readouterr().out
    assert "they ran as `--software nemo`; this layout differs from theirs in attention_kernel" in out
    assert "sequence_parallel, tp_comm_overlap" in out and "moe_saved_outputs" not in out
    assert main([*args, "--software", "nemo"]) == 0
    assert "differs from" not in capsys.readouterr().out


def test_each_nearest_run_carries_its_own_command_line_which_predicts_its_step(capsys):
    """The nearest rows' own simulate arguments (``reproduce.simulate_args``): run, each predicts the step the
    row's error was computed from; the table prints the nearest one's."""
    import shlex

    from parbench.commands.simulate import command_prediction

    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "4",
            "--cp", "2", "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--global-batch", "128",
            "--zero", "1", "--precision", "bf16"]
    main(args)
    out = capsys.readouterr().out
    assert "the nearest, as it ran: parbench simulate --model llama3-70b --vocab=128512" in out
    main([*args, "--format", "json"])
    nearby = json.loads(capsys.readouterr().out)["published_nearest"]
    assert all(r["simulate"] for r in nearby)
    for r in nearby:
        *_, p = command_prediction(shlex.split(r["simulate"]))
        assert p.step_time_s == pytest.approx(r["predicted_step_s"], rel=1e-12), r["name"]


def test_source_targets_judge_each_source_on_its_mean_and_its_max():
    """A source meets the targets when its mean |error| is at most 5% and its max at most 12%, both bounds
    included; one that misses says which."""
    from parbench.sim.accuracy import source_targets

    t = source_targets([("a", 5.0, 12.0), ("b", 5.01, 6.0), ("c", 2.0, 12.5), ("d", 7.0, 30.0)])
    assert (t["mean_target_pct"], t["max_target_pct"]) == (5.0, 12.0) and t["met"] == ["a"]
    assert [(m["source"], m["misses"]) for m in t["missed"]] == [("b", ["mean"]), ("c", ["max"]), ("d", ["mean", "max"])]


def test_validate_published_counts_the_sources_that_meet_the_targets(capsys):
    """``validate --published`` judges every source once (the papers' iteration-time rows are restated beside their
    memory; a source of feasibility checks alone has no error): the sources it says meet both targets are the ones
    whose printed mean and max are within them, counted here from the per-source tables of its own JSON."""
    assert main(["validate", "--published", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    figures = {s["source"]: (s["mean_abs_error_pct"], s["max_abs_error_pct"]) for s in out["published_by_source"]}
    for s in out["published_memory_by_source"]:
        if s["metric_mean_abs_error_pct"] is not None:
            figures.setdefault(s["source"], (s["metric_mean_abs_error_pct"], s["metric_max_abs_error_pct"]))
    meeting = {name for name, (mean, worst) in figures.items() if mean <= 5 and worst <= 12}
    t = out["published_targets"]
    assert set(t["met"]) == meeting and len(t["met"]) + len(t["missed"]) == len(figures) == 28
    assert "Narayanan et al. SC21" in meeting and any("MLPerf Training v3.1" in m for m in meeting)
    assert any("MLPerf Training v4.1" in m["source"] for m in t["missed"])
    assert main(["validate", "--published"]) == 0
    assert f"{len(meeting)} of 28 sources meet both" in capsys.readouterr().out
    rows = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rows.toml"
    assert main(["validate", "--rows", str(rows), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["targets"]["met"]) == 4
