"""Multi-token prediction (DeepSeek-V3's MTP module): its parameters against the model card, where the pipeline
puts it, its head kept out of FP8, the memory its layer and its loss keep, and the embedding copy its stage
all-reduces. Expected values by hand from the shapes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parbench.cli import main
from parbench.sim.architecture import Architecture, from_hf_config
from parbench.sim.comm import rank_ops
from parbench.sim.hardware import PRESETS
from parbench.sim.layout import PRECISIONS, Layout
from parbench.sim.memory import loss_bytes, mtp_extra_bytes, stage_layer_bytes
from parbench.sim.model import Gemm, architecture_spec, moe_block_unit
from parbench.sim.models import MODELS
from parbench.sim.search import layout_violations
from parbench.sim.stages import megatron_pipeline_layout, stages
from parbench.sim.timing import unit_times_s

SMALL = Architecture(layers=6, hidden=64, heads=4, vocab=256, seq_len=32, norm="rmsnorm", positions="rotary",
                     bias="none", gated_mlp=True, mtp_layers=1)


def test_deepseek_v3s_mtp_layer_by_hand_and_the_model_cards_685b():
    """One MTP layer of DeepSeek-V3: an MoE block as blocks 3-60 are (MLA, two norms, a router of 256 x d, 256 routed
    experts and one shared of 3 d x 2048), enorm, hnorm and a final norm (d each), eh_proj 2d x d. The model card
    counts 685B with the MTP module's own embedding and head (2 V d more): 671.0B + 11.61B + 1.85B = 684.5B."""
    d, v, heads = 7168, 129280, 128
    attn = d * 1536 + 1536 * heads * 192 + d * 576 + 512 * heads * 256 + heads * 128 * d + 1536 + 512
    block = attn + 2 * d + 256 * d + 257 * 3 * d * 2048
    arch = MODELS["deepseek-v3"].arch
    with_mtp = architecture_spec(arch, megatron=True)
    without = architecture_spec(replace(arch, mtp_layers=0), megatron=True)
    assert with_mtp.param_numel - without.param_numel == block + 3 * d + 2 * d * d
    assert abs(with_mtp.param_numel + 2 * v * d - 685e9) / 685e9 < 0.001
    last = with_mtp.units[-1]
    assert last.mtp and not any(u.mtp for u in with_mtp.units[:-1]) and len(with_mtp.units) == 62
    t = arch.seq_len
    assert last.gemms[-2:] == (Gemm(m=t, k=2 * d, n=d), Gemm(m=t, k=d, n=v, head=True))
    assert last.gemms[:-2] == moe_block_unit(61, arch).gemms
    assert from_hf_config({"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
                           "num_attention_heads": 128, "vocab_size": 129280, "n_routed_experts": 256,
                           "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "kv_lora_rank": 512,
                           "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
                           "num_nextn_predict_layers": 2}).mtp_layers == 2


def test_mtp_layers_join_the_last_chunk_and_megatrons_layout_names_them():
    """Six blocks and one MTP layer over 2 stages: the blocks split 3 + 3, the MTP layer on the last stage (units
    3-7); ``Et*2|t*4mL`` gives 2 and 5 units; m only closes the last chunk; an even split divides the 6 blocks."""
    model = architecture_spec(SMALL)
    first, last = stages(model, 2, 1)
    assert [(c.lo, c.hi) for c in first.chunks + last.chunks] == [(0, 3), (3, 7)]
    assert "post.mtp_embedding.weight" in [t.name for t in last.tensors]
    assert "post.mtp_embedding.weight" not in [t.name for t in first.tensors]
    assert megatron_pipeline_layout("Et*2|t*4mL") == (2, 5)
    assert [(c.lo, c.hi) for s in stages(model, 2, (2, 5)) for c in s.chunks] == [(0, 2), (2, 7)]
    assert megatron_pipeline_layout("Et*4|(t*4|)*14,tmL") == (4,) * 15 + (2,)
    for bad in ("Et*2|m|t*4L", "Et*2|t*3mtL"):
        with pytest.raises(ValueError, match="m close the last chunk"):
            megatron_pipeline_layout(bad)
    with pytest.raises(ValueError, match="must add up"):
        stages(architecture_spec(replace(SMALL, mtp_layers=0)), 2, (2, 5))
    assert model.blocks == 6  # what pp x v may reach: 7 stages would leave one with the MTP layer alone
    assert layout_violations(model, Layout(pp=7, global_batch_size=7, micro_batches=7), PRESETS["h100-sxm"]) == [
        "pp x virtual stages = 7 x 1 = 7 > layers=6"]


@pytest.mark.parametrize("which", ["mtp", "post"])
def test_output_heads_stay_in_bf16_under_fp8(which):
    """The head GEMM alone (the MTP layer's, the model's): the same seconds under FP8 as under bf16, no cast; the
    MTP layer's projection does run in FP8."""
    model = architecture_spec(SMALL)
    unit = model.units[-1] if which == "mtp" else model.post
    head = replace(unit, gemms=unit.gemms[-1:], elementwise_elems_per_sample=0, transcendental_elems_per_sample=0,
                   ops_forward=0, ops_backward=0)
    c, kw = PRESETS["h100-sxm"], {"mb": 2, "tp": 1, "act_bytes": 2}
    assert unit_times_s(c, head, **kw, gemm_dtype="fp8") == unit_times_s(c, head, **kw, gemm_dtype="")
    if which == "mtp":
        proj = replace(head, gemms=unit.gemms[-2:-1])
        assert unit_times_s(c, proj, **kw, gemm_dtype="fp8") != unit_times_s(c, proj, **kw, gemm_dtype="")


def test_an_mtp_layer_keeps_its_inputs_and_its_loss_keeps_one_more_buffer():
    """Per token beyond the block (bf16, e = r = 2): the looked-up embedding e h, the projection's input 2 e h, the
    block's output r h, the head's input e h: 10 h bytes; 8 h under Transformer Engine FP8 (the projection keeps
    its 1-byte cast). Its loss keeps one float32 buffer of the logits (4 s b V), with tensor parallelism over
    the vocabulary's tp slices."""
    s, b, h, v = 32, 2, 64, 256
    model, plain = architecture_spec(SMALL, megatron=True), architecture_spec(replace(SMALL, mtp_layers=0), megatron=True)
    bf16 = Layout(global_batch_size=2, precision=PRECISIONS["bf16"], attention="flash", megatron_cross_entropy=True)
    assert mtp_extra_bytes(model, bf16) == s * b * 10 * h
    assert mtp_extra_bytes(model, replace(bf16, precision=PRECISIONS["fp8"], te_fp8=True)) == s * b * 8 * h
    assert stage_layer_bytes(model, bf16, model.units) - stage_layer_bytes(plain, bf16, plain.units) == (
        stage_layer_bytes(plain, bf16, plain.units[:1]) + s * b * 10 * h)
    assert loss_bytes(model, bf16) - loss_bytes(plain, bf16) == 4 * s * b * v
    tp2 = replace(bf16, tp=2)
    assert loss_bytes(model, tp2) - loss_bytes(plain, tp2) == 4 * s * b * v / 2


def test_the_mtp_stage_all_reduces_its_embedding_copy_with_the_first():
    """pp 2, untied: the first and last stage all-reduce the V x d embedding's gradient (bf16 reduced in float32:
    4 bytes per element) with the MTP layer; without it neither does."""
    layout = Layout(pp=2, global_batch_size=4, micro_batches=4, precision=PRECISIONS["bf16"], attention="flash")
    ops = rank_ops(architecture_spec(SMALL), layout)
    for stage in ("stage0", "stage1"):
        copies = [o for o in ops[stage] if o.kind == "all_reduce" and o.group == "pp"]
        assert [(o.payload, o.n) for o in copies] == [(256 * 64 * 4, 2)]
    plain = rank_ops(architecture_spec(replace(SMALL, mtp_layers=0)), layout)
    assert not [o for o in plain["stage1"] if o.group == "pp" and o.kind == "all_reduce"]


def test_simulate_takes_mtp_layers_and_refuses_a_negative_count(capsys):
    assert main(["simulate", "--model", "deepseek-v3", "--gpus", "256", "--pp", "16", "--ep", "8", "--cluster", "b200",
                 "--global-batch", "2048", "--zero", "1", "--pipeline-layout", "Et*4|(t*4|)*14,tmL"]) in (0, 3)
    assert "multi-token prediction: 1 layer(s)" in capsys.readouterr().out
    assert main(["simulate", "--model", "deepseek-v3", "--gpus", "256", "--pp", "16", "--ep", "8", "--cluster", "b200",
                 "--global-batch", "2048", "--zero", "1", "--mtp-layers", "0"]) in (0, 3)
    assert "multi-token prediction" not in capsys.readouterr().out
    assert main(["simulate", "--model", "deepseek-v3", "--gpus", "256", "--pp", "16", "--ep", "8", "--cluster", "b200",
                 "--global-batch", "2048", "--pipeline-layout", "Et*4|(t*4|)*14,tL"]) == 2
    assert "61 blocks t and 1 multi-token-prediction layer(s) m" in capsys.readouterr().err
    assert main(["simulate", "--model", "deepseek-v3", "--mtp-layers", "-1"]) == 2
    assert "mtp_layers=-1 must be >= 0" in capsys.readouterr().err
