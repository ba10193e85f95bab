"""``parbench.distributed.spawn`` with plain rank functions: results in rank order, a failing rank
named as the cause, a hung one ended at the deadline, and no rank process left behind either way."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import torch
import torch.distributed as dist

from parbench.distributed import RankInfo, spawn


def sum_rank(offset: int, info: RankInfo) -> tuple[int, int]:
    """(rank, sum over ranks of rank + offset) through one all-reduce."""
    t = torch.tensor([info.rank + offset])
    dist.all_reduce(t)
    return info.rank, int(t)


def failing_rank(payload: tuple[str, str], info: RankInfo) -> None:
    mode, pid_dir = payload
    Path(pid_dir, f"{info.rank}.pid").write_text(str(os.getpid()))
    if info.rank == 1:
        if mode == "raise":
            raise RuntimeError("rank one refuses")
        time.sleep(10**6)  # hang
    dist.barrier()  # the healthy rank waits for its peer


def _alive(pid_dir: Path) -> list[int]:
    """Rank processes (by the pids they wrote) that still exist and are not zombies."""
    pids = [int(p.read_text()) for p in pid_dir.glob("*.pid")]
    assert pids  # ranks that reached the rank function (on a loaded machine one may not have, by the deadline)
    return [pid for pid in pids if _running(pid)]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # it ended between the listing and the look
        return False


def test_results_come_back_in_rank_order():
    for n in (2, 3):
        out = spawn(n, sum_rank, 10, timeout_s=60)
        assert out.status == "ok", out.error
        # sum_{r<n} (r + 10) = n(n-1)/2 + 10n
        assert out.results == [(r, n * (n - 1) // 2 + 10 * n) for r in range(n)]
        assert out.wall_s > 0


def test_a_raising_rank_is_the_cause_and_every_rank_is_reaped(tmp_path):
    out = spawn(2, failing_rank, ("raise", str(tmp_path)), timeout_s=60)
    assert (out.status, out.failed_rank) == ("failed", 1)
    assert "RuntimeError: rank one refuses" in out.error
    assert _alive(tmp_path) == []


def test_a_hung_rank_ends_at_the_deadline_and_every_rank_is_reaped(tmp_path):
    out = spawn(2, failing_rank, ("hang", str(tmp_path)), timeout_s=10)
    assert out.status == "timeout" and "timed out after 10 s" in out.error
    assert 10 <= out.wall_s < 60
    assert _alive(tmp_path) == []
