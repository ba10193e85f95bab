"""``parbench validate --rows FILE``: measured runs given as simulate command lines, compared with their predictions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parbench.cli import main
from parbench.commands.simulate import command_layout, command_prediction
from parbench.config import ConfigError
from parbench.sim.architecture import read_hf_config
from parbench.sim.published_memory import compare_runs
from parbench.sim.rows import compare_rows, load_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
LLAMA_8B = "--model llama3-8b --cluster h100-sxm --gpus 16 --tp 2 --micro-batch 1 --global-batch 64 --zero 1"


def _rows_file(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "rows.toml"
    p.write_text("\n".join(f"[[row]]\n{r}\n" for r in rows))
    return p


def _row(name: str = "a", simulate: str = LLAMA_8B, metric: str = "s_per_iteration", value: str = "2.0",
         extra: str = "") -> str:
    return f'name = "{name}"\nsource = "here"\nsimulate = "{simulate}"\nmetric = "{metric}"\nvalue = {value}\n{extra}'


def test_the_example_file_predicts_what_the_published_tables_predict():
    """The example restates eight published runs as simulate command lines: each must reach the same layout,
    architecture and so the same error as the built-in table builds them (two construction paths, one answer)."""
    built = {r["name"]: r for r in compare_runs()}
    rows = compare_rows(load_rows(EXAMPLES / "rows.toml"), command_prediction)
    assert len(rows) == 8
    for r in rows:
        b = built[r["name"]]
        assert r["published"] == b["published"] and r["metric"] == b["metric"], r["name"]
        assert r["metric_error_pct"] == pytest.approx(b["metric_error_pct"], abs=1e-9), r["name"]
        assert r["allocator_gib_predicted"] == pytest.approx(b["allocator_gib_predicted"], rel=1e-12), r["name"]


SC21_1_7B = ("--model gpt3-175b --layers=24 --hidden=2304 --heads=24 --vocab=51200 --ffn-hidden=9216 --no-tie-embeddings "
             "--dropout --cluster=a100-80gb --gpus=32 --global-batch=512 --recompute=full --attention=eager "
             "--software megatron-lm-2021 --precision=fp16")
"""SC21 Table 1's GPT 1.7B (24 layers of 2304, s = 2048, V = 51200, batch 512 on 32 A100) as it ran: 137 TFLOP/s."""


def test_a_run_printed_as_hardware_tflops_or_as_a_whole_runs_rate_compares_as_its_iteration_time(tmp_path):
    """One published figure in five forms: SC21's 137 "achieved teraFLOP/s" per GPU (eq. 3: 96 B s l h^2 (1 + s/6h
    + V/16lh), recomputation counted), the iteration time eq. 3 makes of it, and that time as samples/s, tokens/s
    of the whole run and tokens/s per GPU. Each is the same published step, so the same prediction beside it."""
    b, s, l, h, v, gpus = 512, 2048, 24, 2304, 51200, 32
    step = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)) / (137e12 * gpus)
    forms = {"hw_tflops_per_gpu": 137, "s_per_iteration": step, "samples_per_s": b / step,
             "tokens_per_s": b * s / step, "tps_per_gpu": b * s / step / gpus}
    path = _rows_file(tmp_path, *(_row(name=k, simulate=SC21_1_7B, metric=k, value=repr(x)) for k, x in forms.items()))
    rows = compare_rows(load_rows(path), command_prediction)
    assert [r["metric"] for r in rows] == list(forms)
    predicted = rows[0]["step_s_predicted"]
    for r in rows:
        assert r["step_s_published"] == pytest.approx(step, rel=1e-9), r["metric"]
        assert r["step_s_predicted"] == predicted
        rate_error = (step / predicted - 1) * 100  # a rate's error, an iteration time's is (predicted / step - 1)
        expected = (predicted / step - 1) * 100 if r["metric"] == "s_per_iteration" else rate_error
        assert r["metric_error_pct"] == pytest.approx(expected, abs=1e-9), r["metric"]


def test_a_scaling_series_compares_a_whole_runs_rate_per_gpu():
    from parbench.sim.published import per_gpu_rate

    assert per_gpu_rate("tokens_per_s", 80_000, 8) == per_gpu_rate("tps_per_gpu", 10_000, 8) == 10_000
    assert per_gpu_rate("samples_per_s", 64, 16) == 4 and per_gpu_rate("hfu", 0.5, 16) == 0.5
    assert per_gpu_rate("s_per_iteration", 2.0, 16, batch=64) == 2


def test_a_row_with_hfu_compares_its_hardware_flops_utilisation(tmp_path):
    """HFU counts the recomputed forward: under full recomputation its FLOPs are eq. 3's, 96 B s l h^2 (1 + s/6h +
    V/16lh), against the model FLOPs' 72 B s l h^2 (1 + s/6h + V/12lh) (Narayanan et al. 2021, sec. 5.1 and app.),
    so an HFU row predicts that ratio times the MFU row's figure for the same step."""
    s, l, h, v = 2048, 24, 2304, 51200
    ratio = 96 * (1 + s / (6 * h) + v / (16 * l * h)) / (72 * (1 + s / (6 * h) + v / (12 * l * h)))
    path = _rows_file(tmp_path, _row("m", SC21_1_7B, "mfu", "0.34"), _row("h", SC21_1_7B, "hfu", "0.45"))
    m, hfu = compare_rows(load_rows(path), command_prediction)
    assert hfu["predicted"] == pytest.approx(ratio * m["predicted"], rel=1e-9)
    assert hfu["step_s_predicted"] == m["step_s_predicted"]


def test_the_layout_builder_is_the_prediction_s_without_the_prediction():
    """``command_layout`` builds and checks what ``command_prediction`` predicts (cluster, model, layout), and refuses
    what it refuses, with the same message, before any prediction."""
    from parbench.layout import ConfigError

    for argv in (LLAMA_8B.split(), [*LLAMA_8B.split(), "--precision", "fp8", "--zero", "1", "--software", "nemo"],
                 ["--model", "llama3-8b", "--cluster", "b200", "--gpus", "8", "--precision", "fp8",
                  "--fp8-scaling", "mxfp8"]):
        built, predicted = command_layout(argv), command_prediction(argv)
        assert built == predicted[:3]
    for bad in (["--model", "llama3-8b", "--precision", "fp8", "--fp8-scaling", "mxfp8"],
                ["--model", "llama3-8b", "--tp", "16", "--gpus", "16"], ["--model", "llama3-8b", "--search"]):
        with pytest.raises(ConfigError) as built:
            command_layout(bad)
        with pytest.raises(ConfigError) as predicted:
            command_prediction(bad)
        assert str(built.value) == str(predicted.value)


def test_each_metric_is_compared_with_the_prediction_s_own_step(tmp_path):
    """tokens/s per GPU = global batch x sequence / (step x GPUs), from the predicted step; the error is
    predicted / measured - 1."""
    *_, p = command_prediction(LLAMA_8B.split())
    tps = 64 * 8192 / (p.step_time_s * 16)
    path = _rows_file(tmp_path, _row("s", value="2.0"), _row("t", metric="tps_per_gpu", value="5000"),
                      _row("m", metric="mfu", value="0.5"))
    s, t, m = compare_rows(load_rows(path), command_prediction)
    assert s["metric_error_pct"] == pytest.approx((p.step_time_s / 2.0 - 1) * 100, rel=1e-12)
    assert t["predicted"] == pytest.approx(tps, rel=1e-12)
    assert t["metric_error_pct"] == pytest.approx((tps / 5000 - 1) * 100, rel=1e-12)
    assert m["metric_error_pct"] == pytest.approx((p.mfu / 0.5 - 1) * 100, rel=1e-12)
    assert s["cluster"] == "h100-sxm" and s["gpus"] == 16 and s["simulate"] == LLAMA_8B


def test_the_command_prints_rows_sources_and_trends_and_json(tmp_path, capsys):
    series = 'series = "weak"'
    path = _rows_file(tmp_path, _row("a", extra=series),
                      _row("b", simulate=LLAMA_8B.replace("16", "32").replace("64", "128"), value="2.1", extra=series))
    assert main(["validate", "--rows", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 measured runs beside their predictions" in out and "trend sign right on 1 of 1 series" in out
    assert main(["validate", "--rows", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data["rows"]] == ["a", "b"] and data["by_source"][0]["rows"] == 2
    assert data["trends"]["weak"]["gpus"] == [16, 32]


def test_the_nemotron_config_has_the_report_s_parameter_counts():
    """Parmar et al. 2024, sec. 2: "12.5 billion non-embedding parameters" (its "3.2 billion embedding
    parameters" are the untied table and head, 2 x 256,000 x 6144 = 3.15 billion, as printed rounded up)."""
    from parbench.sim.model import architecture_spec

    arch = read_hf_config(EXAMPLES / "nemotron-4-15b.json")
    embedding = 2 * arch.vocab * arch.hidden  # untied: the input table and the head
    total = architecture_spec(arch, megatron=True).param_numel
    assert (total - embedding) / 1e9 == pytest.approx(12.5, abs=0.05)


@pytest.mark.parametrize("rows, message", [
    ((), "no [[row]] tables"),
    (("name = 'a'\nsource = 'x'",), "missing simulate, metric, value"),
    ((_row(extra='colour = "red"'),), "unknown key 'colour'"),
    ((_row(metric="qps"),), "metric 'qps' is not one of s_per_iteration"),
    ((_row(value="-1"),), "value -1.0 must be a finite number > 0"),
    ((_row(value='"fast"'),), "value must be a number, got 'fast'"),
    ((_row(metric="mfu", value="45"),), "mfu 45.0 is a fraction of the peak, <= 1"),
    ((_row(), _row()), "row name 'a' appears 2 times"),
    ((_row(simulate=""),), "simulate is empty"),
    ((_row(extra="memory_gib = 0"),), "memory_gib 0.0 must be a finite number > 0"),
])
def test_a_bad_row_stops_the_file_naming_the_row(rows, message, tmp_path, capsys):
    path = _rows_file(tmp_path, *rows)
    assert main(["validate", "--rows", str(path)]) == 2
    out = capsys.readouterr()
    assert message in out.err and not out.out


@pytest.mark.parametrize("simulate, message", [
    ("--model llama3-8b --gpus 16 --colour red",
     "row 'b': simulate --model llama3-8b --gpus 16 --colour red: unrecognized arguments: --colour red"),
    ("--model llama3-8b --gpus 16 --tp 3", "tp x pp x cp = 3 x 1 x 1 does not divide gpus=16"),
    ("--model llama3-8b --gpus 16 --search", "--search ranks many layouts; a compared row is one layout"),
    ("--model llama3-8b --gpus 16 --cluster nowhere", "row 'b'"),
])
def test_a_row_whose_layout_is_wrong_stops_the_file_before_anything_prints(simulate, message, tmp_path, capsys):
    """The first row is good; the second's layout is refused as simulate refuses it, and nothing is printed."""
    path = _rows_file(tmp_path, _row("a"), _row("b", simulate=simulate))
    assert main(["validate", "--rows", str(path)]) == 2
    out = capsys.readouterr()
    assert message in out.err and not out.out


def test_a_missing_or_broken_file_is_named(tmp_path, capsys):
    assert main(["validate", "--rows", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text("[[row]\n")
    assert main(["validate", "--rows", str(tmp_path / "bad.toml")]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown top-level key 'runs'"):
        (tmp_path / "top.toml").write_text("[[runs]]\nname = 'a'\n")
        load_rows(tmp_path / "top.toml")


def test_a_relative_hf_config_is_read_beside_the_rows_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.json").write_text((EXAMPLES / "nemotron-4-15b.json").read_text())
    path = tmp_path / "sub" / "rows.toml"
    path.write_text("[[row]]\n" + _row(simulate="--hf-config m.json --seq 4096 --cluster h100-sxm --gpus 8 --tp 8 --zero 1"))
    (row,) = compare_rows(load_rows(path), command_prediction)
    assert row["gpus"] == 8 and row["predicted"] > 0


def test_a_relative_cluster_file_is_read_beside_the_rows_file(tmp_path, capsys, monkeypatch):
    """A rows file and the cluster file its rows name travel together: ``--cluster mine.json`` (or ``=``) is read
    from the rows file's folder, whatever the working directory, and predicts what the preset it copies does; a
    preset's bare name is left alone."""
    assert main(["simulate", "--cluster", "h100-sxm", "--print-cluster"]) == 0
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.json").write_text(capsys.readouterr().out)
    monkeypatch.chdir(tmp_path)  # not the rows file's folder
    mesh = "--model llama3-8b --gpus 8 --tp 8 --zero 1 --global-batch 8"
    path = tmp_path / "sub" / "rows.toml"
    path.write_text("\n".join(f"[[row]]\n{r}\n" for r in (
        _row("file", simulate=f"{mesh} --cluster mine.json"), _row("file=", simulate=f"{mesh} --cluster=mine.json"),
        _row("preset", simulate=f"{mesh} --cluster h100-sxm"))))
    rows = compare_rows(load_rows(path), command_prediction)
    assert len({r["step_s_predicted"] for r in rows}) == 1 and rows[0]["step_s_predicted"] > 0
    assert rows[0]["simulate"].endswith(f"--cluster {tmp_path / 'sub' / 'mine.json'}")


def test_rows_and_published_are_run_apart(tmp_path, capsys):
    assert main(["validate", "--rows", str(_rows_file(tmp_path, _row())), "--published"]) == 2
    assert "--rows compares the file's runs alone" in capsys.readouterr().err


@pytest.mark.slow
def test_every_published_run_the_command_can_state_comes_back_through_a_rows_file(tmp_path, capsys):
    """``validate --published --format rows`` writes each published run as a simulate command line; read back by
    ``--rows``, every one predicts the step the built-in table predicts (its architecture, cluster and layout
    reached through the command's own parser). Every run is stated: the 2024 torchtitan ones that compiled the
    blocks but not the loss through ``--software torchtitan --no-compiled-loss``."""
    from parbench.sim.published_memory import step_times_s, timed_runs
    from parbench.sim.reproduce import simulate_args

    assert main(["validate", "--published", "--format", "rows"]) == 0
    text = capsys.readouterr().out
    path = tmp_path / "published.toml"
    path.write_text(text)
    rows = compare_rows(load_rows(path), command_prediction)
    timed = timed_runs()
    argvs = [simulate_args(r, command_layout) for r in timed]
    stated = [r for r, argv in zip(timed, argvs) if argv is not None]
    assert len(rows) == len(stated) == len(timed) >= 317
    assert all(r["source"] == s.source and r["name"].startswith(s.name) for r, s in zip(rows, stated))
    for r, s in zip(rows, stated):
        predicted = step_times_s(s)[1]
        assert r["step_s_predicted"] == pytest.approx(predicted, rel=1e-12), r["name"]
        assert r["metric_error_pct"] is not None and r["published"] == s.value
    uncompiled = [a for r, a in zip(timed, argvs) if r.source.startswith("torchtitan docs") and not r.layout.compiled_loss]
    assert sum("--no-compiled-loss" in a for a in uncompiled) == 24  # the other two ran eager, loss and all
    assert all("--no-compiled-loss" in a or "--unfused-elementwise" in a for a in uncompiled)


def test_format_rows_needs_published(capsys):
    assert main(["validate", "--format", "rows"]) == 2
    assert "give --published" in capsys.readouterr().err


def test_a_csv_rows_file_predicts_what_the_same_rows_in_toml_do(tmp_path, capsys):
    """A spreadsheet's export: a header naming the keys, one run a line (a quoted cell may hold commas); the same
    rows as TOML give the same comparison. A line with more cells than the header, a header with no rows under it
    and a value that is not a number are each named."""
    toml = _rows_file(tmp_path, _row("a", value="2.0"), _row("b, with a comma", metric="tps_per_gpu", value="5000",
                                                            extra="memory_gib = 40"))
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text("name,source,simulate,metric,value,memory_gib\n"
                        f"a,here,{LLAMA_8B},s_per_iteration,2.0,\n"
                        f'"b, with a comma",here,"{LLAMA_8B}",tps_per_gpu,5000,40\n')
    from_csv = compare_rows(load_rows(csv_path), command_prediction)
    from_toml = compare_rows(load_rows(toml), command_prediction)
    assert from_csv == from_toml and [r["name"] for r in from_csv] == ["a", "b, with a comma"]
    for text, message in (("name,source,simulate,metric,value\nx,y,--model llama3-8b,mfu,0.5,extra\n", "more cells"),
                          ("name,source,simulate,metric,value\n", "no rows under the header"),
                          ("name,source,simulate,metric,value\nx,y,--model llama3-8b,mfu,fast\n",
                           "value must be a number, got 'fast'")):
        csv_path.write_text(text)
        assert main(["validate", "--rows", str(csv_path)]) == 2
        assert message in capsys.readouterr().err
