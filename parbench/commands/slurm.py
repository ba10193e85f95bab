"""``parbench slurm``: write a ready sbatch script for a parbench run or sweep on N nodes.

Example: ``parbench slurm --nodes 4 --ranks-per-node 8 --partition gpu -o fsdp.sbatch -- run --strategy fsdp --workload transformer``
then ``sbatch fsdp.sbatch``. srun starts one torchrun agent per node; the rendezvous is the
allocation's first host; the node holding rank 0 writes the records.

The wrapped command is checked as ``parbench run`` / ``sweep`` would check it on N nodes (its
own node options are the script's to set); every value is quoted, control characters are refused,
and the script must parse in bash.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from parbench.config import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("slurm", help="write an sbatch script for a multi-node run or sweep", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, required=True, help="nodes to allocate (sbatch --nodes)")
    p.add_argument("--ranks-per-node", type=int, required=True, help="rank processes per node (torchrun --nproc-per-node)")
    p.add_argument("--job-name", default="parbench", help="sbatch --job-name")
    p.add_argument("--time", default="01:00:00", help="Slurm time limit")
    p.add_argument("--partition", default=None, help="sbatch --partition (default: the cluster's default)")
    p.add_argument("--account", default=None, help="sbatch --account (default: none)")
    p.add_argument("--cpus-per-task", type=int, default=None, help="sbatch --cpus-per-task (default: not set)")
    p.add_argument("--gpus-per-node", type=int, default=None, help="sbatch --gpus-per-node (default: not set)")
    p.add_argument("--rendezvous", default="static", help="static (master addr/port) or c10d")
    p.add_argument("--master-port", type=int, default=29500, help="rendezvous port on the first node")
    p.add_argument("--python", default="python", help="interpreter with parbench on the compute nodes")
    p.add_argument("--setup", action="append", default=[], help="shell line before srun (repeatable)")
    p.add_argument("-o", "--output-script", default=None, help="file to write (default: stdout)")
    p.add_argument("parbench_args", nargs=argparse.REMAINDER, help="-- run|sweep <options>")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.slurm import SlurmJob, check_syntax, check_text, sbatch_script

    argv = a.parbench_args[1:] if a.parbench_args[:1] == ["--"] else a.parbench_args
    try:
        job = SlurmJob(nodes=a.nodes, ranks_per_node=a.ranks_per_node, job_name=a.job_name, time=a.time,
                       partition=a.partition, account=a.account, cpus_per_task=a.cpus_per_task,
                       gpus_per_node=a.gpus_per_node, rendezvous=a.rendezvous, master_port=a.master_port,
                       python=a.python, setup=tuple(a.setup))
        for arg in argv:
            check_text(arg, "argument")
        validate_wrapped(argv, job)
        script = sbatch_script(job, argv)
        check_syntax(script)
    except ValueError as exc:  # ConfigError is one
        raise ConfigError(str(exc)) from None
    if a.output_script is None:
        sys.stdout.write(script)
        return 0
    Path(a.output_script).write_text(script)
    Path(a.output_script).chmod(0o755)
    print(f"wrote {a.output_script}: submit with `sbatch {a.output_script}`")
    return 0


NODE_OPTIONS = ("nnodes", "node_rank", "nproc_per_node", "master_addr", "master_port", "rdzv_endpoint", "rdzv_id")


def validate_wrapped(argv: list[str], job) -> None:
    """Parse and check ``parbench <argv>`` as run/sweep do, on ``job.nodes`` x ``job.ranks_per_node``
    ranks: ConfigError naming what is wrong. The environment is not checked: the compute nodes'
    GPUs and memory are not this machine's."""
    if not argv or argv[0] not in ("run", "sweep"):
        raise ConfigError("the job must be a `parbench run ...` or `parbench sweep ...` command line (after --)")
    ns, defaults = _parse(argv), _parse(argv[:1])
    given = [o for o in NODE_OPTIONS if getattr(ns, o) != getattr(defaults, o)]
    if given:
        raise ConfigError(f"remove --{given[0].replace('_', '-')} from the wrapped command: the script sets the "
                          "node options from the allocation")
    ns.nnodes, ns.nproc_per_node = job.nodes, job.ranks_per_node
    if argv[0] == "run":
        from parbench.commands.run import config_from_args
        from parbench.multinode import layout_from_args

        layout_from_args(ns)  # fills world_size = nodes x ranks, or names the mismatch
        config_from_args(ns)
    else:
        from parbench.commands.sweep import node_layout, overrides
        from parbench.sweep import load_spec, plan
        from parbench.sweep.nodes import for_layout

        the_plan = plan(load_spec(ns.file, overrides(ns)), single_host=False, environment=False)
        if job.nodes > 1:
            for_layout(the_plan, node_layout(ns))


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from parbench.cli import build_parser

    return build_parser()


def _parse(argv: list[str]) -> argparse.Namespace:
    """argparse's own checks; its message (normally printed, then exit 2) becomes a ConfigError."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return _parser().parse_args(argv)
    except SystemExit:
        last = err.getvalue().strip().splitlines()[-1:] or ["invalid"]
        raise ConfigError(f"the wrapped command `parbench {' '.join(argv)}`: {last[0]}") from None
