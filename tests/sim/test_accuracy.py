"""The published rows shown beside a prediction: a published layout finds itself first with the README's own step
time, only rows on the same tensor cores are candidates, a mixture of experts is compared with mixtures of experts,
a device without published runs says so, and the CLI prints and emits them."""

from __future__ import annotations

import json
import math
from dataclasses import replace

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
    """The H100 SXM, the 96 GB H100 and the H200 share the H100's 989 TFLOP/s; the A100s theirs of 312."""
    run = _run(DGXC_70B_FP8)
    model = architecture_spec(run.arch, megatron=True)
    hopper = nearest_published(model, run.layout, PRESETS["h100-sxm"], k=10_000)
    ampere = nearest_published(model, run.layout, PRESETS["a100-80gb"], k=10_000)
    assert {r.cluster for r in hopper} == {"h100-sxm", "h100-96gb", "h200-sxm"}
    assert {r.cluster for r in ampere} == {"a100-80gb"}
    dense = sum(1 for r in runs() if r.ran and r.metric and r.cluster in ("h100-sxm", "h100-96gb", "h200-sxm")
                and not r.arch.experts)
    assert len(hopper) == dense
    moe = next(r for r in runs() if r.name.startswith("gpt-oss-120b 64 H100"))
    experts = nearest_published(architecture_spec(moe.arch, megatron=True), moe.layout, PRESETS["h100-sxm"], k=10_000)
    assert "Mixtral 8x7B on 64 H100" in {r.name for r in experts}  # Megatron-LM's MoE row joins the tables' rows
    assert len(experts) == 1 + sum(1 for r in runs() if r.ran and r.metric and r.arch.experts
                                   and r.cluster in ("h100-sxm", "h100-96gb", "h200-sxm"))


def test_a_mixture_of_experts_is_compared_with_mixtures_of_experts():
    run = next(r for r in runs() if r.name.startswith("gpt-oss-120b 64 H100"))
    nearby = nearest_published(architecture_spec(run.arch, megatron=True), run.layout, PRESETS["h100-sxm"])
    assert nearby[0].name == run.name
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
