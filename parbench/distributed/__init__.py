"""One way to run ranks: ``spawn`` starts and watches them on this host; ``rank_main`` is the body
of every rank process (spawned here or started by torchrun); a rank function is plain code.

Around them: ``store`` (the rendezvous store, on loopback only), ``lifeline`` (a rank dies with
its launcher), ``scratch`` (launch files removed even after kill -9), ``stacks`` (which rank a
hang waits for)."""

from parbench.distributed.rank import Group, RankInfo, die_with_parent, local_device, rank_main, teardown
from parbench.distributed.launcher import Outcome, prestart, spawn

__all__ = ["Group", "Outcome", "RankInfo", "die_with_parent", "local_device", "prestart", "rank_main", "spawn",
           "teardown"]
