"""A sweep killed mid-way leaves ``status: running``; the next sweep marks it ``interrupted`` and
``parbench results`` shows it so. No rank processes here: the dead sweep is a finished stand-in process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from parbench.cli import main
from parbench.results import now_iso
from parbench.sweep import Plan, execute, load_spec
from parbench.sweep.manifests import effective_status, holder_is_dead, mark_dead_interrupted


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _manifest(results, sweep_id: str, pid: int, **kw) -> dict:
    m = {"sweep_id": sweep_id, "status": "running", "pid": pid, "start_time": now_iso(), "end_time": None,
         "runs_planned": 4, "environment": {"hostname": socket.gethostname()}, **kw}
    folder = results / "sweeps" / sweep_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(m))
    return m


def test_dead_running_sweeps_are_shown_and_then_marked_interrupted(tmp_path, capsys):
    results = tmp_path / "results"
    dead = _manifest(results, "dead-1", _dead_pid())
    alive = _manifest(results, "alive-1", subprocess.os.getpid())
    reused = _manifest(results, "reused-1", subprocess.os.getpid(), start_time="2001-01-01T00:00:00+00:00")
    elsewhere = _manifest(results, "other-host-1", _dead_pid(), environment={"hostname": "not-" + socket.gethostname()})
    assert [holder_is_dead(m) for m in (dead, alive, reused, elsewhere)] == [True, False, True, False]
    (results / "sweeps" / "dead-1" / ".reserve-999999999").write_bytes(b"\0" * 10)  # a killed sweep's reserve

    assert main(["results", "--results-dir", str(results)]) == 0  # shows, writes nothing
    out = capsys.readouterr().out
    status = {sid: next(l for l in out.splitlines() if sid in l).split("│")[2].strip()
              for sid in ("dead-1", "alive-1", "reused-1", "other-host-1")}
    assert "4 sweeps" in out
    assert status == {"dead-1": "interrupted", "alive-1": "running", "reused-1": "interrupted", "other-host-1": "running"}
    assert json.loads((results / "sweeps" / "dead-1" / "manifest.json").read_text())["status"] == "running"

    marked = mark_dead_interrupted(results)
    assert sorted(p.parent.name for p in marked) == ["dead-1", "reused-1"]
    after = json.loads((results / "sweeps" / "dead-1" / "manifest.json").read_text())
    assert after["status"] == "interrupted" and f"process {dead['pid']} ended" in after["interrupted_reason"]
    assert effective_status(json.loads((results / "sweeps" / "alive-1" / "manifest.json").read_text())) == "running"
    assert not list(results.glob("sweeps/*/.reserve-*"))


def test_a_new_sweep_marks_a_dead_one_before_it_starts(tmp_path):
    results = tmp_path / "results"
    _manifest(results, "dead-2", _dead_pid())
    path = tmp_path / "s.toml"
    path.write_text('strategies = ["single"]\nworld_sizes = [1]\nsteps = 1\n[[workloads]]\nname = "mlp"\nhidden = 8\n')
    the_plan = Plan(spec=load_spec(path), points=(), skipped=(), strategies=())  # no run needed to see the marking
    outcome = execute(the_plan, results)
    assert outcome.records == []
    assert json.loads((results / "sweeps" / "dead-2" / "manifest.json").read_text())["status"] == "interrupted"
    mine = json.loads((results / "sweeps" / the_plan.spec.sweep_id / "manifest.json").read_text())
    assert mine["status"] == "finished" and not list(results.glob("sweeps/*/.reserve-*"))


def test_a_mistyped_manifest_is_named_and_skipped_and_the_others_shown(tmp_path, capsys):
    """A hand-edited manifest (its environment a list, its pid a string) once ended ``parbench results`` and
    every later sweep's start in an AttributeError; now ``results`` names it and lists the other sweeps, and
    a new sweep leaves it as it is and still marks the dead one."""
    results = tmp_path / "results"
    _manifest(results, "dead-3", _dead_pid())
    _manifest(results, "listed-env-1", _dead_pid(), environment=[1, 2])
    _manifest(results, "text-pid-1", "123")
    (results / "sweeps" / "array-1").mkdir()
    (results / "sweeps" / "array-1" / "manifest.json").write_text("[1, 2]")
    assert main(["results", "--results-dir", str(results)]) == 0
    out, err = capsys.readouterr()
    assert "1 sweeps" in out and "dead-3" in out
    for name, why in (("listed-env-1", "field 'environment' is [1, 2] (list), expected an object"),
                      ("text-pid-1", "field 'pid' is '123' (str), expected an integer"),
                      ("array-1", "not a sweep manifest (a JSON list, not an object)")):
        assert f"warning: skipped unreadable sweep manifest {results / 'sweeps' / name / 'manifest.json'}: {why}" in err
    assert [p.parent.name for p in mark_dead_interrupted(results)] == ["dead-3"]
    assert json.loads((results / "sweeps" / "listed-env-1" / "manifest.json").read_text())["status"] == "running"
