"""GPU facts without a GPU: datasheet lookup by device name, MFU basis, nvidia-smi parsing, the rank's
device choice, and the fields that are null under NCCL. Only the device query is mocked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from parbench import devices, record
from parbench.distributed import local_device


@pytest.mark.parametrize("name,model,bf16", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.5e12),  # the SXM part's CUDA name
    ("NVIDIA H100 PCIe", "H100 PCIe", 756e12),  # a prefix match would give it the SXM figure
    ("NVIDIA H100 NVL", "H100 NVL", 835.5e12),
    ("NVIDIA H200", "H200 SXM", 989.5e12),
    ("NVIDIA H200 NVL", "H200 NVL", 835.5e12),
    ("NVIDIA A100-SXM4-80GB", "A100", 312e12),
    ("NVIDIA A100 80GB PCIe", "A100", 312e12),
    ("NVIDIA B200", "B200 (HGX)", 4.5e15 / 2),  # 4.5 PFLOPS BF16 with sparsity
    ("NVIDIA GB200", "GB200", 5e15 / 2),  # contains "B200": the superchip's own figure comes first
    ("NVIDIA B300 SXM6 AC", "B300 (HGX)", 2.25e15),  # DGX B300: 72 PFLOPS sparse FP8 for 8 GPUs, BF16 half of FP8
    ("NVIDIA GB300", "GB300", 2.5e15),  # contains "B300": the rack's 360 PFLOPS dense FP8 / 72 GPUs, BF16 half
    ("NVIDIA H800 80GB HBM3", "H800 SXM", 989.5e12),  # the H100 SXM's tensor cores, NVLink cut to 400 GB/s
    ("NVIDIA A800-SXM4-80GB", "A800", 312e12),
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
    assert devices.peak_basis("NVIDIA H800 PCIe", "bf16").peak_flops is None  # not the SXM part's figures


@pytest.mark.parametrize("name,model,fp32,fp16", [
    ("Tesla V100-SXM2-32GB", "V100 SXM2", 15.7e12, 125e12),
    ("Tesla V100-SXM3-32GB", "V100 SXM2", 15.7e12, 125e12),  # the DGX-2's part: the SXM2 datasheet's figures
    ("Tesla V100-PCIE-16GB", "V100 PCIe", 14e12, 112e12),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe", 16.4e12, 130e12),  # contains "V100": its own figures come first
])
def test_a_volta_gpu_has_fp32_and_fp16_peaks_and_no_bf16_or_tf32_one(name, model, fp32, fp16):
    """The V100 datasheet's columns; Volta's tensor cores take fp16 alone, so a bf16 or tf32 run's MFU has no
    denominator and says why rather than borrowing the fp16 figure."""
    sheet = devices.datasheet(name)
    assert sheet.model == model and sheet.peak_flops == {"fp32": fp32, "fp16": fp16}
    for dtype in ("bf16", "tf32"):
        basis = devices.peak_basis(name, dtype)
        assert basis.peak_flops is None and basis.source == f"{model} has no {dtype} peak"
    assert devices.peak_basis(name, "fp32").peak_flops == fp32


def test_nvidia_smi_line():
    gpu = devices.parse_gpu_line("3, NVIDIA H100 80GB HBM3, 81559")
    assert (gpu.index, gpu.name, gpu.memory_bytes) == (3, "NVIDIA H100 80GB HBM3", 81559 * 2**20)


def test_single_host_ranks_ignore_an_inherited_local_rank(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")  # e.g. parbench itself started under torchrun
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    assert local_device("cuda", 1) == torch.device("cuda", 1) and chosen == [1]
    with pytest.raises(RuntimeError, match="local rank 2 has no GPU of its own: 2 visible"):
        local_device("cuda", 2)


def _rank(os_bytes, wire):
    return SimpleNamespace(comm_bytes_per_step={"data": 0, "parameter": 8, "intermediate": 0}, comm_ops={},
                           comm_wire_bytes_per_step=wire, os_write_bytes_per_step=os_bytes)


def test_os_and_wire_bytes_are_null_not_zero_under_nccl():
    out = record._comm([_rank(None, None), _rank(None, None)])
    assert out["os_write_bytes_per_step"] is None and out["comm_wire_bytes_per_step"] is None
    assert out["comm_parameter_bytes_per_step"] == 8
    gloo = record._comm([_rank(10.0, 12), _rank(14.0, 12)])
    assert gloo["os_write_bytes_per_step"] == 14.0 and gloo["comm_wire_bytes_per_step"] == 12


def test_summary_shows_mfu_basis_and_gpu_memory_share():
    import io

    from rich.console import Console

    from parbench.summary import print_run

    rec = {"strategy": "ddp", "world_size": 2, "workload": "mlp", "backend": "nccl", "precision": "bf16",
           "global_batch_size": 64, "status": "ok", "throughput_samples_per_s": 1e4, "throughput_tokens_per_s": None,
           "step_time_s_median": 0.01, "step_time_s_p10": 0.009, "step_time_s_p90": 0.011, "exposed_comm_time_s": None,
           "achieved_flops_per_s_per_rank": 2e14, "mfu": 2e14 / 989.5e12, "mfu_peak_flops": 989.5e12,
           "mfu_dtype": "bf16", "mfu_peak_source": "H100 SXM datasheet", "peak_rss_bytes": 2**30,
           "mem_param_bytes": 0, "mem_grad_bytes": 0, "mem_optim_bytes": 0, "mem_activation_bytes": 0,
           "cuda_allocated_peak_bytes": 8 * 2**30, "cuda_reserved_peak_bytes": 10 * 2**30,
           "cuda_device_used_bytes": 12 * 2**30, "cuda_device_total_bytes": 80 * 2**30,
           "comm_data_bytes_per_step": 0, "comm_parameter_bytes_per_step": 0, "comm_intermediate_bytes_per_step": 0,
           "os_write_bytes_per_step": None, "loss_final": 2.0, "loss_max_abs_diff_vs_reference": 0.0,
           "overhead_s": 1.0, "wall_time_s": 2.0, "run_id": "x"}
    out = io.StringIO()
    print_run(rec, None, Console(file=out, width=200))
    text = out.getvalue()
    assert "MFU 20.2% of 989.5 TFLOP/s bf16 (H100 SXM datasheet)" in text
    assert "allocated peak 8.00 GiB (10%)" in text and "device in use 12.00 GiB (15%) of 80.00 GiB" in text
    assert "nccl: NVLink / shared memory / InfiniBand make no write syscalls" in text
    assert "oversubscribed" not in text  # a GPU run: null
    out = io.StringIO()
    print_run({**rec, "backend": "gloo", "oversubscribed": True, "threads_per_rank": 2, "host_cpus": 2}, None,
              Console(file=out, width=200))
    assert ("oversubscribed: the ranks on one host x 2 thread(s) each outnumber its 2 CPUs; compare timings as "
            "ratios within one run") in out.getvalue()
