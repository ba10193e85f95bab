"""Loading (cached, keyed on the directory and its record files' mtimes), sidebar filters and the
state the URL carries.

Results are read only through ``parbench.results.load``; a corrupt record becomes a warning
string, never an exception.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from parbench import charts
from parbench.results import iter_record_files, load

DEFAULT_RESULTS_DIR = "results"
RESULTS_DIR_ENV = "PARBENCH_RESULTS_DIR"


@dataclass(frozen=True, kw_only=True)
class FilterSpec:
    """One sidebar filter: the column, its label, and whether a null (the part does not apply to
    that run, e.g. the mesh of a ddp run) passes whatever is chosen."""

    column: str
    label: str
    null_passes: bool = False
    min_options: int = 1
    """Shown only with at least this many values (a layout part with one value filters nothing)."""


# Sidebar filters, in order. Every view sees the frame these filters leave.
FILTERS: tuple[FilterSpec, ...] = (
    FilterSpec(column="source", label="source (results folder)"),
    FilterSpec(column="workload_label", label="workload"),
    FilterSpec(column="strategy", label="strategy"),
    FilterSpec(column="world_size", label="world size"),
    FilterSpec(column="key.mesh", label="hybrid mesh (dp·tp·pp)", null_passes=True, min_options=2),
    FilterSpec(column="key.schedule", label="pipeline schedule", null_passes=True, min_options=2),
    FilterSpec(column="key.micro_batches", label="micro-batches", null_passes=True, min_options=2),
    FilterSpec(column="key.dp_mode", label="dp mode", null_passes=True, min_options=2),
    FilterSpec(column="backend", label="backend", min_options=2),
    FilterSpec(column="data_mode", label="data mode", min_options=2),
    FilterSpec(column="status", label="status"),
)


def default_results_dir() -> str:
    return os.environ.get(RESULTS_DIR_ENV) or DEFAULT_RESULTS_DIR


def directory_signature(results_dir: str) -> str:
    """Hash of (path, mtime_ns, size) of every record file: the cache key of a directory's content.

    One ``stat`` per file (a few ms per thousand records) instead of parsing them all again.
    """
    h = hashlib.sha1()
    for path in iter_record_files(results_dir):
        try:
            s = path.stat()
        except OSError:
            continue
        h.update(f"{path}\0{s.st_mtime_ns}\0{s.st_size}\n".encode())
    return h.hexdigest()


@st.cache_data(show_spinner="Loading results ...", max_entries=8)
def load_runs(results_dir: str, signature: str) -> tuple[pd.DataFrame, list[str]]:
    """(prepared runs frame, problems); ``signature`` is only the cache key."""
    problems: list[str] = []
    frame = load(results_dir, problems=problems)
    return charts.prepare(frame), problems


def directory_state(results_dir: str) -> str:
    """``missing`` (no such directory), ``not-a-directory``, or ``ok``."""
    path = Path(results_dir)
    if not path.exists():
        return "missing"
    return "ok" if path.is_dir() else "not-a-directory"


def filter_options(df: pd.DataFrame, col: str) -> list:
    values = df[col].dropna().unique().tolist()
    if col == "strategy":
        order = {s: i for i, s in enumerate(charts.STRATEGY_ORDER)}
        return sorted(values, key=lambda s: (order.get(s, len(order)), s))
    if col == "key.micro_batches":
        return sorted(values, key=lambda v: int(str(v).lstrip("mb") or 0))
    return sorted(values)


def default_choice(df: pd.DataFrame, spec: FilterSpec) -> list:
    """Everything, except sources: the newest one only (sources are never pooled by default)."""
    if spec.column == "source":
        newest = charts.newest_source(df)
        return [newest] if newest is not None else []
    return filter_options(df, spec.column)


@dataclass(frozen=True)
class Filters:
    """Chosen values per filter column; a column missing from ``chosen`` is not filtered."""

    chosen: dict[str, tuple]

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        mask = pd.Series(True, index=df.index)
        nullable = {f.column for f in FILTERS if f.null_passes}
        for col, values in self.chosen.items():
            keep = df[col].isin(values)
            mask &= (keep | df[col].isna()) if col in nullable else keep
        return df[mask]


def from_url(values: list[str], options: list) -> list:
    """Query-parameter strings back to the options they name (world sizes are ints)."""
    by_text = {str(o): o for o in options}
    return [by_text[v] for v in values if v in by_text]
