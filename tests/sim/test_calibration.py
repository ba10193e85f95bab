"""Calibration: the alpha-beta fit recovers known parameters from synthetic data, reports held-out error,
and the real micro-benchmarks produce positive times (gloo, real rank processes)."""

from __future__ import annotations

import math
import random

import pytest

from parbench.sim.fit import fit_alpha_beta, fit_with_holdout
from parbench.sim.hardware import PRESETS, cluster_from_dict, cluster_to_dict


def test_fit_recovers_alpha_and_beta_exactly_without_noise():
    alpha, beta = 35e-6, 1 / 2.5e9
    xs = [2.0**k for k in range(8, 24)]
    fit = fit_with_holdout(xs, [alpha + beta * x for x in xs])
    assert fit.alpha == pytest.approx(alpha, rel=1e-9)
    assert fit.beta == pytest.approx(beta, rel=1e-9)
    assert fit.heldout_error_pct == pytest.approx(0.0, abs=1e-9)


def test_fit_recovers_parameters_within_noise():
    rng = random.Random(0)
    alpha, beta = 120e-6, 1 / 0.8e9
    xs = [2.0**k for k in range(8, 24)] * 3
    ys = [(alpha + beta * x) * (1 + rng.gauss(0, 0.02)) for x in xs]
    a, b = fit_alpha_beta(xs, ys)
    assert a == pytest.approx(alpha, rel=0.05)
    assert b == pytest.approx(beta, rel=0.05)
    assert fit_with_holdout(xs, ys).heldout_error_pct < 5


def test_fit_clamps_negative_latency_and_rejects_degenerate_input():
    a, b = fit_alpha_beta([1.0, 2.0, 3.0], [1.0, 2.1, 3.3])  # a line through the origin, slightly convex
    assert a >= 0 and b > 0
    with pytest.raises(ValueError, match="cannot separate"):
        fit_alpha_beta([4.0, 4.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=">= 2 points"):
        fit_alpha_beta([1.0], [1.0])
    for xs, ys in (([1.0, 2.0], [1e-300, 2.0]), ([1.0, 2.0], [1.0, math.nan]), ([1.0, math.inf], [1.0, 2.0])):
        with pytest.raises(ValueError, match="each point weighs 1/y"):  # once a ZeroDivisionError, or nan fitted
            fit_alpha_beta(xs, ys)


def test_cluster_round_trips_through_plain_data():
    c = PRESETS["h100-sxm"]
    assert cluster_from_dict(cluster_to_dict(c)) == c
    with pytest.raises(ValueError, match="unknown cluster fields"):
        cluster_from_dict({**cluster_to_dict(c), "nvlink_gen": 4})
    # the data is a copy: editing it (a cluster file written from a preset) leaves the preset as it was
    data = cluster_to_dict(c)
    data["intra"]["bandwidth_bytes_per_s"] = 1.0
    data["attention_kernels"]["flash"] = 0.1
    data["sources"]["peak_flops"] = "edited"
    assert cluster_from_dict(cluster_to_dict(c)) == c and c.intra.bandwidth_bytes_per_s > 1e11
    assert c.attention_kernels.get("flash") != 0.1 and c.sources["peak_flops"] != "edited"


def test_real_collectives_and_gemm_are_measured():
    """Two sizes of two collectives over 2 real gloo ranks, and GEMMs in this process."""
    from parbench.sim.calibrate import measure_collectives, measure_gemm

    rows = measure_collectives(2, [1024, 65536], reps=2, kinds=("all_reduce", "send", "broadcast_burst"))
    assert rows.pop("compute_s") > 0  # the per-rank compute probe, both ranks computing at once
    assert rows.pop("barrier_s") > 0
    assert set(rows) == {"all_reduce", "send", "broadcast_burst"}
    assert all(t > 0 for kind in rows.values() for _, t in kind)
    flops, secs = measure_gemm([32, 64], reps=2)
    assert flops == [2.0 * 32**3, 2.0 * 64**3] and all(s > 0 and math.isfinite(s) for s in secs)


def test_the_step_probe_is_a_real_fsdp2_run():
    from parbench.sim.calibrate import measure_step_probe, step_probe_config

    assert 0 < measure_step_probe(step_probe_config(2), runs=1) < 1.0


def test_every_collective_window_averages_several_ops():
    """A step sums its collectives, so calibration needs their mean cost: one op (and the barrier closing its
    window) is one draw from a wide distribution of scheduling delays. 32 small ops per window (1 MiB in all),
    never fewer than 8."""
    from parbench.sim.calibrate import ops_per_window

    assert [ops_per_window(2**k) for k in (8, 15, 16, 17, 18, 20, 24)] == [32, 32, 16, 8, 8, 8, 8]


def test_step_scale_compares_a_real_reference_step_with_the_op_model():
    from dataclasses import replace

    from parbench.config import RunConfig, WorkloadConfig
    from parbench.metrics import stats
    from parbench.sim import layout_from_run, model_spec, predict
    from parbench.sim.calibrate import REFERENCE_STEPS, step_scale

    c = PRESETS["a100-80gb"]
    scale, ratios = step_scale(c, reps=1)
    assert list(ratios) == ["mlp", "mlp-2x384", "mlp-1x1024", "transformer", "transformer-2x96", "transformer-2x192"]
    assert len(REFERENCE_STEPS) == 6 and scale == stats.median(list(ratios.values())) > 0
    cfg = RunConfig(workload=WorkloadConfig(name="mlp"))
    m, lay = model_spec(cfg.workload), layout_from_run(cfg)
    assert predict(m, lay, replace(c, step_scale=2.0)).compute_time_s == pytest.approx(2 * predict(m, lay, c).compute_time_s)


def test_standard_errors_cover_the_true_parameters():
    from parbench.sim.fit import fit_with_holdout

    xs = [2.0**k for k in range(8, 24)]
    exact = fit_with_holdout(xs, [1e-4 + x / 1e9 for x in xs])
    assert exact.alpha_se == pytest.approx(0, abs=1e-15) and exact.beta_se == pytest.approx(0, abs=1e-20)
    rng = random.Random(1)
    noisy = fit_with_holdout(xs * 3, [(1e-4 + x / 1e9) * (1 + rng.gauss(0, 0.03)) for x in xs * 3])
    assert abs(noisy.alpha - 1e-4) < 3 * noisy.alpha_se and abs(noisy.beta - 1e-9) < 3 * noisy.beta_se


def test_unphysical_fits_are_flagged_and_replaced_by_point_estimates():
    """Flat times (infinite bandwidth), a rate above the memory bandwidth, a curve a line cannot follow:
    each is named, and the profile uses the smallest size's time and the largest size's rate instead."""
    from parbench.sim.calibrate import checked_fit

    xs = [2.0**k for k in range(8, 20)]
    (a, b), rep = checked_fit(xs, [5e-5] * len(xs))
    assert rep["status"] == "unphysical" and any("infinite" in r for r in rep["reasons"])
    assert a == 5e-5 and b == pytest.approx((5e-5 / xs[-2] + 5e-5 / xs[-3]) / 2)  # median of the top third
    assert rep["used"] == "point estimates"
    _, rep = checked_fit(xs, [1e-5 + x / 1e12 for x in xs], max_rate=1e10)
    assert any("above the physical limit" in r for r in rep["reasons"])
    (a, b), rep = checked_fit(xs, [1e-6 * (x / 256) ** 2 for x in xs])  # quadratic: no line holds out
    assert any("held-out error" in r for r in rep["reasons"]) and b > 0
    (a, b), rep = checked_fit(xs, [1e-5 + x / 1e9 for x in xs])
    assert rep["status"] == "ok" and rep["reasons"] == [] and b == pytest.approx(1e-9)


def test_calibration_report_is_an_aligned_table_with_units():
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import checked_fit

    xs = [2.0**k for k in range(8, 20)]
    _, good = checked_fit(xs, [3e-5 + x / 2e9 for x in xs])
    _, bad = checked_fit(xs, [5e-5] * len(xs))
    c = cluster_to_dict(PRESETS["a100-80gb"])
    profile = {"cluster": {**c, "compute_slowdown": {"1": 1.0, "2": 1.4}, "step_scale": 1.1},
               "fit": {"gemm": good, "elementwise": good, "all_reduce@2": good, "send@2": bad, "broadcast_burst@2": good,
                       "framework_op_overhead_s": {"alpha": 2e-6},
                       "framework": {"optimizer_op_overhead_s": 3e-6, "tp_linear_overhead_s": 6e-4, "tp_byte_overhead_s": 5e-10,
                                     "fsdp_unit_overhead_s": 3e-4, "fsdp_param_overhead_s": 7e-5,
                                     "dtensor_op_overhead_s": 1.5e-5, "pipeline_action_overhead_s": 2e-4,
                                     "rows": [{"workload": "mlp", "tp_s": 1.2e-3, "fsdp_s": 1.8e-3, "optimizer_s": 4e-5,
                                               "iqr_s": {"tp": 1e-4, "fsdp": 2e-4, "optimizer": 1e-5}}]},
                       "step_scale": {"alpha": 1.1, "measured_over_predicted_mlp": 1.1},
                       "collective_step_overhead@2": {"alpha": 6e-4, "measured_s": 0.0206, "predicted_s": 0.0152,
                                                      "collectives_on_path": 9.0},
                       "burst_step_overhead@2": {"alpha": 4e-4, "measured_s": 0.0328, "predicted_s": 0.0176,
                                                 "collectives_on_path": 37.0},
                       "tp_step_overhead@2": {"alpha": 1.7e-3, "measured_s": 0.0831, "predicted_s": 0.0626,
                                              "collectives_on_path": 12.0},
                       "fsdp_step_byte_overhead@2": {"alpha": 5.48e-10, "measured_s": 0.0614, "predicted_s": 0.0492,
                                                     "collectives_on_path": 22364280.0}},
               # when it was finished: validate sets it beside the runs' times
               "meta": {"seconds": 268.4, "created_at": "2026-12-07T14:31:50+00:00", "load_average_1min": 2.9}}
    lines = report_lines(profile)
    assert "measured in 268 s, finished 2026-12-07T14:31:50+00:00 (load average 2.90)" in lines
    head = lines[0]
    assert all(u in head for u in ("value", "+-95%", "unit", "held-out")) and "GB/s" in "\n".join(lines)
    footer = next(i for i, ln in enumerate(lines) if ln.startswith("\n"))  # the lines after the table
    table = [ln for ln in lines[2:footer] if ln and ("GB/s" in ln or " us " in ln)]
    assert len({ln.index(" us ") if " us " in ln else ln.index(" GB/s") for ln in table if " us " in ln or " GB/s" in ln}) <= 2
    assert any(ln.startswith("send@2") and "UNPHYSICAL" in ln and "point estimates used" in ln for ln in lines)
    assert "1 unphysical fit(s) replaced by measured point estimates: send@2" in lines
    assert any(ln.startswith("broadcast_burst@2") for ln in lines)
    assert ("collectives timed each after ~1 ms of compute; *_burst: issued back to back, no compute between, "
            "as ZeRO-1 broadcasts its parameters") in lines
    assert any("600 us per tensor-parallel Linear + 0.50 ns per byte its all-reduces carry" in ln
               and "300 us per unit + 70 us per parameter" in ln
               and "pipeline schedule 200 us per micro-batch and stage" in ln for ln in lines)
    assert "  mlp probe, wrapped - plain per step: tp 1.20 ms (IQR 0.10), fsdp 1.80 ms (IQR 0.20), optimizer 0.04 ms (IQR 0.01)" in lines
    assert ("a group collective inside a training step, beyond its fit (an FSDP2 run's step measured / predicted "
            "without it, over its collectives): 2 ranks 20.6 / 15.2 ms over 9 -> 0.60 ms") in lines
    assert ("a broadcast of ZeRO-1's burst inside a training step, beyond its fit (a ZeRO-1 run's step measured / "
            "predicted without it, over its broadcasts): 2 ranks 32.8 / 17.6 ms over 37 -> 0.40 ms") in lines
    assert ("a tensor-parallel all-reduce inside a training step, beyond its fit (a tensor-parallel run's step "
            "measured / predicted without it, over its all-reduces): 2 ranks 83.1 / 62.6 ms over 12 -> 1.70 ms") in lines
    assert ("a byte of FSDP2's gathers and reduce-scatters inside a training step, beyond the above (an FSDP2 run of "
            "the wide mlp probe, measured / predicted without it, over their bytes): 2 ranks 61.4 / 49.2 ms over "
            "21.3 MiB -> 0.55 ns/byte") in lines


def test_a_machine_that_changed_speed_while_calibrating_is_reported_unsteady():
    """The same compute probe read through the calibration: spread above 15% is called out, below it is steady."""
    from parbench.commands.calibrate import drift_line
    from parbench.sim.calibrate import machine_drift

    steady = machine_drift([1.00e-3, 1.05e-3, 1.02e-3, 1.10e-3])
    assert steady["drift_pct"] == pytest.approx(10.0) and steady["steady"]
    assert "steady" in drift_line(steady) and "UNSTEADY" not in drift_line(steady)
    slowed = machine_drift([1.00e-3, 1.02e-3, 1.63e-3, 1.01e-3])  # one reading taken while the machine was busy
    assert slowed["drift_pct"] == pytest.approx(63.0) and not slowed["steady"]
    line = drift_line(slowed)
    assert "1.00-1.63 ms over 4 readings, drift 63%: UNSTEADY" in line and "calibrate again" in line


def test_reference_steps_that_moved_make_a_steady_probe_an_unsteady_calibration():
    """The GEMM probe read within 4%, while the single-process reference steps the step scale rests on moved
    between the calibration's start and its end by 30.4% (mlp, 3.0 -> 2.3 ms), 33.3% (decoder, 34 -> 25.5 ms) and
    2% (10 -> 10.2 ms): the median move, 30.4%, makes the profile unsteady and the report says so."""
    from parbench.commands.calibrate import drift_line
    from parbench.sim.calibrate import machine_drift

    probe = [1.00e-3, 1.02e-3, 1.04e-3, 1.01e-3]
    start = {"mlp": 3.0e-3, "transformer": 34e-3, "mlp-1x1024": 10e-3}
    end = {"mlp": 2.3e-3, "transformer": 25.5e-3, "mlp-1x1024": 10.2e-3}
    moved = machine_drift(probe, (start, end))
    assert moved["compute_drift_pct"] == pytest.approx(4.0)
    assert moved["reference_drift_pct"] == pytest.approx((3.0 / 2.3 - 1) * 100) == pytest.approx(30.43, abs=0.01)
    assert moved["drift_pct"] == moved["reference_drift_pct"] and not moved["steady"]
    line = drift_line(moved)
    assert "1.00-1.04 ms over 4 readings, drift 4%; the single-process reference steps moved 30% between the start " \
           "and the end (median over 3): UNSTEADY" in line
    still = machine_drift(probe, (start, {k: v * 1.05 for k, v in start.items()}))
    assert still["reference_drift_pct"] == pytest.approx(5.0) and still["drift_pct"] == pytest.approx(5.0)
    assert still["steady"] and machine_drift(probe)["drift_pct"] == pytest.approx(4.0)


def test_threads_that_ran_no_faster_than_one_make_the_calibration_unsteady():
    """A steady one-thread probe, but GEMMs with two threads at 0.99x one thread's rate (another load shared the
    two cores while they ran): unsteady, said; 1.89x is steady; the gain survives the profile's JSON."""
    import json

    from parbench.commands.calibrate import drift_line
    from parbench.sim.calibrate import machine_drift

    probe = [1.00e-3, 1.02e-3, 1.04e-3, 1.01e-3]
    shared = json.loads(json.dumps(machine_drift(probe, threaded_gemm_gain={2: 0.99})))
    assert not shared["steady"] and shared["drift_pct"] == pytest.approx(4.0)
    assert ("drift 4%; with 2 threads the GEMM probe ran x0.99 one thread's rate: UNSTEADY, no faster on more "
            "cores") in drift_line(shared)
    assert machine_drift(probe, threaded_gemm_gain={2: 1.89})["steady"]


def test_the_contended_probe_is_the_median_of_every_ranks_readings():
    """One rank caught by a hiccup (or rank 0 alone, as the probe once was) does not set the contention."""
    from parbench.sim.calibrate import contended_probe_s

    ranks = [{"compute_probe_s": [1.0, 1.1, 3.0]}, {"compute_probe_s": [1.0, 1.05, 1.1]},
             {"compute_probe_s": [0.9, 1.0, 1.2]}, {"compute_probe_s": [1.1, 1.0, 1.0]}]
    assert contended_probe_s(ranks) == pytest.approx(1.025)  # rank 0's first and last alone: 2.0
    assert contended_probe_s(ranks[:1]) == 1.1


def test_the_optimizer_streams_its_bytes_at_the_dram_bandwidth():
    """A CPU profile's optimizer step and zero_grad move parameters, gradients and states the backward pass
    has evicted from the caches: their bytes go at ``stream_bandwidth_bytes_per_s``, not the cache-hot
    bandwidth of the elementwise probe (20-22 GB/s against 65-90 GB/s on this project's VM)."""
    import dataclasses

    from parbench.config import RunConfig, WorkloadConfig
    from parbench.sim import layout_from_run, model_spec, predict
    from parbench.sim.timing import optimizer_time_s

    hot = dataclasses.replace(PRESETS["a100-80gb"], cores=2, optimizer_op_overhead_s=0.0, op_overhead_s=0.0)
    streamed = dataclasses.replace(hot, stream_bandwidth_bytes_per_s=hot.memory_bandwidth_bytes_per_s / 4)
    spec = model_spec(WorkloadConfig(name="transformer"))
    n = spec.param_numel
    # torch's for-loop AdamW moves 80 bytes per element, zero_grad 4 more; no operator cost in these clusters.
    # From DRAM: the compulsory 7 float32 (read weight, gradient, 2 moments; write weight, 2 moments) and
    # zero_grad's write; the other 52 bytes re-read one tensor's temporaries, which stay in the caches
    bw = hot.memory_bandwidth_bytes_per_s
    assert optimizer_time_s(hot, spec, n, 10, n, fused=False) == pytest.approx(84 * n / bw)
    assert optimizer_time_s(streamed, spec, n, 10, n, fused=False) == pytest.approx(32 * n / (bw / 4) + 52 * n / bw)
    assert optimizer_time_s(streamed, spec, n, 10, n, fused=True) == pytest.approx(32 * n / (bw / 4))
    layout = layout_from_run(RunConfig(workload=WorkloadConfig(name="transformer"), global_batch_size=16))
    a, b = predict(spec, layout, hot), predict(spec, layout, streamed)
    assert b.terms["time_optimizer_s"] == pytest.approx(a.terms["time_optimizer_s"] * (4 * 32 + 52) / 84)
    assert b.terms["time_compute_s"] == a.terms["time_compute_s"]  # activations' elementwise work stays cache-hot
    sgd = model_spec(WorkloadConfig(name="mlp"))  # SGD: 12 bytes, all compulsory
    assert optimizer_time_s(streamed, sgd, 1000, 2, 1000) == pytest.approx(16 * 1000 / (bw / 4))


def test_the_dram_bandwidth_is_measured_past_the_caches():
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import measure_stream_bandwidth

    bw, rows = measure_stream_bandwidth([2**22], reps=1)
    assert rows[0]["bytes"] == 12 * 2**22 and 1e8 < bw < 1e13 and bw == rows[0]["bytes_per_s"]
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "stream_bandwidth": {"alpha": 21.6e9, "rows": rows},
                       "step_scale": {"alpha": 1.0}}}
    assert "DRAM bandwidth (an add on arrays of 16-16 MiB, past the caches; the optimizer's traffic): 21.6 GB/s" \
        in report_lines(profile)


def _bare_cpu(**kw):
    """A CPU-like profile (100 GFLOP/s, 80 GB/s) with no fixed costs, so each term below is one formula and
    every GEMM is compute-bound."""
    import dataclasses

    return dataclasses.replace(PRESETS["a100-80gb"], cores=2, gemm_overhead_s=0.0, op_overhead_s=0.0,
                               autograd_op_overhead_s=0.0, peak_flops=1e11, peak_flops_tf32=0.0, peak_flops_fp32=0.0, gemm_efficiency=1.0,
                               memory_bandwidth_bytes_per_s=80e9, **kw)


def test_the_mlp_first_linear_computes_no_input_gradient():
    """The mlp's first Linear reads raw features: autograd computes its weight gradient only, so its backward
    is one GEMM of the forward's FLOPs, the others two. Expected from the layer widths alone."""
    from parbench.config import RunConfig, WorkloadConfig
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import input_needs_grad, model_spec
    from parbench.sim.timing import chunk_times_s, unit_times_s

    c = _bare_cpu()
    spec = model_spec(WorkloadConfig(name="mlp", layers=2, hidden=256))
    assert not input_needs_grad(spec, 0) and input_needs_grad(spec, 1)
    batch = 64
    rate = c.peak_flops * c.gemm_efficiency
    widths = [784, 256, 256, 10]
    flops = [2 * batch * a * b for a, b in zip(widths, widths[1:])]  # forward FLOPs of each Linear
    layout = layout_from_run(RunConfig(workload=WorkloadConfig(name="mlp", layers=2, hidden=256), global_batch_size=batch))
    t = chunk_times_s(c, spec, layout, spec.units, first=True, last=True)
    gemm_s = [f / rate for f in flops]
    elementwise = sum(batch * u.elementwise_elems_per_sample * 4 * 2 / c.memory_bandwidth_bytes_per_s for u in spec.units)
    assert t.backward == pytest.approx(gemm_s[0] + 2 * sum(gemm_s[1:]) + 2 * elementwise, rel=1e-9)
    # the same unit behind a pipeline boundary (its input a received activation) computes both gradients
    f, b, _, _ = unit_times_s(c, spec.units[0], mb=batch, tp=1, act_bytes=4)
    assert b == pytest.approx(2 * gemm_s[0] + 2 * batch * spec.units[0].elementwise_elems_per_sample * 8
                              / c.memory_bandwidth_bytes_per_s, rel=1e-9)


def test_backward_gemms_run_at_the_calibrated_ratio_and_exp_functions_at_their_cost():
    """A block's Linear backward GEMMs take 1 / ``backward_gemm_ratio`` as long, its attention core does not
    change; GELU over the MLP's t x 4d elements costs ``transcendental_s_per_element`` each, a third forward."""
    from parbench.config import WorkloadConfig
    from parbench.sim.model import model_spec
    from parbench.sim.timing import unit_times_s

    spec = model_spec(WorkloadConfig(name="transformer", hidden=64, seq_len=32))
    block = spec.units[0]
    kw = dict(mb=4, tp=1, act_bytes=4, flash=True)
    base = unit_times_s(_bare_cpu(), block, **kw)
    _, _, attn, gemm = base
    slow = unit_times_s(_bare_cpu(backward_gemm_ratio=0.5), block, **kw)
    assert slow[0] == pytest.approx(base[0]) and slow[1] - base[1] == pytest.approx(2 * (gemm - attn), rel=1e-9)
    per = 2e-9
    costly = unit_times_s(_bare_cpu(transcendental_s_per_element=per), block, **kw)
    gelu = 4 * 32 * (4 * 64) * per  # micro-batch x tokens x MLP width
    assert costly[0] - base[0] == pytest.approx(gelu / 3, rel=1e-9)
    assert costly[1] - base[1] == pytest.approx(2 * gelu / 3, rel=1e-9)
    head = unit_times_s(_bare_cpu(transcendental_s_per_element=per), spec.post, **kw)[0] - unit_times_s(_bare_cpu(), spec.post, **kw)[0]
    assert head == pytest.approx(4 * 32 * 256 * per / 3, rel=1e-9)  # the cross-entropy over the 256-word vocabulary
    with pytest.raises(ValueError, match="backward_gemm_ratio"):
        _bare_cpu(backward_gemm_ratio=0.0)
    with pytest.raises(ValueError, match="transcendental_s_per_element"):
        _bare_cpu(transcendental_s_per_element=-1e-9)


def test_backward_gemm_ratio_and_exp_function_cost_are_measured_and_reported():
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import (
        BACKWARD_GEMM_SHAPES,
        measure_backward_gemm,
        measure_transcendental,
    )

    ratio, rows = measure_backward_gemm(reps=1)
    assert [r["shape"] for r in rows] == [list(s) for s in BACKWARD_GEMM_SHAPES]
    assert all(r["ratio"] == pytest.approx(2 * r["forward_s"] / r["backward_s"]) for r in rows)
    assert 0.1 < ratio < 3
    per, funcs = measure_transcendental(reps=1, memory_bw=50e9)
    assert [f["function"] for f in funcs] == ["gelu", "silu", "cross_entropy"]
    assert all(f["beyond_memory_s"] == pytest.approx(max(f["seconds_per_element"] - 24 / 50e9, 0.0)) for f in funcs)
    assert 0 <= per < 1e-6
    fixed = {"alpha": 0.84, "rows": [{"shape": [32, 384, 384], "ratio": 0.78}, {"shape": [2048, 384, 96], "ratio": 0.9}]}
    exp = {"alpha": 1.1e-9, "rows": [{"function": "gelu", "seconds_per_element": 1.6e-9},
                                     {"function": "cross_entropy", "seconds_per_element": 1.4e-9}]}
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "backward_gemm_ratio": fixed,
                       "transcendental_s_per_element": exp, "step_scale": {"alpha": 1.0}}}
    lines = report_lines(profile)
    assert "Linear backward GEMMs, rate over the forward's (rows x in x out): 32x384x384 0.78, 2048x384x96 0.90 -> 0.84" in lines
    assert ("exp/erf functions, forward + backward ns per element: gelu 1.60, cross_entropy 1.40; beyond their memory "
            "traffic 1.10 ns") in lines


def test_a_linear_brings_in_its_weight_three_times_per_micro_batch_at_the_weight_read_bandwidth():
    """With ``weight_read_bandwidth_bytes_per_s`` set, each Linear's forward reads its k x n weight once and its
    backward twice (the input gradient reads it, the weight gradient writes its size), in series with the
    arithmetic; the mlp's first Linear, which computes no input gradient, once in backward. The attention
    core's batched products hold no weight. Expected from the layer widths alone."""
    from parbench.config import WorkloadConfig
    from parbench.sim.model import model_spec
    from parbench.sim.timing import unit_times_s

    bw = 5e9
    spec = model_spec(WorkloadConfig(name="mlp", layers=2, hidden=256))
    first, second = spec.units[0], spec.units[1]
    for unit, (k, n), grad, passes in ((first, (784, 256), False, 1), (first, (784, 256), True, 2), (second, (256, 256), True, 2)):
        base = unit_times_s(_bare_cpu(), unit, mb=32, tp=1, act_bytes=4, input_grad=grad)
        read = unit_times_s(_bare_cpu(weight_read_bandwidth_bytes_per_s=bw), unit, mb=32, tp=1, act_bytes=4, input_grad=grad)
        assert read[0] - base[0] == pytest.approx(k * n * 4 / bw, rel=1e-9)
        assert read[1] - base[1] == pytest.approx(passes * k * n * 4 / bw, rel=1e-9)
        assert read[2:] == base[2:]  # the attention and GEMM shares tensor parallelism overlaps are the kernels'
    block = model_spec(WorkloadConfig(name="transformer", hidden=64, seq_len=32)).units[0]
    weights = 4 * 64 * 64 + 2 * 64 * 256  # qkv, the attention output, the MLP's two Linears (d x 4d, 4d x d)
    base = unit_times_s(_bare_cpu(), block, mb=4, tp=2, act_bytes=4, flash=True)
    read = unit_times_s(_bare_cpu(weight_read_bandwidth_bytes_per_s=bw), block, mb=4, tp=2, act_bytes=4, flash=True)
    assert read[0] - base[0] == pytest.approx(weights * 4 / 2 / bw, rel=1e-9)  # each rank holds 1/tp of each weight
    with pytest.raises(ValueError, match="weight_read_bandwidth"):
        _bare_cpu(weight_read_bandwidth_bytes_per_s=-1.0)


def test_the_weight_read_bandwidth_is_measured_and_reported():
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import (
        WEIGHT_READ_ROWS,
        WEIGHT_READ_SIDES,
        measure_weight_read,
    )

    """Each cold forward is set against the GEMM fit's time for its shape: 2 x rows x side^2 FLOPs at the rate plus
    the overhead, or its operands' bytes at the memory bandwidth where that is longer."""
    rate, overhead = 100e9, 1e-6
    bw, rows = measure_weight_read(1, rate, overhead, 50e9)
    assert [r["shape"] for r in rows] == [[WEIGHT_READ_ROWS, s, s] for s in WEIGHT_READ_SIDES]
    assert all(r["weight_bytes"] == 4 * r["shape"][1] ** 2 and r["hot_s"] > 0 and r["cold_s"] > 0 for r in rows)
    assert [r["model_s"] for r in rows] == pytest.approx([overhead + 2 * WEIGHT_READ_ROWS * s * s / rate for s in WEIGHT_READ_SIDES])
    extra = sum(r["cold_s"] - r["model_s"] for r in rows)
    assert bw == (pytest.approx(sum(r["weight_bytes"] for r in rows) / extra) if extra > 0 else 0.0)
    _, slow_memory = measure_weight_read(1, rate, overhead, 1e9)  # operands' bytes at 1 GB/s outlast the FLOPs
    assert [r["model_s"] for r in slow_memory] == pytest.approx(
        [overhead + (2 * WEIGHT_READ_ROWS * s + s * s) * 4 / 1e9 for s in WEIGHT_READ_SIDES])
    fit = {"alpha": 10.7e9, "rows": [{"shape": [32, 320, 320], "model_s": 32e-6, "hot_s": 44e-6, "cold_s": 56e-6}]}
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "weight_read_bandwidth": fit, "step_scale": {"alpha": 1.0}}}
    assert ("a Linear's weight brought in beyond its arithmetic (forward on few rows, rows x in x out: the GEMM fit's "
            "time / weight hot / a pass after its last use): 32x320x320 32 / 44 / 56 us -> 10.7 GB/s") in report_lines(profile)
    profile["fit"]["weight_read_bandwidth"] = {**fit, "alpha": 0.0}
    assert any(line.endswith("no slower than the fit: no such term") for line in report_lines(profile))


def test_an_elementwise_op_whose_operands_outgrow_the_cache_moves_at_the_beyond_cache_bandwidth():
    """A decoder block's elementwise traffic (4 d-wide and 2 f-wide tensors per token, read and written) moves at
    the cache bandwidth while an op's three tensors of the block's output (tokens x d) fit ``cache_bytes``, and
    at ``beyond_cache_bandwidth`` past it; backward moves it twice. Expected from the shapes alone."""
    from parbench.config import WorkloadConfig
    from parbench.sim.model import model_spec
    from parbench.sim.timing import unit_times_s

    d, t, f = 64, 32, 256
    block = model_spec(WorkloadConfig(name="transformer", hidden=d, seq_len=t)).units[0]
    traffic = t * (4 * d + 2 * f) * 4 * 2  # float32 elements read and written, per sample
    for mb, tp, spills in ((8, 1, False), (64, 1, True), (64, 2, False)):
        operands = 3 * mb * t * d * 4 / tp  # 192 KiB, 1.5 MiB, 768 KiB against a 1 MiB cache
        base = unit_times_s(_bare_cpu(), block, mb=mb, tp=tp, act_bytes=4, flash=True)
        two = unit_times_s(_bare_cpu(cache_bytes=2**20, beyond_cache_bandwidth_bytes_per_s=20e9), block, mb=mb,
                           tp=tp, act_bytes=4, flash=True)
        extra = mb * traffic / tp * (1 / 20e9 - 1 / 80e9) if spills else 0.0
        assert operands > 2**20 if spills else operands <= 2**20
        assert two[0] - base[0] == pytest.approx(extra, abs=1e-12)
        assert two[1] - base[1] == pytest.approx(2 * extra, abs=1e-12)
    assert _bare_cpu(cache_bytes=2**20, stream_bandwidth_bytes_per_s=10e9).elementwise_bandwidth(2**21) == 10e9
    with pytest.raises(ValueError, match="cache_bytes"):
        _bare_cpu(cache_bytes=-1)


def test_the_cache_capacity_is_the_last_size_before_the_add_falls_to_the_streaming_bandwidth():
    """Bandwidths by hand: small arrays are overhead-bound (below the threshold but before the best), the
    fall comes after the best; threshold sqrt(110 x 18.5) = 45.1 GB/s."""
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import cache_capacity

    mib = 2**20
    sizes = [0.1875 * mib, 0.375 * mib, 0.75 * mib, 1.5 * mib, 3 * mib, 6 * mib, 12 * mib]
    gbs = [37, 80, 110, 87, 31, 28, 28]
    fit = cache_capacity(sizes, [x / (g * 1e9) for x, g in zip(sizes, gbs)], 18.5e9)
    assert fit["alpha"] == 1.5 * mib
    assert fit["beyond_bytes_per_s"] == pytest.approx(28e9)
    assert fit["threshold_bytes_per_s"] == pytest.approx((110e9 * 18.5e9) ** 0.5)
    flat = cache_capacity(sizes, [x / 90e9 for x in sizes], 18.5e9)
    assert (flat["alpha"], flat["beyond_bytes_per_s"]) == (0, 0.0)
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "cache_capacity": fit, "step_scale": {"alpha": 1.0}}}
    assert ("elementwise ops past a core's caches (an add, bandwidth by operand bytes): up to 1.50 MiB at up to "
            "110 GB/s, beyond it 28.0 GB/s") in report_lines(profile)
    profile["fit"]["cache_capacity"] = flat
    assert ("elementwise ops past a core's caches (an add, bandwidth by operand bytes): no fall up to 12 MiB "
            "(best 90 GB/s): one level") in report_lines(profile)


def test_calibrate_refuses_a_results_directory_it_cannot_write_before_measuring(tmp_path, monkeypatch, capsys):
    """The profile goes to <results-dir>/calibration/: a directory that cannot be made there (a file in the
    way) is exit 2 at once, not a profile lost after minutes of measuring."""
    from parbench.cli import main

    measured = []
    monkeypatch.setattr("parbench.sim.calibrate.calibrate", lambda **kw: measured.append(kw) or {})
    (tmp_path / "file").write_text("")
    assert main(["calibrate", "--results-dir", str(tmp_path / "file" / "results")]) == 2
    assert "cannot be created" in capsys.readouterr().err and not measured


def test_a_group_collective_inside_a_step_costs_the_calibrated_overhead_beyond_its_fit():
    """Added to every fitted collective at its group size (the nearest calibrated one elsewhere), never to a
    point-to-point send nor to ZeRO-1's back-to-back broadcasts (their burst fit is timed that way), and it
    survives the profile's file round trip."""
    import dataclasses

    from parbench.sim.hardware import collective_time_s

    c = dataclasses.replace(_bare_cpu(), collectives={"all_gather": {2: (1e-4, 1e-9), 4: (3e-4, 2e-9)},
                                                      "send": {2: (5e-5, 1e-9)}, "broadcast": {2: (2e-4, 1e-9)},
                                                      "broadcast_burst": {2: (5e-5, 1e-9)}})
    on = dataclasses.replace(c, collective_step_overhead_s={2: 6e-4, 4: 1.2e-3})

    def t(cl, kind, n, burst=False):
        return collective_time_s(cl, kind, 2**20, n, inter_node=False, burst=burst)

    assert t(c, "all_gather", 2) == pytest.approx(1e-4 + 1e-9 * 2**20)
    assert t(on, "all_gather", 2) - t(c, "all_gather", 2) == pytest.approx(6e-4)
    assert t(on, "all_gather", 4) - t(c, "all_gather", 4) == pytest.approx(1.2e-3)
    assert t(on, "all_gather", 8) - t(c, "all_gather", 8) == pytest.approx(1.2e-3)  # nearest calibrated: 4
    assert t(on, "send", 2) == t(c, "send", 2)
    assert t(on, "broadcast", 2) - t(c, "broadcast", 2) == pytest.approx(6e-4)
    assert t(on, "broadcast", 2, burst=True) == t(c, "broadcast", 2, burst=True) == pytest.approx(5e-5 + 1e-9 * 2**20)
    both = dataclasses.replace(on, burst_step_overhead_s={2: 3e-4})  # a burst's broadcast has its own term
    assert t(both, "broadcast", 2, burst=True) - t(c, "broadcast", 2, burst=True) == pytest.approx(3e-4)
    assert t(both, "broadcast", 2) == t(on, "broadcast", 2)
    tp = dataclasses.replace(both, tp_step_overhead_s={2: 9e-4})  # tensor parallelism's all-reduces: their own
    assert collective_time_s(tp, "all_gather", 2**20, 2, inter_node=False, tp=True) - t(c, "all_gather", 2) == \
        pytest.approx(9e-4)
    assert t(tp, "all_gather", 2) == t(on, "all_gather", 2)  # the other collectives keep theirs
    assert collective_time_s(on, "all_gather", 2**20, 2, inter_node=False, tp=True) == t(on, "all_gather", 2)
    fsdp = dataclasses.replace(tp, fsdp_step_byte_overhead_s={2: 5e-10})  # FSDP2's ops: per byte on top
    assert collective_time_s(fsdp, "all_gather", 2**20, 2, inter_node=False, fsdp=True) - t(on, "all_gather", 2) == \
        pytest.approx(5e-10 * 2**20)
    assert t(fsdp, "all_gather", 2) == t(on, "all_gather", 2)
    back = cluster_from_dict(cluster_to_dict(fsdp))
    assert back.collective_step_overhead_s == {2: 6e-4, 4: 1.2e-3} and back.burst_step_overhead_s == {2: 3e-4}
    assert back.tp_step_overhead_s == {2: 9e-4} and back.fsdp_step_byte_overhead_s == {2: 5e-10} and back == fsdp


def test_the_step_overhead_is_the_probe_s_missing_time_over_its_collectives():
    """The runner's FSDP2 run of the probe mlp (2 hidden layers: input, hidden and output Linears, three FSDP2
    units) gathers each unit in forward and again in backward and reduce-scatters its gradient: 3 x 3 = 9
    collectives on the path. A measured step 9 x 0.5 ms above the prediction gives 0.5 ms; one at or below
    it, 0."""
    import dataclasses

    from parbench.sim.calibrate import fit_collective_step_overhead, step_probe_config

    c = dataclasses.replace(_bare_cpu(), collectives={k: {2: (1e-4, 1e-9)} for k in ("all_gather", "reduce_scatter")})
    cfg = step_probe_config(2)
    assert (cfg.strategy.value, cfg.world_size, cfg.workload.layers) == ("fsdp", 2, 2)
    base = fit_collective_step_overhead(c, cfg, 0.0)["predicted_s"]
    fit = fit_collective_step_overhead(c, cfg, base + 9 * 5e-4)
    assert fit["collectives_on_path"] == pytest.approx(9)
    assert fit["alpha"] == pytest.approx(5e-4) and fit["measured_s"] == base + 9 * 5e-4
    assert fit_collective_step_overhead(c, cfg, base * 0.9)["alpha"] == 0.0


def test_the_burst_overhead_is_the_zero1_probe_s_missing_time_over_its_broadcasts():
    """ZeRO-1's step ends with one broadcast per rank (``ZeroRedundancyOptimizer(parameters_as_bucket_view=True)``
    keeps each rank's parameters in one flat bucket and syncs bucket by bucket): n ops on the probe's path at n
    ranks, however many tensors its decoder has."""
    import dataclasses

    from parbench import workloads
    from parbench.sim.calibrate import fit_collective_step_overhead, step_probe_config

    c = dataclasses.replace(_bare_cpu(), collectives={k: {n: (1e-4, 1e-9) for n in (2, 4)}
                                                      for k in ("all_reduce", "broadcast")})
    for n in (2, 4):
        cfg = step_probe_config(n, "burst_step_overhead_s")
        assert (cfg.strategy.value, cfg.workload.name) == ("zero1", "mlp")
        assert len(list(workloads.make(cfg.workload, 0).build(0).parameters())) > n  # buckets, not tensors
        base = fit_collective_step_overhead(c, cfg, 0.0, "burst_step_overhead_s")["predicted_s"]
        fit = fit_collective_step_overhead(c, cfg, base + n * 4e-4, "burst_step_overhead_s")
        assert fit["collectives_on_path"] == pytest.approx(n) and fit["alpha"] == pytest.approx(4e-4)


def test_the_tp_overhead_is_the_tp_probe_s_missing_time_over_its_all_reduces():
    """The runner's tensor-parallel run of the decoder probe (2 layers) all-reduces, per layer, the attention's and
    the MLP's row-wise outputs in forward and, in backward, the input gradient of each column-wise Linear (q, k, v
    and the MLP's up projection: DTensor reduces each one's partial gradient on its own): 2 + 4 = 6 a layer, 12 on
    the path. A step 12 x 0.7 ms above the prediction gives 0.7 ms, whatever the FSDP2 probe's in-step cost."""
    import dataclasses

    from parbench.sim.calibrate import fit_collective_step_overhead, step_probe_config

    c = dataclasses.replace(_bare_cpu(), collectives={"all_reduce": {2: (1e-4, 1e-9)}},
                            collective_step_overhead_s={2: 3e-4})
    cfg = step_probe_config(2, "tp_step_overhead_s")
    assert (cfg.strategy.value, cfg.workload.name, cfg.workload.layers) == ("tp", "transformer", 2)
    base = fit_collective_step_overhead(c, cfg, 0.0, "tp_step_overhead_s")["predicted_s"]
    fit = fit_collective_step_overhead(c, cfg, base + 12 * 7e-4, "tp_step_overhead_s")
    assert fit["collectives_on_path"] == pytest.approx(12) and fit["alpha"] == pytest.approx(7e-4)


def test_the_fsdp_byte_overhead_is_the_wide_probe_s_missing_time_over_its_bytes():
    """FSDP2 on the wide mlp probe gathers each of its three units in forward and again in backward and
    reduce-scatters its gradient: three full buffers of its float32 parameters on the path, 12 bytes per
    parameter of the runner's own model. A step 2 ms above the prediction (the per-op in-step term already in it)
    gives 2 ms over those bytes, and only FSDP2's collectives take it."""
    import dataclasses

    from parbench import workloads
    from parbench.sim.calibrate import fit_collective_step_overhead, step_probe_config

    c = dataclasses.replace(_bare_cpu(), collectives={k: {2: (1e-4, 1e-9)} for k in ("all_gather", "reduce_scatter")},
                            collective_step_overhead_s={2: 5e-4})
    term = "fsdp_step_byte_overhead_s"
    cfg = step_probe_config(2, term)
    assert (cfg.strategy.value, cfg.workload.name, cfg.workload.hidden) == ("fsdp", "mlp", 1024)
    params = sum(p.numel() for p in workloads.make(cfg.workload, 0).build(0).parameters())
    base = fit_collective_step_overhead(c, cfg, 0.0, term)["predicted_s"]
    fit = fit_collective_step_overhead(c, cfg, base + 2e-3, term)
    assert fit["collectives_on_path"] == pytest.approx(3 * 4 * params) and fit["alpha"] == pytest.approx(2e-3 / (12 * params))


def test_plain_and_traced_pairs_its_windows_so_a_slow_spell_is_not_read_as_tracing_cost():
    """A call that sleeps 20 ms, then 40 ms from its 9th on, as if the machine had halved its speed part way
    through. One call a window: a warm-up, a traced warm-up, then 7 pairs of a plain and a traced window (16 calls),
    so the pairs after the change are both slow and traced reads about as long as plain. Timed as three blocks
    (plain, traced, plain), the traced block and the plain one after it fall after the change: traced read 1.35x
    plain when tried, all of it the machine's."""
    import time

    from parbench.metrics.comm import CommMeter
    from parbench.sim.calibrate import plain_and_traced

    calls = []

    def call() -> None:
        calls.append(None)
        time.sleep(0.040 if len(calls) >= 9 else 0.020)

    plain, traced, _ = plain_and_traced(call, 7, CommMeter(rank=0), window_s=0.0)
    assert len(calls) == 16
    assert traced / plain == pytest.approx(1.0, abs=0.15)


def test_tracing_cost_is_measured_per_operator_on_the_reference_steps_and_reported():
    """Each reference step's two parts run plain and traced (torch.profiler around, the comm meter's timing mode
    in); the cost per operator is the added seconds over the operators the simulator counts, summed over steps."""
    from parbench.commands.calibrate import report_lines
    from parbench.config import WorkloadConfig
    from parbench.sim.calibrate import (
        REFERENCE_STEPS,
        TRACING_LARGE_STEPS,
        fit_tracing,
        measure_tracing,
        reference_label,
    )
    from parbench.sim.model import model_spec
    from parbench.sim.timing import training_ops

    training, optimizer, between, share, rows = measure_tracing(reps=1)
    steps = REFERENCE_STEPS + TRACING_LARGE_STEPS
    assert [r["step"] for r in rows] == ([reference_label(n, s) for n, s, _ in REFERENCE_STEPS]
                                         + [f"{reference_label(n, s)} batch {b}" for n, s, b in TRACING_LARGE_STEPS])
    assert [r["training_ops"] for r in rows] == [training_ops(model_spec(WorkloadConfig(name=n, **s))) for n, s, _ in steps]
    assert rows[0]["optimizer_ops"] == 4 * 2.5  # the default mlp's SGD: 2 Linears' weights and biases
    assert all("optimizer_ops" not in r for r in rows if r["large"])  # the optimizer does not grow with the batch
    reference = [r for r in rows if not r["large"]]
    added = sum(r["optimizer_traced_s"] - r["optimizer_plain_s"] for r in reference)
    assert optimizer == pytest.approx(added / sum(r["optimizer_ops"] for r in reference))
    assert (training, share) == fit_tracing(rows)
    for per_op in (training, optimizer):
        # recording and intercepting an operator costs microseconds; the fit clamps it at 0 on a machine whose
        # noise times one pass of the traced steps no slower than the plain ones (seen once in a full run)
        assert 0 <= per_op < 1e-3
    assert 0 <= share < 1
    # between operators: the traced forward + backward's time outside its recorded operators, per operator counted
    assert between == pytest.approx(sum(r["training_between_s"] for r in rows) / sum(r["training_ops"] for r in rows))
    assert all(0 < r["training_between_s"] < r["training_traced_s"] for r in rows)
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "step_scale": {"alpha": 1.0},
                       "tracing_op_overhead_s": {"alpha": 1.6e-5, "optimizer": 8e-6, "between": 6e-6, "work_share": 0.05,
                                                 "rows": [
                           {"step": "mlp", "training_s_per_op": 3.3e-5, "optimizer_s_per_op": 1.8e-5},
                           {"step": "transformer", "training_s_per_op": 1.4e-5, "optimizer_s_per_op": 7.5e-6},
                           {"step": "transformer batch 32", "training_s_per_op": 4.4e-5}]}}}
    assert ("tracing (the breakdown's traced steps), us added per training / optimizer op: mlp 33 / 18, transformer "
            "14 / 8, transformer batch 32 44 -> training 16.0 us per op and 5.0% of the operators' own work (the "
            "reference steps' and the large steps' pooled equations); optimizer 8.0 us (seconds added over ops "
            "counted, all steps); between training ops (the breakdown's other) 6.0 us per op") in report_lines(profile)
    # a large step traced faster than plain (the machine drifted): no share, and the report says so
    tracing = profile["fit"]["tracing_op_overhead_s"]
    tracing.update(alpha=2.24e-5, work_share=0.0)
    tracing["rows"][2].update(large=True, training_plain_s=0.4172, training_traced_s=0.3987)
    assert ("-> training 22.4 us per op, the reference steps' alone (the large steps' -18.5 ms traced gave no share "
            "of the work between 0 and 1: the machine's drift); optimizer") in "\n".join(report_lines(profile))


def test_the_tracing_fit_splits_a_cost_per_operator_from_a_share_of_the_work():
    """Made-up rows whose answer is known: tracing adds 15 us per operator and 5% of the plain time. Two small
    reference steps (500 operators, 10 and 20 ms plain) and one large (500 operators, 200 ms): 7.5 ms per 500
    operators and 5% of the plain time each. Without the large step all of it is per operator; a share that
    comes out at 1 or more (tracing cannot double the work), or below 0 (the large step traced faster than plain:
    the machine drifted), falls back likewise, to the small steps alone."""
    from parbench.sim.calibrate import fit_tracing

    def row(plain: float, large: bool = False) -> dict:
        return {"training_ops": 500, "training_plain_s": plain, "training_traced_s": plain + 500 * 15e-6 + 0.05 * plain,
                "large": large}

    rows = [row(0.010), row(0.020), row(0.200, large=True)]
    per_op, share = fit_tracing(rows)
    assert per_op == pytest.approx(15e-6) and share == pytest.approx(0.05)
    added = sum(r["training_traced_s"] - r["training_plain_s"] for r in rows[:2])
    assert fit_tracing(rows[:2]) == (pytest.approx(added / 1000), 0.0)
    rows[2]["training_traced_s"] = 0.200 * 2.5  # the large step 2.5x traced: a share above 1, unphysical
    assert fit_tracing(rows) == (pytest.approx(added / 1000), 0.0)  # the reference steps' cost per operator
    rows[2]["training_traced_s"] = 0.200 * 0.956  # traced 4.4% faster than plain: the machine drifted
    assert fit_tracing(rows) == (pytest.approx(added / 1000), 0.0)  # not pulled down by the drift (-8.8 ms)


def test_the_tensor_parallel_overhead_share_is_where_the_measured_wait_lies():
    """The probe's traced exposed communication lies between the prediction with the whole in-step overhead waited
    (share 0) and with none of it (share 1): the share computed is how far from the first it lies, by hand
    (1 - (measured - none) / (all - none)); clamped at both ends; the report names it per group size."""
    from dataclasses import replace

    from parbench.commands.calibrate import report_lines
    from parbench.config import RunConfig, Strategy, WorkloadConfig
    from parbench.sim.calibrate import fit_tp_compute_share

    cfg = RunConfig(strategy=Strategy.TP, world_size=2, global_batch_size=32,
                    workload=WorkloadConfig(name="transformer", layers=4, hidden=128, heads=4, seq_len=64, vocab_size=512))
    c = replace(PRESETS["a100-80gb"], name="cpu", cores=2, collectives={"all_reduce": {2: (1e-4, 1e-9)}},
                tp_step_overhead_s={2: 1e-3})
    ends = fit_tp_compute_share(c, cfg, 0.0)
    waited, none = ends["predicted_comm_s_all_waited"], ends["predicted_comm_s_none_waited"]
    assert waited - none == pytest.approx(24e-3, rel=1e-6)  # 24 all-reduces x 1 ms, the overhead of the step
    assert ends["alpha"] == 1.0  # nothing waited: all of it computed
    assert fit_tp_compute_share(c, cfg, none + 0.25 * (waited - none))["alpha"] == pytest.approx(0.75)
    assert fit_tp_compute_share(c, cfg, waited * 2)["alpha"] == 0.0
    assert fit_tp_compute_share(replace(c, tp_step_overhead_s={2: 0.0}), cfg, none)["alpha"] == 0.0
    profile = {"cluster": {**cluster_to_dict(PRESETS["a100-80gb"]), "compute_slowdown": {}},
               "fit": {"framework_op_overhead_s": {"alpha": 2e-6}, "step_scale": {"alpha": 1.0},
                       "tp_step_compute_share@2": {"alpha": 0.611, "measured_comm_s": 0.081,
                                                   "predicted_comm_s_all_waited": 0.1053,
                                                   "predicted_comm_s_none_waited": 0.0655}}}
    assert ("of that tensor-parallel overhead, the share the rank computes rather than waits (the probe's traced "
            "exposed communication): 2 ranks 61% (81.0 ms measured, 105.3 if all waited, 65.5 if none)") \
        in report_lines(profile)


THREADED_2 = {"peak_flops": 6e10, "gemm_overhead_s": 2e-5, "op_overhead_s": 4e-6, "memory_bandwidth_bytes_per_s": 4e10,
              "stream_bandwidth_bytes_per_s": 2.4e10, "cache_bytes": 2.0 * 2**20, "beyond_cache_bandwidth_bytes_per_s": 3e10,
              "transcendental_s_per_element": 1e-9}
"""Figures a 2-core host's profile could hold for one rank of two threads (about twice one thread's)."""


def _threaded_profile():
    from dataclasses import replace

    return replace(PRESETS["a100-80gb"], name="cpu-2", cores=2, peak_flops=3e10, gemm_overhead_s=1e-5,
                   compute_slowdown={1: 1.0, 2: 1.1, 4: 2.3}, threaded={2: THREADED_2})


def test_a_rank_of_two_threads_computes_at_the_rates_measured_with_two():
    """``with_threads(2)`` takes every figure measured at two threads and nothing else; a thread count never measured
    is refused naming the ones that were; a profile's rates per thread count survive its file (JSON keys are
    strings) and a wrong one is named."""
    import json
    from dataclasses import fields, replace

    c = _threaded_profile()
    two = c.with_threads(2)
    assert two.threads == 2 and c.with_threads(1) is c
    for f in fields(c):
        want = THREADED_2.get(f.name, getattr(c, f.name)) if f.name != "threads" else 2
        assert getattr(two, f.name) == want, f.name
    assert isinstance(two.cache_bytes, int) and two.cache_bytes == 2 * 2**20
    with pytest.raises(ValueError, match="measured its rates at 1 or 2 threads per rank, not 4"):
        c.with_threads(4)
    assert cluster_from_dict(json.loads(json.dumps(cluster_to_dict(c)))) == c
    for bad in ({1: THREADED_2}, {2: {**THREADED_2, "peak_flops": 0.0}}, {2: {"cores": 4.0}},
                {2: {**THREADED_2, "op_overhead_s": math.inf}}):
        with pytest.raises(ValueError, match="must map a thread count >= 2"):
            replace(c, threaded=bad)
    for bad in ({"two": THREADED_2}, {"2": {**THREADED_2, "op_overhead_s": math.inf}}):
        with pytest.raises(ValueError, match="threaded=.* must be an object of thread counts"):
            cluster_from_dict({**cluster_to_dict(c), "threaded": bad})


def test_flash_attention_at_two_threads_runs_at_its_own_measured_share():
    """A rank of two threads whose attention probe kept one thread's time (its share of the doubled GEMM peak
    halved) spends on the check decoder's attention core what one thread spends, while its GEMMs take half as
    long; a profile measured before the attention probe ran at threads keeps one thread's share (half the time).
    Memory fast and overheads 0 here, so that the products' arithmetic alone sets their time."""
    from dataclasses import replace

    from parbench.config import RunConfig, Strategy, WorkloadConfig
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.timing import chunk_times_s

    cfg = RunConfig(strategy=Strategy.SINGLE, world_size=1, global_batch_size=32,
                    workload=WorkloadConfig(name="transformer", layers=4, hidden=128, heads=4, seq_len=64, vocab_size=512))
    spec, layout = model_spec(cfg.workload), layout_from_run(cfg)
    fast = {"memory_bandwidth_bytes_per_s": 1e15, "gemm_overhead_s": 0.0}
    c = replace(_threaded_profile(), **fast, weight_read_bandwidth_bytes_per_s=0.0, peak_flops_tf32=0.0,
                peak_flops_fp32=0.0)  # a CPU's one float32 rate, as a calibrated profile holds it
    rates = {**THREADED_2, **fast}

    def times(cluster):
        return chunk_times_s(cluster, spec, layout, spec.units, first=True, last=True)

    one = times(c)
    two = times(replace(c, threaded={2: {**rates, "attention_efficiency": c.attention_efficiency / 2}}).with_threads(2))
    older = times(replace(c, threaded={2: rates}).with_threads(2))
    assert one.attention > 0 and two.attention == pytest.approx(one.attention)
    assert older.attention == pytest.approx(one.attention / 2)
    assert two.gemm - two.attention == pytest.approx((one.gemm - one.attention) / 2)


def test_threads_are_measured_up_to_the_cores():
    """1 thread is the profile's own figures; then each power of two below the cores, and the cores."""
    from parbench.sim.calibrate import thread_counts

    assert thread_counts(1) == [] and thread_counts(2) == [2] and thread_counts(4) == [2, 4]
    assert thread_counts(12) == [2, 4, 8, 12] and thread_counts(16) == [2, 4, 8, 16]


def test_the_threaded_probes_run_at_each_thread_count_this_host_has():
    """The GEMM, add, past-the-caches and exp/erf probes again with 2 threads up to the cores, each figure positive
    and a fit reported per thread count (on a 1-CPU host there is nothing to measure)."""
    from parbench.results import host_cpus
    from parbench.sim.calibrate import _sizes, measure_threaded, thread_counts
    from parbench.sim.hardware import THREADED_FIELDS

    sizes = {**_sizes(True), "stream": [2**20], "gemm": [32, 64, 128, 256]}
    threaded, fits = measure_threaded(sizes, 2, min(host_cpus(), 2))
    assert sorted(threaded) == thread_counts(min(host_cpus(), 2))
    for t, rates in threaded.items():
        assert set(rates) == set(THREADED_FIELDS)
        assert all(math.isfinite(v) and v >= 0 for v in rates.values()) and rates["peak_flops"] > 0
        assert {f"gemm@{t} threads", f"elementwise@{t} threads"} <= set(fits)
    import torch

    assert torch.get_num_threads() == 1  # the probes leave the process as the other probes expect it


def test_the_report_lists_each_thread_count_s_rates_beside_one_thread_s():
    from parbench.commands.calibrate import report_lines
    from parbench.sim.calibrate import checked_fit

    xs = [2.0**k for k in range(8, 20)]
    _, good = checked_fit(xs, [3e-5 + x / 2e9 for x in xs])
    c = cluster_to_dict(_threaded_profile())
    c["memory_bandwidth_bytes_per_s"], c["stream_bandwidth_bytes_per_s"] = 2e10, 1.6e10
    profile = {"cluster": c, "fit": {"gemm": good, "elementwise": good, "gemm@2 threads": good,
                                     "elementwise@2 threads": good, "framework_op_overhead_s": {"alpha": 2e-6},
                                     "step_scale": {"alpha": 1.0}},
               "meta": {}}
    lines = report_lines(profile)
    assert ("one rank of 2 intra-op threads: GEMMs x2.00 the one-thread rate, an add x2.00, past the caches x1.50, "
            "exp/erf 1.00 ns per element beyond memory") in lines
    # flash attention measured at 2 threads: half the share of a peak twice as high, as fast as one thread
    c["threaded"]["2"]["attention_efficiency"] = c["attention_efficiency"] / 2
    assert ("one rank of 2 intra-op threads: GEMMs x2.00 the one-thread rate, an add x2.00, past the caches x1.50, "
            "flash attention x1.00, exp/erf 1.00 ns per element beyond memory") in report_lines(profile)
    row = next(ln for ln in lines if ln.startswith("elementwise@2 threads"))
    assert "op overhead" in row and " us " in row  # the add's parameters, not a link's
    assert lines[0].index("parameter") == row.index("op overhead") == 22
