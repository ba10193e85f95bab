"""The core runner in real processes (gloo, CPU): losses vs the single-process reference, exact
communication bytes, OS-measured bytes, and failures that end cleanly."""

from __future__ import annotations

import os

import pytest

from parbench.config import RunConfig
from tests.references import run
from parbench.workloads import make
from tests.distributed.test_breakdown import assert_breakdown
from tests.ranks import RankWatch

MLP = {"name": "mlp"}
GPT = {"name": "transformer"}


def _run(tmp_path, **kw) -> dict:
    kw.setdefault("steps", 3)
    return run(RunConfig(**kw), results_dir=tmp_path)


def param_bytes(workload: dict) -> int:
    from parbench.config import WorkloadConfig

    model = make(WorkloadConfig(**workload), 0).build(0)
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.fixture(scope="module")
def res_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("results")


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_single_and_sends_exact_ring_allreduce_bytes(res_dir, n):
    rec = _run(res_dir, strategy="ddp", world_size=n, workload=MLP, global_batch_size=64)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    psi = param_bytes(MLP)
    assert psi == (784 * 512 + 512 + 512 * 10 + 10) * 4
    assert rec["comm_parameter_bytes_per_step"] == 2 * (n - 1) * psi // n  # one bucket: one ring all-reduce
    assert rec["comm_data_bytes_per_step"] == rec["comm_intermediate_bytes_per_step"] == 0
    assert rec["mem_param_bytes"] == rec["mem_grad_bytes"] == psi
    # what the OS saw each rank write over the timed steps agrees with the model within a few percent
    assert rec["os_write_bytes_per_step"] == pytest.approx(rec["comm_parameter_bytes_per_step"], rel=0.03)
    assert rec["exposed_comm_time_s"] is not None and len(rec["step_times_s"]) == 3
    # the host: its CPUs, and whether n single-threaded ranks outnumber them (on a 2-CPU machine: 4 do)
    assert rec["host_cpus"] == len(os.sched_getaffinity(0))
    assert rec["oversubscribed"] is (n > rec["host_cpus"])
    assert_breakdown(rec, res_dir)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_matches_single_and_sends_boundary_activations(res_dir, schedule):
    m, batch = 4, 32
    rec = _run(res_dir, strategy="pipeline", world_size=2, workload=GPT, micro_batches=m,
               schedule=schedule, global_batch_size=batch)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    boundary = (batch // m) * 32 * 64 * 4  # micro-batch x seq_len x hidden x fp32, per micro-batch
    ranks = {r["rank"]: r for r in rec["per_rank"]}
    assert ranks[0]["comm_intermediate_bytes_per_step"] == m * boundary  # activations forward
    assert ranks[1]["comm_intermediate_bytes_per_step"] == m * boundary  # their gradients backward
    assert rec["comm_parameter_bytes_per_step"] == rec["comm_data_bytes_per_step"] == 0
    assert rec["comm_ops"]["send/intermediate"]["count"] == m
    # each stage holds only its layers: the two stages together hold exactly the whole model
    assert ranks[0]["mem_param_bytes"] + ranks[1]["mem_param_bytes"] == param_bytes(GPT)
    assert_breakdown(rec, res_dir)


def test_pipeline_activations_follow_the_schedule(res_dir):
    """GPipe keeps every micro-batch's activations until the backward; 1F1B at most pp of them."""
    peaks = {}
    for schedule in ("gpipe", "1f1b"):
        rec = _run(res_dir, strategy="pipeline", world_size=2, workload=GPT, micro_batches=8,
                   schedule=schedule, global_batch_size=32, steps=1)
        peaks[schedule] = rec["per_rank"][0]["mem_activation_bytes"]
    assert peaks["1f1b"] < 0.5 * peaks["gpipe"]


def test_rank0_data_mode_counts_scatter_and_labels_as_data(res_dir):
    rec = _run(res_dir, strategy="ddp", world_size=4, workload=MLP, data_mode="rank0", global_batch_size=64)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    full = 64 * 784 * 4 + 64 * 8  # float32 images + int64 labels of the global batch
    assert rec["comm_data_bytes_per_step"] == 3 * (784 * 4 * 64) // 4 + 3 * (8 * 64) // 4
    assert rec["comm_data_bytes_per_step"] == 3 * full // 4
    pipe = _run(res_dir, strategy="pipeline", world_size=2, workload=MLP, data_mode="rank0",
                micro_batches=2, global_batch_size=64)
    assert pipe["comm_data_bytes_per_step"] == 64 * 8  # the labels travel to the last stage
    assert_breakdown(rec, res_dir)
    assert_breakdown(pipe, res_dir)


@pytest.mark.parametrize("fault, status, failed_rank, text", [
    ("1:raise:1", "failed", 1, "rank 1: RuntimeError: injected fault on rank 1 at step 1"),
    ("0:crash:1", "failed", 0, "rank 0 died with exit code -9 (SIGKILL)"),
])
def test_failing_or_hanging_rank_ends_the_run_cleanly(tmp_path, fault, status, failed_rank, text):
    """(A hanging rank: tests/distributed/test_faults.py, which also lists the listening sockets.)"""
    from parbench.results import load

    with RankWatch() as watch:
        rec = _run(tmp_path, strategy="ddp", world_size=2, inject_fault=fault, timeout_s=60)
    assert (rec["status"], rec["failed_rank"]) == (status, failed_rank)
    assert text in rec["error"]
    assert len(watch.seen) == 2 and watch.survivors(wait_s=5) == []  # both ranks were there; none is now
    frame = load(tmp_path)
    assert list(frame["status"]) == [status]


def test_a_rank_left_alive_is_caught(tmp_path, monkeypatch):
    """The check above has teeth: with the launcher's kill step switched off for rank 1, which hangs,
    RankWatch reports rank 1 alive after the run."""
    from parbench.distributed import launcher

    real = launcher.kill_all
    monkeypatch.setattr(launcher, "kill_all", lambda procs: real(procs[:1]))
    with RankWatch() as watch:
        rec = _run(tmp_path, strategy="ddp", world_size=2, inject_fault="1:hang:1", timeout_s=4,
                   workload={"name": "mlp", "hidden": 16})
    survivors = watch.survivors()
    try:
        assert rec["status"] == "timeout" and len(survivors) == 1
    finally:
        for p in survivors:
            p.kill()
