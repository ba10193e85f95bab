"""parbench dashboard: ``parbench dashboard`` or ``streamlit run dashboard/app.py [-- --results-dir DIR]``.

Reads a results directory through ``parbench.results.load`` only (never torch), applies the
sidebar filters once, and hands the filtered runs to every registered view
(``dashboard/views/__init__.py``: ``VIEWS``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the repository root.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from dashboard import data  # noqa: E402
from dashboard.views import VIEWS, ViewContext  # noqa: E402

EMPTY_STATE = """\
**No results in `{dir}`.**

Produce some, then reload this page:

```bash
parbench sweep --results-dir {dir}                                  # the default grid
parbench run --strategy single --world-size 1 --results-dir {dir}   # the reference
parbench run --strategy ddp --world-size 2 --results-dir {dir}      # one run
```

or type another results directory in the sidebar.
"""


def initial_results_dir() -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--results-dir", default=None)
    args, _ = parser.parse_known_args(sys.argv[1:])
    return args.results_dir or data.default_results_dir()


def sidebar_filters(runs: pd.DataFrame) -> data.Filters:
    st.sidebar.header("Filters (every view)")
    chosen = {}
    for col, label in data.FILTER_COLUMNS.items():
        options = data.filter_options(runs, col)
        if len(options) > 0:
            chosen[col] = tuple(st.sidebar.multiselect(label, options, default=options, key=f"filter-{col}"))
    return data.Filters(chosen=chosen)


def main() -> None:
    st.set_page_config(page_title="parbench", layout="wide")
    st.title("parbench: which parallel layout?")
    results_dir = st.sidebar.text_input("results directory", value=initial_results_dir(), key="results_dir")
    runs, problems = data.load_runs(results_dir, data.directory_signature(results_dir))
    for problem in problems:
        st.warning(f"Skipped a corrupt result record: {problem}")
    if runs.empty:
        st.info(EMPTY_STATE.format(dir=results_dir))
        return
    st.sidebar.caption(f"{len(runs)} runs loaded from `{results_dir}`")
    filtered = sidebar_filters(runs).apply(runs)
    if filtered.empty:
        st.info("No run matches the sidebar filters: widen them to see charts.")
        return
    ctx = ViewContext(runs=filtered, all_runs=runs, results_dir=results_dir)
    for tab, (_, view) in zip(st.tabs([v.TITLE for _, v in VIEWS]), VIEWS):
        with tab:
            view.render(ctx)


main()
