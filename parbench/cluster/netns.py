"""Network namespaces as nodes: veth pairs (a bridge for more than two), private addresses, tbf shaping.

Layout for a cluster tagged ``pbc<pid>`` (the pid of the parbench that made it, so start-up
clean-up can tell a dead cluster from a live one)::

    2 nodes:   pbc<pid>-n0 [pbeth0 10.77.0.1] <--veth--> [pbeth0 10.77.0.2] pbc<pid>-n1
    N > 2:     pbc<pid>-nK [pbeth0 10.77.0.K+1] <--veth--> [pbpK] br0 in pbc<pid>-sw

Nothing is created in the root namespace, and nothing in the root namespace ever connects to
these addresses: the root namespace would route them off this machine.
A shaped link gets a ``tbf`` qdisc on both ends of every veth, so each direction of every
node's link is limited to the rate (netem is not available on these machines).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass

PREFIX = "pbc"
NODE_IF = "pbeth0"
SUBNET = "10.77.0"
TBF_LATENCY = "50ms"
MIN_BURST_BYTES = 256 * 1024
"""Measured: at >= 1 Gbit/s a 64 kb burst ran 59% slow; >= 256 kb kept tbf within 1-5% of the rate."""
_NAME = re.compile(rf"^{PREFIX}(\d+)-(n\d+|sw)$")
_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}


def parse_rate(text: str) -> int:
    """``1gbit`` / ``100mbit`` / ``500kbit`` / ``2000000bit`` -> bits per second (tc's decimal units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?bit)\s*", text.lower())
    if not m:
        raise ValueError(f"rate {text!r}: expected a number and a unit, e.g. 100mbit or 1gbit")
    bits = float(m.group(1)) * _UNITS[m.group(2)]
    if bits < 8000:
        raise ValueError(f"rate {text!r} is below 8 kbit/s")
    return int(bits)


@dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """What to emulate."""

    nodes: int
    """Namespaces, one torchrun agent each (2..250)."""
    rate_bit_per_s: int | None = None
    """Link rate of every node's link, each direction (tbf); None: unshaped veth."""

    def __post_init__(self) -> None:
        if not 2 <= self.nodes <= 250:
            raise ValueError(f"nodes={self.nodes} must be in [2, 250]")
        if self.rate_bit_per_s is not None and self.rate_bit_per_s < 8000:
            raise ValueError(f"rate_bit_per_s={self.rate_bit_per_s} is below 8 kbit/s")

    @property
    def topology(self) -> str:
        return "veth-pair" if self.nodes == 2 else "bridge"


@dataclass(frozen=True)
class Cluster:
    """A cluster that exists: its tag, namespaces and addresses."""

    tag: str
    spec: ClusterSpec

    def namespace(self, k: int) -> str:
        return f"{self.tag}-n{k}"

    def address(self, k: int) -> str:
        return f"{SUBNET}.{k + 1}"

    @property
    def switch(self) -> str:
        return f"{self.tag}-sw"

    def namespaces(self) -> list[str]:
        extra = [self.switch] if self.spec.nodes > 2 else []
        return [self.namespace(k) for k in range(self.spec.nodes)] + extra


def unavailable_reason() -> str | None:
    """Why this machine cannot emulate a cluster, or None when it can."""
    if os.geteuid() != 0:
        return "the emulated cluster needs root (it creates network namespaces); nothing was done"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"the emulated cluster needs `{tool}` (apt-get install iproute2 util-linux); nothing was done"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _in(ns: str, *cmd: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True, check=True)


def create(spec: ClusterSpec, tag: str | None = None) -> Cluster:
    """Make the namespaces, links, addresses and shaping; on any error, remove what was made."""
    cluster = Cluster(tag or f"{PREFIX}{os.getpid()}", spec)
    try:
        for ns in cluster.namespaces():
            _ip("netns", "add", ns)
            _in(ns, "ip", "link", "set", "lo", "up")
        _link(cluster)
        for k in range(spec.nodes):
            ns = cluster.namespace(k)
            _in(ns, "ip", "addr", "add", f"{cluster.address(k)}/24", "dev", NODE_IF)
            _in(ns, "ip", "link", "set", NODE_IF, "up")
        if spec.rate_bit_per_s:
            _shape(cluster)
    except BaseException:
        teardown(cluster.tag)
        raise
    return cluster


def _link(cluster: Cluster) -> None:
    """veth pairs made straight inside the namespaces (never in the root namespace)."""
    if cluster.spec.nodes == 2:
        _ip("link", "add", NODE_IF, "netns", cluster.namespace(0), "type", "veth",
            "peer", "name", NODE_IF, "netns", cluster.namespace(1))
        return
    sw = cluster.switch
    _in(sw, "ip", "link", "add", "br0", "type", "bridge")
    _in(sw, "ip", "link", "set", "br0", "up")
    for k in range(cluster.spec.nodes):
        port = f"pbp{k}"
        _ip("link", "add", NODE_IF, "netns", cluster.namespace(k), "type", "veth", "peer", "name", port, "netns", sw)
        _in(sw, "ip", "link", "set", port, "master", "br0")
        _in(sw, "ip", "link", "set", port, "up")


def burst_bytes(rate_bit_per_s: int) -> int:
    """tbf bucket: >= 256 KiB (MIN_BURST_BYTES), and >= 1 ms of traffic at the rate (kernel timer slack)."""
    return max(MIN_BURST_BYTES, rate_bit_per_s // 8 // 1000)


def _shape(cluster: Cluster) -> None:
    rate = cluster.spec.rate_bit_per_s
    tbf = ["root", "tbf", "rate", f"{rate}bit", "burst", str(burst_bytes(rate)), "latency", TBF_LATENCY]
    ends = [(cluster.namespace(k), NODE_IF) for k in range(cluster.spec.nodes)]
    if cluster.spec.nodes > 2:  # the switch side limits what reaches each node
        ends += [(cluster.switch, f"pbp{k}") for k in range(cluster.spec.nodes)]
    for ns, dev in ends:
        _in(ns, "tc", "qdisc", "add", "dev", dev, *tbf)


# --- clean-up -----------------------------------------------------------------------------


def own_namespaces() -> list[str]:
    """Every namespace whose name has this tool's prefix (``pbc<pid>-...``)."""
    out = _ip("netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if _NAME.match(n)]


def teardown(tag: str) -> None:
    """Kill every process inside the tag's namespaces, then delete them. Idempotent."""
    for ns in [n for n in own_namespaces() if n.startswith(f"{tag}-")]:
        _remove(ns)


def _remove(ns: str) -> None:
    # `ip netns del` alone leaves a namespace alive while processes are inside
    for _ in range(20):
        pids = [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _wait_gone(pids)
    _ip("netns", "del", ns, check=False)


def _wait_gone(pids: list[int], timeout_s: float = 2.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and not _zombie(p) for p in pids):
        time.sleep(0.02)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def cleanup_stale() -> list[str]:
    """At start-up: remove clusters whose parbench is no longer alive; the names removed."""
    removed = []
    for ns in own_namespaces():
        pid = int(_NAME.match(ns).group(1))
        if pid == os.getpid() or not os.path.exists(f"/proc/{pid}"):
            _remove(ns)
            removed.append(ns)
    return removed
