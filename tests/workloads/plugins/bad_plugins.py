"""Plugins that are wrong in one way each: the bad-input tests load them by path."""

import time

import torch
import torch.nn.functional as F
from torch import nn

from parbench.workloads import StagedModel, Workload

NOT_A_FACTORY = 3


def one_argument(cfg):
    raise AssertionError("never called: the signature check refuses it first")


def returns_dict(cfg, seed):
    return {"build": None}


def raises(cfg, seed):
    raise RuntimeError("the plugin's own bug")


def negative_flops(cfg, seed):
    return _workload(forward_flops_per_sample=-1)


def mismatched(cfg, seed):
    """A model for 784 features fed 100-feature inputs."""
    return _workload(batch=lambda step, size: (torch.randn(size, 100), torch.zeros(size, dtype=torch.long)))


def samples_last(cfg, seed):
    """A batch laid out features-first: the strategies slice samples on dim 0."""
    return _workload(batch=lambda step, size: (torch.randn(784, size), torch.zeros(size, dtype=torch.long)))


def plain_module(cfg, seed):
    return _workload(build=lambda s: nn.Linear(784, 10))


def optimizer_returns_none(cfg, seed):
    return _workload(optimizer=lambda params, lr: None)


def optimizer_raises(cfg, seed):
    return _workload(optimizer=lambda params, lr: torch.optim.SGD(params, lr=-lr))


def nothing_to_train(cfg, seed):
    """Every parameter frozen: DDP refuses such a model, and no strategy has a gradient to move."""
    def build(s):
        model = StagedModel(None, [nn.Linear(784, 784), _head()], None)
        return model.requires_grad_(False)
    return _workload(build=build)


def tp_plan_raises(cfg, seed):
    return _workload(tp_plan=lambda model: model.units[7])


def tp_plan_of_names(cfg, seed):
    """Styles named as transformers names them, not torch ParallelStyle objects."""
    return _workload(tp_plan=lambda model: {"units.0": "colwise", "units.1.0": "rowwise"})


class _NoLength(torch.utils.data.Dataset):
    def __len__(self):
        raise NotImplementedError("streamed: length unknown")

    def __getitem__(self, i):
        return torch.randn(784), torch.tensor(0)


def dataset_without_length(cfg, seed):
    return _workload(batch=None, dataset=_NoLength())


def bad_split(cfg, seed):
    """Two units, but a declared split point at unit 5."""
    return _workload(split_points=(5,))


def four_units_split_at_one(cfg, seed):
    """Four units, a stage may begin only at unit 1: the even 2-stage split (at 2) is not allowed."""
    return _workload(build=lambda s: StagedModel(None, [nn.Linear(784, 784) for _ in range(3)] + [_head()], None), split_points=(1,))


def bad_tp_plan(cfg, seed):
    from torch.distributed.tensor.parallel import ColwiseParallel

    return _workload(tp_plan=lambda model: {"units.7.fc": ColwiseParallel()})


class _HangsWithGradients(nn.Module):
    """Fine without gradients (the pre-spawn check), never returns in a training step."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 784)

    def forward(self, x):
        if torch.is_grad_enabled():
            time.sleep(10**6)
        return self.fc(x)


def hangs_in_its_factory(cfg, seed):
    time.sleep(10**6)


def hangs_building(cfg, seed):
    def build(s):
        time.sleep(10**6)
    return _workload(build=build)


def hangs_in_training(cfg, seed):
    return _workload(build=lambda s: StagedModel(None, [_HangsWithGradients(), _head()], None))


def _head() -> nn.Module:
    return nn.Sequential(nn.Linear(784, 10), nn.LogSoftmax(dim=-1))


def _workload(**overrides) -> Workload:
    fields = dict(
        name="bad",
        build=lambda s: StagedModel(None, [nn.Linear(784, 784), _head()], None),
        batch=lambda step, size: (torch.randn(size, 784), torch.zeros(size, dtype=torch.long)),
        loss=F.nll_loss,
        optimizer=lambda params, lr: torch.optim.SGD(params, lr=lr),
        forward_flops_per_sample=0,
    )
    return Workload(**{**fields, **overrides})
