"""A plugin that writes down every sample it makes, for tests of the input pipeline.

Each call appends one JSON line (process, rank, world size, step, global batch size, lo, hi) to the file
``<this file>.calls.jsonl``; tests copy this module into a temporary directory so every test has
its own log. ``make`` gives its data as ``batch_slice`` (each rank asks for its own samples),
``make_slow`` sleeps SLEEP_S in every call (an input pipeline slower than the step), and
``make_dataset`` gives a map-style Dataset instead of a batch function.
"""

import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from parbench.workloads import StagedModel, Workload

LOG = Path(__file__).with_suffix(".calls.jsonl")
FEATURES, HIDDEN, CLASSES = 8, 16, 4
SLEEP_S = 0.25
DATASET_SAMPLES = 200


def sample(seed: int, step: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample k of step's global batch, from its own generator (any slice equals the whole batch's rows)."""
    x = torch.randn(FEATURES, generator=torch.Generator().manual_seed(seed * 1_000_003 + step * 10_007 + k))
    return x, (x[:CLASSES] * 3).argmax()


def record(**call) -> None:
    ranked = dist.is_initialized()
    call.update(pid=os.getpid(), rank=dist.get_rank() if ranked else None,
                world_size=dist.get_world_size() if ranked else None)
    with open(LOG, "a") as f:  # one short append per call: lines from several processes do not mix
        f.write(json.dumps(call) + "\n")


def rows(seed: int, step: int, size: int, lo: int, hi: int, sleep_s: float = 0.0):
    record(step=step, size=size, lo=lo, hi=hi)
    time.sleep(sleep_s)
    xs, ys = zip(*(sample(seed, step, k) for k in range(lo, hi)))
    return torch.stack(xs), torch.stack(ys)


class Samples(Dataset):
    """DATASET_SAMPLES fixed samples; every read is written down (index)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __len__(self) -> int:
        return DATASET_SAMPLES

    def __getitem__(self, index: int):
        record(index=int(index))
        return sample(self.seed, -1, int(index))


def build(seed: int) -> StagedModel:
    torch.manual_seed(seed)
    return StagedModel(None, [nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU()),
                              nn.Sequential(nn.Linear(HIDDEN, CLASSES), nn.LogSoftmax(dim=-1))], None)


def _workload(**data) -> Workload:
    return Workload(name="recording", build=build, loss=F.nll_loss,
                    optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
                    forward_flops_per_sample=2 * (FEATURES * HIDDEN + HIDDEN * CLASSES), **data)


def make(cfg, seed: int) -> Workload:
    return _workload(batch_slice=lambda step, size, lo, hi: rows(seed, step, size, lo, hi))


def make_slow(cfg, seed: int) -> Workload:
    return _workload(batch_slice=lambda step, size, lo, hi: rows(seed, step, size, lo, hi, SLEEP_S))


def make_dataset(cfg, seed: int) -> Workload:
    return _workload(dataset=Samples(seed))
