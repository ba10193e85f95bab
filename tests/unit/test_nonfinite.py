"""Non-finite losses never pass as correct: the difference from the reference is NaN or inf, never
a finite number, and the record's status says the run diverged."""

from __future__ import annotations

import math

import pytest

from parbench.config import RunConfig
from parbench.record import build_record, first_non_finite, max_abs_diff
from parbench.rank_result import RankResult

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("a, b, expected", [
    ([1.0, 2.0], [1.0, 2.5], 0.5),
    ([2.34, NAN, NAN], [2.34, 1.0, 1.0], NAN),  # max() over these differences returns 0.0
    ([NAN, 1.0], [1.0, 1.0], NAN),
    ([1.0, INF], [1.0, 1.0], INF),
    ([1.0, INF], [1.0, INF], NAN),  # inf - inf
    ([1.0, 2.0], [1.0, NAN], NAN),  # a non-finite reference is never "equal" either
    ([1.0], None, None),
    ([1.0, 2.0], [1.0], None),
])
def test_max_abs_diff_propagates_non_finite(a, b, expected):
    got = max_abs_diff(a, b)
    if expected is None:
        assert got is None
    elif math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected
    assert max([0.0, NAN]) == 0.0  # the trap this guards against, as Python has it


def test_first_non_finite():
    assert first_non_finite([1.0, 2.0]) is None
    assert first_non_finite([1.0, INF, NAN]) == 1
    assert first_non_finite([NAN]) == 0


def _rank(losses):
    zero = {"data": 0, "parameter": 0, "intermediate": 0}
    return RankResult(rank=0, role="worker", step_times_s=[0.01, 0.02], compute_times_s=[], losses=losses,
                      comm_bytes_per_step=zero, comm_wire_bytes_per_step=0, comm_ops={}, os_write_bytes_per_step=0,
                      peak_rss_bytes=1, mem_param_bytes=1, mem_grad_bytes=1, mem_optim_bytes=1, mem_activation_bytes=1)


def test_a_record_with_a_nan_loss_is_diverged_not_ok():
    cfg = RunConfig(steps=2, workload={"name": "mlp", "hidden": 16})
    losses = [2.34, NAN, NAN, NAN, NAN]
    rec = build_record(cfg, [_rank(losses)], 1.0, reference_losses=[2.34, 2.2, 2.1, 2.0, 1.9])
    assert rec["status"] == "diverged"
    assert math.isnan(rec["loss_max_abs_diff_vs_reference"])
    assert rec["error"].startswith("loss became nan at step 1 of 5")
    ok = build_record(cfg, [_rank([2.34, 2.2, 2.1, 2.0, 1.9])], 1.0, reference_losses=[2.34, 2.2, 2.1, 2.0, 1.9])
    assert (ok["status"], ok["error"], ok["loss_max_abs_diff_vs_reference"]) == ("ok", None, 0.0)
