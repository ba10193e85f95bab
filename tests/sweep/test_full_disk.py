"""A disk that fills up mid-sweep or at the end of a run: one clear line, exit 1, every record
written before intact, an honest manifest, nothing half-written left. A real full file system:
a small tmpfs (root only; elsewhere the test is skipped) filled by a filler file right after the
first record lands."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from parbench import results as results_module
from parbench.cli import main


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> None:
    """Write a filler file until the file system is full."""
    with open(mount / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def fill_after(monkeypatch, mount: Path, records_first: int) -> None:
    """After ``records_first`` real record writes, fill the disk (so the next write meets ENOSPC)."""
    real, count = results_module.write_record, [0]

    def write_record(results_dir, record):
        if count[0] == records_first:
            fill(mount)
        count[0] += 1
        return real(results_dir, record)
    monkeypatch.setattr(results_module, "write_record", write_record)


def test_full_disk_mid_sweep_is_one_line_exit_1_and_an_honest_manifest(small_fs, tmp_path, monkeypatch, capsys):
    path = tmp_path / "s.toml"
    path.write_text('strategies = ["single"]\nworld_sizes = [1]\nrepeats = 3\nsteps = 1\n'
                    '[[workloads]]\nname = "mlp"\nhidden = 8\n')
    results = small_fs / "results"
    fill_after(monkeypatch, small_fs, records_first=1)
    assert main(["sweep", str(path), "--results-dir", str(results)]) == 1
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("parbench sweep: error: results could not be written: No space left on device")
    assert "the 1 records written before are intact, the manifest says failed" in lines[0]
    recs = [json.loads(p.read_text()) for p in (results / "runs").glob("*.json")]
    assert [r["status"] for r in recs] == ["ok"]  # the first record, whole; no half-written one
    assert not [p for p in results.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".reserve")]
    manifest = json.loads(next(results.glob("sweeps/*/manifest.json")).read_text())
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]
    assert manifest["runs_ok"] == 1 and manifest["run_ids"] == [recs[0]["run_id"]]


def test_full_disk_at_the_end_of_a_run_keeps_the_summary(small_fs, monkeypatch, capsys):
    fill_after(monkeypatch, small_fs, records_first=0)
    results = small_fs / "results"
    argv = ["run", "--steps", "1", "--hidden", "8", "--results-dir", str(results)]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "throughput" in out and "samples/s" in out  # the measurement is on screen
    assert err.strip().startswith("parbench run: error: the record could not be written: No space left on device")
    assert len(err.strip().splitlines()) == 1 and not list(results.rglob("*.json"))
