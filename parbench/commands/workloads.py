"""``parbench workloads``: the built-in workloads and installed plugins (entry-point group
``parbench.workloads``), and with ``--inspect`` what each provides (units, tp plan, FLOPs)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("workloads", help="list built-in and plugin workloads", description=__doc__)
    p.add_argument("--inspect", action="store_true",
                   help="build each at its default shape: parameters, pipeline units, tp plan")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench import workloads
    from parbench.config import ConfigError
    from parbench.progress import Status

    status = Status("parbench workloads")
    catalog = workloads.catalog()
    for i, row in enumerate(catalog, 1):
        status.done()
        print(f"{row['name']:<14} {row['source']}", flush=True)
        if not a.inspect:
            continue
        # building a model (and importing transformers for hf-*) takes seconds: say which one
        status.phase(f"building {row['name']} ({i}/{len(catalog)}) at its default shape")
        try:
            d = workloads.describe(row["name"])
        except ConfigError as exc:
            status.done()
            print(f"{'':<14} cannot build: {exc}")
            continue
        status.done()
        tp = "yes" if d["tp_plan"] else "no"
        print(f"{'':<14} {d['description']}\n{'':<14} parameters={d['parameters']} "
              f"pipeline_units={d['pipeline_units']} tp_plan={tp} "
              f"forward_flops_per_sample={d['forward_flops_per_sample']}")
    print("\nAny workload: --workload package.module:factory or --workload path/to/file.py:factory")
    return 0
