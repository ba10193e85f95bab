"""The step-time breakdown's labelling and the Chrome trace, on hand-made timelines (exact values)."""

from __future__ import annotations

import json
import re

import pytest

from parbench.metrics import breakdown
from parbench.metrics.breakdown import TERMS, label_step, merge, record_columns, totals
from parbench.trace import chrome_trace, summary, write_trace


def op(kind, category, issue, done, peer=None, nbytes=8):
    return {"op": kind, "category": category, "bytes": nbytes, "peer": peer, "issue_s": issue, "done_s": done}


def test_merge_unions_overlapping_intervals():
    assert merge([(5, 6), (0, 2), (1, 3), (3, 4)]) == [(0.0, 4.0), (5.0, 6.0)]


def test_every_instant_gets_one_label_and_the_parts_sum_to_the_step():
    # 0-2 compute; 2-3 waits on an all-reduce (done at 3); 3-4 compute while a second one runs
    # (hidden); 4-5 waits on it; 5-6 optimizer operators; 6-6.5 inside the optimizer between
    # operators; 6.5-7 nothing at all.
    spans = label_step(start_s=0.0, end_s=7.0, compute=[(0, 2), (3, 4), (5, 6)], optimizer=[(5, 6.5)],
                       comm=[op("all_reduce", "parameter", 1.5, 3.0), op("all_reduce", "parameter", 3.0, 5.0)])
    assert totals(spans) == {"time_compute_s": 3.0, "time_comm_exposed_data_s": 0.0,
                             "time_comm_exposed_parameter_s": 2.0, "time_comm_exposed_intermediate_s": 0.0,
                             "time_bubble_s": 0.0, "time_optimizer_s": 1.5, "time_other_s": 0.5}
    assert sum(s.duration_s for s in spans) == 7.0
    assert [s.label for s in spans] == ["compute", "comm_parameter", "compute", "comm_parameter", "optimizer", "other"]


def test_a_wait_is_charged_to_the_op_that_completes_first():
    spans = label_step(start_s=0.0, end_s=4.0, compute=[],
                       optimizer=[], comm=[op("all_gather", "parameter", 0.0, 3.0), op("scatter", "data", 0.0, 1.0)])
    t = totals(spans)
    assert (t["time_comm_exposed_data_s"], t["time_comm_exposed_parameter_s"], t["time_other_s"]) == (1.0, 2.0, 1.0)


def test_a_receive_before_the_peer_sent_is_bubble_after_it_is_communication():
    recv = dict(op("recv", "intermediate", 1.0, 5.0, peer=0), ready_s=4.0)
    t = totals(label_step(start_s=0.0, end_s=6.0, compute=[(0, 1), (5, 6)], optimizer=[], comm=[recv]))
    assert (t["time_bubble_s"], t["time_comm_exposed_intermediate_s"], t["time_compute_s"]) == (3.0, 1.0, 2.0)


def test_the_end_of_step_wait_for_the_slowest_peer_is_bubble():
    spans = label_step(start_s=0.0, end_s=10.0, returned_s=7.0, compute=[(0, 7)], optimizer=[], comm=[])
    assert totals(spans)["time_bubble_s"] == 3.0
    assert spans[-1].op == breakdown.STEP_END


def _rank(rank, steps, host="h"):
    return {"rank": rank, "host": host, "steps": steps}


def _pipeline_pair():
    """Rank 0 computes 0-4 and sends at 4; rank 1 posts its receive at 1, gets it at 4.5, computes to 8.
    Rank 0 then waits in the end-of-step barrier until 8."""
    r0 = [{"start_s": 0.0, "returned_s": 4.2, "end_s": 8.0, "compute": [(0, 4)], "optimizer": [],
           "comm": [op("send", "intermediate", 4.0, 4.2, peer=1)]}]
    r1 = [{"start_s": 0.0, "returned_s": 8.0, "end_s": 8.0, "compute": [(0, 1), (4.5, 8)], "optimizer": [],
           "comm": [op("recv", "intermediate", 1.0, 4.5, peer=0)]}]
    return [_rank(0, r0), _rank(1, r1)]


def test_sends_and_receives_are_matched_across_ranks_in_order():
    ranks = _pipeline_pair()
    for r in ranks:
        r["clock_offset_s"] = 0.0
    breakdown.mark_peer_ready(ranks)
    assert ranks[1]["steps"][0]["comm"][0]["ready_s"] == 4.0  # the send's issue on rank 0
    assert ranks[0]["steps"][0]["comm"][0]["ready_s"] == 1.0  # the receive's issue on rank 1


def test_record_columns_take_the_busiest_rank_and_keep_every_rank():
    cols = record_columns(_pipeline_pair())
    assert cols["breakdown_rank"] == 1  # 1 + 3.5 = 4.5 s of compute against rank 0's 4.0 s
    per = {e["rank"]: e for e in cols["breakdown_per_rank"]}
    assert per[1]["time_bubble_s"] == 3.0 and per[1]["time_comm_exposed_intermediate_s"] == 0.5
    assert per[0]["time_bubble_s"] == pytest.approx(3.8)  # the receiver was ready: the send is transfer
    assert per[0]["time_comm_exposed_intermediate_s"] == pytest.approx(0.2)
    assert cols["time_compute_s"] == 4.5 and cols["traced_step_time_s"] == 8.0
    for entry in cols["breakdown_per_rank"]:
        assert sum(entry[t] for t in TERMS) == pytest.approx(entry["traced_step_time_s"], abs=1e-12)
    assert cols["bubble_fraction"] == pytest.approx((3.8 / 8 + 3.0 / 8) / 2)


def test_a_step_ends_when_the_last_rank_returns_not_when_the_end_barrier_lets_go():
    """Both ranks leave the end barrier at 8.5 s, half a second after rank 1 (the last) returned at 8.0: that
    half second is the barrier's own latency, in no step of the timed loop, so no rank's terms hold it."""
    ranks = _pipeline_pair()
    for r in ranks:
        r["steps"] = [dict(s, end_s=8.5) for s in r["steps"]]
    cols = record_columns(ranks)
    per = {e["rank"]: e for e in cols["breakdown_per_rank"]}
    assert cols["traced_step_time_s"] == 8.0 and per[0]["traced_step_time_s"] == 8.0
    assert per[1]["time_bubble_s"] == 3.0  # its receive's wait alone: nothing after its own return
    assert per[0]["time_bubble_s"] == pytest.approx(3.8)  # 4.2 to 8.0, rank 1's return


def test_the_cut_at_the_last_return_reads_other_hosts_through_their_clock_offset():
    """Rank 1 on another host whose clock reads 100 s ahead; both leave the end barrier half a second after rank
    1 returned. Rank 0's step still ends at rank 1's return (8.0 s on its own clock), rank 1's at its own."""
    ranks = _pipeline_pair()
    ranks[0]["steps"] = [dict(s, end_s=8.5) for s in ranks[0]["steps"]]
    ranks[1] = _rank(1, [dict(s, start_s=s["start_s"] + 100, returned_s=s["returned_s"] + 100, end_s=108.5,
                              compute=[(a + 100, b + 100) for a, b in s["compute"]],
                              comm=[dict(c, issue_s=c["issue_s"] + 100, done_s=c["done_s"] + 100) for c in s["comm"]])
                         for s in ranks[1]["steps"]], host="other")
    per = {e["rank"]: e for e in record_columns(ranks)["breakdown_per_rank"]}
    assert per[0]["traced_step_time_s"] == pytest.approx(8.0) and per[1]["traced_step_time_s"] == pytest.approx(8.0)
    assert per[0]["time_bubble_s"] == pytest.approx(3.8) and per[1]["time_bubble_s"] == pytest.approx(3.0)


def test_ranks_on_other_hosts_are_aligned_on_the_step_barrier():
    ranks = _pipeline_pair()
    ranks[1] = _rank(1, [dict(s, start_s=s["start_s"] + 100, returned_s=s["returned_s"] + 100,
                              end_s=s["end_s"] + 100, compute=[(a + 100, b + 100) for a, b in s["compute"]],
                              comm=[dict(c, issue_s=c["issue_s"] + 100, done_s=c["done_s"] + 100) for c in s["comm"]])
                         for s in ranks[1]["steps"]], host="other")
    per = {e["rank"]: e for e in record_columns(ranks)["breakdown_per_rank"]}
    assert per[1]["time_bubble_s"] == pytest.approx(3.0)


def test_the_chrome_trace_is_valid_for_the_trace_event_format(tmp_path):
    ranks = _pipeline_pair()
    record = {"run_id": "abc", "strategy": "pipeline", "world_size": 2, "workload": "mlp"}
    rel = write_trace(tmp_path, record, [{"role": "stage 0", "trace": ranks[0]}, {"role": "stage 1", "trace": ranks[1]}])
    data = json.loads((tmp_path / rel).read_text())
    assert_valid_chrome_trace(data, ranks=2)
    main = [e for e in data["traceEvents"] if e["ph"] == "X" and e["tid"] == 0 and e["cat"] != "step"]
    assert sum(e["dur"] for e in main if e["pid"] == 1) == pytest.approx(8e6)
    assert {e["cat"] for e in main} == {"compute", "bubble", "comm_intermediate"}


def assert_valid_chrome_trace(data: dict, *, ranks: int) -> None:
    """Chrome's trace event format, JSON object form: complete events carry name, ph, ts, dur, pid,
    tid with non-negative microseconds; metadata events name every rank's process."""
    assert isinstance(data["traceEvents"], list) and data["traceEvents"]
    complete = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert complete
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= set(e)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    named = {e["pid"] for e in data["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert named == set(range(ranks))
    assert {e["ph"] for e in data["traceEvents"]} <= {"X", "M"}
    json.dumps(data)  # plain JSON all the way down


def test_summary_lists_every_term_and_says_when_a_record_has_none():
    cols = record_columns(_pipeline_pair())
    text = summary({"run_id": "r1", "strategy": "pipeline", "world_size": 2, "workload": "mlp",
                    "step_time_s_median": 8.0, **cols})
    assert all(t in text for t in TERMS) and "bubble fraction" in text
    # the per-rank table's columns line up under their names, the longest included
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("per rank (ms)"))
    ends = [m.end() for m in re.finditer(r"\S+", lines[head])][3:]  # from "rank" on, after "per rank (ms):"
    for row in lines[head + 1:]:
        assert [m.end() for m in re.finditer(r"\S+", row)] == ends, (lines[head], row)
    assert "no step-time breakdown" in summary({"run_id": "old", "time_compute_s": None})


def test_summary_of_a_record_missing_figures_shows_dashes_not_a_traceback():
    """A hand-edited record with a breakdown but a term, the traced step or a rank's term removed: the
    missing figures print as ``-`` (it once ended ``parbench trace`` in a TypeError)."""
    cols = record_columns(_pipeline_pair())
    cols.pop(TERMS[1])
    cols["breakdown_per_rank"][0].pop(TERMS[0])
    text = summary({"run_id": "r2", **cols, "traced_step_time_s": None})
    assert "traced step - ms" in text and "timed median - ms" in text
    assert re.search(rf"^  {TERMS[1]} +- ms +-$", text, re.M)
    assert re.search(r"^ +0 +- ", text, re.M)


def test_chrome_trace_lays_overlapping_ops_on_separate_lanes():
    step = {"start_s": 0.0, "returned_s": 3.0, "end_s": 3.0, "compute": [(0, 3)], "optimizer": [],
            "comm": [op("all_reduce", "parameter", 0.5, 2.0), op("all_reduce", "parameter", 1.0, 2.5),
                     op("all_reduce", "parameter", 2.2, 2.9)]}
    data = chrome_trace([_rank(0, [step])], run_id="x")
    lanes = [e["tid"] for e in data["traceEvents"] if e["ph"] == "X" and e["cat"].startswith("comm.")]
    assert lanes == [1, 2, 1]


def test_a_gpu_step_is_labelled_by_the_device_timeline():
    """A GPU rank's host runs ahead: it launches forward and backward (0-1 s), then the optimizer (1-1.5 s)
    and waits for the device (synchronize, to 5 s); a zero_grad at 4.7-4.8 s launches nothing. The device
    runs the compute kernels 0.5-3.5 s with a 0.5 s gap at 2-2.5 s (no kernel queued), an NCCL kernel at
    3.5-3.7 s (communication, not compute), the optimizer's kernels 3.7-4.5 s (launched inside its
    annotation), and a copy 4.5-4.6 s launched before it. Host-thread operators no longer count as compute,
    and the host's optimizer annotation counts only where the device computes nothing."""
    from parbench.metrics.tracing import MARK, Event, _device_step_events

    main, device = 1, 7
    events = [Event(MARK, 0.0, 5.0, main, True, "host"),
              Event("aten::mm", 0.1, 0.9, main, False, "host", correlation=10),
              Event("Optimizer.step#AdamW.step", 1.0, 1.5, main, True, "host"),
              Event("aten::_foreach_mul_", 1.1, 1.4, main, False, "host", correlation=20),
              Event("aten::copy_", 0.95, 0.99, main, False, "host", correlation=30),
              Event("sm90_gemm", 0.5, 2.0, device, False, "device", linked=10),
              Event("sm90_gemm", 2.5, 3.5, device, False, "device", linked=10),
              Event("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3.5, 3.7, device, False, "device", linked=10),
              Event("multi_tensor_apply_kernel", 3.7, 4.5, device, False, "device", linked=20),
              Event("Memcpy DtoD", 4.5, 4.6, device, False, "device", linked=30),
              Event("Optimizer.zero_grad#AdamW.zero_grad", 4.7, 4.8, main, True, "host")]
    window = {"start_s": 0.0, "returned_s": 5.0, "end_s": 5.0, "comm": []}
    step = _device_step_events(events, window, shift=0.0)
    assert step["compute"] == [[0.5, 2.0], [2.5, 3.5], [3.7, 4.6]]
    assert step["device_optimizer"] == [[3.7, 4.5]]
    assert step["optimizer"] == [[3.7, 4.5], [4.7, 4.8]]  # 1.0-1.5 the device still ran the backward's GEMM
    spans = label_step(start_s=0.0, end_s=5.0, compute=step["compute"], optimizer=step["optimizer"], comm=[])
    got = totals(spans)
    assert got["time_compute_s"] == pytest.approx(1.5 + 1.0 + 0.1)
    assert got["time_optimizer_s"] == pytest.approx(0.8 + 0.1)
    assert got["time_other_s"] == pytest.approx(0.5 + 0.5 + 0.2 + 0.1 + 0.2)  # 0-0.5, 2-2.5, nccl, 4.6-4.7, 4.8-5


def test_a_functional_collective_completes_at_the_wait_that_ends_after_its_issue():
    """The profiler's clock maps onto ``time.perf_counter`` to within microseconds, so a ``wait_tensor`` begun right
    after its issue can map to a start before it; it still ends after it, and is that collective's wait. Two
    functional all-reduces, each waited on at once, take the two waits in issue order; an op the meter already saw
    complete keeps the earlier time."""
    from parbench.metrics.tracing import complete_functional

    comm = [{"op": "all_reduce", "issue_s": 1.000010, "done_s": None, "functional": True},
            {"op": "all_reduce", "issue_s": 1.000500, "done_s": 1.000600, "functional": True}]
    waits = [(1.000008, 1.000200), (1.000498, 1.000700)]  # each mapped 2 us before its op's issue
    first, second = complete_functional(comm, waits)
    assert first["done_s"] == 1.000200 and second["done_s"] == 1.000600


def test_the_clocks_map_through_the_narrowest_bracket_of_any_marks_start_or_end():
    """Each traced step's mark starts between two readings of ``time.perf_counter`` and ends between two more. A
    rank descheduled between the first two (here 2 ms) would map every profiler time 2 ms early, enough to put a
    wait before its own issue and leave that collective in flight to the step's end; the narrowest bracket of all
    (here the first step's end, 4 us) gives the shift, its midpoint, and the slack, half its width."""
    from parbench.metrics.tracing import MARK, Event, _clock_shift, complete_functional

    # profiler times (its own zero) of two marks; perf_counter is the profiler's clock + 100 s
    marks = [Event(MARK, 1.0, 2.0, 1, True), Event(MARK, 3.0, 4.0, 1, True)]
    windows = [{"mark_brackets": ((100.998, 101.000010), (101.999998, 102.000002))},   # start: descheduled 2 ms
               {"mark_brackets": ((102.999990, 103.000010), (103.999985, 104.000015))}]
    shift, slack = _clock_shift(marks, windows)
    assert shift == pytest.approx(100.0, abs=1e-9) and slack == pytest.approx(2e-6, abs=1e-12)
    # the wait the profiler saw end 1 us after the issue: matched at this shift; mapped 2 ms early, it is not
    comm = [{"op": "all_reduce", "issue_s": 101.0005, "done_s": None, "functional": True}]
    assert complete_functional(comm, [(1.0004 + shift, 1.0005 + 1e-6 + shift)], slack=slack)[0]["done_s"] is not None
    assert complete_functional(comm, [(1.0004 + 100.998 - 1.0, 1.000501 + 100.998 - 1.0)])[0]["done_s"] is None


def test_a_wait_mapped_early_by_a_descheduled_clock_reading_still_completes_its_collective():
    """The profiler's clock maps onto ``time.perf_counter`` through the step's first reading and its mark, a few
    microseconds apart, unless the rank is descheduled between them (milliseconds on a loaded 2-core machine): every
    profiler time then maps that much early, a wait can end before its own issue, and without the slack (the two
    readings' distance) the collective stayed in flight to the step's end, the idle after it booked as exposed
    communication."""
    from parbench.metrics.tracing import complete_functional

    comm = [{"op": "all_reduce", "issue_s": 1.0050, "done_s": None, "functional": True}]
    waits = [(1.0040, 1.0042)]  # truly 1.0050-1.0052, mapped 1 ms early
    assert complete_functional(comm, waits)[0]["done_s"] is None
    assert complete_functional(comm, waits, slack=0.0012)[0]["done_s"] == 1.0042
