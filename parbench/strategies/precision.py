"""Training precision on torch's own machinery: fp32, tf32 and bf16 mixed precision.

- ``fp32``: parameters, compute and communication in fp32.
- ``tf32``: fp32 tensors, matmuls on TF32 tensor cores (CUDA only; ``torch.backends.cuda.matmul``).
- ``bf16``: fp32 master parameters and optimizer, forward and backward under ``torch.autocast``
  (bf16 matmuls); the communication that carries bf16 tensors halves: DDP's gradient all-reduce
  through a bf16 comm hook, FSDP2's all-gather and reduce-scatter through ``MixedPrecisionPolicy``, the
  hand-written gradient all-reduces of pipelines and expert parallelism (``reduce_dtype``),
  tensor-parallel activations where autocast made them bf16 (a linear layer's output; layer norms
  and the residual stream stay fp32 under autocast, so pipeline stage boundaries, which carry the
  residual stream, stay fp32). The parameter server pushes and pulls fp32 (its shards are the master
  copy).

torch's ``bf16_compress_hook`` refuses anything but CUDA with NCCL >= 2.10 ("requires CUDA 11+ and
NCCL 2.10+" on gloo), so on gloo the same compression is done by ``bf16_allreduce_hook`` below.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Callable, Iterator

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from torch.distributed.fsdp import MixedPrecisionPolicy


def configure(precision: str, device: torch.device) -> None:
    """Process-wide switches: TF32 matmuls on CUDA for ``tf32``, off otherwise (torch's default)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"


@contextlib.contextmanager
def autocast(precision: str, device: torch.device) -> Iterator[None]:
    """bf16 autocast around a whole training step (forward, loss, backward); a no-op otherwise."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        yield


def with_precision(trainer, precision: str, device: torch.device):
    """The trainer with its steps under ``autocast`` (bf16); the same trainer otherwise."""
    if precision != "bf16":
        return trainer
    return dataclasses.replace(trainer, step=under_autocast(trainer.step, precision, device),
                               compute_only_step=under_autocast(trainer.compute_only_step, precision, device))


def under_autocast(step: Callable | None, precision: str, device: torch.device) -> Callable | None:
    """``step`` run under ``autocast`` (None stays None)."""
    if step is None or precision != "bf16":
        return step

    def wrapped(i: int):
        with autocast(precision, device):
            return step(i)

    return wrapped


def bf16_allreduce_hook(group, bucket):  # unannotated: DDP rejects a string annotation on ``bucket``
    """DDP comm hook: average a gradient bucket in bf16 (half the bytes), then write it back in fp32."""
    world = dist.get_world_size(group)
    compressed = bucket.buffer().to(torch.bfloat16).div_(world)
    future = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(fut: torch.futures.Future) -> torch.Tensor:
        out = bucket.buffer()
        out.copy_(fut.value()[0])
        return out

    return future.then(decompress)


def register_ddp_hook(ddp: torch.nn.parallel.DistributedDataParallel, precision: str,
                      group: dist.ProcessGroup | None = None) -> None:
    """bf16 gradient all-reduce for ``bf16``; DDP's own fp32 all-reduce otherwise."""
    if precision == "bf16":
        ddp.register_comm_hook(group, bf16_allreduce_hook)


def reduce_dtype(precision: str) -> torch.dtype:
    """The dtype of hand-written gradient all-reduces (the pipeline's and expert parallelism's): bf16 for ``bf16``."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def fsdp_policy(precision: str) -> MixedPrecisionPolicy:
    """FSDP2: bf16 parameters for compute (bf16 all-gather) and bf16 gradient reduce-scatter."""
    from torch.distributed.fsdp import MixedPrecisionPolicy  # FSDP's import brings DTensor: only where it is used

    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    return MixedPrecisionPolicy()
