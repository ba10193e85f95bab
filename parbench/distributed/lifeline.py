"""A rank ends when the process that launched it ends, however that one ends (kill -9 included).

Ranks fork from multiprocessing's process server, and the server lives as long as any of its
children holds the server's "alive" pipe, which every rank inherits: the parent-death signal a
rank sets (PR_SET_PDEATHSIG) names the server, so it does not fire when the launcher is killed,
and the ranks would run on (until their collectives time out). Each rank therefore watches the
launcher itself: a pidfd becomes readable when that process exits; a thread waits on it and
kills the rank at once. The server exits once its last rank is gone.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time


def die_with(pid: int) -> None:
    """SIGKILL this process as soon as process ``pid`` ends (now, if it already has)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        _die()
    except (AttributeError, OSError):  # no pidfd (kernel < 5.3): poll
        threading.Thread(target=_poll, args=(pid,), daemon=True, name="parbench-lifeline").start()
        return
    threading.Thread(target=_wait, args=(fd,), daemon=True, name="parbench-lifeline").start()


def _wait(fd: int) -> None:
    select.select([fd], [], [])  # readable when the process exits
    _die()


def _poll(pid: int, every_s: float = 0.5) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _die()
        time.sleep(every_s)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
