"""The torch-free layout core: one set of mesh and batch rules for the runner's RunConfig and the
simulator's Layout, derived sizes, and mesh enumeration (exact values)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from parbench.config import RunConfig
from parbench.layout import ParallelLayout, meshes, tp_misfit
from parbench.names import ConfigError, Schedule
from parbench.sim.layout import Layout


def test_derived_sizes():
    lay = ParallelLayout(dp=2, tp=3, pp=4, global_batch_size=64, micro_batches=8,
                         schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=2)
    assert (lay.mesh_size, lay.v, lay.chunks, lay.per_replica_batch, lay.micro_batch_size) == (24, 2, 8, 32, 4)
    plain = ParallelLayout(pp=4, global_batch_size=8, micro_batches=8, virtual_stages=1)
    assert (plain.v, plain.chunks) == (1, 4)


@pytest.mark.parametrize("kwargs, message", [
    ({"micro_batches": 0}, "micro_batches=0 must be >= 1"),
    ({"dp": 3, "global_batch_size": 64}, "global_batch_size=64 is not divisible by dp x micro_batches = 3 x 1 = 3"),
    ({"pp": 2, "micro_batches": 3, "global_batch_size": 6, "schedule": Schedule.INTERLEAVED_1F1B, "virtual_stages": 2},
     "interleaved1f1b needs micro_batches=3 divisible by pp=2"),
    ({"pp": 2, "schedule": Schedule.INTERLEAVED_1F1B, "global_batch_size": 2}, "needs virtual_stages >= 2"),
    ({"pp": 2, "virtual_stages": 2, "global_batch_size": 2}, "virtual_stages=2 applies to schedule=interleaved1f1b"),
    ({"dp": 4, "ep": 3, "global_batch_size": 4}, r"ep=3 does not divide dp=4 \(expert parallelism runs inside"),
])
def test_one_rule_set_for_runner_and_simulator(kwargs, message):
    """The same rule fails the same way in the core, in the simulator's Layout and in a RunConfig."""
    for make in (ParallelLayout, Layout, lambda **kw: RunConfig(strategy="hybrid", **{**kw, "world_size": _mesh(kw)})):
        with pytest.raises(ConfigError, match=message):
            make(**kwargs)


def _mesh(kw: dict) -> int:
    return max(kw.get("dp", 1), 1) * kw.get("tp", 1) * kw.get("pp", 1)


def test_mesh_size_rule_names_every_degree():
    with pytest.raises(ConfigError, match=r"dp\*tp\*pp=2\*2\*2=8 != world_size=4"):
        ParallelLayout(dp=2, tp=2, pp=2, global_batch_size=8).check_mesh_size(4)
    with pytest.raises(ConfigError, match=r"dp\*tp\*pp\*cp=1\*1\*1\*2=2 != world_size=4"):
        Layout(cp=2).check_mesh_size(4)  # the simulator's extra degree joins the product and the message


def test_adding_a_degree_is_a_field_and_its_name():
    @dataclass(frozen=True, kw_only=True)
    class WithCp(ParallelLayout):  # as sim.Layout adds context parallelism
        DEGREES = (*ParallelLayout.DEGREES, "cp")
        cp: int = 1

    assert WithCp(dp=2, cp=3, global_batch_size=2).mesh_size == 6
    with pytest.raises(ConfigError, match="cp=0 must be >= 1"):
        WithCp(cp=0)


def test_meshes_are_every_factorisation_in_order():
    # ordered triples with product 4 = 2^2: the two 2s placed in 3 slots with repetition, C(4,2) = 6
    assert list(meshes(4)) == [{"dp": 1, "tp": 1, "pp": 4}, {"dp": 1, "tp": 2, "pp": 2}, {"dp": 1, "tp": 4, "pp": 1},
                               {"dp": 2, "tp": 1, "pp": 2}, {"dp": 2, "tp": 2, "pp": 1}, {"dp": 4, "tp": 1, "pp": 1}]
    # ordered triples with product 12 = 2^2 * 3: C(4,2) ways for the 2s times 3 for the 3 = 18
    assert len(list(meshes(12))) == 18 and len(list(meshes(1))) == 1


def test_tp_misfit():
    assert tp_misfit(2, hidden=64, heads=4) is None
    assert tp_misfit(3, hidden=64, heads=None) == "tp=3 does not divide hidden=64"
    assert tp_misfit(8, hidden=64, heads=4) == "tp=8 does not divide heads=4"
