"""The memory model's schedule, loss and tensor-parallel terms against independent counts: torch's own
pipeline schedules, the tensors torch's cross-entropy code allocates, and the layer arithmetic by hand."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest

from parbench.config import Schedule, Strategy
from parbench.sim import PRECISIONS, PRESETS, Layout
from parbench.sim.architecture import Architecture
from parbench.sim.layout import Recompute
from parbench.sim.memory import activation_bytes_per_layer, in_flight_micro_batches, loss_bytes, stage_memory
from parbench.sim.model import architecture_spec
from parbench.sim.stages import stages

BF16 = PRECISIONS["bf16"]
ARCH = Architecture(layers=8, hidden=256, heads=4, kv_heads=2, ffn_hidden=512, gated_mlp=True, vocab=1000, seq_len=64)


def _torch_peak_chunks_in_flight(schedule_class, p: int, v: int, m: int) -> list[int]:
    """Per pipeline rank, the most chunk forwards whose backward has not yet run, walking the action
    order torch.distributed.pipelining builds for the schedule (stages mocked, nothing runs)."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _ComputationType

    stage = mock.create_autospec(PipelineStage, instance=True)
    stage.group_rank, stage.group_size, stage.submod, stage.num_stages = 0, p, None, p * v
    order = schedule_class([stage] * v, m).pipeline_order
    peaks = []
    for rank in range(p):
        live = peak = 0
        for action in filter(None, order[rank]):
            live += {_ComputationType.FORWARD: 1, _ComputationType.FULL_BACKWARD: -1}.get(action.computation_type, 0)
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


@pytest.mark.parametrize("p, v, m", [(4, 2, 8), (4, 3, 8), (2, 2, 4)])
def test_interleaved_in_flight_equals_torchs_schedule(p, v, m):
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    lay = Layout(pp=p, global_batch_size=m, micro_batches=m, schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=v)
    peaks = _torch_peak_chunks_in_flight(ScheduleInterleaved1F1B, p, v, m)
    assert [in_flight_micro_batches(lay, s) * v for s in range(p)] == pytest.approx(peaks)


def test_stage_activations_count_every_chunk_of_the_stage():
    """Interleaved, p=4, v=2 chunks of one layer each: rank 1 (chunks 1 and 5, neither holding the embedding
    nor the head) keeps one layer's activations per chunk forward in flight in torch's schedule."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B

    m = architecture_spec(ARCH)
    lay = Layout(strategy=Strategy.HYBRID, pp=4, global_batch_size=8, micro_batches=8, precision=BF16,
                 attention="flash", schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=2)
    first = stages(m, 4, 2)[1]
    per_layer = activation_bytes_per_layer(m, lay)
    chunk_forwards = _torch_peak_chunks_in_flight(ScheduleInterleaved1F1B, 4, 2, 8)[1]
    assert stage_memory(m, lay, first).activation_bytes == int(per_layer * chunk_forwards)


def test_loss_holds_three_fp32_logit_buffers_or_four_vocab_parallel():
    """torch's cross_entropy backward: saved log-softmax, nll_loss's gradient, log_softmax's gradient;
    loss_parallel's fused backward adds exp(x) beside grad_input and their sum (fp32, s b V / t each)."""
    m = architecture_spec(ARCH, megatron=True)
    s, b, vocab = 64, 2, 1000
    plain = Layout(strategy=Strategy.HYBRID, global_batch_size=b, precision=BF16)
    assert loss_bytes(m, plain) == 3 * 4 * s * b * vocab
    tp = replace(plain, tp=4)
    assert loss_bytes(m, tp) == 4 * 4 * s * b * vocab / 4


def test_recomputed_layer_adds_only_beyond_the_loss_buffers():
    """The loss's buffers are freed before backward recomputes a layer: the stage peaks at the larger."""
    m = architecture_spec(ARCH, megatron=True)
    full = Layout(strategy=Strategy.HYBRID, global_batch_size=1, precision=BF16, attention="flash",
                  recompute=Recompute.FULL)
    whole = activation_bytes_per_layer(m, replace(full, recompute=Recompute.NONE))
    kept = activation_bytes_per_layer(m, full)
    sbh = 2 * 64 * 256
    (only,) = stages(m, 1, 1)
    big_loss = stage_memory(m, full, only)
    assert loss_bytes(m, full) > whole - kept
    assert big_loss.activation_bytes == int(8 * kept + 2 * sbh)  # checkpoints, embedding output, head input
    long_vocab = architecture_spec(replace(ARCH, vocab=10))
    small_loss = stage_memory(long_vocab, full, stages(long_vocab, 1, 1)[0])
    assert small_loss.activation_bytes == int(8 * kept + 2 * sbh + (whole - kept) - loss_bytes(long_vocab, full))


def test_sequence_parallel_saving_gathered_inputs_keeps_qkv_and_mlp_inputs_whole():
    """DTensor's ColwiseParallel saves the all-gathered norm outputs: 2 e s b h per layer instead of / t."""
    m = architecture_spec(ARCH, megatron=True)
    t, e, sbh = 4, 2, 64 * 1 * 256
    sp = Layout(strategy=Strategy.HYBRID, tp=t, global_batch_size=1, precision=BF16, attention="flash",
                sequence_parallel=True)
    gathered = replace(sp, sp_saves_gathered_input=True)
    assert activation_bytes_per_layer(m, gathered) - activation_bytes_per_layer(m, sp) == pytest.approx(
        2 * e * sbh * (1 - 1 / t))
    with pytest.raises(ValueError, match="sp_saves_gathered_input needs sequence_parallel"):
        Layout(tp=2, global_batch_size=1, sp_saves_gathered_input=True)


def test_torchtitan_pipeline_rows_use_torchtitans_default_micro_batches():
    """Tables 5-6 name no micro-batch count: torchtitan then splits the local batch into pp x stages-per-rank."""
    from parbench.sim.published_memory import runs

    pp_rows = {r.name: r.layout for r in runs() if r.memory_gib and r.layout.pp > 1}
    sizes = {name: (lay.micro_batches, lay.micro_batch_size) for name, lay in pp_rows.items()}
    assert sizes["Llama 3.1 405B FSDP 8 TP 8 PP 8 1f1b"] == (8, 4)
    assert sizes["Llama 3.1 405B FSDP 8 TP 8 PP 8 interleaved1f1b"] == (16, 2)
    assert all(v == (8, 1) for k, v in sizes.items() if "seq" in k)


def test_published_memory_is_the_worst_ranks_allocator_peak():
    """torchtitan reports each GPU's peak reserved memory and takes the maximum across GPUs (its footnote 1):
    the prediction compared with it is the worst stage's total less the context, not a sum of per-kind maxima."""
    from parbench.sim.published_memory import compare_runs, runs

    run = next(r for r in runs() if r.memory_gib and r.layout.pp > 1)
    model = architecture_spec(run.arch, megatron=True)
    cluster = PRESETS[run.cluster]
    worst = max(stage_memory(model, run.layout, st, cluster).allocator_bytes for st in stages(model, 8, run.layout.v))
    row = next(r for r in compare_runs() if r["name"] == run.name)
    assert row["allocator_gib_predicted"] == pytest.approx(worst / 2**30)


def test_zero2_under_a_pipeline_holds_whole_fp32_gradients_until_the_stage_reduce_scatters():
    """A stage reduce-scatters once, after its last micro-batch's backward: until then each gradient of
    the stage is whole, in the reduce dtype (fp32 under bf16 mixed precision). Without a pipeline, ZeRO-2
    reduce-scatters every micro-batch and holds no whole gradient beyond the one in flight."""
    m = architecture_spec(ARCH)
    lay = Layout(strategy=Strategy.HYBRID, dp=4, pp=2, zero=2, global_batch_size=16, micro_batches=4, precision=BF16,
                 attention="flash", schedule=Schedule.ONE_F_ONE_B)
    st = stages(m, 2, 1)[0]
    numel = sum(t.local_numel(1) for t in st.tensors)
    assert stage_memory(m, lay, st).unsharded_bytes == numel * 4
    assert stage_memory(m, replace(lay, pp=1, dp=8, global_batch_size=32), stages(m, 1, 1)[0]).unsharded_bytes == 0


def test_fsdp2_zero2_under_a_pipeline_also_holds_the_stages_gathered_bf16_parameters():
    """FSDP2 shards parameters at rest even with ``reshard_after_forward=False``: a stage gathers them (in the
    compute dtype, 2 bytes under bf16) at its first forward and keeps them until its last backward, beside the
    whole fp32 gradients: 2 + 4 bytes per stage parameter, where the textbook ZeRO-2 holds only the gradients."""
    m = architecture_spec(ARCH)
    lay = Layout(strategy=Strategy.HYBRID, dp=4, pp=2, zero=2, global_batch_size=16, micro_batches=4, precision=BF16,
                 attention="flash", schedule=Schedule.ONE_F_ONE_B, fsdp2=True)
    st = stages(m, 2, 1)[0]
    numel = sum(t.local_numel(1) for t in st.tensors)
    assert stage_memory(m, lay, st).unsharded_bytes == numel * (2 + 4)


def test_torchtitan_pipeline_rows_gather_each_stage_once_a_step():
    """torchtitan's ``apply_fsdp`` sets ``reshard_after_forward=False`` whenever pipeline parallelism is on (to
    avoid an all-gather per micro-batch): its Tables 5-6 rows gather a stage's parameters once a step and
    reduce-scatter once, where the runner's FSDP (resharding after every forward) gathers m + 1 times."""
    from parbench.sim.comm import fsdp_rounds
    from parbench.sim.published_memory import TT_H100, runs

    pp_rows = [r for r in runs() if r.source == TT_H100 and r.layout.pp > 1]
    assert len(pp_rows) == 6 and all(fsdp_rounds(r.layout) == (1, 1) for r in pp_rows)
    assert all(r.layout.fsdp2 for r in pp_rows)
    runner = Layout(strategy=Strategy.HYBRID, dp=2, pp=2, zero=3, global_batch_size=8, micro_batches=4, fsdp2=True)
    assert fsdp_rounds(runner) == (5, 1)


def test_the_interleaved_405b_rows_memory_says_it_ran_torchtitans_16_micro_batches_of_2():
    """Table 5 names no micro-batch count. torchtitan's default (one micro-batch per stage: 16 of 2 for 2 stages
    per rank) predicts the interleaved row's reserved memory within 3% of the published 72.7 GB; the 1F1B row's
    8 micro-batches of 4 would put it 8% above, and would not give the table's drop from the 1F1B row's 82.5."""
    from parbench.sim.predict import predict
    from parbench.sim.published_memory import TT_H100, runs

    table5 = {r.layout.schedule: r for r in runs() if r.source == TT_H100 and r.table == "Table 5"}
    row = table5[Schedule.INTERLEAVED_1F1B]

    def allocator_gib(layout: Layout) -> float:
        p = predict(architecture_spec(row.arch, megatron=True), layout, PRESETS[row.cluster])
        return (p.peak_memory_bytes - p.memory.context_bytes) / 2**30

    assert (row.layout.micro_batches, row.layout.micro_batch_size) == (16, 2)
    assert allocator_gib(row.layout) == pytest.approx(row.memory_gib, rel=0.03)
    assert allocator_gib(replace(row.layout, micro_batches=8)) > 1.08 * row.memory_gib
    assert table5[Schedule.ONE_F_ONE_B].memory_gib - row.memory_gib > 8

def test_a_fused_gate_saves_three_mlp_tensors_eager_torch_four():
    """Per layer, flash attention, no sequence parallelism, bf16 (e = 2), tp = 2: the norms' inputs and
    outputs 4 e sbh, then / t: q, k, v e sb(h + 2k), the attention output e sbh, the log-sum-exp 4 a sb, and
    the gated MLP's gate, up and down input (3 e sbf) when fused; eager torch keeps silu's output too."""
    m = architecture_spec(ARCH)
    s, b, h, k, f, a, t, e = 64, 2, 256, 128, 512, 4, 2, 2
    fused = Layout(strategy=Strategy.HYBRID, tp=t, global_batch_size=b, precision=BF16, attention="flash")
    by_hand = 4 * e * s * b * h + (e * s * b * (h + 2 * k) + e * s * b * h + 4 * a * s * b + 3 * e * s * b * f) / t
    assert activation_bytes_per_layer(m, fused) == pytest.approx(by_hand)
    eager = replace(fused, fused_elementwise=False)
    assert activation_bytes_per_layer(m, eager) - activation_bytes_per_layer(m, fused) == pytest.approx(e * s * b * f / t)


def test_transformer_engine_fp8_saves_one_byte_linear_inputs():
    """te_fp8: the qkv and MLP inputs (the norms' outputs), the projection's input (an FP8 copy beside flash's
    bf16 output) and the down projection's input are kept as 1-byte FP8 tensors; every other saved tensor
    keeps e = 2 bytes (tp = 2, no sequence parallelism, fused gate)."""
    m = architecture_spec(ARCH)
    s, b, h, k, f, a, t, e = 64, 2, 256, 128, 512, 4, 2, 2
    te = Layout(strategy=Strategy.HYBRID, tp=t, global_batch_size=b, precision=PRECISIONS["fp8"], attention="flash",
                te_fp8=True)
    by_hand = (2 * e * s * b * h + 2 * 1 * s * b * h
               + (e * s * b * (h + 2 * k) + e * s * b * h + 1 * s * b * h + 4 * a * s * b + 2 * e * s * b * f + 1 * s * b * f) / t)
    assert activation_bytes_per_layer(m, te) == pytest.approx(by_hand)


def test_autocast_keeps_the_residual_stream_in_fp32_and_a_bf16_copy_of_every_linear():
    """``amp`` (torch.autocast over float32 weights): the two norms' inputs are float32 residual-stream
    tensors (4 bytes), every other saved tensor bf16; the stage also holds autocast's cached bf16 copy of each
    Linear weight and bias, and the embedding's output is float32. By hand for ARCH (biases on every Linear)."""
    amp = PRECISIONS["amp"]
    m = architecture_spec(ARCH)
    s, b, h, k, f, a, e, r = 64, 2, 256, 128, 512, 4, 2, 4
    lay = Layout(strategy=Strategy.SINGLE, global_batch_size=b, precision=amp, attention="flash", fused_elementwise=False)
    by_hand = 2 * r * s * b * h + 2 * e * s * b * h + e * s * b * (h + 2 * k) + e * s * b * h + 4 * a * s * b + 4 * e * s * b * f
    assert activation_bytes_per_layer(m, lay) == pytest.approx(by_hand)
    # q, k, v, o, gate, up, down with their biases, per layer; the head
    linear = 8 * (h * h + 2 * h * k + h * h + 3 * h * f) + 8 * (h + 2 * k + h + 2 * f + h) + ARCH.vocab * h
    plain = replace(lay, precision=replace(amp, weight_cast_bytes=0))
    (stage,) = stages(m, 1, 1)
    extra = stage_memory(m, lay, stage).activation_bytes - stage_memory(m, plain, stage).activation_bytes
    assert extra == 2 * linear
    # the states: float32 weights and gradients, two float32 moments, no master copy
    mem = stage_memory(m, lay, stage)
    assert (mem.param_bytes, mem.grad_bytes) == (4 * m.param_numel, 4 * m.param_numel)


def test_fsdp_under_autocast_gathers_bf16_weights_and_casts_none():
    """FSDP2's MixedPrecisionPolicy(param_dtype=bf16) hands autocast bf16 weights: no cached copies (zero 2, 3)."""
    m = architecture_spec(ARCH)
    (stage,) = stages(m, 1, 1)
    for zero in (2, 3):
        lay = Layout(strategy=Strategy.FSDP, dp=2, global_batch_size=4, precision=PRECISIONS["amp"], zero=zero)
        plain = replace(lay, precision=replace(PRECISIONS["amp"], weight_cast_bytes=0))
        assert stage_memory(m, lay, stage).activation_bytes == stage_memory(m, plain, stage).activation_bytes


def test_megatron_cross_entropy_holds_one_fp32_copy_of_the_logits_and_the_heads_bf16_gradient():
    """Megatron-LM's vocabulary-parallel cross-entropy casts the rank's logits to float32 once and works in place
    (softmax saved, then turned into the gradient); the head's backward receives that gradient in bf16. torch's
    loss_parallel holds four float32 buffers of the same logits at its peak."""
    model = architecture_spec(ARCH, megatron=True)
    torch_loss = Layout(strategy=Strategy.HYBRID, tp=2, global_batch_size=4, micro_batches=1, precision=BF16,
                        attention="flash")
    megatron = replace(torch_loss, megatron_cross_entropy=True)
    logits = 64 * 4 * 1000 // 2  # seq x micro-batch x vocabulary / tp on one rank
    assert loss_bytes(model, megatron) == logits * (4 + 2)
    assert loss_bytes(model, torch_loss) == logits * 4 * 4
    # compiled (torchtitan compiles its loss with the model): the bf16 logits it saves and its bf16 gradient
    assert loss_bytes(model, replace(torch_loss, compiled_loss=True)) == logits * (2 + 2)


def test_llm_foundry_runs_flash_attns_fused_cross_entropy_which_lets_its_published_layouts_fit():
    """llm-foundry's MPT defaults to flash-attn's CrossEntropyLoss: it saves the bf16 logits it is given and
    returns a bf16 gradient, 4 bytes a logit where torch's loss holds three float32 buffers (12). Its H100
    table ran the 760M MPT without checkpointing at 24 x 2048 tokens per micro-batch on 8 GPUs (MFU 34.9%)."""
    from parbench.sim.layout import SOFTWARE
    from parbench.sim.predict import predict
    from parbench.sim.published_memory import FOUNDRY, _fsdp, _mpt, runs

    assert all(r.layout.compiled_loss for r in runs() if r.source == FOUNDRY)
    model = architecture_spec(_mpt("760m", 2048), megatron=True)
    torch_loss = _fsdp(gpus=8, local=48, micro=24)
    foundry = replace(torch_loss, **SOFTWARE["llm-foundry"].layout_flags(pp=1, zero=3, precision=torch_loss.precision))
    assert loss_bytes(model, foundry) == 24 * 2048 * 50368 * (2 + 2)
    assert loss_bytes(model, torch_loss) == 24 * 2048 * 50368 * 4 * 3
    assert predict(model, foundry, PRESETS["h100-sxm"]).feasible
    assert not predict(model, torch_loss, PRESETS["h100-sxm"]).feasible


def test_every_layout_llm_foundrys_tables_trained_is_predicted_to_fit_but_one():
    """All 112 BF16 rows of its H100 and A100 80GB tables trained; the model refuses one layout on each, the 3B
    at 3 x 8192 tokens without checkpointing (80.1 GiB of the H100's 79.6, 0.6% over). The validation set is
    19 of those rows."""
    from parbench.sim import published_memory as pm

    check = pm.foundry_table_check()
    assert {name: c["rows"] for name, c in check.items()} == {"H100 80GB BF16": 52, "A100 80GB": 60}
    assert [c["trained_predicted_not_to_fit"] for c in check.values()] == [["MPT-3b seq 8192 on 8 (no AC)"]] * 2
    assert len([r for r in pm.runs() if r.source == pm.FOUNDRY]) == len(pm._foundry()) == 19


def test_fragmentation_is_a_share_of_what_a_step_allocates_not_of_the_state_allocated_once():
    """The caching allocator's unusable remainders come from the tensors each step makes and frees; weights,
    gradients and optimizer state, allocated once, add none."""
    from parbench.sim.memory import with_cluster_terms

    model, cluster = architecture_spec(ARCH), PRESETS["h100-sxm"]
    lay = Layout(strategy=Strategy.HYBRID, dp=4, zero=1, global_batch_size=8, micro_batches=2, precision=BF16,
                 attention="flash")
    raw = stage_memory(model, lay, stages(model, 1, 1)[0])
    mem = with_cluster_terms(raw, lay, cluster)
    churn = raw.activation_bytes + raw.unsharded_bytes + raw.loss_bytes + raw.buffer_bytes
    assert churn > 0 and mem.fragmentation_bytes == int(0.13 * churn)
    heavier = replace(raw, param_bytes=10 * raw.param_bytes, optim_bytes=10 * raw.optim_bytes)
    assert with_cluster_terms(heavier, lay, cluster).fragmentation_bytes == mem.fragmentation_bytes


def test_heads_of_their_own_width_keep_q_and_the_attention_output_at_that_width():
    """q (and the attention output flash saves and the projection reads) is heads x head_dim wide, k and v
    kv_heads x head_dim: heads of 128 on the 256-wide model with 4 heads and 2 k/v heads make q 512 instead of
    256 and k, v 256 instead of 128, so a layer keeps e s b ((512 + 2 x 256) + 512 - ((256 + 2 x 128) + 256))
    more bytes (q, k, v and the attention output)."""
    plain = Layout(strategy=Strategy.HYBRID, global_batch_size=2, micro_batches=1, precision=BF16, attention="flash")
    wide = replace(ARCH, head_size=128)
    extra = activation_bytes_per_layer(architecture_spec(wide), plain) - activation_bytes_per_layer(architecture_spec(ARCH), plain)
    assert extra == 2 * 64 * 2 * ((512 + 2 * 256) + 512 - ((256 + 2 * 128) + 256))
    with pytest.raises(ValueError, match="heads=3 does not divide hidden=256"):
        replace(ARCH, heads=3, kv_heads=1)
    assert replace(ARCH, heads=3, kv_heads=1, head_size=64).q_width == 192


def test_a_rank_s_total_is_every_kind_it_holds():
    """``Memory.total_bytes`` spells its fields out for speed: each kind, given its own power of two, must count
    once (a field added to the record and left out of the sum fails here)."""
    from dataclasses import fields

    from parbench.sim.memory import Memory

    kinds = [f.name for f in fields(Memory)]
    mem = Memory(**{name: 1 << i for i, name in enumerate(kinds)})
    assert mem.total_bytes == (1 << len(kinds)) - 1 == sum(mem.as_dict().values())
