"""The simulator's prediction of an emulated-cluster run's network time, from the recorded link rate.

A shaped veth is the one place on this machine where the simulator's network term can be checked
against reality: ``parbench.sim.hardware.collective_time_s`` (alpha-beta per algorithm; ring
all-reduce 2(n-1)/n S / B) with B = the tbf rate / 8 per direction. In gloo's ring over a
node-major rank order, each direction of the link carries one rank's ring traffic (measured on the veths),
so the per-rank bandwidth of the model is the link's rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

ASSUMED_LATENCY_S = 50e-6
"""Per-step latency of a veth hop through two namespaces' stacks (assumed; small beside 1 MB payloads)."""


def link_cluster(record: dict[str, Any]):
    """A simulator cluster whose inter-node link is the record's emulated link (compute fields unused)."""
    from parbench.sim.hardware import PRESETS, Link

    rate = record["cluster_link_rate_bit_per_s"]
    if not record.get("cluster_emulated") or not rate:
        raise ValueError("the record is not from a shaped emulated cluster (cluster_link_rate_bit_per_s is null)")
    # gloo's collectives, not NCCL's: no base latency or multi-node all-reduce factor of NCCL's model
    return dataclasses.replace(PRESETS["a100-80gb"], name="emulated", gpus_per_node=record["ranks_per_node"],
                               inter=Link(latency_s=ASSUMED_LATENCY_S, bandwidth_bytes_per_s=rate / 8),
                               collective_base_latency_s=0.0, multinode_all_reduce_latency_factor=1.0,
                               collectives={}, sources={"inter": "the tbf rate of `parbench cluster run --rate`"})


def predicted_comm_time_s(record: dict[str, Any]) -> float:
    """Seconds per step of the busiest rank's collectives, every op taken as crossing nodes."""
    from parbench.sim.hardware import collective_time_s

    cluster, n = link_cluster(record), record["world_size"]
    total = 0.0
    for key, op in record["comm_ops"].items():
        kind = key.split("/")[0]
        if kind in ("barrier", "recv") or not op["count"]:
            continue
        per_op = op["payload_bytes"] / op["count"]
        total += op["count"] * collective_time_s(cluster, kind, int(per_op), n, inter_node=True)
    return total


def compare(record: dict[str, Any]) -> dict[str, float | None]:
    """Predicted network time vs the measured exposed communication (step - compute-only, ddp); ValueError,
    KeyError or TypeError for a record without the figures (edited by hand)."""
    if record.get("step_time_s_median") is None:
        raise ValueError("the record has no measured step time")
    return {"link_rate_bit_per_s": record["cluster_link_rate_bit_per_s"],
            "predicted_comm_time_s": predicted_comm_time_s(record),
            "measured_exposed_comm_time_s": record.get("exposed_comm_time_s"),
            "measured_step_time_s": record["step_time_s_median"],
            "measured_compute_time_s": record.get("compute_time_s_median")}
