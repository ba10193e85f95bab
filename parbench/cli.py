"""The parbench command: parses arguments and hands them to the commands; no logic here."""

from __future__ import annotations

import argparse
import importlib
import os
import select
import shlex
import sys
from pathlib import Path

from parbench.commands import COMMAND_MODULES
from parbench.config import ConfigError

EXIT_BAD_INPUT = 2


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions keep their line breaks (examples stay runnable lines); every option shows its
    default unless it has none or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or any(action.default is v for v in (None, False, argparse.SUPPRESS))
                or "default" in text or "%(default)" in text):  # identity: a default of 0 is still shown
            return text
        return text + " (default: %(default)s)"


def plain(text: str | None) -> str | None:
    """Help text without reStructuredText markup (``x`` reads as x on a terminal)."""
    return text.replace("``", "") if isinstance(text, str) else text


def tidy(parser: argparse.ArgumentParser) -> None:
    """One formatter and plain text for a parser and every sub-command below it."""
    parser.formatter_class = HelpFormatter
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            action.help = action.help or f"one of: {', '.join(action.choices)} (each has its own --help)"
            for choice in action._choices_actions:
                choice.help = plain(choice.help)
            for sub in action.choices.values():
                tidy(sub)


class Parser(argparse.ArgumentParser):
    """``parbench @FILE``: FILE's words in its place, as a shell splits them (several to a line, ``#`` comments, a
    leading ``parbench`` dropped), so a command line kept in a file (``parbench simulate --search`` prints the best
    layout's) runs with overrides after it: ``parbench @layout.args --gpus 1024``."""

    def convert_arg_line_to_args(self, arg_line: str) -> list[str]:
        try:
            words = shlex.split(arg_line, comments=True)
        except ValueError as exc:  # an unbalanced quote
            self.error(f"@FILE line {arg_line.strip()!r}: {exc}")
        return words[1:] if words[:1] == ["parbench"] else words

    def _read_args_from_files(self, arg_strings: list[str], _reading: tuple[str, ...] = ()) -> list[str]:
        """argparse's own expansion, with the errors it lets through named: a file that is not UTF-8 text, and a
        file that names itself (directly or through another), which recursed until Python gave up."""
        words = []
        for arg in arg_strings:
            if not arg or arg[0] not in self.fromfile_prefix_chars:
                words.append(arg)
                continue
            if not arg[1:]:
                self.error(f"{arg}: give the file after it (@FILE)")
            path = os.path.realpath(arg[1:])
            if path in _reading:
                self.error(f"{arg} names itself ({' -> '.join(_reading + (path,))}): an @FILE cannot include itself")
            try:
                text = Path(arg[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                self.error(f"{arg}: {exc.strerror}")
            except UnicodeDecodeError:
                self.error(f"{arg}: not a text file of arguments (not UTF-8)")
            inner = [w for line in text.splitlines() for w in self.convert_arg_line_to_args(line)]
            words.extend(self._read_args_from_files(inner, _reading + (path,)))
        return words


def build_parser() -> argparse.ArgumentParser:
    import parbench

    parser = Parser(prog="parbench", description=parbench.__doc__, fromfile_prefix_chars="@",
                    epilog="parbench @FILE [more arguments]: the words of FILE in its place (a command line kept in a "
                           "file, # comments allowed); arguments after it override the file's")
    __version__ = parbench.__version__

    parser.add_argument("--version", action="version", version=f"parbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="parbench COMMAND --help shows the options of each")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    tidy(parser)
    return parser


def stdout_closed() -> bool:
    """Whether the reader of this process's standard output has gone (``parbench ... | head``): a pipe's write
    end then polls as an error. False for anything that cannot be polled (a file, a test's capture)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError and a ValueError
        return False


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ConfigError as exc:
        print(f"parbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        if not stdout_closed():  # another pipe or socket broke: a real error
            raise
        # the reader took what it wanted and left; what is still buffered goes nowhere, not into a second
        # error when Python flushes at exit (the signal module's note on SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
