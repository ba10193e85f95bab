"""Which layout? Per workload, the layouts ranked by throughput with their memory and communication
per rank, the fastest that fits a memory budget marked, and throughput vs memory (the Pareto front)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Which layout?"


def render(ctx: "ViewContext") -> None:
    pct = st.slider("memory budget per rank, % of what the single-process run needs", 5, 150, 100, step=5,
                    key="landing-budget",
                    help="A layout fits when its busiest rank holds fewer tensor bytes (parameters, gradients, "
                         "optimizer state, activations) than this share of the world-size-1 run of the same workload.")
    ranked = charts.ranking(ctx.runs, pct / 100)
    if ranked.empty:
        st.info("No successful runs under the current filters: run `parbench sweep` or widen the filters.")
        return
    for wl, sub in ranked.groupby("workload_label", sort=False):
        st.subheader(wl)
        st.markdown(verdict(sub, pct))
        st.dataframe(charts.ranking_table(sub), hide_index=True, key=f"landing-ranking-{charts.workloads(ranked).index(wl)}")
    st.plotly_chart(charts.pareto_chart(ctx.runs), key="landing-pareto")
    st.caption("Each row is one layout: the median over its repeats (never pooled across layouts, workloads or "
               "sources). Memory: tensor bytes of the busiest rank; peak RSS is the whole process (mostly the torch "
               "runtime). Communication: bytes one rank sends per optimizer step. Timings on a shared CPU swing; "
               "compare runs measured together.")


def verdict(sub, pct: int) -> str:
    """One sentence per workload: the fastest layout, and the fastest that fits the budget."""
    best = sub.iloc[0]
    text = f"Fastest: **{best['layout_label']}** ({best['throughput_samples_per_s']:,.1f} samples/s)."
    fit = sub[sub["fastest_fit"]]
    if sub["budget_bytes"].isna().all():
        return text + " No world-size-1 run of this workload, so no memory budget: every layout counts as fitting."
    if fit.empty:
        return text + f" No layout fits in {pct}% of the single-process memory."
    f = fit.iloc[0]
    return text + (f" Fastest that fits in {pct}% of the single-process memory ({f['budget_bytes'] / charts.MIB:,.3f} "
                   f"MiB per rank): **{f['layout_label']}** ({f['throughput_samples_per_s']:,.1f} samples/s, "
                   f"{f['memory_bytes'] / charts.MIB:,.3f} MiB per rank).")
