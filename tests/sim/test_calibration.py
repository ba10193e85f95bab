"""Calibration: the alpha-beta fit recovers known parameters from synthetic data, reports held-out error,
and the real micro-benchmarks produce positive times (gloo, real rank processes)."""

from __future__ import annotations

import math
import random

import pytest

from parbench.sim.fit import fit_alpha_beta, fit_with_holdout
from parbench.sim.hardware import cluster_from_dict, cluster_to_dict, PRESETS


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


def test_cluster_round_trips_through_plain_data():
    c = PRESETS["h100-sxm"]
    assert cluster_from_dict(cluster_to_dict(c)) == c
    with pytest.raises(ValueError, match="unknown cluster fields"):
        cluster_from_dict({**cluster_to_dict(c), "nvlink_gen": 4})


def test_real_collectives_and_gemm_are_measured():
    """Two sizes of two collectives over 2 real gloo ranks, and GEMMs in this process."""
    from parbench.sim.calibrate import measure_collectives, measure_gemm

    rows = measure_collectives(2, [1024, 65536], reps=2, kinds=("all_reduce", "send"))
    assert rows.pop("compute_s") > 0  # the per-rank compute probe, both ranks computing at once
    assert rows.pop("barrier_s") > 0
    assert set(rows) == {"all_reduce", "send"}
    assert all(t > 0 for kind in rows.values() for _, t in kind)
    flops, secs = measure_gemm([32, 64], reps=2)
    assert flops == [2.0 * 32**3, 2.0 * 64**3] and all(s > 0 and math.isfinite(s) for s in secs)


def test_step_scale_compares_a_real_reference_step_with_the_op_model():
    from dataclasses import replace

    from parbench.config import RunConfig, WorkloadConfig
    from parbench.sim import layout_from_run, model_spec, predict
    from parbench.sim.calibrate import REFERENCE_STEPS, step_scale

    c = PRESETS["a100-80gb"]
    scale, ratios = step_scale(c, reps=1)
    assert set(ratios) == {name for name, _ in REFERENCE_STEPS} and scale > 0
    cfg = RunConfig(workload=WorkloadConfig(name="mlp"))
    m, lay = model_spec(cfg.workload), layout_from_run(cfg)
    assert predict(m, lay, replace(c, step_scale=2.0)).compute_time_s == pytest.approx(2 * predict(m, lay, c).compute_time_s)
