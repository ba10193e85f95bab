"""Traced steps: what a rank's main thread does in a step, for the step-time breakdown and the trace.

A few dedicated steps after the timed ones run under torch.profiler (CPU operators and the
optimizers' ``Optimizer.step#`` / ``Optimizer.zero_grad#`` annotations) and the comm meter's
timing mode (issue and completion of every collective and send/recv: torch.profiler records no
gloo communication). The timed steps never carry either.

On a GPU the host launches kernels and runs ahead, so what its thread does says little about where
the time goes. There the profiler records CUDA activity too, and the rank computes while the device
runs a kernel, a copy or a memset (NCCL's kernels are communication, not compute); a kernel belongs to
the optimizer when the operator that launched it ran inside an optimizer annotation (the profiler links
each kernel to its launching operator by correlation id). The host's optimizer annotations still count
as optimizer where the device is idle under them (a launch-bound optimizer). Exposed communication still
comes from the comm meter's issue and completion times on the host; with NCCL that has not been checked
on more than one GPU (a one-GPU run has none).

The ranks return plain lists; ``parbench.metrics.breakdown`` labels them in the launcher.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable, NamedTuple

import torch
import torch.distributed as dist
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from parbench.metrics.breakdown import merge, subtract

TRACED_STEPS = 3
"""Traced steps per run; the record keeps the one of median duration, the trace file all of them."""

MARK = "parbench.traced_step"
_COLLECTIVE = ("c10d::", "_c10d_functional::")
"""Profiler events of collectives: they enqueue or wait, and their intervals are cut out of any operator's
that holds them (``_step_events``)."""
NOT_COMPUTE = (*_COLLECTIVE, "autograd::", "ProfilerStep", "[")
"""Profiler events that are not the rank computing: collectives, the autograd engine's wrappers (they
contain waits of DDP's reducer; their operators are counted one by one), and kineto's bracketed
pseudo-events (``[memory]``) have no duration of their own."""
_OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")
_FUNCTIONAL_WAIT = "_c10d_functional::wait_tensor"


def traced_steps(*, step: Callable[[int], Any], meter, device: torch.device, start: int, n: int,
                 world_size: int, prepare: Callable[[int], Any] | None = None) -> dict[str, Any]:
    """Run steps start..start+n-1 traced; returns this rank's windows, operators and comm events.
    ``prepare(i)``: makes step i's input before its start barrier, off the step, as the timed loop does."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # read when the profiler first starts: silences its stage lines
    windows = []
    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if gpu else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        for i in range(start, start + n):
            if prepare is not None:
                prepare(i)  # off the step's window, as in the timed loop
            windows.append(_one(step, i, meter, device, world_size))
    # the raw kineto events: building torch's FunctionEvent tree instead costs ~50x more
    # (1.3 s of CPU for three transformer steps, measured)
    raw = prof.profiler.kineto_results.events()
    base = min(e.start_ns() for e in raw)  # nanoseconds since 1970: subtract before going to float seconds
    events = [Event(e.name(), (e.start_ns() - base) / 1e9, (e.end_ns() - base) / 1e9, e.start_thread_id(),
                    e.is_user_annotation(), _activity(e), e.correlation_id(), e.linked_correlation_id())
              for e in raw]
    shift, slack = _clock_shift(events, windows)
    steps = [(_device_step_events if gpu else _step_events)(events, w, shift, slack) for w in windows]
    return {"host": socket.gethostname(), "steps": steps}


def _activity(e) -> str:
    """``device`` for work that ran on the GPU (kernels, copies, memsets: kineto's CUDA events that are not
    annotations), ``host`` for everything else (``_KinetoEvent.activity_type`` is not in every torch)."""
    return "device" if e.device_type() == DeviceType.CUDA and not e.is_user_annotation() else "host"


class Event(NamedTuple):
    """One profiler event, seconds from the first event."""

    name: str
    start: float
    end: float
    thread: int
    annotation: bool
    activity: str = "host"
    """``device`` (a kernel, copy or memset on the GPU) or ``host`` (``_activity``)."""
    correlation: int = 0
    linked: int = 0
    """A device event's launching operator (that operator's ``correlation``)."""


DEVICE_WORK = ("device",)
NCCL_PREFIX = "nccl"
"""NCCL's kernels (``ncclDevKernel_AllReduce_...``): communication, which the comm meter times."""


def _one(step: Callable[[int], Any], i: int, meter, device: torch.device, world_size: int) -> dict[str, Any]:
    dist.barrier()  # every rank starts the traced step together, as in the timed loop
    with meter.timing() as timer:
        t0 = time.perf_counter()
        with record_function(MARK):
            marked = time.perf_counter()  # the mark began between t0 and here, and ends between `last` and `returned`:
            step(i)                       # two brackets that map the profiler's clock onto this one (_clock_shift)
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # kernels are asynchronous: wait for them
            last = time.perf_counter()
        returned = time.perf_counter()
    end = returned
    if world_size > 1:
        dist.barrier()  # the step ends with the slowest rank, as in the timed loop
        end = time.perf_counter()
    return {"start_s": t0, "returned_s": returned, "end_s": end, "comm": timer.events, "waits": timer.waits,
            "mark_brackets": ((t0, marked), (last, returned))}


def _clock_shift(events: list[Event], windows: list[dict[str, Any]]) -> tuple[float, float]:
    """(seconds to add to a profiler time to get ``time.perf_counter``, how far off that can be). Each step's mark
    starts between two readings of ``time.perf_counter`` and ends between two more (``_one``), a few microseconds
    apart, unless the rank was descheduled between them (milliseconds on a loaded 2-core machine, enough to map a
    wait before its own issue): the narrowest of the steps' brackets gives the shift, its midpoint, and the slack,
    half its width."""
    marks = sorted((e for e in events if e.name == MARK), key=lambda e: e.start)
    brackets = [(lo - at, hi - at) for mark, w in zip(marks, windows)
                for (lo, hi), at in zip(w["mark_brackets"], (mark.start, mark.end))]
    lo, hi = min(brackets, key=lambda b: b[1] - b[0])
    return (lo + hi) / 2, (hi - lo) / 2


def _step_events(events: list[Event], window: dict[str, Any], shift: float, slack: float = 0.0) -> dict[str, Any]:
    """Merged compute and optimizer intervals of the main thread (the one that ran the mark) in the window.

    An operator's interval holds whatever runs inside it, waits included: DTensor's functional all-reduce
    is waited on by the next operator that reads its result (``wait_tensor`` inside that ``aten::relu``);
    FSDP2 issues its reduce-scatter, which gloo runs for 0.4-1.5 ms of a 2-rank mlp step before it
    returns, inside the autograd node that ends a unit's backward. So compute is
    the operators' intervals less every collective's own (issue and ``wait_tensor``) and every
    ``Work.wait`` call (``window["waits"]``): there the rank waits, not computes."""
    main = next(e.thread for e in events if e.name == MARK)
    lo, hi = window["start_s"], window["end_s"]
    compute, optimizer, waiting, functional_waits = [], [], [tuple(w) for w in window.get("waits", ())], []
    for e in events:
        a, b = e.start + shift, e.end + shift
        if e.thread != main or b < lo or a > hi or e.activity in DEVICE_WORK:
            continue
        if e.name.startswith(_OPTIMIZER):
            optimizer.append((max(a, lo), min(b, hi)))
        elif e.name.startswith(_COLLECTIVE):
            waiting.append((a, b))
            if e.name == _FUNCTIONAL_WAIT:
                functional_waits.append((a, b))
        elif not e.annotation and not e.name.startswith(NOT_COMPUTE):
            compute.append((max(a, lo), min(b, hi)))
    rest = {k: v for k, v in window.items() if k not in ("waits", "mark_brackets")}
    return {**rest, "comm": complete_functional(window["comm"], merge(functional_waits), slack=slack),
            "compute": [list(x) for x in subtract(merge(compute), merge(waiting))],
            "optimizer": [list(x) for x in merge(optimizer)]}


def complete_functional(comm: list[dict[str, Any]], waits: list[tuple[float, float]],
                        slack: float = 0.0) -> list[dict[str, Any]]:
    """``comm`` with each functional collective complete by the end of the ``wait_tensor`` that torch.profiler
    saw wait on it (``waits``: the main thread's, nested ones merged), matched in issue order: the n-th
    functional collective to the first unmatched wait that ends after its issue. Under autograd DTensor's
    all-reduce is waited where the comm meter's dispatch mode does not see it (``_wrap_tensor_autograd``'s
    result), so the mode alone left it in flight to the step's end. The earliest completion seen stands.
    A wait's end, not its start: the profiler's clock is mapped onto ``time.perf_counter`` to within a few
    microseconds (``_clock_shift``; ``slack`` says how far), and a wait that begins right after its issue can map
    to before it, while the thread, waiting, cannot issue: a wait ending after an issue (less the slack) began
    after it."""
    out, free = [], list(waits)
    for op in sorted(comm, key=lambda o: o["issue_s"]):
        if op.get("functional"):
            match = next((w for w in free if w[1] + slack >= op["issue_s"]), None)
            if match is not None:
                free.remove(match)
                done = op["done_s"]
                op = {**op, "done_s": match[1] if done is None else min(done, match[1])}
        out.append(op)
    return out


def _device_step_events(events: list[Event], window: dict[str, Any], shift: float,
                        slack: float = 0.0) -> dict[str, Any]:
    """A GPU rank's step: compute is the device's kernels, copies and memsets (NCCL's kernels aside);
    optimizer the device work launched inside an optimizer annotation, plus the annotations' stretches
    where the device is idle (see the module docstring)."""
    host = _step_events(events, window, shift, slack)
    main = next(e.thread for e in events if e.name == MARK)
    in_optimizer = host["optimizer"]
    launched_in_optimizer = {e.correlation for e in events
                             if e.thread == main and e.activity not in DEVICE_WORK and e.correlation
                             and _inside(e.start + shift, in_optimizer)}
    lo, hi = window["start_s"], window["end_s"]
    compute, optimizer = [], []
    for e in events:
        a, b = e.start + shift, e.end + shift
        if e.activity not in DEVICE_WORK or e.name.startswith(NCCL_PREFIX) or b < lo or a > hi:
            continue
        (optimizer if e.linked in launched_in_optimizer else compute).append((max(a, lo), min(b, hi)))
    compute = merge(compute)
    idle_optimizer = subtract(merge(in_optimizer), compute)  # the host in the optimizer, the device not computing
    return {**host, "compute": [list(x) for x in merge(compute + optimizer)],
            "optimizer": [list(x) for x in merge(optimizer + idle_optimizer)],
            "device_optimizer": [list(x) for x in merge(optimizer)]}


def _inside(t: float, intervals: list) -> bool:
    return any(a <= t <= b for a, b in intervals)
