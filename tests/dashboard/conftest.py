"""Fixtures of the dashboard tests: a committed results directory of real runs.

``fixtures/results`` holds 7 records produced by real ``parbench run`` invocations (torch 2.13
CPU, gloo): single x1 twice and single x1 with 2 layers, ddp x2 twice, pipeline x2 (2 layers,
2 micro-batches), and ddp x4 under ``archive/`` (a second ``source``).
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


def fixture_records() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURE_RESULTS.rglob("runs/*.json"))]


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
