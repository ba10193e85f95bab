"""Bytes a rank sends, split into intra-node and inter-node by where each op's bytes go.

Where a collective's bytes go depends on the backend's algorithm; the conventions here follow
gloo (measured: its all-reduce and all-gather are rings over the group's rank order, and the
veth of an emulated 2 x 2 cluster carried 1.5 S each way per all-reduce, exactly the two ring
edges that cross nodes):

- ring collectives (all-reduce, all-gather, reduce-scatter): every byte goes to the ring
  successor ``group_ranks[(i + 1) % n]``;
- ``send``: to the destination rank;
- rooted collectives and all-to-all: spread evenly over the other group members, so the
  inter-node share is the fraction of them on another node (a tree or a root's fan-out).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.distributed as dist

from parbench.metrics.comm import Category, CommMeter, _group

RING = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass
class NodeAwareMeter(CommMeter):
    """A ``CommMeter`` that also knows which node every global rank is on."""

    node_of_rank: tuple[int, ...] = ()
    intra_node: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in Category})
    inter_node: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in Category})

    def record(self, op: str, args) -> None:
        before = {key: stat.sent_bytes for key, stat in self.ops.items()}
        super().record(op, args)
        for (kind, cat), stat in self.ops.items():
            sent = stat.sent_bytes - before.get((kind, cat), 0)
            if sent:
                share = self._inter_share(kind, args)
                self.inter_node[cat.value] += round(sent * share)
                self.intra_node[cat.value] += sent - round(sent * share)

    def reset(self) -> None:
        super().reset()
        for d in (self.intra_node, self.inter_node):
            d.update({k: 0 for k in d})

    def _inter_share(self, kind: str, args) -> float:
        """Fraction of this op's sent bytes that leave this rank's node."""
        group = _group(args)
        ranks = dist.get_process_group_ranks(group) if group is not None else list(range(dist.get_world_size()))
        me = dist.get_rank()
        mine = self.node_of_rank[me]
        if kind in RING:
            successor = ranks[(ranks.index(me) + 1) % len(ranks)]
            return float(self.node_of_rank[successor] != mine)
        if kind == "send":
            dst = next(a for a in args if isinstance(a, int) and not isinstance(a, bool))
            return float(self.node_of_rank[ranks[dst]] != mine)
        others = [r for r in ranks if r != me]
        return sum(self.node_of_rank[r] != mine for r in others) / len(others) if others else 0.0
