"""``parbench calibrate``: micro-benchmark this machine (GEMMs, memory-bound ops, gloo collectives at
group sizes 2 and 4), fit the simulator's constants and save them as results/calibration/<host>.json.
Every fitted parameter is reported with its 95% interval and its held-out error; a fit that is not
physical is flagged, and the measured point estimates are used instead. With --nccl-tests it measures
nothing: it fits a GPU cluster's nccl-tests logs the same way and writes that cluster with their links."""

from __future__ import annotations

import argparse
import json
import math

IN_STEP_TERMS = {
    "collective_step_overhead": ("a group collective inside a training step, beyond its fit (an FSDP2 run's step "
                                 "measured / predicted without it, over its collectives)"),
    "burst_step_overhead": ("a broadcast of ZeRO-1's burst inside a training step, beyond its fit (a ZeRO-1 run's step "
                            "measured / predicted without it, over its broadcasts)"),
    "tp_step_overhead": ("a tensor-parallel all-reduce inside a training step, beyond its fit (a tensor-parallel run's "
                         "step measured / predicted without it, over its all-reduces)"),
    "fsdp_step_byte_overhead": ("a byte of FSDP2's gathers and reduce-scatters inside a training step, beyond the above "
                                "(an FSDP2 run of the wide mlp probe, measured / predicted without it, over their bytes)"),
}
"""The calibration's in-step terms (``parbench.sim.calibrate.STEP_PROBES``) and how the report names them."""


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this machine for the simulator", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer sizes, repetitions and probe runs (about 50 s on a 2-core machine)")
    p.add_argument("--results-dir", default="results", help="the profile goes to <dir>/calibration/<host>.json")
    p.add_argument("--show", action="store_true", help="print the saved profile's report without measuring")
    g = p.add_argument_group("a GPU cluster's links from nccl-tests logs (measures nothing here)")
    g.add_argument("--nccl-tests", nargs="+", metavar="[KIND=]FILE",
                   help="nccl-tests outputs (all_reduce_perf, all_gather_perf, reduce_scatter_perf; KIND where the "
                        "file's name does not say it): one from a single host sets the node's link, one across hosts "
                        "the network's; writes a cluster file that `parbench simulate --cluster FILE` reads")
    g.add_argument("--cluster", help="the preset or cluster file whose links the logs replace (default: h100-sxm)")
    g.add_argument("--out", help="the cluster file to write (default: <results-dir>/clusters/<cluster>-measured.json, "
                                 "which the dashboard's what-if lists beside the presets)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.sim.hardware import profile_path

    if a.nccl_tests:
        return handle_nccl_tests(a)
    if a.cluster or a.out:
        from parbench.config import ConfigError

        raise ConfigError("--cluster and --out go with --nccl-tests (this machine's profile goes to "
                          "<results-dir>/calibration/<host>.json)")
    if a.show:
        path = profile_path(a.results_dir)
        if not path.is_file():
            print(f"parbench calibrate: no profile at {path}; run `parbench calibrate` first")
            return 2
        try:
            profile = json.loads(path.read_text())
            report = report_lines(profile)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"parbench calibrate: the profile {path} cannot be read ({type(exc).__name__}: {exc}); "
                  "run `parbench calibrate` again")
            return 2
        print("\n".join(report))
        return 0
    from parbench.results import check_writable
    from parbench.sim.calibrate import calibrate

    check_writable(a.results_dir)  # minutes of measuring must not end in a profile that cannot be saved
    print("\n".join(report_lines(calibrate(quick=a.quick, results_dir=a.results_dir))))
    return 0


def handle_nccl_tests(a: argparse.Namespace) -> int:
    """Fit the logs, write the cluster with their links, print the fits and where the file went."""
    from pathlib import Path

    from parbench.config import ConfigError
    from parbench.results import check_writable
    from parbench.sim import nccl_tests
    from parbench.sim.hardware import cluster_files_dir, cluster_to_dict, load_cluster

    if a.show:
        raise ConfigError("--show prints a calibrated profile; --nccl-tests fits logs: give one of them")
    try:
        a.cluster = a.cluster or "h100-sxm"
        base = load_cluster(a.cluster, results_dir=a.results_dir)
        logs = [nccl_tests.read(spec) for spec in a.nccl_tests]
        cluster, reports = nccl_tests.apply(base, logs)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    out = Path(a.out) if a.out else cluster_files_dir(a.results_dir) / f"{Path(a.cluster).stem}-measured.json"
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give the cluster file's name")
    if not a.out:
        check_writable(a.results_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
    name = out.stem
    data = {**cluster_to_dict(cluster), "name": name, "meta": {"nccl_tests": [
        {"log": r.log.path, "collective": r.log.kind, "ranks": r.log.ranks, "nodes": r.log.nodes, "link": r.level,
         "bus_bandwidth_bytes_per_s": r.bus_bandwidth_bytes_per_s, "latency_s": r.latency_s,
         "heldout_error_pct": r.fit.heldout_error_pct, "unphysical": list(r.reasons)} for r in reports],
        "base": base.name}}
    try:
        out.write_text(json.dumps(data, indent=1) + "\n")
    except OSError as exc:
        raise ConfigError(f"--out {out} cannot be written: {exc.strerror}") from None
    print("\n".join(nccl_tests.report_lines(reports)))
    print(f"wrote {out}: {base.name} with these links; `parbench simulate --cluster {out} ...` predicts on it")
    return 0


# (fit key prefix, what alpha is, alpha unit and scale, what 1/beta is, its unit and scale)
PARAMETERS = {
    "gemm": ("GEMM overhead", "us", 1e6, "GEMM rate", "GFLOP/s", 1e-9),
    "elementwise": ("op overhead", "us", 1e6, "memory bandwidth", "GB/s", 1e-9),
}
LINK = ("latency", "us", 1e6, "bandwidth", "GB/s", 1e-9)


def report_lines(profile: dict) -> list[str]:
    """An aligned table: every fitted parameter with its unit, 95% interval, held-out error and status."""
    from parbench.sim.hardware import BURST_SUFFIX

    fits = profile["fit"]
    head = f"{'fit':<22}{'parameter':<18}{'value':>12}{'+-95%':>11} {'unit':<8}{'held-out med %':>15}{'max %':>8}  status"
    lines = [head, "-" * len(head)]
    for key, f in fits.items():
        if "beta" not in f:
            continue
        names = PARAMETERS.get(key.split("@")[0] if key.endswith(" threads") else key, LINK)
        lines += _rows(key, f, names)
    if any(BURST_SUFFIX + "@" in key for key in fits):
        lines.append(f"collectives timed each after ~1 ms of compute; *{BURST_SUFFIX}: issued back to back, no compute "
                     "between, as ZeRO-1 broadcasts its parameters")
    c = profile["cluster"]
    slow = ", ".join(f"{n} ranks x{v:.2f}" for n, v in c["compute_slowdown"].items())
    lines.append(f"\ncompute per rank when ranks compute at once: {slow}")
    for t, rates in sorted((int(t), r) for t, r in (c.get("threaded") or {}).items()):
        times = {k: f"x{rates.get(k, c[k]) / c[k]:.2f}" if c[k] else "?"  # at t threads over one thread's
                 for k in ("peak_flops", "memory_bandwidth_bytes_per_s", "stream_bandwidth_bytes_per_s")}
        attention = (f", flash attention x{rates['attention_efficiency'] * rates.get('peak_flops', c['peak_flops']) / (c['attention_efficiency'] * c['peak_flops']):.2f}"
                     if rates.get("attention_efficiency") and c.get("attention_efficiency") and c["peak_flops"] else "")
        lines.append(f"one rank of {t} intra-op threads: GEMMs {times['peak_flops']} the one-thread rate, an add "
                     f"{times['memory_bandwidth_bytes_per_s']}, past the caches {times['stream_bandwidth_bytes_per_s']}"
                     f"{attention}, exp/erf {rates.get('transcendental_s_per_element', c['transcendental_s_per_element']) * 1e9:.2f} "
                     "ns per element beyond memory")
    lines.append(f"framework overhead per training-path op: {fits['framework_op_overhead_s']['alpha'] * 1e6:.1f} us")
    if "stream_bandwidth" in fits:
        mib = [r["bytes"] / 3 / 2**20 for r in fits["stream_bandwidth"]["rows"]]
        lines.append(f"DRAM bandwidth (an add on arrays of {min(mib):.0f}-{max(mib):.0f} MiB, past the caches; the optimizer's "
                     f"traffic): {fits['stream_bandwidth']['alpha'] * 1e-9:.1f} GB/s")
    if "cache_capacity" in fits:
        cache, rows = fits["cache_capacity"], fits["cache_capacity"]["rows"]
        inside = max(r["bytes_per_s"] for r in rows if not cache["alpha"] or r["bytes"] <= cache["alpha"])
        lines.append("elementwise ops past a core's caches (an add, bandwidth by operand bytes): " + (
            f"up to {cache['alpha'] / 2**20:.2f} MiB at up to {inside * 1e-9:.0f} GB/s, beyond it "
            f"{cache['beyond_bytes_per_s'] * 1e-9:.1f} GB/s" if cache["alpha"] else
            f"no fall up to {rows[-1]['bytes'] / 2**20:.0f} MiB (best {inside * 1e-9:.0f} GB/s): one level"))
    for term, what in IN_STEP_TERMS.items():
        steps = {key.split("@")[1]: f for key, f in fits.items() if key.startswith(f"{term}@")}
        if steps:
            per_byte = term.endswith("_byte_overhead")  # its "collectives on the path" are the bytes on it
            per = ", ".join(f"{n} ranks {f['measured_s'] * 1e3:.1f} / {f['predicted_s'] * 1e3:.1f} ms over " + (
                f"{f['collectives_on_path'] / 2**20:.1f} MiB -> {f['alpha'] * 1e9:.2f} ns/byte" if per_byte else
                f"{f['collectives_on_path']:.0f} -> {f['alpha'] * 1e3:.2f} ms") for n, f in steps.items())
            lines.append(f"{what}: {per}")
    shares = {key.split("@")[1]: f for key, f in fits.items() if key.startswith("tp_step_compute_share@")}
    if shares:
        per = ", ".join(f"{n} ranks {f['alpha']:.0%} ({f['measured_comm_s'] * 1e3:.1f} ms measured, "
                        f"{f['predicted_comm_s_all_waited'] * 1e3:.1f} if all waited, "
                        f"{f['predicted_comm_s_none_waited'] * 1e3:.1f} if none)" for n, f in shares.items())
        lines.append("of that tensor-parallel overhead, the share the rank computes rather than waits (the probe's traced "
                     f"exposed communication): {per}")
    if "weight_read_bandwidth" in fits:
        w = fits["weight_read_bandwidth"]
        per = ", ".join(f"{'x'.join(map(str, r['shape']))} {r['model_s'] * 1e6:.0f} / {r['hot_s'] * 1e6:.0f} / "
                        f"{r['cold_s'] * 1e6:.0f} us" for r in w["rows"])
        lines.append("a Linear's weight brought in beyond its arithmetic (forward on few rows, rows x in x out: the GEMM "
                     f"fit's time / weight hot / a pass after its last use): {per} -> "
                     + (f"{w['alpha'] * 1e-9:.1f} GB/s" if w["alpha"] else "no slower than the fit: no such term"))
    for key, field, what in (("attention_efficiency", "efficiency", "flash attention, fraction of the GEMM rate (b x h x s x d)"),
                             ("backward_gemm_ratio", "ratio", "Linear backward GEMMs, rate over the forward's (rows x in x out)")):
        if key in fits:  # one figure per probe shape, then the median the profile uses
            per = ", ".join(f"{'x'.join(map(str, r['shape']))} {r[field]:.2f}" for r in fits[key]["rows"])
            lines.append(f"{what}: {per} -> {fits[key]['alpha']:.2f}")
    if "transcendental_s_per_element" in fits:
        per = ", ".join(f"{r['function']} {r['seconds_per_element'] * 1e9:.2f}" for r in fits["transcendental_s_per_element"]["rows"])
        lines.append(f"exp/erf functions, forward + backward ns per element: {per}; beyond their memory traffic "
                     f"{fits['transcendental_s_per_element']['alpha'] * 1e9:.2f} ns")
    if "framework" in fits:
        fw = fits["framework"]
        lines.append(f"torch wrappers' host cost: {fw['tp_linear_overhead_s'] * 1e6:.0f} us per tensor-parallel Linear "
                     f"+ {fw.get('tp_byte_overhead_s', 0.0) * 1e9:.2f} ns per byte its all-reduces carry, "
                     f"FSDP2 {fw['fsdp_unit_overhead_s'] * 1e6:.0f} us per unit + {fw['fsdp_param_overhead_s'] * 1e6:.0f} us "
                     f"per parameter + {fw.get('fsdp_byte_overhead_s', 0.0) * 1e9:.2f} ns per gathered byte "
                     f"(forward + backward of a micro-batch), {fw['dtensor_op_overhead_s'] * 1e6:.1f} us "
                     f"per optimizer op on a DTensor, pipeline schedule {fw.get('pipeline_action_overhead_s', 0.0) * 1e6:.0f} us "
                     f"per micro-batch and stage, DDP {fw.get('ddp_param_overhead_s', 0.0) * 1e6:.1f} us per parameter + "
                     f"{fw.get('ddp_byte_overhead_s', 0.0) * 1e9:.2f} ns per gradient byte")
        lines.append(f"optimizer step + zero_grad: {fw['optimizer_op_overhead_s'] * 1e6:.1f} us per op")
        if "tracing_fsdp_scale" in fw:  # profiles saved before it was measured lack it
            per = "; ".join(f"{r['workload']} FSDP2 {r['fsdp_untraced_added_s'] * 1e3:.2f} -> {r['fsdp_traced_added_s'] * 1e3:.2f} "
                            f"({r['fsdp_between_added_s'] * 1e3:.2f} between), tp {r['tp_untraced_added_s'] * 1e3:.2f} -> "
                            f"{r['tp_traced_added_s'] * 1e3:.2f} ({r['tp_between_added_s'] * 1e3:.2f} between)"
                            for r in fw.get("rows", []) if "fsdp_traced_added_s" in r)
            lines.append(f"wrappers traced, ms added per step untraced -> traced: {per} -> FSDP2 x{fw['tracing_fsdp_scale']:.2f}, "
                         f"{fw['tracing_fsdp_between_share']:.0%} between operators (the breakdown's other); tensor "
                         f"parallelism x{fw['tracing_tp_scale']:.2f}, {fw['tracing_tp_between_share']:.0%}")
        for r in fw.get("rows", []):
            if "iqr_s" in r:
                spread = ", ".join(f"{k} {r[k + '_s'] * 1e3:.2f} ms (IQR {v * 1e3:.2f})" for k, v in r["iqr_s"].items())
                lines.append(f"  {r['workload']} probe, wrapped - plain per step: {spread}")
    if "tracing_op_overhead_s" in fits:  # profiles saved before it was measured lack it
        t = fits["tracing_op_overhead_s"]
        per = ", ".join(f"{r['step']} {r['training_s_per_op'] * 1e6:.0f}" + (f" / {r['optimizer_s_per_op'] * 1e6:.0f}"
                                                                          if "optimizer_s_per_op" in r else "")
                        for r in t["rows"])
        large = [r for r in t["rows"] if "training_plain_s" in r and r.get("large")]
        added = sum(r["training_traced_s"] - r["training_plain_s"] for r in large) * 1e3
        shared = (f"{t['alpha'] * 1e6:.1f} us per op and {t['work_share']:.1%} of the operators' own work (the "
                  "reference steps' and the large steps' pooled equations)" if t.get("work_share") or
                  ("work_share" in t and not large) else
                  f"{t['alpha'] * 1e6:.1f} us per op, the reference steps' alone (the large steps' {added:+.1f} ms "
                  "traced gave no share of the work between 0 and 1: the machine's drift)" if "work_share" in t
                  else f"{t['alpha'] * 1e6:.1f} us")
        lines.append(f"tracing (the breakdown's traced steps), us added per training / optimizer op: {per} -> training "
                     f"{shared}; optimizer {t['optimizer'] * 1e6:.1f} us (seconds added over ops counted, all steps)"
                     + (f"; between training ops (the breakdown's other) {t['between'] * 1e6:.1f} us per op" if "between" in t else ""))
    ratios = ", ".join(f"{k.split('_')[-1]} {v:.2f}" for k, v in fits["step_scale"].items() if k != "alpha")
    lines.append(f"reference training steps, measured / op-level prediction: {ratios} -> step_scale {c['step_scale']:.2f}")
    bad = [k for k, f in fits.items() if f.get("status") == "unphysical"]
    lines.append(f"{len(bad)} unphysical fit(s) replaced by measured point estimates: {', '.join(bad)}" if bad
                 else "every fit is physical and used")
    meta = profile.get("meta", {})
    if "drift_pct" in meta:
        lines.append(drift_line(meta))
    if "seconds" in meta:
        lines.append(f"measured in {meta['seconds']:.0f} s" + (f", finished {meta['created_at']}" if "created_at" in meta else "")
                     + f" (load average {meta.get('load_average_1min', math.nan):.2f})"
                     + (f"; saved {meta['path']}" if meta.get("path") else ""))
    return lines


def drift_line(meta: dict) -> str:
    """How steady the machine was while the profile was measured (``parbench.sim.calibrate.machine_drift``)."""
    from parbench.sim.calibrate import DRIFT_LIMIT_PCT

    probe = meta["speed_probe_s"]
    line = (f"machine speed while measuring: the same compute probe took {min(probe) * 1e3:.2f}-{max(probe) * 1e3:.2f} ms "
            f"over {len(probe)} readings, drift {meta.get('compute_drift_pct', meta['drift_pct']):.0f}%")
    if "reference_drift_pct" in meta:
        line += (f"; the single-process reference steps moved {meta['reference_drift_pct']:.0f}% between the start and "
                 f"the end (median over {len(meta['reference_steps_start_s'])})")
    slower = {t: g for t, g in (meta.get("threaded_gemm_gain") or {}).items() if g < 1}
    if slower:
        line += "; " + ", ".join(f"with {t} threads the GEMM probe ran x{g:.2f} one thread's rate" for t, g in slower.items())
        return line + (": UNSTEADY, no faster on more cores: another load shared them while the threaded probes ran; "
                       "calibrate again on a quieter machine")
    if meta["steady"]:
        return line + f" (steady: <= {DRIFT_LIMIT_PCT:.0f}%)"
    return (line + f": UNSTEADY, above {DRIFT_LIMIT_PCT:.0f}%; step times predicted from this profile carry that "
            "error: calibrate again on a quieter machine")


def _rows(key: str, f: dict, names: tuple) -> list[str]:
    a_name, a_unit, a_scale, b_name, b_unit, b_scale = names
    status = "ok" if f.get("status", "ok") == "ok" else "UNPHYSICAL: " + "; ".join(f["reasons"]) + " -> point estimates used"
    rate = 1 / f["beta"] * b_scale if f["beta"] > 0 else math.inf
    # delta method: se(1/beta) = se(beta) / beta^2
    rate_ci = 1.96 * f.get("beta_se", math.nan) / f["beta"] ** 2 * b_scale if f["beta"] > 0 else math.nan
    out = [f"{key:<22}{a_name:<18}{f['alpha'] * a_scale:>12.3g}{1.96 * f.get('alpha_se', math.nan) * a_scale:>11.2g} "
           f"{a_unit:<8}{f['heldout_error_pct']:>15.1f}{f['heldout_max_error_pct']:>8.1f}  {status}",
           f"{'':<22}{b_name:<18}{rate:>12.3g}{rate_ci:>11.2g} {b_unit:<8}"]
    if f.get("used") == "point estimates":
        used_rate = 1 / f["used_beta"] * b_scale
        out.append(f"{'':<22}{'used instead':<18}{f['used_alpha'] * a_scale:>12.3g} {a_unit}, {used_rate:.3g} {b_unit}")
    return out
