"""The seed documents' MNIST classifier: 784 -> 512 (ReLU) -> 10, log-softmax, NLL loss, SGD.

``layers`` hidden layers of width ``hidden`` (1 = the seed's network). Each Linear (+ReLU) is a
pipeline unit, so the network has ``layers + 1`` units.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config import WorkloadConfig
from parbench.workloads.base import Batch, StagedModel, Workload, sample_rows, step_generator
from parbench.workloads import datasets

IN_FEATURES = 28 * 28
CLASSES = 10


class Dense(nn.Module):
    """Linear followed by ReLU (hidden) or log-softmax (output)."""

    def __init__(self, fan_in: int, fan_out: int, *, output: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(fan_in, fan_out)
        self.output = output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        return F.log_softmax(x, dim=-1) if self.output else F.relu(x)


def widths(cfg: WorkloadConfig) -> list[int]:
    return [IN_FEATURES] + [cfg.hidden] * cfg.layers + [CLASSES]


def build_model(cfg: WorkloadConfig, seed: int) -> StagedModel:
    torch.manual_seed(seed)
    w = widths(cfg)
    units = [Dense(a, b, output=(i == len(w) - 2)) for i, (a, b) in enumerate(zip(w, w[1:]))]
    return StagedModel(None, units, None)


def forward_flops_per_sample(cfg: WorkloadConfig) -> int:
    """2 x multiply-adds of the Linear layers (biases and activations are negligible)."""
    w = widths(cfg)
    return sum(2 * a * b for a, b in zip(w, w[1:]))


def tp_plan(model: StagedModel) -> dict:
    """Megatron pairs: hidden Linear column-wise, the next row-wise; an odd last layer stays replicated."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = {}
    n = len(model.units)
    for i in range(0, n - 1, 2):
        plan[f"units.{i}.fc"] = ColwiseParallel()
        plan[f"units.{i + 1}.fc"] = RowwiseParallel()
    return plan


def teacher(seed: int) -> torch.Tensor:
    """The fixed random linear map [784, 10] whose argmax labels the synthetic images."""
    return torch.randn(IN_FEATURES, CLASSES, generator=step_generator(seed, -1, "teacher"))


def synthetic_rows(labeller: torch.Tensor, seed: int, step: int, lo: int, hi: int) -> Batch:
    """Samples lo..hi-1 of a step's batch (``sample_rows``): Gaussian images labelled by the teacher
    ``labeller`` (built once per workload, not per step), so the loss can fall."""
    (x,) = sample_rows(seed, step, lo, hi, "mlp", lambda g, n: (torch.randn(n, IN_FEATURES, generator=g),))
    return x, (x @ labeller).argmax(dim=1)


def make(cfg: WorkloadConfig, seed: int) -> Workload:
    data: dict = {}
    if cfg.dataset == "synthetic":
        labeller = teacher(seed)
        data["batch_slice"] = lambda step, size, lo, hi: synthetic_rows(labeller, seed, step, lo, hi)
    else:
        data["dataset"] = datasets.load(cfg.dataset, Path(cfg.dataset_path) if cfg.dataset_path else None)
    return Workload(
        name="mlp",
        build=lambda s: build_model(cfg, s),
        **data,
        loss=F.nll_loss,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
        forward_flops_per_sample=forward_flops_per_sample(cfg),
        tp_plan=tp_plan,
        description="the seed documents' MNIST classifier (784-512-10), synthetic or real digits",
    )
