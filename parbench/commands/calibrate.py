"""``parbench calibrate``: micro-benchmark this machine (GEMMs, memory-bound ops, gloo collectives at
group sizes 2 and 4), fit the simulator's constants and save them as results/calibration/<host>.json."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this machine for the simulator", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (~20 s; for tests)")
    p.add_argument("--results-dir", default="results", help="the profile goes to <dir>/calibration/<host>.json")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.sim.calibrate import calibrate

    profile = calibrate(quick=a.quick, results_dir=a.results_dir)
    c, fits = profile["cluster"], profile["fit"]
    print(f"GEMM: {c['peak_flops'] / 1e9:.2f} GFLOP/s + {c['gemm_overhead_s'] * 1e6:.1f} us per call "
          f"(held-out error {fits['gemm']['heldout_error_pct']:.1f}%)")
    print(f"memory-bound: {c['memory_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s + {c['op_overhead_s'] * 1e6:.1f} us per op "
          f"(held-out error {fits['elementwise']['heldout_error_pct']:.1f}%)")
    print(f"{'collective':<16}{'n':>3}{'alpha us':>10}{'GB/s':>9}{'held-out err %':>16}{'max %':>8}")
    for key, f in fits.items():
        if key.startswith("compute_slowdown@") or key == "step_scale":
            continue
        if "@" in key:
            kind, n = key.split("@")
            bw = 1 / f["beta"] / 1e9 if f["beta"] > 0 else float("inf")
            print(f"{kind:<16}{n:>3}{f['alpha'] * 1e6:>10.1f}{bw:>9.2f}{f['heldout_error_pct']:>16.1f}"
                  f"{f['heldout_max_error_pct']:>8.1f}")
    slow = ", ".join(f"{n} ranks x{v:.2f}" for n, v in c["compute_slowdown"].items())
    print(f"compute per rank when ranks compute at once: {slow}")
    ratios = ", ".join(f"{k.split('_')[-1]} {v:.2f}" for k, v in fits["step_scale"].items() if k != "alpha")
    print(f"reference training steps, measured / op-level prediction: {ratios} -> step_scale {c['step_scale']:.2f}")
    print(f"saved {profile['meta'].get('path')} in {profile['meta']['seconds']:.0f} s")
    return 0
