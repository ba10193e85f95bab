"""The layout key of a result record: what makes two runs repeats of one measurement, and short labels.

Torch-free and pandas-only: the dashboard, ``parbench report`` and ``parbench results`` group by it.

Two runs are repeats of one layout when every *part* below agrees (strategy, world size, the
dp x tp x pp mesh of a hybrid, pipeline schedule / micro-batches / virtual stages where a pipeline
exists, dp_mode of a hybrid, parameter servers of ps, backend, device, data mode, precision) and
they ran the same *workload* (name, shape, dataset, global batch). Medians are taken only over
such repeats. A part that does not apply to a run (the schedule of a run without a pipeline) is
null, so it neither splits groups nor shows in labels.

Labels name only the parts that differ within the runs on screen: with three hybrid meshes at
W=4 they read ``hybrid x4 dp1·tp2·pp2``, ``hybrid x4 dp2·tp1·pp2``, ``hybrid x4 dp2·tp2·pp1``;
with one ddp run, just ``ddp x2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

Frame = pd.DataFrame
Column = Callable[[Frame], pd.Series]


@dataclass(frozen=True, kw_only=True)
class Part:
    """One part of a key: its name, how to read it from the frame (null where it does not apply)."""

    name: str
    read: Column
    always: bool = False
    """Shown in every label (strategy, world size), not only where it differs."""


def _col(df: Frame, name: str) -> pd.Series:
    """The column, or nulls for records written before the field existed."""
    return df[name] if name in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)


def _num(df: Frame, name: str) -> pd.Series:
    return pd.to_numeric(_col(df, name), errors="coerce").astype("Int64")


def _fmt(values: pd.Series, template: str, where: pd.Series | None = None) -> pd.Series:
    """``template`` filled per row where the value is known and ``where`` holds; null elsewhere."""
    known = values.notna() if where is None else values.notna() & where.fillna(False).astype(bool)
    out = pd.Series([None] * len(values), index=values.index, dtype=object)
    out[known] = [template.format(v) for v in values[known]]
    return out


def _pipelined(df: Frame) -> pd.Series:
    return (_num(df, "pp").fillna(1) > 1) | (_col(df, "strategy") == "pipeline")


def _mesh(df: Frame) -> pd.Series:
    """dp·tp·pp of a hybrid (other strategies derive their mesh from the world size)."""
    hybrid = _col(df, "strategy") == "hybrid"
    dp, tp, pp = (_num(df, k) for k in ("dp", "tp", "pp"))
    out = pd.Series([None] * len(df), index=df.index, dtype=object)
    out[hybrid] = [f"dp{a}·tp{b}·pp{c}" for a, b, c in zip(dp[hybrid], tp[hybrid], pp[hybrid])]
    return out


def _dp_mode(df: Frame) -> pd.Series:
    return _fmt(_col(df, "dp_mode"), "dp={}", (_col(df, "strategy") == "hybrid") & (_num(df, "dp").fillna(1) > 1))


LAYOUT_PARTS: tuple[Part, ...] = (
    Part(name="strategy", read=lambda df: _col(df, "strategy").astype(object), always=True),
    Part(name="world_size", read=lambda df: _fmt(_num(df, "world_size"), "x{}"), always=True),
    Part(name="mesh", read=_mesh),
    Part(name="schedule", read=lambda df: _fmt(_col(df, "schedule"), "{}", _pipelined(df))),
    Part(name="micro_batches", read=lambda df: _fmt(_num(df, "micro_batches"), "mb{}", _pipelined(df))),
    Part(name="virtual_stages", read=lambda df: _fmt(_num(df, "virtual_stages"), "v{}",
                                                     _col(df, "schedule") == "interleaved1f1b")),
    Part(name="dp_mode", read=_dp_mode),
    Part(name="servers", read=lambda df: _fmt(_num(df, "servers"), "servers={}", _col(df, "strategy") == "ps")),
    Part(name="ep", read=lambda df: _fmt(_num(df, "ep"), "ep{}", (_col(df, "strategy") == "ep") | (_num(df, "ep") > 1))),
    Part(name="backend", read=lambda df: _fmt(_col(df, "backend"), "{}")),
    Part(name="device", read=lambda df: _fmt(_col(df, "device"), "{}")),
    Part(name="data_mode", read=lambda df: _fmt(_col(df, "data_mode"), "data={}")),
    Part(name="precision", read=lambda df: _fmt(_col(df, "precision"), "{}")),
)
"""The layout key, in label order. A new record field that changes the layout: add one Part here."""


def _shape_part(field: str, template: str, token_only: bool = False) -> Part:
    def read(df: Frame) -> pd.Series:
        where = ~_col(df, "workload").isin(["mlp"]) if token_only else None
        return _fmt(_num(df, field), template, where)
    return Part(name=field, read=read, always=True)


WORKLOAD_PARTS: tuple[Part, ...] = (
    Part(name="workload", read=lambda df: _col(df, "workload").astype(object), always=True),
    _shape_part("layers", "L{}"),
    _shape_part("hidden", "H{}"),
    _shape_part("heads", "heads{}", token_only=True),
    _shape_part("seq_len", "T{}", token_only=True),
    _shape_part("vocab_size", "V{}", token_only=True),
    Part(name="dataset", read=lambda df: _fmt(_col(df, "dataset"), "{}", _col(df, "dataset") != "synthetic"),
         always=True),
    _shape_part("global_batch_size", "B{}"),
    *(Part(name=field, read=lambda df, f=field, t=template: _fmt(_col(df, f), t, _col(df, "workload") == "moe"),
           always=True)
      for field, template in (("experts", "E{}"), ("top_k", "top{}"), ("capacity_factor", "cf{}"),
                              ("moe_every", "every{}"), ("router", "{}"))),
)
"""The workload and its shape: every part is always shown (a workload label names its shape)."""


def part_frame(df: Frame, parts: tuple[Part, ...]) -> Frame:
    """One string column per part (null where the part does not apply)."""
    return pd.DataFrame({p.name: p.read(df) for p in parts}, index=df.index)


def key(parts: Frame) -> pd.Series:
    """Every part joined: equal keys = repeats of one layout (nulls are kept as '-')."""
    return parts.fillna("-").astype(str).agg("|".join, axis=1) if len(parts) else pd.Series([], dtype=object)


def labels(parts: Frame, spec: tuple[Part, ...]) -> pd.Series:
    """Short labels: the ``always`` parts, plus each part with two or more values among these rows.

    A part that is null on some rows (it does not apply there) and one value on the others is left
    out, unless two different keys would then read alike."""
    if parts.empty:
        return pd.Series([], index=parts.index, dtype=object)
    keys = key(parts)
    for dropna in (True, False):
        shown = [p.name for p in spec if p.always or parts[p.name].nunique(dropna=dropna) > 1]
        out = parts[shown].apply(lambda row: " ".join(v for v in row if isinstance(v, str) and v), axis=1)
        if out.groupby(out).apply(lambda s: keys[s.index].nunique()).max() <= 1:
            break
    return out


def short_id(run_ids: pd.Series, width: int = 8) -> pd.Series:
    """The first ``width`` hex digits of each run id (git-style short ids)."""
    return run_ids.astype(str).str[:width]


def layout_labels(df: Frame) -> pd.Series:
    """The layout label of every run, naming the parts that differ among these runs."""
    return labels(part_frame(df, LAYOUT_PARTS), LAYOUT_PARTS)


def workload_labels(df: Frame) -> pd.Series:
    """The workload and its shape, e.g. ``transformer L4 H32 heads4 T16 V128 B48``."""
    return labels(part_frame(df, WORKLOAD_PARTS), WORKLOAD_PARTS)
