"""One node's side of a multi-node job: start a torchrun agent, wait, and (on rank 0's node) record.

Every node runs the same ``parbench run``; each starts ``python -m torch.distributed.run`` with
this node's options and ``parbench.multinode.worker`` as the entry. Only the node whose agent
received global rank 0 finds ``rank0.pkl`` in its exchange folder: it computes the
single-process reference, builds the one record and writes it into its results directory.
A failed job is recorded by the node launched with ``--node-rank 0``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from parbench import preflight
from parbench.config import ConfigError, RunConfig
from parbench.distributed import Outcome, scratch
from parbench.launch import References, save
from parbench.multinode.layout import NodeLayout
from parbench.multinode.record import add_node_fields
from parbench.multinode.worker import DIR_ENV
from parbench.record import build_record, failed_record

RENDEZVOUS_GRACE_S = 60.0
"""Extra seconds over the run's timeout for the agents to meet (the other nodes may start later)."""


def torchrun_command(layout: NodeLayout) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *layout.torchrun_args(),
            "-m", "parbench.multinode.worker"]


def run_node(cfg: RunConfig, layout: NodeLayout, *, results_dir: str | Path | None = "results",
             sweep_id: str | None = None, repeat: int = 0,
             references: References | None = None) -> dict[str, Any] | None:
    """This node's part of the job; the record on the node that wrote it, else None.

    Same contract as ``parbench.launch.run`` for the node that holds rank 0, so a sweep can call
    either one.
    """
    if cfg.world_size != layout.world_size:
        raise ConfigError(f"world_size={cfg.world_size} != nnodes x nproc_per_node = "
                          f"{layout.nnodes} x {layout.nproc_per_node}")
    preflight.check(cfg, ranks_here=layout.nproc_per_node)  # backend, GPUs and memory per node, the workload
    out = scratch.launch_dir("node-")  # removed with the session directory, even after kill -9
    try:
        (out / "config.json").write_text(json.dumps(cfg.to_dict()))
        t0 = time.perf_counter()
        rc = _run_agent(layout, out, cfg.timeout_s + RENDEZVOUS_GRACE_S)
        wall = time.perf_counter() - t0
        record, ranks = _record(cfg, layout, out, rc, wall, references or References())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if record is not None:
        record.update(sweep_id=sweep_id, repeat=repeat)
        if results_dir is not None:
            save(results_dir, record, ranks if record["status"] == "ok" else [])
    return record


def _run_agent(layout: NodeLayout, out: Path, timeout_s: float) -> int | None:
    """Run the torchrun agent to completion; None when it passed the deadline (then it is killed)."""
    env = {**os.environ, DIR_ENV: str(out), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    # its own session: on a timeout or an interruption, one killpg reaches the agent and its workers
    agent = subprocess.Popen(torchrun_command(layout), env=env, start_new_session=True)
    try:
        return agent.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait()


def _record(cfg: RunConfig, layout: NodeLayout, out: Path, rc: int | None, wall: float,
            references: References) -> tuple[dict[str, Any] | None, list]:
    """(the record, the ranks' figures) on the node that writes it, else (None, [])."""
    ranks_file = out / "rank0.pkl"
    if ranks_file.exists():  # written after every rank's measurement: a later exit crash does not void it
        gathered = pickle.loads(ranks_file.read_bytes())
        losses, why = references.of(cfg)  # on the node that holds rank 0, after the job succeeded
        record = build_record(cfg, gathered["ranks"], wall, reference_losses=losses, reference_error=why)
        return add_node_fields(record, layout, gathered), gathered["ranks"]
    if rc == 0 or layout.node_rank != 0:
        return None, []  # another node held rank 0 (it writes the record), or it reports the failure
    return add_node_fields(failed_record(cfg, _outcome(out, rc, cfg.timeout_s), wall), layout, None), []


def _outcome(out: Path, rc: int | None, timeout_s: float) -> Outcome:
    errors = sorted(out.glob("rank*.error.json"))
    if errors:
        err = json.loads(errors[0].read_text())
        return Outcome(status="failed", failed_rank=err["rank"], error=f"rank {err['rank']}: {err['error']}")
    if rc is None:
        return Outcome(status="timeout", error=f"torchrun agent did not finish within {timeout_s:g} s "
                                                    f"(+{RENDEZVOUS_GRACE_S:g} s for the rendezvous)")
    return Outcome(status="failed", error=f"torchrun agent exited with code {rc} (a rank on another node "
                                              "failed, or the rendezvous did not form)")


def node_command(cfg: RunConfig, layout: NodeLayout, *, results_dir: str | None) -> int:
    """``parbench run --nnodes ...``: this node's part, a summary where the record was written."""
    from parbench.summary import print_run

    record = run_node(cfg, layout, results_dir=results_dir)
    if record is None:
        print(f"node {layout.node_rank}: done; the node that held rank 0 wrote the record")
        return 0
    print_run(record, results_dir)
    return 0 if record["status"] == "ok" else 1
