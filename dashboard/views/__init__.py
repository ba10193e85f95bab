"""The dashboard's views: one module per view, registered in ``VIEWS`` (one line each).

A view module defines ``TITLE: str`` and ``render(ctx: ViewContext) -> None``. It draws with
streamlit, builds its figures with pure functions (``parbench.charts`` or its own module, so
``parbench report`` can reuse them), and gives every chart a stable ``key`` (the tests read the
figure JSON by key). ``ctx.runs`` is the frame left by the sidebar filters (all views share
them), already relabelled: ``layout_label`` names only the layout-key parts that differ among
these runs; ``ctx.results_dir`` lets a view read other files under the results directory.

Adding a view:
  1. create ``dashboard/views/<name>.py`` with ``TITLE`` and ``render(ctx)``;
  2. add one line ``("<name>", <name>)`` to ``VIEWS`` below (the order of the view selector;
     ``<name>`` is also the view's ``?view=`` URL parameter);
  3. optional: add its figures to ``parbench.charts.REPORT_SECTIONS`` for ``parbench report``.
Only the chosen view is drawn on each rerun. Group by ``group_key`` (workload + layout key +
source) and split by ``workload_label``; never divide one workload's numbers by another's.
A view that has nothing to show should say so with ``st.info`` (how to produce the data),
never raise.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import pandas as pd

from dashboard.views import (bench_history, communication, compare, correctness, experts, landing, memory,
                             overview, scaling, simulator, step_time, time, timeline)


@dataclass(frozen=True)
class ViewContext:
    """What a view gets: the filtered runs, every loaded run, and where they came from."""

    runs: pd.DataFrame
    all_runs: pd.DataFrame
    results_dir: str


# (key, module): the order of the view selector; the first is the landing view.
VIEWS: tuple[tuple[str, ModuleType], ...] = (
    ("landing", landing),
    ("overview", overview),
    ("scaling", scaling),
    ("memory", memory),
    ("communication", communication),
    ("experts", experts),
    ("step_time", step_time),
    ("time", time),
    ("timeline", timeline),
    ("compare", compare),
    ("correctness", correctness),
    ("simulator", simulator),
    ("bench_history", bench_history),
)
