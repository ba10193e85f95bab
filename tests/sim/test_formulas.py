"""The simulator's formulas against values computed by hand (no torch, no process group)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from parbench.config import DataMode, RunConfig, Schedule, Strategy, WorkloadConfig
from parbench.layout import ConfigError
from parbench.metrics.categories import CATEGORIES
from parbench.sim import (
    PRECISIONS,
    PRESETS,
    Layout,
    Recompute,
    layout_from_run,
    model_spec,
    predict,
)
from parbench.sim.comm import (
    bytes_by_category,
    ddp_buckets,
    fsdp_padded_numel,
    rank_ops,
    zero1_shards,
)
from parbench.sim.hardware import Link, algorithm_factors, collective_time_s
from parbench.sim.memory import activation_bytes_per_layer, in_flight_micro_batches
from parbench.sim.model import Tensor
from parbench.sim.timing import optimizer_pass_bytes_per_element
from parbench.splits import contiguous_splits as split_units

MiB = 1024 * 1024


def test_transformer_parameter_count_and_flops_match_the_workload_formulas():
    w = WorkloadConfig(name="transformer", layers=4, hidden=64, heads=4, seq_len=32, vocab_size=256)
    m = model_spec(w)
    d, L, v, t = 64, 4, 256, 32
    # embeddings (v + t) d; per block 12 d^2 + 13 d (q,k,v,proj,up,down weights+biases, two LayerNorms); head 2d + v d
    assert m.param_numel == (v + t) * d + L * (12 * d * d + 13 * d) + 2 * d + v * d == 234880
    assert m.forward_flops_per_sample == t * (2 * (L * 12 * d * d + d * v) + 2 * L * 2 * t * d)


def test_ddp_buckets_close_at_1_mib_then_25_mib_in_reverse_order():
    sizes = [10 * MiB, 30 * MiB, 512 * 1024, 700 * 1024]  # registration order; the reducer walks it backwards
    assert ddp_buckets(sizes) == [512 * 1024 + 700 * 1024, 30 * MiB, 10 * MiB]


def test_ddp_bytes_use_integer_division_per_bucket():
    """mlp 784-1024-1024-1024-10 at n=3: reversed, the first bucket closes past 1 MiB (4,239,400 B), the rest
    (7,413,760 B) stays under 25 MiB; each all-reduce sends 2(n-1) S // n."""
    cfg = RunConfig(strategy="ddp", world_size=3, global_batch_size=12,
                    workload=WorkloadConfig(name="mlp", layers=3, hidden=1024))
    p = predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"])
    buckets = [41000 + 4096 + 4194304, 4198400 + 3215360]
    assert p.comm_by_collective == {"all_reduce/parameter": sum(4 * b // 3 for b in buckets)} == {"all_reduce/parameter": 15537546}


def test_zero1_partition_is_greedy_largest_first():
    assert zero1_shards([5, 9, 2, 7, 1], 2) == [[9, 2, 1], [7, 5]]


def test_fsdp2_pads_dim0_to_a_multiple_of_the_group():
    assert fsdp_padded_numel(Tensor(name="w", shape=(10, 3)), 1, 4) == 12 * 3
    assert fsdp_padded_numel(Tensor(name="b", shape=(8,)), 1, 4) == 8


def test_pipeline_bytes_per_boundary_per_micro_batch():
    """transformer, 3 stages, 4 micro-batches of 3 samples x 32 tokens x 64 wide fp32 = 24,576 B each way."""
    cfg = RunConfig(strategy="pipeline", world_size=3, micro_batches=4, global_batch_size=12,
                    workload=WorkloadConfig(name="transformer"), data_mode=DataMode.RANK0)
    p = predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"])
    assert p.comm_bytes == {"data": 12 * 32 * 8, "parameter": 0, "intermediate": 2 * 4 * 3 * 32 * 64 * 4}


def test_tensor_parallel_all_reduces_per_block():
    """2 forward (proj, down) + 4 backward (q, k, v, up) all-reduces of B x T x d x 4 bytes per block, 2(t-1)/t each."""
    cfg = RunConfig(strategy="tp", world_size=2, global_batch_size=4, workload=WorkloadConfig(name="transformer", layers=2))
    p = predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"])
    size = 4 * 32 * 64 * 4
    assert p.comm_bytes["intermediate"] == 2 * 6 * size


def test_split_units_gives_the_remainder_to_early_chunks():
    assert split_units(5, 2) == [(0, 3), (3, 5)]
    assert split_units(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_collective_time_alpha_beta_per_algorithm():
    """NCCL's ring over NVLink (its tuning model, Ring/Simple): 8.4 us a collective and 3.4 us a step, 14 steps
    for an 8-rank all-reduce, then 2 x 7/8 of the buffer at the link's bandwidth; a send pays one step, no base."""
    c = PRESETS["a100-80gb"]
    link = c.intra
    s = 64 * MiB
    assert collective_time_s(c, "all_reduce", s, 8, inter_node=False) == pytest.approx(
        8.4e-6 + 14 * 3.4e-6 + 2 * 7 / 8 * s / link.bandwidth_bytes_per_s)
    assert collective_time_s(c, "send", s, 2, inter_node=False) == pytest.approx(3.4e-6 + s / link.bandwidth_bytes_per_s)
    assert algorithm_factors("all_gather", 4) == (3.0, 0.75)
    assert algorithm_factors("broadcast", 5) == (3.0, 1.0)


def test_calibrated_fits_rescale_to_uncalibrated_group_sizes():
    c = PRESETS["a100-80gb"]
    from dataclasses import replace

    fitted = replace(c, collectives={"all_reduce": {2: (1e-4, 1e-9)}})
    # n=4 from n=2: latency steps 6/2, bandwidth factor 1.5/1
    assert collective_time_s(fitted, "all_reduce", 1000, 4, inter_node=False) == pytest.approx(3e-4 + 1.5e-6)


def test_activation_memory_korthikanti_table():
    """Korthikanti et al. 2022 eq. 2/4: sbh(10 + 24/t + 5as/(ht)), sbh/t (34 + 5as/h) with SP, selective drops 5as/h."""
    from parbench.sim.architecture import Architecture
    from parbench.sim.model import architecture_spec

    # the paper's GPT: dropout after attention and MLP (1-byte masks), GELU MLP of 4h, multi-head attention
    m = architecture_spec(Architecture(layers=1, hidden=1024, heads=16, seq_len=2048, vocab=256, dropout=True))
    s, b, h, a, t = 2048, 1, 1024, 16, 4
    base = dict(strategy=Strategy.HYBRID, tp=t, global_batch_size=1, precision=PRECISIONS["bf16"])
    assert activation_bytes_per_layer(m, Layout(**base)) == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    sp = Layout(**base, sequence_parallel=True)
    assert activation_bytes_per_layer(m, sp) == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    sel = Layout(**base, sequence_parallel=True, recompute=Recompute.SELECTIVE)
    assert activation_bytes_per_layer(m, sel) == pytest.approx(s * b * h / t * 34)
    full = Layout(**base, sequence_parallel=True, recompute=Recompute.FULL)
    assert activation_bytes_per_layer(m, full) == pytest.approx(2 * s * b * h / t)


def test_in_flight_micro_batches_by_schedule():
    lay = lambda sched, v=1: Layout(pp=4, global_batch_size=8, micro_batches=8, schedule=sched, virtual_stages=v)  # noqa: E731
    assert in_flight_micro_batches(lay(Schedule.GPIPE), 0) == 8
    assert in_flight_micro_batches(lay(Schedule.ONE_F_ONE_B), 0) == 4
    assert in_flight_micro_batches(lay(Schedule.ONE_F_ONE_B), 3) == 1
    assert in_flight_micro_batches(lay(Schedule.INTERLEAVED_1F1B, 2), 0) == pytest.approx(4 * (1 + 3 / 8))


def _zero_states(precision: str) -> tuple[int, int, dict[int, int]]:
    w = WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=128, vocab_size=512)
    m = model_spec(w, megatron=True)
    states = {}
    for zero in range(4):
        p = predict(m, Layout(strategy=Strategy.HYBRID, dp=8, global_batch_size=8, zero=zero,
                              precision=PRECISIONS[precision]), PRESETS["a100-80gb"])
        states[zero] = p.memory.param_bytes + p.memory.grad_bytes + p.memory.optim_bytes
    return m.param_numel, 8, states


def test_zero_stages_memory_follow_the_zero_paper():
    """Rajbhandari et al. 2020 fig. 1 (fp16 mixed-precision Adam, K=12): 16 Psi, 4 Psi + 12 Psi/N, 2 Psi + 14 Psi/N,
    16 Psi/N."""
    psi, n, states = _zero_states("fp16")
    step_tensors = 4 * (2 + 16 * 8 + 3)  # torch AdamW's float32 step per tensor (replicated at zero=0)
    assert states[0] == 16 * psi + step_tensors
    assert states[1] == pytest.approx(4 * psi + 12 * psi / n, rel=1e-3)
    assert states[2] == pytest.approx(2 * psi + 14 * psi / n, rel=1e-3)
    assert states[3] == pytest.approx(16 * psi / n, rel=1e-3)


def test_bf16_keeps_replicated_gradients_in_fp32():
    """bf16 accumulates and reduces gradients in float32 (Megatron-LM forces it for bf16; DeepSpeed's
    BF16_Optimizer): 2 + 4 + 12 = 18 Psi replicated, 6 Psi + 12 Psi/N under ZeRO-1, 2 Psi + 16 Psi/N under ZeRO-2;
    ZeRO-3 as fp16 (FSDP's float32 shard is the master copy)."""
    psi, n, states = _zero_states("bf16")
    fp16 = _zero_states("fp16")[2]
    assert states[0] - fp16[0] == 2 * psi and states[1] - fp16[1] == 2 * psi
    assert states[1] == pytest.approx(6 * psi + 12 * psi / n, rel=1e-3)
    assert states[2] == pytest.approx(2 * psi + 16 * psi / n, rel=1e-3) and states[3] == fp16[3]
    grads = {p: bytes_by_category(rank_ops(model_spec(WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8,
                                                                      seq_len=128, vocab_size=512), megatron=True),
                                           Layout(strategy=Strategy.HYBRID, dp=n, global_batch_size=n,
                                                  precision=PRECISIONS[p]))["stage0"])["parameter"]
             for p in ("bf16", "fp16")}
    assert grads["fp16"] == pytest.approx(2 * (n - 1) / n * 2 * psi, rel=1e-6)  # ring all-reduce, 2-byte gradients
    assert grads["bf16"] == pytest.approx(2 * grads["fp16"], rel=1e-6)  # ... of 4-byte gradients


def test_bf16_distributed_optimizer_gathers_bf16_weights():
    """ZeRO-1 / ZeRO-2 under bf16: the reduce-scatter carries float32 gradients, the all-gather the bf16
    weights (Megatron-Core's distributed optimizer gathers its parameter buffer, in the model's dtype):
    (n-1)/n x Psi x 4 bytes scattered, (n-1)/n x Psi x 2 bytes gathered, per rank."""
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=128, vocab_size=512),
                       megatron=True)
    psi, n = model.param_numel, 8
    for zero in (1, 2):
        ops = rank_ops(model, Layout(strategy=Strategy.HYBRID, dp=n, global_batch_size=n, zero=zero,
                                     precision=PRECISIONS["bf16"]))["stage0"]
        sent = {k: sum(o.sent for o in ops if o.kind == k) for k in ("reduce_scatter", "all_gather")}
        assert sent["reduce_scatter"] == pytest.approx((n - 1) / n * psi * 4, rel=1e-3)
        assert sent["all_gather"] == pytest.approx((n - 1) / n * psi * 2, rel=1e-3)


def test_fp8_parameter_gather_moves_one_byte_per_block_weight_and_casts_only_the_shard():
    """Megatron-Core's ``--fp8-param-gather`` under the distributed optimizer: the blocks' Linear weights are FP8
    tensors gathered as one byte each; the embedding, the head and the norms stay bf16. Llama 3.1 8B by hand
    (Llama 3 Herd, Table 3: 32 layers, d 4096, FFN 14336, 8 KV heads of 128, vocabulary 128,256): per layer
    4096 x (4096 + 2 x 1024 + 4096) + 3 x 4096 x 14336 = 218,103,808 Linear elements, x 32 = 6,979,321,856; the
    embedding and the untied head 128,256 x 4096 each, the norms 65 x 4096; 8,030,261,248 in all, as MLPerf's logs
    print for it. At TP 2 a rank holds half of the Linears and of the vocabulary-parallel tables and every norm;
    a ring all-gather over 32 ranks sends 31/32 of the gathered bytes. The weights reach the GEMMs already cast, so
    each rank casts only its 1/32 shard (Transformer Engine's current scaling: 5 bytes moved per element)."""
    from dataclasses import replace

    from parbench.sim.model import architecture_spec
    from parbench.sim.models import MODELS

    model = architecture_spec(MODELS["llama3-8b"].arch, megatron=True)
    linear, tables, norms, n = 6_979_321_856, 2 * 128_256 * 4096, 65 * 4096, 32
    assert model.param_numel == linear + tables + norms == 8_030_261_248
    base = Layout(strategy=Strategy.HYBRID, dp=n, tp=2, global_batch_size=n, zero=1, precision=PRECISIONS["fp8"],
                  attention="flash", sequence_parallel=True)
    gathered = {}
    for fp8 in (False, True):
        ops = [o for o in rank_ops(model, replace(base, fp8_all_gather=fp8))["stage0"]
               if o.kind == "all_gather" and o.category == "parameter"]
        gathered[fp8] = (sum(o.sent for o in ops), sum(o.count for o in ops))
    assert gathered[False][0] == (n - 1) / n * 2 * (linear / 2 + tables / 2 + norms)
    # each bucket's share of FP8 elements is rounded to a whole byte
    assert abs(gathered[True][0] - (n - 1) / n * (linear / 2 + 2 * (tables / 2 + norms))) <= gathered[True][1]
    c = replace(PRESETS["h100-sxm"], rank_spread=0.0)  # identical devices: the cast alone
    forward = {fp8: predict(model, replace(base, fp8_all_gather=fp8), c).compute_parts_s["forward"]
               for fp8 in (False, True)}
    assert forward[False] - forward[True] == pytest.approx((1 - 1 / n) * linear / 2 * 5 / c.memory_bandwidth_bytes_per_s)
    with pytest.raises(ConfigError, match="fp8_all_gather needs precision fp8 and sharded weights"):
        replace(base, zero=0, fp8_all_gather=True)


def test_mxfp8_gemms_run_at_their_measured_share_of_the_per_tensor_fp8_rate_on_blackwell():
    """Transformer Engine's GEMM profiling tutorial times a layer's GEMMs on a B300 with pre-quantized operands:
    6.812 ms per-tensor FP8, 7.161 ms MXFP8, so a block-scaled GEMM runs at 0.95 of the per-tensor rate. Llama 3.1
    8B's blocks by hand (218,103,808 Linear weights a layer, 32 layers, 8192 tokens a sample) on a B200 (4,500
    TFLOP/s dense FP8, GEMM efficiency 0.68, FP8 share 0.875): every forward Linear GEMM is compute-bound, so the
    recipe moves the forward GEMM seconds by 2 x 8192 x 218,103,808 x 32 / (4.5e15 x 0.65 x 0.875) x (1 / 0.95 - 1);
    attention's products (BF16) do not move. Hopper has no block-scaled FP8 instruction: an MXFP8 layout on an H100
    is refused, by the model and by the command line before anything is predicted."""
    from dataclasses import replace

    from parbench.sim.model import architecture_spec
    from parbench.sim.models import MODELS
    from parbench.sim.timing import chunk_times_s

    model = architecture_spec(MODELS["llama3-8b"].arch, megatron=True)
    base = Layout(strategy=Strategy.DDP, dp=8, global_batch_size=8, zero=1, precision=PRECISIONS["fp8"], attention="flash")

    def chunk(cluster: str, **kw):
        return chunk_times_s(PRESETS[cluster], model, replace(base, **kw), model.units, first=False, last=False)

    tw, mx = chunk("b200", fp8_scaling="tensorwise"), chunk("b200", fp8_scaling="mxfp8")
    slower = 2 * 8192 * 218_103_808 * 32 / (4.5e15 * 0.68 * 0.875) * (1 / 0.95 - 1)
    assert (mx.gemm - mx.attention) / 3 - (tw.gemm - tw.attention) / 3 == pytest.approx(slower, rel=1e-9)
    assert mx.attention == tw.attention
    with pytest.raises(ConfigError, match="cluster h100-sxm has no block-scaled FP8 GEMMs"):
        chunk("h100-sxm", fp8_scaling="mxfp8")
    assert [n for n, c in PRESETS.items() if c.mxfp8_gemm_share] == ["b200", "gb200-nvl72", "b300", "gb300-nvl72"]
    with pytest.raises(ValueError, match="mxfp8_gemm_share=1.5 "):
        replace(PRESETS["b200"], mxfp8_gemm_share=1.5)


def test_deepspeed_bf16_optimizer_all_reduces_float32_gradients_then_gathers_bf16_weights():
    """DeepSpeed's pipeline engine under its BF16 optimizer (its own ZeRO-1): after the flush the float32
    gradients are all-reduced whole (``_bf16_reduce_grads``), each rank steps its shard, and the bf16 weights are
    all-gathered (``update_lp_params``): 2(n-1)/n x Psi x 4 bytes plus (n-1)/n x Psi x 2 per rank, where
    Megatron's distributed optimizer reduce-scatters instead ((n-1)/n x Psi x 4)."""
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=128, vocab_size=512),
                       megatron=True)
    n, psi = 8, model.param_numel
    lay = Layout(strategy=Strategy.HYBRID, dp=n, pp=2, global_batch_size=2 * n, micro_batches=2, zero=1,
                 flat_grad_allreduce=True, precision=PRECISIONS["bf16"])
    ops = rank_ops(model, lay)
    sent = {k: sum(o.sent for st in ("stage0", "stage1") for o in ops[st] if o.kind == k)
            for k in ("all_reduce", "all_gather", "reduce_scatter")}
    assert sent["all_reduce"] == pytest.approx(2 * (n - 1) / n * psi * 4, rel=1e-9)
    assert sent["all_gather"] == pytest.approx((n - 1) / n * psi * 2, rel=1e-9)
    assert sent["reduce_scatter"] == 0


def test_deepspeed_pipeline_sends_tensor_parallel_slices_and_the_receiver_gathers_them():
    """DeepSpeed's pipeline engine partitions what it sends over the tensor-parallel ranks (``PartitionedTensor``
    over the slice-parallel group) and the receiving stage all-gathers it: each tp rank sends b s h x 2 / tp bytes
    per micro-batch and direction, and all-gathers b s h x 2 per tensor it receives; without the flag every rank
    sends the whole b s h x 2 and gathers nothing."""
    b, s, h, tp, m = 2, 128, 512, 4, 4
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=h, heads=8, seq_len=s, vocab_size=512),
                       megatron=True)
    base = {"strategy": Strategy.HYBRID, "tp": tp, "pp": 2, "global_batch_size": b * m, "micro_batches": m,
            "precision": PRECISIONS["bf16"], "pp_blocking_p2p": True}

    def sends(flag):
        first = rank_ops(model, Layout(**base, pp_scatter_gather=flag))["stage0"]
        pp = [o for o in first if o.group == "pp" and o.kind == "send"]
        gathers = [o for o in first if o.group == "tp" and o.kind == "all_gather" and o.category == "intermediate"]
        return pp, gathers

    (sent,), (gather,) = sends(True)  # stage 0 sends the activation forward, gathers the gradient it receives
    assert (sent.payload, sent.count) == (b * s * h * 2 // tp, m)
    assert (gather.payload, gather.n, gather.count, gather.phase) == (b * s * h * 2, tp, m, "backward")
    (whole,), none = sends(False)
    assert whole.payload == b * s * h * 2 and none == []


def test_deepspeed_bf16_gradient_pass_costs_18_bytes_per_parameter_per_micro_batch():
    """DeepSpeed's bf16 optimizer under its pipeline engine adds each micro-batch's bf16 gradients into float32
    after its backward as ``hp.add_(lp.to(float32))``: the cast reads 2 bytes and writes 4, the add reads 4 + 4
    and writes 4: m x 18 Psi bytes at the device's memory bandwidth, on the backward's critical path; fp16 (no
    float32 gradients) is refused."""
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=128, vocab_size=512),
                       megatron=True)
    c, m = replace(PRESETS["a100-80gb"], rank_spread=0.0), 4  # identical devices: the pass alone
    base = dict(strategy=Strategy.HYBRID, dp=2, global_batch_size=2 * m, micro_batches=m, zero=1,
                precision=PRECISIONS["bf16"])
    plain = predict(model, Layout(**base), c)
    passes = predict(model, Layout(**base, fp32_grad_pass_per_micro_batch=True), c)
    per_micro_batch = model.param_numel * (2 + 4 + 4 + 4 + 4) / c.memory_bandwidth_bytes_per_s + 2 * c.op_overhead_s
    assert passes.compute_parts_s["backward"] - plain.compute_parts_s["backward"] == pytest.approx(m * per_micro_batch)
    assert passes.step_time_s > plain.step_time_s
    with pytest.raises(ConfigError, match="fp32_grad_pass_per_micro_batch"):
        Layout(**{**base, "precision": PRECISIONS["fp16"]}, fp32_grad_pass_per_micro_batch=True)


def test_deepspeeds_bf16_optimizer_holds_its_bf16_gradients_beside_the_float32_ones():
    """DeepSpeed's pipeline engine frees the bf16 gradients before each backward (``clear_lp_grads``) and keeps them
    after it (``update_hp_grads(clear_lp_grads=False)``), so a backward ends with 2 + 4 bytes of gradients per
    parameter, BigScience's "4 bytes x params" over fp16's 2; Megatron-LM's float32 main gradients hold 4."""
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=512, heads=8, seq_len=128, vocab_size=512),
                       megatron=True)
    c = PRESETS["a100-80gb"]
    base = {"strategy": Strategy.HYBRID, "dp": 2, "global_batch_size": 8, "micro_batches": 4, "zero": 1,
            "precision": PRECISIONS["bf16"]}
    plain = predict(model, Layout(**base), c).memory
    deepspeed = predict(model, Layout(**base, fp32_grad_pass_per_micro_batch=True), c).memory
    assert plain.grad_bytes == 4 * model.param_numel and deepspeed.grad_bytes == (2 + 4) * model.param_numel
    assert deepspeed.total_bytes - plain.total_bytes == 2 * model.param_numel


def test_a_mixed_precision_step_adds_its_copy_unscale_and_clip_passes_over_the_optimizer_elements():
    """Megatron-LM's mixed-precision step around the Adam update, per element, by hand: fp16 gradients copied to
    float32 (2 read + 4 written), unscaled and checked for inf (4 + 4), their norm read for clipping (4), then the
    float32 master weights copied into the fp16 ones (4 + 2): 24 bytes, at the streaming bandwidth. bf16 with
    float32 accumulation skips the copy and the unscale (4 + 6 = 10); FSDP's float32 shard is its own master
    (clipping's 4 alone); the runner's autocast keeps float32 weights and does not clip (0)."""
    model = model_spec(WorkloadConfig(name="transformer", layers=4, hidden=2048, heads=8, seq_len=128, vocab_size=512),
                       megatron=True)  # large enough that the step streams its bytes longer than it launches kernels
    c = PRESETS["a100-80gb"]
    base = {"strategy": Strategy.HYBRID, "dp": 2, "global_batch_size": 4, "micro_batches": 2}
    for precision, zero, clip, extra in (("fp16", 0, True, 24), ("bf16", 1, True, 10), ("bf16", 3, True, 4),
                                         ("amp", 0, False, 0), ("fp16", 0, False, 20)):
        plain = Layout(**base, zero=zero, precision=PRECISIONS[precision])
        layout = Layout(**base, zero=zero, precision=PRECISIONS[precision], clip_grad_norm=clip)
        assert optimizer_pass_bytes_per_element(layout) == extra
        elements = model.param_numel // (2 if zero else 1)  # the rank's optimizer shard (dp 2)
        without_clip = predict(model, plain, c).terms["time_optimizer_s"]
        got = predict(model, layout, c).terms["time_optimizer_s"]
        clip_s = 4 * elements / c.stream_bandwidth if clip else 0.0
        assert got - without_clip == pytest.approx(clip_s, rel=0.02, abs=1e-12)
    fp16 = predict(model, Layout(**base, precision=PRECISIONS["fp16"], clip_grad_norm=True), c)
    assert fp16.terms["time_optimizer_s"] == pytest.approx(
        (model.param_numel * (28 + 24) + model.param_numel * 4) / c.stream_bandwidth, rel=0.02)


def test_megatron_buckets_hold_max_40m_or_1m_per_dp_rank_parameters():
    """Megatron-Core's DDP default bucket: max(40,000,000, 1,000,000 x dp) parameters, every bucket alike (no
    1 MiB first one): walking the tensors in reverse, a bucket closes once it holds the cap. Three tensors of 30M
    bf16 gradients under a 40M cap: 60M then 30M; torch's caps (1 MiB, then 25 MiB) close one per tensor."""
    assert Layout(dp=8, global_batch_size=8, megatron_grad_buckets=True).grad_bucket_elements == 40_000_000
    assert Layout(dp=512, global_batch_size=512, megatron_grad_buckets=True).grad_bucket_elements == 512_000_000
    assert Layout(dp=512, global_batch_size=512).grad_bucket_elements == 0
    m = 30_000_000
    assert ddp_buckets([2 * m] * 3, 2 * 40_000_000) == [4 * m, 2 * m]
    assert ddp_buckets([2 * m] * 3) == [2 * m] * 3


def test_megatron_buckets_keep_a_large_data_parallel_groups_reductions_few():
    """The distributed optimizer's reduce-scatters and gathers at dp 512: with Megatron-Core's buckets every bucket
    holds at least the 512M-parameter cap (all but the last), so a rank of P parameters issues at most
    ceil(P / 512M) of each; torch's 25 MiB buckets issue hundreds. The bytes are the same either way."""
    model = model_spec(WorkloadConfig(name="transformer", layers=24, hidden=4096, heads=32, seq_len=2048, vocab_size=51200),
                       megatron=True)
    base = {"strategy": Strategy.HYBRID, "dp": 512, "global_batch_size": 512, "zero": 1,
            "precision": PRECISIONS["bf16"]}
    ops = {flag: [o for o in rank_ops(model, Layout(**base, megatron_grad_buckets=flag))["stage0"]
                  if o.kind == "reduce_scatter"] for flag in (False, True)}
    count = {flag: sum(o.count for o in v) for flag, v in ops.items()}
    assert count[True] <= math.ceil(model.param_numel / 512_000_000) < 20 and count[False] > 100
    assert sum(o.payload * o.count for o in ops[True]) == sum(o.payload * o.count for o in ops[False])


def test_megatron_buckets_only_the_first_stages_first_chunk():
    """Megatron-Core wraps each model chunk in a DDP of its own and buckets only the first pipeline stage's first
    chunk; every other chunk reduces as one bucket. 8 layers of 12h^2 + 13h parameters over pp 2 x v 2 (chunks of
    two layers; stage 0 holds chunks 0 and 2, stage 1 chunks 1 and 3, the last with the final norm and the head):
    stage 1 all-reduces exactly two buffers, each a whole chunk's float32 gradients, and stage 0 one such buffer
    beside chunk 0's 40M-parameter buckets. The bytes are torch's buckets' bytes."""
    h, vocab = 4096, 51200
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=h, heads=32, seq_len=2048,
                                      vocab_size=vocab), megatron=True)
    layer = 12 * h * h + 13 * h
    base = {"strategy": Strategy.HYBRID, "dp": 2, "pp": 2, "virtual_stages": 2, "micro_batches": 4,
            "global_batch_size": 8, "precision": PRECISIONS["bf16"], "schedule": Schedule.INTERLEAVED_1F1B}
    reduces = {flag: {r: sorted((o.payload, o.count) for o in rank_ops(model, Layout(**base, megatron_grad_buckets=flag))[f"stage{r}"]
                                if o.kind == "all_reduce" and o.phase == "grad") for r in (0, 1)}
               for flag in (False, True)}
    assert reduces[True][1] == sorted([(4 * 2 * layer, 1), (4 * (2 * layer + 2 * h + vocab * h), 1)])
    assert (4 * 2 * layer, 1) in reduces[True][0]
    chunk0 = [p for p, c in reduces[True][0] for _ in range(c)]
    chunk0.remove(4 * 2 * layer)
    assert 2 < len(chunk0) <= math.ceil((2 * layer + vocab * h) / 40_000_000)
    assert sum(p >= 4 * 40_000_000 for p in chunk0) >= len(chunk0) - 1  # each closed at the cap
    for r in (0, 1):
        assert sum(p * c for p, c in reduces[True][r]) == sum(p * c for p, c in reduces[False][r])


def test_a_later_pipeline_stage_reduces_its_gradients_while_the_earlier_stages_drain():
    """In the pipeline's cooldown rank r finishes its last backward r chunk-backwards before rank 0 does (the
    last micro-batch's gradient walks back through ranks r-1..0), so a gradient reduction issued then runs while
    they compute. Two stages on one node whose link is made slow, the second holding six of the eight layers:
    its one-bucket all-reduce (Megatron-Core does not bucket it) is exposed only for what outlasts stage 0's
    backward of a micro-batch, which is the step's exposed parameter time (stage 0's own reduction, a third of
    the size, ends sooner)."""
    from dataclasses import replace

    from parbench.sim.stages import stages
    from parbench.sim.timing import chunk_times_s

    h = 1024
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=h, heads=8, seq_len=1024, vocab_size=512),
                       megatron=True)
    layout = Layout(strategy=Strategy.HYBRID, dp=2, pp=2, micro_batches=4, global_batch_size=8, chunk_layers=(2, 6),
                    precision=PRECISIONS["bf16"], attention="flash", megatron_grad_buckets=True)
    c = replace(PRESETS["h100-sxm"], rank_spread=0.0)  # identical devices: the drain alone
    c = replace(c, intra=replace(c.intra, bandwidth_bytes_per_s=20e9))
    ops = rank_ops(model, layout)
    grad = {r: [o for o in ops[f"stage{r}"] if o.phase == "grad"] for r in (0, 1)}
    reduce_s = {r: sum(o.count * collective_time_s(c, o.kind, o.payload, o.n, inter_node=False, rails=2)
                       for o in grad[r]) for r in (0, 1)}
    assert sum(o.count for o in grad[1]) == 1
    st0 = stages(model, 2, (2, 6))[0]
    t0 = chunk_times_s(c, model, layout, st0.modules[0], first=True, last=False)
    drain = t0.backward + t0.recompute
    stage1_exposed = reduce_s[1] - drain
    assert 0 < stage1_exposed < reduce_s[1] and reduce_s[0] < stage1_exposed
    got = predict(model, layout, c)
    assert got.terms["time_comm_exposed_parameter_s"] == pytest.approx(stage1_exposed, rel=1e-6)


def test_megatron_interleaved_pipeline_exposes_only_its_first_chunks_gradients_and_gathers():
    """Megatron-Core's interleaved schedule syncs each model chunk on its own: a chunk's reduce-scatter runs under
    the backward of the chunks after it, the next chunk's gather under this chunk's forwards. 8 layers of
    12h^2 + 13h parameters over pp 2 x v 2 (chunks of two layers), the distributed optimizer with its gathers
    overlapped, 8192-token sequences (compute far longer than the traffic, no interference, identical devices):
    only the first chunk of rank 0 exposes its traffic, the embedding (vocab x h, learned positions seq x h) and
    two layers of the rank's embedding and four layers, its share of the rank's reduce-scatter and gather
    seconds. Counted as one sync of every chunk after the last backward, the buckets would leave half exposed."""
    from parbench.sim.predict import op_time_s

    h, vocab, seq = 1024, 512, 8192
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=h, heads=8, seq_len=seq, vocab_size=vocab),
                       megatron=True)
    layout = Layout(strategy=Strategy.HYBRID, dp=2, pp=2, virtual_stages=2, micro_batches=4, global_batch_size=8,
                    schedule=Schedule.INTERLEAVED_1F1B, zero=1, overlap_param_gather=True, megatron_grad_buckets=True,
                    precision=PRECISIONS["bf16"], attention="flash")
    c = replace(PRESETS["h100-sxm"], rank_spread=0.0, overlap_interference=0.0)
    layer, embedding = 12 * h * h + 13 * h, vocab * h + seq * h
    share = (2 * layer + embedding) / (4 * layer + embedding)
    ops = rank_ops(model, layout)["stage0"]
    traffic = sum(op_time_s(c, layout, op) for op in ops if op.phase in ("grad", "next_forward"))
    assert sum(op.count for op in ops if op.phase == "grad") == 2  # one bucket a chunk
    got = predict(model, layout, c).terms["time_comm_exposed_parameter_s"]
    assert got == pytest.approx(share * traffic, rel=1e-9)
    assert share > 0.55  # not the half all-at-once buckets would leave


def test_overlapped_parameter_gathers_leave_one_bucket_exposed():
    """Megatron's --overlap-param-gather: the distributed optimizer's all-gathers run under the next forward,
    bucket by bucket; with a forward far longer than the gathers only the first of k buckets stays exposed,
    so the step saves (1 - 1/k) of their time, less the interference the hidden part still costs (8 ranks of
    one node, alpha-beta ring times)."""
    model = model_spec(WorkloadConfig(name="transformer", layers=8, hidden=1024, heads=8, seq_len=2048, vocab_size=512),
                       megatron=True)
    c = PRESETS["a100-80gb"]
    base = dict(strategy=Strategy.HYBRID, dp=8, global_batch_size=64, micro_batches=1, zero=1,
                precision=PRECISIONS["bf16"], attention="flash")
    gathers = [op for op in rank_ops(model, Layout(**base))["stage0"] if op.kind == "all_gather"]
    k = sum(op.count for op in gathers)
    total = sum(op.count * collective_time_s(c, "all_gather", op.payload, op.n, inter_node=False, rails=8)
                for op in gathers)
    plain = predict(model, Layout(**base), c).terms["time_comm_exposed_parameter_s"]
    overlapped = predict(model, Layout(**base, overlap_param_gather=True), c).terms["time_comm_exposed_parameter_s"]
    assert k > 1 and plain - overlapped == pytest.approx(total * (1 - 1 / k) * (1 - c.overlap_interference), rel=1e-9)
    with pytest.raises(ConfigError, match="overlap_param_gather"):
        Layout(**{**base, "zero": 0}, overlap_param_gather=True)


def test_pipeline_bubble_and_mfu():
    """Step = (m + (p-1)/v) x per-micro-batch time + tail: the bubble is (p-1)/v micro-batch slots."""
    w = WorkloadConfig(name="transformer", layers=16, hidden=1024, heads=16, seq_len=1024, vocab_size=1024)
    m = model_spec(w, megatron=True)
    c = PRESETS["h100-sxm"]
    one = predict(m, Layout(strategy=Strategy.HYBRID, pp=4, global_batch_size=8, micro_batches=8), c)
    inter = predict(m, Layout(strategy=Strategy.HYBRID, pp=4, global_batch_size=8, micro_batches=8,
                              schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=2), c)
    assert inter.bubble_time_s < one.bubble_time_s
    per_mb = one.bubble_time_s / 3
    assert one.mfu == pytest.approx(one.model_flops_per_step / (one.step_time_s * 4 * c.peak_flops))
    assert one.step_time_s >= (8 + 3) * per_mb
    assert math.isclose(one.throughput_samples_per_s, 8 / one.step_time_s)


def _gpipe_makespan(forward: list[float], backward: list[float], m: int) -> float:
    """GPipe by its recurrence, independent of the model: micro-batch j's forward on stage s starts when
    stage s is free and stage s-1 has passed it on; the backwards run the stages in reverse after every forward."""
    p = len(forward)
    done = [0.0] * p
    for _ in range(m):
        for s in range(p):
            done[s] = max(done[s], done[s - 1] if s else 0.0) + forward[s]
    end = max(done)
    done = [end] * p
    for _ in range(m):
        for s in reversed(range(p)):
            done[s] = max(done[s], done[s + 1] if s + 1 < p else 0.0) + backward[s]
    return max(done)


def test_unequal_stages_fill_and_drain_with_their_own_beats():
    """Stages of 1, 2, 3 and 1.5 ms forward (backward twice that), 8 micro-batches: the bubble is what the
    schedule's recurrence takes beyond m beats of the slowest stage; equal stages give (p-1) beats."""
    from parbench.sim.predict import StageTime, step_terms
    from parbench.sim.timing import ChunkTime

    def stage(f: float) -> StageTime:
        return StageTime(chunk=ChunkTime(f, 2 * f, 0.0, 0.0, 0.0), exposed_mb=0.0, exposed_tail=dict.fromkeys(CATEGORIES, 0.0),
                         optimizer=0.0, other=0.0, comm_total=dict.fromkeys(CATEGORIES, 0.0), link={"intra": 0.0, "inter": 0.0})

    c, m = PRESETS["h100-sxm"], 8
    lay = Layout(strategy=Strategy.HYBRID, pp=4, global_batch_size=8, micro_batches=m)
    for fs in ([1e-3, 2e-3, 3e-3, 1.5e-3], [2e-3] * 4):
        terms = step_terms(c, lay, [stage(f) for f in fs])
        makespan = _gpipe_makespan(fs, [2 * f for f in fs], m)
        assert terms["time_compute_s"] == pytest.approx(m * 3 * max(fs))
        assert terms["time_compute_s"] + terms["time_bubble_s"] == pytest.approx(makespan, rel=1e-12)
    assert terms["time_bubble_s"] == pytest.approx(3 * 3 * 2e-3)


def _schedule_replay():
    """``scripts/pipeline_step_replay.py``: the interleaved 1F1B order of torch's ``ScheduleInterleaved1F1B`` and
    Megatron-LM's (rank r: (v - 1) p + 2 (p - 1 - r) warm-up forwards, then forward / backward pairs, then the
    remaining backwards), run op by op as each op's input arrives."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "pipeline_step_replay.py"
    spec = importlib.util.spec_from_file_location("pipeline_step_replay", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("p", "v", "m", "head"), [(4, 2, 8, 1.0), (8, 2, 16, 1.0), (2, 24, 32, 1.0), (4, 5, 16, 1.0),
                                                   (8, 1, 8, 2.5), (8, 2, 16, 1.3), (2, 24, 32, 4.0), (4, 4, 8, 2.0)])
def test_interleaved_bubble_matches_the_schedule_run_op_by_op(p: int, v: int, m: int, head: float):
    """The step's compute + bubble against the interleaved order simulated op by op, chunks of 1 ms
    forward and 2 ms backward: equal chunks give Narayanan et al.'s (m + (p-1)/v) beats exactly; a last chunk
    ``head`` times heavier (the output head and loss) and a first one 0.7 times (the embedding), as the
    published layouts' ends, stay within 2.5% (the formula takes each rank's chunks as one stage)."""
    from parbench.sim.predict import StageTime, step_terms
    from parbench.sim.timing import ChunkTime

    fwd = [[1e-3] * v for _ in range(p)]
    if head != 1.0:
        fwd[0][0], fwd[-1][-1] = 0.7e-3, head * 1e-3
    bwd = [[2 * f for f in row] for row in fwd]
    stages = [StageTime(chunk=ChunkTime(sum(f), sum(b), 0.0, 0.0, 0.0), exposed_mb=0.0,
                        exposed_tail=dict.fromkeys(CATEGORIES, 0.0), optimizer=0.0, other=0.0,
                        comm_total=dict.fromkeys(CATEGORIES, 0.0), link={"intra": 0.0, "inter": 0.0})
              for f, b in zip(fwd, bwd)]
    schedule = Schedule.INTERLEAVED_1F1B if v > 1 else Schedule.ONE_F_ONE_B
    lay = Layout(strategy=Strategy.HYBRID, pp=p, global_batch_size=m, micro_batches=m, schedule=schedule,
                 virtual_stages=v)
    terms = step_terms(PRESETS["h100-sxm"], lay, stages)
    replay = _schedule_replay()
    makespan = replay.dependency_makespan(p, v, m, 0.0, 0.0, replay.chunk_durations(fwd, bwd))
    if head == 1.0:
        assert makespan == pytest.approx((m + (p - 1) / v) * 3e-3 * v, rel=1e-9)
        assert terms["time_compute_s"] + terms["time_bubble_s"] == pytest.approx(makespan, rel=1e-9)
    else:
        assert terms["time_compute_s"] + terms["time_bubble_s"] == pytest.approx(makespan, rel=0.025)


def test_layout_validation_names_the_factors():
    with pytest.raises(ValueError, match="global_batch_size=10 is not divisible by dp x micro_batches = 4 x 1"):
        Layout(dp=4, global_batch_size=10)
    with pytest.raises(ValueError, match="sequence_parallel needs tp > 1"):
        Layout(sequence_parallel=True)
    with pytest.raises(ValueError, match="latency_s"):
        Link(latency_s=-1, bandwidth_bytes_per_s=1)


def test_op_counts_match_the_runners_modules():
    """ops_forward / ops_backward per unit equal the aten calls of the runner's own modules (a loss of
    x.sum() adds 4 backward calls, subtracted)."""
    import torch

    from parbench.sim.calibrate import count_aten_ops
    from parbench.workloads import mlp, transformer

    def counts(module, x):
        x = x.detach().requires_grad_(True)
        fwd = count_aten_ops(lambda: module(x))
        y = module(x).sum()
        return fwd, count_aten_ops(lambda: y.backward()) - 4

    w = WorkloadConfig(name="transformer")
    block = model_spec(w).units[0]
    assert counts(transformer.build_model(w, 0).units[0], torch.randn(2, 32, 64)) == (block.ops_forward, block.ops_backward)
    wm = WorkloadConfig(name="mlp")
    dense = model_spec(wm).units[0]
    assert counts(mlp.build_model(wm, 0).units[0], torch.randn(4, 784)) == (dense.ops_forward, dense.ops_backward)


def test_compute_slowdown_interpolates_calibrated_group_sizes():
    from dataclasses import replace

    from parbench.sim.timing import oversubscription

    c = replace(PRESETS["a100-80gb"], cores=2, compute_slowdown={1: 1.0, 2: 1.5, 4: 3.0})
    assert [oversubscription(c, n) for n in (1, 2, 3, 4, 8)] == [1.0, 1.5, 2.25, 3.0, 6.0]
    assert oversubscription(replace(c, compute_slowdown={}), 4) == 2.0  # uncalibrated: ranks / cores
    assert oversubscription(PRESETS["a100-80gb"], 64) == 1.0  # GPUs: one device per rank
    # ranks of two threads, whose rates were measured with both threads busy: n ranks slow down as 2n one-thread
    # computations do over 2 of them
    t2 = replace(c, cores=8, threaded={2: {"peak_flops": 2 * c.peak_flops}}).with_threads(2)
    assert [oversubscription(t2, n) for n in (1, 2, 4)] == [1.0, 3.0 / 1.5, 6.0 / 1.5]


def test_no_barrier_in_the_predicted_step():
    """The runner's timed loop runs steps back to back (no barrier between them): a profile that
    measured a barrier's cost leaves the predicted step unchanged."""
    from dataclasses import replace

    cfg = RunConfig(strategy="ddp", world_size=2, global_batch_size=8, workload=WorkloadConfig(name="mlp"))
    m, lay = model_spec(cfg.workload), layout_from_run(cfg)
    base = replace(PRESETS["a100-80gb"], collectives={"all_reduce": {2: (1e-4, 1e-9)}})
    with_barrier = replace(base, collectives={**base.collectives, "barrier": {2: (1e-3, 0.0)}})
    assert predict(m, lay, with_barrier).step_time_s == predict(m, lay, base).step_time_s


def test_zero1_broadcasts_one_bucket_per_rank():
    """The runner's ZeroRedundancyOptimizer keeps each rank's parameters in one flat bucket and broadcasts it from
    its owner: every rank takes part in n broadcasts a step (the runner's meter counts 2 on this 69-tensor
    transformer at 2 ranks), so a broadcast latency is paid once per rank, and the busiest rank's bytes are its
    own shard, as its root."""
    from dataclasses import replace

    import torch

    from parbench import workloads
    from parbench.sim.comm import rank_ops

    wl = WorkloadConfig(name="transformer", layers=4, hidden=128, heads=4, seq_len=64, vocab_size=512)
    torch.manual_seed(0)
    numels = [p.numel() for p in workloads.make(wl, 0).build(0).parameters()]
    assert len(numels) == 69
    m = model_spec(wl)
    for n in (2, 4):
        lay = layout_from_run(RunConfig(strategy="zero1", world_size=n, global_batch_size=32, workload=wl))
        casts = [op for op in rank_ops(m, lay)["stage0"] if op.kind == "broadcast"]
        assert sum(op.count for op in casts) == n
        shards = zero1_shards(numels, n)
        assert sum(op.payload * op.count for op in casts) == 4 * sum(numels)
        assert [op.payload for op in casts if op.root] == [4 * max(sum(s) for s in shards)]
    lay = layout_from_run(RunConfig(strategy="zero1", world_size=2, global_batch_size=32, workload=wl))
    base = replace(PRESETS["a100-80gb"], collectives={"all_reduce": {2: (1e-4, 1e-9)}, "broadcast": {2: (0.0, 1e-9)}})
    slow = replace(base, collectives={**base.collectives, "broadcast": {2: (1e-3, 1e-9)}})
    assert predict(m, lay, slow).step_time_s - predict(m, lay, base).step_time_s == pytest.approx(2 * 1e-3)
    # _sync_params issues them back to back: where the profile timed broadcasts in bursts, each costs that latency
    burst = replace(slow, collectives={**slow.collectives, "broadcast_burst": {2: (2e-4, 1e-9)}})
    assert predict(m, lay, burst).step_time_s - predict(m, lay, base).step_time_s == pytest.approx(2 * 2e-4)


def test_transformer_engine_casts_each_weight_once_per_step():
    """te_fp8 caches a weight's FP8 cast over the step's m micro-batches: per micro-batch the forward saves
    (1 - 1/m) of the weights' casts, 5 bytes per element (amax read 2, read 2 + write 1) at memory bandwidth."""
    from parbench.sim.timing import unit_times_s

    model = model_spec(WorkloadConfig(name="transformer", layers=2, hidden=1024, heads=8, seq_len=512, vocab_size=512),
                       megatron=True)
    c, m, tp = PRESETS["h100-sxm"], 8, 2
    u = model.units[0]
    kw = dict(mb=1, tp=tp, act_bytes=2, flash=True, gemm_dtype="fp8")
    every, cached = unit_times_s(c, u, **kw)[0], unit_times_s(c, u, **kw, weight_casts=1 / m)[0]
    weights = sum(g.k * g.n / (tp if g.tp_sharded else 1) for g in u.gemms if g.batched == 1)
    assert every - cached == pytest.approx((1 - 1 / m) * weights * 5 / c.memory_bandwidth_bytes_per_s)


def test_each_fp8_recipe_moves_its_own_bytes_per_cast():
    """Per element cast, tensorwise scaling reads the operand for its amax (2 bytes), then reads it and writes FP8
    (2 + 1); delayed scaling takes its scale from earlier steps' amax: 2 + 1; MXFP8 adds one E8M0 scale byte per
    32 elements: 2 + 1 + 1/32. Over one unit's forward and backward, the recipes differ by those bytes times the
    elements cast: each Linear's input (m x k) and weight (k x n) forward, its output's gradient (m x n) backward."""
    from parbench.sim.timing import unit_times_s

    model = model_spec(WorkloadConfig(name="transformer", layers=2, hidden=1024, heads=8, seq_len=512, vocab_size=512),
                       megatron=True)
    c, u, tp = PRESETS["h100-sxm"], model.units[0], 2
    kw = {"mb": 2, "tp": tp, "act_bytes": 2, "flash": True, "gemm_dtype": "fp8"}
    linears = [g for g in u.gemms if g.batched == 1 and not g.head]
    forward = sum(2 * g.m * g.k / (tp if g.tp_sharded else 1) + g.k * g.n / (tp if g.tp_sharded else 1) for g in linears)
    backward = sum(2 * g.m * g.n / (tp if g.tp_sharded else 1) for g in linears)
    times = {recipe: unit_times_s(c, u, **kw, cast_bytes=b)[:2]
             for recipe, b in (("tensorwise", 5), ("delayed", 3), ("mxfp8", 3 + 1 / 32))}
    bandwidth = c.memory_bandwidth_bytes_per_s
    for recipe, saved in (("delayed", 2), ("mxfp8", 2 - 1 / 32)):
        f, b = (times["tensorwise"][i] - times[recipe][i] for i in (0, 1))
        assert f == pytest.approx(forward * saved / bandwidth) and b == pytest.approx(backward * saved / bandwidth)
    assert unit_times_s(c, u, **{**kw, "gemm_dtype": ""}, cast_bytes=3) == unit_times_s(c, u, **{**kw, "gemm_dtype": ""})


def test_fp8_scaling_is_the_softwares_recipe_unless_given_and_needs_fp8(capsys):
    """--software nemo and megatron-lm scale FP8 casts as Transformer Engine's delayed recipe, torchtitan (torchao)
    per tensor; --fp8-scaling overrides either, is refused without --precision fp8 (exit 2 before anything is
    predicted) and shows on the layout's line; a layout built with an unknown recipe is refused. The recipe moves
    the prediction: delayed scaling's casts are cheaper, so its step is shorter."""
    import json

    from parbench.cli import main

    args = ["simulate", "--model", "llama3-8b", "--seq", "2048", "--gpus", "8", "--zero", "1", "--global-batch", "8", "--precision", "fp8",
            "--format", "json"]
    steps = {}
    for software, given, expected in (("nemo", None, "delayed"), ("megatron-lm", None, "delayed"),
                                      ("torchtitan", None, "tensorwise"), ("nemo", "tensorwise", "tensorwise"),
                                      ("torchtitan", "mxfp8", "mxfp8")):
        blackwell = ["--cluster", "b200"] if given == "mxfp8" else []  # MXFP8 is Blackwell's
        assert main([*args, *blackwell, "--software", software, *(["--fp8-scaling", given] if given else [])]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["layout"]["fp8_scaling"] == expected
        steps[software, expected] = out["prediction"]["step_time_s"]
    assert steps["nemo", "delayed"] < steps["nemo", "tensorwise"]
    assert main(["simulate", "--model", "llama3-8b", "--fp8-scaling", "delayed"]) == 2
    assert "--fp8-scaling needs --precision fp8 (got bf16)" in capsys.readouterr().err
    assert main([*args, "--cluster", "h100-sxm", "--fp8-scaling", "mxfp8"]) == 2
    assert ("--fp8-scaling mxfp8: cluster h100-sxm has no block-scaled FP8 GEMMs (presets that have them: b200, "
            "gb200-nvl72, b300, gb300-nvl72)") in capsys.readouterr().err
    assert main([*args[:-2], "--software", "nemo"]) == 0
    assert " fp8-scaling=delayed " in capsys.readouterr().out.splitlines()[0]
    with pytest.raises(ConfigError, match="fp8_scaling='hybrid' must be one of tensorwise, delayed, mxfp8"):
        Layout(strategy=Strategy.DDP, dp=2, global_batch_size=2, precision=PRECISIONS["fp8"], fp8_scaling="hybrid")
    with pytest.raises(ConfigError, match="fp8_scaling='delayed' needs precision fp8"):
        Layout(strategy=Strategy.DDP, dp=2, global_batch_size=2, precision=PRECISIONS["bf16"], fp8_scaling="delayed")


def test_megatron_pipeline_layout_names_every_chunks_layers_and_stages_follow_it():
    """Megatron-Bridge's Llama 3 70B H100 layout: the embedding and 2 layers, 34 chunks of 2, one of 3, 3 of 2,
    then 1 layer and the loss: 40 chunks, 80 layers. Chunk c runs on rank c mod 8, so rank 3 holds 11 layers
    (chunk 35 is its fifth) and rank 7 nine and the head."""
    from parbench.sim.architecture import Architecture
    from parbench.sim.model import architecture_spec
    from parbench.sim.stages import megatron_pipeline_layout, stages

    chunks = megatron_pipeline_layout("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL")
    assert chunks == (2,) * 35 + (3,) + (2,) * 3 + (1,)
    model = architecture_spec(Architecture(layers=80, hidden=64, heads=4, vocab=100, seq_len=16))
    ranks = stages(model, 8, chunks)
    assert [sum(c.hi - c.lo for c in r.chunks) for r in ranks] == [10, 10, 10, 11, 10, 10, 10, 9]
    assert ranks[7].chunks[-1].last and (ranks[7].chunks[-1].lo, ranks[7].chunks[-1].hi) == (79, 80)
    assert megatron_pipeline_layout("E(t|)*3tL") == (1, 1, 1, 1) and megatron_pipeline_layout("Et*4L") == (4,)
    for bad, why in (("t*2|Et", "embedding E opens"), ("Et|tL|t", "loss L closes"), ("Et|(t|tL", "parentheses"),
                     ("Et|x|tL", "only t, m, E, L")):
        with pytest.raises(ValueError, match=why):
            megatron_pipeline_layout(bad)
    with pytest.raises(ValueError, match="must add up to the model's 80 layers"):
        stages(model, 8, chunks[:-1] + (2,))
    with pytest.raises(ConfigError, match="must give pp x virtual stages = 16 chunks"):
        Layout(pp=8, virtual_stages=2, schedule=Schedule.INTERLEAVED_1F1B, global_batch_size=8, micro_batches=8,
               chunk_layers=(5,) * 8)


def test_accounting_for_the_embedding_and_loss_is_the_405b_recipes_layout(capsys):
    """Megatron-LM's account_for_embedding/loss_in_pipeline_split: blocks + 2 split evenly, the first and last chunk
    one block fewer. Llama 3.1 405B's 126 blocks over 64 chunks give the layout Megatron-Bridge's 405B rows print;
    a multi-token-prediction layer joins the last chunk; blocks + 2 that do not fill the chunks are refused, as
    is a chunk left without a block. Under --search every pipeline takes that split (14 blocks, pp 4: 3, 4, 4, 3
    where the even split is 4, 4, 3, 3), and the flag conflicts with --pipeline-layout."""
    from parbench.cli import main
    from parbench.sim.architecture import Architecture
    from parbench.sim.hardware import PRESETS
    from parbench.sim.model import architecture_spec
    from parbench.sim.published_memory import LLAMA31_405B_LAYOUT
    from parbench.sim.search import SearchOptions, search
    from parbench.sim.stages import account_for_ends, megatron_pipeline_layout

    assert account_for_ends(126, 64) == megatron_pipeline_layout(LLAMA31_405B_LAYOUT)
    assert account_for_ends(62, 16, mtp=1) == (3,) + (4,) * 14 + (4,)
    for blocks, chunks in ((61, 16), (6, 8)):
        with pytest.raises(ValueError, match=f"blocks \\+ 2 = {blocks + 2} to split into {chunks} chunks"):
            account_for_ends(blocks, chunks)
    model = architecture_spec(Architecture(layers=14, hidden=64, heads=4, vocab=128, seq_len=16))
    opts = SearchOptions(precision=PRECISIONS["bf16"], pp=4, tp=1, account_for_ends=True)
    found = [c.layout for c in search(model, PRESETS["h100-sxm"], gpus=8, global_batch=8, options=opts) if c.layout]
    assert found and all(lay.chunk_layers == ((3, 4, 4, 3) if lay.v == 1 else ()) or lay.v > 1 for lay in found)
    assert {lay.chunk_layers for lay in found if lay.v == 1} == {(3, 4, 4, 3)}
    args = ["simulate", "--layers", "14", "--hidden", "64", "--heads", "4", "--pp", "4", "--gpus", "4", "--account-for-ends"]
    assert main([*args, "--pipeline-layout", "Et*3|t*4|t*4|t*3L"]) == 2
    assert main(args) == 0 and "chunk-layers=3,4x2,3" in capsys.readouterr().out
    assert main([*args, "--pp", "3", "--gpus", "3"]) == 2
    assert "--account-for-ends: accounting for the embedding and the loss needs blocks + 2 = 16" in capsys.readouterr().err


def test_the_expected_slowest_of_n_normal_draws_matches_tippetts_table():
    """E[max of n standard normals]: 1 / sqrt(pi) for two, 3 / (2 sqrt(pi)) for three (in closed form), and
    Tippett's tabulated 1.53875, 2.50759 and 3.24144 for 10, 100 and 1000 (Biometrika 17, 1925)."""
    from parbench.sim.timing import expected_max_normal

    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), abs=1e-6)
    for n, table in ((10, 1.53875), (100, 2.50759), (1000, 3.24144)):
        assert expected_max_normal(n) == pytest.approx(table, abs=1e-5)


def test_a_synchronous_step_computes_at_the_pace_of_its_slowest_device():
    """Devices of one SKU differ in speed by a spread sigma (Cluster.rank_spread, 1.6% on the GPU presets): every
    rank's compute in a step of n ranks takes 1 + sigma x E[max of n normals] of a typical device's, so Llama 3.1
    8B's compute term at 10 and 100 data-parallel ranks is 1.02462 and 1.04012 x what identical devices give
    (Tippett's table, as above). A spread is a relative standard deviation, never negative."""
    from dataclasses import replace

    from parbench.sim.model import architecture_spec
    from parbench.sim.models import MODELS

    model = architecture_spec(MODELS["llama3-8b"].arch, megatron=True)
    h100 = PRESETS["h100-sxm"]
    assert h100.rank_spread == 0.016
    for n, table in ((10, 1.53875), (100, 2.50759)):
        layout = Layout(strategy=Strategy.DDP, dp=n, global_batch_size=n, zero=1, precision=PRECISIONS["bf16"], attention="flash")
        spread, same = predict(model, layout, h100), predict(model, layout, replace(h100, rank_spread=0.0))
        assert spread.terms["time_compute_s"] / same.terms["time_compute_s"] == pytest.approx(1 + 0.016 * table, abs=1e-7)
        assert spread.tokens_per_s < same.tokens_per_s
    with pytest.raises(ValueError, match="rank_spread=-0.01 must be in"):
        replace(h100, rank_spread=-0.01)
