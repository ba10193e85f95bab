"""An example parbench plugin: the seed documents' MNIST network (784 -> 512 -> 10), written the
way a user would, outside the parbench package, and loaded by path:

    parbench run --workload tests/workloads/plugins/mnist_plugin.py:make --strategy ddp --world-size 2

A factory takes (cfg: WorkloadConfig, seed: int) and returns a Workload. The model is a
StagedModel: here two units (the hidden layer and the classifier), so a 2-stage pipeline can split
it. No tp_plan: parbench refuses --strategy tp for it, before spawning, and says so.
"""

import torch
import torch.nn.functional as F
from torch import nn

from parbench.workloads import StagedModel, Workload

IMAGE = 28 * 28
CLASSES = 10


def build(seed: int, hidden: int) -> StagedModel:
    torch.manual_seed(seed)  # every rank and the reference build the same weights
    body = nn.Sequential(nn.Flatten(), nn.Linear(IMAGE, hidden), nn.ReLU())
    classifier = nn.Sequential(nn.Linear(hidden, CLASSES), nn.LogSoftmax(dim=-1))
    return StagedModel(None, [body, classifier], None)


def batch(seed: int, step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-shaped images and labels; depends only on (seed, step), so every rank sees one global batch."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    images = torch.rand(size, 1, 28, 28, generator=g)
    labels = (images.flatten(1)[:, :CLASSES] * 7).long().argmax(dim=1)  # a learnable rule
    return images, labels


def make(cfg, seed: int) -> Workload:
    hidden = cfg.hidden or 512  # 0 means "the plugin's default"
    return Workload(
        name="mnist-plugin",
        build=lambda s: build(s, hidden),
        batch=lambda step, size: batch(seed, step, size),
        loss=F.nll_loss,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
        forward_flops_per_sample=2 * (IMAGE * hidden + hidden * CLASSES),
        description="the seed documents' MNIST network as an outside plugin",
    )
