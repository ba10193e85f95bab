"""Run one parbench command across an emulated cluster and always remove the cluster afterwards.

Every node runs the same ``parbench run|sweep ...`` plus its node options, inside its namespace::

    ip netns exec pbc<pid>-nK  unshare --pid --fork --kill-child=SIGKILL --mount-proc \
        python -m parbench <args> --nnodes N --node-rank K --nproc-per-node R \
                           --master-addr 10.77.0.1 --master-port 29500

``unshare --pid --kill-child`` puts each agent and its workers in a pid namespace that dies with
it (a killed torchrun agent otherwise leaves its workers running). ``GLOO_SOCKET_IFNAME`` makes gloo
use the node's veth: the host name resolves to 127.0.0.1, and gloo would bind loopback.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parbench.cluster import netns
from parbench.multinode.record import CLUSTER_ENV

MASTER_PORT = 29500  # inside node 0's own namespace: no other job can hold it
FAILURE_GRACE_S = 20.0
"""After one node fails, how long the others get to notice and exit before they are killed."""


def run_job(spec: netns.ClusterSpec, *, ranks_per_node: int, argv: list[str], timeout_s: float) -> int:
    """Create the cluster, run ``parbench <argv>`` on every node, tear down; the exit code."""
    reason = netns.unavailable_reason()
    if reason:
        print(f"parbench cluster: {reason}", file=sys.stderr)
        return 2
    stale = netns.cleanup_stale()
    if stale:
        print(f"parbench cluster: removed leftovers of an earlier run: {', '.join(stale)}", file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM tears down like Ctrl-C
    cluster = None
    try:
        cluster = netns.create(spec)
        return _run_agents(cluster, ranks_per_node, argv, timeout_s)
    except KeyboardInterrupt:
        print("parbench cluster: interrupted; removing the cluster", file=sys.stderr)
        return 130
    finally:
        if cluster is not None:
            netns.teardown(cluster.tag)
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def node_command(cluster: netns.Cluster, k: int, ranks_per_node: int, argv: list[str]) -> list[str]:
    nodes = ["--nnodes", str(cluster.spec.nodes), "--node-rank", str(k), "--nproc-per-node", str(ranks_per_node),
             "--master-addr", cluster.address(0), "--master-port", str(MASTER_PORT)]
    return ["ip", "netns", "exec", cluster.namespace(k), "unshare", "--pid", "--fork", "--kill-child=SIGKILL",
            "--mount-proc", sys.executable, "-m", "parbench", *argv, *nodes]


def topology(cluster: netns.Cluster) -> dict:
    """What every record of the job carries about the emulated network (``cluster_*`` fields)."""
    return {"topology": cluster.spec.topology, "link_rate_bit_per_s": cluster.spec.rate_bit_per_s,
            "addresses": [cluster.address(k) for k in range(cluster.spec.nodes)]}


def _run_agents(cluster: netns.Cluster, ranks_per_node: int, argv: list[str], timeout_s: float) -> int:
    logs = Path(tempfile.mkdtemp(prefix="parbench-cluster-"))
    env = {**os.environ, "GLOO_SOCKET_IFNAME": netns.NODE_IF, CLUSTER_ENV: json.dumps(topology(cluster))}
    agents = []
    try:
        for k in range(cluster.spec.nodes):
            out = None if k == 0 else open(logs / f"node{k}.log", "w")  # node 0 speaks on our terminal
            agents.append(subprocess.Popen(node_command(cluster, k, ranks_per_node, argv),
                                           env={**env, "PARBENCH_NODE_NAME": f"node{k}"}, stdout=out,
                                           stderr=subprocess.STDOUT if out else None,
                                           start_new_session=True, preexec_fn=_die_with_parent))
        codes = _wait(agents, timeout_s)
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)  # unshare's --kill-child then ends the node's pid namespace
                agent.wait()
    return _report(codes, logs)


def _wait(agents: list[subprocess.Popen], timeout_s: float) -> list[int | None]:
    """Exit codes (None: killed at the deadline). One failure starts a short grace for the rest."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        codes = [a.poll() for a in agents]
        if all(c is not None for c in codes):
            return codes
        if any(c not in (None, 0) for c in codes):
            deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        time.sleep(0.05)
    return [a.poll() for a in agents]


def _report(codes: list[int | None], logs: Path) -> int:
    if all(c == 0 for c in codes):
        return 0
    for k, code in enumerate(codes):
        print(f"parbench cluster: node {k} " + ("timed out" if code is None else f"exited with {code}"), file=sys.stderr)
        log = logs / f"node{k}.log"
        if code != 0 and log.exists():
            print("".join(log.read_text().splitlines(True)[-15:]), file=sys.stderr)
    return 1


def _die_with_parent() -> None:
    """In the agent's child before exec: SIGKILL it if this parbench dies (no orphaned nodes)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
