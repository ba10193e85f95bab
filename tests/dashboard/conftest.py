"""Fixtures of the dashboard tests: a committed results directory of real runs, two sources.

``fixtures/results/runs`` (source ".", the user's own results, the newest): 7 records of real
``parbench run`` invocations (torch 2.13 CPU, gloo, global batch 48, 5 timed steps): single x1 of
the mlp (L3 H128) and of the transformer (L4 H32 heads4 T16 V128), ddp x2 mlp, hybrid x4
dp2·tp2·pp1 and dp1·tp2·pp2 (4 micro-batches) on the mlp, hybrid x4 dp2·tp1·pp2 on the
transformer, and a ddp x2 mlp run whose rank 1 raised (status failed).

``fixtures/results/reference/runs`` (source "reference"): 28 records copied unchanged from an
earlier measurement of the committed reference sweep (``results/reference``, same shapes): for both workloads single x1 and
ddp x2 (two repeats each), ddp x4, pipeline x2, zero2 x2, tp x2 (one each), and the three hybrid
meshes at W=4 (two repeats each).
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

FIXTURE_RESULTS = Path(__file__).parent / "fixtures" / "results"
APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
MESHES = ("dp1·tp2·pp2", "dp2·tp1·pp2", "dp2·tp2·pp1")


def fixture_records(source: str | None = None) -> list[dict]:
    """Every fixture record, or those of one source ("." or "reference")."""
    recs = []
    for p in sorted(FIXTURE_RESULTS.rglob("runs/*.json")):
        src = "." if p.parent.parent == FIXTURE_RESULTS else p.parent.parent.name
        if source is None or src == source:
            recs.append(json.loads(p.read_text()) | {"_source": src})
    return recs


def mesh(rec: dict) -> str:
    return f"dp{rec['dp']}·tp{rec['tp']}·pp{rec['pp']}"


def decode(values):
    """A plotly JSON array: a plain list, or plotly 7's {"dtype", "bdata"} base64 encoding."""
    if isinstance(values, dict) and "bdata" in values:
        arr = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        return arr.reshape([int(n) for n in values["shape"].split(",")]).tolist() if "shape" in values else arr.tolist()
    return list(values)


@pytest.fixture
def results_copy(tmp_path: Path) -> Path:
    """A writable copy of the fixture results directory."""
    dst = tmp_path / "results"
    shutil.copytree(FIXTURE_RESULTS, dst)
    return dst
