"""Faults from README's "What happens when things go wrong", in real processes (gloo, CPU): each
test shares one run across its assertions."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path

import psutil

from parbench.cli import main
from parbench.config import RunConfig
from tests.ranks import RankWatch

PLUGINS = Path(__file__).resolve().parents[1] / "workloads" / "plugins" / "bad_plugins.py"


def _records(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*.json"))]


def test_a_diverging_run_is_recorded_diverged(tmp_path, capsys):
    """A learning rate of 1e20 makes the mlp's loss NaN by the second step (finite lr, so accepted)."""
    results = tmp_path / "results"
    rc = main(["run", "--strategy", "ddp", "--world-size", "2", "--hidden", "16", "--steps", "2", "--lr", "1e20",
               "--results-dir", str(results)])
    assert rc == 1
    [rec] = _records(results)
    assert rec["status"] == "diverged"
    assert not math.isfinite(rec["loss_max_abs_diff_vs_reference"])  # NaN or inf, never a number
    bad = next(i for i, v in enumerate(rec["losses"]) if not math.isfinite(v))
    assert math.isfinite(rec["losses"][0]) and rec["error"].startswith(f"loss became {rec['losses'][bad]} at step {bad}")
    assert "diverged" in capsys.readouterr().out
    # the same path from the command line's testing aid: rank 1 poisons its parameters at step 2
    rc = main(["run", "--strategy", "ddp", "--world-size", "2", "--hidden", "16", "--steps", "1",
               "--inject-fault", "1:nan:2", "--results-dir", str(results)])
    assert rc == 1
    nan_rec = next(r for r in _records(results) if r["run_id"] != rec["run_id"])
    assert nan_rec["status"] == "diverged" and nan_rec["error"].startswith("loss became nan at step 2")


def test_a_hanging_workload_in_a_sweep_is_a_timeout_record(tmp_path, capsys):
    """The plugin passes the pre-spawn check (no gradients there) and hangs in its first training
    step: the sweep records a timeout within timeout + 10 s and ends (exit 1)."""
    timeout_s = 6
    path = tmp_path / "hang.toml"
    path.write_text(f'strategies = ["ddp"]\nworld_sizes = [2]\nsteps = 1\ntimeout_s = {timeout_s}\n'
                    f'global_batch_sizes = [16]\n[[workloads]]\nname = "{PLUGINS}:hangs_in_training"\n')
    results = tmp_path / "results"
    t0 = time.monotonic()
    assert main(["sweep", str(path), "--results-dir", str(results)]) == 1
    elapsed = time.monotonic() - t0
    [rec] = _records(results)
    assert rec["status"] == "timeout" and f"timed out after {timeout_s} s" in rec["error"]
    assert "every rank was outside torch.distributed, so the workload itself hangs" in rec["error"]
    assert "in forward at bad_plugins.py" in rec["error"]
    assert rec["wall_time_s"] <= timeout_s + 10
    assert elapsed <= timeout_s + 10 + 60  # + planning and the process server's start on a loaded machine


def _listening(pids: set[int]) -> dict[int, set[str]]:
    """pid -> the addresses its TCP sockets listen on."""
    out: dict[int, set[str]] = {}
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            out.setdefault(c.pid, set()).add(c.laddr.ip)
    return out


def test_a_hanging_rank_is_named_and_the_run_listens_on_loopback_only(tmp_path):
    """One hanging run, watched from outside: while it runs, every listening socket of the launcher
    and its ranks is on loopback; at the deadline the rank that hung is named; afterwards no rank
    and no launch directory is left."""
    from parbench.distributed import scratch
    from parbench.launch import run

    seen: dict[int, set[str]] = {}
    with RankWatch() as watch:
        def sample():
            while not done.is_set():
                for pid, addrs in _listening({os.getpid(), *watch.seen}).items():
                    seen.setdefault(pid, set()).update(addrs)
                time.sleep(0.2)
        done = threading.Event()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rec = run(RunConfig(strategy="ddp", world_size=2, steps=2, inject_fault="1:hang:1", timeout_s=8,
                            workload={"name": "mlp", "hidden": 16}), results_dir=None)
        done.set()
        sampler.join()
    assert set(watch.seen) & set(seen) == set(watch.seen)  # every rank was seen listening (gloo)
    assert os.getpid() in seen  # and the launcher (the store)
    assert {a for addrs in seen.values() for a in addrs} <= {"127.0.0.1", "::1"}, seen
    assert (rec["status"], rec["failed_rank"]) == ("timeout", 1), rec["error"]
    assert "rank 1 did not reach the collective its peers wait in (it was in step at runner.py" in rec["error"]
    assert "ranks [0] were waiting in torch.distributed" in rec["error"]
    assert len(watch.seen) == 2 and watch.survivors(wait_s=5) == []
    assert not list(scratch.session_dir().glob("ranks-*"))  # the launch's own directory is gone
