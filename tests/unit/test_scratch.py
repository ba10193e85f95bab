"""Scratch directories: a live process's directory is never taken for stale, even by a process that
cannot see it in /proc (another PID namespace); a dead one's is."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parbench.distributed import scratch

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
"""


def _fake(pid: int) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{scratch.PREFIX}{pid}-"))


def test_a_locked_directory_survives_even_when_its_pid_is_unknown_here():
    path = _fake(2**22 + 7)  # no such pid here: as a live process in another PID namespace looks
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert path not in scratch.remove_stale() and path.is_dir()
    finally:
        holder.kill()
        holder.wait()
    assert path in scratch.remove_stale() and not path.exists()  # the holder is gone: stale now


def test_a_directory_being_created_is_left_alone_for_a_grace_period():
    path = _fake(2**22 + 8)  # no lock file yet
    assert path not in scratch.remove_stale()
    old = time.time() - 120
    os.utime(path, (old, old))
    assert path in scratch.remove_stale()


def test_this_process_holds_its_own_session():
    assert scratch.in_use(scratch.session_dir())
