"""Correctness: loss curves of each layout over the single-process reference, and the max difference."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from parbench import charts

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Correctness"


def render(ctx: "ViewContext") -> None:
    st.plotly_chart(charts.loss_curves(ctx.runs), key="loss-curves")
    st.plotly_chart(charts.loss_diff(ctx.runs), key="loss-diff")
    st.caption(f"Every layout trains on the same global batch and seed as the single-process reference; float32 "
               f"agreement is ~1e-7 to 1e-5. A run passes when every step's loss is within {charts.LOSS_TOLERANCE:g} "
               "of the reference (the dashed line); an exact match (difference 0) sits on the axis floor, ticked "
               "'0 (exact)', as an open marker.")
