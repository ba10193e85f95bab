"""``parbench workloads``: the built-in workloads and installed plugins (entry-point group
``parbench.workloads``), and with ``--inspect`` what each provides (units, tp plan, FLOPs)."""

from __future__ import annotations

import argparse

from parbench.config import RunConfig
from parbench.validation import TIMEOUT_LIMIT_S


def add_parser(sub) -> None:
    p = sub.add_parser("workloads", help="list built-in and plugin workloads", description=__doc__)
    p.add_argument("--inspect", action="store_true",
                   help="build each at its default shape and check it as `parbench run` would: parameters, "
                        "pipeline units, tp plan, or why a run would refuse it")
    p.add_argument("--timeout", type=positive_seconds, default=RunConfig.timeout_s, metavar="SECONDS",
                   help="with --inspect: how long a plugin's import, build and check may take before it is named "
                        "as hanging (default: a run's, %(default)g s)")
    p.set_defaults(handler=handle)


def positive_seconds(text: str) -> float:
    """A finite number of seconds above zero (argparse's type for --timeout)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= TIMEOUT_LIMIT_S:
        raise argparse.ArgumentTypeError(f"{text} must be a number of seconds above 0, at most {TIMEOUT_LIMIT_S:g}")
    return value


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
            d = workloads.describe(row["name"], timeout_s=a.timeout)
        except ConfigError as exc:
            status.done()
            print(f"{'':<14} cannot run: {exc}")
            continue
        status.done()
        tp = "yes" if d["tp_plan"] else "no"
        if d["description"]:
            print(f"{'':<14} {d['description']}")
        print(f"{'':<14} parameters={d['parameters']} pipeline_units={d['pipeline_units']} tp_plan={tp} "
              f"forward_flops_per_sample={d['forward_flops_per_sample']}")
        if d["tp_plan_problem"]:
            print(f"{'':<14} tp refused: {d['tp_plan_problem']}")
    print("\nAny workload: --workload package.module:factory or --workload path/to/file.py:factory")
    return 0
