"""The sweep file: a TOML schema held as data, and its validation into a frozen ``SweepSpec``.

Every key is checked before anything runs; a bad file dies with the file, the key and what was
expected (``ConfigError``, exit code 2). Grid axes are lists; everything else is a scalar.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from parbench.config import DATASETS, ROUTERS, ConfigError, RunConfig, Strategy
from parbench.options import options
from parbench.validation import CHOICES, MINIMUMS


@dataclass(frozen=True)
class Key:
    """One key of the schema: its kind (see ``_CHECKS``), default and meaning."""

    kind: str
    default: Any
    doc: str
    choices: tuple[str, ...] = ()


def run_key(field: str, *, axis: bool = False, default: Any = None, low: int | None = None, note: str = "") -> Key:
    """The key of a RunConfig field: its type, bound (``validation.MINIMUMS``), default and docstring
    come from the configuration; a grid axis takes a list of values (default: [the field's default])."""
    o = next(o for o in options(RunConfig, hidden=()) if o.field == field)
    choices = o.choices or CHOICES.get(field, ())
    low = MINIMUMS.get(field, 0) if low is None else low
    kind = ("bool" if o.kind is bool else "number>0" if o.kind is float else "enum" if choices
            else f"int>={low}" if o.kind is int else "str")
    if axis:
        kind, default = f"list[{'enum' if choices else kind}]", [o.default] if default is None else default
    return Key(kind, o.default if default is None else default, f"{note}{o.help}", choices)


# The schema is plain data; README's table is generated from it (tests check they agree).
TOP_KEYS: dict[str, Key] = {
    "name": Key("str", None, "sweep name (default: the file's stem); part of the sweep identity"),
    "description": Key("str", "", "free text, kept in the manifest"),
    "repeats": Key("int>=1", 1, "runs per grid point; every repeat is a record"),
    **{f: run_key(f) for f in ("steps", "warmup_steps", "timeout_s", "seed", "threads", "data_in_step",
                               "loader_workers")},
    "strategies": Key("strategies", "all", '"all" (every implemented strategy) or a list of names',
                      tuple(s.value for s in Strategy)),
    "world_sizes": run_key("world_size", axis=True, default=[1, 2, 4],
                           note="`single` runs only at 1, the others only at >= 2. "),
    "backends": run_key("backend", axis=True),
    "devices": run_key("device", axis=True),
    "precisions": run_key("precision", axis=True),
    "global_batch_sizes": run_key("global_batch_size", axis=True),
    "data_modes": run_key("data_mode", axis=True),
    "micro_batches": run_key("micro_batches", axis=True, default=[4],
                             note="Pipeline points only (pipeline, hybrid with pp > 1). "),
    "schedules": run_key("schedule", axis=True, note="Pipeline points only. "),
    "virtual_stages": run_key("virtual_stages", axis=True, default=[2], low=2),
    "meshes": Key("list[mesh]", [], "hybrid only: [dp, tp, pp] triples; [] = every mesh of the world "
                                    "size with two or more degrees > 1"),
    "dp_modes": run_key("dp_mode", axis=True),
    "servers": run_key("servers", axis=True),
    "eps": run_key("ep", axis=True),
    "workloads": Key("workloads", [{"name": "mlp"}], "array of [[workloads]] tables (keys below)"),
}

# Shape keys take a scalar or a list (a list multiplies the grid).
WORKLOAD_KEYS: dict[str, Key] = {
    "name": Key("str", None, "required: mlp, transformer, another built-in, a plugin or `module:factory` "
                             "(checked by WorkloadConfig)"),
    "layers": Key("ints>=0", 0, "mlp hidden layers / transformer blocks (0 or absent = workload default)"),
    "hidden": Key("ints>=0", 0, "mlp width / transformer d_model (0 or absent = workload default)"),
    "heads": Key("ints>=1", 4, "transformer attention heads"),
    "seq_len": Key("ints>=1", 32, "transformer tokens per sample"),
    "vocab_size": Key("ints>=1", 256, "transformer vocabulary"),
    "dataset": Key("enum", "synthetic", "mlp data", DATASETS),
    "dataset_path": Key("str", None, "MNIST IDX directory for dataset = \"mnist\""),
    "experts": Key("ints>=1", None, "moe: experts per MoE layer (absent = 4)"),
    "top_k": Key("ints>=1", None, "moe: experts per token (absent = 2)"),
    "capacity_factor": Key("numbers>0", None, "moe: expert capacity factor (absent = 1.25)"),
    "moe_every": Key("ints>=1", None, "moe: every k-th block has experts (absent = 1)"),
    "router": Key("enum", None, "moe: learned or balanced (absent = learned)", ROUTERS),
}

# Keys outside the measured grid: changing them does not change the sweep identity.
NOT_IDENTITY = ("repeats", "timeout_s", "description")
# Keys added after sweeps were recorded: at their default they leave the identity as it was.
LATER_KEYS = {"eps": [0]}


@dataclass(frozen=True, kw_only=True)
class SweepSpec:
    """A validated sweep file (plus command-line overrides); ``values`` maps every TOP_KEYS key."""

    source: str
    """The file (or ``<default>``) the spec came from, for messages and the manifest."""
    values: dict[str, Any]

    def __getattr__(self, key: str) -> Any:
        if key in TOP_KEYS:
            return self.values[key]
        raise AttributeError(key)

    @property
    def sweep_id(self) -> str:
        """``<name>-<hash>``: same name and same measured grid = same sweep (resume matches on it).
        Repeats and timeout are left out, so ``--repeats 3`` after a 1-repeat sweep adds repeats 1-2."""
        ident = {k: v for k, v in self.values.items()
                 if k not in NOT_IDENTITY and not (k in LATER_KEYS and v == LATER_KEYS[k])}
        digest = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:8]
        return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', self.values['name'])}-{digest}"


# --- parsing -------------------------------------------------------------------------------


NAME_MAX = 100
"""Longest sweep name: ``<name>-<hash>`` names a folder, and file systems refuse names past 255 bytes."""


def load_spec(path: str | Path | None, overrides: dict[str, Any] | None = None) -> SweepSpec:
    """Read and validate a sweep file (None: the embedded default), then apply overrides."""
    if path is None:
        text, source, stem = resources.files("parbench.sweeps").joinpath("default.toml").read_text(), "<default>", "default"
    else:
        p = Path(path)
        text, source, stem = _read_text(p), str(p), p.stem
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    values = _validate_top(raw, source)
    for key, value in (overrides or {}).items():
        values[key] = _check(TOP_KEYS[key], value, f"{source}: command-line override {key}")
    values["name"] = values["name"] or stem
    if len(values["name"]) > NAME_MAX:
        raise ConfigError(f"{source}: sweep name {values['name'][:24]!r}... is {len(values['name'])} characters, at most "
                          f"{NAME_MAX} (it names the sweep's folder under results/sweeps/): give a shorter name or --name")
    return SweepSpec(source=source, values=values)


def _read_text(p: Path) -> str:
    """The file's text; ConfigError when it is missing, a directory, unreadable or not UTF-8 (TOML is UTF-8)."""
    if p.is_dir():
        raise ConfigError(f"sweep file {p} is a directory; give the TOML file itself")
    if not p.exists():
        raise ConfigError(f"sweep file {p} does not exist")
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"sweep file {p} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r}); "
                          "TOML files are UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"sweep file {p} cannot be read: {exc.strerror}") from None


def _validate_top(raw: dict[str, Any], source: str) -> dict[str, Any]:
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; valid keys: {', '.join(TOP_KEYS)}")
    # an absent key takes a copy of its default: the spec's values are the caller's to change
    return {key: _check(spec, raw[key], f"{source}: key {key!r}") if key in raw else json.loads(json.dumps(spec.default))
            for key, spec in TOP_KEYS.items()}


def _fail(where: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{where}: expected {expected}, got {value!r}")


def _int(value: Any, low: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _fail(where, f"an integer >= {low}", value)
    return value


def _list(value: Any, where: str, what: str, item: Callable[[Any, str], Any]) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"a list of {what}", value)
    if not value:
        raise _fail(where, f"a non-empty list of {what} (an empty axis makes an empty grid)", value)
    out = [item(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if len(set(map(json.dumps, out))) != len(out):
        raise _fail(where, f"a list of distinct {what}", value)
    return out


def _enum(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise _fail(where, f"one of {', '.join(choices)}", value)
        return value
    return check


def _mesh(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != 3:
        raise _fail(where, "a [dp, tp, pp] list of three integers >= 1", value)
    return [_int(v, 1, where) for v in value]


def _check(spec: Key, value: Any, where: str) -> Any:
    kind = spec.kind
    if kind == "enum":
        return _enum(spec.choices)(value, where)
    if kind in ("str", "bool"):
        if not isinstance(value, str if kind == "str" else bool):
            raise _fail(where, "a string" if kind == "str" else "true or false", value)
        return value
    if kind == "number>0":  # `not value > 0` catches NaN too; TOML has nan and inf literals
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not value > 0:
            raise _fail(where, "a finite number > 0", value)
        return float(value)
    if kind.startswith("int>="):
        return _int(value, int(kind[5:]), where)
    if kind.startswith("list[int>="):
        low = int(kind[10:-1])
        return _list(value, where, f"integers >= {low}", lambda v, w: _int(v, low, w))
    if kind == "list[enum]":
        return _list(value, where, f"names from: {', '.join(spec.choices)}", _enum(spec.choices))
    if kind == "list[mesh]":
        return [] if value == [] else _list(value, where, "[dp, tp, pp] triples", _mesh)
    if kind == "strategies":
        if value == "all":
            return value
        return _list(value, where, f'strategy names ({", ".join(spec.choices)}) or the string "all"',
                     _enum(spec.choices))
    if kind == "numbers>0" or kind.startswith("ints>="):  # a scalar or a list of them (a list multiplies the grid)
        one = Key(kind.replace("s", "", 1), None, "")  # numbers>0 -> number>0, ints>=1 -> int>=1
        what = "numbers > 0" if kind == "numbers>0" else f"integers >= {kind[6:]}"
        return _list(value, where, what, lambda v, w: _check(one, v, w)) if isinstance(value, list) \
            else [_check(one, value, where)]
    if kind == "workloads":
        return _list(value, where, "[[workloads]] tables", _workload)
    raise AssertionError(f"schema kind {kind!r} has no check")


def _workload(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "a table with at least a name", value)
    unknown = sorted(set(value) - set(WORKLOAD_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(WORKLOAD_KEYS)}")
    if "name" not in value:
        raise ConfigError(f"{where}: missing key 'name' (mlp, transformer, ... see README 'Sweeps')")
    out = {}
    for key, spec in WORKLOAD_KEYS.items():
        if key in value:
            out[key] = _check(spec, value[key], f"{where}.{key}")
        elif spec.kind.startswith("ints>=") and spec.default:
            out[key] = [spec.default]
    return out


def schema_markdown() -> str:
    """The README table of sweep-file keys (generated from TOP_KEYS and WORKLOAD_KEYS)."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for prefix, keys in (("", TOP_KEYS), ("workloads.", WORKLOAD_KEYS)):
        for key, spec in keys.items():
            kind = spec.kind + (f" ({', '.join(spec.choices)})" if spec.choices else "")
            default = "-" if spec.default is None else json.dumps(spec.default)
            rows.append(f"| `{prefix}{key}` | {kind} | `{default}` | {spec.doc.replace('``', '`')} |")
    return "\n".join(rows)

