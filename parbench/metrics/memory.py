"""Memory per rank: accounted bytes by kind, activations saved for backward, peak RSS, CUDA peaks.

CPU has no allocator statistics, so parameters, gradients and optimizer state are summed
from the tensors themselves (local shards for DTensors), and activations are the peak of live
tensors saved for backward (``torch.autograd.graph.saved_tensors_hooks``), deduplicated by
storage and excluding parameters.
"""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch
from torch import nn


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """The shard this rank stores (a DTensor's local tensor, else the tensor itself)."""
    return t.to_local() if hasattr(t, "to_local") else t


def tensor_bytes(t: torch.Tensor | None) -> int:
    if t is None:
        return 0
    t = local_tensor(t)
    return t.numel() * t.element_size()


def param_bytes(params: Iterable[nn.Parameter]) -> int:
    return sum(tensor_bytes(p) for p in params)


def grad_bytes(params: Iterable[nn.Parameter]) -> int:
    return sum(tensor_bytes(p.grad) for p in params)


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in the optimizer state this rank holds (Adam's moments, momentum...)."""
    return sum(tensor_bytes(v) for state in _state(optimizer).values() for v in state.values()
               if isinstance(v, torch.Tensor))


def expert_split(experts: list[nn.Parameter] | None, optimizer: torch.optim.Optimizer | None) -> dict[str, int | None]:
    """Bytes of the expert parameters, their gradients and their optimizer state (mixture-of-experts
    models; the rest of ``mem_*_bytes`` is non-expert). All None for dense models."""
    if experts is None:
        return {"mem_expert_param_bytes": None, "mem_expert_grad_bytes": None, "mem_expert_optim_bytes": None}
    state = _state(optimizer) if optimizer is not None else {}
    optim = sum(tensor_bytes(v) for p in experts for v in state.get(p, {}).values() if isinstance(v, torch.Tensor))
    return {"mem_expert_param_bytes": param_bytes(experts), "mem_expert_grad_bytes": grad_bytes(experts),
            "mem_expert_optim_bytes": optim}


def _state(optimizer: torch.optim.Optimizer) -> dict:
    """Optimizer state by parameter; ZeroRedundancyOptimizer keeps its shard's in an inner optimizer."""
    return getattr(optimizer, "optim", optimizer).state


class _Saved:
    """A saved activation: counted while the autograd graph holds it, uncounted when released."""

    __slots__ = ("tensor", "tracker", "key")

    def __init__(self, tensor: torch.Tensor, tracker: "ActivationTracker", key: int) -> None:
        self.tensor, self.tracker, self.key = tensor, tracker, key

    def __del__(self) -> None:
        self.tracker._release(self.key)


@dataclass
class ActivationTracker:
    """Peak bytes of distinct storages saved for backward (parameters excluded)."""

    exclude: set[int] = field(default_factory=set)
    live: dict[int, list[int]] = field(default_factory=dict)  # storage ptr -> [refcount, bytes]
    current: int = 0
    peak: int = 0

    def exclude_params(self, params: Iterable[torch.Tensor]) -> None:
        self.exclude = {_storage_key(local_tensor(p)) for p in params}

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            yield

    def _pack(self, t: torch.Tensor):
        key = _storage_key(t)
        if key in self.exclude or key == 0 or _is_parameter(t):
            return t
        entry = self.live.setdefault(key, [0, _storage_bytes(t)])
        if entry[0] == 0:
            self.current += entry[1]
            self.peak = max(self.peak, self.current)
        entry[0] += 1
        return _Saved(t, self, key)

    @staticmethod
    def _unpack(obj):
        return obj.tensor if isinstance(obj, _Saved) else obj

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.current -= entry[1]
            del self.live[key]


def _is_parameter(t: torch.Tensor) -> bool:
    """A parameter or a view of one (e.g. the weight.t() a Linear saves): weights, not activations.
    FSDP's unsharded parameters are created and freed every step, so only this test catches them."""
    base = t._base if t._base is not None else t
    return isinstance(base, nn.Parameter)


def _storage_key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


def _storage_bytes(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return t.numel() * t.element_size()


def reset_peak_rss() -> None:
    """Reset the kernel's high-water mark (VmHWM) so a long-lived rank measures each run anew."""
    with contextlib.suppress(OSError):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def peak_rss_bytes() -> int:
    """VmHWM from /proc (resettable), else ru_maxrss (KiB on Linux)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cuda_peaks(device: torch.device) -> dict[str, int | None]:
    """Allocator peaks since ``reset_cuda_peaks``, and the whole device's use (``mem_get_info``:
    adds what the allocator does not see, NCCL's buffers and the CUDA context)."""
    if device.type != "cuda":
        return dict.fromkeys(("cuda_allocated_peak_bytes", "cuda_reserved_peak_bytes", "cuda_device_used_bytes",
                              "cuda_device_total_bytes"))
    free, total = torch.cuda.mem_get_info(device)
    return {
        "cuda_allocated_peak_bytes": torch.cuda.max_memory_allocated(device),
        "cuda_reserved_peak_bytes": torch.cuda.max_memory_reserved(device),
        "cuda_device_used_bytes": total - free,
        "cuda_device_total_bytes": total,
    }


def reset_cuda_peaks(device: torch.device) -> None:
    """Start the allocator's peak afresh. Called once the strategy is built: building first puts the
    whole model on the device and only then shards it (fsdp, tp), and a peak taken across that
    would report at least the whole model, hiding exactly the saving being measured."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()  # the unsharded copy's blocks are free now: do not count them as reserved
        torch.cuda.reset_peak_memory_stats(device)
