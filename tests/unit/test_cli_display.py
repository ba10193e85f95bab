"""What the CLI shows a person: help without markup and with every default, the results table by
layout with short run ids fitting the terminal, and a progress line on a terminal only."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parbench.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "dashboard" / "fixtures" / "results"


def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("parbench",)):
    """Every (command path, parser), sub-commands included."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


def test_every_option_has_help_and_shows_its_default():
    for path, parser in parsers(build_parser()):
        text = parser.format_help()
        assert "``" not in text, (path, text)
        for action in parser._actions:
            if action.help is argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            assert action.help, (path, action.option_strings or action.dest)
            if action.option_strings and not any(action.default is v for v in (None, False, argparse.SUPPRESS)):
                line = parser._get_formatter()._expand_help(action)
                assert "default" in line, (path, action.option_strings, line)


def results_table(capsys, columns: int, *args: str) -> list[str]:
    os.environ["COLUMNS"] = str(columns)
    try:
        assert main(["results", "--results-dir", str(FIXTURE), *args]) == 0
    finally:
        del os.environ["COLUMNS"]
    return capsys.readouterr().out.splitlines()


def test_results_show_the_layout_and_short_run_ids_within_the_terminal(capsys):
    lines = results_table(capsys, 200)
    text = "\n".join(lines)
    records = [json.loads(p.read_text()) for p in FIXTURE.rglob("runs/*.json")]
    for rec in records:
        assert rec["run_id"][:8] in text and rec["run_id"] not in text
    for mesh in ("dp1·tp2·pp2", "dp2·tp1·pp2", "dp2·tp2·pp1"):
        assert f"hybrid x4 {mesh}" in text
    assert "failed (rank 1)" in text and "transformer L4 H32 heads4 T16 V128 B48" in text
    for width in (80, 100, 120):
        assert max(len(line) for line in results_table(capsys, width)) <= width


def test_progress_line_only_on_a_terminal(tmp_path):
    code = ("from parbench.progress import Status; s = Status('t'); s.phase('warm-up step 1/2'); s.done(); "
            "print('ok')")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PARBENCH_PROGRESS", None)
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True)
    assert piped.stderr == b"" and piped.stdout == b"ok\n"  # a pipe stays clean
    forced = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                            env=dict(env, PARBENCH_PROGRESS="1"))
    assert b"\r\033[Kt: warm-up step 1/2" in forced.stderr and forced.stderr.endswith(b"\r\033[K")


@pytest.mark.parametrize("flag", ["0", "1"])
def test_progress_env_switch(flag, monkeypatch):
    from parbench import progress

    monkeypatch.setenv(progress.ENV, flag)
    assert progress.enabled() is (flag == "1")


@pytest.mark.slow  # a real 2-rank run: ~10-30 s on a loaded 2-core machine
def test_run_names_its_phases_on_the_status_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), PARBENCH_PROGRESS="1")
    done = subprocess.run([sys.executable, "-m", "parbench", "run", "--strategy", "ddp", "--world-size", "2",
                           "--steps", "3", "--global-batch-size", "16", "--no-save"],
                          capture_output=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    err = done.stderr.decode()
    phases = ["launching 2 rank(s): ddp on mlp", "warm-up: 2 steps", "probe step", "timed steps: 3",
              "compute-only steps", "traced steps"]
    at = [err.index(p) for p in phases]
    assert at == sorted(at), err
    assert err.rstrip("\n").endswith("\r\033[K") or "\r\033[K" in err.splitlines()[-1]
    assert "throughput" in done.stdout.decode()  # the summary follows on stdout, the status line is gone
    quiet = subprocess.run([sys.executable, "-m", "parbench", "run", "--steps", "2", "--global-batch-size", "16",
                            "--no-save"], capture_output=True, env=dict(env, PARBENCH_PROGRESS="0"), timeout=300,
                           cwd=tmp_path)
    assert quiet.returncode == 0 and b"warm-up" not in quiet.stderr


@pytest.mark.slow
def test_output_cut_short_by_its_reader_ends_without_a_traceback():
    """``parbench ... | head -1``: the reader leaves after one line; the command stops quietly (exit 1, as
    Python's own note on SIGPIPE has it) instead of printing a BrokenPipeError traceback."""
    cmd = [sys.executable, "-m", "parbench", "simulate", "--model", "llama3-8b", "--gpus", "64", "--search"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_broken_pipe_that_is_not_the_output_is_still_an_error(monkeypatch):
    """Only a closed standard output is the reader leaving: a pipe or socket of the work itself breaking
    stays an error with its traceback."""
    def broken(_args):
        raise BrokenPipeError("a rank's pipe")

    parser = build_parser()
    args = parser.parse_args(["results"])
    monkeypatch.setattr(args, "handler", broken)
    monkeypatch.setattr("parbench.cli.build_parser", lambda: argparse.Namespace(parse_args=lambda _argv: args))
    with pytest.raises(BrokenPipeError):
        main(["results"])


def test_results_mark_the_oversubscribed_runs_step_times(tmp_path, capsys):
    """A run whose record says it was oversubscribed gets a * on its step time and the table a caption saying
    why; the fixture's records predate the field, so neither appears for them."""
    import shutil

    assert "oversubscribed" not in "\n".join(results_table(capsys, 200))
    shutil.copytree(FIXTURE, tmp_path / "r")
    path = next((tmp_path / "r").rglob("runs/*.json"))
    rec = json.loads(path.read_text())
    assert rec["status"] == "ok"
    path.write_text(json.dumps({**rec, "oversubscribed": True, "host_cpus": 2}))
    os.environ["COLUMNS"] = "200"
    try:
        assert main(["results", "--results-dir", str(tmp_path / "r")]) == 0
    finally:
        del os.environ["COLUMNS"]
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if rec["run_id"][:8] in line)
    assert f"{rec['step_time_s_median'] * 1e3:.2f}*" in row and text.count("*") == 2  # the cell and the caption
    assert "*: oversubscribed (the ranks x threads outnumbered the host's CPUs" in " ".join(text.split())
