"""The single-process reference runs as one spawned rank on the run's device and precision, bounded by
the run's timeout; when it cannot run, the record keeps the reason instead of a difference."""

from __future__ import annotations

from parbench import launch
from parbench.config import RunConfig
from parbench.distributed import Outcome


def test_reference_keeps_device_precision_and_the_gpu_backend():
    gpu = RunConfig(strategy="ddp", world_size=2, device="cuda", backend="nccl", precision="bf16").reference()
    assert (gpu.strategy.value, gpu.world_size, gpu.device, gpu.backend.value, gpu.precision) == \
        ("single", 1, "cuda", "nccl", "bf16")
    cpu = RunConfig(strategy="ddp", world_size=2, precision="bf16", timeout_s=7).reference()
    assert (cpu.device, cpu.backend.value, cpu.precision, cpu.timeout_s) == ("cpu", "gloo", "bf16", 7)


def test_reference_is_spawned_once_per_configuration_and_matches(tmp_path, monkeypatch):
    launched = []
    real = launch.launch
    monkeypatch.setattr(launch, "launch", lambda cfg: launched.append(cfg.world_size) or real(cfg))
    refs = launch.References()
    for _ in range(2):
        rec = launch.run(RunConfig(strategy="ddp", world_size=2, steps=2), results_dir=None, references=refs)
        assert rec["status"] == "ok" and rec["reference_error"] is None
        assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    assert launched == [2, 1, 2]  # the second run reuses the first one's reference


def test_a_reference_that_cannot_run_is_recorded_with_its_reason(tmp_path, monkeypatch):
    real = launch.launch

    def launch_but_reference_times_out(cfg):
        if cfg.world_size == 1:
            return Outcome(status="timeout", error="timed out after 7 s; ranks without a result: [0]", wall_s=7.0)
        return real(cfg)

    monkeypatch.setattr(launch, "launch", launch_but_reference_times_out)
    rec = launch.run(RunConfig(strategy="ddp", world_size=2, steps=2), results_dir=tmp_path)
    assert rec["status"] == "ok" and rec["loss_max_abs_diff_vs_reference"] is None
    assert rec["reference_error"] == "reference timeout: timed out after 7 s; ranks without a result: [0]"
