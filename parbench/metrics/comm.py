"""Communication accounting: every c10d op a rank issues, its bytes and its category.

A ``TorchDispatchMode`` sees the ``c10d::*`` ops that DDP's reducer, FSDP, ZeRO and pipelining
dispatch, and the ``_c10d_functional::*`` ops of DTensor (tensor parallel); torch.profiler records
no bytes under gloo (its collectives show no payload sizes in torch 2.13's profiler). The bytes a rank *sends* follow the nccl-tests conventions of
``parbench.metrics.conventions``. ``wire`` is what the backend really sends where it differs (gloo
implements reduce-scatter as an all-reduce: 2x; it broadcasts down a binomial tree: inner ranks forward).

Categories (the seed FAQ's three volumes): ``data`` (samples and labels), ``parameter``
(gradients and parameters), ``intermediate`` (activations and their gradients). A collective's
category comes from an explicit ``meter.category(...)`` context, else from its process group
(a strategy maps its dp group to parameter, its tp/pp groups to intermediate), else the default.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from parbench.metrics.categories import Category
from parbench.metrics.conventions import all_to_all_sent_bytes, sent_bytes


# c10d op name -> collective kind; the op schemas are in torch/csrc/distributed/c10d/Ops.cpp
_OPS = {op: kind for kind, ops in {
    "all_reduce": ("allreduce_", "allreduce_coalesced_"),
    "all_gather": ("allgather_", "_allgather_base_", "allgather_into_tensor_coalesced_"),
    "reduce_scatter": ("reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_"),
    "broadcast": ("broadcast_",), "scatter": ("scatter_",), "gather": ("gather_",), "reduce": ("reduce_",),
    "all_to_all": ("alltoall_", "alltoall_base_"), "send": ("send",), "recv": ("recv_", "recv_any_source_"),
    "barrier": ("barrier",),
}.items() for op in ops}


# DTensor's functional collectives (torch/csrc/distributed/c10d/Functional.cpp): S is the input,
# except for all-gather, whose full buffer is group_size x the input shard
_FUNCTIONAL = {op: kind for kind, ops in {
    "all_reduce": ("all_reduce", "all_reduce_", "all_reduce_coalesced"),
    "all_gather": ("all_gather_into_tensor", "all_gather_into_tensor_out", "all_gather_into_tensor_coalesced"),
    "reduce_scatter": ("reduce_scatter_tensor", "reduce_scatter_tensor_coalesced"),
    "all_to_all": ("all_to_all_single",), "broadcast": ("broadcast", "broadcast_"),
}.items() for op in ops}


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

    @contextlib.contextmanager
    def timing(self) -> Iterator[OpTimer]:
        """Time every c10d op issued while active (traced steps; bytes are not counted).

        Yields the ``OpTimer`` whose ``events`` list the ops land in: ``{op, category, bytes, peer, issue_s,
        done_s}`` (``time.perf_counter`` seconds), and whose ``waits`` list every ``Work.wait`` call's
        (start, end). Completion comes from the op's future where gloo has one (collectives); its send/recv
        works have none, so for them it is the return of ``Work.wait``, wrapped for the duration of this
        context. torch.profiler sees neither."""
        timer = OpTimer(self)
        with _Interceptor(self, timer), timer.watching_waits():
            yield timer

    def reset(self) -> None:
        self.ops.clear()

    def record(self, op: str, args) -> None:
        sizes = self._c10d_sizes(op, args)
        if sizes is not None:
            kind, group, s, root, position, sent = sizes
            self._add(kind, group, s, root, position, sent=sent)

    def _c10d_sizes(self, op: str, args) -> tuple[str, dist.ProcessGroup | None, int, bool, int | None, int | None] | None:
        """(kind, group, S, is_root, tree position, sent or None) of a ``c10d`` op, None if it moves no data."""
        kind = _OPS.get(op)
        if kind is None:
            return None
        group = _group(args)
        sent = None
        if kind == "all_to_all":
            n, me = _place(group)
            sent = all_to_all_sent_bytes(all_to_all_shares(op, args, n), me)
        return kind, group, payload_bytes(kind, args), *_rooted(kind, args, group), sent

    def classify(self, op: str, args) -> tuple[str, Category, int, int] | None:
        """(kind, category, sent bytes, wire bytes) of a ``c10d`` op, None if it moves no data."""
        sizes = self._c10d_sizes(op, args)
        if sizes is None:
            return None
        kind, group, s, root, position, sent = sizes
        return (kind, *self.sizes(kind, group, s, root, position, sent=sent))

    def record_functional(self, op: str, args) -> None:
        """A ``_c10d_functional`` op (DTensor, tensor parallel): ``(input, ..., group_name)``."""
        sizes = self.functional_sizes(op, args)
        if sizes is not None:
            self._add(*sizes)

    def functional_sizes(self, op: str, args) -> tuple[str, dist.ProcessGroup, int, bool, int | None] | None:
        """(kind, group, S, is_root, tree position) of a ``_c10d_functional`` op, None if it moves no data."""
        kind = _FUNCTIONAL.get(op)
        if kind is None:
            return None
        group = dist.distributed_c10d._resolve_process_group(args[-1])
        s = _nbytes(_tensors(args[0])) * (group.size() if kind == "all_gather" else 1)
        root = kind == "broadcast" and dist.get_rank(group) == args[1]
        position = (dist.get_rank(group) - args[1]) % group.size() if kind == "broadcast" else None
        return kind, group, s, root, position

    def category_of(self, group: dist.ProcessGroup | None) -> Category:
        """An explicit ``category(...)`` context wins, else the group's assignment, else the default."""
        if self._override:
            return self._override[-1]
        return self.group_categories.get(group.group_name if group is not None else "", self.default)

    def sizes(self, kind: str, group: dist.ProcessGroup | None, s: int, root: bool, position: int | None,
              *, sent: int | None = None) -> tuple[Category, int, int]:
        """(category, sent bytes, wire bytes) of one op."""
        n = _place(group)[0]
        sent = sent_bytes(kind, s, n, is_root=root) if sent is None else sent
        wire = sent
        if self.backend == "gloo" and kind == "reduce_scatter":
            wire = 2 * sent  # gloo reduce-scatters by all-reducing
        elif self.backend == "gloo" and kind == "broadcast" and position is not None:
            wire = s * binomial_children(position, n)  # gloo broadcasts down a binomial tree
        return self.category_of(group), sent, wire

    def _add(self, kind: str, group: dist.ProcessGroup | None, s: int, root: bool,
             position: int | None = None, *, sent: int | None = None) -> None:
        cat, sent, wire = self.sizes(kind, group, s, root, position, sent=sent)
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
    OS write counter under gloo (gloo's broadcast is a binomial tree: measured with /proc/self/io)."""
    children, step = 0, 1
    while step < n:
        if step > v and v + step < n:
            children += 1
        step *= 2
    return children


def _place(group: dist.ProcessGroup | None) -> tuple[int, int]:
    """(size of ``group``, this rank's index in it); None is the default group."""
    return (group.size(), dist.get_rank(group)) if group is not None else (dist.get_world_size(), dist.get_rank())


def _rooted(kind: str, args, group) -> tuple[bool, int | None]:
    """(whether this rank is the root of a rooted collective: broadcast/scatter/gather/reduce, this
    rank's distance from the root (mod n) in a broadcast, else None)."""
    ints = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if kind not in ("broadcast", "scatter", "gather", "reduce") or not ints:
        return False, None
    n, me = _place(group)
    return me == ints[0], ((me - ints[0]) % n if kind == "broadcast" else None)


class _Interceptor(TorchDispatchMode):
    """Sees every op; counts (``timer`` None) or times (traced steps) the collective ones."""

    def __init__(self, meter: CommMeter, timer: "OpTimer | None" = None) -> None:
        super().__init__()
        self.meter = meter
        self.timer = timer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.timer is not None and func.namespace in ("c10d", "_c10d_functional"):
            issued = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            self.timer.issued(func.namespace, func._opname, args, out, issued)
            return out
        if func.namespace == "c10d":
            self.meter.record(func._opname, args)
        elif func.namespace == "_c10d_functional":
            self.meter.record_functional(func._opname, args)
        return func(*args, **(kwargs or {}))


class OpTimer:
    """Issue and completion time of every collective a rank issues (the comm meter's timing mode).

    Completion: the op's future fires (gloo collectives), or ``Work.wait`` returns (gloo send/recv
    works have no future), or ``wait_tensor`` returns (DTensor's functional collectives).

    ``waits``: the (start, end) of every ``Work.wait`` call on the thread that times (the rank's main one).
    A wait can run inside an operator that torch.profiler records (an autograd node whose backward waits
    on its own collective), which would otherwise book the rank's waiting as compute
    (``parbench.metrics.tracing``)."""

    def __init__(self, meter: CommMeter) -> None:
        self.meter = meter
        self.events: list[dict] = []
        self.waits: list[tuple[float, float]] = []
        self._works: dict[int, tuple[object, dict]] = {}  # id(work) -> (work kept alive, event)
        self._functional: dict[int, dict] = {}  # output storage pointer -> event

    def issued(self, namespace: str, op: str, args, out, t: float) -> None:
        if namespace == "_c10d_functional":
            self._functional_op(op, args, out, t)
            return
        classified = self.meter.classify(op, args)
        if classified is None:
            return
        kind, category, sent, _ = classified
        event = self._event(kind, category, sent, _peer(kind, args), t)
        for work in _works(out):
            self._watch(work, event)

    def _event(self, kind: str, category: Category, sent: int, peer: int | None, t: float) -> dict:
        event = {"op": kind, "category": category.value, "bytes": sent, "peer": peer, "issue_s": t, "done_s": None}
        self.events.append(event)
        return event

    def _watch(self, work, event: dict) -> None:
        self._works[id(work)] = (work, event)  # keeping the wrapper alive keeps its id unique
        try:
            work.get_future().add_done_callback(lambda _: _complete(event))
        except RuntimeError:
            pass  # gloo send/recv: "Work::getFuture not implemented"; the wrapped wait completes it

    def _functional_op(self, op: str, args, out, t: float) -> None:
        if op == "wait_tensor":
            event = self._functional.pop(_storage(args[0]), None)
            if event is not None:
                _complete(event)
            return
        sizes = self.meter.functional_sizes(op, args)
        if sizes is None:
            return
        kind, group, s, root, position = sizes
        category, sent, _ = self.meter.sizes(kind, group, s, root, position)
        event = self._event(kind, category, sent, None, t)
        event["functional"] = True  # its wait may run where this mode cannot see it (``parbench.metrics.tracing``)
        for tensor in _tensors(out):
            self._functional[_storage(tensor)] = event

    @contextlib.contextmanager
    def watching_waits(self) -> Iterator[None]:
        """Wrap ``Work.wait`` while active: its return completes the op, its span joins ``waits`` (restored on exit)."""
        original = dist.distributed_c10d.Work.wait
        works, waits, main = self._works, self.waits, threading.get_ident()

        def wait(work, *args, **kwargs):
            start = time.perf_counter()
            try:
                return original(work, *args, **kwargs)
            finally:
                if threading.get_ident() == main:
                    waits.append((start, time.perf_counter()))
                entry = works.get(id(work))
                if entry is not None and entry[0] is work:
                    _complete(entry[1])

        dist.distributed_c10d.Work.wait = wait
        try:
            yield
        finally:
            dist.distributed_c10d.Work.wait = original


def _complete(event: dict) -> None:
    """The earliest completion seen wins (a future may fire after the wait it released returned)."""
    now = time.perf_counter()
    if event["done_s"] is None or now < event["done_s"]:
        event["done_s"] = now


def _works(out) -> list:
    boxed = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(o, torch.ScriptObject)]
    works = []
    for obj in boxed:
        try:
            works.append(dist.distributed_c10d.Work.unbox(obj))
        except RuntimeError:
            continue
    return works


def _peer(kind: str, args) -> int | None:
    """Global rank of a send's destination / a receive's source: ``send(tensors, group, dst, tag)``."""
    if kind not in ("send", "recv") or len(args) < 3 or not isinstance(args[2], int):
        return None
    group = _group(args)
    if group is None:
        return args[2]
    return dist.get_global_rank(group, args[2])


def _storage(tensor) -> int:
    return tensor.untyped_storage().data_ptr() if isinstance(tensor, torch.Tensor) else id(tensor)


def os_write_bytes() -> int:
    """Bytes this process has written (``wchar`` of /proc/self/io): tracks gloo's socket sends (within 1% of the counted bytes, measured)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1
