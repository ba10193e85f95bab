"""Sweeps in real processes (gloo, CPU): end to end, failure isolation, resume after kill -9,
concurrent sweeps into one directory. Tiny mlp points, steps=2."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from parbench.cli import main
from parbench.sweep import Plan, execute, load_spec, plan
from tests.ranks import RankWatch

TINY = """
name = "{name}"
strategies = {strategies}
world_sizes = [1, 2]
global_batch_sizes = [16]
micro_batches = [2]
steps = 2
repeats = {repeats}
timeout_s = 60
[[workloads]]
name = "mlp"
layers = 1
hidden = {hidden}
"""


def sweep_file(tmp_path: Path, name: str = "tiny", repeats: int = 1, hidden: str = "16",
               strategies: str = '["single", "ddp", "pipeline"]') -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TINY.format(name=name, repeats=repeats, hidden=hidden, strategies=strategies))
    return path


def records(results: Path) -> list[dict]:
    """Every record file; json.loads raises on a corrupt one."""
    return [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*.json"))]


def ok_keys(recs: list[dict]) -> Counter:
    return Counter((r["sweep_id"], r["point_key"], r["repeat"]) for r in recs if r["status"] == "ok")




def test_tiny_sweep_end_to_end_then_resume_then_results(tmp_path, capsys):
    results = tmp_path / "results"
    path = sweep_file(tmp_path, repeats=2)
    assert main(["sweep", str(path), "--results-dir", str(results)]) == 0
    out = capsys.readouterr().out
    recs = records(results)
    sweep_id = load_spec(path).sweep_id
    assert len(recs) == 6 and all(r["status"] == "ok" and r["sweep_id"] == sweep_id for r in recs)
    assert sorted(Counter((r["strategy"], r["world_size"]) for r in recs).items()) == [
        (("ddp", 2), 2), (("pipeline", 2), 2), (("single", 1), 2)]
    assert "per-run fixed overhead" in out and "W=2:" in out and f"{results}/runs/" in out
    manifest = json.loads((results / "sweeps" / sweep_id / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["runs_ok"] == 6 and len(manifest["points"]) == 3
    assert manifest["environment"]["torch_version"] and manifest["end_time"]

    # the same sweep again runs nothing; one more repeat runs only repeat 2
    assert main(["sweep", str(path), "--results-dir", str(results), "--repeats", "3"]) == 0
    assert "3 runs in" in capsys.readouterr().out
    recs = records(results)
    assert len(recs) == 9 and max(ok_keys(recs).values()) == 1
    # a committed reference sweep elsewhere under the directory is not "already recorded"
    (results / "reference" / "runs").mkdir(parents=True)
    for p in (results / "runs").glob("*.json"):
        (results / "reference" / "runs" / p.name).write_text(p.read_text())
    (results / "runs" / p.name).unlink()
    assert main(["sweep", str(path), "--results-dir", str(results), "--repeats", "3"]) == 0
    assert "1 runs in" in capsys.readouterr().out

    assert main(["results", "--results-dir", str(results)]) == 0
    assert "18 runs in" in capsys.readouterr().out
    assert main(["results", "--results-dir", str(results), "--export", str(tmp_path / "runs.csv")]) == 0
    import pandas as pd
    assert len(pd.read_csv(tmp_path / "runs.csv")) == 18


def test_crashing_and_hanging_points_are_recorded_and_the_rest_run(tmp_path):
    the_plan = plan(load_spec(sweep_file(tmp_path)))
    ddp = next(p for p in the_plan.points if p.config.strategy.value == "ddp")
    bad = [dataclasses.replace(ddp, config=dataclasses.replace(ddp.config, inject_fault=f, timeout_s=4),
                               label=f"{ddp.label} {f}") for f in ("1:crash:1", "0:hang:1")]
    faulty = Plan(spec=the_plan.spec, points=(bad[0], bad[1], *the_plan.points), skipped=(), strategies=())
    with RankWatch() as watch:
        outcome = execute(faulty, tmp_path / "results")
    assert [r["status"] for r in outcome.records] == ["failed", "timeout", "ok", "ok", "ok"]
    assert "rank 1 died with exit code -9 (SIGKILL)" in outcome.records[0]["error"]
    assert "timed out after 4 s" in outcome.records[1]["error"]
    assert len(watch.seen) >= 2 + 2 + 1 + 2 + 2  # the faulty points' ranks, the ok points' and the references
    assert watch.survivors() == []  # every rank this sweep started is gone
    # a rerun retries only the failed points
    rerun = execute(faulty, tmp_path / "results")
    assert rerun.resumed == 3 and len(rerun.records) == 2


def test_exit_status_is_1_when_a_point_fails(tmp_path, capsys):
    path = sweep_file(tmp_path)
    rc = main(["sweep", str(path), "--results-dir", str(tmp_path / "r"), "--strategies", "ddp", "--timeout", "0.05"])
    assert rc == 1
    assert [r["status"] for r in records(tmp_path / "r")] == ["timeout"]


def _spawn(path: Path, results: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "parbench", "sweep", str(path), "--results-dir", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _ppid(p: psutil.Process) -> int | None:
    """The parent's pid, or None when the process ended after it was listed (a short-lived helper)."""
    try:
        return p.ppid()
    except psutil.NoSuchProcess:
        return None


def _mid_run(proc: subprocess.Popen, results: Path, min_records: int) -> list[psutil.Process]:
    """Wait until ``min_records`` records exist and ranks run; every process the sweep has started
    (process server, ranks, janitor, ...): the ranks are the process server's children."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        tree = psutil.Process(proc.pid).children(recursive=True)
        ranks = [p for p in tree if _ppid(p) not in (proc.pid, None)]
        if len(list((results / "runs").glob("*.json"))) >= min_records and ranks:
            return tree
        time.sleep(0.02)
    raise AssertionError("the sweep never reached a run with ranks")


def _scratch(pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"parbench-{pid}-*"))


def _all_gone(tree: list[psutil.Process], pid: int) -> None:
    """Every process the sweep started ends, and its scratch directory goes, within 15 s."""
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert alive == [], [(p.pid, p.cmdline()) for p in alive]
    deadline = time.monotonic() + 5
    while _scratch(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _scratch(pid) == []


@pytest.mark.slow
def test_resume_after_kill_9_mid_sweep(tmp_path, capsys):
    results = tmp_path / "results"
    path = sweep_file(tmp_path, repeats=2)  # 3 points x 2 = 6 runs
    proc = _spawn(path, results)
    tree = _mid_run(proc, results, min_records=2)
    assert _scratch(proc.pid)  # the scratch directory exists while it runs: its removal below means something
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _all_gone(tree, proc.pid)  # ranks die with the process server (PR_SET_PDEATHSIG), the janitor cleans up
    first = records(results)  # every file parses: no half record
    assert 2 <= len(first) < 6
    assert not list((results / "runs").glob("*.tmp"))
    manifest = results / "sweeps" / load_spec(path).sweep_id / "manifest.json"
    assert json.loads(manifest.read_text())["status"] == "running"  # nobody could rewrite it...
    assert main(["results", "--results-dir", str(results)]) == 0
    assert "interrupted" in capsys.readouterr().out  # ...but results sees that its process is gone
    rerun = _spawn(path, results)
    out, _ = rerun.communicate(timeout=240)
    assert rerun.returncode == 0, out
    recs = records(results)
    keys = ok_keys(recs)
    assert len(keys) == 6 and max(keys.values()) == 1  # every run once, none twice
    assert f"{len(first)} already recorded" in out or f"{len(first) - 1} already recorded" in out
    earlier = [json.loads(p.read_text()) for p in manifest.parent.glob("manifest-*.json")]
    assert sorted(m["status"] for m in earlier) == ["finished", "interrupted"]


@pytest.mark.slow
def test_ctrl_c_mid_sweep_ends_it_interrupted(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it."""
    results = tmp_path / "results"
    path = sweep_file(tmp_path, repeats=2)
    proc = _spawn(path, results, start_new_session=True)
    tree = _mid_run(proc, results, min_records=1)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted" in out and "Traceback" not in out
    _all_gone(tree, proc.pid)
    manifest = json.loads((results / "sweeps" / load_spec(path).sweep_id / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert all(r["status"] in ("ok", "failed") for r in records(results))


@pytest.mark.slow
def test_two_concurrent_sweeps_into_one_directory_lose_and_corrupt_nothing(tmp_path):
    results = tmp_path / "results"
    pair = '["single", "ddp"]'
    a, b = sweep_file(tmp_path, name="a", strategies=pair), sweep_file(tmp_path, name="b", strategies=pair)
    procs = [_spawn(a, results), _spawn(a, results), _spawn(b, results)]  # the same sweep twice, and another
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    keys = ok_keys(records(results))
    ids = {load_spec(a).sweep_id: 2, load_spec(b).sweep_id: 2}
    assert Counter(k[0] for k in keys) == ids  # nothing lost
    assert max(keys.values()) == 1  # the twin sweeps never ran a point twice
    for sweep_id in ids:
        assert json.loads((results / "sweeps" / sweep_id / "manifest.json").read_text())["status"] == "finished"
