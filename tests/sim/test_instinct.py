"""The AMD Instinct presets: their figures against the datasheets, the point-to-point Infinity Fabric that gives a
pair of GPUs one link where all eight of a node have seven, and the held-out MLPerf rows they predict."""

from __future__ import annotations

import json

import pytest

from parbench.cli import main
from parbench.devices import datasheet, peak_basis
from parbench.sim.hardware import (
    PRESETS,
    collective_cost_s,
    intra_bandwidth_bytes_per_s,
)
from parbench.sim.published_memory import MLPERF_LLAMA8B_AMD, compare_runs, runs

GIB = 2**30


def test_the_instinct_presets_are_their_datasheets_derated_as_every_preset():
    """Dense peaks as AMD prints them (sparse ones halved), memory as ROCm's table lists it in GiB, HBM and every
    link at the derating every preset takes (0.8 memory and GPU links, 0.9 network)."""
    expected = {"mi300x": (1307.4e12, 2614.9e12, 192, 5.3e12, 64e9), "mi325x": (1307.4e12, 2614.9e12, 256, 6.0e12, 64e9),
                "mi355x": (2516.6e12, 5033.2e12, 288, 8.0e12, 76.8e9), "mi350x": (2306.9e12, 4613.7e12, 288, 8.0e12, 76.8e9)}
    for name, (bf16, fp8, gib, hbm, link) in expected.items():
        c = PRESETS[name]
        assert (c.peak_flops, c.peak_flops_fp8, c.memory_bytes) == (bf16, fp8, gib * GIB), name
        assert c.memory_bandwidth_bytes_per_s == pytest.approx(0.8 * hbm)
        assert c.peer_link_bytes_per_s == pytest.approx(0.8 * link)  # one Infinity Fabric link each way
        assert c.intra.bandwidth_bytes_per_s == pytest.approx(0.8 * 7 * link)  # seven of them to the other GPUs
        assert c.inter.bandwidth_bytes_per_s == pytest.approx(0.9 * 400e9 / 8) and c.gpus_per_node == 8
    # CDNA 3 has TF32 matrix cores; CDNA 4 runs float32 matmuls at its FP32 rate
    assert PRESETS["mi300x"].peak_flops_tf32 == 653.7e12 > PRESETS["mi300x"].peak_flops_fp32 == 163.4e12
    assert PRESETS["mi355x"].peak_flops_tf32 == PRESETS["mi355x"].peak_flops_fp32 == 157.3e12
    assert all(PRESETS[n].peer_link_bytes_per_s == 0 for n in ("h100-sxm", "gb200-nvl72", "v100-dgx2h", "a100-80gb"))


def test_a_pair_of_instinct_gpus_shares_one_link_where_eight_share_seven():
    """A collective over k GPUs of a point-to-point node runs over each GPU's k - 1 links to the others; behind a
    switch every group gets the GPU's whole NVLink bandwidth. The seconds per byte of an all-reduce come out of the
    ring formula (2 (k - 1) / k bytes a byte) over that bandwidth."""
    mi, h = PRESETS["mi300x"], PRESETS["h100-sxm"]
    link = 0.8 * 64e9
    assert [intra_bandwidth_bytes_per_s(mi, k) for k in (2, 4, 8)] == pytest.approx([link, 3 * link, 7 * link])
    assert [intra_bandwidth_bytes_per_s(h, k) for k in (2, 8)] == [h.intra.bandwidth_bytes_per_s] * 2
    per_byte = {k: collective_cost_s(mi, "all_reduce", k, inter_node=False)[1] for k in (2, 8)}
    assert per_byte[2] == pytest.approx(1 / link) and per_byte[8] == pytest.approx(2 * 7 / 8 / (7 * link))
    assert per_byte[2] / per_byte[8] == pytest.approx(4.0)  # behind a switch a pair would be 1.75x faster a byte
    assert collective_cost_s(mi, "send", 2, inter_node=False)[1] == pytest.approx(1 / link)


def test_tensor_parallel_pairs_on_instinct_gpus_move_their_bytes_over_one_link(capsys):
    """Llama 3 8B on 8 GPUs at TP 2 x DP 4 and at TP 8: the same bytes on MI300X and on H100 (whose NVLink per GPU,
    360 GB/s derated, is the MI300X's seven links' 358.4 to within 0.5%). At TP 8 they take the same time on both;
    at TP 2 a MI300X pair has one 51.2 GB/s link where an H100 pair has the switch's 360, 7x as long."""
    base = ["simulate", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--seq", "4096", "--zero", "1",
            "--format", "json"]
    seconds, sent = {}, {}
    for cluster in ("mi300x", "h100-sxm"):
        for tp in (2, 8):
            assert main(base + ["--cluster", cluster, "--tp", str(tp)]) == 0
            p = json.loads(capsys.readouterr().out)["prediction"]
            seconds[cluster, tp] = p["comm_total_s"]["intermediate"] - p["comm_latency_s"]["intermediate"]
            sent[cluster, tp] = p["comm_bytes"]["intermediate"]
    for tp in (2, 8):
        assert sent["mi300x", tp] == sent["h100-sxm", tp] > 0
    assert seconds["mi300x", 8] / seconds["h100-sxm", 8] == pytest.approx(0.8 * 450e9 / (0.8 * 7 * 64e9), rel=1e-6)
    assert seconds["mi300x", 2] / seconds["h100-sxm", 2] == pytest.approx(0.8 * 450e9 / (0.8 * 64e9), rel=1e-6)


def test_runs_on_instinct_gpus_report_mfu_against_their_datasheet():
    """The runner's MFU denominator for a ROCm device name (torch reports "AMD Instinct MI300X")."""
    assert datasheet("AMD Instinct MI300X").model == "MI300X" and datasheet("AMD Instinct MI355X").model == "MI355X"
    assert datasheet("AMD Instinct MI350X").model == "MI350X" and datasheet("AMD Instinct MI325X").model == "MI325X"
    assert peak_basis("AMD Instinct MI300X", "bf16").peak_flops == 1307.4e12
    assert peak_basis("AMD Instinct MI355X", "tf32").peak_flops is None  # no TF32 on CDNA 4


def test_tf32_is_refused_on_cdna4_and_mxfp8_on_every_instinct_preset(capsys):
    base = ["simulate", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--seq", "2048", "--zero", "3"]
    assert main(base + ["--cluster", "mi355x", "--precision", "tf32"]) == 2
    assert "cluster mi355x has no TF32 tensor cores" in capsys.readouterr().err
    assert main(base + ["--cluster", "mi300x", "--precision", "tf32"]) == 0
    capsys.readouterr()
    assert main(base + ["--cluster", "mi355x", "--precision", "fp8", "--fp8-scaling", "mxfp8"]) == 2
    assert "cluster mi355x has no block-scaled FP8 GEMMs" in capsys.readouterr().err


def test_the_amd_mlperf_rows_are_their_logs_and_predicted_within_10_percent():
    """Held out of every fit (the Instinct presets take the H100's efficiencies): the median block throughput of
    each log, 30.662 and 24.995 samples/s at 32 sequences a step, and the layout its config states."""
    rows = [r for r in runs() if r.source == MLPERF_LLAMA8B_AMD]
    assert [(r.cluster, r.value) for r in rows] == [("mi355x", round(32 / 30.662, 4)), ("mi350x", round(32 / 24.995, 4))]
    assert all((r.layout.dp, r.layout.tp, r.layout.micro_batches, r.layout.global_batch_size) == (8, 1, 2, 32)
               for r in rows)
    results = [r for r in compare_runs() if r["source"] == MLPERF_LLAMA8B_AMD]
    errors = [res["metric_error_pct"] for res in results]
    assert all(abs(e) < 10 for e in errors), errors
    assert all(res["predicted_fits"] for res in results)
