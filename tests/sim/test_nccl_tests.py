"""``parbench calibrate --nccl-tests``: a GPU cluster's links from nccl-tests logs. The logs here are written
from a known line, t(S) = a + factor x S / B, in nccl-tests' output format; the fit must give back B and a, and
the cluster file it writes must price the logged collective at the logged times."""

from __future__ import annotations

import json
import math

import pytest

from parbench.cli import main
from parbench.sim import nccl_tests
from parbench.sim.hardware import PRESETS, collective_time_s, load_cluster

H100 = PRESETS["h100-sxm"]


def log_text(kind: str, hosts: list[str], latency_s: float, bus_bytes_per_s: float, *, noise=lambda i: 0.0,
             sizes=None) -> str:
    """An nccl-tests output for ``kind`` over ranks on ``hosts`` (one entry a rank), each size's out-of-place time
    from the line: latency + factor x size / bus, factor the bus factor of nccl-tests' PERFORMANCE.md."""
    n = len(hosts)
    factor = {"all_reduce": 2 * (n - 1) / n}.get(kind, (n - 1) / n)
    redop = "sum" if kind != "all_gather" else "none"
    lines = [("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 "
              "agg iters: 1 validation: 1 graph: 0"), "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {h:>10} device {r % 8:2d} [0x{r:02x}] NVIDIA H100 80GB HBM3"
              for r, h in enumerate(hosts)]
    lines += ["#", ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                   "algbw   busbw #wrong"), ("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
                                            "            (us)  (GB/s)  (GB/s)")]
    for i, size in enumerate(sizes or [8 << (2 * k) for k in range(15)]):
        t = (latency_s + factor * size / bus_bytes_per_s) * (1 + noise(i))
        alg = size / t / 1e9
        lines.append(f"{size:12d} {size // 4:13d} {'float':>9} {redop:>7} {-1:7d} {t * 1e6:8.2f} {alg:7.2f} "
                     f"{alg * factor:7.2f} {0:6d} {t * 1e6:8.2f} {alg:7.2f} {alg * factor:7.2f} {0:6d}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_one_host_all_reduce_sets_the_node_link_to_its_bus_bandwidth_and_latency(tmp_path):
    """8 ranks on one host at a 30 us fixed time and 360 GB/s of bus bandwidth: the node's link becomes 360 GB/s,
    and its latency the one at which NCCL's ring latency (a base, then 2 (n - 1) link latencies) is 30 us."""
    path = write(tmp_path, "all_reduce_perf.log", log_text("all_reduce", ["a"] * 8, 30e-6, 360e9))
    cluster, [report] = nccl_tests.apply(H100, [nccl_tests.read(path)])
    assert report.level == "intra" and not report.reasons
    assert report.bus_bandwidth_bytes_per_s == pytest.approx(360e9, rel=1e-3)
    assert cluster.intra.bandwidth_bytes_per_s == pytest.approx(360e9, rel=1e-3)
    assert cluster.intra.latency_s == pytest.approx((30e-6 - H100.collective_base_latency_s) / (2 * 7), rel=1e-3)
    assert cluster.inter == H100.inter  # a one-host log says nothing of the network
    for size, t in zip([8 << (2 * k) for k in range(15)], [30e-6 + 1.75 * (8 << (2 * k)) / 360e9 for k in range(15)]):
        assert collective_time_s(cluster, "all_reduce", size, 8, inter_node=False) == pytest.approx(t, rel=2e-3)


def test_a_log_across_hosts_sets_each_gpus_network_bandwidth_over_its_rails(tmp_path):
    """16 ranks on 2 hosts, 8 each: NCCL's multi-rail rings cross the hosts through 8 NICs at once, so a 180 GB/s
    bus bandwidth is 22.5 GB/s a GPU; a 4-rank-a-host group then crosses at 4 x 22.5 (nccl-tests' own rule)."""
    hosts = ["a"] * 8 + ["b"] * 8
    path = write(tmp_path, "ag.txt", log_text("all_gather", hosts, 60e-6, 180e9))
    cluster, [report] = nccl_tests.apply(H100, [nccl_tests.read("all_gather=" + path)])
    assert report.level == "inter" and report.log.nodes == 2 and report.log.rails == 8
    assert cluster.inter.bandwidth_bytes_per_s == pytest.approx(180e9 / 8, rel=1e-3)
    assert cluster.intra == H100.intra
    size = 1 << 30
    assert collective_time_s(cluster, "all_gather", size, 16, inter_node=True, rails=8) == pytest.approx(
        60e-6 + 15 / 16 * size / 180e9, rel=2e-3)
    big = collective_time_s(cluster, "all_gather", size, 8, inter_node=True, rails=4) - collective_time_s(
        cluster, "all_gather", 8, 8, inter_node=True, rails=4)
    assert big == pytest.approx(7 / 8 * (size - 8) / (4 * 180e9 / 8), rel=1e-3)


def test_on_a_node_without_a_switch_a_pairs_log_sets_each_gpu_to_gpu_link():
    """MI300X: one link from each GPU to each other. Two ranks at 48 GB/s measure one link: all seven are 48 GB/s,
    so 8 ranks move at 7 x 48."""
    log = nccl_tests.parse(log_text("all_reduce", ["a"] * 2, 15e-6, 48e9), path="all_reduce.log", kind="all_reduce")
    cluster, _ = nccl_tests.apply(PRESETS["mi300x"], [log])
    assert cluster.peer_link_bytes_per_s == pytest.approx(48e9, rel=1e-3)
    assert collective_time_s(cluster, "all_gather", 1 << 30, 8, inter_node=False) - collective_time_s(
        cluster, "all_gather", 8, 8, inter_node=False) == pytest.approx(7 / 8 * ((1 << 30) - 8) / (7 * 48e9), rel=1e-3)


def test_both_logs_set_both_links_and_the_file_reads_back_into_simulate(tmp_path, capsys):
    intra = write(tmp_path, "all_reduce_node.log", log_text("all_reduce", ["a"] * 8, 25e-6, 300e9))
    inter = write(tmp_path, "all_reduce_2nodes.log", log_text("all_reduce", ["a"] * 8 + ["b"] * 8, 70e-6, 80e9))
    out = tmp_path / "mine.json"
    assert main(["calibrate", "--nccl-tests", inter, intra, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and "intra: 300.00 GB/s" in text and "inter: 10.00 GB/s" in text
    # beside each new link, the one it replaced: the preset's, as --list-clusters prints it (derated)
    assert f"(it was {H100.inter.bandwidth_bytes_per_s / 1e9:.2f} GB/s, {H100.inter.latency_s * 1e6:.2f} us)" in text
    cluster = load_cluster(str(out))
    assert cluster.name == "mine" and cluster.peak_flops == H100.peak_flops
    assert cluster.intra.bandwidth_bytes_per_s == pytest.approx(300e9, rel=1e-3)
    assert cluster.inter.bandwidth_bytes_per_s == pytest.approx(80e9 / 8, rel=1e-3)
    assert [m["link"] for m in json.loads(out.read_text())["meta"]["nccl_tests"]] == ["intra", "inter"]
    assert main(["simulate", "--model", "llama3-8b", "--cluster", str(out), "--gpus", "16", "--global-batch", "32",
                 "--zero", "3", "--format", "json"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "16", "--global-batch", "32",
                 "--zero", "3", "--format", "json"]) == 0
    preset = json.loads(capsys.readouterr().out)
    # a network of 10 GB/s a GPU where the preset has 45 (400 Gb/s derated): the data-parallel step is slower
    assert slow["prediction"]["step_time_s"] > preset["prediction"]["step_time_s"]


def test_list_clusters_shows_the_files_written_into_the_results_directory(tmp_path, capsys):
    """Written without --out, the file goes to <results-dir>/clusters/, and `simulate --list-clusters` lists it
    after the presets with its links; a file there that is no cluster is named, not a traceback."""
    log = write(tmp_path, "all_reduce_2nodes.log", log_text("all_reduce", ["a"] * 8 + ["b"] * 8, 70e-6, 80e9))
    results = tmp_path / "results"
    assert main(["calibrate", "--nccl-tests", log, "--cluster", "b200", "--results-dir", str(results)]) == 0
    (results / "clusters" / "notes.json").write_text('{"name": "x"}')
    capsys.readouterr()
    assert main(["simulate", "--list-clusters", "--results-dir", str(results)]) == 0
    lines = capsys.readouterr().out.splitlines()
    [row] = [line for line in lines if line.startswith(str(results / "clusters" / "b200-measured.json"))]
    assert row.split()[7] == f"{80e9 / 8 / 1e9:.2f}"  # inter GB/s: the bus bandwidth over 8 rails
    assert any(line.startswith(f"{results / 'clusters' / 'notes.json'}: does not read") for line in lines)


def test_a_noisy_log_is_fitted_within_its_noise_and_an_unphysical_one_is_replaced(tmp_path):
    noisy = write(tmp_path, "all_reduce_noisy.log",
                  log_text("all_reduce", ["a"] * 4, 20e-6, 100e9, noise=lambda i: 0.04 * (-1) ** i))
    _, [report] = nccl_tests.apply(H100, [nccl_tests.read(noisy)])
    assert not report.reasons and report.bus_bandwidth_bytes_per_s == pytest.approx(100e9, rel=0.06)
    assert report.fit.heldout_error_pct < 6
    # every size the fit leaves out (every third, from the second) 60% slow: the line misses them by 60%
    uneven = write(tmp_path, "all_reduce_bad.log", log_text("all_reduce", ["a"] * 4, 20e-6, 100e9,
                                                             noise=lambda i: 0.6 if i % 3 == 1 else 0.0))
    _, [bad] = nccl_tests.apply(H100, [nccl_tests.read(uneven)])
    assert bad.reasons == (f"held-out error {100 * (1 - 1 / 1.6):.0f}% > 25%",)  # the line at 1/1.6 of them
    # the point estimates replace it: the fastest small size's time, the largest sizes' time per byte
    assert bad.latency_s == pytest.approx(20e-6, rel=1e-3)
    assert bad.bus_bandwidth_bytes_per_s == pytest.approx(100e9, rel=0.01) and math.isfinite(bad.latency_s)


def test_the_log_as_nccl_tests_writes_it_with_nccl_s_info_lines_and_an_older_header(tmp_path):
    """Older headers without the group, NCCL_DEBUG=INFO lines between the rows, #wrong as N/A (validation off),
    indented as a pasted log, and the collective named only by the closing line."""
    text = log_text("all_gather", ["gpu-host-1"] * 4, 12e-6, 150e9)
    text = text.replace(" Group  0", "").replace("      0\n", "    N/A\n")
    lines = text.splitlines()
    lines.insert(6, "gpu-host-1:4242:4250 [0] NCCL INFO Channel 00/24 :    0   1   2   3")
    lines.insert(12, "gpu-host-1:4242:4242 [3] NCCL INFO comm 0x5581 rank 3 nranks 4 cudaDev 3 busId e7000 - Init COMPLETE")
    text = "\n".join("    " + line for line in lines) + "\n# Collective test concluded: all_gather_perf\n#\n"
    log = nccl_tests.read(write(tmp_path, "node7.txt", text))
    assert (log.kind, log.ranks, log.nodes, len(log.sizes)) == ("all_gather", 4, 1, 15)
    assert nccl_tests.fit_log(log, H100)[1].bus_bandwidth_bytes_per_s == pytest.approx(150e9, rel=1e-3)
    sendrecv = text.replace("all_gather_perf", "sendrecv_perf")
    with pytest.raises(ValueError, match="collective 'sendrecv' is not one nccl-tests log can set"):
        nccl_tests.read(write(tmp_path, "node8.txt", sendrecv))


def test_an_all_to_all_across_hosts_sets_the_nic_each_rank_sends_its_other_hosts_parts_through(tmp_path):
    """16 ranks on 2 hosts: a rank sends 8 of its 16 parts to the other host through its own NIC, so a 100 GB/s
    bus bandwidth ((n - 1) / n of the buffer a rank moves, over the time) is 100 x 8 / 15 GB/s a NIC."""
    hosts = ["a"] * 8 + ["b"] * 8
    text = log_text("all_to_all", hosts, 40e-6, 100e9) + "# Collective test concluded: alltoall_perf\n"
    cluster, [report] = nccl_tests.apply(H100, [nccl_tests.read(write(tmp_path, "moe.txt", text))])
    assert report.log.kind == "all_to_all" and report.level == "inter" and not report.notes
    assert cluster.inter.bandwidth_bytes_per_s == pytest.approx(100e9 * 8 / 15, rel=1e-3)
    size = 1 << 30
    assert collective_time_s(cluster, "all_to_all", size, 16, inter_node=True, rails=8) == pytest.approx(
        40e-6 + 15 / 16 * size / 100e9, rel=2e-3)


BAD = [
    ("x.log", lambda: log_text("all_reduce", ["a"] * 8, 30e-6, 360e9), "its name does not say which collective"),
    ("all_reduce.log", lambda: log_text("all_gather", ["a"] * 8, 30e-6, 360e9),
     "its busbw / algbw is 0.875, not the all_reduce bus factor 1.750 over 8 ranks"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 8, 30e-6, 360e9).replace("#  Rank", "# R"),
     "no '#  Rank N ... on HOST device D' lines"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 3 + ["b"], 30e-6, 360e9),
     "the hosts run different numbers of ranks"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 8, 30e-6, 360e9, sizes=[8, 64, 512]),
     "3 sizes above 0 B; a fit needs at least 4"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"], 30e-6, 360e9), "one rank; a collective needs two"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 16, 30e-6, 360e9),
     "16 ranks on a host, but cluster h100-sxm has 8 GPUs a node"),
    # a time nccl-tests cannot print (it prints microseconds to two decimals): once a ZeroDivisionError in the fit
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 8, 30e-6, 360e9).replace("    30.00 ", " 1e-300 ", 1),
     "size 8 B in 1e-300 us is not a measurement"),
    ("all_reduce.log", lambda: log_text("all_reduce", ["a"] * 8, 30e-6, 360e9).replace("          8 ", f"{2**70} ", 1),
     f"size {2**70} B in 30.0 us is not a measurement"),
]


@pytest.mark.parametrize("name, text, message", BAD, ids=[b[2][:30] for b in BAD])
def test_a_log_the_fit_cannot_read_is_a_named_error_and_writes_nothing(tmp_path, capsys, name, text, message):
    path = write(tmp_path, name, text())
    out = tmp_path / "out.json"
    assert main(["calibrate", "--nccl-tests", path, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_two_logs_of_one_link_and_a_calibrated_profile_are_refused(tmp_path, capsys):
    a = write(tmp_path, "all_reduce_1.log", log_text("all_reduce", ["a"] * 8, 30e-6, 360e9))
    b = write(tmp_path, "all_gather_1.log", log_text("all_gather", ["a"] * 8, 30e-6, 360e9))
    assert main(["calibrate", "--nccl-tests", a, b, "--out", str(tmp_path / "o.json")]) == 2
    assert "all measure the intra link; give one log a link" in capsys.readouterr().err
    assert main(["calibrate", "--nccl-tests", str(tmp_path / "missing_all_reduce.log")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # without logs, --cluster and --out would be read by nothing: named before minutes of measuring
    assert main(["calibrate", "--cluster", "b200", "--results-dir", str(tmp_path / "r")]) == 2
    assert "--cluster and --out go with --nccl-tests" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
