"""The record store: atomic writes, corrupt records skipped with a warning, schema columns always present."""

import json
import re
from pathlib import Path

import pytest

from parbench import results

ROOT = Path(__file__).resolve().parents[2]


def _rec(run_id: str, **kw) -> dict:
    return {"run_id": run_id, "status": "ok", "strategy": "ddp", "world_size": 2, "workload": "mlp",
            "config": {"strategy": "ddp", "world_size": 2}, **kw}


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


@pytest.mark.parametrize("field, value, why", [
    ("world_size", "two", "field 'world_size' is 'two' (str), expected an integer"),
    ("sweep_id", ["a", "b"], "field 'sweep_id' is ['a', 'b'] (list), expected a string"),
    ("step_time_s_median", "fast", "field 'step_time_s_median' is 'fast' (str), expected a number"),
    ("repeat", True, "field 'repeat' is True (bool), expected an integer"),
    ("status", "great", "field 'status' is 'great', expected one of ok, failed, timeout, diverged"),
    ("strategy", None, "field(s) 'strategy' missing: every run record states them"),
    ("config", None, "field(s) 'config' missing: every run record states them"),
    ("world_size", 0, "field 'world_size' is 0, expected >= 1"),
    ("step_times_s", [0.2, "slow"], "field 'step_times_s' holds 'slow' (str), expected numbers"),
    ("step_times_s", [0.2, -0.1], "field 'step_times_s' holds a negative time (-0.1)"),
    ("losses", [2.3, "nan"], "field 'losses' holds 'nan' (str), expected numbers or null"),
    ("per_rank", [3], "field 'per_rank' holds 3 (int), expected objects"),
    ("comm_ops", {"all_reduce/parameter": 5},
     "field 'comm_ops' holds 'all_reduce/parameter': 5, expected an object of numbers (count, bytes)"),
    ("per_rank", [{"rank": 0, "mem_param_bytes": {"a": 1}}],
     "field 'per_rank[0].mem_param_bytes' is {'a': 1} (dict), expected a number"),
    ("breakdown_per_rank", [{"rank": 0, "time_compute_s": 0.1}, {"rank": "1", "time_compute_s": 0.1}],
     "field 'breakdown_per_rank[1].rank' is '1' (str), expected an integer"),
    ("capacity_factor", "1.25", "field 'capacity_factor' is '1.25' (str), expected a number"),
    ("data_in_step", 1, "field 'data_in_step' is 1 (int), expected true or false"),
    ("moe_load_imbalance_per_step", [1.2, None],
     "field 'moe_load_imbalance_per_step' holds None (NoneType), expected numbers"),
    ("moe_tokens_per_expert_per_rank", [[3, 4], []],
     "field 'moe_tokens_per_expert_per_rank' is not a 2-deep array of numbers with no empty row"),
    ("moe_tokens_per_expert_per_step", [[[3, 4]], [["4", 3]]],
     "field 'moe_tokens_per_expert_per_step' is not a 3-deep array of numbers with no empty row"),
])
def test_wrong_typed_fields_are_skipped_naming_file_and_field(tmp_path, capsys, field, value, why):
    """Well-formed JSON with a wrong-typed field: load and ``parbench results`` skip it with a warning
    (``parbench report`` reads through the same load: checked once, below)."""
    from parbench.cli import main

    good, path = _fixture_with_bad_record(tmp_path, field, value)
    with pytest.warns(UserWarning, match=re.escape(f"skipped corrupt result record {path}: {why}")):
        assert sorted(results.load(tmp_path)["run_id"]) == sorted(r["run_id"] for r in good)
    assert main(["results", "--results-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert f"{len(good)} runs in" in out and f"{path}: {why}" in err


def test_report_skips_a_wrong_typed_record_naming_file_and_field(tmp_path, capsys):
    from parbench.cli import main

    good, path = _fixture_with_bad_record(tmp_path, "world_size", "two")
    assert main(["report", "--results-dir", str(tmp_path), "--out", str(tmp_path / "r.html")]) == 0
    assert f"skipped corrupt result record {path}: field 'world_size' is 'two' (str), expected an integer" \
        in capsys.readouterr().err
    assert f"{len(good)} runs" in (tmp_path / "r.html").read_text()


def _fixture_with_bad_record(tmp_path, field, value):
    """The dashboard fixture's records, and one more with ``field`` set to ``value``: (good, bad path)."""
    fixture = ROOT / "tests" / "dashboard" / "fixtures" / "results"
    good = [json.loads(p.read_text()) for p in sorted(fixture.rglob("runs/*.json"))]
    for rec in good:
        results.write_record(tmp_path, rec)
    return good, results.write_record(tmp_path, dict(good[0], run_id="f" * 32, **{field: value}))


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


def test_oversubscribed_counts_every_thread_of_the_ranks_on_a_host(monkeypatch):
    """Ranks x threads per rank against the host's CPUs: two ranks of two threads fill four CPUs, one more thread
    does not fit; a GPU run's compute is on its devices (None)."""
    from parbench import results

    monkeypatch.setattr(results, "host_cpus", lambda: 4)
    assert results.oversubscribed(2, 2, "cpu") is False
    assert results.oversubscribed(2, 3, "cpu") is True
    assert results.oversubscribed(5, 1, "cpu") is True
    assert results.oversubscribed(8, 1, "cuda") is None
