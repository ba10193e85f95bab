"""A workload whose compute time is known exactly: every unit sleeps a fixed time per call.

Each of the ``layers`` units is a small Linear followed by an operator that sleeps
``UNIT_FORWARD_S`` in forward and ``2 x UNIT_FORWARD_S`` in backward (backward ~ 2x forward, as for
a matmul). Sleeping needs no CPU, so several ranks "compute" at once even on a loaded 2-core
machine, and a pipeline's schedule shows its textbook shape: the measured bubble can be held to
(p-1)/(m+p-1) tightly. The sleep is a registered operator (``parbench_test::sleep``), so
torch.profiler records it like any other operator: it is compute to the step-time breakdown.

Loaded by path: ``--workload tests/distributed/sleepy_workload.py:make``.
"""

import time

import torch
import torch.nn.functional as F
from torch import nn

from parbench.workloads import StagedModel, Workload

UNIT_FORWARD_S = 0.020
"""Seconds one unit sleeps per forward call (backward: twice that)."""
FEATURES = 16


@torch.library.custom_op("parbench_test::sleep", mutates_args=())
def sleep(x: torch.Tensor, seconds: float) -> torch.Tensor:
    time.sleep(seconds)
    return x.clone()


@sleep.register_fake
def _(x: torch.Tensor, seconds: float) -> torch.Tensor:
    return torch.empty_like(x)


def _backward(ctx, grad: torch.Tensor):
    return sleep(grad, 2 * ctx.seconds), None


def _setup(ctx, inputs, output) -> None:
    ctx.seconds = inputs[1]


sleep.register_autograd(_backward, setup_context=_setup)


class SleepyUnit(nn.Module):
    def __init__(self, seconds: float, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sleep(torch.tanh(self.linear(x)), self.seconds)


def build(seed: int, layers: int, seconds: float, features: int) -> StagedModel:
    torch.manual_seed(seed)
    return StagedModel(None, [SleepyUnit(seconds, features) for _ in range(layers)], None)


def batch(seed: int, step: int, size: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randn(size, features, generator=g), torch.randn(size, features, generator=g)


def make(cfg, seed: int) -> Workload:
    """``layers`` units of width ``hidden`` (default 16); each sleeps UNIT_FORWARD_S x 4 / layers, so the whole model's forward
    sleeps 4 x UNIT_FORWARD_S whatever the number of units (a 4-stage pipeline: one unit's worth
    per stage; 8 units for 4 ranks x 2 virtual stages: half a unit's worth per chunk)."""
    layers = cfg.layers or 4
    features = cfg.hidden or FEATURES  # wide units: big gradients for data-parallel tests
    seconds = UNIT_FORWARD_S * 4 / layers
    return Workload(
        name="sleepy",
        build=lambda s: build(s, layers, seconds, features),
        batch=lambda step, size: batch(seed, step, size, features),
        loss=F.mse_loss,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr or 0.01),
        forward_flops_per_sample=2 * features * features * layers,
        description="test workload: every unit sleeps a known time (forward x1, backward x2)",
    )
