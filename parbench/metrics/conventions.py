"""Bytes one rank sends per collective, nccl-tests conventions; pure Python (the simulator uses it too).

github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md: ring all-reduce 2(n-1)/n x S,
all-gather and reduce-scatter (n-1)/n x S with S the full buffer, broadcast S from the root,
send S. Integer division per op, exactly as the runner counts.

All-to-all: each rank sends what leaves it, its input S minus the share it keeps for itself:
(n-1)/n x S for equal splits (nccl-tests' alltoall), sum_{r != me} S_r for uneven ones
(``all_to_all_sent_bytes``; an MoE layer's token exchange).
"""

from __future__ import annotations


def sent_bytes(kind: str, payload: int, n: int, *, is_root: bool) -> int:
    """Bytes one rank sends for a collective of full-buffer size ``payload`` over ``n`` ranks."""
    if n <= 1:
        return 0
    if kind == "all_reduce":
        return 2 * (n - 1) * payload // n  # ring: reduce-scatter then all-gather
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) * payload // n
    if kind == "broadcast":
        return payload if is_root else 0
    if kind == "scatter":
        return (n - 1) * payload // n if is_root else 0
    if kind == "gather":
        return 0 if is_root else payload // n
    if kind == "reduce":
        return 0 if is_root else payload
    if kind == "send":
        return payload
    return 0  # recv, barrier


def all_to_all_sent_bytes(shares: list[int], me: int) -> int:
    """Bytes rank ``me`` sends in an all-to-all whose input holds ``shares[r]`` bytes for rank r:
    everything but its own share (which stays in its memory)."""
    return sum(shares) - shares[me]
