"""``parbench slurm`` with hostile arguments: every argument is either refused (exit 2, naming it)
or gives a script that bash parses and whose ``#SBATCH`` directives sbatch reads back exactly.

``sbatch_directives`` re-implements sbatch's reading of a script (src/sbatch/opt.c: directives are
read until the first line that is neither a comment nor blank; ``_get_argument`` groups with
either quote, takes a backslash as an escape even inside quotes, ends a value at unquoted
whitespace or '#')."""

from __future__ import annotations

import random
import re
import subprocess

import pytest

from parbench.cli import main
from parbench.commands import slurm as slurm_command
from parbench.slurm import SlurmJob, directives


def sbatch_argument(text: str) -> str:
    """sbatch's _get_argument on the text after ``#SBATCH``: the first argument."""
    out, quote, escape, i = [], None, False, 0
    text = text.lstrip()
    while i < len(text) and (quote or not text[i].isspace()):
        ch = text[i]
        i += 1
        if escape:
            escape = False
        elif ch == "\\":
            escape = True
            continue
        elif quote:
            if ch == quote:
                quote = None
                continue
        elif ch in "\"'":
            quote = ch
            continue
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out)


def sbatch_directives(script: str) -> dict[str, str]:
    """Option -> value of the directives sbatch would apply."""
    found = {}
    for line in script.split("\n")[1:]:  # sbatch splits at '\n' only
        if line.strip() and not line.startswith("#"):
            break  # the script proper starts: sbatch reads no further directive
        if line.startswith("#SBATCH"):
            option, _, value = sbatch_argument(line[len("#SBATCH"):]).partition("=")
            found[option.removeprefix("--")] = value
    return found


NASTY = ["plain", "with space", "it's", 'say "hi"', "back\\slash", "trailing\\", "#hash", "a#b", "$(reboot)",
         "`id`", "${HOME}", "semi;colon", "amp&", "pipe|", "star*", "~tilde", "--dashes", "-x", "=eq", "über",
         "\u2028sep", "a\nb", "a\rb", "tab\tx", "nul\x00x", "esc\x1b[0m", "del\x7f", "", " ", "'", '"', "\\",
         "x" * 300, "packjob", "12:00", "%j.out"]
FIELDS = ("--job-name", "--partition", "--account", "--time", "--python", "--setup")


def _slurm(tmp_path, *options: str, wrapped: tuple[str, ...] = ("run", "--strategy", "ddp")) -> tuple[int, str]:
    out = tmp_path / "job.sbatch"
    out.unlink(missing_ok=True)
    rc = main(["slurm", "--nodes", "2", "--ranks-per-node", "2", *options, "-o", str(out), "--", *wrapped])
    return rc, out.read_text() if out.exists() else ""


def _check_script(script: str, expected: dict[str, str]) -> None:
    parsed = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert parsed.returncode == 0, parsed.stderr
    assert sbatch_directives(script) == expected


def _fuzz_cases(fields: tuple[str, ...], random_cases: int) -> list[tuple[str, str]]:
    rng = random.Random(0)
    alphabet = "ab \t\n'\"\\#$`;&|*~=-%:\x00\x1bü"
    return [(f, v) for f in fields for v in NASTY] + [
        (rng.choice(fields), "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))) for _ in range(random_cases)]


@pytest.mark.parametrize("fields, random_cases", [
    (("--job-name", "--setup"), 0),
    pytest.param(FIELDS, 150, marks=pytest.mark.slow),
], ids=["job-name and setup", "every field, 150 random values"])
def test_every_hostile_value_is_refused_or_read_back_exactly(tmp_path, capsys, fields, random_cases):
    cases = _fuzz_cases(fields, random_cases)
    refused = accepted = 0
    for field, value in cases:
        rc, script = _slurm(tmp_path, f"{field}={value}")  # the = form: values may start with '-'
        err = capsys.readouterr().err
        if rc == 2:
            refused += 1
            assert "parbench slurm: error:" in err and script == ""
            continue
        assert rc == 0, (field, value, err)
        accepted += 1
        key = field.removeprefix("--").replace("-", "_")
        job = SlurmJob(nodes=2, ranks_per_node=2, **({"setup": (value,)} if key == "setup" else {key: value}))
        _check_script(script, directives(job))
    assert refused and accepted > len(NASTY)  # both sides exercised


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "nul\x00x", "esc\x1b", "ls\u2028x"])
@pytest.mark.parametrize("field", ["--job-name", "--partition", "--account", "--python", "--setup"])
def test_control_characters_are_refused_by_name(tmp_path, capsys, field, value):
    assert _slurm(tmp_path, f"{field}={value}")[0] == 2
    assert "contains the control character" in capsys.readouterr().err


@pytest.mark.parametrize("options, wrapped, message", [
    ((), ("run", "--strategy", "bogus", "--world-size", "-3"), "world_size=-3 != nnodes x nproc_per_node = 2 x 2"),
    ((), ("run", "--strategy", "bogus"), "unknown strategy 'bogus'"),
    ((), ("run", "--strategy", "ddp", "--lr", "nan"), "lr=nan must be a finite number > 0"),
    ((), ("run", "--strategy", "ddp", "--nnodes", "3"), "remove --nnodes from the wrapped command"),
    ((), ("run", "--bogus"), "unrecognized arguments: --bogus"),
    ((), ("run", "--strategy", "ddp", "--results-dir", "a\nb"), "argument 'a\\nb' contains the control character"),
    ((), ("dashboard",), "must be a `parbench run ...` or `parbench sweep ...`"),
    ((), ("sweep", "missing.toml"), "sweep file missing.toml does not exist"),
    (("--cpus-per-task", "-1"), ("run", "--strategy", "ddp"), "cpus_per_task=-1 must be >= 1"),
    (("--gpus-per-node", "0"), ("run", "--strategy", "ddp"), "gpus_per_node=0 must be >= 1"),
    (("--setup", "if true"), ("run", "--strategy", "ddp"), "the script would not parse in bash"),
    (("--job-name", "my packjob"), ("run", "--strategy", "ddp"), "sbatch erases the word 'packjob'"),
])
def test_wrapped_command_and_counts_are_checked_as_run_and_sweep_would(tmp_path, capsys, options, wrapped, message):
    assert _slurm(tmp_path, *options, wrapped=wrapped)[0] == 2
    assert message in capsys.readouterr().err


def test_a_sweep_is_checked_against_the_allocation(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('strategies = ["ddp"]\nworld_sizes = [4]\n')
    assert _slurm(tmp_path, wrapped=("sweep", str(path)))[0] == 0
    capsys.readouterr()
    assert main(["slurm", "--nodes", "2", "--ranks-per-node", "4", "--", "sweep", str(path)]) == 2
    assert "no point of world_size=8" in capsys.readouterr().err


def test_the_help_example_is_valid(tmp_path, monkeypatch, capsys):
    example = re.search(r"``(parbench slurm [^`]+)``", slurm_command.__doc__).group(1).split()
    monkeypatch.chdir(tmp_path)
    assert main(example[1:]) == 0, capsys.readouterr().err
    script = (tmp_path / example[example.index("-o") + 1]).read_text()
    _check_script(script, {"job-name": "parbench", "nodes": "4", "ntasks-per-node": "1", "time": "01:00:00",
                           "output": "parbench-%j.out", "partition": "gpu"})
