"""``parbench slurm``: write a ready sbatch script for a parbench run or sweep on N nodes.

Example: ``parbench slurm --nodes 4 --ranks-per-node 8 --partition gpu -o sweep.sbatch -- sweep --grid g.toml``
then ``sbatch sweep.sbatch``. srun starts one torchrun agent per node; the rendezvous is the
allocation's first host; the node holding rank 0 writes the records.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from parbench.config import ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("slurm", help="write an sbatch script for a multi-node run or sweep", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--ranks-per-node", type=int, required=True)
    p.add_argument("--job-name", default="parbench")
    p.add_argument("--time", default="01:00:00", help="Slurm time limit")
    p.add_argument("--partition", default=None)
    p.add_argument("--account", default=None)
    p.add_argument("--cpus-per-task", type=int, default=None)
    p.add_argument("--gpus-per-node", type=int, default=None)
    p.add_argument("--rendezvous", default="static", help="static (master addr/port) or c10d")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--python", default="python", help="interpreter with parbench on the compute nodes")
    p.add_argument("--setup", action="append", default=[], help="shell line before srun (repeatable)")
    p.add_argument("-o", "--output-script", default=None, help="file to write (default: stdout)")
    p.add_argument("parbench_args", nargs=argparse.REMAINDER, help="-- run|sweep <options>")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.slurm import SlurmJob, sbatch_script

    argv = a.parbench_args[1:] if a.parbench_args[:1] == ["--"] else a.parbench_args
    try:
        job = SlurmJob(nodes=a.nodes, ranks_per_node=a.ranks_per_node, job_name=a.job_name, time=a.time,
                       partition=a.partition, account=a.account, cpus_per_task=a.cpus_per_task,
                       gpus_per_node=a.gpus_per_node, rendezvous=a.rendezvous, master_port=a.master_port,
                       python=a.python, setup=tuple(a.setup))
        script = sbatch_script(job, argv)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if a.output_script is None:
        sys.stdout.write(script)
        return 0
    Path(a.output_script).write_text(script)
    Path(a.output_script).chmod(0o755)
    print(f"wrote {a.output_script}: submit with `sbatch {a.output_script}`")
    return 0
