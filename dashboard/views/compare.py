"""Compare: two or more layouts or runs, every headline metric side by side with ratios to the first
pick of the same workload (ratios are never taken across workloads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Compare"

MODES = {"layouts (median over repeats)": "config_label", "single runs": "run_config_label"}
PICK_KEYS = {"layouts (median over repeats)": "compare-pick-layouts", "single runs": "compare-pick-runs"}
PICKS = "compare.picks"  # session key: {mode: picks}; kept across mode and view switches (widget state is not)
MODE = "compare-mode"


def with_run_labels(ok: pd.DataFrame) -> pd.DataFrame:
    return ok.assign(run_config_label=ok["run_label"] + " · " + ok["workload_label"])


def default_pick(ok: pd.DataFrame, by: str, options: list[str]) -> list[str]:
    """The first option and the first one of the same workload with another strategy."""
    first = ok[ok[by] == options[0]].iloc[0]
    same = ok[(ok["workload_key"] == first["workload_key"]) & (ok["strategy"] != first["strategy"])]
    other = [o for o in dict.fromkeys(same[by])] or options[1:]
    return options[:1] + other[:1]


def send_runs(run_ids: list[str], runs: pd.DataFrame) -> None:
    """Make ``run_ids`` the picks of the single-runs mode and open Compare (the Overview's button)."""
    labels = with_run_labels(runs).set_index("run_id")["run_config_label"]
    st.session_state.setdefault(PICKS, {})["single runs"] = [labels[r] for r in run_ids if r in labels.index]
    st.session_state[MODE] = "single runs"
    st.session_state.pop(PICK_KEYS["single runs"], None)
    st.session_state["view"] = "compare"


def render(ctx: "ViewContext") -> None:
    ok = with_run_labels(charts.ok_runs(ctx.runs))
    if ok.empty:
        st.info("No successful runs to compare under the current filters.")
        return
    mode = st.radio("compare", list(MODES), horizontal=True, key=MODE)
    by = MODES[mode]
    options = list(dict.fromkeys(ok[by]))
    store = st.session_state.setdefault(PICKS, {})
    key = PICK_KEYS[mode]
    if key not in st.session_state:  # restore the picks of this mode (or the default pair)
        kept = [p for p in store.get(mode, []) if p in options]
        st.session_state[key] = kept if kept else default_pick(ok, by, options)
    picked = st.multiselect("pick two or more (each workload's first pick is the baseline of its ratios)", options,
                            key=key)
    store[mode] = picked
    if len(picked) < 2:
        st.info("Pick at least two to compare.")
        return
    chosen = ok[ok[by].isin(picked)]
    chosen = chosen.assign(_o=chosen[by].map(picked.index)).sort_values("_o", kind="stable").drop(columns="_o")
    if chosen["workload_key"].nunique() > 1:
        st.caption("The picks span several workloads: each is compared with the first pick of its own workload.")
    # four significant digits: measured figures carry no more (repeats of one run differ by percents)
    table = charts.compare_table(chosen, by).apply(lambda col: col.map(lambda v: float(f"{v:.4g}") if pd.notna(v) else v))
    st.dataframe(table, key="compare-table")
    st.plotly_chart(charts.compare_ratios(chosen, by), key="compare-ratios")
