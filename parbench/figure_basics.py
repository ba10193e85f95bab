"""The two helpers every chart module needs (torch-free, plotly only): ok runs, and a placeholder figure."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def ok_runs(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if not df.empty else df


def empty_figure(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False,
                      annotations=[dict(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")])
    return fig
