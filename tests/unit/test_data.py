"""The input pipeline without a process group: the Feed's prepare/take, and the DataLoader order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

from parbench.config import RunConfig
from parbench.data import Feed, LoaderSource, replica_source
from parbench.workloads.base import Workload

N, B, SEED = 50, 8, 3  # 50 samples, global batch 8: floor(50 / 8) = 6 steps per epoch


def _dataset() -> TensorDataset:
    """Sample k is (k as a float feature, label k): a batch's labels name its samples."""
    return TensorDataset(torch.arange(N, dtype=torch.float32).unsqueeze(1), torch.arange(N))


def _cfg(**changes) -> RunConfig:
    return RunConfig(strategy="ddp", world_size=4, global_batch_size=B, seed=SEED, **changes)


def test_feed_makes_each_input_once_and_times_it():
    calls = []
    feed = Feed(lambda step: calls.append(step) or (torch.full((2,), float(step)), torch.zeros(2)))
    feed.prepare(4)
    feed.prepare(4)  # already made: not again
    assert calls == [4] and feed.take(4)[0].tolist() == [4.0, 4.0] and calls == [4]
    assert feed.take(5)[0].tolist() == [5.0, 5.0] and calls == [4, 5]  # not prepared: made in take
    assert set(feed.seconds) == {4, 5} and all(s >= 0 for s in feed.seconds.values())


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_loader_steps_are_the_single_process_batches_at_every_replica_count(replicas):
    """Step i's slices of all replicas together are samples i*B..(i+1)*B-1 of the epoch's
    permutation, torch.randperm(N) seeded with seed + epoch (DistributedSampler's documented
    shuffle), for every number of replicas; each epoch draws every sample at most once."""
    sources = [LoaderSource(_dataset(), _cfg(), dp_rank=r, dp_size=replicas) for r in range(replicas)]
    per_epoch = N // B
    for step in range(2 * per_epoch + 1):  # across two epoch boundaries
        epoch, index = divmod(step, per_epoch)
        perm = torch.randperm(N, generator=torch.Generator().manual_seed(SEED + epoch))
        expected = sorted(perm[index * B:(index + 1) * B].tolist())
        got = sorted(label for s in sources for label in s(step)[1].tolist())
        assert got == expected, (replicas, step)


def test_loader_reshuffles_per_epoch_and_restarts_out_of_order():
    source = LoaderSource(_dataset(), _cfg(), dp_rank=0, dp_size=1)
    first_epoch = [source(i)[1].tolist() for i in range(6)]
    assert sorted(sum(first_epoch, [])) == sorted(set(sum(first_epoch, [])))  # no sample twice in an epoch
    assert source(6)[1].tolist() != first_epoch[0]  # epoch 1 is shuffled anew
    assert source(2)[1].tolist() == first_epoch[2]  # asked out of order: epoch 0 again, same batch


WORKER_CHECK = """
import torch
from tests.unit.test_data import LoaderSource, _cfg, _dataset
plain = LoaderSource(_dataset(), _cfg(), dp_rank=1, dp_size=2)
workers = LoaderSource(_dataset(), _cfg(loader_workers=1, prefetch_factor=2), dp_rank=1, dp_size=2)
print(all(torch.equal(plain(step)[1], workers(step)[1]) for step in range(8)))
"""


def test_loader_workers_give_the_same_batches():
    """In a fresh process, as in a rank: loader workers fork from the process that reads, and a fork
    from this long-lived test process (its threads and queues from earlier tests) once hung for the
    whole test timeout, with the worker waiting for indices that never came."""
    root = Path(__file__).parents[2]
    out = subprocess.run([sys.executable, "-c", WORKER_CHECK], capture_output=True, text=True, timeout=120,
                         cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]


def test_replica_source_makes_only_its_slice():
    asked = []

    def batch_slice(step, size, lo, hi):
        asked.append((step, size, lo, hi))
        return torch.zeros(hi - lo, 1), torch.zeros(hi - lo, dtype=torch.long)

    w = Workload(name="probe", build=lambda s: None, loss=lambda o, t: o, optimizer=lambda p, lr: None,
                 batch_slice=batch_slice)
    x, _ = replica_source(_cfg(), w, dp_rank=3, dp_size=4)(7)
    assert asked == [(7, B, 6, 8)] and x.shape == (2, 1)


def test_a_workload_needs_exactly_one_kind_of_data():
    base = dict(name="w", build=lambda s: None, loss=lambda o, t: o, optimizer=lambda p, lr: None)
    with pytest.raises(ValueError, match="needs data"):
        Workload(**base)
    with pytest.raises(ValueError, match="not both"):
        Workload(**base, batch=lambda s, n: None, dataset=_dataset())
    with pytest.raises(ValueError, match="map-style"):
        Workload(**base, dataset=[1, 2, 3].__iter__())


def test_loader_options_are_validated():
    from parbench.config import ConfigError

    with pytest.raises(ConfigError, match="loader_workers=-1"):
        _cfg(loader_workers=-1)
    with pytest.raises(ConfigError, match="prefetch_factor=0"):
        _cfg(prefetch_factor=0)
    with pytest.raises(ConfigError, match="pin_memory"):
        _cfg(pin_memory=True)
