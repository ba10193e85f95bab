"""A run's traced steps as a Chrome trace (``<results>/traces/<run_id>.json``), and its text summary.

Chrome's trace event format (the JSON object form: ``{"traceEvents": [...]}``; complete events
``ph: "X"`` with ``ts`` and ``dur`` in microseconds, metadata events ``ph: "M"`` naming processes
and threads) opens in Perfetto (ui.perfetto.dev) and chrome://tracing. One process per rank;
its thread 0 is the labelled main thread (compute, comm by op and category, bubble, optimizer,
other: the spans the breakdown sums), threads 1.. lay out the collectives in flight from issue to
completion (one lane per overlapping op). Torch-free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from parbench.metrics import breakdown
from parbench.results import write_json_atomic

TRACES_DIR = "traces"


def chrome_trace(ranks: list[dict[str, Any]], *, run_id: str, roles: list[str] | None = None,
                 title: str = "") -> dict[str, Any]:
    """The trace of every traced step of every rank (``ranks``: the ranks' ``trace`` dicts)."""
    result = breakdown.analyse(ranks)
    origin = min(s["start_s"] + r["clock_offset_s"] for r in result["ranks"] for s in r["steps"])
    events: list[dict[str, Any]] = []
    for r, steps in zip(result["ranks"], result["spans"]):
        rank, offset = r["rank"], r["clock_offset_s"]
        role = roles[rank] if roles else ""
        events += _names(rank, f"rank {rank}" + (f" ({role})" if role else ""))
        us = lambda t: round((t + offset - origin) * 1e6, 1)  # noqa: E731 - seconds -> trace microseconds (0.1 us)
        for k, (step, spans) in enumerate(zip(r["steps"], steps)):
            events.append(_x(f"step {k}", "step", us(step["start_s"]), us(step["end_s"]), rank, tid=0,
                             args={"traced_step": k, "chosen": k == result["step"]}))
            events += [_x(_span_name(s), s.label, us(s.start_s), us(s.end_s), rank, tid=0) for s in spans]
            events += _in_flight(step, rank, us)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": run_id, "title": title, "chosen_traced_step": result["step"],
                          "clock": "time.perf_counter (host monotonic); ranks on other hosts aligned on the step barrier"}}


def _names(rank: int, name: str) -> list[dict[str, Any]]:
    meta = {"ph": "M", "ts": 0, "pid": rank}
    return [{**meta, "tid": 0, "name": "process_name", "args": {"name": name}},
            {**meta, "tid": 0, "name": "process_sort_index", "args": {"sort_index": rank}},
            {**meta, "tid": 0, "name": "thread_name", "args": {"name": "main thread"}}]


def _x(name: str, cat: str, ts: float, end: float, pid: int, *, tid: int, args: dict | None = None) -> dict[str, Any]:
    event = {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": round(max(end - ts, 0.0), 1), "pid": pid, "tid": tid}
    if args:
        event["args"] = args
    return event


def _span_name(span: breakdown.Span) -> str:
    if span.label.startswith(breakdown.COMM_PREFIX):
        return f"{span.op} ({span.label[len(breakdown.COMM_PREFIX):]})"
    return f"{span.label}: {span.op}" if span.op else span.label


def _in_flight(step: dict[str, Any], rank: int, us) -> list[dict[str, Any]]:
    """Every op from issue to completion, each lane holding ops that do not overlap."""
    lanes: list[float] = []
    out = []
    for op in sorted(step["comm"], key=lambda o: o["issue_s"]):
        done = op["done_s"] if op.get("done_s") is not None else step["end_s"]
        lane = next((i for i, free in enumerate(lanes) if free <= op["issue_s"]), len(lanes))
        lanes[lane:lane + 1] = [done]
        args = {"bytes": op["bytes"], "peer": op.get("peer")}
        if op.get("ready_s") is not None:
            args["peer_issued_at_us"] = us(op["ready_s"])
        out.append(_x(f"{op['op']} ({op['category']})", f"comm.{op['category']}", us(op["issue_s"]), us(done),
                      rank, tid=lane + 1, args=args))
    return out + [{"ph": "M", "ts": 0, "pid": rank, "tid": i + 1, "name": "thread_name",
                   "args": {"name": f"comm in flight {i + 1}"}} for i in range(len(lanes))]


# --- files ---------------------------------------------------------------------------------------


def trace_path(results_dir: str | Path, run_id: str) -> Path:
    return Path(results_dir) / TRACES_DIR / f"{run_id}.json"


def write_trace(results_dir: str | Path, record: dict[str, Any], ranks: list[dict[str, Any]]) -> str | None:
    """Write the run's trace; returns its path relative to ``results_dir`` (None: nothing traced)."""
    traces = [r.get("trace") for r in ranks]
    if not traces or any(t is None or not t.get("steps") for t in traces):
        return None
    title = f"{record.get('strategy')} world_size={record.get('world_size')} {record.get('workload')}"
    data = chrome_trace(traces, run_id=record["run_id"], roles=[r.get("role", "") for r in ranks], title=title)
    write_json_atomic(trace_path(results_dir, record["run_id"]), data)
    return f"{TRACES_DIR}/{record['run_id']}.json"


def find_trace(run_id: str, roots: Iterable[str | Path]) -> Path | None:
    """The trace file of ``run_id`` under any of ``roots`` (at any depth), or None."""
    for root in roots:
        root = Path(root)
        direct = trace_path(root, run_id)
        if direct.is_file():
            return direct
        for path in sorted(root.rglob(f"{TRACES_DIR}/{run_id}.json")) if root.is_dir() else []:
            return path
    return None


def _ms(seconds: float | None, width: int = 0, places: int = 3) -> str:
    """Seconds as milliseconds, ``-`` where a hand-edited or older record has no figure."""
    return f"{'-' if seconds is None or seconds != seconds else f'{seconds * 1e3:.{places}f}':>{width}s}"


def summary(record: dict[str, Any]) -> str:
    """The breakdown of one record as text: the busiest rank's terms, then every rank's."""
    if record.get("time_compute_s") is None:
        return f"run {record.get('run_id')}: no step-time breakdown in this record (traced steps were added later)"
    step = record.get("traced_step_time_s")
    lines = [f"run {record['run_id']}: {record.get('strategy')} world_size={record.get('world_size')} "
             f"{record.get('workload')}",
             f"traced step {_ms(step, places=2)} ms on rank {record.get('breakdown_rank')} (busiest); "
             f"timed median {_ms(record.get('step_time_s_median'), places=2)} ms"]
    for term in breakdown.TERMS:
        value = record.get(term)
        share = f"{100 * value / step:5.1f}%" if value is not None and step else "    -"
        lines.append(f"  {term:34s} {_ms(value, 9)} ms  {share}")
    if record.get("bubble_fraction") is not None:
        lines.append(f"  bubble fraction (mean over ranks)  {record['bubble_fraction']:.3f}")
    names = [breakdown.short_name(t) for t in breakdown.TERMS]
    widths = [max(9, len(n)) for n in names]
    lines.append("per rank (ms): rank " + " ".join(f"{n:>{w}s}" for n, w in zip(names, widths)))
    for entry in record.get("breakdown_per_rank") or []:
        lines.append(f"  {entry.get('rank', '-')!s:>17s} " + " ".join(_ms(entry.get(t), w)
                                                                 for t, w in zip(breakdown.TERMS, widths)))
    return "\n".join(lines)
