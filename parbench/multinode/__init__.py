"""Multi-node runs through torch's own elastic launcher (``torch.distributed.run``, i.e. torchrun).

The same ``parbench run ... --nnodes N --node-rank K --master-addr A --master-port P`` on every
node forms one job: each node's parbench starts one torchrun agent, the agent starts the local
ranks (``parbench.multinode.worker``), every rank's figures are gathered to global rank 0 after
the measurement, and the node that holds rank 0 writes the single record.

Modules: ``layout`` (the node options, validated), ``meter`` (intra- vs inter-node bytes),
``worker`` (what a torchrun worker does), ``launch`` (one node's side of the job), ``record``
(the node-layout fields added to a record). ``launch`` and ``worker`` import torch: import them
where a run starts, never to parse a command line.
"""

from parbench.multinode.layout import NodeLayout, add_node_options, layout_from_args

__all__ = ["NodeLayout", "add_node_options", "layout_from_args"]
