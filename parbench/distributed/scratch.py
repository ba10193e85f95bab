"""Scratch space for launches that is removed even when parbench is killed with SIGKILL.

Every launch's files (the ranks' result files) and the process server's own socket directory live
under one directory per parbench process, ``<tmp>/parbench-<pid>-<random>/``. With the first
launch a janitor process starts: it holds the read end of a pipe whose write end only this process
has (the descriptor is close-on-exec, so neither the process server nor the ranks inherit it).
However this process ends (exit, exception, SIGKILL), the kernel closes the pipe; the janitor then
removes the directory and exits. It runs in a session of its own, so a Ctrl-C or a kill of the
process group does not end it before its work. A normal exit removes the directory at once.

While the process lives it holds an exclusive ``flock`` on ``<dir>/lock``; a directory is stale
only when that lock can be taken. A process id alone cannot tell: a process in another PID
namespace (a node of ``parbench cluster`` runs under ``unshare --pid``) sees no ``/proc`` entry for
a live parbench outside it, and would delete that parbench's directory under its running launches.
"""

from __future__ import annotations

import atexit
import fcntl
import multiprocessing.process
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "parbench-"
JANITOR = (
    "import shutil, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"  # a Ctrl-C meant for parbench is not for the janitor
    "sys.stdin.buffer.read()\n"  # returns when every holder of the pipe's write end is gone
    "shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
)

# One per process, like the process server it accompanies (both belong to the process, not to a
# launch): created on first use, removed when the process ends.
_session: dict[str, object] = {}


def session_dir() -> Path:
    """This process's scratch directory, with its janitor; created on first use. The process
    server's own directory (multiprocessing's temp dir) is placed inside it, so call this before
    the server starts."""
    if "dir" not in _session:
        remove_stale()
        path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        lock = os.open(path / "lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC)
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until this process ends: the directory is in use
        (path / "mp").mkdir()
        janitor = subprocess.Popen([sys.executable, "-S", "-c", JANITOR, str(path)], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        multiprocessing.process.current_process()._config.setdefault("tempdir", str(path / "mp"))
        _session.update(dir=path, janitor=janitor, lock=lock)
        atexit.register(_cleanup)
    return _session["dir"]  # type: ignore[return-value]


def launch_dir(prefix: str = "ranks-") -> Path:
    """A fresh directory for one launch, inside the session directory."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=session_dir()))


def _cleanup() -> None:
    shutil.rmtree(_session["dir"], ignore_errors=True)  # type: ignore[arg-type]
    janitor = _session["janitor"]
    janitor.stdin.close()  # type: ignore[union-attr]
    try:
        janitor.wait(timeout=5)  # type: ignore[union-attr]
    except subprocess.TimeoutExpired:
        pass


def remove_stale() -> list[Path]:
    """Scratch directories of parbench processes that are gone and whose janitor did not run (the
    host rebooted mid-run, or the janitor itself was killed): removed; the paths."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = path.name[len(PREFIX):].split("-", 1)[0]
        if path.is_dir() and pid.isdigit() and not in_use(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def in_use(path: Path, grace_s: float = 60.0) -> bool:
    """Whether the process that made ``path`` still holds its lock. A directory without a lock file
    yet (being created this instant) counts as in use for ``grace_s``."""
    try:
        fd = os.open(path / "lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            return time.time() - path.stat().st_mtime < grace_s
        except FileNotFoundError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
