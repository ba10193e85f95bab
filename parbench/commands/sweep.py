"""``parbench sweep [FILE]``: a grid of real runs (the embedded default without FILE), resumable,
failure-isolating; a summary table at the end. Exit 1 if any run failed, 2 on a bad sweep file.

With ``--nnodes N --nproc-per-node R`` (the same command on every node) each run of world size
N x R is one torchrun job across the nodes; node 0 writes the records and the manifest."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

from parbench.config import ConfigError
from parbench.multinode import NodeLayout, add_node_options
from parbench.multinode.layout import wants_nodes
from parbench.sweep.spec import TOP_KEYS, Key


def _csv(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        try:
            return [kind(x.strip()) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
    return parse


FLAG_NAMES = {"timeout_s": "timeout"}
"""Keys whose option is not ``--<key>`` (kept as users know them)."""
FILE_ONLY = ("description", "meshes", "workloads")
"""Keys a sweep file sets, with no command-line override."""


def _parser(key: Key) -> Callable[[str], Any] | None:
    """How an override's text becomes the key's value (None: a switch); the schema then checks it."""
    if key.kind == "bool":
        return None
    if key.kind.startswith("list[int"):
        return _csv(int)
    if key.kind.startswith("list") or key.kind == "strategies":
        return _csv(str)
    return {"str": str, "number>0": float}.get(key.kind, int)


# option -> (spec key, parser, help), one per key of the sweep schema: overrides are validated like the file's
OVERRIDES = {FLAG_NAMES.get(k, k): (k, _parser(key), ("comma-separated: " if key.kind.startswith("list") else "") + key.doc)
             for k, key in TOP_KEYS.items() if k not in FILE_ONLY}


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="a grid of runs from a TOML file (default: the embedded sweep)",
                       description=__doc__)
    p.add_argument("file", nargs="?", help="sweep file (TOML); see README 'Sweeps' and parbench/sweeps/")
    for opt, (_, kind, help_) in OVERRIDES.items():
        if kind is None:  # a switch: present = true
            p.add_argument(f"--{opt.replace('_', '-')}", dest=opt, action="store_const", const=True, help=help_)
            continue
        p.add_argument(f"--{opt.replace('_', '-')}", dest=opt, type=kind, default=None, help=help_)
    p.add_argument("--results-dir", default="results", help="where the runs and the sweep manifest go")
    p.add_argument("--force", action="store_true", help="rerun points already recorded ok")
    p.add_argument("--dry-run", action="store_true", help="list the points and skips, run nothing")
    add_node_options(p)
    p.set_defaults(handler=handle)


def overrides(a: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for opt, (key, _, _) in OVERRIDES.items():
        value = getattr(a, opt)
        if value is not None:
            out[key] = "all" if key == "strategies" and value == ["all"] else value
    return out


def node_layout(a: argparse.Namespace) -> NodeLayout | None:
    """The node options as a layout; None for a one-node sweep (parbench's own launcher)."""
    if not wants_nodes(a):
        return None
    if a.nproc_per_node < 1:
        raise ConfigError("a multi-node sweep needs --nproc-per-node (it runs the points of world size "
                          "nnodes x nproc-per-node)")
    return NodeLayout(nnodes=a.nnodes, nproc_per_node=a.nproc_per_node, node_rank=a.node_rank,
                      master_addr=a.master_addr, master_port=a.master_port, rdzv_endpoint=a.rdzv_endpoint,
                      rdzv_id=a.rdzv_id)


def handle(a: argparse.Namespace) -> int:
    from rich.console import Console

    from parbench.sweep import execute, load_spec, plan
    from parbench.sweep.nodes import execute_nodes, for_layout
    from parbench.sweep.progress import progress_bar
    from parbench.sweep.report import print_summary
    from parbench.results import check_writable

    console = Console()
    if not console.is_terminal:  # logs and CI: wide enough for the summary table on one line per point
        console = Console(width=200)
    layout = node_layout(a)  # ConfigError -> exit 2, as for every check up to the first run
    the_plan = plan(load_spec(a.file, overrides(a)), single_host=layout is None)
    if layout is not None:
        the_plan = for_layout(the_plan, layout)
    results_dir = Path(a.results_dir)
    if not a.dry_run:
        check_writable(results_dir)
    if layout is None and not a.dry_run:
        # torch: seconds to import, so not before the checks above
        from parbench.distributed import prestart
        from parbench.workloads import preload_modules

        # only now: nothing is started for a sweep that cannot run
        prestart(*preload_modules(p.config.workload.name for p in the_plan.points))
    nodes = "" if layout is None else f" on {layout.nnodes} nodes x {layout.nproc_per_node} ranks (node {layout.node_rank})"
    console.print(f"sweep {the_plan.spec.sweep_id}{nodes}: {len(the_plan.points)} points x {the_plan.spec.repeats} "
                  f"repeats = {the_plan.runs} runs, {len(the_plan.skipped)} points skipped -> {results_dir}/")
    if a.dry_run:
        for p in the_plan.points:
            console.print(f"  run  {p.label}")
        for s in the_plan.skipped:
            console.print(f"  skip {s.label}: {s.reason}")
        return 0
    t0 = time.perf_counter()
    with progress_bar(console, the_plan.runs) as on_event:
        if layout is None:
            outcome = execute(the_plan, results_dir, force=a.force, progress=on_event)
        else:
            outcome = execute_nodes(the_plan, results_dir, layout, force=a.force, progress=_no_record(on_event))
    if outcome.storage_error:  # one line, no traceback: what happened, what is kept, what to do
        manifest = ("the manifest says failed" if outcome.manifest_written else
                    "the manifest could not be updated (the next sweep here marks it interrupted)")
        print(f"parbench sweep: error: results could not be written: {outcome.storage_error}; the "
              f"{len(outcome.records)} records written before are intact, {manifest}; free space and rerun "
              "the same command to resume", file=sys.stderr)
        return 1
    if layout is not None and layout.node_rank != 0:
        console.print(f"node {layout.node_rank}: {the_plan.runs - outcome.resumed} runs done "
                      f"({outcome.resumed} already recorded); node 0 wrote the records and the manifest")
    else:
        print_summary(the_plan, outcome, results_dir, time.perf_counter() - t0, console)
    if outcome.interrupted:
        console.print("[yellow]interrupted[/]: rerun the same command to resume")
        return 130
    return 1 if outcome.failed else 0


def _no_record(on_event):
    """A node that wrote no record (another held rank 0) advances the bar as for a skipped run."""
    def event(kind: str, point, repeat: int, record) -> None:
        on_event("skip" if kind == "done" and record is None else kind, point, repeat, record)
    return event
