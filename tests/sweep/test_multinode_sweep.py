"""``parbench sweep --nnodes``: two node agents on 127.0.0.1 (real torchrun jobs, gloo), the
world-size filter, per-run rendezvous ports, and the plan node 0 publishes through a real TCPStore
(resume decided by node 0 alone, a node with another grid stops both)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from parbench.config import ConfigError
from parbench.multinode import NodeLayout
from parbench.sweep import Plan, load_spec, plan
from parbench.sweep.nodes import for_layout, run_layout, share_plan
from tests.ports import free_ports

SWEEP = """
name = "{name}"
strategies = ["single", "ddp", "pipeline"]
world_sizes = [1, 2]
global_batch_sizes = [16]
micro_batches = [2]
steps = 2
warmup_steps = 2
timeout_s = 120
[[workloads]]
name = "mlp"
layers = 1
hidden = 16
"""


def _sweep_file(tmp_path: Path, name: str = "nodes") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(SWEEP.format(name=name))
    return path


def _two_nodes(path: Path, results: list[Path], port: int) -> list[str]:
    """Both nodes' ``parbench sweep``; their outputs once both exited 0 (else both outputs in full)."""
    nodes = [subprocess.Popen([sys.executable, "-m", "parbench", "sweep", str(path), "--results-dir", str(results[k]),
                               "--nnodes", "2", "--node-rank", str(k), "--nproc-per-node", "1",
                               "--master-addr", "127.0.0.1", "--master-port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in (0, 1)]
    outputs = [p.communicate(timeout=300)[0] for p in nodes]
    if [p.returncode for p in nodes] != [0, 0]:
        pytest.fail(f"exit codes {[p.returncode for p in nodes]}\n" + "\n".join(
            f"--- node {k}:\n{out}" for k, out in enumerate(outputs)), pytrace=False)
    return outputs


def _records(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((results / "runs").glob("*.json"))]


@pytest.mark.slow
def test_two_node_sweep_writes_the_records_once_on_node_0(tmp_path):
    path = _sweep_file(tmp_path)
    results = [tmp_path / "node0", tmp_path / "node1"]
    port = free_ports(8)  # the plan's store on it, run i on port + 1 + i
    outputs = _two_nodes(path, results, port)
    recs = _records(results[0])
    assert sorted((r["status"], r["strategy"], r["world_size"], r["nodes"], r["ranks_per_node"]) for r in recs) == [
        ("ok", "ddp", 2, 2, 1), ("ok", "pipeline", 2, 2, 1)]
    assert {r["sweep_id"] for r in recs} == {load_spec(path).sweep_id}
    assert all(r["launcher"] == "torchrun" and r["node_of_rank"] == [0, 1] for r in recs)
    assert not (results[1] / "runs").exists() and not (results[1] / "sweeps").exists()
    assert "skipped single x1" in outputs[0] and "world_size != nnodes x nproc_per_node = 2 x 1" in outputs[0]
    assert "node 1: 2 runs done (0 already recorded)" in outputs[1]
    manifest = json.loads((results[0] / "sweeps" / load_spec(path).sweep_id / "manifest.json").read_text())
    assert (manifest["status"], manifest["runs_ok"], manifest["nodes"], manifest["base_port"]) == ("finished", 2, 2, port)


def _layout(node_rank: int = 0, port: int = 29500, **kw) -> NodeLayout:
    return NodeLayout(nnodes=2, nproc_per_node=1, node_rank=node_rank, master_port=port, **kw)


@pytest.fixture(scope="module")
def two_rank_plan(tmp_path_factory) -> Plan:
    return for_layout(plan(load_spec(_sweep_file(tmp_path_factory.mktemp("spec")))), _layout())


def test_only_points_of_the_job_world_size_run_each_on_its_own_port(two_rank_plan):
    assert sorted(p.config.strategy.value for p in two_rank_plan.points) == ["ddp", "pipeline"]
    assert [(s.label.split(" ")[0], s.reason) for s in two_rank_plan.skipped] == [
        ("single", "world_size != nnodes x nproc_per_node = 2 x 1")]
    assert [run_layout(_layout(), i).master_port for i in range(3)] == [29501, 29502, 29503]
    c10d = run_layout(_layout(rdzv_endpoint="10.0.0.1:29400", rdzv_id="job"), 2)
    assert (c10d.rdzv_endpoint, c10d.rdzv_id) == ("10.0.0.1:29403", "job-2")
    with pytest.raises(ConfigError, match="pick a lower --master-port"):
        for_layout(two_rank_plan, _layout(port=65534))  # 2 runs: ports 65535 and 65536
    with pytest.raises(ConfigError, match="no point of world_size=4"):
        for_layout(two_rank_plan, NodeLayout(nnodes=2, nproc_per_node=2))


def _share(plans: list[Plan], tmp_path: Path) -> tuple[dict[int, list[int]], dict[int, Exception]]:
    """share_plan on node 0 and node 1 at once (threads); what each returned or raised."""
    port, todo, errors = free_ports(), {}, {}

    def node(k: int) -> None:
        try:
            todo[k] = share_plan(plans[k], _layout(k, port), tmp_path / f"node{k}", force=False)
        except ConfigError as exc:
            errors[k] = exc

    threads = [threading.Thread(target=node, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return todo, errors


def test_node_0_decides_resume_for_every_node(two_rank_plan, tmp_path):
    """Only node 0's results directory counts: node 1 (whose own directory is empty) skips the same run."""
    done = two_rank_plan.points[0].config.point_key()
    (tmp_path / "node0" / "runs").mkdir(parents=True)
    (tmp_path / "node0" / "runs" / "x.json").write_text(json.dumps(
        {"sweep_id": two_rank_plan.spec.sweep_id, "point_key": done, "repeat": 0, "status": "ok"}))
    todo, errors = _share([two_rank_plan, two_rank_plan], tmp_path)
    assert not errors and todo == {0: [1], 1: [1]}


def test_a_node_with_another_grid_stops_both_nodes(two_rank_plan, tmp_path):
    """Node 1 expands another grid: both raise (nobody waits for a run that never forms)."""
    other = replace(two_rank_plan, points=two_rank_plan.points[:1])
    todo, errors = _share([two_rank_plan, other], tmp_path)
    assert not todo and sorted(errors) == [0, 1]
    assert "every node must run the same sweep" in str(errors[0]) and "node 1: its grid" in str(errors[0])


def test_a_missing_node_0_is_a_clear_error_not_a_hang(two_rank_plan, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["parbench.sweep.nodes"], "PLAN_TIMEOUT_S", 1.0)
    port = free_ports()  # nobody listens: node 0 never started
    with pytest.raises(ConfigError, match=f"plan exchange on 127.0.0.1:{port} failed"):
        share_plan(two_rank_plan, _layout(1, port), tmp_path, force=False)


def test_the_plan_store_listens_on_the_master_address_only():
    """Node 0's plan store binds --master-addr (a plain TCPStore listens on every interface)."""
    import os

    import psutil

    from parbench.sweep.nodes import _plan_store

    port = free_ports()
    store = _plan_store(NodeLayout(nnodes=2, nproc_per_node=1, master_addr="127.0.0.1", master_port=port))
    client = _plan_store(NodeLayout(nnodes=2, nproc_per_node=1, node_rank=1, master_addr="127.0.0.1", master_port=port))
    client.set("k", "v")
    assert store.get("k") == b"v"
    listening = {c.laddr.ip for c in psutil.net_connections(kind="tcp")
                 if c.status == psutil.CONN_LISTEN and c.pid == os.getpid() and c.laddr.port == port}
    assert listening == {"127.0.0.1"}
    with pytest.raises(ConfigError, match="node 0 cannot listen on --master-addr 192.0.2.1"):
        _plan_store(NodeLayout(nnodes=2, nproc_per_node=1, master_addr="192.0.2.1", master_port=free_ports()))
