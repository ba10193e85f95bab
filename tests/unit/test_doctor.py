"""``parbench doctor`` on this machine, and with the GPU query mocked (nvidia-smi's answer, the
device count): what it prints and when it exits 2."""

from __future__ import annotations

import torch

from parbench import devices
from parbench.cli import main


def test_cpu_machine_is_ready_for_gloo_and_says_why_not_for_nccl(capsys):
    assert main(["doctor", "--world-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "gloo built in" in out and "ready: world size 2, gloo on cpu, fp32" in out
    if not torch.cuda.is_available():
        assert "GPUs" in out and "CPU runs only" in out
        assert main(["doctor", "--device", "cuda", "--backend", "nccl"]) == 2
        assert "cannot run (world size 2, nccl on cuda, fp32): device=cuda but torch sees no GPU" in capsys.readouterr().out


def test_gpus_are_listed_with_datasheet_peaks_and_too_many_ranks_refused(monkeypatch, capsys):
    fake = [devices.parse_gpu_line("0, NVIDIA H100 PCIe, 81559"), devices.parse_gpu_line("1, NVIDIA H100 PCIe, 81559")]
    monkeypatch.setattr(devices, "list_gpus", lambda timeout_s=10.0: fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "can_device_access_peer", lambda i, j: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert main(["doctor", "--device", "cuda", "--world-size", "4"]) == 2
    out = capsys.readouterr().out
    assert "NVIDIA H100 PCIe (H100 PCIe), 79.6 GiB; dense peaks fp32 51 TFLOP/s, tf32 378 TFLOP/s, bf16 756" in out
    assert "! ranks per GPU       4 ranks on this host over 2 GPUs: 2 per GPU" in out
    assert "4 ranks on this host need one GPU each; this machine has 2" in out
    assert main(["doctor", "--device", "cuda", "--world-size", "4", "--nproc-per-node", "2"]) == 0


def test_bad_doctor_input_exits_2(capsys):
    """(The exit status of the real process: tests/unit/test_bad_input_cli.py runs one under strace.)"""
    assert main(["doctor", "--precision", "fp16"]) == 2
    assert "unknown precision 'fp16'" in capsys.readouterr().err
