"""Compare: two or more runs or strategies, every headline metric side by side with ratios."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Compare"

MODES = {"strategy x world size x workload (median over runs)": "config_label", "single runs": "run_label"}


def default_pick(ok, by: str, options: list[str]) -> list[str]:
    """The first option and the first one of another strategy (else the second option)."""
    strategy = ok.groupby(by, sort=False)["strategy"].first()
    other = [o for o in options[1:] if strategy[o] != strategy[options[0]]] or options[1:]
    return options[:1] + other[:1]


def render(ctx: "ViewContext") -> None:
    ok = charts.ok_runs(ctx.runs)
    if ok.empty:
        st.info("No successful runs to compare under the current filters.")
        return
    by = MODES[st.radio("compare", list(MODES), horizontal=True, key="compare-mode")]
    options = list(dict.fromkeys(ok[by]))
    picked = st.multiselect("pick two or more (the first is the baseline of the ratios)", options,
                            default=default_pick(ok, by, options), key="compare-pick")
    if len(picked) < 2:
        st.info("Pick at least two to compare.")
        return
    chosen = ok[ok[by].isin(picked)]
    chosen = chosen.assign(_o=chosen[by].map(picked.index)).sort_values("_o", kind="stable").drop(columns="_o")
    st.dataframe(charts.compare_table(chosen, by), key="compare-table")
    st.plotly_chart(charts.compare_ratios(chosen, by), key="compare-ratios")
