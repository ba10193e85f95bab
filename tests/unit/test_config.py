"""Every bad configuration fails in RunConfig, before anything is spawned, naming its factors."""

import pytest

from parbench.config import ConfigError, RunConfig, WorkloadConfig

TRANSFORMER = {"name": "transformer"}


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "nope"}, "unknown strategy 'nope'; valid: single, ddp"),
    ({"backend": "tcp"}, "unknown backend 'tcp'; valid: gloo, nccl, mpi"),
    ({"world_size": 0, "strategy": "ddp"}, "world_size=0 must be >= 1"),
    ({"strategy": "single", "world_size": 2}, "strategy=single runs one process, got world_size=2"),
    ({"strategy": "ddp", "world_size": 3, "global_batch_size": 64},
     "global_batch_size=64 is not divisible by dp x micro_batches = 3 x 1 = 3"),
    ({"strategy": "pipeline", "world_size": 2, "micro_batches": 3, "global_batch_size": 64},
     "global_batch_size=64 is not divisible by dp x micro_batches = 1 x 3 = 3"),
    ({"strategy": "pipeline", "world_size": 4, "workload": {"name": "mlp", "layers": 1}},
     "pipeline needs 4 stages (pp=4 x virtual_stages=1) but the mlp has only 2 splittable layers (layers=1)"),
    ({"strategy": "pipeline", "world_size": 8, "workload": TRANSFORMER},
     "pipeline needs 8 stages (pp=8 x virtual_stages=1) but the transformer has only 4 splittable layers"),
    ({"strategy": "pipeline", "world_size": 4, "micro_batches": 2, "global_batch_size": 32, "workload": TRANSFORMER},
     "schedule=1f1b needs micro_batches >= pp, got micro_batches=2 and pp=4"),
    ({"strategy": "tp", "world_size": 3, "global_batch_size": 63, "workload": {"name": "transformer", "hidden": 48, "heads": 4}},
     "tp=3 does not divide heads=4"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "tp": 2, "pp": 2}, "dp*tp*pp=2*2*2=8 != world_size=4"),
    ({"strategy": "ddp", "world_size": 2, "micro_batches": 2}, "micro_batches=2 applies to pipeline schedules only"),
    ({"steps": 0}, "steps=0 must be >= 1"),
    ({"warmup_steps": 1}, "warmup_steps=1 must be >= 2"),
    ({"device": "tpu"}, "unknown device 'tpu'"),
    ({"data_mode": "nfs"}, "unknown data mode 'nfs'; valid: sharded, rank0"),
    ({"strategy": "ps", "world_size": 2, "servers": 2}, "ps needs at least one worker: servers=2 >= world_size=2"),
    ({"inject_fault": "boom:0"}, "inject_fault='boom:0': expected RANK:KIND:STEP"),
    ({"inject_fault": "0:boom:1"}, "KIND one of raise, hang, crash, nan"),
    ({"inject_fault": "1:hang:1"}, "inject_fault='1:hang:1': rank 1 >= world_size=1"),
    ({"inject_fault": "0:hang:13"}, "step 13 is never reached (the run takes steps 0..12: 2 warm-up, 1 probe, 10 timed)"),
    ({"timeout_s": float("nan")}, "timeout_s=nan must be a finite number > 0"),
    ({"timeout_s": float("inf")}, "timeout_s=inf must be a finite number > 0"),
    ({"timeout_s": -1.0}, "timeout_s=-1.0 must be a finite number > 0"),
    ({"timeout_s": 1e300}, "timeout_s=1e+300 must be at most 1e+09 s (31 years)"),
    ({"lr": -1.0}, "lr=-1.0 must be a finite number > 0"),
    ({"lr": float("nan")}, "lr=nan must be a finite number > 0"),
    ({"lr": float("inf")}, "lr=inf must be a finite number > 0"),
    ({"seed": -1}, "seed=-1 must be an integer in [0, 2**63)"),
    ({"seed": 2**63}, f"seed={2**63} must be an integer in [0, 2**63)"),
])
def test_bad_run_config(kwargs, message):
    with pytest.raises(ConfigError) as err:
        RunConfig(**kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "resnet"}, "unknown workload 'resnet'"),
    ({"name": "transformer", "hidden": 30, "heads": 4}, "heads=4 does not divide hidden=30"),
    ({"name": "mlp", "dataset": "cifar"}, "unknown dataset 'cifar'"),
    ({"name": "mlp", "dataset": "mnist"}, "needs dataset_path"),
    ({"name": "transformer", "dataset": "digits"}, "applies to the mlp workload only"),
])
def test_bad_workload_config(kwargs, message):
    with pytest.raises(ConfigError) as err:
        WorkloadConfig(**kwargs)
    assert message in str(err.value)


def test_defaults_are_the_seed_network_and_a_small_gpt():
    assert RunConfig().workload.shape() == {"layers": 1, "hidden": 512}
    t = RunConfig(workload=TRANSFORMER)
    assert t.workload.shape() == {"layers": 4, "hidden": 64, "heads": 4, "seq_len": 32, "vocab_size": 256}
    assert t.lr == 1e-3 and RunConfig().lr == 0.01


def test_point_key_ignores_timeout_only():
    a = RunConfig(strategy="ddp", world_size=2)
    assert a.point_key() == RunConfig(strategy="ddp", world_size=2, timeout_s=5).point_key()
    assert a.point_key() != RunConfig(strategy="ddp", world_size=4).point_key()
    assert RunConfig.from_dict(a.to_dict()) == a


@pytest.mark.parametrize("data, why", [
    ({"world_size": "two"}, "config key world_size is 'two', expected an integer"),
    ({"world_size": 2.0}, "config key world_size is 2.0, expected an integer"),
    ({"lr": True}, "config key lr is True, expected a number"),
    ({"pin_memory": 1}, "config key pin_memory is 1, expected true or false"),
    ({"strategy": ["ddp"]}, "config key strategy is ['ddp'], expected a string"),
    ({"inject_fault": 3}, "config key inject_fault is 3, expected a string or null"),
    ({"workload": {"name": True}}, "config key workload.name is True, expected a string"),
    ({"workload": {"capacity_factor": "1.25"}}, "config key workload.capacity_factor is '1.25', expected a number"),
    ({"workload": 5}, "config key workload is 5, expected an object"),
    ({"wrld_size": 2}, "unknown config key wrld_size; valid: dp, tp,"),
    ({"workload": {"layer": 2}}, "unknown config key workload.layer; valid: name, layers,"),
    ([1, 2], "config object is [1, 2], expected an object"),
])
def test_from_dict_names_a_mistyped_or_unknown_key(data, why):
    """A record's config is JSON someone may have edited: every key known, every value of its field's type
    (an integer field takes no 2.0, a flag no 1), else a ConfigError naming it before anything is built."""
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict(data)
    assert str(err.value).startswith(why)
    assert RunConfig.from_dict({"lr": 1, "inject_fault": None, "workload": {"name": "moe", "capacity_factor": 2}}).lr == 1


@pytest.mark.parametrize("fields, why", [
    ({"name": "transformer", "experts": 8},
     "experts=8 does not apply to the transformer workload, which reads layers, hidden, heads, seq_len, vocab_size"),
    ({"name": "mlp", "heads": 2}, "heads=2 does not apply to the mlp workload, which reads layers, hidden and its dataset"),
    ({"name": "hf-gpt2", "router": "balanced"}, "router='balanced' does not apply to the hf-gpt2 workload"),
    ({"name": "mlp", "dataset_path": "/data/mnist"}, "dataset_path='/data/mnist' applies to dataset='mnist' only"),
])
def test_a_field_the_built_in_workload_does_not_read_is_refused(fields, why):
    """Once ``--workload transformer --experts 8`` ran a dense transformer and recorded nothing of the experts."""
    with pytest.raises(ConfigError) as err:
        WorkloadConfig(**fields)
    assert str(err.value).startswith(why)
    # the fields each reads, and a plugin's, are taken
    WorkloadConfig(name="moe", experts=8, router="balanced", heads=2, hidden=64)
    WorkloadConfig(name="mlp", dataset="mnist", dataset_path="/data/mnist")


def test_reference_is_single_process_same_batch_and_seed():
    cfg = RunConfig(strategy="pipeline", world_size=2, micro_batches=4, seed=3, global_batch_size=32)
    ref = cfg.reference()
    assert (ref.strategy.value, ref.world_size, ref.micro_batches) == ("single", 1, 1)
    assert (ref.global_batch_size, ref.seed, ref.workload) == (32, 3, cfg.workload)

