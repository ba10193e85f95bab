"""The torchrun-style node options of a multi-node run, validated before anything starts."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from parbench.config import ConfigError

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True, kw_only=True)
class NodeLayout:
    """Where this node stands in a job of ``nnodes`` x ``nproc_per_node`` ranks.

    Two rendezvous forms, as torchrun has them: static (``master_addr``/``master_port``, and
    ``node_rank`` is honoured) or c10d (``rdzv_endpoint``; node ranks follow arrival order).
    """

    nnodes: int
    """Nodes in the job (each runs the same command)."""
    nproc_per_node: int
    """Rank processes on every node (torchrun supports homogeneous nodes only)."""
    node_rank: int = 0
    """This node's index (static rendezvous); with c10d it is only used to pick who reports failures."""
    master_addr: str = "127.0.0.1"
    """Static rendezvous: address of node 0, whose torchrun agent hosts the store."""
    master_port: int = DEFAULT_MASTER_PORT
    rdzv_endpoint: str | None = None
    """``host:port`` of a c10d rendezvous (replaces master_addr/port when given)."""
    rdzv_id: str = "parbench"
    """Job id shared by every node of a c10d rendezvous."""

    def __post_init__(self) -> None:
        if self.nnodes < 1 or self.nproc_per_node < 1:
            raise ConfigError(f"nnodes={self.nnodes} and nproc_per_node={self.nproc_per_node} must be >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"node_rank={self.node_rank} must be in [0, nnodes={self.nnodes})")
        if not 0 < self.master_port < 65536:
            raise ConfigError(f"master_port={self.master_port} is not a TCP port")
        if self.rdzv_endpoint is not None and ":" not in self.rdzv_endpoint:
            raise ConfigError(f"rdzv_endpoint={self.rdzv_endpoint!r}: expected host:port")

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    def torchrun_args(self) -> list[str]:
        """The launcher's own options for this node (``python -m torch.distributed.run ...``)."""
        common = ["--nnodes", str(self.nnodes), "--nproc-per-node", str(self.nproc_per_node),
                  "--max-restarts", "0"]
        if self.rdzv_endpoint:
            return common + ["--rdzv-backend", "c10d", "--rdzv-endpoint", self.rdzv_endpoint,
                             "--rdzv-id", self.rdzv_id]
        return common + ["--node-rank", str(self.node_rank), "--master-addr", self.master_addr,
                         "--master-port", str(self.master_port)]


def add_node_options(p: argparse.ArgumentParser) -> None:
    """``--nnodes`` and friends, for ``parbench run`` and ``parbench sweep``."""
    g = p.add_argument_group("nodes (multi-node through torchrun; run the same command on every node)")
    g.add_argument("--nnodes", type=int, default=1, help="nodes in the job (>1: launch through torchrun)")
    g.add_argument("--node-rank", type=int, default=0, help="this node's index (static rendezvous)")
    g.add_argument("--nproc-per-node", type=int, default=0, help="ranks per node (default: world size / nnodes)")
    g.add_argument("--master-addr", default="127.0.0.1", help="static rendezvous: node 0's address")
    g.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT,
                   help="rendezvous port on --master-addr (every node passes the same)")
    g.add_argument("--rdzv-endpoint", default=None, help="host:port of a c10d rendezvous (instead of master-addr)")
    g.add_argument("--rdzv-id", default="parbench", help="c10d rendezvous job id")


def wants_nodes(a: argparse.Namespace) -> bool:
    """True when the node options ask for a multi-node job; ConfigError for a node count below 1, and for a node
    rank or port no job could use (checked on a one-node run too, where they would otherwise pass unread)."""
    if a.nnodes < 1:
        raise ConfigError(f"--nnodes {a.nnodes} must be >= 1")
    if not 0 <= a.node_rank < a.nnodes:
        raise ConfigError(f"--node-rank {a.node_rank} must be in [0, --nnodes {a.nnodes})")
    if not 0 < a.master_port < 65536:
        raise ConfigError(f"--master-port {a.master_port} is not a TCP port (1-65535)")
    return a.nnodes > 1 or bool(a.rdzv_endpoint)


def layout_from_args(a: argparse.Namespace) -> NodeLayout | None:
    """The layout the options ask for, or None for a one-node run through parbench's own launcher.

    Also fills ``a.world_size`` when it was left at 1: nnodes x nproc_per_node.
    """
    if not wants_nodes(a):
        return None
    nproc = a.nproc_per_node or (a.world_size // a.nnodes if a.world_size > 1 else 0)
    if nproc < 1:
        raise ConfigError("a multi-node run needs --nproc-per-node (or --world-size = nnodes x ranks per node)")
    if a.world_size == 1:
        a.world_size = a.nnodes * nproc
    if a.world_size != a.nnodes * nproc:
        raise ConfigError(f"world_size={a.world_size} != nnodes x nproc_per_node = {a.nnodes} x {nproc}")
    return NodeLayout(nnodes=a.nnodes, nproc_per_node=nproc, node_rank=a.node_rank, master_addr=a.master_addr,
                      master_port=a.master_port, rdzv_endpoint=a.rdzv_endpoint, rdzv_id=a.rdzv_id)
