"""Loading (cached, keyed on the directory and its record files' mtimes) and sidebar filters.

Results are read only through ``parbench.results.load``; a corrupt record becomes a warning
string, never an exception.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from parbench import charts
from parbench.results import iter_record_files, load

DEFAULT_RESULTS_DIR = "results"
RESULTS_DIR_ENV = "PARBENCH_RESULTS_DIR"

# Sidebar filter columns: column -> label. Every view sees the frame these filters leave.
FILTER_COLUMNS: dict[str, str] = {
    "strategy": "strategy",
    "workload_label": "workload",
    "world_size": "world size",
    "backend": "backend",
    "status": "status",
    "source": "source folder",
}


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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = load(results_dir)
    problems = [str(w.message) for w in caught if "corrupt result record" in str(w.message)]
    return charts.prepare(frame), problems


@dataclass(frozen=True)
class Filters:
    """Chosen values per filter column; a column missing from ``chosen`` is not filtered."""

    chosen: dict[str, tuple]

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        mask = pd.Series(True, index=df.index)
        for col, values in self.chosen.items():
            mask &= df[col].isin(values)
        return df[mask]


def filter_options(df: pd.DataFrame, col: str) -> list:
    values = df[col].dropna().unique().tolist()
    if col == "strategy":
        order = {s: i for i, s in enumerate(charts.STRATEGY_ORDER)}
        return sorted(values, key=lambda s: (order.get(s, len(order)), s))
    return sorted(values)


def results_dir_exists(results_dir: str) -> bool:
    return Path(results_dir).is_dir()
