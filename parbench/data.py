"""The input pipeline of one rank: what it reads for each step, made before the step begins.

A training job does not make its input inside the step: a DataLoader's workers have the next
batch ready. parbench does the same, so that a step's time is the cost of the parallel layout:

- **its own slice only**: a data-parallel replica makes samples lo..hi-1 of each step's global
  batch (``Workload.rows``; a workload without ``batch_slice`` makes the whole batch and keeps its
  rows), or reads them from a Dataset through a ``DataLoader`` with a ``DistributedSampler``;
- **off the timed step**: the runner calls ``Feed.prepare(i)`` before the timed chunk holding step i starts and the
  step takes the batch ready (``Feed.take``). With ``data_in_step`` it does not, so ``take`` makes it
  inside the timed step. Either way every preparation is timed on its own (``Feed.seconds``): the
  record's ``time_data_s``.

A Dataset's loader order is the same for every strategy with the same global batch: the sampler
shuffles with ``seed + epoch`` over the whole dataset whatever the number of replicas, and replica r
of n takes every n-th index from r, so step i's n slices together are positions i*B..(i+1)*B-1 of
that epoch's permutation, the single-process batch i (B the global batch; every replica drops the
same tail, so an epoch has floor(N / B) steps at every n).
"""

from __future__ import annotations

import ctypes
import signal
import time
from typing import Callable

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from parbench.config import RunConfig
from parbench.workloads.base import Batch, Workload

Source = Callable[[int], Batch | tuple[None, None]]
"""step -> this rank's input for that step."""


class Feed:
    """One rank's input: ``prepare(i)`` makes step i's batch ahead of the step, ``take(i)`` hands it
    to the step (making it there if it was not prepared); each making is timed."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._ready: dict[int, Batch | tuple[None, None]] = {}
        self.seconds: dict[int, float] = {}
        """step -> seconds its input took to make (wherever it was made)."""

    def prepare(self, step: int) -> None:
        if step not in self._ready:
            self._ready[step] = self._make(step)

    def take(self, step: int) -> Batch | tuple[None, None]:
        return self._ready.pop(step) if step in self._ready else self._make(step)

    def _make(self, step: int) -> Batch | tuple[None, None]:
        t0 = time.perf_counter()
        batch = self._source(step)
        self.seconds[step] = time.perf_counter() - t0
        return batch


def nothing(step: int) -> tuple[None, None]:
    """The source of a rank that reads no data (rank0 mode's receivers, pipeline middle stages)."""
    return None, None


def replica_source(cfg: RunConfig, workload: Workload, *, dp_rank: int, dp_size: int) -> Source:
    """Replica ``dp_rank`` of ``dp_size``: its global_batch_size / dp_size samples of every step."""
    if workload.dataset is not None:
        return LoaderSource(workload.dataset, cfg, dp_rank=dp_rank, dp_size=dp_size)
    size = cfg.global_batch_size
    per = size // dp_size
    lo, hi = dp_rank * per, (dp_rank + 1) * per
    return lambda step: workload.rows(step, size, lo, hi)


class LoaderSource:
    """Batches of a Dataset as a training job reads them: ``DataLoader`` + ``DistributedSampler``
    (shuffled per epoch with ``seed + epoch``, tail dropped), step i = batch i mod epoch length of
    epoch i // epoch length. Steps are asked for in order; any other order restarts the epoch."""

    def __init__(self, dataset: Dataset, cfg: RunConfig, *, dp_rank: int, dp_size: int) -> None:
        self.sampler = DistributedSampler(dataset, num_replicas=dp_size, rank=dp_rank, shuffle=True,
                                          seed=cfg.seed, drop_last=True)
        workers = cfg.loader_workers
        # Workers fork from this rank, as on any Linux training job: a rank started by the forkserver
        # would otherwise start them through it too, re-importing the program in each (tens of seconds
        # on a loaded 2-core machine) instead of sharing the dataset already in memory.
        self.loader = DataLoader(dataset, batch_size=cfg.global_batch_size // dp_size, sampler=self.sampler,
                                 drop_last=True, num_workers=workers, pin_memory=cfg.pin_memory,
                                 prefetch_factor=cfg.prefetch_factor if workers else None,
                                 persistent_workers=workers > 0, worker_init_fn=_die_with_rank if workers else None,
                                 multiprocessing_context="fork" if workers else None)
        if len(self.loader) == 0:
            raise ValueError(f"the dataset has {len(dataset)} samples: fewer than one global batch of "
                             f"{cfg.global_batch_size}")
        self._epoch, self._next, self._iter = -1, 0, None

    def __call__(self, step: int) -> Batch:
        epoch, index = divmod(step, len(self.loader))
        if (epoch, index) != (self._epoch, self._next):
            self._start(epoch, skip=index)
        x, y = next(self._iter)
        self._next += 1
        return x, y

    def _start(self, epoch: int, *, skip: int) -> None:
        self.sampler.set_epoch(epoch)  # the sampler's shuffle: seed + epoch, the same on every replica
        self._epoch, self._next, self._iter = epoch, 0, iter(self.loader)
        for _ in range(skip):
            next(self._iter)
            self._next += 1


def _die_with_rank(worker_id: int) -> None:
    """A loader worker gets SIGKILL when its rank dies (PR_SET_PDEATHSIG, not inherited through
    fork): a killed rank leaves no worker behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def to_device(batch: Batch | tuple[None, None], device: torch.device) -> Batch | tuple[None, None]:
    """The host-to-device copy, inside the step as in a training loop (non-blocking from pinned memory)."""
    return tuple(None if t is None else t.to(device, non_blocking=True) for t in batch)
