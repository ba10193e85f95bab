"""The GPU path's decisions, checked on a CPU machine: only the device query is mocked (the number
of GPUs torch sees); everything else is the code a GPU run goes through."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from parbench.config import ConfigError, RunConfig
from parbench.multinode import NodeLayout
from parbench.multinode.launch import run_node
from parbench.sweep import load_spec, plan
from parbench.preflight import check_environment


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def _sweep(tmp_path: Path, extra: str):
    path = tmp_path / "g.toml"
    path.write_text(f'strategies = ["ddp"]\nworld_sizes = [2]\n{extra}\n[[workloads]]\nname = "mlp"\n')
    return plan(load_spec(path))


def test_sweep_devices_key_puts_points_on_cuda(tmp_path, two_gpus):
    p = _sweep(tmp_path, 'devices = ["cpu", "cuda"]\nbackends = ["gloo", "nccl"]')
    if not torch.distributed.is_nccl_available():  # the CPU wheel has no nccl: those points say so
        assert all("backend=nccl is not built into this torch" in s.reason for s in p.skipped)
    got = sorted((pt.config.device, pt.config.backend.value) for pt in p.points)
    expected = [("cpu", "gloo"), ("cuda", "gloo")] + ([("cuda", "nccl")] if torch.distributed.is_nccl_available() else [])
    assert got == expected  # (cpu, nccl) is a cross-product artefact: not planned, not skipped
    assert not any("cpu" in s.label and "nccl" in s.label for s in p.skipped)


def test_sweep_without_gpus_skips_cuda_points_with_the_reason(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the cuda points would run")
    p = _sweep(tmp_path, 'devices = ["cpu", "cuda"]\nprecisions = ["fp32", "bf16"]')
    assert sorted(pt.config.precision for pt in p.points) == ["bf16", "fp32"]
    assert all(pt.config.device == "cpu" for pt in p.points) and len(p.skipped) == 2
    assert all("device=cuda but torch sees no GPU" in s.reason for s in p.skipped)
    assert {s.label.endswith("cuda bf16") for s in p.skipped} == {True, False}
    with pytest.raises(ConfigError, match="no runnable point .*device=cuda but torch sees no GPU"):
        _sweep(tmp_path, 'devices = ["cuda"]')


def test_more_ranks_than_gpus_is_refused_before_spawning(two_gpus):
    with pytest.raises(ConfigError, match="3 ranks on this host need one GPU each; this machine has 2"):
        check_environment(RunConfig(strategy="ddp", world_size=3, device="cuda", global_batch_size=48))
    check_environment(RunConfig(strategy="ddp", world_size=4, device="cuda"), ranks_here=2)  # 2 per node


def test_multinode_checks_the_environment_per_node(two_gpus, tmp_path):
    layout = NodeLayout(nnodes=2, nproc_per_node=3, node_rank=0, master_addr="127.0.0.1", master_port=29999)
    cfg = RunConfig(strategy="ddp", world_size=6, device="cuda", global_batch_size=48)
    with pytest.raises(ConfigError, match="3 ranks on this host need one GPU each"):
        run_node(cfg, layout, results_dir=tmp_path)
    if not torch.distributed.is_nccl_available():
        ok_layout = NodeLayout(nnodes=2, nproc_per_node=2, node_rank=0, master_addr="127.0.0.1", master_port=29999)
        with pytest.raises(ConfigError, match="backend=nccl is not built into this torch"):
            run_node(RunConfig(strategy="ddp", world_size=4, device="cuda", backend="nccl"), ok_layout,
                     results_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # refused before any agent started: nothing written


def test_bf16_and_tf32_on_gpus_without_their_tensor_cores_are_refused_before_spawning(two_gpus, monkeypatch):
    """Volta's tensor cores take fp16 alone: a bf16 or tf32 run on V100s is refused, naming the GPU and what its
    datasheet gives; fp32 runs there, and bf16 on A100s or on a GPU without a datasheet entry is not judged. Only the
    device query (nvidia-smi's list) is mocked."""
    from parbench import devices

    def gpus(*names):
        monkeypatch.setattr(devices, "list_gpus", lambda: [devices.Gpu(index=i, name=n, memory_bytes=2**35)
                                                           for i, n in enumerate(names)])

    gpus("Tesla V100-SXM2-32GB", "Tesla V100-SXM2-32GB")
    for precision in ("bf16", "tf32"):
        with pytest.raises(ConfigError, match=f"precision={precision}: GPU 0 \\(Tesla V100-SXM2-32GB\\) has no "
                                              f"{precision} tensor cores \\(the V100 SXM2 datasheet gives fp32, fp16\\)"):
            check_environment(RunConfig(strategy="ddp", world_size=2, device="cuda", precision=precision))
    check_environment(RunConfig(strategy="ddp", world_size=2, device="cuda", precision="fp32"))
    gpus("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB")  # one node of mixed GPUs: its second rank is refused
    with pytest.raises(ConfigError, match="GPU 1 \\(Tesla V100-SXM2-32GB\\)"):
        check_environment(RunConfig(strategy="ddp", world_size=2, device="cuda", precision="bf16"))
    check_environment(RunConfig(strategy="ddp", world_size=1, device="cuda", precision="bf16"))  # GPU 0 alone
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # CUDA's device 0, rank 0's, is the V100
    with pytest.raises(ConfigError, match="GPU 1 \\(Tesla V100-SXM2-32GB\\)"):
        check_environment(RunConfig(strategy="ddp", world_size=1, device="cuda", precision="bf16"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    gpus("Some Future GPU", "Some Future GPU")
    check_environment(RunConfig(strategy="ddp", world_size=2, device="cuda", precision="bf16"))


def test_nccl_without_cuda_is_refused():
    with pytest.raises(ConfigError, match="backend=nccl"):
        check_environment(RunConfig(strategy="ddp", world_size=2, backend="nccl"))


@pytest.mark.parametrize("kw", [dict(strategy="pipeline", world_size=2, micro_batches=2),
                                dict(strategy="ps", world_size=2),
                                dict(strategy="hybrid", world_size=4, dp=2, pp=2, micro_batches=2)])
def test_gloo_point_to_point_with_cuda_tensors_is_refused(kw):
    with pytest.raises(ConfigError, match="gloo does not do for device=cuda"):
        RunConfig(device="cuda", **kw)
    RunConfig(device="cuda", backend="nccl", **kw)  # the same layout on nccl is fine
