"""The golden gate: every strategy's deterministic figures equal the committed golden file, exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from parbench.bench import golden, harness

GOLDEN = Path(__file__).with_name("golden.json")
UPDATE_HINT = ('if the change is intended: parbench bench golden --path tests/benchmarks/golden.json '
               '--update --reason "why"')


@pytest.fixture(scope="module")
def measured(launched) -> dict:
    return {s.value: golden.entry(*launched(s)) for s in harness.implemented_strategies()}


def test_figures_match_golden_file(measured):
    problems = golden.check(measured, GOLDEN)
    assert not problems, "\n".join(problems[:40] + [UPDATE_HINT])


def test_gate_fails_on_a_perturbed_golden_value(measured, tmp_path):
    path = tmp_path / "golden.json"
    golden.update(measured, "baseline for this test", path)
    assert golden.check(measured, path) == []
    perturbed = copy.deepcopy(measured)
    perturbed["ddp"]["ranks"]["rank0"]["comm_bytes_per_step"]["parameter"] += 4
    problems = golden.check(perturbed, path)
    assert len(problems) == 1 and problems[0].startswith("ddp.ranks.rank0.comm_bytes_per_step.parameter:")


def test_a_hand_edited_golden_file_fails_integrity(measured, tmp_path):
    path = tmp_path / "golden.json"
    golden.update(measured, "baseline for this test", path)
    doc = json.loads(path.read_text())
    doc["figures"]["ddp"]["ranks"]["rank1"]["mem_param_bytes"] += 1  # a silent edit, no update entry
    path.write_text(json.dumps(doc))
    problems = golden.check(measured, path)
    assert any("fingerprint" in p for p in problems)
    assert any(p.startswith("ddp.ranks.rank1.mem_param_bytes:") for p in problems)


def test_update_needs_a_reason_and_records_it(measured, tmp_path):
    path = tmp_path / "golden.json"
    with pytest.raises(golden.GoldenError):
        golden.update(measured, "", path)
    golden.update(measured, "baseline for this test", path)
    with pytest.raises(golden.GoldenError):
        golden.update(measured, "  ", path)
    changed_figures = copy.deepcopy(measured)
    changed_figures["ddp"]["shape"]["global_batch_size"] = 32
    changed = golden.update(changed_figures, "batch 32", path)
    doc = golden.load(path)
    assert [c.split(":")[0] for c in changed] == ["ddp.shape.global_batch_size"]
    assert doc["updates"][-1]["reason"] == "batch 32" and golden.check(changed_figures, path) == []
    assert golden.update(changed_figures, "nothing changed", path) == [] and len(golden.load(path)["updates"]) == len(doc["updates"])


def test_flatten_and_diff_exact():
    a = {"x": {"y": 1, "z": {"w": 2.0}}, "e": {}}
    assert golden.flatten(a) == {"x.y": 1, "x.z.w": 2.0, "e": {}}
    assert golden.diff(a, {"x": {"y": 1, "z": {"w": 2.5}}, "e": {}}) == ["x.z.w: golden 2.0 != measured 2.5"]
    assert golden.diff({"a": 1}, {"b": 1}) == ["a: golden 1 != measured '(absent)'", "b: golden '(absent)' != measured 1"]
