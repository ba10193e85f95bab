"""A plugin defined outside parbench runs, in real gloo processes, under every generic strategy
the registry has, and matches its single-process reference; it loads by file path, dotted path and
entry point, and ``parbench workloads`` lists installed plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parbench.config import RunConfig, Strategy, WorkloadConfig
from tests.references import run
from parbench.strategies import BUILDERS
from parbench.workloads import GENERIC_STRATEGIES, catalog

PLUGINS = Path(__file__).parent / "plugins"
MNIST = f"{PLUGINS / 'mnist_plugin.py'}:make"
HIDDEN = 16
PARAM_BYTES = 4 * (784 * HIDDEN + HIDDEN + HIDDEN * 10 + 10)  # float32 weights + biases: 50920
GENERIC_NOW = [s for s in GENERIC_STRATEGIES if Strategy(s) in BUILDERS]


@pytest.mark.parametrize("strategy", GENERIC_NOW)
def test_plugin_matches_single_process_under_every_generic_strategy(tmp_path, strategy):
    world = 1 if strategy == "single" else 2
    cfg = RunConfig(strategy=strategy, world_size=world, workload=WorkloadConfig(name=MNIST, hidden=HIDDEN),
                    global_batch_size=16, steps=2, warmup_steps=2, lr=0.1)
    rec = run(cfg, results_dir=tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["workload"] == MNIST
    assert rec["loss_max_abs_diff_vs_reference"] <= 1e-5
    per_rank = [r["mem_param_bytes"] for r in rec["per_rank"]]
    if strategy == "fsdp":
        assert sum(per_rank) == PARAM_BYTES  # each rank stores half of every (even-sized) tensor
    elif strategy in ("single", "ddp"):
        assert per_rank == [PARAM_BYTES] * world  # whole replicas


def _parbench(*args: str, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-m", "parbench", *args], env=env, capture_output=True,
                          text=True, timeout=240)


def _install_entry_point(root: Path) -> Path:
    """A distribution's metadata (as pip would write it) registering mnist_plugin:make as 'mnist'."""
    info = root / "mnist_demo-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mnist-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[parbench.workloads]\nmnist = mnist_plugin:make\n")
    return root


def test_entry_point_plugin_is_listed_and_runs_in_ranks_by_module_name(tmp_path, monkeypatch):
    path = [_install_entry_point(tmp_path / "site"), PLUGINS]
    monkeypatch.syspath_prepend(str(path[0]))  # importlib.metadata scans sys.path when asked
    assert {"name": "mnist", "source": "plugin mnist_plugin:make"} in catalog()
    ran = _parbench("run", "--workload", "mnist", "--strategy", "ddp", "--world-size", "2", "--hidden", "16",
                    "--global-batch-size", "8", "--steps", "1", "--warmup-steps", "2", "--no-save",
                    pythonpath=path)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert "ok" in ran.stdout


def test_dotted_path_resolves_to_the_same_factory():
    from parbench.workloads import make

    sys.path.insert(0, str(PLUGINS))
    try:
        workload = make(WorkloadConfig(name="mnist_plugin:make", hidden=HIDDEN), 0)
    finally:
        sys.path.remove(str(PLUGINS))
    assert workload.name == "mnist-plugin"
    assert sum(p.numel() * 4 for p in workload.build(0).parameters()) == PARAM_BYTES
