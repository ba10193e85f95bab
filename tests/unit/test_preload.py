"""The forkserver preloads what a plan's workloads import (transformers' model code for the Hugging Face
workloads), so their ranks fork with it instead of importing it each. No rank is started here: the
launcher and the sweep command are stopped where they hand the modules over."""

from __future__ import annotations

import os
import runpy
import sys

import pytest

import parbench.distributed
import parbench.launch
from parbench.cli import main
from parbench.config import RunConfig, WorkloadConfig
from parbench.workloads import preload_modules
from parbench.workloads.hf import MODEL_MODULES

HF = "parbench.workloads.hf_preload"


class Stopped(Exception):
    pass


def test_only_the_hugging_face_workloads_preload_anything():
    assert preload_modules(["mlp", "transformer", "moe"]) == ()
    assert preload_modules(["hf-llama", "mlp", "hf-gpt2"]) == (HF,)


def test_a_run_hands_its_workload_modules_to_the_launcher(monkeypatch):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    seen = []

    def spawn(*args, preload=(), **kwargs):
        seen.append(preload)
        raise Stopped

    monkeypatch.setattr(parbench.launch, "spawn", spawn)
    for name, expected in (("hf-llama", (HF,)), ("mlp", ())):
        with pytest.raises(Stopped):
            parbench.launch.launch(RunConfig(strategy="ddp", world_size=2, workload=WorkloadConfig(name=name, layers=2)))
    assert seen == [(HF,), ()]


def test_the_sweep_starts_the_forkserver_with_its_plans_modules(monkeypatch, tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    seen = []

    def prestart(*modules):
        seen.append(modules)
        raise Stopped

    monkeypatch.setattr(parbench.distributed, "prestart", prestart)
    spec = tmp_path / "s.toml"
    spec.write_text('name = "p"\nstrategies = ["ddp"]\nworld_sizes = [2]\nsteps = 1\n'
                    '[[workloads]]\nname = "mlp"\n[[workloads]]\nname = "hf-llama"\nlayers = 2\n')
    with pytest.raises(Stopped):
        main(["sweep", str(spec), "--results-dir", str(tmp_path / "r")])
    assert seen == [(HF,)]


def test_the_preload_module_imports_transformers_models_offline(monkeypatch):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    runpy.run_module(HF)  # what the forkserver's preload executes
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert all(m in sys.modules for m in MODEL_MODULES)
