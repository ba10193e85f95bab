"""One module per subcommand, each with ``add_parser(subparsers)`` setting ``handler``.

Order here is the order of ``parbench --help``.
"""

COMMAND_MODULES = tuple(f"parbench.commands.{name}" for name in (
    "run", "sweep", "doctor", "results", "trace", "dashboard", "report", "workloads", "cluster", "slurm", "bench",
    "simulate", "calibrate", "validate"))
