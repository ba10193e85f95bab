"""Hugging Face architectures from a transformers config (random weights, offline) in real gloo
processes: exact parameter bytes per rank and losses matching the single-process reference."""

from __future__ import annotations

import pytest

from parbench.config import ConfigError, RunConfig, WorkloadConfig
from tests.references import run
from parbench.workloads import check, describe, make

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install 'parbench[hf]' torch==2.13.0")
pytestmark = pytest.mark.hf

V, D, L, H, T = 64, 32, 2, 4, 16
LLAMA = dict(name="hf-llama", layers=L, hidden=D, heads=H, seq_len=T, vocab_size=V)
# untied embedding + head, per layer q/k/v/o (4 d^2) + SwiGLU gate/up/down (3 x d x 4d) + 2 RMSNorms, final norm
LLAMA_PARAMS = 2 * V * D + L * (4 * D * D + 3 * D * 4 * D + 2 * D) + D  # 37024
# what tp=2 leaves replicated: the RMSNorm weights (2 per layer + the final one)
LLAMA_REPLICATED = L * 2 * D + D


def test_llama_from_config_has_the_formula_parameter_count():
    assert describe("hf-llama")["parameters"] == 2 * 256 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 256 + 2 * 64) + 64
    assert sum(p.numel() for p in make(WorkloadConfig(**LLAMA), 0).build(0).parameters()) == LLAMA_PARAMS


@pytest.mark.parametrize("strategy, per_rank_bytes", [
    ("ddp", [4 * LLAMA_PARAMS] * 2),
    ("fsdp", [4 * LLAMA_PARAMS // 2] * 2),  # every tensor has an even first dimension: exact halves
    ("tp", [4 * ((LLAMA_PARAMS - LLAMA_REPLICATED) // 2 + LLAMA_REPLICATED)] * 2),
])
def test_llama_runs_and_matches_single_process(tmp_path, strategy, per_rank_bytes):
    cfg = RunConfig(strategy=strategy, world_size=2, workload=WorkloadConfig(**LLAMA), global_batch_size=4,
                    steps=2, warmup_steps=2)
    rec = run(cfg, results_dir=tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert [r["mem_param_bytes"] for r in rec["per_rank"]] == per_rank_bytes
    assert rec["loss_max_abs_diff_vs_reference"] <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hf-llama", "hf-gpt2"])
def test_hf_pipeline_splits_decoder_layers(tmp_path, name):
    cfg = RunConfig(strategy="pipeline", world_size=2, workload=WorkloadConfig(**{**LLAMA, "name": name}),
                    global_batch_size=4, micro_batches=2, steps=2, warmup_steps=2)
    rec = run(cfg, results_dir=tmp_path)
    assert rec["status"] == "ok", rec.get("error")
    assert rec["loss_max_abs_diff_vs_reference"] <= 1e-5


def test_gpt2_declares_no_tp_plan_and_is_refused_before_spawning():
    with pytest.raises(ConfigError, match="workload 'hf-gpt2' provides no tensor-parallel plan"):
        check(RunConfig(strategy="tp", world_size=2, workload=WorkloadConfig(**{**LLAMA, "name": "hf-gpt2"})))


def test_heads_must_divide_hidden_for_hf_models():
    with pytest.raises(ConfigError, match="heads=3 does not divide hidden=32"):
        WorkloadConfig(**{**LLAMA, "heads": 3})
