"""GPU facts without a GPU: datasheet lookup by device name, MFU basis, nvidia-smi parsing, the rank's
device choice, and the fields that are null under NCCL. Only the device query is mocked."""

from __future__ import annotations

import pytest
import torch

from parbench import devices, record, runner
from parbench.config import RunConfig


@pytest.mark.parametrize("name,model,bf16", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5e12),  # the SXM part's CUDA name
    ("NVIDIA H100 PCIe", "H100 PCIe", 756e12),  # a prefix match would give it the SXM figure
    ("NVIDIA H100 NVL", "H100 NVL", 835.5e12),
    ("NVIDIA H200", "H200 SXM", 989.5e12),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5e12),
    ("NVIDIA A100-SXM4-80GB", "A100", 312e12),
    ("NVIDIA A100 80GB PCIe", "A100", 312e12),
])
def test_datasheet_matches_the_variant_not_the_family(name, model, bf16):
    sheet = devices.datasheet(name)
    assert sheet.model == model and sheet.peak_flops["bf16"] == bf16


def test_peak_basis_names_dtype_value_and_source():
    fp32 = devices.peak_basis("NVIDIA H100 PCIe", "fp32")
    assert (fp32.dtype, fp32.peak_flops) == ("fp32", 51e12) and "H100 PCIe" in fp32.source
    assert devices.peak_basis(None, "fp32").peak_flops is None
    unknown = devices.peak_basis("NVIDIA GeForce GTX 1080", "bf16")
    assert unknown.peak_flops is None and "GTX 1080" in unknown.source
    assert devices.peak_basis("NVIDIA A100-SXM4-40GB", "fp8").peak_flops is None  # Ampere has no FP8


def test_nvidia_smi_line():
    gpu = devices.parse_gpu_line("3, NVIDIA H100 80GB HBM3, 81559")
    assert (gpu.index, gpu.name, gpu.memory_bytes) == (3, "NVIDIA H100 80GB HBM3", 81559 * 2**20)


def test_single_host_ranks_ignore_an_inherited_local_rank(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")  # e.g. parbench itself started under torchrun
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    cfg = RunConfig(strategy="ddp", world_size=2, device="cuda")  # validation needs no GPU
    assert runner._device(cfg, 1) == torch.device("cuda", 1) and chosen == [1]
    with pytest.raises(RuntimeError, match="local rank 2 has no GPU of its own: 2 visible"):
        runner._device(cfg, 2)


def _rank(os_bytes, wire):
    return {"comm_bytes_per_step": {"data": 0, "parameter": 8, "intermediate": 0}, "comm_ops": {},
            "comm_wire_bytes_per_step": wire, "os_write_bytes_per_step": os_bytes}


def test_os_and_wire_bytes_are_null_not_zero_under_nccl():
    out = record._comm([_rank(None, None), _rank(None, None)])
    assert out["os_write_bytes_per_step"] is None and out["comm_wire_bytes_per_step"] is None
    assert out["comm_parameter_bytes_per_step"] == 8
    gloo = record._comm([_rank(10.0, 12), _rank(14.0, 12)])
    assert gloo["os_write_bytes_per_step"] == 14.0 and gloo["comm_wire_bytes_per_step"] == 12
