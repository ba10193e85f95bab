"""A ready sbatch script that runs a parbench run or sweep on N Slurm nodes through torchrun.

One srun task per node starts that node's ``parbench ... --nnodes N --node-rank $SLURM_NODEID``;
each starts one torchrun agent, which starts the node's ranks. The rendezvous comes from the
allocation: the first host of ``$SLURM_JOB_NODELIST`` (``scontrol show hostnames``) is the
master (static rendezvous) or the c10d endpoint, with ``$SLURM_JOB_ID`` as the c10d job id.
The node holding global rank 0 writes the record into the results directory (use a shared one).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

RENDEZVOUS = ("static", "c10d")
_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$")


@dataclass(frozen=True, kw_only=True)
class SlurmJob:
    """The allocation and how each node starts parbench."""

    nodes: int
    """Nodes to allocate (``#SBATCH --nodes``); one torchrun agent each."""
    ranks_per_node: int
    """Rank processes per node (torchrun ``--nproc-per-node``)."""
    job_name: str = "parbench"
    time: str = "01:00:00"
    """Wall-clock limit, Slurm syntax ([days-]hours:minutes:seconds)."""
    partition: str | None = None
    account: str | None = None
    cpus_per_task: int | None = None
    """CPUs for each node's task (its ranks share them); None: Slurm's default."""
    gpus_per_node: int | None = None
    rendezvous: str = "static"
    """``static`` (--master-addr/--master-port, node rank = SLURM_NODEID) or ``c10d`` (--rdzv-endpoint)."""
    master_port: int = 29500
    python: str = "python"
    """Interpreter on the compute nodes that has parbench installed."""
    setup: tuple[str, ...] = ()
    """Shell lines run before srun (``module load ...``, ``source .venv/bin/activate``)."""
    output: str = "parbench-%j.out"

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.ranks_per_node < 1:
            raise ValueError(f"nodes={self.nodes} and ranks_per_node={self.ranks_per_node} must be >= 1")
        for key in ("cpus_per_task", "gpus_per_node"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ValueError(f"{key}={getattr(self, key)} must be >= 1 (leave it out for Slurm's default)")
        for key in ("job_name", "time", "partition", "account", "python", "output"):
            value = getattr(self, key)
            if value is not None and not value:
                raise ValueError(f"{key} is empty")
            check_text(value, key)
            if value is not None and "packjob" in value.lower():  # sbatch blanks this word in a directive line
                raise ValueError(f"{key} {value!r}: sbatch erases the word 'packjob' from #SBATCH lines")
        for line in self.setup:
            check_text(line, "setup line")
        if self.rendezvous not in RENDEZVOUS:
            raise ValueError(f"rendezvous={self.rendezvous!r}; valid: {', '.join(RENDEZVOUS)}")
        if not _TIME.match(self.time):
            raise ValueError(f"time={self.time!r} is not a Slurm time limit (e.g. 01:00:00 or 1-12:00:00)")
        if not 0 < self.master_port < 65536:
            raise ValueError(f"master_port={self.master_port} is not a TCP port")


def check_text(value: str | None, what: str) -> None:
    """Refuse control characters (every non-printable one): a newline in a value would end its ``#SBATCH`` line and turn the
    rest into shell code, and sbatch stops reading directives at the first line that is not one."""
    bad = next((ch for ch in value or "" if not ch.isprintable()), None)  # C0/C1 controls, line separators
    if bad is not None:
        raise ValueError(f"{what} {value!r} contains the control character {bad!r}")


def directives(job: SlurmJob) -> dict[str, str]:
    """Option -> value of every ``#SBATCH`` line (values as sbatch must read them back)."""
    pairs = [("job-name", job.job_name), ("nodes", job.nodes), ("ntasks-per-node", 1), ("time", job.time),
             ("output", job.output), ("partition", job.partition), ("account", job.account),
             ("cpus-per-task", job.cpus_per_task), ("gpus-per-node", job.gpus_per_node)]
    return {k: str(v) for k, v in pairs if v is not None}


def sbatch_quote(value: str) -> str:
    """``value`` as sbatch reads it back from a ``#SBATCH`` line. sbatch's own parser (not bash's)
    reads a value up to whitespace or an unquoted '#', groups with '"' or "'", and takes a backslash
    as an escape even inside quotes (so shell quoting would lose backslashes): double quotes, with
    backslash and '"' escaped, keep every character."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_options(job: SlurmJob) -> str:
    """The node options, evaluated inside each srun task (SLURM_NODEID differs per node)."""
    common = f'--nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node {job.ranks_per_node}'
    if job.rendezvous == "c10d":
        return f'{common} --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$SLURM_JOB_ID"'
    return f'{common} --node-rank "$SLURM_NODEID" --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT"'


def sbatch_script(job: SlurmJob, argv: list[str]) -> str:
    """The script for ``parbench <argv>`` (``run ...`` or ``sweep ...``) on ``job.nodes`` nodes."""
    if not argv or argv[0] not in ("run", "sweep"):
        raise ValueError("the job must be a `parbench run ...` or `parbench sweep ...` command line")
    command = f"{shlex.quote(job.python)} -m parbench {shlex.join(argv)} {node_options(job)}"
    lines = [
        "#!/bin/bash",
        f"# parbench on {job.nodes} node(s) x {job.ranks_per_node} rank(s): written by `parbench slurm`",
        *(f"#SBATCH --{k}={sbatch_quote(v)}" for k, v in directives(job).items()),
        "set -euo pipefail",
        *job.setup,
        "# rendezvous from the allocation: its first host runs node 0's torchrun agent (the store)",
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"',  # sed reads all: no SIGPIPE under pipefail
        f'MASTER_PORT="${{MASTER_PORT:-{job.master_port}}}"',
        "export MASTER_ADDR MASTER_PORT OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-1}\"",
        "# one task per node; the single quotes defer $SLURM_NODEID to each node's task",
        f"srun --nodes={job.nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote('exec ' + command)}",
    ]
    return "\n".join(lines) + "\n"


def check_syntax(script: str) -> None:
    """``bash -n`` on the script (the setup lines are the user's own shell code); ValueError naming
    bash's complaint. Nothing runs: -n only parses."""
    import subprocess

    out = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise ValueError(f"the script would not parse in bash (check --setup): {out.stderr.strip()}")
