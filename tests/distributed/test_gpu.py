"""GPU paths (nccl, CUDA memory statistics): every strategy that fits the GPUs present, skipped with
the reason where there are none. Bytes must equal the gloo/CPU run's: the traffic is the strategy's,
not the backend's."""

import pytest
import torch

from parbench.config import RunConfig
from parbench.launch import run

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(not GPUS or not torch.distributed.is_nccl_available(),
                                reason="needs a CUDA GPU and a torch built with nccl; this machine has neither")
CATEGORIES = ("data", "parameter", "intermediate")
LAYOUTS = {  # strategy -> (world size, extra options)
    "ddp": (2, {}), "zero1": (2, {}), "zero2": (2, {}), "fsdp": (2, {}), "tp": (2, {}),
    "pipeline": (2, {"micro_batches": 2}), "ps": (2, {}), "hybrid": (4, {"dp": 2, "tp": 2}),
}


def _run(tmp_path, **kw) -> dict:
    rec = run(RunConfig(steps=3, **kw), results_dir=tmp_path)
    assert rec["status"] == "ok", rec["error"]
    return rec


def test_ddp_over_nccl_records_cuda_memory_and_exact_bytes(tmp_path):
    n = min(GPUS, 2)
    strategy = "ddp" if n > 1 else "single"
    rec = _run(tmp_path, strategy=strategy, world_size=n, backend="nccl", device="cuda")
    assert rec["cuda_allocated_peak_bytes"] >= rec["mem_param_bytes"] > 0
    assert rec["cuda_reserved_peak_bytes"] >= rec["cuda_allocated_peak_bytes"]
    assert rec["cuda_device_total_bytes"] >= rec["cuda_device_used_bytes"] >= rec["cuda_reserved_peak_bytes"]
    psi = rec["mem_param_bytes"]
    assert rec["comm_parameter_bytes_per_step"] == 2 * (n - 1) * psi // n
    assert rec["os_write_bytes_per_step"] is None and rec["comm_wire_bytes_per_step"] is None
    assert rec["mfu_dtype"] == "fp32" and rec["gpu_name"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-4  # GPU kernels vs the reference


@pytest.mark.parametrize("strategy", sorted(LAYOUTS))
def test_every_strategy_on_nccl_moves_the_bytes_it_moves_on_gloo(tmp_path, strategy):
    world, extra = LAYOUTS[strategy]
    if world > GPUS:
        pytest.skip(f"{strategy} needs {world} GPUs, {GPUS} present")
    kw = dict(strategy=strategy, world_size=world, workload={"name": "transformer"}, **extra)
    gpu = _run(tmp_path, backend="nccl", device="cuda", **kw)
    cpu = _run(tmp_path, backend="gloo", device="cpu", **kw)
    assert {c: gpu[f"comm_{c}_bytes_per_step"] for c in CATEGORIES} == \
        {c: cpu[f"comm_{c}_bytes_per_step"] for c in CATEGORIES}
    assert gpu["loss_max_abs_diff_vs_reference"] <= 1e-3


def test_bf16_on_gpu_halves_ddp_gradient_bytes(tmp_path):
    if GPUS < 2:
        pytest.skip(f"needs 2 GPUs, {GPUS} present")
    fp32 = _run(tmp_path, strategy="ddp", world_size=2, backend="nccl", device="cuda")
    bf16 = _run(tmp_path, strategy="ddp", world_size=2, backend="nccl", device="cuda", precision="bf16")
    assert 2 * bf16["comm_parameter_bytes_per_step"] == fp32["comm_parameter_bytes_per_step"]
    assert bf16["mfu_dtype"] == "bf16" and bf16["loss_max_abs_diff_vs_reference"] <= bf16["loss_tolerance"]


def test_fsdp_peak_is_taken_after_sharding(tmp_path):
    """The record's allocator peak must not include the unsharded model that the build held."""
    if GPUS < 2:
        pytest.skip(f"needs 2 GPUs, {GPUS} present")
    fsdp = _run(tmp_path, strategy="fsdp", world_size=2, backend="nccl", device="cuda",
                workload={"name": "transformer", "layers": 8, "hidden": 512, "heads": 8})
    ddp = _run(tmp_path, strategy="ddp", world_size=2, backend="nccl", device="cuda",
               workload={"name": "transformer", "layers": 8, "hidden": 512, "heads": 8})
    assert fsdp["cuda_allocated_peak_bytes"] < ddp["cuda_allocated_peak_bytes"]
