"""Your own measured runs beside the simulator's predictions: ``parbench validate --rows FILE``.

A rows file is TOML, one ``[[row]]`` table per run that trained, each the ``parbench simulate`` command line that
describes it and the one figure it measured::

    [[row]]
    name = "Llama 3 70B, 64 H100, TP 4 PP 8"       # unique in the file
    source = "our cluster, NeMo 24.07, 2026-11-02"  # rows are summarised per source
    table = "run 1137"                               # optional: where in the source
    simulate = "--model llama3-70b --cluster h100-sxm --gpus 64 --tp 4 --pp 8 --global-batch 128"
    metric = "s_per_iteration"                       # or tps_per_gpu, mfu, tflops_per_gpu, tokens_per_s,
                                                     # samples_per_s, hfu, hw_tflops_per_gpu (METRICS)
    value = 14.2
    series = "Llama 3 70B weak scaling"              # optional: rows of a scaling series share it
    memory_gib = 61.5                                # optional: peak memory per GPU the allocator reserved

The same rows as CSV (a ``.csv`` file): a header line naming the keys, one run a line. A relative
``--hf-config`` path, and a relative ``--cluster`` file (.json or .toml), is read from the rows file's folder, so a
file and the configs it names travel together. Every row is read and every layout built before anything is predicted or printed: a file with a bad row
stops with the row named and what is wrong with it (a ConfigError), and nothing else is reported.
"""

from __future__ import annotations

import csv
import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tomllib

from parbench.config import ConfigError
from parbench.sim.published_memory import METRICS, Run, compared

REQUIRED = ("name", "source", "simulate", "metric", "value")
OPTIONAL = ("table", "series", "memory_gib")


@dataclass(frozen=True, kw_only=True)
class MeasuredRow:
    """One measured run: the simulate arguments that describe it and what it measured."""

    name: str
    source: str
    simulate: tuple[str, ...]
    """``parbench simulate`` arguments (one layout: no --search)."""
    metric: str
    """A key of ``parbench.sim.published_memory.METRICS``."""
    value: float
    table: str = ""
    series: str = ""
    memory_gib: float | None = None

    def __post_init__(self) -> None:
        where = f"row {self.name!r}"
        if self.metric not in METRICS:
            raise ValueError(f"{where}: metric {self.metric!r} is not one of {', '.join(METRICS)}")
        if not math.isfinite(self.value) or self.value <= 0:
            raise ValueError(f"{where}: value {self.value} must be a finite number > 0")
        if self.metric == "mfu" and self.value > 1:
            raise ValueError(f"{where}: mfu {self.value} is a fraction of the peak, <= 1 (write 0.45 for 45%)")
        if self.memory_gib is not None and not (math.isfinite(self.memory_gib) and self.memory_gib > 0):
            raise ValueError(f"{where}: memory_gib {self.memory_gib} must be a finite number > 0")
        if not self.simulate:
            raise ValueError(f"{where}: simulate is empty; give the layout as parbench simulate's arguments")


def load_rows(path: str | Path) -> list[MeasuredRow]:
    """The rows of a rows file, TOML or (``.csv``) CSV, every one checked; ConfigError names the first row that is
    wrong."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"rows file {p} " + ("is a directory" if p.is_dir() else "does not exist"))
    tables = _csv_tables(p) if p.suffix.lower() == ".csv" else _toml_tables(p)
    rows = [_row(t, i, p) for i, t in enumerate(tables, start=1)]
    names = [r.name for r in rows]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"rows file {p}: row name {twice[0]!r} appears {names.count(twice[0])} times; names are unique")
    return rows


def _toml_tables(p: Path) -> list[dict]:
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"rows file {p}: not valid TOML: {exc}") from None
    unknown = sorted(set(raw) - {"row"})
    if unknown:
        raise ConfigError(f"rows file {p}: unknown top-level key {unknown[0]!r}; each run is a [[row]] table")
    tables = raw.get("row")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"rows file {p}: no [[row]] tables")
    return tables


def _csv_tables(p: Path) -> list[dict]:
    """A CSV rows file: a header of the keys (``REQUIRED``, any of ``OPTIONAL``), one run a line; numbers as text
    (``value`` and ``memory_gib`` read as numbers), empty cells left out."""
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            tables = [{k: v for k, v in line.items() if v not in ("", None)} for line in reader]
            header = reader.fieldnames or []
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"rows file {p}: not valid CSV: {exc}") from None
    if not tables:
        raise ConfigError(f"rows file {p}: no rows under the header (its first line names the columns: "
                          f"{', '.join(REQUIRED)})")
    if None in header or any(None in t for t in tables):
        raise ConfigError(f"rows file {p}: a line has more cells than the header has columns")
    for t in tables:
        for k in ("value", "memory_gib"):
            if k in t:
                try:
                    t[k] = float(t[k])
                except ValueError:
                    pass  # _row names the cell
    return tables


def _row(t: dict, i: int, path: Path) -> MeasuredRow:
    where = f"rows file {path}, row {i}" + (f" ({t['name']!r})" if isinstance(t.get("name"), str) else "")
    missing = [k for k in REQUIRED if k not in t]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(t) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(REQUIRED + OPTIONAL)}")
    for k in ("name", "source", "metric", "table", "series"):
        if k in t and not (isinstance(t[k], str) and (t[k].strip() or k in ("table", "series"))):
            raise ConfigError(f"{where}: {k} must be a non-empty string, got {t[k]!r}")
    for k in ("value", "memory_gib"):
        if k in t and (isinstance(t[k], bool) or not isinstance(t[k], int | float)):
            raise ConfigError(f"{where}: {k} must be a number, got {t[k]!r}")
    sim = t["simulate"]
    if isinstance(sim, str):
        try:
            args = tuple(shlex.split(sim))
        except ValueError as exc:
            raise ConfigError(f"{where}: simulate: {exc}") from None
    elif isinstance(sim, list) and all(isinstance(a, str) for a in sim):
        args = tuple(sim)
    else:
        raise ConfigError(f"{where}: simulate must be a string or a list of strings, got {sim!r}")
    args = _beside(args, path.parent)
    try:
        return MeasuredRow(name=t["name"], source=t["source"], simulate=args, metric=t["metric"],
                           value=float(t["value"]), table=t.get("table", ""), series=t.get("series", ""),
                           memory_gib=None if t.get("memory_gib") is None else float(t["memory_gib"]))
    except ValueError as exc:
        raise ConfigError(f"rows file {path}, {exc}") from None


FILE_FLAGS = ("--hf-config", "--cluster")
"""Flags whose value may be a file the rows file names beside itself: a model's config.json, a cluster file."""


def _beside(args: tuple[str, ...], folder: Path) -> tuple[str, ...]:
    """``args`` with a relative ``--hf-config`` path, and a relative ``--cluster`` path (one naming a .json or
    .toml file: a preset is a bare name), made relative to ``folder`` (the rows file's)."""
    def moved(flag: str, value: str) -> str:
        relative = not Path(value).is_absolute()
        if flag == "--cluster":
            relative = relative and Path(value).suffix.lower() in (".json", ".toml")
        return str(folder / value) if relative else value

    out = list(args)
    for i, a in enumerate(out):
        flag, eq, value = a.partition("=")
        if flag not in FILE_FLAGS:
            continue
        if eq:
            out[i] = f"{flag}={moved(flag, value)}"
        elif i + 1 < len(out):
            out[i + 1] = moved(flag, out[i + 1])
    return tuple(out)


def compare_rows(rows: list[MeasuredRow], predict_row: Callable[[list[str]], tuple]) -> list[dict]:
    """Each row beside its prediction (``published_memory.compared``: the metric's signed error in %, memory,
    whether the layout is predicted to fit) with its simulate command. ``predict_row(argv)`` returns (cluster,
    model, layout, prediction) as ``parbench simulate ARGV`` predicts them, raising ConfigError for a bad
    layout; every row is predicted before any is compared, so one bad row stops the whole file."""
    predicted = []
    for r in rows:
        try:
            predicted.append(predict_row(list(r.simulate)))
        except ConfigError as exc:
            raise ConfigError(f"row {r.name!r}: simulate {shlex.join(r.simulate)}: {exc}") from None
    out = []
    for r, (cluster, model, layout, p) in zip(rows, predicted):
        run = Run(source=r.source, table=r.table, name=r.name, arch=model.arch, cluster=cluster.name, layout=layout,
                  memory_gib=r.memory_gib, metric=r.metric, value=r.value, series=r.series)
        out.append({**compared(run, p), "simulate": shlex.join(r.simulate)})
    return out
