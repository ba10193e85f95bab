"""Simulator speed: one evaluation of a 4096-GPU layout well under 20 ms, a full 4096-GPU
layout search and a mixture of experts' search (DeepSeek-V3: 61 layers of 256 experts, 44,000 parameter
tensors) each under a minute on 2 cores. Deterministic figures ride along in extra_info."""

from __future__ import annotations

import pytest

from parbench.config import Strategy, WorkloadConfig
from parbench.sim import PRECISIONS, PRESETS, Layout, Recompute, model_spec, predict
from parbench.sim.comm import rank_ops
from parbench.sim.model import architecture_spec
from parbench.sim.models import MODELS
from parbench.sim.search import search

GPT_175B = WorkloadConfig(name="transformer", layers=96, hidden=12288, heads=96, seq_len=2048, vocab_size=51200)


@pytest.fixture(scope="module")
def model():
    return model_spec(GPT_175B, megatron=True)


def test_one_evaluation_4096_gpus(benchmark, model):
    layout = Layout(strategy=Strategy.HYBRID, dp=64, tp=8, pp=8, global_batch_size=2048, micro_batches=32, zero=1,
                    recompute=Recompute.SELECTIVE, sequence_parallel=True, precision=PRECISIONS["bf16"])
    benchmark.group = "sim"
    # cold: the layout's ops are cached per (model, layout), so each round starts without them
    p = benchmark.pedantic(predict, args=(model, layout, PRESETS["h100-sxm"]), setup=rank_ops.cache_clear,
                           rounds=50, iterations=1)
    benchmark.extra_info.update(gpus=layout.world_size, comm_parameter_bytes=p.comm_bytes["parameter"],
                                comm_intermediate_bytes=p.comm_bytes["intermediate"])
    assert p.world_size == 4096 and p.feasible


def _search(benchmark, model, cluster: str, gpus: int, global_batch: int) -> list:
    benchmark.group = "sim"
    cands = benchmark.pedantic(search, args=(model, PRESETS[cluster]), rounds=1, iterations=1,
                               kwargs={"gpus": gpus, "global_batch": global_batch, "precision": PRECISIONS["bf16"]})
    feasible = [c for c in cands if c.feasible]
    benchmark.extra_info.update(evaluated=len(cands), feasible=len(feasible))
    assert feasible and feasible[0].prediction.throughput_samples_per_s >= feasible[-1].prediction.throughput_samples_per_s
    return feasible


def test_full_search_4096_gpus(benchmark, model):
    if benchmark.disabled:
        pytest.skip("the 4096-GPU search takes 13-18 s: it runs with --benchmark-enable "
                    "(tests/sim/test_search.py checks the search itself at small scale)")
    _search(benchmark, model, "h100-sxm", 4096, 2048)


def test_moe_search_256_gpus(benchmark):
    """DeepSeek-V3 on 256 GB200s: 28,486 layouts, 34-42 s on the 2-core machine since the search times only the
    layouts that fit (91-95 s timing every layout, the same day; 38 s on a faster day; 15,750 layouts and 22 s before
    the search tried whole experts, expert parallelism folded over the tensor-parallel ranks, wherever tp > 1; 7
    minutes when every layout walked the model's tensors one by one)."""
    if benchmark.disabled:
        pytest.skip("the DeepSeek-V3 search takes 34-42 s: it runs with --benchmark-enable")
    feasible = _search(benchmark, architecture_spec(MODELS["deepseek-v3"].arch, megatron=True), "gb200-nvl72", 256, 4096)
    assert benchmark.extra_info["evaluated"] == 28486 and feasible[0].layout.ep > 1
