"""GPU paths (nccl, CUDA memory statistics): run where a GPU is present, skipped elsewhere."""

import pytest
import torch

from parbench.config import RunConfig
from parbench.launch import run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or not torch.distributed.is_nccl_available(),
                                reason="needs a CUDA GPU and a torch built with nccl; this machine has neither")


def test_ddp_over_nccl_records_cuda_memory_and_exact_bytes(tmp_path):
    n = min(torch.cuda.device_count(), 2)
    strategy = "ddp" if n > 1 else "single"
    rec = run(RunConfig(strategy=strategy, world_size=n, backend="nccl", device="cuda", steps=3), results_dir=tmp_path)
    assert rec["status"] == "ok", rec["error"]
    assert rec["cuda_allocated_peak_bytes"] >= rec["mem_param_bytes"] > 0
    assert rec["cuda_reserved_peak_bytes"] >= rec["cuda_allocated_peak_bytes"]
    psi = rec["mem_param_bytes"]
    assert rec["comm_parameter_bytes_per_step"] == 2 * (n - 1) * psi // n
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-4  # GPU kernels vs the CPU reference
