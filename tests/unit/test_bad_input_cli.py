"""Bad input on the command line: exit 2, a message naming the value, no child process created,
nothing written. In-process cases patch every way Python creates a process so that creating one
fails the test; a few cases run under strace, which sees every process the command creates."""

from __future__ import annotations

import _posixsubprocess
import contextlib
import multiprocessing.forkserver
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from parbench.cli import main


class Spawned(AssertionError):
    pass


@pytest.fixture
def no_spawn(monkeypatch):
    """Any attempt to create a process (fork, posix_spawn, subprocess, multiprocessing's server, exec)
    raises ``Spawned``, which the CLI does not catch."""
    def refuse(*args, **kwargs):
        raise Spawned(f"a process was about to be created: {args[:2]!r}")
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    # the process server may already run from an earlier test: asking for it counts as spawning
    monkeypatch.setattr(multiprocessing.forkserver.ForkServer, "ensure_running", refuse)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@contextlib.contextmanager
def read_only(path: Path):
    """A directory nobody can create files in: immutable for root (root ignores permission bits),
    mode 0555 for anyone else."""
    path.mkdir()
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield path
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)


def setup_files(tmp: Path) -> dict[str, str]:
    (tmp / "a_file").write_text("x")
    (tmp / "latin1.toml").write_bytes('name = "caf\u00e9"'.encode("latin-1"))
    (tmp / "nan.toml").write_text("timeout_s = nan\n")
    (tmp / "results" / "runs").mkdir(parents=True)
    return {"tmp": str(tmp)}


RUN = ["run", "--strategy", "ddp", "--world-size", "2", "--steps", "1"]
CASES = [
    (RUN + ["--timeout", "nan"], "timeout_s=nan must be a finite number > 0"),
    (RUN + ["--timeout", "inf"], "timeout_s=inf must be a finite number > 0"),
    (RUN + ["--lr", "-1"], "lr=-1.0 must be a finite number > 0"),
    (RUN + ["--lr", "nan"], "lr=nan must be a finite number > 0"),
    (RUN + ["--lr", "inf"], "lr=inf must be a finite number > 0"),
    (RUN + ["--seed", "-1"], "seed=-1 must be an integer in [0, 2**63)"),
    (RUN + ["--nnodes", "0"], "--nnodes 0 must be >= 1"),
    # a one-node run reads neither the node rank nor the port: they used to pass unread
    (RUN + ["--node-rank", "3"], "--node-rank 3 must be in [0, --nnodes 1)"),
    (RUN + ["--master-port", "99999"], "--master-port 99999 is not a TCP port (1-65535)"),
    # 0 stands for the workload's default in a config; typed, it used to run the default without a word
    (RUN + ["--hidden", "0"], "--hidden 0: workload 'mlp' needs hidden >= 1 (leave --hidden out for its default)"),
    (RUN + ["--workload", "transformer", "--layers", "0"], "--layers 0: workload 'transformer' needs layers >= 1"),
    (RUN + ["--lr", "0"], "--lr 0: the learning rate must be > 0 (leave --lr out for the workload's default)"),
    (RUN + ["--workload", "moe", "--capacity-factor", "nan"], "capacity_factor=nan must be a finite number > 0"),
    (RUN + ["--workload", "moe", "--capacity-factor", "inf"], "capacity_factor=inf must be a finite number > 0"),
    (RUN + ["--workload", "moe", "--aux-loss-weight", "nan"], "aux_loss_weight=nan must be a finite number >= 0"),
    (RUN + ["--workload", "moe", "--aux-loss-weight", "inf"], "aux_loss_weight=inf must be a finite number >= 0"),
    (["sweep", "--name", "x" * 101], "is 101 characters, at most 100"),
    # a model larger than the host: the parent's check build thrashed for minutes, then the kernel killed it, silently.
    # 12 h^2 + 13 h a block (q, k, v, output and the 4h MLP with biases, two LayerNorms), token and position
    # embeddings, the final LayerNorm and the untied head (no bias): 25,780,453,376 at h 16384, 8 blocks, V 256, s 32;
    # two DDP ranks each hold float32 weights, gradients and AdamW's two moments: 16 bytes a parameter each
    (RUN + ["--workload", "transformer", "--hidden", "16384", "--layers", "8"],
     ("workload 'transformer' has 25,780,453,376 parameters: the float32 weights, gradients and AdamW state of this "
      f"host's 2 ddp ranks alone need {2 * 16 * 25_780_453_376 / 2**30:.1f} GiB")),
    (RUN + ["--workload", "transformer", "--layers", "1000000000"], "workload layers=1000000000 is more than 10,000"),
    (["simulate", "--model", "llama3-8b", "--layers", "10001"], "layers=10001 is more than 10,000"),
    # nan passes every "< 0" check: the simulator's capacity factor and imbalance ran on into a traceback
    (["simulate", "--model", "qwen3-30b-a3b", "--capacity-factor", "nan"], "capacity_factor=nan must be a finite number"),
    (["simulate", "--model", "qwen3-30b-a3b", "--capacity-factor", "inf"], "capacity_factor=inf must be a finite number"),
    (["simulate", "--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--moe-imbalance", "nan"],
     "moe_imbalance=nan must be a finite number >= 1"),
    (["simulate", "--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--moe-imbalance", "inf"],
     "moe_imbalance=inf must be a finite number >= 1"),
    (RUN + ["--results-dir", "{tmp}/a_file"], "results directory {tmp}/a_file is a file, not a directory"),
    (RUN + ["--results-dir", "{tmp}/a_file/sub"], "results directory {tmp}/a_file/sub cannot be created: {tmp}/a_file is a file"),
    (RUN + ["--world-size", "100000", "--global-batch-size", "100000"], "world_size=100000 does not fit on this host"),
    (["sweep", "{tmp}"], "sweep file {tmp} is a directory"),
    (["sweep", "{tmp}/latin1.toml"], "sweep file {tmp}/latin1.toml is not UTF-8 text"),
    (["sweep", "{tmp}/nan.toml"], "key 'timeout_s': expected a finite number > 0, got nan"),
    (["sweep", "--timeout", "inf"], "command-line override timeout_s: expected a finite number > 0, got inf"),
    (["sweep", "--world-sizes", "1", "--strategies", "single", "--results-dir", "{tmp}/a_file"],
     "results directory {tmp}/a_file is a file"),
    (["results", "--results-dir", "{tmp}/missing"], "results directory {tmp}/missing does not exist"),
    (["results", "--results-dir", "{tmp}/a_file"], "results directory {tmp}/a_file is a file"),
    (["results", "--results-dir", "{tmp}/results", "--sweep", "nope"], "--sweep nope: no run of that sweep"),
    (["results", "--results-dir", "{tmp}/results", "--export", "{tmp}/missing/x.csv"],
     "--export {tmp}/missing/x.csv: directory {tmp}/missing does not exist"),
    (["results", "--results-dir", "{tmp}/results", "--status", "bogus"], "invalid choice: 'bogus'"),
    (["report", "--results-dir", "{tmp}/a_file"], "results directory {tmp}/a_file is a file"),
    (["report", "--results-dir", "{tmp}/missing"], "results directory {tmp}/missing does not exist"),
    (["report", "--results-dir", "{tmp}/results", "--out", "{tmp}"], "--out {tmp} is a directory"),
    (["dashboard", "--port", "99999"], "--port 99999 is not a TCP port"),
    (["doctor", "--world-size", "3", "--nproc-per-node", "2"], "--nproc-per-node 2 must divide --world-size 3"),
    # --published compares without this host's calibration, but a profile named and missing is an error
    (["validate", "--published", "--cluster", "nope"], "no cluster 'nope' (nope does not exist); presets: a100-80gb"),
    (["validate", "--results-dir", "{tmp}/results"], "no cluster 'local' ({tmp}/results/calibration/vm.json does not exist)"),
    (["doctor", "--world-size", "2", "--nproc-per-node", "0"], "--nproc-per-node 0 must divide --world-size 2"),
    (["bench", "gate", "--suite", "{tmp}/missing"], "--suite {tmp}/missing: no such directory"),
    (["bench", "gate", "--suite", "{tmp}/results"], "--suite {tmp}/results: no test_*.py there uses pytest-benchmark"),
    (RUN + ["--inject-fault", "5:hang:1"], "inject_fault='5:hang:1': rank 5 >= world_size=2"),
    (RUN + ["--inject-fault", "hang:1"], "expected RANK:KIND:STEP with KIND one of raise, hang, crash, nan"),
    # refused in the parent: RunConfig's rules, then preflight's checks of this machine
    (["run", "--results-dir", "{tmp}/results", "--strategy", "foo"], "unknown strategy 'foo'"),
    (["run", "--results-dir", "{tmp}/results", "--strategy", "ddp", "--world-size", "3"],
     "global_batch_size=64 is not divisible by dp x micro_batches = 3 x 1 = 3"),
    (RUN + ["--results-dir", "{tmp}/results", "--backend", "nccl"], "backend=nccl"),
    (["run", "--results-dir", "{tmp}/results", "--workload", "moe", "--strategy", "ep", "--world-size", "2",
      "--experts", "3"], "ep=2 does not divide experts=3"),
    pytest.param(RUN + ["--results-dir", "{tmp}/results", "--device", "cuda"], "device=cuda",
                 marks=pytest.mark.skipif(__import__("torch").cuda.is_available(),
                                          reason="this machine has a GPU, so device=cuda is valid")),
]


@pytest.mark.parametrize("argv, message", CASES,
                         ids=[" ".join(a[:1] + a[-2:]) for a in (getattr(c, "values", c)[0] for c in CASES)])
def test_bad_input_exits_2_naming_it_and_spawns_and_writes_nothing(tmp_path, capsys, no_spawn, argv, message):
    subs = setup_files(tmp_path)
    before = tree(tmp_path)
    argv = [a.format(**subs) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    assert rc == 2
    assert message.format(**subs) in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_read_only_results_directory_is_refused_before_spawning(tmp_path, capsys, no_spawn):
    with read_only(tmp_path / "ro") as ro:
        for argv in (RUN + ["--results-dir", str(ro)], RUN + ["--results-dir", str(ro / "new")],
                     ["sweep", "--world-sizes", "1", "--strategies", "single", "--results-dir", str(ro)]):
            assert main(argv) == 2
            assert f"results directory {argv[-1]} is not writable: {ro}" in capsys.readouterr().err
        assert not list(ro.iterdir())


PROCESS_CREATION = re.compile(r"^\d+\s+(v?fork|clone3?)\(")


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("argv", [RUN + ["--lr", "nan"], ["sweep", "--timeout", "inf"]], ids=["run", "sweep"])
def test_strace_sees_no_process_created_for_bad_input(tmp_path, argv):
    """The whole command in its own interpreter: strace lists every process it creates."""
    trace = tmp_path / "trace"
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve,fork,vfork,clone,clone3", "-o", str(trace),
                          sys.executable, "-m", "parbench", *argv],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = trace.read_text().splitlines()
    created = [l for l in lines if PROCESS_CREATION.match(l) and "CLONE_THREAD" not in l]
    assert created == [], created
    assert sum(" execve(" in l for l in lines) == 1  # the interpreter itself
    assert not list(tmp_path.glob("results*"))


@pytest.mark.parametrize("argv", [RUN + ["--lr", "nan"], ["sweep", "--timeout", "inf"]], ids=["run", "sweep"])
def test_bad_input_is_refused_before_torch_is_imported(tmp_path, argv):
    """Importing torch and the strategies takes 5-6 s on a 2-core machine: a typo is refused without it
    (``parbench run --lr nan`` took 7.9 s when the runner was imported before the options were checked)."""
    probe = ("import sys\nfrom parbench.cli import main\nrc = main(sys.argv[1:])\n"
             "print('torch imported' if 'torch' in sys.modules else 'no torch')\nsys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         check=False)
    assert out.returncode == 2, out.stderr
    assert out.stdout.strip() == "no torch"
