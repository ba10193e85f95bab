"""The rank side of every launch: join the process group, run a rank function, hand back its result.

``rank_main`` is the one body every rank process runs (spawned here, or started by torchrun): a
rank function ``rank_fn(payload, info) -> result`` sees an initialised process group and never
deals with files, signals or exit codes.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import pickle
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

import torch
import torch.distributed as dist

RankFn = Callable[[Any, "RankInfo"], Any]


@dataclass(frozen=True, kw_only=True)
class Group:
    """How every rank joins the process group."""

    backend: str = "gloo"
    device: str = "cpu"
    """``cpu`` or ``cuda`` (one GPU per local rank)."""
    threads: int = 1
    """Intra-op threads per rank (torch.set_num_threads)."""
    timeout_s: float = 300.0
    """Store and collective timeout."""


@dataclass(frozen=True, kw_only=True)
class RankInfo:
    """Where a rank function runs: its rank, the world size and its device."""

    rank: int
    world_size: int
    device: torch.device


def result_path(out_dir: Path, rank: int) -> Path:
    return out_dir / f"rank{rank}.pkl"


def error_path(out_dir: Path, rank: int) -> Path:
    return out_dir / f"rank{rank}.error.json"


def rank_main(rank_fn: RankFn, payload: Any, *, rank: int, world_size: int, connect: Callable[[], dist.Store],
              out_dir: Path, group: Group, local_rank: int | None = None) -> NoReturn:
    """Run ``rank_fn`` in an initialised process group; never returns. Always leaves a file in
    ``out_dir``: ``rank<R>.pkl`` (the pickled result) or ``rank<R>.error.json``.

    ``local_rank``: the rank's index on its node (torchrun's LOCAL_RANK); single-host launches use
    ``rank`` and never read LOCAL_RANK from the environment, which an outer launcher may have set."""
    die_with_parent()
    try:
        torch.set_num_threads(group.threads)
        device = local_device(group.device, rank if local_rank is None else local_rank)
        dist.init_process_group(group.backend, store=connect(), rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=group.timeout_s),
                                device_id=device if device.type == "cuda" else None)
        result = rank_fn(payload, RankInfo(rank=rank, world_size=world_size, device=device))
        write_atomic(result_path(out_dir, rank), pickle.dumps(result))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the launcher as a file
        error = {"rank": rank, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                 "time": time.time()}
        write_atomic(error_path(out_dir, rank), json.dumps(error).encode())
        os._exit(1)
    teardown()


def local_device(kind: str, local_rank: int) -> torch.device:
    """One GPU per rank on its node. Two ranks on one GPU make NCCL abort ("Duplicate GPU detected"),
    so too few GPUs is an error here too (the launchers refuse it before spawning)."""
    if kind != "cuda":
        return torch.device("cpu")
    if local_rank >= torch.cuda.device_count():
        raise RuntimeError(f"local rank {local_rank} has no GPU of its own: {torch.cuda.device_count()} visible")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # the launcher never reads half a file


def teardown() -> NoReturn:
    """Leave the process group, then exit at once. Measured on torch 2.x with gloo: after
    ``destroy_process_group``, about 15% of ranks abort during interpreter shutdown ("terminate
    called without an active exception", SIGABRT); ``os._exit`` skips that shutdown."""
    try:
        dist.barrier()  # no rank leaves while a peer still talks to it
        dist.destroy_process_group()
    finally:
        os._exit(0)


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process if its parent dies: no orphans, even after kill -9."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
