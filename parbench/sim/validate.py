"""Validation: predict every measured run in a results directory and compare, torch-free.

Bytes per category must equal the record's exactly (same conventions, same op sequence); accounted
memory (parameters, gradients, optimizer state) within a few percent; step time is reported per run
with its absolute percentage error, summarised by median/mean/max and the Spearman rank correlation
of predicted vs measured throughput (Spearman 1904; ties take their average rank).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from parbench.config import ConfigError, RunConfig
from parbench.metrics import stats
from parbench.metrics.categories import CATEGORIES
from parbench.results import read_records
from parbench.sim.hardware import Cluster, load_cluster
from parbench.sim.layout import layout_from_run
from parbench.sim.model import model_spec
from parbench.sim.predict import TERMS, Prediction, predict

MEMORY_KINDS = ("param", "grad", "optim")


def compare(record: dict[str, Any], cluster: Cluster) -> dict[str, Any]:
    """One row: the record's identity, measured and predicted figures, and their errors. The step time is
    predicted as timed (untraced); the terms as the traced steps they were measured on ran
    (``Cluster.traced``: each operator costs the profile's tracing overhead more)."""
    cfg = RunConfig.from_dict(record["config"])
    mismatch = timing_mismatch(record, cluster)
    if not mismatch:
        cluster = cluster.with_threads(cfg.threads)
    model, layout = model_spec(cfg.workload), layout_from_run(cfg)
    p = predict(model, layout, cluster)
    traced = predict(model, layout, cluster.traced())
    row: dict[str, Any] = {k: record.get(k) for k in ("run_id", "point_key", "strategy", "world_size", "workload",
                                                     "layers", "hidden", "global_batch_size", "micro_batches",
                                                     "schedule", "dp", "tp", "pp", "data_mode", "precision",
                                                     "threads_per_rank", "device", "hostname", "created_at")}
    exact = True
    for c in CATEGORIES:
        measured, predicted = record.get(f"comm_{c}_bytes_per_step"), p.comm_bytes[c]
        row[f"comm_{c}_measured"], row[f"comm_{c}_predicted"] = measured, predicted
        exact &= measured == predicted
    row["comm_bytes_exact"] = exact
    for k in MEMORY_KINDS:
        measured, predicted = record.get(f"mem_{k}_bytes"), getattr(p.memory, f"{k}_bytes")
        row[f"mem_{k}_measured"], row[f"mem_{k}_predicted"] = measured, predicted
        row[f"mem_{k}_error_pct"] = _pct(predicted, measured)
    row["time_not_compared"] = mismatch
    row.update(_untimed_columns(record) if row["time_not_compared"] else _time_columns(record, p, traced))
    return row


def timing_mismatch(record: dict[str, Any], cluster: Cluster) -> str | None:
    """Why this run's step time cannot be set beside a prediction on ``cluster``, or None where it can. Bytes and
    memory do not depend on the machine and are compared for every run; time only on the conditions the profile
    describes. A CPU profile (``Cluster.cores``) is what ``parbench calibrate`` measured on one host: gloo, float32
    operators on one intra-op thread per rank and on each thread count ``Cluster.threaded`` holds, the ranks alone
    on the cores. On this project's 2-core AVX2 VM a 512 x 512 bfloat16 matmul (no native bf16 instruction) took
    60x as long as the float32 one; ranks whose threads outnumber the cores wait on each other's spinning threads
    (DDP over two ranks of two threads stepped 2.4-2.7x slower than of one there, which ``compute_slowdown``, measured on
    one-thread ranks, does not describe); a DataLoader worker takes cores the profile gave the ranks; another
    host's link was never measured, and a host with another number of CPUs (the record's ``host_cpus``) is another
    machine. A preset describes a GPU: a CPU run's time says nothing about it."""
    device = record.get("device") or "cpu"
    if not cluster.cores:
        return f"ran on {device}; {cluster.name} describes a GPU" if device == "cpu" else None
    problems = []
    if device != "cpu":
        problems.append(f"ran on {device}")
    if record.get("backend") not in (None, "gloo"):
        problems.append(f"backend {record['backend']}")
    if record.get("precision") not in (None, "fp32"):
        problems.append(f"precision {record['precision']}")
    threads = record.get("threads_per_rank") or 1
    if threads != 1 and threads not in cluster.threaded:
        problems.append(f"{threads} threads per rank")
    elif threads > 1 and threads * (record.get("world_size") or 1) > cluster.cores:
        problems.append(f"{record.get('world_size') or 1} ranks x {threads} threads on {cluster.cores} CPUs")
    if record.get("loader_workers"):
        problems.append(f"{record['loader_workers']} DataLoader workers per rank")
    if (record.get("nodes") or 1) > 1:
        problems.append(f"{record['nodes']} nodes")
    if record.get("host_cpus") and record["host_cpus"] != cluster.cores:
        problems.append(f"{record['host_cpus']} CPUs on its host")
    if not problems:
        return None
    return (f"{', '.join(problems)}; the profile {cluster.name} measured this host's CPU ({cluster.cores} CPUs) with "
            f"gloo, float32 and {cluster.measured_threads()} thread{'' if cluster.measured_threads() == '1' else 's'} per "
            "rank (threads within the CPUs), no loader workers, one node")


def _untimed_columns(record: dict[str, Any]) -> dict[str, Any]:
    """The time columns of a run whose time is not compared (``timing_mismatch``): measured figures alone."""
    row = {"step_time_measured_s": record.get("step_time_s_median"), "step_time_predicted_s": None,
           "step_time_error_pct": math.nan, "throughput_measured": record.get("throughput_samples_per_s"),
           "throughput_predicted": None, "traced_step_time_s": record.get("traced_step_time_s"),
           "pred_traced_step_time_s": None}
    for term in (*TERMS, "time_data_s"):
        row.update({term: record.get(term), f"pred_{term}": None, f"{term}_gap": None})
    return row


def _time_columns(record: dict[str, Any], p: Prediction, traced: Prediction) -> dict[str, Any]:
    """Step time (``p``, untraced) and, term by term, the breakdown predicted for a traced step (``traced``:
    ``pred_time_*``, summing to ``pred_traced_step_time_s``) beside the measured one (``time_*``, null where
    the record predates the runner's breakdown) and the gap in seconds."""
    measured = record.get("step_time_s_median")
    row = {"step_time_measured_s": measured, "step_time_predicted_s": p.step_time_s,
           "step_time_error_pct": _pct(p.step_time_s, measured),
           "throughput_measured": record.get("throughput_samples_per_s"),
           "throughput_predicted": p.throughput_samples_per_s, "traced_step_time_s": record.get("traced_step_time_s"),
           "pred_traced_step_time_s": traced.step_time_s}
    predicted = {**traced.terms, "time_data_s": traced.data_time_s}
    for term in (*TERMS, "time_data_s"):
        got = record.get(term)
        row[term] = got
        row[f"pred_{term}"] = predicted[term]
        row[f"{term}_gap"] = None if got is None else predicted[term] - got
    return row


IDENTITY = ("strategy", "world_size", "workload", "layers", "hidden", "global_batch_size", "micro_batches", "schedule",
            "dp", "tp", "pp", "data_mode", "precision", "threads_per_rank", "device")
"""What makes two runs the same configuration where a record has no ``point_key`` (older records)."""


def _config_key(row: dict) -> tuple:
    """One configuration, its repeats alike: the sweep's point key, else the record's identity."""
    return (row["point_key"],) if row.get("point_key") else tuple(row.get(k) for k in IDENTITY)


def noise_floor(rows: list[dict]) -> dict[str, Any]:
    """The spread between repeats of the same run: per configuration measured more than once,
    (max - min) / median of its measured step times; summarised by the median and max over those
    configurations. A step-time error below this floor is not a claim the measurements can support."""
    groups: dict[tuple, list[float]] = {}
    for r in timed(rows):
        if r.get("step_time_measured_s"):
            groups.setdefault(_config_key(r), []).append(r["step_time_measured_s"])
    spreads = [(max(t) - min(t)) / stats.median(t) * 100 for t in groups.values() if len(t) > 1]
    return {"configs_repeated": len(spreads), "repeat_spread_median_pct": stats.median(spreads) if spreads else math.nan,
            "repeat_spread_max_pct": max(spreads) if spreads else math.nan}


def single_process_ratios(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per workload, the single-process runs' measured / predicted step time (median over them, and how many):
    no communication, no ranks sharing the cores, so what sets it is the compute model on these shapes and the
    machine's speed during the runs against its speed during the calibration. Every run of that workload on this
    machine carries both; a multi-rank run's error beyond that ratio belongs to its layout."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r.get("world_size") == 1 and r.get("step_time_measured_s") and r.get("step_time_predicted_s"):
            groups.setdefault(str(r["workload"]), []).append(r["step_time_measured_s"] / r["step_time_predicted_s"])
    return {w: {"runs": len(v), "measured_over_predicted": stats.median(v)} for w, v in sorted(groups.items())}


def single_process_words(single: dict[str, dict[str, float]]) -> str:
    """``single_process_ratios`` in words, for validate's report and the dashboard's Simulator view ('' for none)."""
    if not single:
        return ""
    ratios = ", ".join(f"{w} x{s['measured_over_predicted']:.2f} ({s['runs']} run{'s' if s['runs'] > 1 else ''})"
                       for w, s in single.items())
    return (f"single-process runs, measured / predicted step: {ratios}: no communication and no ranks sharing the "
            "cores, so the compute model on these shapes and the machine's speed against the calibration's; every "
            "run of the workload carries it, and a multi-rank run's error beyond it is its layout's")


JOB = ("workload", "layers", "hidden", "global_batch_size", "world_size", "device")
"""What two configurations share to be two layouts of one job: the model, the batch and the ranks."""


def layout_label(row: dict) -> str:
    """A configuration's layout in a few words: strategy, degrees, and what else differs between layouts."""
    parts = [row["strategy"], f"dp{row.get('dp')} tp{row.get('tp')} pp{row.get('pp')}"]
    if (row.get("pp") or 1) > 1:
        parts.append(f"{row.get('schedule')} m{row.get('micro_batches')}")
    threads = [f"{row['threads_per_rank']} threads"] if (row.get("threads_per_rank") or 1) > 1 else []
    return " ".join(parts + [str(row[k]) for k in ("precision", "data_mode") if row.get(k)] + threads)


def measured_pairs(rows: list[dict], margin_pct: float) -> list[dict]:
    """Every pair of configurations of one job (``JOB``) in two layouts, repeats merged (the median measured
    step): which one ran faster, the measured and the predicted rate ratio of the two (the slower one's step over
    the faster one's: one global batch), ``decided`` where they were measured more than ``margin_pct`` apart
    (pass the noise floor) and every repeat of the faster one beat every repeat of the other (closer pairs are
    ties the repeats cannot order), and ``ordered`` where the model predicts the same one faster."""
    configs: dict[tuple, dict] = {}
    for r in timed(rows):
        if r.get("step_time_measured_s"):
            configs.setdefault(_config_key(r), {"row": r, "measured": []})["measured"].append(r["step_time_measured_s"])
    jobs: dict[tuple, list[tuple[dict, list[float]]]] = {}
    for c in configs.values():
        jobs.setdefault(tuple(c["row"].get(k) for k in JOB), []).append((c["row"], c["measured"]))
    out = []
    for job, members in jobs.items():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                (fast, t_fast), (slow, t_slow) = sorted((a, b), key=lambda m: stats.median(m[1]))
                ratio = stats.median(t_slow) / stats.median(t_fast)
                predicted = slow["step_time_predicted_s"] / fast["step_time_predicted_s"]
                apart = (ratio - 1) * 100 > margin_pct and max(t_fast) < min(t_slow)
                out.append({"job": dict(zip(JOB, job)), "faster": layout_label(fast), "slower": layout_label(slow),
                            "measured_ratio": ratio, "predicted_ratio": predicted, "decided": apart,
                            "ordered": predicted > 1})
    return sorted(out, key=lambda p: (p["ordered"] or not p["decided"], p["ordered"], -p["measured_ratio"]))


def pair_counts(pairs: list[dict]) -> dict[str, int]:
    """How many pairs were measured apart (``decided``) and how many closer (``close``), and of each how many
    the model orders as measured."""
    decided = [p for p in pairs if p["decided"]]
    close = [p for p in pairs if not p["decided"]]
    return {"pairs_decided": len(decided), "pairs_decided_ordered": sum(p["ordered"] for p in decided),
            "pairs_close": len(close), "pairs_close_ordered": sum(p["ordered"] for p in close)}


def term_errors(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per breakdown term over the runs that measured it: median measured and predicted seconds and the
    median absolute gap as a share of the measured step time (which term the model gets wrong)."""
    out = {}
    for term in (*TERMS, "time_data_s"):
        have = [r for r in timed(rows) if r.get(term) is not None and r.get("step_time_measured_s")]
        if not have:
            continue
        out[term] = {"runs": len(have), "measured_median_s": stats.median([r[term] for r in have]),
                     "predicted_median_s": stats.median([r[f"pred_{term}"] for r in have]),
                     "gap_median_pct_of_step": stats.median([abs(r[f"{term}_gap"]) / r["step_time_measured_s"] * 100
                                                             for r in have])}
    return out


def term_errors_by_config(rows: list[dict]) -> list[dict]:
    """Per configuration (its repeats together), each term's median measured and predicted seconds, and the
    term whose medians lie furthest apart (``largest``, its predicted - measured gap in ``largest_gap_s``):
    where, on that layout, the model is wrong. Terms no repeat measured are left out; configurations in
    ``config_order``."""
    groups: dict[tuple, list[dict]] = {}
    for r in timed(rows):
        groups.setdefault(_config_key(r), []).append(r)
    out = []
    for group in groups.values():
        first = group[0]
        terms = {}
        for term in TERMS:
            have = [r for r in group if r.get(term) is not None]
            if have:
                terms[term] = (stats.median([r[term] for r in have]), stats.median([r[f"pred_{term}"] for r in have]))
        if not terms:
            continue
        largest = max(terms, key=lambda t: abs(terms[t][1] - terms[t][0]))
        out.append({"strategy": first["strategy"], "world_size": first["world_size"], "workload": first["workload"],
                    **{k: first.get(k) for k in ("tp", "pp", "schedule", "micro_batches", "global_batch_size")},
                    "threads_per_rank": first.get("threads_per_rank") or 1,
                    "runs": len(group), "terms": terms, "largest": largest,
                    "largest_gap_s": terms[largest][1] - terms[largest][0]})
    return sorted(out, key=config_order)


def model_parallel(row: dict) -> str:
    """A run's tensor and pipeline degrees, and its schedule and micro-batches where it pipelines ("-": neither)."""
    tp, pp = row.get("tp") or 1, row.get("pp") or 1
    parts = ([f"tp{tp}"] if tp > 1 else []) + ([f"pp{pp} {row.get('schedule')} m{row.get('micro_batches')}"] if pp > 1 else [])
    return " ".join(parts) or "-"


def config_order(row: dict) -> tuple:
    """How validate lists runs and configurations: by workload, strategy, world size, model-parallel degrees,
    batch and threads per rank (repeats in the order they ran)."""
    return (str(row["workload"]), str(row["strategy"]), row["world_size"], model_parallel(row),
            row.get("global_batch_size") or 0, row.get("threads_per_rank") or 1, row.get("created_at") or "")


def tracing_cost_words(c: Cluster) -> str:
    """The profile's tracing cost (``Cluster.traced``) in words, for the tables and charts that set traced terms
    beside their prediction."""
    return (f"{c.tracing_op_overhead_s * 1e6:.1f} us per training op and {c.tracing_optimizer_op_overhead_s * 1e6:.1f} "
            f"per optimizer op, the operators' own work {c.tracing_work_share:.1%} more, FSDP2's hooks "
            f"x{c.tracing_fsdp_scale:.2f} and tensor parallelism's "
            f"x{c.tracing_tp_scale:.2f}; as other, {c.tracing_between_op_s * 1e6:.1f} us of each training op and "
            f"{c.tracing_fsdp_between_share:.0%} and {c.tracing_tp_between_share:.0%} of the wrappers' time, "
            "spent between operators")


def tracing_cost_pct(rows: list[dict], *, predicted: bool = False) -> float:
    """How much longer the traced steps (torch.profiler recording every operator, the comm meter intercepting
    it) took than the untraced steps whose median is the step time, median over the runs in %; ``predicted``:
    the same for the predictions (``Cluster.traced`` against the plain profile). The measured terms are the
    traced steps': on a CPU each operator costs the tracing some microseconds, so op-dense terms (an eager
    optimizer: ten operators per tensor) read high against an untraced prediction."""
    traced, step = ("pred_traced_step_time_s", "step_time_predicted_s") if predicted else (
        "traced_step_time_s", "step_time_measured_s")
    ratios = [r[traced] / r[step] for r in timed(rows)
              if r.get("traced_step_time_s") and r.get(traced) and r.get(step)]
    return (stats.median(ratios) - 1) * 100 if ratios else math.nan


def traced_step_error_pct(rows: list[dict]) -> float:
    """Median absolute error of the predicted traced step (the sum of the predicted terms) against the traced
    step the measured terms come from, in %: the term comparison's own total."""
    errs = [_pct(r["pred_traced_step_time_s"], r["traced_step_time_s"]) for r in rows
            if r.get("traced_step_time_s") and r.get("pred_traced_step_time_s")]
    return stats.median(errs) if errs else math.nan


def _pct(predicted: float | None, measured: float | None) -> float:
    if predicted is None or not measured:
        return 0.0 if predicted == measured else math.nan
    return abs(predicted - measured) / measured * 100


def validation_rows(results_dir: str | Path = "results", cluster: Cluster | None = None) -> tuple[list[dict], list[str]]:
    """(rows, skipped reasons) for every ``ok`` record under ``results_dir``."""
    cluster = cluster or load_cluster("local", results_dir=results_dir)
    records, problems = read_records(results_dir, warn=False)
    rows, skipped = [], list(problems)
    for rec in records:
        if rec.get("status") != "ok":
            continue
        if not rec.get("step_time_s_median") or not rec.get("throughput_samples_per_s"):
            skipped.append(f"{rec.get('run_id')}: an ok record without a measured step time or throughput")
            continue
        try:
            rows.append(compare(rec, cluster))
        except (ConfigError, TypeError, KeyError, ValueError) as exc:
            skipped.append(f"{rec.get('run_id')}: {type(exc).__name__}: {exc}")
    return rows, skipped


def validation_frame(results_dir: str | Path = "results", cluster: Cluster | None = None):
    """A pandas DataFrame of ``validation_rows`` (the dashboard's Simulator view reads this)."""
    import pandas as pd

    rows, _ = validation_rows(results_dir, cluster)
    return pd.DataFrame(rows)


SAME_DAY_H = 24.0
"""How far apart a profile and the runs it predicts may be measured: this project's 2-core VM ran the same sweep in
87 s one day and 150 s another (the same 72 runs), so a profile carries its day's speed."""


def calibration_age(meta: dict[str, Any], rows: list[dict]) -> dict[str, Any]:
    """When the profile was measured (``meta['created_at']``, absent from profiles older than the field) and how
    many hours later the earliest and the latest run whose time is compared were (negative: before it);
    ``same_day`` where every one lies within ``SAME_DAY_H`` of it."""
    when = _instant(meta.get("created_at"))
    stamps = sorted(t for t in (_instant(r.get("created_at")) for r in timed(rows)) if t)
    out: dict[str, Any] = {"calibrated_at": meta.get("created_at") if when else None, "runs": len(stamps)}
    if not when or not stamps:
        return out
    hours = [(t - when).total_seconds() / 3600 for t in (stamps[0], stamps[-1])]
    return {**out, "hours_after": hours, "same_day": max(abs(h) for h in hours) <= SAME_DAY_H}


def _instant(stamp: object):
    """An ISO 8601 time with its zone (records' and profiles' ``created_at``), or None for anything else."""
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None
    return when if when and when.tzinfo else None


def age_line(age: dict) -> str:
    """``calibration_age`` in words."""
    if not age["calibrated_at"]:
        return ("measured at a time the profile does not say (written before profiles recorded it): `parbench "
                "calibrate` again to compare on a profile of the runs' day")
    if "hours_after" not in age:
        return f"measured {age['calibrated_at']}"
    first, last = age["hours_after"]
    line = f"measured {age['calibrated_at']}; the {age['runs']} runs compared from {first:+.1f} to {last:+.1f} h after it"
    if age["same_day"]:
        return line
    return (line + f": more than {SAME_DAY_H:.0f} h apart, and a machine's speed moves from day to day: `parbench "
            "calibrate` again the day the runs are made")


def timed(rows: list[dict]) -> list[dict]:
    """The rows whose step time is compared (``timing_mismatch``: the run ran as the profile was measured)."""
    return [r for r in rows if not r.get("time_not_compared")]


def summarize(rows: list[dict]) -> dict[str, Any]:
    compared = timed(rows)
    errs = [r["step_time_error_pct"] for r in compared if not math.isnan(r["step_time_error_pct"])]
    mem = [r[f"mem_{k}_error_pct"] for r in rows for k in MEMORY_KINDS if not math.isnan(r[f"mem_{k}_error_pct"])]
    return {
        "runs": len(rows),
        "time_compared": len(compared),
        "comm_bytes_exact": sum(bool(r["comm_bytes_exact"]) for r in rows),
        "memory_max_error_pct": max(mem) if mem else math.nan,
        "step_time_median_error_pct": stats.median(errs),
        "step_time_mean_error_pct": sum(errs) / len(errs) if errs else math.nan,
        "step_time_max_error_pct": max(errs) if errs else math.nan,
        "throughput_spearman": stats.spearman([r["throughput_predicted"] for r in compared],
                                              [r["throughput_measured"] for r in compared]),
    }
