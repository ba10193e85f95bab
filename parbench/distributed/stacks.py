"""Which rank a hang is waiting for: every rank's Python stack, taken just before the kill.

Each rank registers ``faulthandler`` on SIGUSR1 (it writes the stacks from a C signal handler, so
it works while the rank is blocked inside a collective). At the deadline the launcher signals the
ranks that did not finish, reads their stacks, and names the rank that is *not* inside
torch.distributed or the autograd engine at its innermost frame (where a rank waits for its
peers): that rank did not reach the collective the others wait in.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import threading
import time
from pathlib import Path

STACK_SIGNAL = signal.SIGUSR1
WAITING_IN = ("/torch/distributed/", "/torch/autograd/", "/torch/nn/parallel/", "/torch/_tensor.py")
"""Code a rank sits in while it waits for its peers: collectives, DDP's reducer (inside backward)."""
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def stack_path(out_dir: Path, rank: int) -> Path:
    return out_dir / f"rank{rank}.stack"


def arm(out_dir: Path, rank: int) -> None:
    """In the rank: dump every thread's stack into ``rank<R>.stack`` on SIGUSR1."""
    f = open(stack_path(out_dir, rank), "w")  # noqa: SIM115 - faulthandler keeps it for the process's life
    f.write(f"main thread 0x{threading.main_thread().ident:016x}\n")  # the one frames() reads
    f.flush()
    faulthandler.register(STACK_SIGNAL, file=f, all_threads=True)


def collect(pids: dict[int, int], out_dir: Path, grace_s: float = 1.0) -> dict[int, list[tuple[str, int, str]]]:
    """Signal each rank (rank -> pid) and read its frames, innermost first ({} for one that gave none)."""
    before = {r: _size(stack_path(out_dir, r)) for r in pids}  # the header line arm() wrote
    for pid in pids.values():
        try:
            os.kill(pid, STACK_SIGNAL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and not all(_size(stack_path(out_dir, r)) > before[r] for r in pids):
        time.sleep(0.02)
    time.sleep(0.05)  # let the last lines land
    return {r: frames(_read(stack_path(out_dir, r))) for r in pids}


def frames(text: str) -> list[tuple[str, int, str]]:
    """(file, line, function) of the main thread's frames, innermost first (other threads, such as
    the lifeline's, are skipped)."""
    lines = text.splitlines()
    main = lines[0].split()[-1] if lines and lines[0].startswith("main thread ") else None
    out: list[tuple[str, int, str]] = []
    inside = False
    for line in lines[1:]:
        if "(most recent call first)" in line:
            if inside:
                break
            inside = main is None or main in line
        elif inside and (m := _FRAME.match(line)):
            out.append((m["file"], int(m["line"]), m["func"]))
    return out


def waiting(stack: list[tuple[str, int, str]]) -> bool:
    """The innermost frame is torch's own (a collective, the autograd engine waiting for DDP's
    all-reduce): frames further out say nothing (DDP's forward wraps a workload that hangs)."""
    return bool(stack) and any(marker in stack[0][0] for marker in WAITING_IN)


def culprit(stacks: dict[int, list[tuple[str, int, str]]]) -> tuple[int | None, str]:
    """(the rank the others wait for, or None when the stacks cannot tell; a sentence saying why)."""
    stuck = [r for r, s in stacks.items() if s and not waiting(s)]
    waiters = [r for r, s in stacks.items() if s and waiting(s)]
    if len(stuck) == 1 and waiters:
        return stuck[0], (f"rank {stuck[0]} did not reach the collective its peers wait in (it was in "
                          f"{where(stacks[stuck[0]])}); ranks {waiters} were waiting in torch.distributed")
    if stuck and not waiters:
        return stuck[0], (f"every rank was outside torch.distributed, so the workload itself hangs (rank "
                          f"{stuck[0]} in {where(stacks[stuck[0]])})")
    return None, "; ".join(f"rank {r}: {where(s) if s else 'no stack'}" for r, s in sorted(stacks.items()))


def where(stack: list[tuple[str, int, str]]) -> str:
    """The innermost frame, as ``func at file.py:line``."""
    file, line, func = stack[0]
    return f"{func} at {Path(file).name}:{line}"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
