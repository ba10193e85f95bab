"""The record store: atomic writes, corrupt records skipped with a warning, schema columns always present."""

import json
import re
from pathlib import Path

import pytest

from parbench import results

ROOT = Path(__file__).resolve().parents[2]


def _rec(run_id: str, **kw) -> dict:
    return {"run_id": run_id, "status": "ok", "strategy": "ddp", "world_size": 2, **kw}


def test_load_empty_and_missing_dirs_have_every_column(tmp_path):
    for path in (tmp_path, tmp_path / "missing"):
        frame = results.load(path)
        assert len(frame) == 0
        assert set(results.SCHEMA) <= set(frame.columns)


def test_load_skips_corrupt_records_with_a_warning(tmp_path):
    results.write_record(tmp_path, _rec("a" * 32))
    results.write_record(tmp_path / "reference", _rec("b" * 32, strategy="single", world_size=1))
    (tmp_path / "runs" / "broken.json").write_text('{"run_id": "x", "sta')
    (tmp_path / "runs" / "other.json").write_text(json.dumps([1, 2]))
    with pytest.warns(UserWarning, match="skipped corrupt result record"):
        frame = results.load(tmp_path)
    assert sorted(frame["run_id"]) == ["a" * 32, "b" * 32]
    assert sorted(frame["source"]) == [".", "reference"]


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "x.json"
    results.write_json_atomic(path, {"v": 1})
    with pytest.raises(TypeError):
        results.write_json_atomic(path, {"v": object()})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_export_csv_and_parquet(tmp_path):
    results.write_record(tmp_path, _rec("c" * 32, losses=[1.0, 0.5], comm_ops={"all_reduce/parameter": {"count": 1}}))
    frame = results.load(tmp_path)
    for name in ("runs.csv", "runs.parquet"):
        out = results.export(frame, tmp_path / name)
        assert out.stat().st_size > 0
    with pytest.raises(ValueError, match="use a .csv or .parquet"):
        results.export(frame, tmp_path / "runs.xlsx")


def test_schema_readme_documents_every_field():
    """results/README.md is the schema's documentation: every SCHEMA field appears in its table."""
    text = (ROOT / "results" / "README.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M))
    assert set(results.SCHEMA) <= documented, set(results.SCHEMA) - documented
