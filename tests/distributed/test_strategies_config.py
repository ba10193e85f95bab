"""Strategy configurations that cannot run die in RunConfig, before any rank is spawned, with every
factor in the message (no process group here: pure validation)."""

from __future__ import annotations

import pytest

from parbench.config import ConfigError, RunConfig

GPT = {"name": "transformer"}


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "tp", "world_size": 3, "workload": {"name": "transformer", "hidden": 96}},
     "tp=3 does not divide heads=4"),
    ({"strategy": "tp", "world_size": 3}, "tp=3 does not divide hidden=512"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "tp": 2, "pp": 2, "workload": GPT},
     "dp*tp*pp=2*2*2=8 != world_size=4"),
    ({"strategy": "hybrid", "world_size": 4, "workload": GPT}, "dp*tp*pp=1*1*1=1 != world_size=4"),
    ({"strategy": "ddp", "world_size": 4, "dp": 2, "tp": 2},
     "strategy=ddp at world_size=4 sets dp=4, tp=1, pp=1 itself; got dp=2, tp=2, pp=1"),
    ({"strategy": "fsdp", "world_size": 2, "dp_mode": "fsdp"}, "dp_mode=fsdp applies to strategy=hybrid only"),
    ({"strategy": "zero1", "world_size": 2, "servers": 2}, "servers=2 applies to strategy=ps only"),
    ({"strategy": "ps", "world_size": 4, "servers": 4}, "ps needs at least one worker: servers=4 >= world_size=4"),
    ({"strategy": "ps", "world_size": 4, "servers": 1}, "dp x micro_batches = 3 x 1 = 3"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "tp": 2, "micro_batches": 2, "workload": GPT},
     "micro_batches=2 applies to pipeline schedules only (pp=1)"),
    ({"strategy": "pipeline", "world_size": 2, "schedule": "interleaved1f1b", "virtual_stages": 2,
      "micro_batches": 2}, "pipeline needs 4 stages (pp=2 x virtual_stages=2) but the mlp has only 2"),
    ({"strategy": "pipeline", "world_size": 2, "schedule": "interleaved1f1b", "virtual_stages": 2,
      "micro_batches": 3, "global_batch_size": 48, "workload": GPT},
     "interleaved1f1b needs micro_batches=3 divisible by pp=2"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "pp": 2, "micro_batches": 2,
      "schedule": "interleaved1f1b", "virtual_stages": 2}, "pipeline needs 4 stages"),
])
def test_invalid_strategy_configs_name_every_factor(kwargs, message):
    with pytest.raises(ConfigError) as err:
        RunConfig(**kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("kwargs, degrees", [
    ({"strategy": "zero2", "world_size": 4}, (4, 1, 1)),
    ({"strategy": "tp", "world_size": 4, "workload": GPT}, (1, 4, 1)),
    ({"strategy": "ps", "world_size": 4, "servers": 2}, (2, 1, 1)),
    ({"strategy": "hybrid", "world_size": 8, "dp": 2, "tp": 2, "pp": 2, "micro_batches": 2, "workload": GPT},
     (2, 2, 2)),
])
def test_degrees_follow_the_strategy(kwargs, degrees):
    cfg = RunConfig(**kwargs)
    assert (cfg.dp, cfg.tp, cfg.pp) == degrees
    assert cfg.reference().world_size == 1
