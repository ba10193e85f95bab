"""Communication accounting: every c10d op a rank issues, its bytes and its category.

A ``TorchDispatchMode`` sees the ``c10d::*`` ops that DDP's reducer, FSDP, ZeRO and pipelining
dispatch, and the ``_c10d_functional::*`` ops of DTensor (tensor parallel); torch.profiler records
no bytes under gloo (FIELD_NOTES). The bytes a rank *sends* follow the nccl-tests conventions of
``parbench.metrics.conventions``. ``wire`` is what the backend really sends where it differs (gloo
implements reduce-scatter as an all-reduce: 2x; it broadcasts down a binomial tree: inner ranks forward).

Categories (the seed FAQ's three volumes): ``data`` (samples and labels), ``parameter``
(gradients and parameters), ``intermediate`` (activations and their gradients). A collective's
category comes from an explicit ``meter.category(...)`` context, else from its process group
(a strategy maps its dp group to parameter, its tp/pp groups to intermediate), else the default.
"""

from __future__ import annotations

import contextlib
import enum
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from parbench.metrics.conventions import all_to_all_sent_bytes, sent_bytes


class Category(str, enum.Enum):
    DATA = "data"
    PARAMETER = "parameter"
    INTERMEDIATE = "intermediate"


# c10d op name -> collective kind; the op schemas are in torch/csrc/distributed/c10d/Ops.cpp
_OPS = {
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "allgather_": "all_gather",
    "_allgather_base_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "reduce_scatter_": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "broadcast_": "broadcast",
    "scatter_": "scatter",
    "gather_": "gather",
    "reduce_": "reduce",
    "alltoall_": "all_to_all",
    "alltoall_base_": "all_to_all",
    "send": "send",
    "recv_": "recv",
    "recv_any_source_": "recv",
    "barrier": "barrier",
}


# DTensor's functional collectives (torch/csrc/distributed/c10d/Functional.cpp): S is the input,
# except for all-gather, whose full buffer is group_size x the input shard
_FUNCTIONAL = {
    "all_reduce": "all_reduce",
    "all_reduce_": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "all_gather_into_tensor": "all_gather",
    "all_gather_into_tensor_out": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
    "broadcast_": "broadcast",
}


def _tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def all_to_all_shares(op: str, args, n: int) -> list[int]:
    """Bytes of the input going to each rank of an all-to-all: the input split sizes (rows) times
    the bytes of a row for ``alltoall_base_``, equal shares when no split is given, one tensor per
    rank for ``alltoall_``."""
    if op == "alltoall_":
        return [_nbytes([t]) for t in _tensors(args[1])]
    x = args[1]
    splits = list(args[4]) if len(args) > 4 and isinstance(args[4], (list, tuple)) else []
    total = x.numel() * x.element_size()
    if not splits:
        return [total // n] * n
    row = total // max(x.shape[0], 1) if x.dim() else total
    return [s * row for s in splits]


def _group(args) -> dist.ProcessGroup | None:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a)
            except RuntimeError:
                continue
    return None


def payload_bytes(kind: str, args) -> int:
    """S, the full buffer of the collective (nccl-tests' size), from the op's tensor arguments."""
    first, second = (_tensors(args[0]), _tensors(args[1]) if len(args) > 1 else [])
    if kind == "all_to_all":
        return _nbytes(second)  # alltoall_base_(output, input, ...) / alltoall_(outputs, inputs): S is what this rank holds to send
    if kind == "all_gather":
        # allgather_(outputs, inputs): outputs is the full buffer; _allgather_base_(out, in) likewise
        return _nbytes(first)
    if kind == "reduce_scatter":
        # reduce_scatter_(outputs, inputs) / _reduce_scatter_base_(out, in): inputs is the full buffer
        return _nbytes(second)
    if kind == "scatter":
        return _nbytes(second)  # scatter_(outputs, inputs): the root's inputs are the full buffer
    return _nbytes(first)


@dataclass
class OpStat:
    count: int = 0
    payload_bytes: int = 0
    sent_bytes: int = 0
    wire_bytes: int = 0


@dataclass
class CommMeter:
    """Counts c10d ops while ``counting()`` is active. Thread-safe enough: one rank, one trainer thread."""

    rank: int
    backend: str = "gloo"
    default: Category = Category.PARAMETER
    group_categories: dict[str, Category] = field(default_factory=dict)
    ops: dict[tuple[str, Category], OpStat] = field(default_factory=lambda: defaultdict(OpStat))
    labels: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Sent bytes by label (``label(...)``), e.g. an MoE layer's dispatch, combine and count exchange."""
    _override: list[Category] = field(default_factory=list)
    _labels: list[str] = field(default_factory=list)

    def assign(self, group: dist.ProcessGroup | None, category: Category) -> None:
        """Collectives on ``group`` count as ``category`` (None: the default group)."""
        group = group or dist.group.WORLD
        self.group_categories[group.group_name] = category

    @contextlib.contextmanager
    def category(self, category: Category) -> Iterator[None]:
        self._override.append(category)
        try:
            yield
        finally:
            self._override.pop()

    @contextlib.contextmanager
    def label(self, name: str) -> Iterator[None]:
        """Ops inside also add their sent bytes to ``labels[name]`` (their category is unchanged)."""
        self._labels.append(name)
        try:
            yield
        finally:
            self._labels.pop()

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        with _Interceptor(self):
            yield

    def reset(self) -> None:
        self.ops.clear()

    def record(self, op: str, args) -> None:
        kind = _OPS.get(op)
        if kind is None:
            return
        group = _group(args)
        sent = None
        if kind == "all_to_all":
            n = group.size() if group is not None else dist.get_world_size()
            me = dist.get_rank(group) if group is not None else dist.get_rank()
            sent = all_to_all_sent_bytes(all_to_all_shares(op, args, n), me)
        self._add(kind, group, payload_bytes(kind, args), _root(kind, args, group),
                  _tree_position(kind, args, group), sent=sent)

    def record_functional(self, op: str, args) -> None:
        """A ``_c10d_functional`` op (DTensor, tensor parallel): ``(input, ..., group_name)``."""
        kind = _FUNCTIONAL.get(op)
        if kind is None:
            return
        group = dist.distributed_c10d._resolve_process_group(args[-1])
        s = _nbytes(_tensors(args[0])) * (group.size() if kind == "all_gather" else 1)
        root = kind == "broadcast" and dist.get_rank(group) == args[1]
        position = (dist.get_rank(group) - args[1]) % group.size() if kind == "broadcast" else None
        self._add(kind, group, s, root, position)

    def _add(self, kind: str, group: dist.ProcessGroup | None, s: int, root: bool,
             position: int | None = None, *, sent: int | None = None) -> None:
        n = group.size() if group is not None else dist.get_world_size()
        sent = sent_bytes(kind, s, n, is_root=root) if sent is None else sent
        wire = sent
        if self.backend == "gloo" and kind == "reduce_scatter":
            wire = 2 * sent  # gloo reduce-scatters by all-reducing
        elif self.backend == "gloo" and kind == "broadcast" and position is not None:
            wire = s * binomial_children(position, n)  # gloo broadcasts down a binomial tree
        cat = self._override[-1] if self._override else self.group_categories.get(
            group.group_name if group is not None else "", self.default)
        stat = self.ops[(kind, cat)]
        stat.count += 1
        stat.payload_bytes += s
        stat.sent_bytes += sent
        stat.wire_bytes += wire
        for name in self._labels:
            self.labels[name] += sent

    def by_category(self) -> dict[str, int]:
        totals = {c.value: 0 for c in Category}
        for (_, cat), stat in self.ops.items():
            totals[cat.value] += stat.sent_bytes
        return totals

    def wire_total(self) -> int:
        return sum(s.wire_bytes for s in self.ops.values())

    def breakdown(self, per: int = 1) -> dict[str, dict[str, float]]:
        """``{"all_reduce/parameter": {count, payload_bytes, sent_bytes, wire_bytes}}`` divided by ``per`` steps."""
        return {
            f"{kind}/{cat.value}": {k: v / per for k, v in vars(stat).items()}
            for (kind, cat), stat in sorted(self.ops.items(), key=lambda kv: (kv[0][0], kv[0][1].value))
        }


def binomial_children(v: int, n: int) -> int:
    """Ranks that rank v (counted from the root) sends to in a binomial-tree broadcast over n ranks:
    v + 2^k for every 2^k > v with v + 2^k < n (the root sends ceil(log2 n) copies). Matches the
    OS write counter under gloo (FIELD_NOTES: gloo's broadcast is a binomial tree)."""
    children, step = 0, 1
    while step < n:
        if step > v and v + step < n:
            children += 1
        step *= 2
    return children


def _tree_position(kind: str, args, group) -> int | None:
    """This rank's distance from the root (mod n) in a broadcast, else None."""
    if kind != "broadcast":
        return None
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if not ints:
        return None
    n = group.size() if group is not None else dist.get_world_size()
    my = dist.get_rank(group) if group is not None else dist.get_rank()
    return (my - ints[0]) % n


def _root(kind: str, args, group) -> bool:
    """Whether this rank is the root of a rooted collective (broadcast/scatter/gather/reduce)."""
    if kind not in ("broadcast", "scatter", "gather", "reduce"):
        return False
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if not ints:
        return False
    root_in_group = ints[0]
    my = dist.get_rank(group) if group is not None else dist.get_rank()
    return my == root_in_group


class _Interceptor(TorchDispatchMode):
    def __init__(self, meter: CommMeter) -> None:
        super().__init__()
        self.meter = meter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            self.meter.record(func._opname, args)
        elif func.namespace == "_c10d_functional":
            self.meter.record_functional(func._opname, args)
        return func(*args, **(kwargs or {}))


def os_write_bytes() -> int:
    """Bytes this process has written (``wchar`` of /proc/self/io): tracks gloo's socket sends (FIELD_NOTES)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1
