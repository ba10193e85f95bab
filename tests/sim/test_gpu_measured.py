"""The simulator against one real GPU: ``scripts/gpu_compute_check.py`` run on an NVIDIA H200 (torch 2.11,
CUDA 13.0, 2026-11-30), its output kept in ``data/h200_gpu_check.json``. The ~1.3B GPT's training step
(the runner's transformer, bf16 autocast, torch's AdamW) at batch 1, 4 and 8 is predicted on the
``h200-sxm`` preset and held to the measured forward + backward, optimizer step and allocator peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parbench.config import RunConfig, WorkloadConfig
from parbench.sim import PRESETS, layout_from_run, model_spec, predict
from parbench.sim.hardware import HOPPER_FLASH3_OVER_FLASH2

MEASURED = json.loads((Path(__file__).parent / "data" / "h200_gpu_check.json").read_text())
GPT = WorkloadConfig(name="transformer", layers=24, hidden=2048, heads=16, seq_len=2048, vocab_size=51200)


def _predict(batch: int):
    cfg = RunConfig(workload=GPT, global_batch_size=batch, precision="bf16")
    return predict(model_spec(GPT), layout_from_run(cfg), PRESETS["h200-sxm"])


@pytest.mark.parametrize("step", MEASURED["gpt_step"], ids=lambda s: f"batch{s['batch']}")
def test_the_measured_h200_step_is_predicted_term_by_term(step):
    p = _predict(step["batch"])
    memory = p.peak_memory or p.memory
    allocated = p.peak_memory_bytes - memory.context_bytes - memory.fragmentation_bytes
    # fp32 weights, gradients and both Adam moments (16 bytes per parameter), autocast's bf16 weight copies,
    # the fp32 residual stream and the bf16 Linear inputs the step keeps: within 3% of torch's allocator peak
    assert allocated == pytest.approx(step["allocator_peak_bytes"], rel=0.03)
    # torch's AdamW on CUDA (foreach): 80 bytes per parameter at memory speed, the launches running ahead
    assert p.terms["time_optimizer_s"] == pytest.approx(step["measured_s"]["optimizer"], rel=0.10)
    # forward + backward on the at-scale GEMM efficiency (0.68, fitted on published H100 rows with every step
    # waiting for its slowest device, which one GPU alone does not): this GPU runs its large GEMMs at 0.68-0.83 of
    # peak, so batch 4 and 8 are predicted 6% slow; batch 1 8.4% fast, its small GEMMs paying the 22 us launch
    # floor measured here where the preset counts 5 us
    measured = step["measured_s"]["forward"] + step["measured_s"]["backward"]
    assert -0.09 <= p.terms["time_compute_s"] / measured - 1 <= 0.08
    assert step["params"] == 24 * (12 * 2048**2 + 13 * 2048) + (51200 + 2048 + 51200) * 2048 + 2 * 2048


def test_attention_presets_match_the_measured_kernels():
    """torch's FlashAttention-2 and cuDNN's fused attention (Hopper's asynchronous kernel) at the GPT's shape:
    forward + backward FLOPs (backward 2.5x forward) over their time, as a fraction of the dense peak."""
    rows = {r["backend"]: r for r in MEASURED["attention"]["backends"]}

    def efficiency(backend: str) -> float:
        r = rows[backend]
        return 3.5 * MEASURED["attention"]["flops_forward"] / (r["forward_s"] + r["backward_s"]) / 989e12

    flash2, cudnn = efficiency("flash"), efficiency("cudnn")
    assert flash2 == pytest.approx(PRESETS["h200-sxm"].attention_efficiency, rel=0.15)  # 0.21 against 0.19
    assert cudnn / flash2 == pytest.approx(HOPPER_FLASH3_OVER_FLASH2, abs=0.01)
    assert PRESETS["h100-sxm"].attention_kernels["flash3"] == round(0.19 * HOPPER_FLASH3_OVER_FLASH2, 2)


def test_the_preset_memory_bandwidth_lies_below_the_measured_copy():
    """A 1 GiB device-to-device copy moved 4.17 TB/s (read + written); the preset keeps 0.8 x the datasheet's
    4.8 TB/s, which torch's multi-tensor AdamW kernels reach (3.6 TB/s measured on the step above)."""
    measured = MEASURED["memory_bandwidth"]["measured_bytes_per_s"]
    assert 0.85 * 4.8e12 < measured < 4.8e12
    assert PRESETS["h200-sxm"].memory_bandwidth_bytes_per_s < measured


def _record(precision: str) -> dict:
    return json.loads((Path(__file__).parent / "data" / f"h200_run_{precision}.json").read_text())


def test_the_runners_gpu_breakdown_agrees_with_cuda_events():
    """The same GPT at batch 4 run by ``parbench run --device cuda --backend nccl --precision bf16`` on that
    H200: the breakdown's compute (the device's kernels in the profiler's timeline) is within 3% of the
    forward + backward that CUDA events timed in the check script, and the terms fill the traced step."""
    rec = _record("bf16")
    assert rec["gpu_name"] == "NVIDIA H200" and rec["global_batch_size"] == 4 and rec["layers"] == 24
    events = next(s for s in MEASURED["gpt_step"] if s["batch"] == 4)["measured_s"]
    assert rec["time_compute_s"] == pytest.approx(events["forward"] + events["backward"], rel=0.03)
    terms = ("time_compute_s", "time_comm_exposed_s", "time_bubble_s", "time_optimizer_s", "time_other_s")
    assert sum(rec[t] for t in terms) == pytest.approx(rec["traced_step_time_s"], rel=1e-6)
    assert rec["time_other_s"] < 0.05 * rec["traced_step_time_s"]  # the host's launches hide under the kernels


def test_validate_predicts_the_measured_h200_runs():
    """``parbench validate --cluster h200-sxm`` on the two records: bf16 (autocast) within 10% (2.1% slow); tf32
    within 34%, the prediction too fast (fp32 tensors run no flash attention and move twice the bytes)."""
    from parbench.sim.validate import compare

    bf16, tf32 = (compare(_record(p), PRESETS["h200-sxm"]) for p in ("bf16", "tf32"))
    assert bf16["comm_bytes_exact"] and tf32["comm_bytes_exact"]
    assert bf16["step_time_error_pct"] <= 10 and bf16["step_time_predicted_s"] > bf16["step_time_measured_s"]
    assert tf32["step_time_error_pct"] <= 34 and tf32["step_time_predicted_s"] < tf32["step_time_measured_s"]
    for row in (bf16, tf32):
        assert row["mem_param_measured"] == row["mem_param_predicted"] == 4 * MEASURED["gpt_step"][0]["params"]


def test_mfu_takes_the_runs_own_peak_as_the_runner_does():
    """The runner's MFU of the tf32 run is over the H200's TF32 peak (494.5 TFLOP/s, its record says so); the
    simulator's MFU of the same layout takes the same denominator, a bf16 run the bf16 peak."""
    from parbench.config import RunConfig as Cfg

    rec = _record("tf32")
    assert rec["mfu_dtype"] == "tf32" and rec["mfu_peak_flops"] == 494.5e12
    for precision, peak in (("tf32", 494.5e12), ("fp32", 67e12), ("bf16", 989e12)):
        cfg = Cfg(workload=GPT, global_batch_size=4, precision=precision, device="cuda", backend="nccl")
        p = predict(model_spec(GPT), layout_from_run(cfg), PRESETS["h200-sxm"])
        assert p.mfu == pytest.approx(p.model_flops_per_step / p.step_time_s / peak)


def test_backward_gemms_take_twice_the_forwards():
    """The time model's backward is two GEMMs (input and weight gradient) per forward GEMM, each as long: on
    the H200 the GPT's five Linear shapes took 1.93-2.24x their forward for the two, 1.97x over all."""
    rows = MEASURED["gemm_model"]
    triples = [rows[i:i + 3] for i in range(0, len(rows), 3)]
    assert all(f["gemm"].startswith("forward") and d["gemm"].startswith("input") and w["gemm"].startswith("weight")
               for f, d, w in triples)
    forward = sum(f["measured_s"] for f, _, _ in triples)
    backward = sum(d["measured_s"] + w["measured_s"] for _, d, w in triples)
    assert backward / forward == pytest.approx(2.0, abs=0.05)


def test_the_h200_gemm_curve_is_a_fixed_cost_and_one_efficiency():
    """The 20 bf16 GEMMs of 2048 and up (squares to 16384, the GPT's own shapes) lie within 18% of one line,
    t = 22 us + flops / (0.77 x 989 TFLOP/s); the 256-1024 squares (21.6-30.0 us) are the host's launch floor
    and stay out. The presets keep 5 us and the at-scale 0.65 (``H100_SOURCES['gemm_overhead_s']``)."""
    from parbench.sim.efficiency_fits import fit_gemm_curve

    curve = fit_gemm_curve(MEASURED["gemm_square"] + MEASURED["gemm_model"], 989e12)
    assert (curve["gemms"], curve["left_out_launch_bound"]) == (20, 3)
    assert curve["fixed_s"] == pytest.approx(22.1e-6, rel=0.02)
    assert curve["efficiency"] == pytest.approx(0.769, abs=0.005)
    assert curve["max_error_pct"] < 18


def test_the_gemm_curve_recovers_a_known_line_above_the_launch_floor():
    """Synthetic GEMMs timed as 10 us + flops / (0.5 x peak), with two launch-bound ones at a 20 us floor
    (which, kept, would pull the fixed cost up and the efficiency off)."""
    from parbench.sim.efficiency_fits import fit_gemm_curve

    peak = 1e15
    shapes = [(n, n, n) for n in (2048, 4096, 8192)] + [(2048, 2048, 8192), (8192, 2048, 2048)]
    rows = [{"m": m, "k": k, "n": n, "measured_s": 10e-6 + 2 * m * k * n / (0.5 * peak)} for m, k, n in shapes]
    rows += [{"m": n, "k": n, "n": n, "measured_s": 20e-6} for n in (256, 512)]
    rows += [{"m": 8192, "k": 8192, "n": 8192, "dtype": "fp32", "measured_s": 1.0}]  # another peak: not this curve
    curve = fit_gemm_curve(rows, peak)
    assert (curve["gemms"], curve["left_out_launch_bound"]) == (5, 2)
    assert curve["fixed_s"] == pytest.approx(10e-6, rel=1e-6) and curve["efficiency"] == pytest.approx(0.5, rel=1e-6)


def test_the_gemm_curve_refuses_gemms_that_do_not_grow_with_their_flops():
    """Timings that fall as the flops grow (noise on tiny shapes) clamp the fitted slope to zero: the fit says so
    in a ValueError, which ``scripts/gpu_compute_check.py`` records in its output, instead of dividing by zero
    and losing every figure the check had measured."""
    from parbench.sim.efficiency_fits import fit_gemm_curve

    rows = [{"m": n, "k": n, "n": n, "measured_s": t} for n, t in ((64, 1e-6), (128, 9e-6), (256, 6e-6), (512, 3e-6))]
    with pytest.raises(ValueError, match="do not take longer with more flops"):
        fit_gemm_curve(rows, 1e15)
