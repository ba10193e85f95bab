"""``parbench validate``: predict every measured run in the results directory on this machine's
calibrated profile; exact communication bytes, memory and step-time errors, and a summary."""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="simulator predictions vs every measured run", description=__doc__)
    p.add_argument("--results-dir", default="results")
    p.add_argument("--cluster", default="local", help="profile to predict on (default: the calibrated local one)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--published", action="store_true", help="also compare with published at-scale measurements")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.sim.hardware import load_cluster
    from parbench.sim.validate import summarize, validation_rows

    try:
        cluster = load_cluster(a.cluster, results_dir=a.results_dir)
    except FileNotFoundError as exc:
        print(f"parbench validate: {exc}")
        return 2
    rows, skipped = validation_rows(a.results_dir, cluster)
    summary = summarize(rows)
    published = _published() if a.published else []
    if a.format == "json":
        print(json.dumps({"summary": summary, "runs": rows, "skipped": skipped, "published": published}, default=str))
        return 0 if summary["comm_bytes_exact"] == summary["runs"] else 1
    _print_rows(rows)
    for s in skipped:
        print(f"skipped {s}")
    print(f"\n{summary['runs']} runs; comm bytes exact in {summary['comm_bytes_exact']}; "
          f"memory max error {summary['memory_max_error_pct']:.2f}%; step time |error| median "
          f"{summary['step_time_median_error_pct']:.1f}%, mean {summary['step_time_mean_error_pct']:.1f}%, "
          f"max {summary['step_time_max_error_pct']:.1f}%; throughput Spearman {summary['throughput_spearman']:.3f}")
    for row in published:
        print(f"published {row['name']}: measured {row['measured']:.3g} {row['unit']}, predicted "
              f"{row['predicted']:.3g} ({row['error_pct']:+.1f}%)  [{row['source']}]")
    return 0 if summary["comm_bytes_exact"] == summary["runs"] else 1


def _published() -> list[dict]:
    from parbench.sim.published import compare_published

    return compare_published()


def _print_rows(rows: list[dict]) -> None:
    head = f"{'strategy':<9}{'W':>3} {'workload':<12}{'bytes':>7}{'mem err%':>9}{'t meas ms':>11}{'t pred ms':>11}{'err%':>7}"
    print(head)
    for r in rows:
        mem = max(r[f"mem_{k}_error_pct"] for k in ("param", "grad", "optim"))
        print(f"{r['strategy']:<9}{r['world_size']:>3} {r['workload']:<12}{'exact' if r['comm_bytes_exact'] else 'DIFF':>7}"
              f"{mem:>9.2f}{r['step_time_measured_s'] * 1e3:>11.2f}{r['step_time_predicted_s'] * 1e3:>11.2f}"
              f"{r['step_time_error_pct']:>7.1f}")
