"""A prediction computes each distinct stage once: units and stages are keyed by their shapes up to their
names, so a pipeline's identical middle stages share one key and anything that changes a stage's time,
memory or bytes gives it another."""

from __future__ import annotations

from dataclasses import replace

from parbench.config import Strategy, WorkloadConfig
from parbench.sim.architecture import Architecture
from parbench.sim.comm import ddp_buckets, rank_ops
from parbench.sim.layout import Layout
from parbench.sim.model import Tensor, architecture_spec, model_spec
from parbench.sim.stages import stages

ARCH = Architecture(name="gpt", layers=8, hidden=256, heads=8, vocab=1000, seq_len=128)


def test_middle_stages_share_a_key_and_the_ends_do_not():
    model = architecture_spec(ARCH, megatron=True)
    keys = [st.shape_key for st in stages(model, 4, 1)]
    assert keys[1] == keys[2] and len({keys[0], keys[1], keys[3]}) == 3


def test_a_parameter_shape_or_a_unit_field_changes_the_unit_key():
    unit = architecture_spec(ARCH).units[1]
    wider = replace(unit, params=(*unit.params[:-1], Tensor(name=unit.params[-1].name, shape=(999,))))
    renamed = replace(unit, params=tuple(replace(t, name=t.name + "x") for t in unit.params))
    assert renamed.shape_key == unit.shape_key
    assert wider.shape_key != unit.shape_key
    assert replace(unit, ops_forward=unit.ops_forward + 1).shape_key != unit.shape_key


def test_a_stage_after_a_wider_boundary_sends_its_own_gradient_bytes():
    """Two middle stages of equal shapes, but the unit before one of them outputs more: the pipeline's
    backward send (the gradient of that stage's input) differs, so their ops may not be shared."""
    model = model_spec(WorkloadConfig(name="mlp", layers=7, hidden=64))
    units = list(model.units)
    units[1] = replace(units[1], out_elems_per_sample=2 * units[1].out_elems_per_sample)
    model = replace(model, units=tuple(units))
    ops = rank_ops(model, Layout(strategy=Strategy.PIPELINE, pp=4, micro_batches=4, global_batch_size=8))
    grads = {name: [op.payload for op in stage if op.phase == "backward"] for name, stage in ops.items()}
    sts = stages(model, 4, 1)
    assert sts[1].shape_key == sts[2].shape_key  # the boundary before stage 1 is unit 1's output
    assert grads["stage1"] == [2 * grads["stage2"][0]]



MOE = Architecture(name="moe", layers=6, hidden=64, heads=4, vocab=500, seq_len=32, experts=16, top_k=2)


def test_a_unit_s_tensor_parallel_local_elements_are_its_tensors_own_at_every_tp():
    """Each unit works its tensors' local elements out once per tp and keeps them: asked again, at another tp
    and then at the first, it gives each tensor's own ``Tensor.local_numel``, and the stage gives them in its
    tensors' order."""
    model = architecture_spec(MOE, megatron=True)
    unit = model.units[2]
    for tp in (1, 2, 4, 1):
        assert unit.local_numels(tp) == tuple(t.local_numel(tp) for t in unit.params)
        assert unit.expert_numel(tp) == sum(t.local_numel(tp) for t in unit.params if t.expert >= 0) > 0
    for st in stages(model, 2, 1):
        assert st.local_numels(4) == tuple(t.local_numel(4) for t in st.tensors)
    assert unit.local_numels(2) != unit.local_numels(1)


def test_equal_buckets_are_one_op_with_their_count_and_the_bytes_are_every_tensor_s():
    """DDP fills a bucket per 25 MiB; equal buckets fold into one all-reduce with a count. The folded ops still
    carry every gradient byte once (float32: 4 bytes an element) in as many buckets as torch's reducer forms
    (1 MiB first, then 25 MiB)."""
    model = architecture_spec(replace(ARCH, layers=24, hidden=1024), megatron=True)
    layout = Layout(strategy=Strategy.DDP, dp=4, global_batch_size=8)
    ops = [op for op in rank_ops(model, layout)["stage0"] if op.kind == "all_reduce"]
    tensors = stages(model, 1, 1)[0].tensors
    assert sum(op.payload * op.count for op in ops) == model.param_numel * 4
    assert len(ops) < sum(op.count for op in ops) == len(ddp_buckets([t.numel * 4 for t in tensors]))


def test_every_moe_block_exchanges_its_tokens_four_times_a_micro_batch():
    """Expert parallelism: per MoE block and micro-batch, dispatch and combine forward, their gradients backward,
    and one count exchange of E int64 forward, whichever blocks fold into one op."""
    model = architecture_spec(MOE, megatron=True)
    layout = Layout(strategy=Strategy.HYBRID, dp=4, ep=4, global_batch_size=16, micro_batches=2)
    ops = [op for op in rank_ops(model, layout)["stage0"] if op.kind == "all_to_all"]
    counts = {}
    for op in ops:
        kind = "counts" if op.payload == MOE.experts * 8 else op.phase
        counts[kind] = counts.get(kind, 0) + op.count
    assert counts == {"counts": 2 * MOE.layers, "forward": 2 * 2 * MOE.layers, "backward": 2 * 2 * MOE.layers}
