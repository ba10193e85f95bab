"""Search: rejected layouts carry their reason, the ranking finds the known best layout on a small case,
and the Pareto front is non-dominated."""

from __future__ import annotations

from dataclasses import replace

from parbench.config import WorkloadConfig
from parbench.sim import PRECISIONS, PRESETS, Recompute, model_spec
from parbench.sim.search import pareto_front, search

GPT_175B = WorkloadConfig(name="transformer", layers=96, hidden=12288, heads=96, seq_len=2048, vocab_size=51200)


def test_a_model_that_cannot_fit_is_rejected_with_the_memory_reason():
    cands = search(model_spec(GPT_175B, megatron=True), PRESETS["a100-80gb"], gpus=8, global_batch=8,
                   precision=PRECISIONS["bf16"])
    assert cands and not any(c.feasible for c in cands)
    reasons = {c.reason.split(" ")[0] for c in cands}
    assert reasons <= {"needs", "pp=16", "pp="} | {r for r in reasons if r.startswith("pp=")}
    assert any(c.reason.startswith("needs") and "GiB per rank > 80.00 GiB" in c.reason for c in cands)


def test_checking_memory_first_keeps_every_verdict_and_prediction_of_predicting_each_layout_whole():
    """The search times only the layouts that fit. Against ``predict`` run on every layout: the same layouts fit,
    each with the same prediction, each rejection gives the same reason; those that do not fit come nearest to
    fitting first, then the layouts that are not layouts."""
    from parbench.sim.predict import predict
    from parbench.sim.search import SearchOptions, layouts

    shape = WorkloadConfig(name="transformer", layers=8, hidden=1024, heads=16, seq_len=2048, vocab_size=32000)
    model, gpu = model_spec(shape, megatron=True), replace(PRESETS["h100-sxm"], memory_bytes=3 * 2**30)
    cands = search(model, gpu, gpus=8, global_batch=32, precision=PRECISIONS["bf16"])
    whole = {}
    for layout, reason in layouts(model, gpu, gpus=8, global_batch=32, options=SearchOptions(precision=PRECISIONS["bf16"])):
        if layout is not None:
            whole[layout] = predict(model, layout, gpu)
    fit = {c.layout: c.prediction for c in cands if c.feasible}
    assert fit and len(fit) < len(whole) / 2  # most do not fit: the case exercises the shortcut
    assert fit == {layout: p for layout, p in whole.items() if p.feasible}
    assert all(c.prediction is None and c.reason == whole[c.layout].reasons[0]
               and c.peak_memory_bytes == whole[c.layout].peak_memory_bytes
               for c in cands if c.layout is not None and not c.feasible)
    rejected = [c for c in cands if not c.feasible]
    peaks = [c.peak_memory_bytes for c in rejected if c.layout is not None]
    assert peaks == sorted(peaks) and peaks[0] > gpu.memory_bytes
    assert all(c.layout is None for c in rejected[len(peaks):])


def test_a_search_in_two_processes_gives_every_candidate_of_one_in_the_same_order():
    """``jobs=2`` checks the layouts in forked processes: the same candidates (layout, prediction, reason, peak) in
    the same order as one process gives, and the progress still reaches every layout, rule-breakers included."""
    shape = WorkloadConfig(name="transformer", layers=8, hidden=1024, heads=16, seq_len=2048, vocab_size=32000)
    model, gpu = model_spec(shape, megatron=True), replace(PRESETS["h100-sxm"], memory_bytes=3 * 2**30)
    one = search(model, gpu, gpus=16, global_batch=32, precision=PRECISIONS["bf16"])
    seen: list[tuple[int, int]] = []
    two = search(model, gpu, gpus=16, global_batch=32, precision=PRECISIONS["bf16"], jobs=2,
                 progress=lambda done, total: seen.append((done, total)))
    assert any(c.feasible for c in one) and any(c.layout is None for c in one)
    assert two == one
    assert seen[-1] == (len(one), len(one)) and [d for d, _ in seen] == sorted(d for d, _ in seen)


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


def test_context_parallel_degrees_leave_each_rank_at_least_the_search_s_share_of_the_sequence():
    """cp divides the GPUs, splits the sequence into 2 x cp equal chunks and leaves every rank 4096 tokens or more:
    131072 tokens on 64 GPUs allow 1-32 (131072 / 32 = 4096), 8192 only 1 and 2, 2048 none; 12288 (3 x 4096) on
    12 GPUs 1, 2 and 3 (12288 / 4 = 3072 is too few); 8194 on 2 none (not 4 equal chunks); a model without attention
    has no sequence to split."""
    from parbench.sim.search import CP_MIN_TOKENS, cp_options

    assert CP_MIN_TOKENS == 4096

    def seq(n):
        return model_spec(replace(GPT_175B, layers=2, seq_len=n), megatron=True)

    assert cp_options(seq(131072), 64) == [1, 2, 4, 8, 16, 32]
    assert cp_options(seq(8192), 256) == [1, 2]
    assert cp_options(seq(2048), 4096) == [1]
    assert cp_options(seq(12288), 12) == [1, 2, 3]
    assert cp_options(seq(8194), 2) == [1]  # 4097 tokens a rank, but no 4 equal chunks for the balanced ring
    assert cp_options(model_spec(WorkloadConfig(name="mlp", layers=2, hidden=64)), 8) == [1]


def test_a_long_sequence_search_tries_context_parallelism_unless_cp_is_given():
    """At 32768 tokens on 8 GPUs the search lays out cp 1, 2, 4 and 8 (32768 / 8 = 4096 a rank), each with the
    rest of the mesh over dp x tp x pp; a given cp fixes it, and cp 1 gives the search without context parallelism."""
    from parbench.sim.search import SearchOptions, layouts

    long = model_spec(WorkloadConfig(name="transformer", layers=4, hidden=512, heads=8, seq_len=32768,
                                     vocab_size=1024), megatron=True)

    def cps(**given):
        opts = SearchOptions(precision=PRECISIONS["bf16"], **given)
        got = [lay for lay, _ in layouts(long, PRESETS["h100-sxm"], gpus=8, global_batch=8, options=opts) if lay]
        assert all(lay.dp * lay.tp * lay.pp * lay.cp == 8 for lay in got)
        return {lay.cp for lay in got}

    assert cps() == {1, 2, 4, 8}
    assert cps(cp=2) == {2} and cps(cp=1) == {1}
    best = search(long, PRESETS["h100-sxm"], gpus=8, global_batch=8, precision=PRECISIONS["bf16"])
    assert {c.layout.cp for c in best if c.feasible} == {1, 2, 4, 8}


def test_zero_3_layouts_are_tried_as_hsdp_at_every_split_of_their_data_parallel_ranks():
    """On 16 GPUs at tp = pp = cp = 1 (dp 16) ZeRO-3 is laid out with 1, 2, 4 and 8 replicas (shard groups of 16, 8,
    4 and 2 ranks; 16 replicas of one rank would shard nothing), ZeRO 0-2 with none; a given --replicate fixes it."""
    from parbench.sim.search import SearchOptions, layouts

    small = model_spec(WorkloadConfig(name="transformer", layers=4, hidden=256, heads=4, seq_len=128,
                                      vocab_size=256), megatron=True)

    def replicas(**given):
        opts = SearchOptions(precision=PRECISIONS["bf16"], tp=1, pp=1, cp=1, micro_batch=1, **given)
        got = [lay for lay, _ in layouts(small, PRESETS["h100-sxm"], gpus=16, global_batch=16, options=opts) if lay]
        return {(lay.zero, lay.replicate) for lay in got}

    assert replicas() == {(0, 1), (1, 1), (2, 1), (3, 1), (3, 2), (3, 4), (3, 8)}
    assert replicas(zero=3, replicate=4) == {(3, 4)}


def test_the_search_chart_plots_the_fastest_layouts_its_front_and_its_best(monkeypatch):
    """The dashboard's search chart: one trace per mesh family holding the fastest ``SEARCH_PLOTTED`` feasible
    layouts (each once), the Pareto front as its own line, and the best layout marked; the title says how many
    were left out."""
    from parbench.sim import whatif

    small = WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=256, vocab_size=1000)
    cands = search(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=16, global_batch=64,
                   precision=PRECISIONS["bf16"])
    feasible = [c for c in cands if c.feasible]
    monkeypatch.setattr(whatif, "SEARCH_PLOTTED", 40)
    assert len(feasible) > 40
    fig = whatif.search_figure(cands, PRESETS["h100-sxm"]).to_dict()
    traces = {t["name"]: t for t in fig["data"]}
    families = [t for name, t in traces.items() if name not in ("Pareto front", "best")]
    assert sum(len(t["x"]) for t in families) == 40
    assert {t["name"] for t in families} == {whatif.mesh_family(c.layout) for c in feasible[:40]}
    assert len(traces["Pareto front"]["x"]) == len(pareto_front(cands))
    assert list(traces["best"]["y"]) == [feasible[0].prediction.throughput_samples_per_s]
    assert fig["layout"]["title"]["text"].startswith(f"{len(feasible)} layouts fit; the fastest 40 shown")
    rows = whatif.search_rows(cands, 5)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5] and rows[0]["samples/s"] >= rows[-1]["samples/s"]


def test_the_search_tries_every_virtual_stage_count_that_splits_the_layers_evenly():
    """Beside 2 and 4, every v whose pp x v chunks hold the layers evenly: 96 layers over pp 8 leave 12 a rank, so
    v = 2, 3, 4, 6, 12; 80 over pp 4 (Llama 2 70B, NeMo's v 5) 20: 2, 4, 5, 10, 20; a prime 61 none beyond 2 and 4.
    With the embedding and the loss counted as layers, Llama 3.1 405B's 126 blocks are 128 (16 a rank at pp 8)."""
    from parbench.sim.search import SearchOptions, layouts, virtual_stage_options

    assert virtual_stage_options(96, 8) == [2, 3, 4, 6, 12]
    assert virtual_stage_options(80, 4) == [2, 4, 5, 10, 20]
    assert virtual_stage_options(61, 4) == [2, 4]
    assert virtual_stage_options(126 + 2, 8) == [2, 4, 8, 16]
    small = WorkloadConfig(name="transformer", layers=12, hidden=256, heads=4, seq_len=128, vocab_size=256)
    got = {(lay.schedule.value, lay.v) for lay, _ in layouts(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=2,
                                                              global_batch=4, options=SearchOptions(precision=PRECISIONS["bf16"],
                                                                                                    pp=2, micro_batch=1))
           if lay is not None}
    assert got == {("1f1b", 1)} | {("interleaved1f1b", v) for v in (2, 3, 4, 6)}


def test_a_given_interleaved_schedule_tries_every_count_and_refuses_one_stage():
    """``--schedule interleaved1f1b`` without ``--virtual-stages`` still tries every count (12 layers over pp 2: v 2,
    3, 4 and 6), and a pipeline of one stage is rejected once, with the rule, not predicted as an interleaved layout."""
    from parbench.config import Schedule
    from parbench.sim.search import SearchOptions, layouts

    small = WorkloadConfig(name="transformer", layers=12, hidden=256, heads=4, seq_len=128, vocab_size=256)
    opts = SearchOptions(precision=PRECISIONS["bf16"], schedule=Schedule.INTERLEAVED_1F1B, micro_batch=1, zero=0,
                         recompute=Recompute.NONE, tp=1)
    got = list(layouts(model_spec(small, megatron=True), PRESETS["h100-sxm"], gpus=2, global_batch=4, options=opts))
    assert sorted(lay.v for lay, _ in got if lay is not None and lay.pp == 2) == [2, 3, 4, 6]
    rule = "schedule interleaved1f1b needs pp > 1 (one stage has no pipeline bubble to shrink)"
    assert [r for lay, r in got if lay is None] == [rule]
