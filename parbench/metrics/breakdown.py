"""Where a step's time goes: label every instant of a rank's traced step, sum the labels.

Torch-free: it works on the plain event lists the ranks return (``parbench.metrics.tracing``
measures them) and runs in the launcher, the only place that sees every rank.

Inputs per rank and traced step (seconds on the host's monotonic clock, ``time.perf_counter``):

- ``compute``: intervals in which the rank's main thread runs an operator (torch.profiler's CPU
  ops, without the c10d and functional-collective ops, which only enqueue or wait);
- ``optimizer``: intervals inside ``Optimizer.step`` / ``Optimizer.zero_grad`` (the profiler
  annotations torch's optimizers emit);
- ``comm``: every collective and send/recv the rank issued, with its category, its issue time
  and its completion time (from the comm meter; torch.profiler records no gloo events).

Every instant of the step window gets exactly one label, in this order of precedence, so the
parts sum to the step time by construction:

1. an operator runs: ``optimizer`` inside an optimizer region, else ``compute``;
2. no operator runs and communication is in flight: the rank is waiting on the op that completes
   first. If that op is a send or receive whose matching receive or send the peer has not issued
   yet, the rank is idle waiting for a peer: ``bubble`` (a pipeline stage waiting for an
   activation or a gradient; a parameter server waiting for its workers' pushes). Otherwise
   ``comm`` of the op's category (exposed communication: the transfer itself, or a collective
   waiting for its slowest member: inside a gloo collective the two cannot be told apart);
3. inside an optimizer region: ``optimizer``;
4. anything else (Python between operators, data loading glue): ``other``.

After the rank's own step returns it waits in the barrier that ends every step until its slowest
peer is done: ``bubble`` too (in a pipeline, the last stage's idle tail; elsewhere, rank skew). The
step ends when the last rank's step returns, not when the barrier lets the ranks go: the barrier's
own latency (the last rank's wait in it: 0.3 to 6.5 ms a step in a sweep on 2 cores)
belongs to no training step, since the timed loop runs its steps back to back with no barrier.

The split between bubble and communication of a send or receive uses the peer's issue time of
the matching op (the k-th send from A to B matches the k-th receive on B from A within the step):
ranks on one host share the monotonic clock; ranks on different hosts are aligned on the barrier
that starts every traced step.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from parbench.metrics.categories import CATEGORIES

COMPUTE, OPTIMIZER, BUBBLE, OTHER = "compute", "optimizer", "bubble", "other"
STEP_END = "step end"
"""The op name of the wait for the slowest peer at the end of a step."""
COMM_PREFIX = "comm_"
"""A communication label is ``comm_<category>``."""

TERMS: tuple[str, ...] = ("time_compute_s", *(f"time_comm_exposed_{c}_s" for c in CATEGORIES),
                          "time_bubble_s", "time_optimizer_s", "time_other_s")
"""Record columns of the breakdown, seconds per step; they sum to ``traced_step_time_s``."""

TERM_OF = {COMPUTE: "time_compute_s", OPTIMIZER: "time_optimizer_s", BUBBLE: "time_bubble_s",
           OTHER: "time_other_s", **{COMM_PREFIX + c: f"time_comm_exposed_{c}_s" for c in CATEGORIES}}
"""Span label -> its record column."""


def short_name(term: str) -> str:
    """A term's column for tables: ``time_comm_exposed_parameter_s`` -> ``comm.parameter``."""
    return term.removeprefix("time_").removesuffix("_s").replace("comm_exposed_", "comm.")


@dataclass(frozen=True, kw_only=True)
class Span:
    """One labelled stretch of a rank's main thread."""

    label: str
    """compute | optimizer | bubble | other | comm_<category>"""
    start_s: float
    end_s: float
    op: str | None = None
    """The communication op a comm or bubble span waits on (e.g. ``recv``), else None."""

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(f"span {self.label}: end_s={self.end_s} < start_s={self.start_s}")
        if self.label not in TERM_OF:
            raise ValueError(f"span label {self.label!r}: expected one of {', '.join(TERM_OF)}")

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


# --- interval helpers ------------------------------------------------------------------------


def merge(intervals: Iterable[Sequence[float]]) -> list[tuple[float, float]]:
    """Union of [start, end] intervals, sorted and disjoint."""
    out: list[list[float]] = []
    for a, b in sorted((float(a), float(b)) for a, b in intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def subtract(merged: list[tuple[float, float]], cut: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The parts of disjoint sorted intervals ``merged`` that no interval of disjoint sorted ``cut`` covers."""
    out = []
    for a, b in merged:
        for c, d in cut:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


def _covers(merged: list[tuple[float, float]], starts: list[float], t: float) -> bool:
    i = bisect.bisect_right(starts, t) - 1
    return i >= 0 and merged[i][0] <= t < merged[i][1]


# --- matching sends and receives --------------------------------------------------------------


def mark_peer_ready(ranks: list[dict[str, Any]]) -> None:
    """Give every send and receive the issue time of its peer's matching op (``ready_s``), in place.

    ``ranks[r]["steps"][k]["comm"]`` holds rank r's ops of traced step k; sends and receives
    carry the global ``peer`` rank. Within a step, the n-th send from A to B matches the n-th
    receive on B from A (point-to-point messages between two ranks arrive in order). A send needs
    its peer too: gloo completes a send only once the receiver has posted the receive."""
    for k in range(len(ranks[0]["steps"])):
        issued: dict[tuple[str, int, int], list[float]] = {}  # (op, this rank, peer) -> issue times
        for r in ranks:
            for op in _p2p(r["steps"][k]["comm"]):
                issued.setdefault((op["op"], r["rank"], op["peer"]), []).append(op["issue_s"] + r["clock_offset_s"])
        for r in ranks:
            seen: dict[tuple[str, int], int] = {}
            for op in _p2p(r["steps"][k]["comm"]):
                n = seen.get((op["op"], op["peer"]), 0)
                seen[(op["op"], op["peer"])] = n + 1
                other = issued.get((_MATCH[op["op"]], op["peer"], r["rank"]), [])
                if n < len(other):
                    op["ready_s"] = other[n] - r["clock_offset_s"]


_MATCH = {"send": "recv", "recv": "send"}


def _p2p(ops: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (op for op in ops if op["op"] in _MATCH and op.get("peer") is not None)


def align_clocks(ranks: list[dict[str, Any]]) -> None:
    """Ranks on other hosts than rank 0 get ``clock_offset_s`` so that their first traced step
    starts when rank 0's does (every traced step starts right after a barrier)."""
    host0, start0 = ranks[0].get("host"), ranks[0]["steps"][0]["start_s"]
    for r in ranks:
        same = r.get("host") == host0
        r["clock_offset_s"] = 0.0 if same else start0 - r["steps"][0]["start_s"]


# --- labelling ---------------------------------------------------------------------------------


def label_step(*, start_s: float, end_s: float, compute: Sequence[Sequence[float]],
               optimizer: Sequence[Sequence[float]], comm: Sequence[dict[str, Any]],
               returned_s: float | None = None) -> list[Span]:
    """Partition [start_s, end_s] into labelled spans (precedence in the module docstring).

    ``returned_s``: when the rank's own step returned; from there to ``end_s`` the rank waits in
    the barrier that ends the step for its slowest peer: ``bubble`` (op ``step end``)."""
    if returned_s is not None and returned_s < end_s:
        head = label_step(start_s=start_s, end_s=returned_s, compute=compute, optimizer=optimizer, comm=comm)
        return head + [Span(label=BUBBLE, start_s=returned_s, end_s=end_s, op=STEP_END)]
    comp, opt = merge(compute), merge(optimizer)
    comp_starts, opt_starts = [a for a, _ in comp], [a for a, _ in opt]
    ops = [op for op in comm if op["issue_s"] < end_s and _done(op, end_s) > start_s]
    cuts = {start_s, end_s}
    for a, b in (*comp, *opt):
        cuts.update((a, b))
    for op in ops:
        cuts.update(t for t in (op["issue_s"], _done(op, end_s), op.get("ready_s")) if t is not None)
    points = sorted(t for t in cuts if start_s <= t <= end_s)
    spans: list[Span] = []
    for a, b in zip(points, points[1:]):
        if b <= a:
            continue
        label, name = _label_at((a + b) / 2, comp, comp_starts, opt, opt_starts, ops, end_s)
        if spans and spans[-1].label == label and spans[-1].op == name:
            spans[-1] = Span(label=label, start_s=spans[-1].start_s, end_s=b, op=name)
        else:
            spans.append(Span(label=label, start_s=a, end_s=b, op=name))
    return spans


def _done(op: dict[str, Any], end_s: float) -> float:
    """Completion time; an op never seen to complete is in flight until the step ends."""
    done = op.get("done_s")
    return end_s if done is None else done


def _label_at(t: float, comp, comp_starts, opt, opt_starts, ops, end_s: float) -> tuple[str, str | None]:
    in_opt = _covers(opt, opt_starts, t)
    if _covers(comp, comp_starts, t):
        return (OPTIMIZER if in_opt else COMPUTE), None
    active = [op for op in ops if op["issue_s"] <= t < _done(op, end_s)]
    if active:
        op = min(active, key=lambda o: (_done(o, end_s), o["issue_s"]))  # what the thread waits on
        ready = op.get("ready_s")
        if ready is not None and t < ready:
            return BUBBLE, op["op"]
        return COMM_PREFIX + op["category"], op["op"]
    return (OPTIMIZER if in_opt else OTHER), None


def totals(spans: Iterable[Span]) -> dict[str, float]:
    """Seconds per term (every term present, zeros included)."""
    out = dict.fromkeys(TERMS, 0.0)
    for s in spans:
        out[TERM_OF[s.label]] += s.duration_s
    return out


# --- a run ---------------------------------------------------------------------------------------


def end_with_the_last_return(ranks: list[dict[str, Any]]) -> None:
    """Cut every traced step at the moment the last rank's step returned (``end_s``, in place): the end
    barrier's own latency is no part of a step. On other hosts the cut is read through ``clock_offset_s``
    and kept between the rank's own return and its barrier exit."""
    for k in range(len(ranks[0]["steps"])):
        steps = [r["steps"][k] for r in ranks]
        if any(s.get("returned_s") is None for s in steps):
            continue
        last = max(s["returned_s"] + r["clock_offset_s"] for r, s in zip(ranks, steps))
        for r, s in zip(ranks, steps):
            s["end_s"] = min(s["end_s"], max(s["returned_s"], last - r["clock_offset_s"]))


def analyse(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Label every rank's traced steps. Returns ``{"spans": [[[Span...] per step] per rank],
    "step": k}`` where k is the traced step whose duration (on rank 0) is the median."""
    ranks = [dict(r, steps=[dict(s, comm=[dict(op) for op in s["comm"]]) for s in r["steps"]]) for r in ranks]
    align_clocks(ranks)
    end_with_the_last_return(ranks)
    mark_peer_ready(ranks)
    spans = [[label_step(start_s=s["start_s"], end_s=s["end_s"], returned_s=s.get("returned_s"),
                         compute=s["compute"], optimizer=s["optimizer"], comm=s["comm"]) for s in r["steps"]]
             for r in ranks]
    durations = [s["end_s"] - s["start_s"] for s in ranks[0]["steps"]]
    median = statistics.median_low(durations)
    return {"ranks": ranks, "spans": spans, "step": durations.index(median)}


def record_columns(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The breakdown columns of a record: the busiest rank's terms, every rank's in a list.

    Busiest rank: the most compute + optimizer time in the chosen traced step (the rank with the
    most work; ties go to the lowest rank). ``bubble_fraction``: bubble / step time, mean over ranks
    (the pipeline's idle share of all ranks' time, the quantity (p-1)/(m+p-1) predicts)."""
    result = analyse(ranks)
    k = result["step"]
    per_rank = []
    for r, steps in zip(result["ranks"], result["spans"]):
        step = r["steps"][k]
        entry = {"rank": r["rank"], **totals(steps[k]), "traced_step_time_s": step["end_s"] - step["start_s"]}
        per_rank.append(entry)
    busiest = max(per_rank, key=lambda e: (e["time_compute_s"] + e["time_optimizer_s"], -e["rank"]))
    fractions = [e["time_bubble_s"] / e["traced_step_time_s"] for e in per_rank if e["traced_step_time_s"] > 0]
    return {**{t: busiest[t] for t in TERMS},
            "time_comm_exposed_s": sum(busiest[f"time_comm_exposed_{c}_s"] for c in CATEGORIES),
            "traced_step_time_s": busiest["traced_step_time_s"],
            "traced_steps": len(ranks[0]["steps"]),
            "breakdown_rank": busiest["rank"],
            "bubble_fraction": sum(fractions) / len(fractions) if fractions else None,
            "breakdown_per_rank": per_rank}


def empty_columns() -> dict[str, Any]:
    """Breakdown columns of a run without traced steps (all null)."""
    return {**dict.fromkeys(TERMS), "time_comm_exposed_s": None, "traced_step_time_s": None, "traced_steps": 0,
            "breakdown_rank": None, "bubble_fraction": None, "breakdown_per_rank": None}
