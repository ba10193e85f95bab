"""Multi-node runs through torch's own elastic launcher (``torch.distributed.run``, i.e. torchrun).

The same ``parbench run ... --nnodes N --node-rank K --master-addr A --master-port P`` on every
node forms one job: each node's parbench starts one torchrun agent, the agent starts the local
ranks (``parbench.multinode.worker``), every rank's figures are gathered to global rank 0 after
the measurement, and the node that holds rank 0 writes the single record.

Modules: ``layout`` (the node options, validated), ``meter`` (intra- vs inter-node bytes),
``worker`` (what a torchrun worker does), ``launch`` (one node's side of the job), ``record``
(the node-layout fields added to a record).
"""

from parbench.multinode.layout import NodeLayout, add_node_options, layout_from_args


def node_command(*args, **kwargs) -> int:
    """``parbench run`` with node options (imported lazily: the CLI must not import torch to parse)."""
    from parbench.multinode.launch import node_command as command

    return command(*args, **kwargs)


def run_node(*args, **kwargs):
    """``parbench.multinode.launch.run_node``: the multi-node counterpart of ``parbench.launch.run``."""
    from parbench.multinode.launch import run_node as run

    return run(*args, **kwargs)


__all__ = ["NodeLayout", "add_node_options", "layout_from_args", "node_command", "run_node"]
