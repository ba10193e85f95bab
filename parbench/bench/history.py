"""Saved benchmark runs: pytest-benchmark JSON files under ``results/benchmarks/`` (torch-free).

Each file is one run of the benchmark suite with ``--benchmark-save`` or ``--benchmark-json``;
pytest-benchmark stores the machine (``machine_info``: host, CPU) and the commit (``commit_info``)
beside every benchmark's stats and ``extra_info``. ``load_history`` flattens them to one row per
benchmark per run, the shape a dashboard view plots (median over commits, one line per benchmark).
"""

from __future__ import annotations

import json
import platform
import socket
from pathlib import Path
from typing import Any, Iterator

HISTORY_DIR = Path("results") / "benchmarks"
COLUMNS = ("file", "datetime", "commit", "dirty", "node", "cpu", "benchmark", "group",
           "median_s", "iqr_s", "min_s", "max_s", "rounds", "extra_info")


def run_files(directory: str | Path = HISTORY_DIR) -> Iterator[Path]:
    """Every saved run below ``directory`` (pytest-benchmark nests them in a platform folder)."""
    root = Path(directory)
    if root.is_dir():
        yield from sorted(p for p in root.rglob("*.json") if p.is_file())


def read_run(path: Path) -> dict[str, Any] | None:
    """A saved run, or None if the file is not one (corrupt, another kind of JSON, or a run whose
    fields have other types than pytest-benchmark writes: edited by hand)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if _is_run(doc) else None


def _is_run(doc: Any) -> bool:
    """The shape ``rows`` and ``machine_key`` read: objects where they expect objects, numbers as stats."""
    def obj(v: Any) -> bool:
        return v is None or isinstance(v, dict)

    def num(v: Any) -> bool:
        return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))

    if not (isinstance(doc, dict) and isinstance(doc.get("machine_info"), dict)
            and isinstance(doc.get("benchmarks"), list) and obj(doc.get("commit_info"))
            and obj(doc["machine_info"].get("cpu")) and isinstance(doc.get("datetime") or "", str)):
        return False
    return all(isinstance(b, dict) and obj(b.get("stats")) and obj(b.get("extra_info"))
               and all(num((b.get("stats") or {}).get(k)) for k in ("median", "iqr", "min", "max", "rounds"))
               for b in doc["benchmarks"])


def machine_key(machine_info: dict[str, Any]) -> tuple[str, str]:
    """(host, CPU model): two runs are comparable only when both match."""
    cpu = machine_info.get("cpu") or {}
    return str(machine_info.get("node", "")), str(cpu.get("brand_raw") or machine_info.get("processor", ""))


def rows(path: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    node, cpu = machine_key(doc["machine_info"])
    commit = doc.get("commit_info") or {}
    out = []
    for b in doc["benchmarks"]:
        s = b.get("stats") or {}
        out.append({"file": str(path), "datetime": doc.get("datetime"), "commit": commit.get("id"),
                    "dirty": commit.get("dirty"), "node": node, "cpu": cpu, "benchmark": b.get("name"),
                    "group": b.get("group"), "median_s": s.get("median"), "iqr_s": s.get("iqr"),
                    "min_s": s.get("min"), "max_s": s.get("max"), "rounds": s.get("rounds"),
                    "extra_info": b.get("extra_info") or {}})
    return out


def load_history(directory: str | Path = HISTORY_DIR) -> "pandas.DataFrame":  # noqa: F821
    """One row per benchmark per saved run, oldest run first; an empty frame with every column if none."""
    import pandas as pd

    records = [r for p in run_files(directory) if (doc := read_run(p)) for r in rows(p, doc)]
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    return frame.sort_values(["datetime", "benchmark"], kind="stable").reset_index(drop=True)


def latest_baseline(directory: str | Path = HISTORY_DIR, machine: tuple[str, str] | None = None) -> Path | None:
    """The newest saved run made on ``machine`` (default: this one), or None: timings from another
    machine are no baseline (a busier or quieter machine trips or hides regressions)."""
    from parbench.results import cpu_model

    machine = machine or (socket.gethostname() or platform.node(), cpu_model())
    runs = [(doc.get("datetime", ""), p) for p in run_files(directory)
            if (doc := read_run(p)) and machine_key(doc["machine_info"]) == machine]
    return max(runs)[1] if runs else None


def history_figure(frame: "pandas.DataFrame", benchmarks: list[str] | None = None):  # noqa: F821
    """Median step time (ms) per benchmark over saved runs, IQR as error bars: one line per benchmark."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, rows in frame.groupby("benchmark", sort=True):
        if benchmarks is not None and name not in benchmarks:
            continue
        labels = [f"{str(c)[:8]} {str(d)[:16]}" for c, d in zip(rows["commit"], rows["datetime"])]
        fig.add_trace(go.Scatter(x=labels, y=rows["median_s"] * 1e3, name=name, mode="lines+markers",
                                 error_y={"type": "data", "array": list(rows["iqr_s"] * 1e3)}))
    fig.update_layout(xaxis_title="run (commit, time)", yaxis_title="median (ms)", legend_title="benchmark")
    return fig


def noise(frame: "pandas.DataFrame") -> dict[str, float]:  # noqa: F821
    """Run-to-run change of each benchmark's median between consecutive saved runs of one machine,
    in percent: ``{"pairs", "p50_pct", "p90_pct", "max_pct"}``. Run the gate a few times on unchanged
    code, then choose a compare-fail threshold above ``max_pct``."""
    from parbench.metrics import stats

    changes = []
    for _, rows in frame.sort_values("datetime", kind="stable").groupby(["node", "cpu", "benchmark"]):
        medians = list(rows["median_s"])
        changes += [abs(b / a - 1) * 100 for a, b in zip(medians, medians[1:]) if a]
    if not changes:
        return {"pairs": 0, "p50_pct": float("nan"), "p90_pct": float("nan"), "max_pct": float("nan")}
    return {"pairs": len(changes), "p50_pct": stats.median(changes), "p90_pct": stats.quantile(changes, 0.9),
            "max_pct": max(changes)}
