"""Start ``world_size`` rank processes on this host, watch them, and hand back their results.

The parent owns the rendezvous (a TCPStore listening on 127.0.0.1 only, port chosen by the kernel,
so two launches never race for a port: ``store``), a deadline, and the rank processes: a rank that
fails or hangs ends the launch (a hang is traced to the rank the others wait for: ``stacks``), and
every rank process is killed and reaped before ``spawn`` returns. Ranks also die with this process
if it is killed (``lifeline``), and their files live in a directory removed even then (``scratch``).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import multiprocessing
import os
import pickle
import shutil
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import wait as wait_for_exit
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.multiprocessing as mp

from parbench.distributed import scratch, stacks
from parbench.distributed.lifeline import die_with
from parbench.distributed.store import loopback_interface, master_store
from parbench.distributed.rank import Group, RankFn, error_path, rank_main, result_path

POLL_S = 0.02
WAKE_S = 0.25
"""Longest the launcher sleeps between looks at its ranks' result files when no rank exits."""
ERROR_GRACE_S = 0.5
"""After the first failure, how long the other ranks get to report theirs (the first is the cause)."""
PRELOAD = ("torch", "torch.distributed", "parbench.runner", "parbench.strategies.every")
"""What the forkserver imports once: torch, the runner and every strategy module (the runner imports a
strategy's module only when a rank builds it), the code nearly every rank function runs. A rank
function's own module is added at the first launch."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a launch ended: ``ok`` with every rank's result, or ``failed`` / ``timeout`` with the cause."""

    status: str = "ok"
    results: list[Any] = dataclasses.field(default_factory=list)
    error: str | None = None
    failed_rank: int | None = None
    wall_s: float = 0.0


def prestart(*modules: str) -> None:
    """Start the forkserver now, preloading ``PRELOAD`` and ``modules`` (~2-10 s on a busy 2-core
    machine), so that the caller's own set-up overlaps with it instead of preceding the first launch."""
    from multiprocessing import forkserver

    _preload(modules)
    scratch.session_dir()  # first: the server's own socket directory goes inside it
    forkserver.ensure_running()


def _preload(modules: tuple[str, ...]) -> None:
    """Rank processes fork from a server that has imported torch and the rank code once, so a
    launch costs a fork, not an interpreter start plus ``import torch`` per rank. Takes effect
    only when the server is not yet running."""
    multiprocessing.set_forkserver_preload([*PRELOAD, *modules])


def spawn(world_size: int, rank_fn: RankFn, payload: Any, *, timeout_s: float, backend: str = "gloo",
          device: str = "cpu", threads: int = 1, preload: tuple[str, ...] = ()) -> Outcome:
    """Run ``rank_fn(payload, info)`` on ``world_size`` ranks; never leaves a rank process behind.

    ``rank_fn`` must be a module-level function (it is pickled by reference); its return values,
    pickled, are ``Outcome.results`` in rank order. ``preload``: further modules for the forkserver to
    import, where this launch starts it (``_preload``)."""
    _preload((rank_fn.__module__, *preload))
    group = Group(backend=backend, device=device, threads=threads, timeout_s=timeout_s)
    out_dir = scratch.launch_dir()  # removed with its session directory, even after kill -9
    store = master_store(world_size + 1, timeout_s=timeout_s)  # listens on 127.0.0.1 only
    t0 = time.perf_counter()
    context = mp.start_processes(_entry, args=(world_size, store.port, rank_fn, payload, group, str(out_dir),
                                               os.getpid()),
                                 nprocs=world_size, join=False, start_method="forkserver")
    try:
        outcome = _watch(context.processes, out_dir, timeout_s)
    finally:
        kill_all(context.processes)
        wall = time.perf_counter() - t0
        shutil.rmtree(out_dir, ignore_errors=True)
        del store
    return dataclasses.replace(outcome, wall_s=wall)


def _entry(rank: int, world_size: int, port: int, rank_fn: RankFn, payload: Any, group: Group, out_dir: str,
           launcher_pid: int) -> None:
    die_with(launcher_pid)  # not only with the process server: see parbench.distributed.lifeline
    stacks.arm(Path(out_dir), rank)  # the launcher asks for this rank's stack if it hangs
    lo = loopback_interface()
    if lo:  # every rank is on this host: gloo's connections stay on loopback too
        os.environ["GLOO_SOCKET_IFNAME"] = lo
    connect = functools.partial(dist.TCPStore, "127.0.0.1", port, world_size, is_master=False,
                                timeout=datetime.timedelta(seconds=group.timeout_s))
    rank_main(rank_fn, payload, rank=rank, world_size=world_size, connect=connect, out_dir=Path(out_dir), group=group)


def _watch(procs, out_dir: Path, timeout_s: float) -> Outcome:
    """Poll until every rank has a result, one fails, or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    done = [result_path(out_dir, r) for r in range(len(procs))]
    while True:
        if all(p.exists() for p in done):
            return Outcome(results=[pickle.loads(p.read_bytes()) for p in done])
        dead = [r for r, proc in enumerate(procs) if proc.exitcode is not None and not done[r].exists()]
        if dead or list(out_dir.glob(error_path(out_dir, "*").name)):
            time.sleep(ERROR_GRACE_S)  # let the other ranks' errors land (and deaths show): the first one is the cause
            dead = [r for r, proc in enumerate(procs) if _ended(proc) and not done[r].exists()]
            return failure(out_dir, [_exit_code(p) if r in dead else p.exitcode for r, p in enumerate(procs)], dead)
        if time.monotonic() > deadline:
            return _timeout(procs, out_dir, [r for r in range(len(procs)) if not done[r].exists()], timeout_s)
        # sleep until a rank exits (it writes its result or error first) or the deadline, at most WAKE_S: polling the
        # files every few ms cost the launcher ~5% of a core, taken from the ranks it measures
        wait_for_exit([p.sentinel for p in procs if p.exitcode is None],
                      timeout=max(min(WAKE_S, deadline - time.monotonic()), 0.0))


def _timeout(procs, out_dir: Path, missing: list[int], timeout_s: float) -> Outcome:
    """The rank the others wait for, from the stacks of the ranks without a result."""
    found = stacks.collect({r: procs[r].pid for r in missing if procs[r].is_alive()}, out_dir)
    rank, why = stacks.culprit(found)
    error = f"timed out after {timeout_s:g} s; ranks without a result: {missing}"
    return Outcome(status="timeout", failed_rank=rank if rank is not None else (missing[0] if missing else None),
                   error=f"{error}; {why}" if why else error)


def _ended(proc) -> bool:
    """The rank has exited, even if the process server has not reaped it and reported its exit code
    yet (under load that can come after a peer's report of the broken connection)."""
    if proc.exitcode is not None:
        return True
    try:
        state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _exit_code(proc, wait_s: float = 2.0) -> int | None:
    deadline = time.monotonic() + wait_s
    while proc.exitcode is None and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return proc.exitcode


def failure(out_dir: Path, exitcodes: list[int | None], dead: list[int]) -> Outcome:
    """The cause: a rank that died without a word (a signal: SIGKILL from the OOM killer, a
    segfault), else the earliest error a rank reported (later ones are peers losing their connection)."""
    errors = sorted((json.loads(p.read_text()) for p in out_dir.glob(error_path(out_dir, "*").name)),
                    key=lambda e: e["time"])
    silent = [r for r in dead if r not in {e["rank"] for e in errors}]
    if errors and not silent:
        err = errors[0]
        tail = err.get("traceback", "").strip().splitlines()[-3:]
        return Outcome(status="failed", failed_rank=err["rank"],
                       error=f"rank {err['rank']}: {err['error']}\n" + "\n".join(tail))
    rank = silent[0]
    code = exitcodes[rank]
    return Outcome(status="failed", failed_rank=rank,
                   error=f"rank {rank} died with exit code {code} ({_signal_name(code)}) before writing its result")


def _signal_name(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            pass
    return f"exit {code}"


def kill_all(procs) -> None:
    """SIGKILL every rank still alive and reap it: no orphans, no zombies."""
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=5)
