"""Search: rejected layouts carry their reason, the ranking finds the known best layout on a small case,
and the Pareto front is non-dominated."""

from __future__ import annotations

from dataclasses import replace

from parbench.config import WorkloadConfig
from parbench.sim import PRECISIONS, PRESETS, model_spec
from parbench.sim.search import pareto_front, search

GPT_175B = WorkloadConfig(name="transformer", layers=96, hidden=12288, heads=96, seq_len=2048, vocab_size=51200)


def test_a_model_that_cannot_fit_is_rejected_with_the_memory_reason():
    cands = search(model_spec(GPT_175B, megatron=True), PRESETS["a100-80gb"], gpus=8, global_batch=8,
                   precision=PRECISIONS["bf16"])
    assert cands and not any(c.feasible for c in cands)
    reasons = {c.reason.split(" ")[0] for c in cands}
    assert reasons <= {"needs", "pp=16", "pp="} | {r for r in reasons if r.startswith("pp=")}
    assert any(c.reason.startswith("needs") and "GiB per rank > 80.00 GiB" in c.reason for c in cands)


def test_rule_breaking_layouts_are_rejected_with_the_rule():
    small = WorkloadConfig(name="transformer", layers=2, hidden=256, heads=4, seq_len=128, vocab_size=256)
    cands = search(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=8, global_batch=8,
                   precision=PRECISIONS["bf16"])
    assert any(c.reason == "pp=4 > layers=2" for c in cands)
    assert any(c.reason == "pp=8 > layers=2" for c in cands)


def test_a_given_pipeline_degree_that_does_not_divide_the_gpus_is_a_rejection_not_a_crash():
    """8 GPUs over tp 2 leave 4: a given pp of 8 cannot split them (dp would be 4 // 8 = 0)."""
    from parbench.sim.search import SearchOptions, layouts

    small = WorkloadConfig(name="transformer", layers=16, hidden=256, heads=4, seq_len=128, vocab_size=256)
    got = list(layouts(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=8, global_batch=8,
                       options=SearchOptions(precision=PRECISIONS["bf16"], tp=2, pp=8)))
    assert got == [(None, "pp=8 does not divide gpus / (cp x tp) = 4")]


def test_search_ranks_pure_data_parallelism_first_for_a_small_model_on_fast_links():
    """A 12-layer, 768-wide model fits on one device: with plenty of batch, every model-parallel
    split only adds communication and bubbles, so dp=8 with no recomputation is the known best."""
    small = WorkloadConfig(name="transformer", layers=12, hidden=768, heads=12, seq_len=1024, vocab_size=50304)
    cands = search(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=8, global_batch=64,
                   precision=PRECISIONS["bf16"])
    best = cands[0].layout
    assert (best.dp, best.tp, best.pp, best.recompute.value) == (8, 1, 1, "none")
    throughputs = [c.prediction.throughput_samples_per_s for c in cands if c.feasible]
    assert throughputs == sorted(throughputs, reverse=True)


def test_tight_memory_makes_sharding_or_recompute_the_winner():
    """The same small model on a device with 3 GiB: unsharded dp no longer fits; the best is sharded or recomputed."""
    small = WorkloadConfig(name="transformer", layers=12, hidden=768, heads=12, seq_len=1024, vocab_size=50304)
    tiny_gpu = replace(PRESETS["h100-sxm"], memory_bytes=3 * 2**30)
    cands = search(model_spec(small, megatron=True), tiny_gpu, gpus=8, global_batch=64, precision=PRECISIONS["bf16"])
    best = next(c for c in cands if c.feasible).layout
    assert best.zero > 0 or best.recompute.value != "none" or best.tp > 1 or best.pp > 1
    unsharded = [c for c in cands if c.layout and c.layout.dp == 8 and c.layout.zero == 0
                 and c.layout.recompute.value == "none" and c.layout.micro_batch_size == 8]
    assert unsharded and all(c.reason.startswith("needs") for c in unsharded)


def test_pareto_front_is_not_dominated():
    small = WorkloadConfig(name="transformer", layers=8, hidden=1024, heads=16, seq_len=1024, vocab_size=32000)
    cands = search(model_spec(small, megatron=True), PRESETS["a100-80gb"], gpus=16, global_batch=64,
                   precision=PRECISIONS["bf16"])
    front = pareto_front(cands)
    feasible = [c for c in cands if c.feasible]
    for f in front:
        fp = f.prediction
        assert not any(c.prediction.throughput_samples_per_s > fp.throughput_samples_per_s
                       and c.prediction.peak_memory_bytes < fp.peak_memory_bytes for c in feasible)
    mems = [c.prediction.peak_memory_bytes for c in front]
    assert mems == sorted(mems) and len(front) >= 2
