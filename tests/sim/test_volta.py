"""The DGX-2H V100 preset: its figures against the datasheets and the paper that ran on it, the precision and
attention Volta has (fp16, no flash kernel), and the held-out Megatron-LM v1.0 rows it predicts."""

from __future__ import annotations

import json

import pytest

from parbench.cli import main
from parbench.sim.hardware import PRESETS
from parbench.sim.published import MEGATRON_V1, V1_WEAK_SCALING, compare_published

GPT2_2_5B = ["simulate", "--cluster", "v100-dgx2h", "--layers", "54", "--hidden", "1920", "--heads", "20", "--seq", "1024",
             "--vocab", "51200", "--gpus", "128", "--tp", "2", "--global-batch", "512", "--recompute", "full"]
"""Shoeybi et al. 2019's 2.5B GPT-2 (Table 2) at its 2-way tensor x 64-way data parallelism."""


def test_the_dgx2h_preset_is_its_datasheets_and_the_networks_the_megatron_paper_names():
    """2.1 PFLOPS for 16 GPUs (DGX-2H datasheet); the Megatron-LM paper's 39 TFLOP/s is 30% of the peak and the
    v1.0 post's 62.4 is 48%; 900 GB/s HBM2; 300 GB/s NVSwitch (both directions) and 8 x 100 Gb/s InfiniBand per
    16-GPU server; each at the derating every preset takes (0.8 memory and NVLink, 0.9 network)."""
    c = PRESETS["v100-dgx2h"]
    assert c.peak_flops == pytest.approx(2.1e15 / 16, rel=0.01)
    assert (39e12 / c.peak_flops, 62.4e12 / c.peak_flops) == (pytest.approx(0.30, abs=0.005), pytest.approx(0.48, abs=0.005))
    assert c.memory_bandwidth_bytes_per_s == 0.8 * 900e9 and c.memory_bytes == 32 * 2**30
    assert c.intra.bandwidth_bytes_per_s == 0.8 * 300e9 / 2
    assert c.inter.bandwidth_bytes_per_s == pytest.approx(0.9 * 8 * 100e9 / 8 / 16)
    assert c.gpus_per_node == 16 and c.multinode_all_reduce_latency_factor == 1.9  # NCCL's pre-Ampere ring plateau
    assert not c.bf16 and not c.flash_attention and c.default_attention == "eager"
    assert c.peak_flops_fp32 == pytest.approx(15.7e12 * 130 / 125, rel=0.005)


def test_volta_runs_fp16_and_eager_unless_told_and_refuses_bf16_and_flash_before_predicting(capsys):
    assert main(GPT2_2_5B) == 0
    assert "v100-dgx2h: 128 ranks, dp=64 tp=2 pp=1" in capsys.readouterr().out.splitlines()[0]
    assert main(GPT2_2_5B + ["--format", "json"]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["attention"] == "eager" and layout["precision"]["param_bytes"] == 2
    assert layout["precision"]["loss_scaling"]  # fp16, not bf16: the loss is scaled
    for flags, message in ((["--precision", "bf16"], "--precision bf16: cluster v100-dgx2h has no bf16 tensor cores"),
                           (["--precision", "amp"], "--precision amp: cluster v100-dgx2h has no bf16 tensor cores"),
                           (["--attention", "flash"], "--attention flash: cluster v100-dgx2h runs no flash attention")):
        assert main(GPT2_2_5B + flags) == 2
        captured = capsys.readouterr()
        assert message in captured.err and not captured.out
    assert main(GPT2_2_5B + ["--precision", "fp32"]) == 0


def test_a_cluster_file_says_whether_its_devices_take_bf16_and_run_flash_attention(tmp_path, capsys):
    """The two fields travel through --print-cluster and take effect from a file: an H100 file with them turned off
    is refused bf16 and flash like the V100, and predicts fp16 with eager attention by default."""
    assert main(["simulate", "--cluster", "h100-sxm", "--print-cluster"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["bf16"], data["flash_attention"]) == (True, True)
    path = tmp_path / "no-bf16.json"
    path.write_text(json.dumps({**data, "bf16": False, "flash_attention": False}))
    base = ["simulate", "--cluster", str(path), "--model", "llama3-8b", "--seq", "2048", "--gpus", "8", "--zero", "3",
            "--global-batch", "8"]
    assert main(base + ["--precision", "bf16"]) == 2 and "has no bf16 tensor cores" in capsys.readouterr().err
    assert main(base + ["--format", "json"]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    assert layout["attention"] == "eager" and layout["precision"]["loss_scaling"]
    path.write_text(json.dumps({**data, "bf16": "no"}))
    assert main(base) == 2 and "bf16='no' must be true or false" in capsys.readouterr().err


def test_the_megatron_v1_rows_are_the_posts_iteration_times_and_predicted_within_8_percent():
    """Held out of every fit (the V100 takes the A100's GEMM efficiency): the post's 1288 and 1357 ms at batch 8."""
    assert [(p.gpus, p.tp, p.global_batch, p.measured_s) for p in V1_WEAK_SCALING] == [(1, 1, 8, 1.288), (4, 4, 8, 1.357)]
    rows = compare_published(rows=V1_WEAK_SCALING)
    assert {r["source"] for r in rows} == {MEGATRON_V1}
    assert all(abs(r["error_pct"]) < 8 for r in rows), [(r["name"], r["error_pct"]) for r in rows]
    # the 1.2B has no tensor parallelism, the 4.2B's two all-reduces a layer each way are exposed on the NVSwitch
    assert rows[0]["pred_time_comm_exposed_intermediate_s"] == 0 < rows[1]["pred_time_comm_exposed_intermediate_s"]


def test_the_listings_name_every_preset_with_its_figures(capsys):
    """``--list-models``: every preset with its shape and both counts (the same as the preset test's); ``--list-
    clusters``: every cluster preset with its peak, memory and derated links, the V100's missing bf16 and flash named."""
    from parbench.sim.models import MODELS

    assert main(["simulate", "--list-models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split() for ln in lines[1:-1]}
    assert list(rows) == list(MODELS)
    for name, cols in rows.items():
        counted, published = (float(c.rstrip("B")) for c in cols[4:6])
        assert published == round(MODELS[name].published_params / 1e9, 1)
        assert abs(counted - published) <= 0.005 * published + 0.1, name  # 0.5%, and a tenth of rounding each
    assert rows["llama4-maverick"][-3:] == ["1", "of", "128"] and rows["deepseek-v3"][4] == "671.0B"
    assert main(["simulate", "--list-clusters"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln for ln in lines[1:-1]}
    assert list(rows) == list(PRESETS)
    assert rows["v100-dgx2h"].split()[1:8] == ["16", "130", "0", "32.0", "720", "120", "5.62"]
    assert rows["v100-dgx2h"].endswith("no bf16, no flash attention") and "no bf16" not in rows["h100-sxm"]


def test_a_float32_run_computes_on_the_cuda_cores_attention_and_head_included():
    """``--precision fp32`` is torch's default float32 (``allow_tf32`` off): every matmul of a block, its attention
    core too, at the CUDA cores' peak x the GEMM (or attention) efficiency, on a V100 and on an A100 alike (a CPU
    profile's one figure where the cluster states no float32 peak); ``tf32`` at the TF32 tensor cores' peak. Timed on devices with no launch cost and
    unbounded memory bandwidth, against the block's FLOPs counted by hand (causal flash attention: half the scores)."""
    from dataclasses import replace

    from parbench.sim.architecture import Architecture
    from parbench.sim.layout import PRECISIONS
    from parbench.sim.model import block_unit
    from parbench.sim.timing import unit_times_s

    t, d, heads = 1024, 1024, 8
    arch = Architecture(name="b", layers=1, hidden=d, heads=heads, vocab=64, seq_len=t, bias="none")
    linear = 2 * t * (4 * d * d + 2 * d * 4 * d)  # q, k, v, o and the 4d MLP's two matrices
    core = 2 * 2 * t * t * d / 2  # QK^T and AV over the causal half
    assert PRECISIONS["fp32"].gemm_dtype == "fp32"
    assert PRECISIONS["tf32"].gemm_dtype == "tf32"
    for name, dtype, peak in (("v100-dgx2h", "fp32", 16.3e12), ("a100-80gb", "fp32", 19.5e12),
                              ("a100-80gb", "tf32", 156e12)):  # the A100 datasheet's TF32, dense
        c = replace(PRESETS[name], gemm_overhead_s=0.0, memory_bandwidth_bytes_per_s=1e30)
        att = c.attention_efficiency or c.gemm_efficiency
        *_, gemm = unit_times_s(c, block_unit(0, arch), mb=1, tp=1, act_bytes=4, flash=True, gemm_dtype=dtype)
        assert gemm == pytest.approx(linear / (peak * c.gemm_efficiency) + core / (peak * att), rel=1e-3), name


def test_tf32_is_refused_where_there_are_no_tf32_tensor_cores(capsys):
    """Volta runs float32 matmuls on its CUDA cores whatever torch's ``allow_tf32`` says: ``--precision tf32`` on
    the V100 exits 2 naming fp32; on an A100 it predicts a step between fp32's and bf16's."""
    assert main(GPT2_2_5B + ["--precision", "tf32"]) == 2
    assert "--precision tf32: cluster v100-dgx2h has no TF32 tensor cores" in capsys.readouterr().err
    base = ["simulate", "--cluster", "a100-80gb", "--model", "llama3-8b", "--seq", "2048", "--gpus", "8", "--zero", "3",
            "--global-batch", "8", "--format", "json"]
    steps = {}
    for precision in ("fp32", "tf32", "bf16"):
        assert main([*base, "--precision", precision]) == 0
        steps[precision] = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert steps["fp32"] > steps["tf32"] > steps["bf16"]
