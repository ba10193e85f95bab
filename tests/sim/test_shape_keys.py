"""A prediction computes each distinct stage once: units and stages are keyed by their shapes up to their
names, so a pipeline's identical middle stages share one key and anything that changes a stage's time,
memory or bytes gives it another."""

from __future__ import annotations

from dataclasses import replace

from parbench.config import Strategy, WorkloadConfig
from parbench.sim.architecture import Architecture
from parbench.sim.comm import rank_ops
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

