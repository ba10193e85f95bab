"""One module per subcommand, each with ``add_parser(subparsers)`` setting ``handler``.

Order here is the order of ``parbench --help``.
"""

COMMAND_MODULES = (
    "parbench.commands.run",
)
