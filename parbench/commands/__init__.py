"""One module per subcommand, each with ``add_parser(subparsers)`` setting ``handler``.

Order here is the order of ``parbench --help``.
"""

COMMAND_MODULES = (
    "parbench.commands.run",
    "parbench.commands.sweep",
    "parbench.commands.doctor",
    "parbench.commands.results",
    "parbench.commands.trace",
    "parbench.commands.dashboard",
    "parbench.commands.report",
    "parbench.commands.workloads",
    "parbench.commands.cluster",
    "parbench.commands.slurm",
    "parbench.commands.bench",
    "parbench.commands.simulate",
    "parbench.commands.calibrate",
    "parbench.commands.validate",
)
