"""Host cost of torch's wrappers in the simulator: what it counts matches what torch wraps, and it adds
exactly count x calibrated cost to the step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parbench.config import RunConfig, Strategy, WorkloadConfig
from parbench.sim import PRESETS, layout_from_run, model_spec, predict
from parbench.sim.framework import dtensor_params, fsdp_units, micro_batch_overhead_s, tp_linears
from parbench.sim.stages import stages
from parbench import workloads

SHAPES_PROBE = WorkloadConfig(name="transformer", layers=2, hidden=96, heads=4, seq_len=32, vocab_size=256)
SHAPES = {"mlp": WorkloadConfig(name="mlp", layers=3, hidden=512),
          "transformer": WorkloadConfig(name="transformer", layers=4, hidden=128, heads=4, seq_len=64, vocab_size=512)}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_counts_match_what_torch_wraps(name):
    """The workload's own tensor-parallel plan and modules, built with torch, against the simulator's counts."""
    cfg = SHAPES[name]
    w = workloads.make(cfg, 0)
    model = w.build(0)
    plan = w.tp_plan(model)
    stage = stages(model_spec(cfg), 1, 1)[0]
    assert tp_linears(stage) == len(plan)
    wrapped = sum(len(list(model.get_submodule(k).parameters())) for k in plan)
    tp = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.TP, world_size=2, global_batch_size=32))
    assert dtensor_params(tp, stage) == wrapped
    fsdp = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.FSDP, world_size=2, global_batch_size=32))
    assert fsdp_units(stage) == len(model.units) + 1  # each unit, and the root
    assert dtensor_params(fsdp, stage) == len(list(model.parameters()))
    ddp = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.DDP, world_size=2, global_batch_size=32))
    assert dtensor_params(ddp, stage) == 0 and micro_batch_overhead_s(replace(PRESETS["a100-80gb"], tp_linear_overhead_s=1.0,
                                                                              fsdp_unit_overhead_s=1.0), model_spec(cfg), ddp, stage) == 0


MLP_PARAM_BYTES = 4 * (784 * 512 + 512 + 2 * (512 * 512 + 512) + 512 * 10 + 10)
"""The check's mlp (784 features, 3 hidden layers of 512, 10 classes) in float32."""


def test_overheads_add_count_times_cost_to_the_step():
    """1 ms per tensor-parallel Linear, 2 ms per FSDP unit, 0.5 ms per FSDP parameter, 1 ns per byte FSDP
    gathers, 10 us per optimizer op on a DTensor: the mlp (3 hidden layers: 4 Linears, 8 parameters, SGD's
    1.5 ops per tensor) under tp x2 and fsdp x2 (one micro-batch: the runner's non-pipeline runs); a GPU preset
    (the cores do not bound it: no oversubscription)."""
    base = PRESETS["a100-80gb"]
    costly = replace(base, tp_linear_overhead_s=1e-3, fsdp_unit_overhead_s=2e-3, fsdp_param_overhead_s=5e-4,
                     fsdp_byte_overhead_s=1e-9, dtensor_op_overhead_s=1e-5)
    m = model_spec(SHAPES["mlp"])
    for strategy, per_micro_batch, dtensors in ((Strategy.TP, 4 * 1e-3, 8),
                                                (Strategy.FSDP, 5 * 2e-3 + 8 * 5e-4 + MLP_PARAM_BYTES * 1e-9, 8)):
        lay = layout_from_run(RunConfig(workload=SHAPES["mlp"], strategy=strategy, world_size=2, global_batch_size=32))
        extra = per_micro_batch + dtensors * 1.5 * 1e-5
        a, b = predict(m, lay, base), predict(m, lay, costly)
        assert b.terms["time_optimizer_s"] - a.terms["time_optimizer_s"] == pytest.approx(dtensors * 1.5 * 1e-5)
        assert b.step_time_s - a.step_time_s == pytest.approx(extra, rel=1e-9)


def test_a_traced_step_books_the_wrappers_traced_cost_and_its_share_between_operators_as_other():
    """The mlp (3 hidden layers) under fsdp x2 and tp x2, 2 ms per FSDP unit (5 units: 4 Linears and the root)
    and 1 ms per tensor-parallel Linear (4), one micro-batch, on a GPU preset (no oversubscription, no
    per-operator tracing cost): traced, FSDP2's costs x1.5 with a third of them between operators, tensor
    parallelism's x1.2 with a tenth. The traced prediction's other grows by cost x multiple x share, its compute
    by the rest of the growth; untraced, neither moves."""
    base = replace(PRESETS["a100-80gb"], tp_linear_overhead_s=1e-3, fsdp_unit_overhead_s=2e-3)
    traced = replace(base, tracing_fsdp_scale=1.5, tracing_tp_scale=1.2, tracing_fsdp_between_share=1 / 3,
                     tracing_tp_between_share=0.1)
    m = model_spec(SHAPES["mlp"])
    for strategy, untraced_s, multiple, share in ((Strategy.FSDP, 5 * 2e-3, 1.5, 1 / 3), (Strategy.TP, 4 * 1e-3, 1.2, 0.1)):
        lay = layout_from_run(RunConfig(workload=SHAPES["mlp"], strategy=strategy, world_size=2, global_batch_size=32))
        a, b = predict(m, lay, base.traced()), predict(m, lay, traced.traced())
        assert b.terms["time_other_s"] - a.terms["time_other_s"] == pytest.approx(untraced_s * multiple * share, rel=1e-9)
        assert b.terms["time_compute_s"] - a.terms["time_compute_s"] == pytest.approx(
            untraced_s * multiple * (1 - share) - untraced_s, rel=1e-9)
        assert predict(m, lay, traced) == predict(m, lay, base)  # untraced: the measured multiple plays no part
    with pytest.raises(ValueError, match="tracing adds work"):
        replace(base, tracing_fsdp_scale=0.9)
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        replace(base, tp_between_share=1.5)


def test_tensor_parallel_bytes_add_their_cost_per_byte():
    """1 ns per byte DTensor all-reduces: the check's decoder (4 layers, d 128, 64 tokens) at tp 2 and batch 32
    all-reduces, per layer, the attention's and the MLP's row-wise outputs forward and the inputs of q, k, v and
    the MLP's up projection backward: 6 x 32 x 64 x 128 float32 values, 24 MiB in all (the head and embedding
    stay replicated). The mlp (784 -> 512 -> 512 -> 512 -> 10: two column-wise/row-wise pairs) all-reduces the
    first pair's row-wise output (32 x 512) and the second's (32 x 10) forward, and the second pair's column-wise
    input (32 x 512) backward; the first Linear reads the raw features and needs no input gradient."""
    base = PRESETS["a100-80gb"]
    costly = replace(base, tp_byte_overhead_s=1e-9)
    for name, bytes_ in (("transformer", 4 * 6 * 32 * 64 * 128 * 4), ("mlp", (2 * 32 * 512 + 32 * 10) * 4)):
        m = model_spec(SHAPES[name])
        lay = layout_from_run(RunConfig(workload=SHAPES[name], strategy=Strategy.TP, world_size=2, global_batch_size=32))
        assert predict(m, lay, costly).step_time_s - predict(m, lay, base).step_time_s == pytest.approx(bytes_ * 1e-9, rel=1e-9)
        ddp = layout_from_run(RunConfig(workload=SHAPES[name], strategy=Strategy.DDP, world_size=2, global_batch_size=32))
        assert predict(m, ddp, costly).step_time_s == predict(m, ddp, base).step_time_s


def test_ddp_adds_its_cost_per_parameter_and_gradient_byte():
    """10 us per parameter tensor and 1 ns per gradient byte under the runner's DDP (ddp, zero1): the mlp's 8
    tensors (784 x 512 + 512 + 2 x (512 x 512 + 512) + 512 x 10 + 10 float32 values) each micro-batch; FSDP2,
    tensor parallelism and the runner's hand-reduced dp x pp pay none of it."""
    base = PRESETS["a100-80gb"]
    costly = replace(base, ddp_param_overhead_s=1e-5, ddp_byte_overhead_s=1e-9)
    cfg = SHAPES["mlp"]
    m = model_spec(cfg)
    grads = 4 * (784 * 512 + 512 + 2 * (512 * 512 + 512) + 512 * 10 + 10)
    for strategy, micro in ((Strategy.DDP, 1), (Strategy.DDP, 2), (Strategy.ZERO1, 1)):
        lay = replace(layout_from_run(RunConfig(workload=cfg, strategy=strategy, world_size=2, global_batch_size=32)),
                      micro_batches=micro)  # the simulator's gradient accumulation: every micro-batch reduces
        extra = micro * (8 * 1e-5 + grads * 1e-9)
        assert predict(m, lay, costly).step_time_s - predict(m, lay, base).step_time_s == pytest.approx(extra, rel=1e-9)
    for strategy, micro in ((Strategy.FSDP, 1), (Strategy.TP, 1), (Strategy.PIPELINE, 2)):
        lay = layout_from_run(RunConfig(workload=cfg, strategy=strategy, world_size=2, global_batch_size=32,
                                        micro_batches=micro))
        assert predict(m, lay, costly).step_time_s == predict(m, lay, base).step_time_s


def test_pipeline_schedules_add_their_cost_per_micro_batch_and_stage():
    """1 ms per schedule action on the runner's pipelines: a stage's beat (one micro-batch) grows by 1 ms per
    stage the rank holds, and the step by (m + (p-1)/v) beats (Narayanan et al. 2021: m micro-batches plus the
    bubble's (p-1)/v). Other layouts, and the published (Megatron-style) layouts, are untouched."""
    base = PRESETS["a100-80gb"]
    costly = replace(base, pipeline_action_overhead_s=1e-3)
    cfg = SHAPES["mlp"]
    m = model_spec(cfg)
    for schedule, v, per_beat, beats in (("1f1b", 1, 1e-3, 4 + 1), ("interleaved1f1b", 2, 2e-3, 4 + 1 / 2)):
        lay = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.PIPELINE, world_size=2, global_batch_size=32,
                                        micro_batches=4, schedule=schedule, virtual_stages=v))
        assert lay.pp == 2 and lay.v == v
        a, b = predict(m, lay, base), predict(m, lay, costly)
        assert b.step_time_s - a.step_time_s == pytest.approx(per_beat * beats, rel=1e-9)
        assert predict(m, replace(lay, fsdp2=False), costly).step_time_s == pytest.approx(a.step_time_s, rel=1e-12)
    ddp = layout_from_run(RunConfig(workload=cfg, strategy=Strategy.DDP, world_size=2, global_batch_size=32))
    assert predict(m, ddp, costly).step_time_s == predict(m, ddp, base).step_time_s


def test_the_framework_fit_takes_each_probes_measured_differences():
    """Per Linear and per byte all-reduced (each probe at two batch sizes), per FSDP unit and parameter (two
    equations, two unknowns), per DTensor optimizer op and per schedule action, from made-up rows whose answers
    are known: 0.5 ms per Linear, 1 ns per byte, 0.3 ms per unit, 0.02 ms per parameter, 10 us per DTensor op,
    0.2 ms per schedule action, DDP's 20 us per parameter and 0.2 ns per gradient byte (two equations), and
    FSDP's 0.5 ns per gathered byte (the mlp probe at two widths, its bytes' share in every FSDP figure)."""
    from parbench.sim.calibrate import fit_framework
    from parbench.sim.timing import ADAMW_OPS_PER_TENSOR, SGD_OPS_PER_TENSOR

    rows = [{"workload": "mlp", "tp_linears": 2, "fsdp_units": 4, "params": 6, "optimizer": "sgd",
             "tp_s": 2 * 5e-4 + 8192e-9, "tp_bytes": 8192, "tp_large_s": 2 * 5e-4 + 65536e-9, "tp_large_bytes": 65536,
             "fsdp_s": 4 * 3e-4 + 6 * 2e-5 + 540_000 * 5e-10, "fsdp_bytes": 540_000,
             "fsdp_wide_s": 4 * 3e-4 + 6 * 2e-5 + 7_400_000 * 5e-10, "fsdp_wide_bytes": 7_400_000,
             "optimizer_s": 6 * SGD_OPS_PER_TENSOR * 1e-5,
             "pipeline_s": 4 * 2e-4, "pipeline_micro_batches": 4, "optimizer_plain_s": 1e-4, "param_elements": 0,
             "ddp_s": 6 * 2e-5 + 1_080_000 * 2e-10, "ddp_bytes": 1_080_000},
            {"workload": "transformer", "tp_linears": 12, "fsdp_units": 3, "params": 37, "optimizer": "adamw",
             "tp_s": 12 * 5e-4 + 1179648e-9, "tp_bytes": 1179648, "tp_large_s": 12 * 5e-4 + 9437184e-9,
             "tp_large_bytes": 9437184, "fsdp_s": 3 * 3e-4 + 37 * 2e-5 + 1_100_000 * 5e-10, "fsdp_bytes": 1_100_000,
             "optimizer_s": 37 * ADAMW_OPS_PER_TENSOR * 1e-5,
             "pipeline_s": 2 * 2e-4, "pipeline_micro_batches": 2, "optimizer_plain_s": 1e-4, "param_elements": 0,
             "ddp_s": 37 * 2e-5 + 1_100_000 * 2e-10, "ddp_bytes": 1_100_000}]
    got = fit_framework(rows, 8e10)
    assert (got["tracing_fsdp_scale"], got["tracing_tp_scale"]) == (1.0, 1.0)  # rows without the traced timings
    assert (got["tracing_fsdp_between_share"], got["tracing_tp_between_share"]) == (0.0, 0.0)
    # traced: FSDP2 2 -> 3 ms on the mlp and 4 -> 6 on the decoder, 1 and 2 ms of it between operators (x1.5,
    # a third); tensor parallelism 1 -> 1.2 and 9 -> 10.8, a tenth between (x1.2, 10%)
    for r, (fsdp, tp) in zip(rows, ((2e-3, 1e-3), (4e-3, 9e-3))):
        r.update(fsdp_untraced_added_s=fsdp, fsdp_traced_added_s=1.5 * fsdp, fsdp_between_added_s=0.5 * fsdp,
                 tp_untraced_added_s=tp, tp_traced_added_s=1.2 * tp, tp_between_added_s=0.12 * tp)
    got = fit_framework(rows, 8e10)
    assert got["tracing_fsdp_scale"] == pytest.approx(1.5) and got["tracing_fsdp_between_share"] == pytest.approx(1 / 3)
    assert got["tracing_tp_scale"] == pytest.approx(1.2) and got["tracing_tp_between_share"] == pytest.approx(0.1)
    rows[0]["tp_traced_added_s"] = rows[1]["tp_traced_added_s"] = 0.9e-3  # noise: traced below untraced
    assert fit_framework(rows, 8e10)["tracing_tp_scale"] == 1.0
    assert got["tp_linear_overhead_s"] == pytest.approx(5e-4) and got["tp_byte_overhead_s"] == pytest.approx(1e-9)
    assert got["fsdp_unit_overhead_s"] == pytest.approx(3e-4) and got["fsdp_param_overhead_s"] == pytest.approx(2e-5)
    assert got["fsdp_byte_overhead_s"] == pytest.approx(5e-10)
    assert got["dtensor_op_overhead_s"] == pytest.approx(1e-5)
    assert got["pipeline_action_overhead_s"] == pytest.approx(2e-4)
    assert got["ddp_param_overhead_s"] == pytest.approx(2e-5) and got["ddp_byte_overhead_s"] == pytest.approx(2e-10)


def test_framework_calibration_measures_positive_costs_on_a_one_rank_group():
    """The real measurement: a one-rank gloo process, the probe workloads plain and wrapped; FSDP2 and tensor
    parallelism on a fake two-rank group, where FSDP2 runs its all-gather and reduce-scatter paths and DTensor
    its all-reduces (on one rank they skip them). The tensor-parallel probes' bytes: the decoder probe (2 layers,
    d 96, 32 tokens) all-reduces 6 activations per layer, 2 x 6 x 8 x 32 x 96 float32 values at batch 8; the
    mlp probe one row-wise output of 8 x 256 (its column-wise Linear reads the raw features); 8x at batch 64."""
    from parbench.sim.calibrate import FRAMEWORK_FIELDS, measure_framework

    # about what calibrate's elementwise fit measures on these machines (87.9 GB/s: the probes' tensors sit in
    # cache); a far lower figure leaves no time for the operators once torch's AdamW's 80 bytes per element are out
    got = measure_framework(reps=1, memory_bandwidth_bytes_per_s=8e10)
    if got["tracing_fsdp_scale"] <= 1:  # one repeat a probe: a stall in the untraced one hides tracing's cost once
        got = measure_framework(reps=1, memory_bandwidth_bytes_per_s=8e10)
    assert all(got[k] >= 0 for k in FRAMEWORK_FIELDS)
    assert got["tp_linear_overhead_s"] > 0 and got["dtensor_op_overhead_s"] > 0 and got["optimizer_op_overhead_s"] > 0
    assert [r["workload"] for r in got["rows"]] == ["mlp", "transformer"]
    assert [r["fsdp_ranks"] for r in got["rows"]] == [2, 2] and [r["tp_ranks"] for r in got["rows"]] == [2, 2]
    assert [r["tp_bytes"] for r in got["rows"]] == [8 * 256 * 4, 2 * 6 * 8 * 32 * 96 * 4]
    assert [r["tp_large_bytes"] for r in got["rows"]] == [8 * r["tp_bytes"] for r in got["rows"]]
    assert got["rows"][1]["tp_s"] > 0  # the decoder probe's 12 wrapped Linears cost ~10 ms over its ~5 ms shard
    assert got["rows"][0]["fsdp_s"] > 0  # the mlp's FSDP2 step costs ~3 ms over its ~0.5 ms plain one
    mlp = got["rows"][0]  # and ~3 ms more at four times the width (0.5-0.7 ns per byte on these machines)
    assert mlp["fsdp_bytes"] == mlp["ddp_bytes"]
    assert mlp["fsdp_wide_bytes"] == 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
    assert mlp["fsdp_wide_s"] > mlp["fsdp_s"] and got["fsdp_byte_overhead_s"] > 0
    assert got["rows"][0]["ddp_s"] > 0  # and DDP's ~0.35 ms (IQR ~0.05)
    # traced, FSDP2 added 6.0 ms to the mlp's 3.4 and 8.5 to the decoder's 5.7, a third of it between operators;
    # tensor parallelism 1.6 to 1.5 and 13.3 to 10.6, a tenth between (on these machines)
    assert got["tracing_fsdp_scale"] > 1 and 0 < got["tracing_fsdp_between_share"] < 1
    assert got["tracing_tp_scale"] >= 1 and 0 < got["tracing_tp_between_share"] < 1
    assert all(r["fsdp_traced_added_s"] > 0 and r["fsdp_between_added_s"] > 0 for r in got["rows"])
    assert [r["ddp_bytes"] for r in got["rows"]] == [4 * (784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10),
                                                    4 * model_spec(SHAPES_PROBE).param_numel]
    assert [r["pipeline_micro_batches"] for r in got["rows"]] == [4, 4]


def test_decoder_runs_are_predicted_with_flash_attention_and_the_calibrated_kernel_rate():
    """The runner's decoders call scaled_dot_product_attention(is_causal=True) (torch's flash kernel on CPU);
    calibrate measures that kernel's rate on shapes unlike the check's, one figure per shape."""
    from parbench.sim.calibrate import ATTENTION_SHAPES, measure_attention

    assert layout_from_run(RunConfig(workload=SHAPES["transformer"])).attention == "flash"
    assert layout_from_run(RunConfig(workload=SHAPES["mlp"])).attention == "eager"
    eff, rows = measure_attention(reps=1, peak_flops=1e11, gemm_overhead_s=0.0)
    assert [r["shape"] for r in rows] == [list(s) for s in ATTENTION_SHAPES] and 0 < eff < 2
    b, h, s, d = ATTENTION_SHAPES[0]  # 32 tokens: one query block of 32 rows, so the kernel computes all s^2 scores
    assert s == 32  # 3.5 x the forward's 2 x 2 s^2 d b h FLOPs at 1e11 FLOP/s
    assert rows[0]["efficiency"] == pytest.approx(3.5 * 4 * s * s * d * b * h / (1e11 * rows[0]["seconds"]))


def test_causal_attention_computes_what_the_kernels_blocks_cover():
    """torch's CPU flash kernel takes query blocks of 32 rows below 192 tokens and 64 below 768, and computes each
    block's keys up to its last row; GPU presets keep the ideal half (their fitted efficiencies absorb tiling)."""
    import dataclasses

    from parbench.sim.hardware import PRESETS
    from parbench.sim.timing import causal_fraction

    cpu = dataclasses.replace(PRESETS["a100-80gb"], cores=2)
    assert causal_fraction(cpu, 32) == 1.0  # one 32 x 32 block
    assert causal_fraction(cpu, 64) == (32 * 32 + 32 * 64) / 64**2  # 0.75
    assert causal_fraction(cpu, 200) == pytest.approx((64 * 64 + 64 * 128 + 64 * 192 + 8 * 200) / 200**2)
    assert causal_fraction(cpu, 1024) == pytest.approx(sum(256 * k for k in (256, 512, 768, 1024)) / 1024**2)
    assert causal_fraction(PRESETS["a100-80gb"], 4096) == 0.5
