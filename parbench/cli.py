"""The ``parbench`` command: parses arguments and hands them to the commands; no logic here."""

from __future__ import annotations

import argparse
import importlib
import sys

from parbench.commands import COMMAND_MODULES
from parbench.config import ConfigError

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    import parbench

    parser = argparse.ArgumentParser(prog="parbench", description=parbench.__doc__)
    __version__ = parbench.__version__

    parser.add_argument("--version", action="version", version=f"parbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ConfigError as exc:
        print(f"parbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
