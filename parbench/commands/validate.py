"""``parbench validate``: predict every measured run in the results directory on this machine's
calibrated profile (exact communication bytes, memory, step time, and each step-time term the run
measured), and with ``--published`` every published at-scale row, per source with its scaling trends."""

from __future__ import annotations

import argparse
import json
import math
import sys

from parbench.config import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="simulator predictions vs every measured run", description=__doc__)
    p.add_argument("--results-dir", default="results", help="results directory whose runs are predicted")
    p.add_argument("--cluster", default="local", help="profile to predict on (default: the calibrated local one)")
    p.add_argument("--format", choices=("table", "json", "rows"), default="table",
                   help="output: a readable table or JSON; with --published, rows: every published run the command "
                        "can state, as a rows file of parbench simulate command lines (read back by --rows)")
    p.add_argument("--published", action="store_true",
                   help="compare with published at-scale rows (runs without a local profile when none exists)")
    p.add_argument("--rows", metavar="FILE",
                   help="compare only the runs in a rows file (TOML, or CSV with a header line): each row a parbench "
                        "simulate command line, "
                        "a metric (s_per_iteration, tps_per_gpu, mfu, tflops_per_gpu, tokens_per_s, samples_per_s, hfu, "
                        "hw_tflops_per_gpu) and its measured value "
                        "(format: parbench/sim/rows.py)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    if a.rows:
        return _handle_rows(a)
    if a.format == "rows":
        if not a.published:
            raise ConfigError("--format rows writes the published runs as a rows file: give --published")
        from parbench.commands.simulate import command_layout
        from parbench.sim.published_memory import timed_runs
        from parbench.sim.reproduce import rows_toml

        print(rows_toml(timed_runs(), command_layout), end="")
        return 0
    from parbench.sim.hardware import load_cluster
    from parbench.sim.validate import (noise_floor, single_process_ratios, summarize, term_errors, term_errors_by_config,
                                       traced_step_error_pct, tracing_cost_pct, validation_rows)

    try:
        cluster = load_cluster(a.cluster, results_dir=a.results_dir)
    except (FileNotFoundError, ValueError) as exc:
        # with --published, only a missing calibration of this host is not an error: the published rows need none
        if not a.published or a.cluster != "local":
            print(f"parbench validate: {exc}", file=sys.stderr)
            return 2
        cluster, note = None, f"local runs not compared: {exc}"
    rows, skipped = validation_rows(a.results_dir, cluster) if cluster else ([], [])
    groups = _by_subscription(rows, cluster.cores if cluster else 0)
    summary = {name: summarize(g) for name, g in groups.items()}
    terms = term_errors(rows)
    by_config = term_errors_by_config(rows)
    noise = noise_floor(rows)
    single = single_process_ratios(rows)
    local_pairs = _local_pairs(groups, noise, summary)
    published, sources = _published() if a.published else ([], [])
    groups_alike = _indistinct_groups() if a.published else []
    runs, run_sources = _published_runs(groups_alike) if a.published else ([], [])
    series = _trends(runs)
    splits = _splits(runs)
    indistinct = _indistinct(groups_alike)
    pairs = _pairs() if a.published else []
    layers = _layers() if a.published else []
    targets = _targets(sources, run_sources)
    ok = all(s["comm_bytes_exact"] == s["runs"] for s in summary.values())
    if a.format == "json":
        from parbench.sim.published import scale_out_excess

        print(json.dumps({"summary": summary, "noise_floor": noise, "single_process": single, "terms": terms,
                          "terms_by_config": by_config,
                          "runs": rows, "skipped": skipped,
                          "layout_pairs": local_pairs,
                          "published": published, "published_by_source": sources, "published_layers": layers,
                          "published_memory_runs": runs, "published_memory_by_source": run_sources,
                          "published_trends": series, "published_scale_out": scale_out_excess(series),
                          "published_splits": splits,
                          "published_indistinct": indistinct, "published_pairs": pairs,
                          "published_targets": targets,
                          "calibration_age": _local_age(a, rows) if cluster else None}, default=str))
        return 0 if ok else 1
    if cluster:
        _print_local(rows, skipped, summary, terms, noise, local_pairs, single)
        _print_terms_by_config(by_config)
        traced = tracing_cost_pct(rows)
        if terms and not math.isnan(traced):
            print(tracing_line(cluster, traced, tracing_cost_pct(rows, predicted=True), traced_step_error_pct(rows)))
        if a.cluster == "local":
            _print_calibration_drift(a.results_dir, rows)
    else:
        print(note)
    if published:
        _print_published(published, sources)
        _print_layers(layers)
    _print_runs_by_source(run_sources)
    _print_targets(targets)
    _print_trends(series)
    _print_splits(splits)
    _print_indistinct(indistinct)
    _print_pairs(pairs)
    return 0 if ok else 1


def _handle_rows(a: argparse.Namespace) -> int:
    """``--rows FILE``: every row read and predicted (a bad one stops the file before anything prints), then each
    row's error, the errors per source, each scaling series' trend and, where a layout ran at several micro-batch
    counts, the step split into its fixed and per-micro-batch parts."""
    from parbench.commands.simulate import command_prediction
    from parbench.sim.published_memory import summarize_by_source
    from parbench.sim.rows import compare_rows, load_rows

    if a.published or a.format == "rows":
        raise ConfigError("--rows compares the file's runs alone; run --published (and --format rows) apart")
    rows = compare_rows(load_rows(a.rows), command_prediction)
    sources, series, splits = summarize_by_source(rows), _trends(rows), _splits(rows)
    targets = _targets([], sources)
    if a.format == "json":
        print(json.dumps({"rows": rows, "by_source": sources, "trends": series, "splits": splits, "targets": targets}))
        return 0
    _print_rows(a.rows, rows)
    _print_runs_by_source(sources, "\nthe file's runs by source (memory where a row gives it; every run trained, so each must fit):")
    _print_targets(targets)
    _print_trends(series)
    _print_splits(splits)
    return 0


def _print_rows(path: str, rows: list[dict]) -> None:
    print(f"{path}: {len(rows)} measured run{'' if len(rows) == 1 else 's'} beside their predictions (error = predicted / measured - 1)")
    print(f"{'run':<44}{'cluster':<14}{'GPUs':>6}  {'metric':<16}{'measured':>10}{'predicted':>11}{'err %':>8}"
          f"{'mem GiB meas / pred':>21}  fits")
    for r in rows:
        mem = (f"{r['memory_gib_published']:.1f} / " if r["memory_gib_published"] else "- / ") + f"{r['allocator_gib_predicted']:.1f}"
        print(f"{r['name'][:43]:<44}{r['cluster'][:13]:<14}{r['gpus']:>6}  {r['metric']:<16}{r['published']:>10.4g}"
              f"{r['predicted']:>11.4g}{r['metric_error_pct']:>+8.1f}{mem:>21}  {'yes' if r['predicted_fits'] else 'NO'}")


def tracing_line(cluster, measured_pct: float, predicted_pct: float, error_pct: float) -> str:
    """What the term tables compare: traced steps, measured and predicted, and how far apart their totals lie."""
    from parbench.sim.validate import tracing_cost_words

    head = (f"the measured terms are the traced steps' (torch.profiler recording every operator, the comm meter "
            f"intercepting it), a median {measured_pct:+.1f}% against the untraced steps; ")
    if not (cluster.tracing_op_overhead_s or cluster.tracing_optimizer_op_overhead_s):
        return head + ("this profile has no tracing cost (`parbench calibrate` measures it), so the predicted terms "
                       "are an untraced step's and op-dense terms such as an eager optimizer read high against them")
    return head + (f"the predicted terms are a traced step's too ({predicted_pct:+.1f}%: the profile's tracing cost, "
                   f"{tracing_cost_words(cluster)}), and their sum is a median {error_pct:.1f}% off the traced step")


def _indistinct_groups() -> list:
    from parbench.sim.accuracy import indistinct_runs

    return indistinct_runs()


def _indistinct(groups: list) -> list[dict]:
    from dataclasses import asdict

    return [{**asdict(g), "spread_pct": g.spread_pct, "floor_pct": g.floor_pct} for g in groups]


def _print_indistinct(groups: list[dict]) -> None:
    if not groups:
        return
    print("\npublished runs the model cannot tell apart (one model, layout and device, so one prediction): "
          "their published steps differ by the spread,\nand no prediction of these inputs is within the floor "
          "of all of them")
    print(f"  {'spread':>7}{'floor':>7}{'predicted s':>13}  published s: run (source, table)")
    for g in groups:
        runs = "; ".join(f"{s:.3f}: {n} ({src.split(' (')[0][:40]}, {t})"
                         for n, src, t, s in zip(g["names"], g["sources"], g["tables"], g["published_step_s"]))
        print(f"  {g['spread_pct']:>6.1f}%{g['floor_pct']:>6.1f}%{g['predicted_step_s']:>13.3f}  {runs}")


def _pairs() -> list[dict]:
    from dataclasses import asdict

    from parbench.sim.accuracy import layout_pairs

    return [{**asdict(p), "decided": p.decided, "ordered": p.ordered, "precision_only": p.precision_only}
            for p in layout_pairs()]


def _print_pairs(pairs: list[dict]) -> None:
    """The summary over every pair, then each pair that differs in more than precision or that the model
    misorders."""
    if not pairs:
        return
    from parbench.sim.accuracy import PAIR_MARGIN_PCT, LayoutPair, pair_summary

    s = pair_summary([LayoutPair(**{k: p[k] for k in LayoutPair.__dataclass_fields__}) for p in pairs])
    print(f"\npublished layout pairs (one model, device and GPU count, two layouts): the run published faster is "
          f"predicted faster in {s['decided_ordered']} of {s['decided']} pairs\npublished more than "
          f"{PAIR_MARGIN_PCT:.0f}% apart ({s['precision_ordered']} of {s['precision']} that differ in precision alone, "
          f"{s['layout_ordered']} of {s['layout']} in the layout) and in {s['close_ordered']} of {s['close']} closer ones")
    print(f"  {'published':>9} {'predicted':>9}  {'':6}differs in: faster run | slower run")
    for p in pairs:
        if p["precision_only"] and p["ordered"]:
            continue
        mark = "" if p["ordered"] else "WRONG" if p["decided"] else "close"
        print(f"  {p['published_ratio']:>8.3f}x {p['predicted_ratio']:>8.3f}x  {mark:6}{', '.join(p['differs'])}: "
              f"{p['faster']} | {p['slower']}")


def _trends(runs: list[dict]) -> dict:
    from parbench.sim.published import trends

    return trends([r for r in runs if r["metric"]])


def _print_trends(series: dict) -> None:
    if not series:
        return
    print("\nscaling series (sign of the per-GPU rate's change from the fewest to the most GPUs, and the change):")
    for name, t in series.items():
        print(f"  {name:<52}{' -> '.join(map(str, t['gpus'])):>18} GPUs: published {t['measured_sign']:+d} "
              f"({t['measured_change_pct']:+.1f}%), predicted {t['predicted_sign']:+d} ({t['predicted_change_pct']:+.1f}%)"
              f"  {'ok' if t['match'] else 'WRONG'}")
    right = sum(t["match"] for t in series.values())
    print(f"  trend sign right on {right} of {len(series)} series")
    from parbench.sim.published import scale_out_excess

    flat = scale_out_excess(series)
    print(f"  the predicted per-GPU rate falls less than the published one in {flat['flatter']} of {len(series)} series "
          f"(median {flat['median_pct_per_doubling']:+.2f}% a doubling of GPUs)")


def _splits(runs: list[dict]) -> dict:
    from parbench.sim.published import fixed_and_per_micro_batch

    return fixed_and_per_micro_batch(runs)


def _print_splits(splits: dict) -> None:
    if not splits:
        return
    print("\none layout at several micro-batch counts m per step: step = fixed + m x per-micro-batch, fitted to the "
          "published and to the predicted steps:")
    print(f"  {'layout':<52}{'m':>14}{'per-micro-batch s':>19}{'err %':>7}{'fixed s':>22}{'line fit':>10}")
    for name, s in splits.items():
        ms = "-".join(map(str, (s["micro_batches"][0], s["micro_batches"][-1])))
        fixed = f"{s['fixed_s_published']:.2f}±{s['fixed_s_published_spread']:.2f}"
        print(f"  {name[:51]:<52}{ms:>14}{s['per_micro_batch_s_published']:>9.4f} /{s['per_micro_batch_s_predicted']:>8.4f}"
              f"{s['per_micro_batch_error_pct']:>+7.1f}{fixed:>13} /{s['fixed_s_predicted']:>7.2f}"
              f"{s['fit_max_pct']:>9.1f}%")
    print("  (published / predicted; ±: how far the published fixed part moves when any one published step is 1% off;"
          " line fit: the published rows' largest distance from their own line)")


def _published_runs(groups_alike: list) -> tuple[list[dict], list[dict]]:
    """Published layouts as memory and feasibility checks (``parbench.sim.published_memory``), each source with
    the max |error| its own rows of the same inputs put out of any model's reach (``source_floors``)."""
    from parbench.sim.accuracy import source_floors
    from parbench.sim.published_memory import compare_runs, summarize_by_source

    runs = compare_runs()
    return runs, summarize_by_source(runs, source_floors(groups_alike))


def _targets(sources: list[dict], run_sources: list[dict]) -> dict:
    """The per-source targets over both kinds of published source, each source once: the papers' iteration times
    (``sources``) and the runs with a metric (``run_sources``, which restate those papers' rows beside their memory;
    a source of feasibility checks alone has no error to judge)."""
    from parbench.sim.accuracy import source_targets

    figures = {s["source"]: (s["mean_abs_error_pct"], s["max_abs_error_pct"]) for s in sources}
    for s in run_sources:
        if s["metric_mean_abs_error_pct"] is not None:
            figures.setdefault(s["source"], (s["metric_mean_abs_error_pct"], s["metric_max_abs_error_pct"]))
    return source_targets([(name, mean, worst) for name, (mean, worst) in figures.items()])


def _print_targets(t: dict) -> None:
    total = len(t["met"]) + len(t["missed"])
    if not total:
        return
    print(f"\nper-source targets (mean |err| <= {t['mean_target_pct']:g}%, max |err| <= {t['max_target_pct']:g}%): "
          f"{len(t['met'])} of {total} sources meet both")
    for name in t["met"]:
        print(f"  met     {name[:90]}")
    for m in t["missed"]:
        print(f"  missed  {m['source'][:90]}: mean {m['mean_abs_error_pct']:.1f}%, max {m['max_abs_error_pct']:.1f}% "
              f"(over the {' and '.join(m['misses'])})")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _print_runs_by_source(by_source: list[dict], title: str = "") -> None:
    if not by_source:
        return
    print(title or "\npublished runs by source, memory and feasibility (layouts that trained must fit; OOM ones must not); "
          "floor:\nthe max |err| no model can get under, two of the source's rows having the same inputs (the table at "
          "the end)")
    print(f"{'source':<58}{'rows':>5}  {'metric':<22}{'mean|err|':>10}{'max|err|':>10}{'floor':>7}{'mem rows':>9}"
          f"{'mem mean':>9}{'mem max':>9}{'ran: fit':>10}{'OOM: no fit':>12}")
    for s in by_source:
        print(f"{s['source'][:57]:<58}{s['rows']:>5}  {s['metric'][:21]:<22}{_pct(s['metric_mean_abs_error_pct']):>10}"
              f"{_pct(s['metric_max_abs_error_pct']):>10}{_pct(s.get('metric_max_floor_pct')):>7}{s['memory_rows']:>9}"
              f"{_pct(s['memory_mean_abs_error_pct']):>9}"
              f"{_pct(s['memory_max_abs_error_pct']):>9}{s['ran_predicted_to_fit']:>5}/{s['ran']:<4}"
              f"{s['infeasible_predicted_not_to_fit']:>7}/{s['infeasible']:<4}")


def _local_pairs(groups: dict[str, list[dict]], noise: dict, summary: dict) -> dict[str, list[dict]]:
    """Per group, the pairs of layouts of one job (``measured_pairs``, the noise floor as the margin); their
    counts go into the group's summary."""
    from parbench.sim.validate import measured_pairs, pair_counts

    pairs = {name: measured_pairs(g, noise["repeat_spread_median_pct"]) for name, g in groups.items()}
    for name, g in pairs.items():
        summary[name].update(pair_counts(g))
    return pairs


def _by_subscription(rows: list[dict], cores: int) -> dict[str, list[dict]]:
    """Runs with at most one rank per core, and oversubscribed ones (ranks share cores: the profile's
    measured compute slowdown per rank count stands in for the scheduler), summarised apart."""
    from parbench.sim.validate import timed

    compared = timed(rows)
    groups = {"all": compared} if not cores else {"within cores": [r for r in compared if r["world_size"] <= cores],
                                                  "oversubscribed": [r for r in compared if r["world_size"] > cores]}
    untimed = [r for r in rows if r.get("time_not_compared")]
    return {**groups, "time not compared": untimed} if untimed else groups


def _print_calibration_drift(results_dir: str, rows: list[dict]) -> None:
    """The local profile's steadiness and age: a machine that drifted while calibrating, or a profile of another day
    than the runs, bounds what the errors mean."""
    from parbench.commands.calibrate import drift_line
    from parbench.sim.hardware import profile_path
    from parbench.sim.validate import age_line, calibration_age

    meta = json.loads(profile_path(results_dir).read_text()).get("meta", {})
    if "drift_pct" in meta:
        print("calibration " + drift_line(meta))
    print("calibration " + age_line(calibration_age(meta, rows)))


def _local_age(a: argparse.Namespace, rows: list[dict]) -> dict | None:
    """``calibration_age`` of the local profile (None for a preset or a cluster file: nothing measured it here)."""
    from parbench.sim.hardware import profile_path
    from parbench.sim.validate import calibration_age

    if a.cluster != "local":
        return None
    return calibration_age(json.loads(profile_path(a.results_dir).read_text()).get("meta", {}), rows)


def _print_local(rows: list[dict], skipped: list[str], summary: dict, terms: dict, noise: dict,
                 pairs: dict[str, list[dict]], single: dict[str, dict[str, float]]) -> None:
    from parbench.sim.validate import config_order, single_process_words

    print(_config_head(rows) + f"{'bytes':>7}{'mem err%':>9}{'t meas ms':>11}{'t pred ms':>11}{'err%':>7}")
    reasons: dict[str, int] = {}  # each reason once, below the table: it is as long as a line and repeats
    for r in rows:
        if r.get("time_not_compared"):
            reasons[r["time_not_compared"]] = reasons.get(r["time_not_compared"], 0) + 1
    marks = {why: i for i, why in enumerate(reasons, 1)}
    for r in sorted(rows, key=config_order):
        mem = max(r[f"mem_{k}_error_pct"] for k in ("param", "grad", "optim"))
        predicted, err = ("-", "-") if r["step_time_predicted_s"] is None else (
            f"{r['step_time_predicted_s'] * 1e3:.2f}", f"{r['step_time_error_pct']:.1f}")
        print(_config_cells(rows, r) + f"{'exact' if r['comm_bytes_exact'] else 'DIFF':>7}"
              f"{mem:>9.2f}{r['step_time_measured_s'] * 1e3:>11.2f}{predicted:>11}{err:>7}"
              + (f"  time not compared [{marks[r['time_not_compared']]}]" if r.get("time_not_compared") else ""))
    for why, n in reasons.items():
        print(f"[{marks[why]}] time not compared for {n} run{'s' if n != 1 else ''}: {why}")
    for s in skipped:
        print(f"skipped {s}")
    for name, s in summary.items():
        if not s["runs"]:
            continue
        time = (f"step time |error| median {s['step_time_median_error_pct']:.1f}%, mean "
                f"{s['step_time_mean_error_pct']:.1f}%, max {s['step_time_max_error_pct']:.1f}%; throughput Spearman "
                f"{s['throughput_spearman']:.3f}") if s["time_compared"] else \
            "step time not compared (the reasons are under the table)"
        print(f"\n{name}: {s['runs']} runs; comm bytes exact in {s['comm_bytes_exact']}; memory max error "
              f"{s['memory_max_error_pct']:.2f}%; {time}")
        if s["pairs_decided"] + s["pairs_close"]:
            print(f"  layout order (two layouts of one workload, batch and world size): the one measured faster is "
                  f"predicted faster in {s['pairs_decided_ordered']} of {s['pairs_decided']} pairs measured apart "
                  f"(further than the noise floor, no repeats overlapping), {s['pairs_close_ordered']} of "
                  f"{s['pairs_close']} closer ones")
        for p in pairs[name]:
            if p["decided"] and not p["ordered"]:
                job = p["job"]
                print(f"    misordered: {job['workload']} on {job['world_size']}: {p['faster']} ran "
                      f"{p['measured_ratio']:.2f}x as fast as {p['slower']}, predicted {p['predicted_ratio']:.2f}x")
    if noise["configs_repeated"]:
        print(f"noise floor: repeats of the same run differ by {noise['repeat_spread_median_pct']:.1f}% (median over "
              f"{noise['configs_repeated']} repeated configurations; max {noise['repeat_spread_max_pct']:.1f}%): "
              f"errors below it are not resolved")
    else:
        print("noise floor: no configuration was measured twice; run repeats to know what the errors can resolve")
    if single:
        print(single_process_words(single))
    if terms:
        print(f"\n{'term':<34}{'runs':>5}{'measured ms':>13}{'predicted ms':>14}{'|gap| % of step':>17}")
        for term, t in terms.items():
            print(f"{term:<34}{t['runs']:>5}{t['measured_median_s'] * 1e3:>13.3f}{t['predicted_median_s'] * 1e3:>14.3f}"
                  f"{t['gap_median_pct_of_step']:>17.1f}")


def _print_terms_by_config(configs: list[dict]) -> None:
    """Each configuration's terms, measured / predicted ms (medians over its repeats), and its largest gap."""
    from parbench.metrics.breakdown import TERMS, short_name

    if not configs:
        return
    print("\nterms per configuration, measured (traced) / predicted ms, medians over repeats; '-': 0 in both")
    print(_config_head(configs) + "".join(f"{short_name(t):>18}" for t in TERMS) + "  largest gap (predicted - measured)")
    for c in configs:
        cells = []
        for term in TERMS:
            m, p = c["terms"].get(term, (None, None))
            cells.append("" if m is None else "-" if m == p == 0 else f"{m * 1e3:.1f}/{p * 1e3:.1f}")
        print(_config_cells(configs, c) + "".join(f"{x:>18}" for x in cells)
              + f"  {short_name(c['largest'])} {c['largest_gap_s'] * 1e3:+.1f} ms")


def _widths(rows: list[dict]) -> tuple[int, int]:
    """The model-parallel and workload columns' widths: the longest entry's, a space after it."""
    from parbench.sim.validate import model_parallel

    return (max([len("model parallel"), *(len(model_parallel(r)) for r in rows)]) + 1,
            max([len("workload"), *(len(str(r["workload"])) for r in rows)]) + 1)


def _config_head(rows: list[dict]) -> str:
    """The columns that name a configuration, as ``_config_cells`` fills them for ``rows``."""
    mp, wl = _widths(rows)
    return f"{'strategy':<9}{'W':>3} {'model parallel':<{mp}}{'workload':<{wl}}{'batch':>6}{'thr':>4}"


def _config_cells(rows: list[dict], r: dict) -> str:
    """A run's or configuration's strategy, world size, model-parallel degrees, workload, batch and threads."""
    from parbench.sim.validate import model_parallel

    mp, wl = _widths(rows)
    return (f"{r['strategy']:<9}{r['world_size']:>3} {model_parallel(r):<{mp}}{r['workload']!s:<{wl}}"
            f"{r.get('global_batch_size') or 0:>6}{r.get('threads_per_rank') or 1:>4}")


def _published() -> tuple[list[dict], list[dict]]:
    from parbench.sim.published import compare_published, per_source

    rows = compare_published()
    return rows, per_source(rows)


def _layers() -> list[dict]:
    from parbench.sim.published import compare_layers

    return compare_layers()


def _print_layers(layers: list[dict]) -> None:
    """One layer timed alone, measured against predicted: the compute and tensor-parallel terms without a step's
    pipeline, data parallelism or optimizer around them."""
    print(f"\none layer alone, forward + backward per micro-batch ({layers[0]['source']}, {layers[0]['table']}: "
          f"{layers[0]['layer']}):")
    print(f"  {'recomputation':<14}{'sequence parallel':<19}{'meas ms':>8}{'pred ms':>9}{'err %':>8}")
    for r in layers:
        print(f"  {r['recompute']:<14}{'yes' if r['sequence_parallel'] else 'no':<19}{r['measured_ms']:>8.1f}"
              f"{r['predicted_ms']:>9.1f}{r['error_pct']:>+8.1f}")


def _print_published(rows: list[dict], sources: list[dict]) -> None:
    w = max([28] + [len(r["name"]) + 1 for r in rows])
    v = max([30] + [len(s["source"]) + 1 for s in sources])
    print(f"\n{'published row':<{w}}{'GPUs':>6}{'tp':>4}{'pp':>4}{'dp':>5}{'meas s':>9}{'pred s':>9}{'err %':>8}"
          f"{'pred MFU':>9}  source, table (as printed)")
    for r in rows:
        print(f"{r['name']:<{w}}{r['gpus']:>6}{r['tp']:>4}{r['pp']:>4}{r['dp']:>5}{r['measured_s']:>9.2f}"
              f"{r['predicted_s']:>9.2f}{r['error_pct']:>+8.1f}{r['predicted_mfu']:>9.1%}  "
              f"{r['source']}, {r['table']} ({r['printed']}{'; assumed ' + r['assumed'] if r['assumed'] else ''})")
    print(f"\n{'source':<{v}}{'rows':>5}{'mean |err| %':>14}{'max |err| %':>13}  scaling trend (sign of per-GPU rate change)")
    for s in sources:
        trend = "; ".join(f"{name} {t['gpus'][0]}->{t['gpus'][-1]} GPUs: measured {t['measured_sign']:+d}, "
                          f"predicted {t['predicted_sign']:+d} {'ok' if t['match'] else 'WRONG'}"
                          for name, t in s["series"].items()) or "-"
        print(f"{s['source']:<{v}}{s['rows']:>5}{s['mean_abs_error_pct']:>14.1f}{s['max_abs_error_pct']:>13.1f}  {trend}")
    errs = [abs(r["error_pct"]) for r in rows if not math.isnan(r["error_pct"])]
    print(f"all {len(rows)} rows: mean |error| {sum(errs) / len(errs):.1f}%, max {max(errs):.1f}%")
