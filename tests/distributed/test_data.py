"""The input pipeline in real processes (gloo, CPU): every rank makes only its own slice, the
making of the input is timed on its own and kept out of the step unless asked, and DataLoader runs
match the single-process reference like synthetic ones."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from parbench.config import RunConfig
from tests.references import run

PLUGIN = Path(__file__).parents[1] / "workloads" / "plugins" / "recording_plugin.py"
GBS, WARMUP, STEPS = 16, 2, 2


def _plugin(tmp_path: Path, factory: str) -> tuple[str, Path]:
    """A private copy of the recording plugin (its own call log): (workload name, log path)."""
    path = tmp_path / "recording_plugin.py"
    shutil.copy(PLUGIN, path)
    return f"{path}:{factory}", path.with_suffix(".calls.jsonl")


def _calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _run(workload: str, **kw) -> dict:
    cfg = RunConfig(workload={"name": workload}, global_batch_size=GBS, warmup_steps=WARMUP, steps=STEPS, **kw)
    rec = run(cfg, results_dir=None)
    assert rec["status"] == "ok", rec["error"]
    return rec


def _samples_per_rank_and_step(log: Path, world_size: int = 2) -> dict[int, dict[int, list[tuple[int, int]]]]:
    """rank -> step -> the (lo, hi) slices that rank made for that step: training calls of the run's
    ranks only (the parent's checks, the single-process reference run and the receive buffers'
    1-sample shape probes are other processes or other batch sizes)."""
    out: dict[int, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for c in _calls(log):
        if c["world_size"] == world_size and c["size"] == GBS:
            out[c["rank"]][c["step"]].append((c["lo"], c["hi"]))
    return out


def test_each_rank_makes_only_its_slice_and_data_time_stays_out_of_the_step(tmp_path):
    """ddp x2: rank r makes samples 8r..8r+7 of every step, once; each making sleeps 0.25 s, and
    the step time does not contain it (time_data_s does)."""
    name, log = _plugin(tmp_path, "make_slow")
    rec = _run(name, strategy="ddp", world_size=2)
    made = _samples_per_rank_and_step(log)
    for rank in (0, 1):
        steps = sorted(made[rank])  # warm-up, probe, timed, compute-only and traced steps
        assert steps == list(range(len(steps))) and len(steps) >= len(rec["losses"]), (rank, steps)
        assert all(made[rank][s] == [(8 * rank, 8 * rank + 8)] for s in steps), (rank, dict(made[rank]))
    assert rec["data_in_step"] is False
    assert rec["time_data_s"] >= 0.25 and all(r["time_data_s"] >= 0.25 for r in rec["per_rank"])
    assert [e["time_data_s"] >= 0.25 for e in rec["breakdown_per_rank"]] == [True, True]
    assert max(rec["step_times_s"]) < 0.25  # a tiny mlp step: the 0.25 s of making its input is not in it
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5


def test_data_in_step_puts_the_data_time_back_into_the_step(tmp_path):
    name, _ = _plugin(tmp_path, "make_slow")
    rec = _run(name, strategy="ddp", world_size=2, data_in_step=True)
    assert rec["data_in_step"] is True and rec["config"]["data_in_step"] is True
    assert rec["time_data_s"] >= 0.25 and min(rec["step_times_s"]) >= 0.25


def test_rank0_mode_reads_on_one_rank_and_scatters_inside_the_step(tmp_path):
    name, log = _plugin(tmp_path, "make")
    rec = _run(name, strategy="ddp", world_size=2, data_mode="rank0")
    made = _samples_per_rank_and_step(log)
    assert set(made) == {0}  # rank 1 reads nothing: it receives its half
    assert all(slices == [(0, GBS)] for slices in made[0].values())
    assert rec["comm_data_bytes_per_step"] > 0 and rec["loss_max_abs_diff_vs_reference"] < 1e-5


def test_digits_through_a_dataloader_under_ddp_match_single(tmp_path):
    """scikit-learn's digits, DataLoader + DistributedSampler with a worker process per rank:
    ddp x2 follows the single-process reference within 1e-5 over every step."""
    pytest.importorskip("sklearn", reason="scikit-learn (test extra) provides the digits dataset")
    rec = run(RunConfig(strategy="ddp", world_size=2, workload={"name": "mlp", "dataset": "digits"},
                        global_batch_size=64, steps=3, loader_workers=1), results_dir=None)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5 and rec["time_data_s"] > 0


@pytest.mark.parametrize("layout", [
    pytest.param(dict(strategy="pipeline", world_size=2, micro_batches=2, data_mode="rank0"), id="pipeline-rank0"),
    pytest.param(dict(strategy="zero2", world_size=2), id="zero2", marks=pytest.mark.slow),
    pytest.param(dict(strategy="ps", world_size=3, servers=1), id="ps-2-workers", marks=pytest.mark.slow),
    pytest.param(dict(strategy="hybrid", world_size=4, dp=2, tp=1, pp=2, micro_batches=2), id="hybrid-dp2-pp2",
                 marks=pytest.mark.slow),
])
def test_a_plugin_dataset_matches_single_and_is_read_once_per_epoch(tmp_path, layout):
    """A plugin's own Dataset (200 samples, global batch 16: 12 steps an epoch): the strategies
    follow the reference, and no rank reads a sample twice within the run's first epoch."""
    name, log = _plugin(tmp_path, "make_dataset")
    rec = _run(name, **layout)
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    reads = defaultdict(list)
    for c in _calls(log):
        if c["world_size"] == layout["world_size"]:
            reads[c["pid"]].append(c["index"])
    assert reads and all(len(v) == len(set(v)) for v in reads.values())
