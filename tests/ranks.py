"""Track the rank processes a test starts, to check that every one of them is gone afterwards.

Ranks are forked by this process's multiprocessing forkserver, so they are exactly the server's
children: a thread records each one while the watch runs. ``survivors()`` are those still alive
(same pid *and* start time: a reused pid is not mistaken for a rank). Nothing is filtered by
command line: a rank forked from the server carries the server's command line.
"""

from __future__ import annotations

import multiprocessing.forkserver
import threading
import time

import psutil


def forkserver_pid() -> int | None:
    return getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)


class RankWatch:
    def __init__(self, poll_s: float = 0.01):
        self.seen: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(poll_s,), daemon=True)

    def __enter__(self) -> "RankWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self, poll_s: float) -> None:
        while not self._stop.is_set():
            pid = forkserver_pid()
            if pid:
                try:
                    for child in psutil.Process(pid).children():
                        self.seen.setdefault(child.pid, child)
                except psutil.Error:
                    pass
            time.sleep(poll_s)

    def survivors(self, wait_s: float = 0.0) -> list[psutil.Process]:
        """Ranks seen that still run (zombies count as gone: they hold no resources but a pid)."""
        deadline = time.monotonic() + wait_s
        while True:
            alive = [p for p in self.seen.values() if _alive(p)]
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.05)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
