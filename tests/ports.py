"""Ports for tests that start real rendezvous servers on 127.0.0.1.

A port the kernel hands out for ``bind(port 0)`` lies in the ephemeral range (Linux: 32768-60999), where
every outgoing connection on the machine also takes its local port: a run rendezvousing on port + 1 can
find it taken by a client socket of another process. These blocks are drawn below that range, and every
port of a block is checked free before it is returned.
"""

from __future__ import annotations

import random
import socket


def free_ports(count: int = 1, low: int = 20000, high: int = 32000) -> int:
    """The first of ``count`` consecutive ports that all bind on 127.0.0.1 right now."""
    for _ in range(200):
        base = random.randrange(low, high - count)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{high}")
