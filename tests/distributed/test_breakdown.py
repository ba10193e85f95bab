"""The step-time breakdown against theory, in real processes (gloo, CPU).

Pipeline runs use ``sleepy_workload``: every unit sleeps a known time per micro-batch (forward t,
backward 2t), so four ranks "compute" at once on two cores and the schedule has its textbook
shape. Tolerances (absolute, on bubble fractions): 0.08. Why that much: each micro-batch also
costs the schedule's Python, two tiny transfers and the sleeps' wake-up latency, none of which the
formula counts; on a loaded 2-core machine the wake-up latency alone reaches several ms per event
against a 20 ms forward. The checks still separate the schedules: GPipe's 3/7 = 0.43 and
interleaved's 3/11 = 0.27 are two tolerances apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from parbench.config import RunConfig
from parbench.launch import References, run
from parbench.metrics.breakdown import TERMS
from parbench.metrics.categories import CATEGORIES
from tests.unit.test_breakdown import assert_valid_chrome_trace

SLEEPY = str(Path(__file__).with_name("sleepy_workload.py")) + ":make"
FRACTION_TOLERANCE = 0.08


def assert_breakdown(rec: dict, results_dir: Path) -> None:
    """What every ok record must satisfy: the seven terms sum to the traced step within 2% on every
    rank; a category no rank sent a byte of costs no time; the trace file is valid."""
    assert rec["traced_steps"] >= 1
    entries = rec["breakdown_per_rank"]
    assert [e["rank"] for e in entries] == list(range(rec["world_size"]))
    for entry in entries:
        parts = sum(entry[t] for t in TERMS)
        assert abs(parts - entry["traced_step_time_s"]) <= 0.02 * entry["traced_step_time_s"], entry
        assert all(entry[t] >= 0 for t in TERMS), entry
    for c in CATEGORIES:
        if all(r[f"comm_{c}_bytes_per_step"] == 0 for r in rec["per_rank"]):
            assert all(e[f"time_comm_exposed_{c}_s"] == 0.0 for e in entries), (c, entries)
    busiest = entries[rec["breakdown_rank"]]
    assert all(rec[t] == busiest[t] for t in TERMS)
    data = json.loads((results_dir / rec["trace_file"]).read_text())
    assert_valid_chrome_trace(data, ranks=rec["world_size"])
    assert (results_dir / rec["trace_file"]).stat().st_size < 5 * 2**20


def _run(results_dir: Path, **kw) -> dict:
    kw.setdefault("steps", 1)
    cfg = RunConfig(**kw)
    no_reference = References(cache={cfg.reference().point_key(): ([], None)})  # losses are checked elsewhere
    rec = run(cfg, results_dir=results_dir, references=no_reference)
    assert rec["status"] == "ok", rec["error"]
    assert_breakdown(rec, results_dir)
    return rec


def test_single_has_no_communication_and_no_bubble(tmp_path):
    rec = _run(tmp_path, strategy="single", world_size=1, workload={"name": "mlp", "hidden": 64}, steps=2)
    assert rec["time_bubble_s"] == 0.0
    assert rec["time_comm_exposed_s"] == 0.0
    assert rec["time_compute_s"] > 0 and rec["time_optimizer_s"] > 0


def test_ddp_exposed_comm_is_bounded_by_the_no_sync_step(tmp_path):
    """DDP over sleepy units 2048 wide (64 MiB of gradients). The no_sync step (measured in the same run) skips
    both the all-reduce and DDP's copies of the gradients into its buckets and back; the trace books those
    copies as compute (aten::copy_), its exposed communication as the waits on the all-reduce. So the traced
    step without its exposed communication is at least the no_sync step, and the exposed communication at
    most the timed step minus the no_sync step, each within the noise: the spread (p90 - p10) of the run's
    timed steps, and at least a tenth of the step (sleeps wake late on a loaded machine). Measured on the
    shared 2-core machine: traced exposed 9-23 ms against 33-35 ms timed - no_sync at 64 MiB, 44-70 ms
    against 133-174 ms at 256 MiB, the rest of the difference the copies (0.2-0.4 ns per byte). Timed and
    no_sync medians come from different moments, so up to five fresh runs are measured before failing, and
    every attempt is reported."""
    attempts = []
    for attempt in range(5):
        rec = _run(tmp_path / str(attempt), strategy="ddp", world_size=2, workload={"name": SLEEPY, "hidden": 2048},
                   steps=5, global_batch_size=16)
        assert rec["time_comm_exposed_parameter_s"] > 0 and rec["time_comm_exposed_intermediate_s"] == 0.0
        noise = max(rec["step_time_s_p90"] - rec["step_time_s_p10"], 0.1 * rec["step_time_s_median"])
        without_comm = rec["traced_step_time_s"] - rec["time_comm_exposed_s"] - rec["time_bubble_s"]
        compute_short = rec["compute_time_s_median"] - without_comm  # > noise: compute booked as communication
        comm_over = rec["time_comm_exposed_parameter_s"] - rec["exposed_comm_time_s"]  # > noise: likewise
        attempts.append({"noise_s": noise, "traced_without_comm_s": without_comm,
                         "no_sync_median_s": rec["compute_time_s_median"],
                         "traced_exposed_s": rec["time_comm_exposed_parameter_s"],
                         "timed_minus_no_sync_s": rec["exposed_comm_time_s"]})
        if max(compute_short, comm_over) <= noise:
            return
    pytest.fail(f"outside the noise in 5 runs: {attempts}")


def _pipeline(results_dir: Path, schedule: str, *, p: int = 4, m: int = 4, v: int = 1) -> dict:
    return _run(results_dir, strategy="pipeline", world_size=p, micro_batches=m, schedule=schedule,
                virtual_stages=v, global_batch_size=4 * m, workload={"name": SLEEPY, "layers": p * v})


def gpipe_bubble(p: int, m: int, v: int = 1) -> float:
    """Idle share of a balanced pipeline: (p-1)/(v m + p-1) (GPipe: Huang et al. 2019, v=1;
    interleaved 1F1B with v chunks per rank: Narayanan et al. SC 2021 divide the bubble by v)."""
    return (p - 1) / (v * m + p - 1)


def test_gpipe_bubble_fraction_follows_the_formula(tmp_path):
    rec = _pipeline(tmp_path, "gpipe")
    assert abs(rec["bubble_fraction"] - gpipe_bubble(4, 4)) <= FRACTION_TOLERANCE, rec["breakdown_per_rank"]
    assert rec["time_comm_exposed_parameter_s"] == 0.0 and rec["time_comm_exposed_data_s"] == 0.0


@pytest.mark.slow
def test_1f1b_has_gpipes_bubble_and_interleaving_shrinks_it(tmp_path):
    gpipe = _pipeline(tmp_path, "gpipe")["bubble_fraction"]
    one_f_one_b = _pipeline(tmp_path, "1f1b")["bubble_fraction"]
    interleaved = _pipeline(tmp_path, "interleaved1f1b", v=2)["bubble_fraction"]
    assert abs(one_f_one_b - gpipe) <= FRACTION_TOLERANCE, (one_f_one_b, gpipe)
    assert abs(interleaved - gpipe_bubble(4, 4, v=2)) <= FRACTION_TOLERANCE, interleaved
    assert interleaved < gpipe and interleaved < one_f_one_b


def test_cli_run_writes_the_trace_and_parbench_trace_finds_it(tmp_path, capsys):
    from parbench.cli import main

    assert main(["run", "--strategy", "single", "--world-size", "1", "--workload", "mlp", "--hidden", "32",
                 "--steps", "1", "--results-dir", str(tmp_path)]) == 0
    run_id = next((tmp_path / "runs").glob("*.json")).stem
    assert (tmp_path / "traces" / f"{run_id}.json").is_file()
    capsys.readouterr()
    assert main(["trace", run_id[:8], "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"traces/{run_id}.json" in out and all(t in out for t in TERMS)
    assert main(["trace", "nosuchrun", "--results-dir", str(tmp_path)]) == 2
    assert main(["results", "--breakdown", "--results-dir", str(tmp_path)]) == 0
    assert run_id[:8] in capsys.readouterr().out


def test_a_trace_that_cannot_be_written_never_costs_the_record(tmp_path, monkeypatch):
    import parbench.trace
    from parbench.launch import save

    def full(*_, **__):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parbench.trace, "write_trace", full)
    record = {"run_id": "abc", "status": "ok"}
    with pytest.warns(UserWarning, match="trace of run abc not written"):
        save(tmp_path, record, [SimpleNamespace(role="single", trace={})])  # a rank result's two fields it reads
    assert json.loads((tmp_path / "runs" / "abc.json").read_text())["trace_file"] is None


LATE_S = 0.3
"""How late rank 1 joins the collective that rank 0 waits on in ``_late_peer_rank``."""


def _late_peer_rank(kind: str, info) -> dict:
    """One traced step in which rank 1 joins a collective LATE_S after rank 0, whose wait runs inside an
    operator torch.profiler records: ``functional``, DTensor's functional all-reduce whose result the next
    ``aten::add`` reads (its ``wait_tensor`` inside that add); ``node``, a ``Work.wait`` inside an autograd
    node (as FSDP2 waits for its reduce-scatter). Returns this rank's trace."""
    import time

    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_reduce

    from parbench.metrics.comm import CommMeter
    from parbench.metrics.tracing import traced_steps

    class ReducedGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            dist.all_reduce(grad, async_op=True).wait()
            return grad

    def step(_: int) -> None:
        if info.rank == 1:
            time.sleep(LATE_S)
        if kind == "functional":
            all_reduce(torch.ones(4), "sum", dist.group.WORLD) + 1
        else:
            ReducedGradient.apply(torch.ones(4, requires_grad=True)).sum().backward()

    trace = traced_steps(step=step, meter=CommMeter(rank=info.rank), device=info.device, start=0, n=1,
                         world_size=info.world_size)
    return {"rank": info.rank, **trace}


@pytest.mark.parametrize("kind", ["functional", "node"])
def test_a_wait_inside_an_operator_is_communication_not_compute(kind):
    """Rank 0 waits LATE_S for rank 1 inside a recorded operator: that wait is exposed communication, and
    rank 0's compute (a few small operators) stays far below it. Booking every operator's whole interval
    as compute, as the breakdown once did, put the whole wait in compute."""
    from parbench.distributed import spawn
    from parbench.metrics.breakdown import analyse, totals

    outcome = spawn(2, _late_peer_rank, kind, timeout_s=120)
    assert outcome.status == "ok", outcome.error
    result = analyse(outcome.results)
    rank0 = totals(result["spans"][0][0])
    exposed = sum(rank0[f"time_comm_exposed_{c}_s"] for c in CATEGORIES)
    assert exposed >= 0.8 * LATE_S, rank0
    assert rank0["time_compute_s"] < 0.2 * LATE_S, rank0


IDLE_S = 0.3
"""How long ``_idle_after_functional_rank`` idles between operators after its all-reduce completed."""


def _idle_after_functional_rank(_, info) -> dict:
    """One traced step: a functional all-reduce of a tensor that needs its gradient (as a tensor-parallel
    Linear's output all-reduce is in training), its result read by an add, then IDLE_S of Python between
    operators. Under autograd the all-reduce's ``wait_tensor`` runs where the comm meter's dispatch mode does
    not see it; torch.profiler does."""
    import time

    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_reduce

    from parbench.metrics.comm import CommMeter
    from parbench.metrics.tracing import traced_steps

    def step(_: int) -> None:
        x = torch.ones(64, 64, requires_grad=True)
        y = all_reduce(x * 2, "sum", dist.group.WORLD) + 1
        time.sleep(IDLE_S)
        y.sum().backward()

    trace = traced_steps(step=step, meter=CommMeter(rank=info.rank), device=info.device, start=0, n=1,
                         world_size=info.world_size)
    return {"rank": info.rank, **trace}


def test_a_functional_collective_completes_at_its_wait_even_where_the_dispatch_mode_misses_it():
    """The idle stretch after the all-reduce completed is other, not exposed communication. Seen only by the
    dispatch mode, that all-reduce was never completed, so the breakdown kept it in flight to the step's end
    and booked every gap after it as communication (on the simulator check's 2-rank tensor-parallel decoder,
    its 8 forward all-reduces each read 156-226 ms in flight)."""
    from parbench.distributed import spawn
    from parbench.metrics.breakdown import analyse, totals

    outcome = spawn(2, _idle_after_functional_rank, None, timeout_s=120)
    assert outcome.status == "ok", outcome.error
    result = analyse(outcome.results)
    for rank in (0, 1):
        t = totals(result["spans"][rank][0])
        assert t["time_other_s"] >= 0.8 * IDLE_S, t
        assert sum(t[f"time_comm_exposed_{c}_s"] for c in CATEGORIES) < 0.2 * IDLE_S, t
