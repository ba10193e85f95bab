"""``parbench run``: one real training run, a summary on screen, one record in the results directory."""

from __future__ import annotations

import argparse
import sys

from parbench.multinode import add_node_options, layout_from_args
from parbench.options import add_run_options, config_from_args  # noqa: F401 - parbench slurm parses run commands with them


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="one real training run", description=__doc__)
    add_run_options(p)
    add_node_options(p)
    p.add_argument("--results-dir", default="results", help="where the record goes (runs/<run_id>.json)")
    p.add_argument("--no-save", action="store_true", help="print the summary, write no record")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.results import check_writable, is_storage_error

    layout = layout_from_args(a)  # --nnodes > 1: torchrun on every node (parbench.multinode)
    cfg = config_from_args(a)  # ConfigError -> exit 2 before anything is spawned
    if not a.no_save:
        check_writable(a.results_dir)  # a measurement must never be lost to an unwritable directory
    # torch and the strategies only now (5-6 s to import on a 2-core machine): bad input is refused in well
    # under a second
    from parbench.launch import measure_run, save
    from parbench.summary import print_run
    if layout is not None:
        from parbench.multinode.launch import node_command

        return node_command(cfg, layout, results_dir=None if a.no_save else a.results_dir)
    record, ranks = measure_with_status(cfg, measure_run)
    if not a.no_save:
        try:
            save(a.results_dir, record, ranks)
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            print_run(record, None)  # the measurement is at least on screen
            print(f"parbench run: error: the record could not be written: {exc.strerror} ({exc.filename}); "
                  "the summary above is all that is kept of this run", file=sys.stderr)
            return 1
    print_run(record, None if a.no_save else a.results_dir)
    return 0 if record["status"] == "ok" else 1


def measure_with_status(cfg, measure_run):
    """``measure_run(cfg)`` with a status line on a terminal: this process names the launch, rank 0
    (of the run, then of the single-process reference) each of its phases, on the same line."""
    import os

    from parbench import progress

    status = progress.Status("parbench run")
    if status.on:
        os.environ[progress.ENV] = "1"  # the rank processes start after this and inherit it
    status.phase(f"launching {cfg.world_size} rank(s): {cfg.strategy.value} on {cfg.workload.name}")
    try:
        return measure_run(cfg)
    finally:
        status.done()
