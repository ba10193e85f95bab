"""The rendezvous store of a launch, listening only where it should.

``torch.distributed.TCPStore(host, port, is_master=True)`` listens on every interface, whatever
``host`` says (seen with ``ss -ltn``: ``*:port``), and has no authentication: anyone who can
reach the port can read and write a run's keys while it lives. Binding the socket here and handing
its descriptor over (``master_listen_fd``) makes it listen on ``host`` only; clients connect as usual.
"""

from __future__ import annotations

import datetime
import socket

import torch.distributed as dist

LOOPBACK = "127.0.0.1"


def master_store(world_size: int, *, host: str = LOOPBACK, port: int = 0,
                 timeout_s: float = 300.0) -> dist.TCPStore:
    """A master TCPStore for ``world_size`` clients listening on ``host`` only (port 0: the kernel
    picks a free one, so two launches never race for a port). The store owns the socket and closes it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
        port = sock.getsockname()[1]
    except OSError:
        sock.close()
        raise
    return dist.TCPStore(host, port, world_size, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=timeout_s), master_listen_fd=sock.detach())


def loopback_interface() -> str | None:
    """The loopback interface's name (``lo`` on Linux), for ``GLOO_SOCKET_IFNAME``: gloo otherwise
    listens on the address the host name resolves to, which may face the network."""
    return next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
