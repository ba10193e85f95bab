"""Node options, the sbatch script (content, and executed against stand-in srun/scontrol), rate parsing."""

import argparse
import os
import stat
import subprocess
from pathlib import Path

import pytest

from parbench.cluster.netns import ClusterSpec, burst_bytes, parse_rate
from parbench.config import ConfigError
from parbench.multinode import NodeLayout, add_node_options, layout_from_args
from parbench.multinode.worker import node_of_rank
from parbench.slurm import SlurmJob, sbatch_script


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--world-size", type=int, default=1)
    add_node_options(p)
    return p.parse_args(list(argv))


def test_layout_fills_world_size_and_builds_torchrun_args():
    a = _args("--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "3", "--master-addr", "10.0.0.1")
    layout = layout_from_args(a)
    assert a.world_size == 6 and layout.world_size == 6
    assert layout.torchrun_args() == ["--nnodes", "2", "--nproc-per-node", "3", "--max-restarts", "0",
                                      "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29500"]
    c10d = layout_from_args(_args("--nnodes", "2", "--world-size", "4", "--rdzv-endpoint", "h:1234"))
    assert c10d.nproc_per_node == 2
    assert c10d.torchrun_args()[-6:] == ["--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1234", "--rdzv-id", "parbench"]
    assert layout_from_args(_args()) is None  # one node: parbench's own launcher


@pytest.mark.parametrize("argv, message", [
    (("--nnodes", "2"), "needs --nproc-per-node"),
    (("--nnodes", "2", "--nproc-per-node", "2", "--world-size", "6"), "world_size=6 != nnodes x nproc_per_node = 2 x 2"),
    (("--nnodes", "2", "--nproc-per-node", "2", "--node-rank", "2"), "--node-rank 2 must be in [0, --nnodes 2)"),
    # a one-node run reads neither, so they would pass unnoticed
    (("--node-rank", "1"), "--node-rank 1 must be in [0, --nnodes 1)"),
    (("--master-port", "70000"), "--master-port 70000 is not a TCP port (1-65535)"),
    (("--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", "nohost"), "expected host:port"),
])
def test_bad_layouts(argv, message):
    with pytest.raises(ConfigError, match=None) as err:
        layout_from_args(_args(*argv))
    assert message in str(err.value)


def test_node_of_rank_is_node_major():
    assert node_of_rank(6, 3) == (0, 0, 0, 1, 1, 1)


def test_rates_and_cluster_spec():
    assert parse_rate("1gbit") == 10**9 and parse_rate("100mbit") == 10**8 and parse_rate("2.5Mbit") == 2_500_000
    with pytest.raises(ValueError, match="expected a number and a unit"):
        parse_rate("1gbps")
    assert burst_bytes(10**8) == 256 * 1024 and burst_bytes(10**10) == 1_250_000
    assert ClusterSpec(nodes=2).topology == "veth-pair" and ClusterSpec(nodes=3).topology == "bridge"
    with pytest.raises(ValueError, match=r"nodes=1 must be in \[2, 250\]"):
        ClusterSpec(nodes=1)


def test_sbatch_script_content():
    job = SlurmJob(nodes=4, ranks_per_node=8, partition="gpu", account="proj", time="02:30:00",
                   setup=("source /opt/venv/bin/activate",))
    script = sbatch_script(job, ["sweep", "--grid", "my grid.toml"])
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in ('--nodes="4"', '--ntasks-per-node="1"', '--time="02:30:00"', '--partition="gpu"', '--account="proj"'):
        assert f"#SBATCH {directive}" in lines
    assert lines.index("source /opt/venv/bin/activate") < next(i for i, l in enumerate(lines) if l.startswith("srun"))
    assert 'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"' in lines
    assert lines[-1].startswith("srun --nodes=4 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'exec python -m parbench sweep")
    assert '--node-rank "$SLURM_NODEID"' in lines[-1] and "--nproc-per-node 8" in lines[-1]
    c10d = sbatch_script(SlurmJob(nodes=2, ranks_per_node=1, rendezvous="c10d"), ["run"])
    assert '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$SLURM_JOB_ID"' in c10d
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        SlurmJob(nodes=1, ranks_per_node=1, time="1h")
    with pytest.raises(ValueError, match="parbench run"):
        sbatch_script(job, ["results"])


def _shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_sbatch_script_runs_one_launcher_per_node(tmp_path):
    """Execute the script with stand-ins for srun/scontrol/python: each node gets its own node rank."""
    _shim(tmp_path, "scontrol", 'printf "nodeA\\nnodeB\\n"\n')
    # srun: run the task once per node, as Slurm would, with that node's SLURM_NODEID
    _shim(tmp_path, "srun", 'shift 3; for n in 0 1; do SLURM_NODEID=$n "$@"; done\n')
    _shim(tmp_path, "fakepython", 'echo "$@" >> "$LOG"\n')
    script = sbatch_script(SlurmJob(nodes=2, ranks_per_node=2, python="fakepython"),
                           ["run", "--strategy", "ddp", "--results-dir", "my results"])
    (tmp_path / "job.sbatch").write_text(script)
    log = tmp_path / "calls.log"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LOG": str(log),
           "SLURM_JOB_NODELIST": "node[A-B]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "77"}
    subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, check=True, timeout=30)
    calls = log.read_text().splitlines()
    tail = "--nnodes 2 --nproc-per-node 2 --node-rank {} --master-addr nodeA --master-port 29500"
    assert calls == [f"-m parbench run --strategy ddp --results-dir my results {tail.format(k)}" for k in (0, 1)]


def test_slurm_command_writes_script(tmp_path):
    from parbench.cli import main

    out = tmp_path / "s.sbatch"
    assert main(["slurm", "--nodes", "2", "--ranks-per-node", "2", "-o", str(out), "--", "run", "--strategy", "ddp"]) == 0
    assert out.read_text().startswith("#!/bin/bash") and os.access(out, os.X_OK)
    assert main(["slurm", "--nodes", "2", "--ranks-per-node", "2", "--", "dashboard"]) == 2


def test_without_root_the_cluster_says_so_and_does_nothing(monkeypatch, capsys):
    from parbench.cluster import netns
    from parbench.cluster.job import run_job

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns, "create", lambda *a, **k: pytest.fail("created a cluster without root"))
    assert run_job(ClusterSpec(nodes=2), ranks_per_node=1, argv=["run"], timeout_s=10) == 2
    assert "needs root (it creates network namespaces); nothing was done" in capsys.readouterr().err


def test_simulator_prediction_of_a_shaped_link():
    """sim's ring all-reduce over the recorded link: 2(n-1) alpha + 2(n-1)/n S / (rate / 8) (Thakur et al.)."""
    from parbench.cluster.predict import ASSUMED_LATENCY_S, compare

    record = {"cluster_emulated": True, "cluster_link_rate_bit_per_s": 10**8, "ranks_per_node": 2, "world_size": 4,
              "comm_ops": {"all_reduce/parameter": {"count": 1.0, "payload_bytes": 1628200.0}},
              "exposed_comm_time_s": 0.2, "step_time_s_median": 0.22, "compute_time_s_median": 0.02}
    expected = 2 * (4 - 1) * ASSUMED_LATENCY_S + 1.5 * 1628200 / (10**8 / 8)
    assert compare(record)["predicted_comm_time_s"] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="not from a shaped emulated cluster"):
        compare({**record, "cluster_link_rate_bit_per_s": None})


def test_cluster_compare_names_a_record_edited_out_of_shape_and_shows_the_others(tmp_path, capsys):
    """`parbench cluster compare` over a hand-edited shaped record (an op without its payload, or no step time):
    that record is named as skipped, the others are printed (each once ended it in a KeyError or TypeError)."""
    from parbench.cli import main
    from parbench.results import write_record

    base = {"status": "ok", "strategy": "ddp", "world_size": 4, "workload": "mlp", "config": {"strategy": "ddp"},
            "cluster_emulated": True, "cluster_link_rate_bit_per_s": 10**8, "ranks_per_node": 2,
            "comm_ops": {"all_reduce/parameter": {"count": 1.0, "payload_bytes": 1628200.0}},
            "exposed_comm_time_s": 0.2, "step_time_s_median": 0.22, "compute_time_s_median": 0.02}
    write_record(tmp_path, {**base, "run_id": "a" * 32})
    write_record(tmp_path, {**base, "run_id": "b" * 32, "comm_ops": {"all_reduce/parameter": {"count": 1.0}}})
    write_record(tmp_path, {**base, "run_id": "c" * 32, "step_time_s_median": None})
    assert main(["cluster", "compare", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"skipped {'b' * 32}: KeyError: 'payload_bytes'" in out
    assert f"skipped {'c' * 32}: ValueError: the record has no measured step time" in out
    assert sum(line.startswith("ddp") and "skipped" not in line for line in out.splitlines()) == 1


def test_failed_job_is_recorded_by_node_zero_only(tmp_path):
    """A rank's error file becomes a failed record on --node-rank 0; the other nodes record nothing."""
    import json

    from parbench.config import RunConfig
    from parbench.multinode.launch import _record

    cfg = RunConfig(strategy="ddp", world_size=4)
    (tmp_path / "rank1.error.json").write_text(json.dumps({"rank": 1, "error": "RuntimeError: boom"}))
    node0 = NodeLayout(nnodes=2, nproc_per_node=2, node_rank=0)
    rec, ranks = _record(cfg, node0, tmp_path, 1, 3.0, None)
    assert (rec["status"], rec["failed_rank"], rec["error"]) == ("failed", 1, "rank 1: RuntimeError: boom")
    assert rec["nodes"] == 2 and rec["node_of_rank"] == [0, 0, 1, 1] and ranks == []
    assert _record(cfg, NodeLayout(nnodes=2, nproc_per_node=2, node_rank=1), tmp_path, 1, 3.0, None) == (None, [])
    (tmp_path / "rank1.error.json").unlink()
    assert _record(cfg, node0, tmp_path, None, 3.0, None)[0]["status"] == "timeout"
