"""parbench dashboard: ``parbench dashboard`` or ``streamlit run dashboard/app.py [-- --results-dir DIR]``.

Reads a results directory through ``parbench.results.load`` only (never torch), applies the
sidebar filters once, relabels the layouts left, and hands them to the chosen view
(``dashboard/views/__init__.py``: ``VIEWS``). Only the chosen view is drawn, so a filter change
redraws one view, not all of them.

The URL carries the state (``st.query_params``): ``dir``, ``view`` and one parameter per filter
that differs from its default, so a link reopens the same view of the same runs.
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
from parbench import charts  # noqa: E402

HOW_TO = """\
Produce some, then reload this page:

```bash
parbench sweep --results-dir {dir}                                  # the default grid
parbench run --strategy single --world-size 1 --results-dir {dir}   # the reference
parbench run --strategy ddp --world-size 2 --results-dir {dir}      # one run
```

or type another results directory in the sidebar (the committed reference sweep is
`results/reference`).
"""
EMPTY_STATE = "**No results in `{dir}`** (the directory exists but holds no run records).\n\n" + HOW_TO
MISSING_STATE = "**`{dir}` does not exist.** Check the path, or create it by running a sweep into it.\n\n" + HOW_TO
NOT_A_DIRECTORY = "**`{dir}` is a file, not a results directory.**\n\n" + HOW_TO
DIR_STATE_MESSAGES = {"missing": MISSING_STATE, "not-a-directory": NOT_A_DIRECTORY}
FILTERS_DIR = "_filters_dir"  # session key: the directory the current filter widgets belong to


def initial_results_dir() -> str:
    if "dir" in st.query_params:
        return st.query_params["dir"]
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--results-dir", default=None)
    args, _ = parser.parse_known_args(sys.argv[1:])
    return args.results_dir or data.default_results_dir()


def url_name(spec: data.FilterSpec) -> str:
    return spec.column.removeprefix("key.").removesuffix("_label")


def reset_when_directory_changes(results_dir: str) -> bool:
    """Drop the filter widgets' state when the directory changed (their options belong to the old
    one). True on the first run of a session, when the URL's filters apply."""
    first = FILTERS_DIR not in st.session_state
    if not first and st.session_state[FILTERS_DIR] != results_dir:
        for spec in data.FILTERS:
            st.session_state.pop(f"filter-{spec.column}", None)
        for key in [k for k in st.session_state if str(k).startswith("compare")]:
            del st.session_state[key]
    st.session_state[FILTERS_DIR] = results_dir
    return first


def sidebar_filters(runs: pd.DataFrame, from_url: bool) -> data.Filters:
    st.sidebar.header("Filters (every view)")
    chosen = {}
    for spec in data.FILTERS:
        options = data.filter_options(runs, spec.column)
        if len(options) < spec.min_options:
            continue
        key = f"filter-{spec.column}"
        default = data.default_choice(runs, spec)
        if key not in st.session_state:  # first run, or the directory changed: the URL's choice, else the default
            in_url = from_url and url_name(spec) in st.query_params
            st.session_state[key] = data.from_url(st.query_params.get_all(url_name(spec)), options) if in_url else default
        fmt = charts.source_name if spec.column == "source" else str
        chosen[spec.column] = tuple(st.sidebar.multiselect(spec.label, options, key=key, format_func=fmt))
        if sorted(map(str, chosen[spec.column])) == sorted(map(str, default)):
            st.query_params.pop(url_name(spec), None)
        else:
            st.query_params[url_name(spec)] = [str(v) for v in chosen[spec.column]]
    return data.Filters(chosen=chosen)


def source_caption(runs: pd.DataFrame, chosen: tuple) -> str:
    """Which sources are shown, of how many (sources are not pooled unless the user picks several)."""
    all_sources = sorted(runs["source"].unique(), key=str)
    newest = charts.newest_source(runs)
    names = ", ".join(f"`{charts.source_name(s)}`" + (" (newest)" if s == newest else "") for s in chosen)
    if len(all_sources) == 1:
        return f"Source: {names}."
    others = len(all_sources) - len(chosen)
    more = f"; {others} other source(s) hidden, add them in the sidebar 'source' filter" if others else ""
    return f"Showing source {names} of {len(all_sources)}{more}."


def choose_view() -> object:
    keys = [k for k, _ in VIEWS]
    modules = dict(VIEWS)
    if "view" not in st.session_state and st.query_params.get("view") in modules:
        st.session_state["view"] = st.query_params["view"]
    key = st.radio("view", keys, horizontal=True, key="view", format_func=lambda k: modules[k].TITLE,
                   label_visibility="collapsed")
    st.query_params["view"] = key
    return modules[key]


def main() -> None:
    st.set_page_config(page_title="parbench", layout="wide")
    st.title("parbench: which parallel layout?")
    results_dir = st.sidebar.text_input("results directory", value=initial_results_dir(), key="results_dir")
    st.query_params["dir"] = results_dir
    first = reset_when_directory_changes(results_dir)
    state = data.directory_state(results_dir)
    if state != "ok":
        st.error(DIR_STATE_MESSAGES[state].format(dir=results_dir))
        return
    runs, problems = data.load_runs(results_dir, data.directory_signature(results_dir))
    for problem in problems:
        st.warning(f"Skipped a corrupt result record: {problem}")
    if runs.empty:
        st.info(EMPTY_STATE.format(dir=results_dir))
        return
    st.sidebar.caption(f"{len(runs)} runs loaded from `{results_dir}`")
    filters = sidebar_filters(runs, from_url=first)
    filtered = charts.relabel(filters.apply(runs))
    view = choose_view()
    st.caption(source_caption(runs, filters.chosen.get("source", ())) + f" {len(filtered)} of {len(runs)} runs "
               "pass the filters.")
    if filtered.empty:
        st.info("No run matches the sidebar filters: widen them to see charts.")
        return
    view.render(ViewContext(runs=filtered, all_runs=runs, results_dir=results_dir))


main()
