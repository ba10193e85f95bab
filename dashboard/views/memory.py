"""Memory: tensor memory of the busiest rank per layout, stacked by part, and every rank of one run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Memory"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.memory_stacked(ctx.runs), key="memory-stacked")
    st.caption("Parameters, gradients and optimizer state are summed tensor sizes; activations are the peak bytes "
               "saved for backward. Beside each bar: the process's peak RSS on a CPU (the whole process, mostly "
               "the torch runtime) or CUDA's reserved peak on a GPU. " + optimizer_note(ctx.runs))
    ok = charts.ok_runs(ctx.runs)
    if ok.empty:
        return
    labels = (ok["run_label"] + " · " + ok["workload_label"]).tolist()
    default = next((i for i, pp in enumerate(ok["pp"]) if (pp or 1) > 1), 0)
    label = st.selectbox("run for the per-rank view (pipeline stages differ)", labels, index=default,
                         key="memory-run")
    run = ok.iloc[labels.index(label)]
    st.plotly_chart(charts.memory_per_rank(run), key="memory-per-rank")


def optimizer_note(runs) -> str:
    """Why a workload shows no optimizer state: the mlp trains with plain SGD (no momentum buffers)."""
    if "mlp" in set(runs["workload"]):
        return ("The mlp trains with plain SGD, which keeps no optimizer state; the transformer's AdamW keeps two "
                "moments per parameter.")
    return ""
