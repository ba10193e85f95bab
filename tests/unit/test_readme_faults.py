"""README's "What happens when things go wrong" stays true: every row names a test that exists,
and every fault the table promises to cover has a row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ("rank raises", "rank crashes", "rank hangs", "hangs, in a sweep", "kill -9", "Ctrl-C", "two sweeps",
          "disk that fills up", "corrupt record", "wrong-typed field", "NaN or infinite", "bad input")


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## What happens when things go wrong")
    return text[start:text.index("\n## ", start + 1)]


def test_every_fault_has_a_row_and_every_row_names_an_existing_test():
    rows = [l for l in section().splitlines() if l.startswith("| ") and not l.startswith("| fault")]
    for fault in FAULTS:
        assert any(fault in r.split("|")[1] for r in rows), fault
    refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", section())
    assert len(refs) >= len(rows) + 1  # one per row, and the listening-sockets test
    for path, name in refs:
        tree = ast.parse((ROOT / path).read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in defined, f"{path}::{name} is named in README but does not exist"
