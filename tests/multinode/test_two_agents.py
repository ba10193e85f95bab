"""Two torchrun agents on 127.0.0.1 (2 nodes x 2 ranks) against one node of 4 ranks (parbench.launch)."""

import os
import socket
import subprocess
import sys

import pytest

from parbench.config import RunConfig, WorkloadConfig
from parbench.launch import run
from parbench.record import max_abs_diff
from parbench.results import read_records
from tests.ports import free_ports

ARGS = ["--strategy", "ddp", "--hidden", "64", "--steps", "3", "--warmup-steps", "2", "--timeout", "120"]
CATEGORIES = ("data", "parameter", "intermediate")


def _two_node_record(results_dir) -> dict:
    port = str(free_ports())
    nodes = [subprocess.Popen([sys.executable, "-m", "parbench", "run", *ARGS, "--results-dir", str(results_dir),
                               "--nnodes", "2", "--node-rank", str(k), "--nproc-per-node", "2",
                               "--master-addr", "127.0.0.1", "--master-port", port],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in (0, 1)]
    outputs = [p.communicate(timeout=240)[0] for p in nodes]
    if [p.returncode for p in nodes] != [0, 0]:
        pytest.fail(f"exit codes {[p.returncode for p in nodes]}\n" + "\n".join(
            f"--- node {k}:\n{out}" for k, out in enumerate(outputs)), pytrace=False)
    assert "the node that held rank 0 wrote the record" in outputs[1]
    records, problems = read_records(results_dir)
    assert not problems and len(records) == 1  # written once, by rank 0's node
    return records[0]


@pytest.mark.slow
def test_two_nodes_match_one_node(tmp_path):
    multi = _two_node_record(tmp_path / "multi")
    cfg = RunConfig(strategy="ddp", world_size=4, workload=WorkloadConfig(hidden=64), steps=3, warmup_steps=2)
    single = run(cfg, results_dir=None)
    assert multi["status"] == single["status"] == "ok"
    assert multi["point_key"] == single["point_key"]
    assert max_abs_diff(multi["losses"], single["losses"]) <= 1e-6  # NaN-propagating: a NaN loss fails here
    for c in CATEGORIES:
        assert multi[f"comm_{c}_bytes_per_step"] == single[f"comm_{c}_bytes_per_step"]
        assert ([r[f"comm_{c}_bytes_per_step"] for r in multi["per_rank"]]
                == [r[f"comm_{c}_bytes_per_step"] for r in single["per_rank"]])
    assert multi["comm_wire_bytes_per_step"] == single["comm_wire_bytes_per_step"]
    # node layout: ranks 0,1 on node 0 and 2,3 on node 1
    assert (multi["launcher"], multi["nodes"], multi["ranks_per_node"]) == ("torchrun", 2, 2)
    assert multi["node_of_rank"] == [0, 0, 1, 1] and multi["cluster_emulated"] is False
    # both agents ran on this host: its CPUs took all four ranks
    assert multi["node_hosts"] == [socket.gethostname()] * 2
    assert multi["oversubscribed"] is (4 > len(os.sched_getaffinity(0)))
    # gloo's ring 0->1->2->3->0: ranks 1 and 3 send their all-reduce to the other node, 0 and 2 stay home
    grad = 4 * (784 * 64 + 64 + 64 * 10 + 10)  # mlp 784-64-10 parameters, fp32
    ring = 2 * 3 * grad // 4  # ring all-reduce sends 2(n-1)/n S per rank
    per_rank = multi["per_rank"]
    assert [r["comm_inter_node_bytes_per_step"] >= ring for r in per_rank] == [False, True, False, True]
    assert [r["comm_intra_node_bytes_per_step"] >= ring for r in per_rank] == [True, False, True, False]
    for r in per_rank:
        total = sum(r[f"comm_{c}_bytes_per_step"] for c in CATEGORIES)
        assert r["comm_intra_node_bytes_per_step"] + r["comm_inter_node_bytes_per_step"] == total
    assert multi["comm_inter_node_bytes_per_step_by_category"]["parameter"] == ring
