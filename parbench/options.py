"""Command-line options generated from the configuration dataclasses: one source for every option's
name, type, default and help (the field's docstring), so the CLI can never drift from ``RunConfig``.

A field ``global_batch_size: int = 64`` becomes ``--global-batch-size`` (type int, default 64); an
enum field lists its values in the help; a bool field is a flag; ``X | None`` takes an X. Torch-free.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import functools
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

from parbench.config import WORKLOAD_NAMES, ConfigError, RunConfig, WorkloadConfig

HIDDEN = ("workload",)
"""RunConfig fields with no option: the workload has its own group."""
FLAGS = {"timeout_s": "--timeout", "name": "--workload"}
"""Fields whose option is not ``--<field-name>`` (kept as users know them)."""


@dataclass(frozen=True)
class Option:
    """One command-line option of a dataclass field."""

    field: str
    flag: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


@functools.cache  # reads and parses the class's source: once per class, not once per option asked for
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it), the base classes' included, one line each.
    The one dict per class is shared: read it, do not change it."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _kind(annotation: Any) -> type:
    """The value type an option parses: the annotation, or X of ``X | None``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def options(cls: type, *, hidden: tuple[str, ...] = HIDDEN) -> list[Option]:
    """The options of ``cls``'s fields, in field order."""
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in hidden:
            continue
        kind = _kind(hints[f.name])
        default = f.default.value if isinstance(f.default, enum.Enum) else f.default
        choices = tuple(m.value for m in kind) if isinstance(kind, type) and issubclass(kind, enum.Enum) else None
        out.append(Option(field=f.name, flag=FLAGS.get(f.name, "--" + f.name.replace("_", "-")),
                          kind=str if choices else kind, default=default, help=docs.get(f.name, ""), choices=choices))
    return out


UNSET_WHEN_ZERO = {WorkloadConfig: ("layers", "hidden"), RunConfig: ("lr",)}
"""The fields whose 0 stands for the workload's own default: the command line leaves them None until given, so
that a 0 typed on it is told apart (and refused where it would otherwise run at the default without a word)."""


def add_options(parser: argparse.ArgumentParser, title: str, cls: type) -> None:
    """One argument group of ``cls``'s options."""
    group = parser.add_argument_group(title)
    for o in options(cls):
        if o.kind is bool:
            group.add_argument(o.flag, dest=o.field, action="store_true", help=o.help)
        else:  # choices are checked by the dataclass, whose message names every valid value
            more = f" One of: {', '.join(o.choices)}." if o.choices else ""
            unset = o.field in UNSET_WHEN_ZERO.get(cls, ())
            group.add_argument(o.flag, dest=o.field, type=o.kind, default=None if unset else o.default,
                               help=o.help + more)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Every option of a run: RunConfig's fields, then WorkloadConfig's."""
    add_options(parser, "run (RunConfig)", RunConfig)
    add_options(parser, "workload (WorkloadConfig)", WorkloadConfig)


def config_from_args(a: argparse.Namespace) -> RunConfig:
    """The RunConfig the options describe (ConfigError names a bad value)."""
    given = {o.field: getattr(a, o.field) for o in options(WorkloadConfig)}
    for key in UNSET_WHEN_ZERO[WorkloadConfig]:
        if given[key] is None:
            given[key] = 0
        elif given[key] == 0 and given["name"] in WORKLOAD_NAMES:  # a plugin's factory may take 0
            flag = FLAGS.get(key, "--" + key.replace("_", "-"))
            raise ConfigError(f"{flag} 0: workload {given['name']!r} needs {key} >= 1 (leave {flag} out for its default)")
    run = {o.field: getattr(a, o.field) for o in options(RunConfig)}
    if run["lr"] == 0:
        raise ConfigError("--lr 0: the learning rate must be > 0 (leave --lr out for the workload's default)")
    run["lr"] = run["lr"] or 0.0
    return RunConfig(workload=WorkloadConfig(**given), **run)
