"""The node layout and the intra-/inter-node byte split, added to a record by the node that writes it.

Fields (documented in the README's "Multi-node" section):

- ``launcher``: ``torchrun``; ``nodes``; ``ranks_per_node``; ``node_rank`` (this writer's
  ``--node-rank``); ``node_of_rank`` (node index of every global rank, so ranks sharing a node
  are those with equal entries); ``node_hosts`` (host name of every node);
- ``comm_intra_node_bytes_per_step`` / ``comm_inter_node_bytes_per_step``: bytes a rank sends to
  ranks on its own node / on other nodes, max over ranks (split by ``parbench.multinode.meter``);
  ``comm_inter_node_bytes_per_step_by_category``: the busiest inter-node rank's split into data /
  parameter / intermediate; each ``per_rank`` entry gains ``node``, ``local_rank`` and both figures;
- ``cluster_*``: the emulated topology when the run was inside ``parbench cluster run``
  (``cluster_emulated``, ``cluster_topology``, ``cluster_link_rate_bit_per_s``, ``cluster_node_addresses``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from parbench.multinode.layout import NodeLayout
from parbench.results import oversubscribed

CLUSTER_ENV = "PARBENCH_CLUSTER"
"""JSON of the emulated topology, set by ``parbench cluster run`` for every node's parbench."""


def add_node_fields(record: dict[str, Any], layout: NodeLayout, gathered: dict[str, Any] | None) -> dict[str, Any]:
    record.update(launcher="torchrun", nodes=layout.nnodes, ranks_per_node=layout.nproc_per_node,
                  node_rank=layout.node_rank,
                  node_of_rank=[r // layout.nproc_per_node for r in range(layout.world_size)])
    record.update(cluster_fields())
    if gathered is None:
        record["oversubscribed"] = _oversubscribed(record, layout)
        return record
    ranks, placement = gathered["ranks"], gathered["placement"]
    record["node_of_rank"] = [p["node"] for p in placement]
    hosts = {p["node"]: p["host"] for p in placement}
    record["node_hosts"] = [hosts[n] for n in range(layout.nnodes)]
    record["comm_intra_node_bytes_per_step"] = max(r.comm_intra_node_bytes_per_step for r in ranks)
    record["comm_inter_node_bytes_per_step"] = max(r.comm_inter_node_bytes_per_step for r in ranks)
    busiest = max(ranks, key=lambda r: r.comm_inter_node_bytes_per_step)
    record["comm_inter_node_bytes_per_step_by_category"] = busiest.comm_inter_node_by_category
    for entry, r, p in zip(record["per_rank"], ranks, placement):
        entry.update(node=p["node"], local_rank=p["local_rank"],
                     comm_intra_node_bytes_per_step=r.comm_intra_node_bytes_per_step,
                     comm_inter_node_bytes_per_step=r.comm_inter_node_bytes_per_step)
    record["oversubscribed"] = _oversubscribed(record, layout)
    return record


def _oversubscribed(record: dict[str, Any], layout: NodeLayout) -> bool | None:
    """``parbench.results.oversubscribed`` for the host holding the most ranks: every rank where the nodes are an
    emulated cluster's network namespaces of one host, else the ranks of the nodes on one host (two torchrun agents
    on one machine share its CPUs), else a node's."""
    if record["cluster_emulated"]:
        ranks_here = layout.world_size
    elif record.get("node_hosts"):
        hosts = [record["node_hosts"][node] for node in record["node_of_rank"]]
        ranks_here = max(hosts.count(h) for h in hosts)
    else:
        ranks_here = layout.nproc_per_node
    return oversubscribed(ranks_here, record["threads_per_rank"], record["device"])


def cluster_fields() -> dict[str, Any]:
    """The emulated cluster's topology from the environment, or ``cluster_emulated: False``."""
    raw = os.environ.get(CLUSTER_ENV)
    if not raw:
        return {"cluster_emulated": False}
    topo = json.loads(raw)
    return {"cluster_emulated": True, "cluster_topology": topo["topology"],
            "cluster_link_rate_bit_per_s": topo["link_rate_bit_per_s"],
            "cluster_node_addresses": topo["addresses"]}
