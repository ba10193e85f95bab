"""The simulate command end to end (table and JSON), its input errors, and the published comparison."""

from __future__ import annotations

import json
import math
import shlex

import pytest

from parbench.cli import main
from parbench.sim.published import compare_published

ISSUE_EXAMPLE = ["simulate", "--workload", "transformer", "--layers", "96", "--hidden", "12288", "--heads", "96",
                 "--seq", "2048", "--cluster", "h100-sxm", "--gpus", "1024", "--dp", "16", "--tp", "8", "--pp", "8",
                 "--micro-batch", "1", "--global-batch", "1024", "--schedule", "1f1b", "--zero", "1",
                 "--recompute", "selective"]


def test_issue_example_as_json(capsys):
    assert main(ISSUE_EXAMPLE + ["--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    p, layout = out["prediction"], out["layout"]
    assert (layout["dp"], layout["tp"], layout["pp"], layout["micro_batches"]) == (16, 8, 8, 64)
    assert p["world_size"] == 1024 and p["step_time_s"] > 0 and 0 < p["mfu"] < 1
    assert set(p["comm_bytes"]) == {"data", "parameter", "intermediate"} and p["comm_bytes"]["data"] == 0
    assert p["throughput_samples_per_s"] == 1024 / p["step_time_s"]


def test_issue_example_as_table(capsys):
    assert main(ISSUE_EXAMPLE) == 0
    out = capsys.readouterr().out
    assert "h100-sxm: 1024 ranks, dp=16 tp=8 pp=8" in out and "MFU" in out and "all_reduce/intermediate" in out


def test_bad_layout_exits_2_with_the_factors(capsys):
    assert main(["simulate", "--layers", "4", "--hidden", "256", "--gpus", "12", "--tp", "8"]) == 2
    assert "tp x pp x cp = 8 x 1 x 1 does not divide gpus=12" in capsys.readouterr().err


def test_an_interleaved_schedule_on_one_stage_exits_2_naming_the_rule(capsys):
    """One pipeline stage has no bubble for interleaving to shrink: the layout is refused before it is predicted."""
    assert main(["simulate", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "128", "--schedule",
                 "interleaved1f1b", "--virtual-stages", "2"]) == 2
    out = capsys.readouterr()
    assert "schedule interleaved1f1b needs pp > 1" in out.err and not out.out


@pytest.mark.parametrize("edit, message", [
    ({"peak_flops": "989e12"}, "peak_flops='989e12' must be a finite number"),
    ({"gpus_per_node": 8.5}, "gpus_per_node=8.5 must be an integer"),
    ({"intra": 4.5e11}, "intra=450000000000.0 must be {latency_s, bandwidth_bytes_per_s} as numbers"),
    ({"inter": {"latency_s": "5us", "bandwidth_bytes_per_s": 5e10}}, "inter={'latency_s': '5us'"),
    ({"attention_kernels": ["flash2"]}, "attention_kernels=['flash2'] must be an object of numbers"),
    ({"compute_slowdown": {"two": 1.1}}, "compute_slowdown={'two': 1.1} must be an object of rank counts to numbers"),
    ({"collectives": {"all_reduce": {"2": [1e-5]}}}, "must be an object of collectives to {rank count: [latency, "),
    ({"memory_bytes": None}, "memory_bytes=None must be an integer"),
    ({"gemm_efficiency": True}, "gemm_efficiency=True must be a finite number"),
    # JSON's NaN and Infinity (and TOML's nan, inf) passed every "< 0" check and priced the step at nan or 0 s
    ({"peak_flops": math.nan}, "peak_flops=nan must be a finite number"),
    ({"memory_bandwidth_bytes_per_s": math.inf}, "memory_bandwidth_bytes_per_s=inf must be a finite number"),
    ({"inter": {"latency_s": math.nan, "bandwidth_bytes_per_s": 5e10}}, "inter={'latency_s': nan"),
    ({"collectives": {"all_reduce": {"2": [1e-5, math.inf]}}}, "must be an object of collectives to {rank count: "),
    # a negative fixed cost gave a step shorter than its compute
    ({"gemm_overhead_s": -1e-5}, "gemm_overhead_s=-1e-05 must be a finite number >= 0"),
    ({"compute_slowdown": {"2": -1.0}}, "compute_slowdown[2]=-1.0 must be a finite number >= 0"),
    ({"multi_rail_rings": "no"}, "multi_rail_rings='no' must be true or false"),
])
def test_a_cluster_file_of_the_wrong_types_exits_2_naming_the_field(edit, message, tmp_path, capsys):
    """A hand-written cluster file: each wrong value is named (exit 2) before any arithmetic meets it, and
    every field it lacks is listed; never a TypeError."""
    from parbench.sim.hardware import PRESETS, cluster_to_dict

    good = cluster_to_dict(PRESETS["h100-sxm"])
    (tmp_path / "c.json").write_text(json.dumps({**good, **edit}))
    assert main(["simulate", "--model", "llama3-8b", "--gpus", "8", "--cluster", str(tmp_path / "c.json")]) == 2
    assert message in capsys.readouterr().err
    (tmp_path / "c.json").write_text(json.dumps({k: v for k, v in good.items() if k not in ("peak_flops", "intra")}))
    assert main(["simulate", "--model", "llama3-8b", "--gpus", "8", "--cluster", str(tmp_path / "c.json")]) == 2
    assert "cluster fields: peak_flops is missing; intra is missing" in capsys.readouterr().err


def test_a_calibrated_profile_that_cannot_be_read_exits_2_naming_it(tmp_path, capsys):
    """simulate --cluster local and validate, on a half-written profile: exit 2 with the file and the way out."""
    import socket

    (tmp_path / "calibration").mkdir()
    profile = tmp_path / "calibration" / f"{socket.gethostname()}.json"
    profile.write_text('{"cluster": {"name": ')
    assert main(["simulate", "--cluster", "local", "--results-dir", str(tmp_path), "--gpus", "2"]) == 2
    assert f"cluster {profile}: Expecting value" in capsys.readouterr().err
    assert main(["validate", "--results-dir", str(tmp_path)]) == 2
    assert f"cluster {profile}: Expecting value" in capsys.readouterr().err
    profile.write_text("[1, 2]")
    assert main(["validate", "--results-dir", str(tmp_path)]) == 2
    assert f"cluster {profile}: holds list, not an object of cluster fields; run `parbench calibrate` again" in \
        capsys.readouterr().err
    profile.write_text('{"cluster": 5}')  # the nested cluster of a saved profile: once a TypeError's traceback
    assert main(["validate", "--results-dir", str(tmp_path)]) == 2
    assert f"cluster {profile}: holds int, not an object of cluster fields" in capsys.readouterr().err


def test_user_cluster_file(tmp_path, capsys):
    (tmp_path / "c.toml").write_text(
        'name = "mine"\ngpus_per_node = 4\npeak_flops = 100e12\ngemm_efficiency = 0.5\ngemm_overhead_s = 1e-5\n'
        'op_overhead_s = 1e-5\nmemory_bandwidth_bytes_per_s = 1e12\nmemory_bytes = 40e9\n'
        'intra = {latency_s = 1e-5, bandwidth_bytes_per_s = 1e11}\ninter = {latency_s = 2e-5, bandwidth_bytes_per_s = 1e10}\n')
    assert main(["simulate", "--layers", "4", "--hidden", "512", "--heads", "8", "--gpus", "8",
                 "--cluster", str(tmp_path / "c.toml"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"] == "mine"


def test_a_search_on_every_cpu_prints_what_one_process_prints(capsys):
    """``--jobs 0`` (one process per usable CPU) changes how long a search takes, not what it prints."""
    argv = ["simulate", "--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "1024", "--gpus", "16",
            "--global-batch", "64", "--cluster", "a100-80gb", "--search", "--format", "json"]
    assert main([*argv, "--jobs", "1"]) == 0
    one = capsys.readouterr().out
    assert main([*argv, "--jobs", "0"]) == 0
    assert capsys.readouterr().out == one and json.loads(one)["evaluated"] > 100


def test_search_prints_ranking_rejections_and_front(capsys):
    assert main(["simulate", "--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "1024",
                 "--gpus", "16", "--global-batch", "64", "--cluster", "a100-80gb", "--search", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "top 3 by throughput" in out and "Pareto front" in out and "rejected" in out
    # the best layout's step, term by term, and its memory: the same lines a single-layout prediction prints
    best = out.split("the best layout, ")[1].split("\n")
    assert best[0].endswith(": where its step goes") and best[1].startswith("  step time")
    assert [line.split()[0] for line in best[2:9]] == ["compute", "comm", "comm", "comm", "bubble", "optimizer", "other"]
    assert best[9].startswith("  memory per rank")


def _alone(capsys, command: str) -> dict:
    """The prediction ``command`` (a ``parbench simulate`` line as the search prints it) makes, run alone."""
    words = shlex.split(command)
    assert words[:2] == ["parbench", "simulate"] and "--search" not in words
    assert main([*words[1:], "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)["prediction"]


def test_each_searched_layouts_command_predicts_that_layout_alone(capsys):
    """--search names each ranked layout's own command line, in the form the search was given (a preset with its
    shape flags, the cluster's spread): run alone, it predicts that layout's step, terms, memory and bytes exactly."""
    argv = ["--model", "llama3-8b", "--layers", "16", "--seq", "2048", "--rank-spread", "0.01", "--gpus", "8",
            "--global-batch", "16", "--search", "--top", "4", "--format", "json"]
    assert main(["simulate", *argv]) == 0
    found = json.loads(capsys.readouterr().out)
    top = found["top"]
    assert len(top) == 4 and len({r["command"] for r in top}) == 4
    for row in [*top, found["pareto"][0]]:
        assert row["command"].startswith("parbench simulate --model llama3-8b --layers=16 --seq=2048 --cluster=h100-sxm "
                                         "--rank-spread=0.01 --gpus=8 ")
        assert _alone(capsys, row["command"]) == {k: v for k, v in row.items() if k not in ("layout", "command")}


def test_a_searched_hugging_face_or_workload_shape_keeps_its_own_form_in_the_command(tmp_path, capsys):
    """A Qwen2-style config (biased q/k/v: no preset has them) comes back as --hf-config with the flags that change
    it; a runner workload's transformer as --workload with its sizes written out. Each line, run, predicts what the
    table printed for the best layout."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1024, "intermediate_size": 2816,
        "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 12, "vocab_size": 32000,
        "max_position_embeddings": 8192, "tie_word_embeddings": True, "rms_norm_eps": 1e-6}))
    searches = (["--hf-config", str(config), "--seq", "2048"],
                ["--layers", "4", "--hidden", "512", "--heads", "8", "--seq", "256", "--cluster", "a100-80gb"])
    forms = (f"parbench simulate --hf-config={config} --seq=2048 --cluster=h100-sxm ",
             ("parbench simulate --workload=transformer --layers=4 --hidden=512 --heads=8 --seq=256 --vocab=51200 "
              "--cluster=a100-80gb "))
    for given, form in zip(searches, forms):
        assert main(["simulate", *given, "--gpus", "4", "--global-batch", "8", "--search", "--top", "1"]) == 0
        out = capsys.readouterr().out
        command = out.split("alone, with its collectives: ")[1].split("\n")[0]
        assert command.startswith(form), command
        step = float(out.split("where its step goes\n  step time")[1].split()[0])
        assert _alone(capsys, command)["step_time_s"] == pytest.approx(step, rel=1e-3)


def test_validate_published_runs_without_a_local_profile(tmp_path, capsys):
    """Every published row printed with its source and table, then per source the error and the trends."""
    assert main(["validate", "--published", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "local runs not compared" in out
    rows = compare_published()
    for r in rows:
        assert f"{r['source']}, {r['table']}" in out
    from parbench.sim.published_memory import runs

    n = len({r.series for r in runs() if r.series and r.metric})
    right = sum(line.rstrip().endswith("  ok") for line in out.splitlines())
    wrong = [line.split()[:6] for line in out.splitlines() if line.rstrip().endswith("  WRONG") and "GPUs" in line]
    assert n >= 6 and right + len(wrong) == n and f"trend sign right on {right} of {n} series" in out
    # falling 2.0% where MLPerf v6.0's Llama 3.1 8B on 64 and 128 H100 runs 0.2% faster a GPU at the larger count
    # (the GB200 series of MLPerf v5.0 and NeMo 25.04 fall as published once every step waits for its slowest device)
    assert wrong == [["MLPerf", "v6.0", "Llama", "3.1", "8B", "H100"]]
    # the layouts measured at several micro-batch counts, each split into fixed and per-micro-batch parts
    mt = next(line for line in out.splitlines() if line.strip().startswith("MT-NLG 530B") and "160-240" in line)
    cells = mt.split()  # name (2 words), m, per-micro-batch published / predicted, err %, fixed published±spread / predicted, fit
    assert len(cells) == 11 and cells[2:4] == ["160-240", "0.1958"] and cells[7] == "12.92±1.28" and cells[10] == "0.6%"


def test_infeasible_layout_prints_does_not_fit_first_and_exits_3(capsys):
    assert main(["simulate", "--model", "llama3-70b", "--gpus", "8"]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("  does not fit: needs") and "TiB per rank" in out[1]
    assert out[2].startswith("  memory per rank") and "optim" in out[2]
    assert not any("MFU" in line for line in out)


def test_json_keeps_exact_integers_and_the_feasibility(capsys):
    assert main(["simulate", "--model", "llama3-70b", "--gpus", "8", "--format", "json"]) == 3
    p = json.loads(capsys.readouterr().out)["prediction"]
    assert p["feasible"] is False and isinstance(p["peak_memory_bytes"], int)
    assert p["peak_memory_bytes"] == sum(p["memory"].values())


def test_model_and_hf_config_give_the_same_prediction(capsys):
    from pathlib import Path

    config = Path(__file__).resolve().parents[2] / "parbench" / "sim" / "configs" / "llama3-70b.json"
    layout = ["--gpus", "64", "--tp", "8", "--zero", "3", "--recompute", "full", "--global-batch", "64",
              "--sequence-parallel", "--format", "json"]
    assert main(["simulate", "--model", "llama3-70b", *layout]) == 0
    a = json.loads(capsys.readouterr().out)["prediction"]
    assert main(["simulate", "--hf-config", str(config), *layout]) == 0
    b = json.loads(capsys.readouterr().out)["prediction"]
    assert a == b and a["memory"]["param_bytes"] > 0


def test_no_model_flag_names_the_toy_default_and_model(capsys):
    assert main(["simulate", "--gpus", "2"]) == 0
    err = capsys.readouterr().err
    assert "toy default" in err and "--model" in err and "llama3-70b" in err


@pytest.mark.parametrize("argv,message", [
    (["--gpus", "0"], "--gpus=0 must be >= 1"),
    (["--tp", "0"], "--tp=0 must be >= 1"),
    (["--micro-batch", "0"], "--micro-batch=0 must be >= 1"),
    (["--search", "--gpus", "0"], "--gpus=0 must be >= 1"),
    (["--search", "--gpus", "-4"], "--gpus=-4 must be >= 1"),
    (["--search", "--top", "-1"], "--top=-1 must be >= 1"),
    (["--search", "--jobs", "-1"], "--jobs=-1 must be >= 0 (0: one per CPU)"),
    (["--search", "--gpus", "8", "--tp", "8", "--pp", "16"], "tp x pp x cp = 8 x 16 x 1 does not divide gpus=8"),
    (["--search", "--gpus", "64", "--tp", "2", "--pp", "16", "--cp", "4"],
     "tp x pp x cp = 2 x 16 x 4 does not divide gpus=64"),
    (["--heads", "20", "--hidden", "640", "--tp", "8"], "tp=8 does not divide heads=20"),
    (["--tp", "3", "--heads", "4", "--gpus", "3"], "tp=3 does not divide heads=4"),
    (["--layers", "4", "--pp", "8"], "pp x virtual stages = 8 x 1 = 8 > layers=4"),
    (["--pp", "16", "--layers", "4", "--gpus", "16"], "> layers=4"),
    (["--model", "llama3-8b", "--precision", "fp8", "--cluster", "a100-80gb"], "has no FP8 peak"),
    (["--model", "llama3-8b", "--cp", "3", "--gpus", "3"], "cp=3: seq=8192"),
    (["--model", "llama3-8b", "--head-dim", "-3"], "--head-dim=-3 must be >= 1"),
    (["--model", "llama3-70b", "--gpus", "64", "--tp", "4", "--pp", "8", "--pipeline-layout", "Et*40|t*39L"],
     "chunk_layers=(40, 39) must give pp x virtual stages = 8 chunks"),
    (["--model", "llama3-8b", "--pp", "2", "--pipeline-layout", "Et*16|t*16"], "the loss L closes the last chunk"),
])
def test_bad_input_exits_2_with_the_rule(argv, message, capsys):
    assert main(["simulate", *argv]) == 2
    assert message in capsys.readouterr().err


def test_search_honours_a_given_micro_batch_and_tp(capsys):
    assert main(["simulate", "--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "1024", "--gpus", "16",
                 "--global-batch", "64", "--cluster", "a100-80gb", "--search", "--micro-batch", "2", "--tp", "2",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["top"] and all(" mb=2 " in r["layout"] and " tp=2 " in r["layout"] for r in out["top"] + out["pareto"])


def test_search_shows_progress_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert main(["simulate", "--layers", "4", "--hidden", "256", "--heads", "4", "--seq", "256", "--gpus", "4",
                 "--global-batch", "8", "--search", "--top", "1"]) == 0
    err = capsys.readouterr().err
    assert "layouts evaluated" in err and err.rstrip().endswith("layouts evaluated")


def test_pipeline_memory_parts_add_up_to_the_peak(capsys):
    """Under pp the per-kind maxima come from different stages (the first holds the most activations, the
    last the loss buffers); the printed breakdown is the peak rank's own, so its parts add up to its total."""
    argv = ["simulate", "--model", "llama3-405b", "--gpus", "512", "--tp", "8", "--pp", "8", "--global-batch", "512",
            "--micro-batch", "1"]
    main([*argv, "--format", "json"])
    p = json.loads(capsys.readouterr().out)["prediction"]
    assert sum(p["peak_memory"].values()) == p["peak_memory_bytes"]
    assert sum(p["memory"].values()) > p["peak_memory_bytes"]  # the per-kind maxima over-count: the case is real
    main(argv)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  memory per rank"))
    total, parts = line.split(": ", 1)
    gib = [float(part.split()[-2]) for part in parts.split(", ")]
    assert sum(gib) == pytest.approx(float(total.split()[3]), abs=0.01 * len(gib))


def test_what_if_memory_bars_add_up_to_the_peak():
    """The dashboard's what-if memory bars stack the peak rank's own terms (not per-kind maxima over stages)."""
    from parbench.commands.simulate import predict_for
    from parbench.sim import PRESETS
    from parbench.sim.whatif import MODEL_PRESETS, WhatIf, memory_figure

    cluster = PRESETS["h100-sxm"]
    what = WhatIf(shape=MODEL_PRESETS["llama3-405b"], dp=8, tp=8, pp=8, micro_batches=8)
    _, p = predict_for(what.command_args(), what.model(), cluster)
    bars = sum(trace.x[0] for trace in memory_figure(p, cluster).data if trace.type == "bar")
    assert bars == pytest.approx(p.peak_memory_bytes / 2**30, rel=1e-9)


def test_the_what_if_panel_predicts_what_the_command_predicts(capsys):
    """The what-if panel's layouts go through the command's own parser, so they take the default software's
    flags: under full recomputation torch's replay stops before the last layer's output projection, and its
    all-reduce is not repeated (``Layout.recompute_early_stop``). Built by hand, the panel predicted Llama 3 8B
    at tp 4 with full recomputation on 16 H100 3.31 s a step against the command's 3.14 s."""
    from parbench.commands.simulate import predict_for
    from parbench.sim import PRESETS
    from parbench.sim.layout import Recompute
    from parbench.sim.whatif import MODEL_PRESETS, WhatIf

    what = WhatIf(shape=MODEL_PRESETS["llama3-8b"], dp=4, tp=4, pp=2, replicate=2, zero=3, micro_batches=8,
                  recompute=Recompute.FULL, sequence_parallel=True)
    assert main(["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", *what.command_args(),
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    _, p = predict_for(what.command_args(), what.model(), PRESETS["h100-sxm"])
    assert out["layout"]["recompute_early_stop"] and out["layout"]["replicate"] == 2 and out["layout"]["pp"] == 2
    assert p.step_time_s == out["prediction"]["step_time_s"] and p.peak_memory_bytes == out["prediction"]["peak_memory_bytes"]


def test_deepspeed_pipeline_flag_adds_its_costs_in_one_layout_and_in_the_search(capsys):
    """--deepspeed-pipeline turns on DeepSpeed's blocking pipeline p2p, its tensor-parallel slices of what it sends
    and its bf16 float32 gradient pass: the same layout predicts a longer step; --search applies it to every
    pipelined layout it ranks."""
    layout = ["simulate", "--model", "gpt3-175b", "--cluster", "a100-80gb", "--gpus", "64", "--tp", "8", "--pp", "8",
              "--global-batch", "64", "--recompute", "full", "--format", "json"]
    steps = []
    for extra in ([], ["--deepspeed-pipeline"]):
        assert main(layout + extra) == 0
        out = json.loads(capsys.readouterr().out)
        steps.append(out["prediction"]["step_time_s"])
        assert out["layout"]["pp_blocking_p2p"] == out["layout"]["fp32_grad_pass_per_micro_batch"] == bool(extra)
        assert out["layout"]["pp_scatter_gather"] == bool(extra)
    assert steps[1] > steps[0]
    assert main(["simulate", "--model", "gpt3-175b", "--cluster", "a100-80gb", "--gpus", "64", "--global-batch", "64",
                 "--pp", "8", "--search", "--top", "3", "--deepspeed-pipeline", "--format", "json"]) == 0
    ranked = json.loads(capsys.readouterr().out)["top"]
    assert ranked and all(r["layout"].endswith(" deepspeed-pipeline") for r in ranked)


def test_megatron_deepspeed_software_gives_blooms_published_row_its_layout_and_step(capsys):
    """BLOOM's training layout typed as a user would (the preset, its cluster, DeepSpeed's software, its README's
    pipeline partition) predicts what its published row predicts: DeepSpeed's pipeline engine all-reduces the
    gradients whole after the flush and, under ZeRO-1, gathers the bf16 weights (no reduce-scatter)."""
    from parbench.sim import PRESETS
    from parbench.sim.predict import predict
    from parbench.sim.published import BLOOM, layout_for, model_for

    assert main(["simulate", "--model", "bloom-176b", "--cluster", "jean-zay-a100", "--gpus", "384", "--tp", "4",
                 "--pp", "12", "--micro-batch", "2", "--global-batch", "2048", "--zero", "1", "--recompute", "full",
                 "--software", "megatron-deepspeed", "--attention", "eager", "--pipeline-layout", "Et*5|(t*6|)*10,t*5L",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = BLOOM[0]
    assert out["layout"]["flat_grad_allreduce"] and out["layout"]["pp_blocking_p2p"]
    assert "reduce_scatter/parameter" not in out["prediction"]["comm_by_collective"]
    assert out["prediction"]["step_time_s"] == pytest.approx(
        predict(model_for(row), layout_for(row), PRESETS[row.cluster]).step_time_s, rel=1e-9)


def test_cluster_help_names_every_preset(capsys):
    from parbench.sim import PRESETS

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in PRESETS), [n for n in PRESETS if n not in text]


@pytest.mark.parametrize("flags, message", [
    (["--attention-kernel", "flash9"], "--attention-kernel 'flash9': cluster h100-sxm knows flash2, flash3"),
    (["--attention-kernel", "flash3", "--attention", "eager"], "--attention-kernel 'flash3' names a flash kernel"),
    # flags a dense model or a one-stage layout would not read
    (["--top-k", "2"], "--top-k applies to a mixture of experts; llama3-70b has none (--experts N makes one)"),
    (["--ep", "2"], "--ep applies to a mixture of experts; llama3-70b has none"),
    (["--moe-imbalance", "1.3"], "--moe-imbalance applies to a mixture of experts"),
    (["--virtual-stages", "2"], "virtual_stages=2 needs pp > 1 and schedule interleaved1f1b"),
    (["--workload", "transformer"], "--workload transformer is a runner workload's shape"),
    (["--te-fp8"], "--te-fp8 needs --precision fp8"),
    (["--overlap-param-gather", "--precision", "fp8"], "--overlap-param-gather is Megatron's distributed optimizer"),
    (["--grad-reduce-in-bf16", "--precision", "fp16"], "--grad-reduce-in-bf16 applies to bf16 and fp8"),
    (["--overlap-p2p-comm", "--pp", "4"], "--overlap-p2p-comm is Megatron-LM's interleaved schedule"),
    (["--overlap-p2p-comm", "--pp", "4", "--schedule", "interleaved1f1b", "--virtual-stages", "2", "--global-batch", "64",
      "--deepspeed-pipeline"], "--overlap-p2p-comm is Megatron-LM's interleaved schedule"),
])
def test_training_software_flags_are_checked_before_anything_is_predicted(flags, message, capsys):
    assert main(["simulate", "--model", "llama3-70b", "--gpus", "64", *flags]) == 2
    assert message in capsys.readouterr().err


def test_training_software_flags_reach_the_layout(capsys):
    """The Megatron-Bridge 70B recipe's flags give the layout its published row predicts (same step time)."""
    from parbench.sim.published_memory import MBRIDGE, compare_runs

    assert main(["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "8",
                 "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--seq", "8192", "--global-batch", "128",
                 "--zero", "1", "--precision", "fp8", "--sequence-parallel", "--tp-comm-overlap",
                 "--overlap-param-gather", "--te-fp8", "--grad-reduce-in-bf16", "--attention-kernel", "flash3",
                 "--overlap-p2p-comm", "--clip-grad-norm", "--megatron-grad-buckets", "--fp8-all-gather",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    layout = out["layout"]
    assert layout["te_fp8"] and layout["overlap_param_gather"] and layout["attention_kernel"] == "flash3"
    assert layout["fp8_all_gather"]
    assert layout["overlap_p2p_comm"] and layout["clip_grad_norm"] and layout["megatron_grad_buckets"]
    row = next(r for r in compare_runs() if r["source"] == MBRIDGE and "70b" in r["name"] and "GBS 128" in r["name"])
    assert 128 * 8192 / out["prediction"]["step_time_s"] / 64 == pytest.approx(row["predicted"], rel=1e-9)


@pytest.mark.parametrize("flag", [["--heads", "4"], ["--seq", "1024"], ["--experts", "4"], ["--no-dropout"],
                                  ["--mtp-layers", "1"]])
def test_the_mlp_workload_refuses_a_transformers_shape_flags(flag, capsys):
    """--workload mlp is Linear layers of one width: --layers and --hidden shape it, any other shape flag is
    refused by name instead of passing unread."""
    assert main(["simulate", "--workload", "mlp", "--layers", "3", "--hidden", "128"]) == 0
    capsys.readouterr()
    assert main(["simulate", "--workload", "mlp", *flag]) == 2
    assert f"{flag[0].replace('--no-', '--')}: --workload mlp takes --layers and --hidden only" in capsys.readouterr().err


def test_eager_attention_under_a_software_with_a_flash_kernel_runs_no_kernel():
    """--software nemo runs FlashAttention-3 on an H100; asking it for eager attention drops that kernel (the
    layout is checked, not refused), prices the attention as eager (slower: the s x s scores go through memory)
    and names that software again when its command line is written back (``software_of``)."""
    from parbench.commands.simulate import command_prediction
    from parbench.sim.software import software_of

    argv = ["--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "8", "--zero", "1", "--software", "nemo"]
    *_, flash, p_flash = command_prediction(argv)
    *_, eager, p_eager = command_prediction([*argv, "--attention", "eager"])
    assert flash.attention_kernel == "flash3" and eager.attention == "eager" and eager.attention_kernel == ""
    assert p_eager.compute_time_s > p_flash.compute_time_s
    assert software_of(eager) == software_of(flash) == "--software nemo"


def test_megatron_cross_entropy_flag_holds_one_fp32_copy_of_the_logits(capsys):
    """--megatron-cross-entropy: 1 + 2/4 float32 logit buffers at the loss's peak instead of torch's 4 (vocabulary-
    parallel at tp 2); nothing else in the prediction's memory moves."""
    args = ["simulate", "--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--zero", "1", "--format", "json"]
    main(args)
    torch_loss = json.loads(capsys.readouterr().out)["prediction"]["memory"]
    main([*args, "--megatron-cross-entropy"])
    megatron = json.loads(capsys.readouterr().out)["prediction"]["memory"]
    assert megatron["loss_bytes"] == pytest.approx(torch_loss["loss_bytes"] * 1.5 / 4, rel=1e-6)
    assert megatron["param_bytes"] == torch_loss["param_bytes"] and megatron["activation_bytes"] == torch_loss["activation_bytes"]


def test_head_dim_flag_gives_the_heads_their_own_width(capsys):
    """--head-dim 64 on Llama 3 8B (32 heads, 8 k/v heads): q and the output projection shrink from 4096 x 4096 to
    4096 x 2048 each, k and v from 4096 x 1024 to 4096 x 512, in every one of the 32 blocks."""
    main(["simulate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--format", "json"])
    base = json.loads(capsys.readouterr().out)["model"]["parameters"]
    main(["simulate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--head-dim", "64", "--format", "json"])
    assert json.loads(capsys.readouterr().out)["model"]["parameters"] == base - 32 * (2 * 4096 * 2048 + 2 * 4096 * 512)
    assert main(["simulate", "--model", "llama3-8b", "--head-dim", "0"]) == 2


def test_software_nemo_is_the_recipes_flags_and_gives_the_published_rows_layout(capsys):
    """--software nemo alone gives the layout the explicit flags above give (and Megatron-Bridge's 70B row, with its
    table's FP8 recipe, current scaling: --fp8-scaling tensorwise, where NeMo's own default is Transformer Engine's
    delayed scaling), and the published rows' builder is that software too; it gathers FP8 parameters as such under
    the distributed optimizer, but MXFP8's (gathered in bf16 into the gradient buffer); on an A100 in bf16 it keeps
    the FP8 modules off and runs FlashAttention-2 where Hopper's kernel is missing."""
    from parbench.sim.layout import SOFTWARE
    from parbench.sim.published_memory import MBRIDGE, runs

    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "8",
            "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--seq", "8192", "--global-batch", "128",
            "--zero", "1", "--precision", "fp8", "--format", "json"]
    assert main([*args, "--software", "nemo"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["fp8_scaling"] == "delayed"
    assert main([*args, "--software", "nemo", "--fp8-scaling", "tensorwise"]) == 0
    layout = json.loads(capsys.readouterr().out)["layout"]
    row = next(r for r in runs() if r.source == MBRIDGE and "70b" in r.name and "GBS 128" in r.name)
    from parbench.commands.simulate import _layout_dict

    assert layout == json.loads(json.dumps(_layout_dict(row.layout))) and layout["fp8_all_gather"]
    mx = ["simulate", "--model", "llama3-8b", "--cluster", "b200", "--gpus", "8", "--zero", "1", "--precision", "fp8",
          "--software", "nemo", "--format", "json"]
    for extra, gathered in (([], True), (["--fp8-scaling", "mxfp8"], False), (["--zero", "0"], False)):
        assert main([*mx, *extra]) == 0
        assert json.loads(capsys.readouterr().out)["layout"]["fp8_all_gather"] is gathered, extra
    assert main([*args, "--software", "torch"]) == 3  # without the recipe (no sequence parallelism, TE, bf16 gradients): 124 GiB
    torch_layout = json.loads(capsys.readouterr().out)["layout"]
    assert not torch_layout["te_fp8"] and not torch_layout["tp_comm_overlap"] and not torch_layout["sequence_parallel"]
    assert main(["simulate", "--model", "llama3-8b", "--cluster", "a100-80gb", "--gpus", "8", "--tp", "2", "--zero", "1",
                 "--software", "nemo", "--format", "json"]) == 0
    a100 = json.loads(capsys.readouterr().out)["layout"]
    assert a100["attention_kernel"] == "flash2" and not a100["te_fp8"] and a100["tp_comm_overlap"]
    assert SOFTWARE["nemo"].tp_flags(1) == {"sequence_parallel": False, "tp_comm_overlap": False}
    titan = ["simulate", "--model", "llama3-8b", "--gpus", "8", "--zero", "3", "--software", "torchtitan", "--format", "json"]
    main([*titan, "--cluster", "a100-80gb"])
    compiled = json.loads(capsys.readouterr().out)["layout"]
    assert compiled["attention_kernel"] == "flash2" and compiled["compiled_loss"] and compiled["fused_elementwise"]
    main([*titan, "--cluster", "a100-80gb", "--unfused-elementwise"])
    eager = json.loads(capsys.readouterr().out)["layout"]
    assert not eager["compiled_loss"] and not eager["fused_elementwise"]
    main([*titan, "--cluster", "a100-80gb", "--no-compiled-loss"])  # torchtitan of 2024: blocks compiled, loss not
    blocks_only = json.loads(capsys.readouterr().out)["layout"]
    assert not blocks_only["compiled_loss"] and blocks_only["fused_elementwise"]
    main([*titan[:-4], "--software", "torch", "--compiled-loss", "--format", "json", "--cluster", "a100-80gb"])
    assert json.loads(capsys.readouterr().out)["layout"]["compiled_loss"]
    main([*titan, "--cluster", "h100-96gb"])  # FlashAttention-2's figure on Hopper is the preset's attention efficiency
    assert json.loads(capsys.readouterr().out)["layout"]["attention_kernel"] == "flash2"
    from parbench.sim.hardware import PRESETS

    h100 = PRESETS["h100-96gb"]
    assert h100.attention_efficiency_for("flash2") == h100.attention_efficiency


def test_reentrant_checkpoint_replays_the_whole_block(capsys):
    """torchtitan's full recomputation skips each block's MLP down projection (torch's non-reentrant checkpoint
    stops early); --reentrant-checkpoint replays it: the recompute term grows by exactly L x m x that GEMM's
    time, 2 x s x f x d FLOPs at the GEMM efficiency plus its fixed cost (Llama 3 8B: L 32, f 14336, d 4096), at
    the pace of the slowest of the 8 devices (1 + spread x 1.42360, Tippett's expected largest of 8 normals)."""
    from parbench.sim.hardware import PRESETS

    args = ["simulate", "--model", "llama3-8b", "--cluster", "a100-80gb", "--gpus", "8", "--zero", "3",
            "--software", "torchtitan", "--recompute", "full", "--format", "json"]

    def run(*extra):
        assert main([*args, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    early, whole = run(), run("--reentrant-checkpoint")
    assert early["layout"]["recompute_early_stop"] and not whole["layout"]["recompute_early_stop"]
    c, s, f, d = PRESETS["a100-80gb"], 8192, 14336, 4096
    gemm = c.gemm_overhead_s + 2 * s * f * d / (c.peak_flops * c.gemm_efficiency)
    assert early["layout"]["micro_batch_size"] == 1
    m = early["layout"]["micro_batches"]
    grown = whole["prediction"]["compute_parts_s"]["recompute"] - early["prediction"]["compute_parts_s"]["recompute"]
    assert grown == pytest.approx(32 * m * gemm * (1 + c.rank_spread * 1.42360), rel=1e-6)


def test_search_applies_the_tensor_parallel_overlap_to_every_layout_with_tp(capsys):
    """--tp-comm-overlap under --search (a layout flag given fixes that choice): every ranked layout with tp > 1
    overlaps its tensor-parallel collectives; without it none does."""
    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--global-batch", "64",
            "--search", "--top", "5", "--tp", "4", "--pp", "4"]
    main([*args, "--tp-comm-overlap"])
    ranked = [line for line in capsys.readouterr().out.splitlines() if "tp=4" in line and "GiB" not in line[:8]
              and "as it ran" not in line]
    assert ranked and all("tp-comm-overlap" in line for line in ranked)
    main(args)
    assert not any("tp-comm-overlap" in line for line in capsys.readouterr().out.splitlines())


def test_pipeline_layout_flag_gives_the_recipes_chunks_and_is_checked_against_the_model(capsys):
    """--pipeline-layout with Megatron-Bridge's 70B layout and --software nemo gives its 26.02 row's prediction;
    a layout whose chunks hold other than the model's layers, or one given to --search, exits 2."""
    from parbench.sim.published_memory import LLAMA3_70B_H100_LAYOUT, MBRIDGE, compare_runs

    args = ["simulate", "--model", "llama3-70b", "--cluster", "h100-sxm", "--gpus", "64", "--tp", "4", "--pp", "8",
            "--virtual-stages", "5", "--schedule", "interleaved1f1b", "--seq", "8192", "--global-batch", "256",
            "--zero", "1", "--precision", "fp8", "--software", "nemo", "--fp8-scaling", "tensorwise", "--format", "json"]
    assert main([*args[:-2], "--pipeline-layout", LLAMA3_70B_H100_LAYOUT]) == 0
    assert "chunk-layers=2x35,3,2x3,1" in capsys.readouterr().out.splitlines()[0]
    assert main([*args, "--pipeline-layout", LLAMA3_70B_H100_LAYOUT]) == 0
    out = json.loads(capsys.readouterr().out)
    row = next(r for r in compare_runs() if r["source"] == MBRIDGE and "70b" in r["name"] and "GBS 256" in r["name"])
    assert 256 * 8192 / out["prediction"]["step_time_s"] / 64 == pytest.approx(row["predicted"], rel=1e-9)
    assert main([*args]) == 0
    assert 256 * 8192 / json.loads(capsys.readouterr().out)["prediction"]["step_time_s"] / 64 < row["predicted"]
    assert main([*args, "--pipeline-layout", LLAMA3_70B_H100_LAYOUT.replace("tL", "t*2L")]) == 2
    assert "the pipeline layout's chunks hold 81 layers, the model 80" in capsys.readouterr().err
    assert main(["simulate", "--model", "llama3-70b", "--gpus", "64", "--search", "--pipeline-layout", "Et|tL"]) == 2
    assert "without --search" in capsys.readouterr().err


def test_recompute_modules_flag_reaches_the_layout_and_bad_names_are_refused(capsys):
    """--recompute-modules layernorm,moe_act: the layout carries both, the activations shrink and the recompute
    term grows; an unknown module or one beside --recompute full exits 2 before anything is predicted."""
    args = ["simulate", "--model", "qwen3-30b-a3b", "--cluster", "h100-sxm", "--gpus", "8", "--ep", "8",
            "--global-batch", "8", "--seq", "1024", "--software", "megatron-lm", "--zero", "1", "--format", "json"]

    def run(*extra):
        assert main([*args, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    plain, redo = run(), run("--recompute-modules", "layernorm,moe_act")
    assert redo["layout"]["recompute_modules"] == ["layernorm", "moe_act"] and plain["layout"]["recompute_modules"] == []
    assert redo["prediction"]["memory"]["activation_bytes"] < plain["prediction"]["memory"]["activation_bytes"]
    assert redo["prediction"]["compute_parts_s"]["recompute"] > plain["prediction"]["compute_parts_s"]["recompute"] == 0
    with pytest.raises(SystemExit) as exc:
        main([*args, "--recompute-modules", "mlp"])
    assert exc.value.code == 2 and "mlp: valid layernorm, moe_act, mla_up_proj" in capsys.readouterr().err
    assert main([*args, "--recompute", "full", "--recompute-modules", "layernorm"]) == 2
    out = capsys.readouterr()
    assert "not full" in out.err and not out.out


@pytest.mark.parametrize("model, seq, software, row", [
    ("llama3-70b", 8192, "nemo", "Llama 3.1 70B BF16 256 H100 TP 4 PP 4 CP 2 VP 5 GBS 512"),
    ("llama3-405b", 8192, "nemo", "Llama 3.1 405B BF16 576 H100 TP 8 PP 9 CP 2 VP 7 GBS 252"),
    ("mixtral-8x7b", 4096, "megatron-lm", "Mixtral 8x7B on 64 H100"),
])
def test_the_search_puts_a_published_recipe_s_mesh_within_5_percent_of_its_best(model, seq, software, row, capsys):
    """NVIDIA's DGX Cloud recipes (Llama 3.1 70B on 256 and 405B on 576 H100) and Megatron-LM's MoE README (Mixtral
    8x7B on 64 H100) chose a mesh and its virtual stages; the search, given each run's GPUs, batch, sequence and
    software (micro-batch 1, ZeRO-1, no recomputation, as the recipes run), lays that layout out (context parallelism
    and the recipe's virtual stages included: 5, 7 and 8) and predicts it within 5% of its best layout: the margin
    under which the model does not claim an order (published pairs more than 5% apart are ordered right in 64 of 69).
    On 2026-12-05 Mixtral's recipe was the best, the 405B's 0.4% behind it (pp 6 with one layer a chunk) and the
    70B's 3.2% (tp 8 x dp 32)."""
    import re

    from parbench.sim.published import MOE_ROWS
    from parbench.sim.published_memory import runs

    run = next(r for r in runs() if r.name == row) if row != MOE_ROWS[0].name else None
    want = ({"tp": run.layout.tp, "pp": run.layout.pp, "cp": run.layout.cp, "ep": run.layout.ep, "v": run.layout.v} if run
            else {"tp": MOE_ROWS[0].tp, "pp": MOE_ROWS[0].pp, "cp": 1, "ep": MOE_ROWS[0].ep, "v": MOE_ROWS[0].virtual_stages})
    assert want["v"] > 1
    gpus, batch = (run.layout.world_size, run.layout.global_batch_size) if run else (MOE_ROWS[0].gpus, MOE_ROWS[0].global_batch)
    assert main(["simulate", "--model", model, "--cluster", "h100-sxm", "--gpus", str(gpus), "--global-batch", str(batch),
                 "--seq", str(seq), "--software", software, "--micro-batch", "1", "--zero", "1", "--recompute", "none",
                 "--search", "--top", "1000", "--format", "json"]) == 0
    top = json.loads(capsys.readouterr().out)["top"]

    def mesh(layout: str) -> dict[str, int]:
        degrees = {k: int(v) for k, v in re.findall(r"\b(tp|pp|cp|ep|v)=(\d+)", layout)}
        return {k: degrees.get(k, 1) for k in ("tp", "pp", "cp", "ep", "v")}

    recipe = next(c for c in top if mesh(c["layout"]) == want)
    assert recipe["throughput_samples_per_s"] >= 0.95 * top[0]["throughput_samples_per_s"]


def test_the_readme_s_simulate_example_prints_what_its_output_block_shows(capsys):
    """README's "Simulating at scale" runs `parbench simulate --model llama3-70b ...` and shows four of its lines; each
    shown line (up to its ", ...") begins a line the command prints today, so the example cannot go stale."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    command = readme.split("```bash\nparbench simulate --model llama3-70b", 1)[1].split("\n")[0:2]
    argv = ("simulate --model llama3-70b" + " ".join(line.rstrip("\\ ") for line in command)).split()
    shown = readme.split("```\nh100-sxm: 64 ranks", 1)[1].split("```")[0].splitlines()
    shown = ["h100-sxm: 64 ranks" + shown[0], *shown[1:]]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    for line in filter(None, shown):
        assert any(p.startswith(line.removesuffix(", ...")) for p in printed), line
    # the "Where the communication time goes" bullet quotes one of the same command's term lines
    quoted = " ".join(readme.split("`Prediction.comm_latency_s`): `", 1)[1].split("`", 1)[0].split())
    assert any(" ".join(p.split()) == quoted for p in printed), quoted


def test_torchtitan_on_hopper_is_fsdp2_with_flash_attention_2():
    """torchtitan shards with torch's FSDP2 and runs FlashAttention-2 through SDPA; naming that kernel on an H100
    is what the preset's default attention efficiency already is, so it predicts the same step."""
    from parbench.commands.simulate import command_prediction

    argv = ["--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "8", "--zero", "3", "--global-batch", "16"]
    *_, titan, p_titan = command_prediction([*argv, "--software", "torchtitan"])
    *_, p_named = command_prediction([*argv, "--software", "torchtitan", "--attention-kernel", "flash2"])
    *_, torch_layout, _ = command_prediction(argv)
    assert titan.fsdp2 and not torch_layout.fsdp2 and titan.attention_kernel == "flash2"
    assert p_named.step_time_s == p_titan.step_time_s
    # torch DTensor's tensor-parallel plan: sequence parallel, the gathered input kept for backward
    tp = ["--model", "llama3-8b", "--cluster", "h100-sxm", "--gpus", "8", "--tp", "8", "--software", "torchtitan"]
    *_, sp, _ = command_prediction(tp)
    *_, no_sp, _ = command_prediction([*tp, "--no-sequence-parallel"])
    assert sp.sequence_parallel and sp.sp_saves_gathered_input
    assert not no_sp.sequence_parallel and not no_sp.sp_saves_gathered_input


def _random_command_line(rng) -> list[str]:
    """One ``parbench simulate`` command line drawn over every model preset, cluster preset and training software,
    the precisions and FP8 recipes, the mesh degrees, schedules, ZeRO stages and recomputation: most of them
    valid, many not (a degree that does not divide, FP8 on an A100, an interleaved pipeline whose micro-batches
    the pipeline does not divide)."""
    from parbench.sim import PRESETS
    from parbench.sim.layout import SOFTWARE
    from parbench.sim.models import MODELS

    tp, pp = rng.choice((1, 2, 4, 8)), rng.choice((1, 2, 4, 8))
    argv = ["--model", rng.choice(sorted(MODELS)), "--cluster", rng.choice(sorted(PRESETS)),
            "--gpus", str(rng.choice((8, 16, 64, 256, 1024))), "--tp", str(tp), "--pp", str(pp),
            "--cp", str(rng.choice((1, 1, 2))), "--micro-batch", str(rng.choice((1, 2, 4))),
            "--global-batch", str(rng.choice((64, 256, 1024, 2048))), "--zero", str(rng.choice((0, 1, 2, 3))),
            "--recompute", rng.choice(("none", "selective", "ops", "full")),
            "--precision", rng.choice(("fp32", "amp", "bf16", "fp16", "fp8")),
            "--software", rng.choice(sorted(SOFTWARE))]
    if rng.random() < 0.3:
        argv += ["--ep", str(rng.choice((2, 4, 8)))]
    if pp > 1 and rng.random() < 0.5:
        argv += ["--schedule", "interleaved1f1b", "--virtual-stages", str(rng.choice((2, 3, 4)))]
    if tp > 1 and rng.random() < 0.5:
        argv += ["--sequence-parallel"]
    if "fp8" in argv and rng.random() < 0.5:
        argv += ["--fp8-scaling", rng.choice(("tensorwise", "delayed", "mxfp8"))]
    if rng.random() < 0.3:
        argv += ["--attention", rng.choice(("flash", "eager"))]
    if rng.random() < 0.2:
        argv += ["--seq", str(rng.choice((1024, 8192, 32768)))]
    return argv


@pytest.mark.parametrize("seed", range(3))
def test_random_command_lines_predict_or_say_what_is_wrong(seed, capsys):
    """Whatever the flags, the command ends in one of its three exits: 0 with a finite step and MFU in (0, 1) whose
    terms sum to it, 3 (does not fit) with its reasons, or 2 with a message and no traceback; never an exception."""
    import math
    import random

    rng = random.Random(seed)
    exits = []
    for _ in range(30):
        argv = _random_command_line(rng)
        try:
            rc = main(["simulate", "--format", "json", *argv])
        except SystemExit as exc:  # argparse's own refusals
            rc = exc.code
        out, err = capsys.readouterr()
        exits.append(rc)
        assert rc in (0, 2, 3), argv
        if rc == 2:
            assert "parbench simulate: error: " in err and "Traceback" not in err, (argv, err)
            continue
        p = json.loads(out)["prediction"]
        if rc == 3:
            assert p["reasons"], argv
            continue
        assert math.isfinite(p["step_time_s"]) and p["step_time_s"] > 0 and 0 < p["mfu"] < 1, argv
        assert sum(p["terms"].values()) == pytest.approx(p["step_time_s"]), argv
    assert {0, 2, 3} <= set(exits)  # the draw reaches every exit


def test_simulate_says_what_the_slowest_device_adds_to_the_compute(capsys):
    """A step of 100 H100s computes at the pace of the slowest: 1 + 0.016 x 2.50759 (Tippett's expected largest of
    100 normals) of a typical device's time, which the compute line states and JSON carries; one device waits for
    no other. --rank-spread 0 (devices screened to one speed) takes exactly that factor off the compute; a negative
    spread is refused before anything is predicted."""
    args = ["simulate", "--model", "llama3-8b", "--cluster", "h100-sxm", "--tp", "4", "--global-batch", "100"]
    assert main([*args, "--gpus", "100"]) == 0
    compute = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("compute "))
    assert compute.endswith("; the slowest of 100 devices +4.0%)")
    assert main([*args, "--gpus", "100", "--format", "json"]) == 0
    with_spread = json.loads(capsys.readouterr().out)["prediction"]
    assert with_spread["slowest_device"] == pytest.approx(1 + 0.016 * 2.50759, abs=1e-6)
    assert main([*args, "--gpus", "100", "--rank-spread", "0", "--format", "json"]) == 0
    screened = json.loads(capsys.readouterr().out)["prediction"]
    assert screened["slowest_device"] == 1.0
    assert with_spread["terms"]["time_compute_s"] == pytest.approx(
        screened["terms"]["time_compute_s"] * (1 + 0.016 * 2.50759), rel=1e-6)
    assert main([*args, "--gpus", "100", "--rank-spread", "-0.01"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--rank-spread: rank_spread=-0.01 must be in [0, 0.2)" in err
    one = ["simulate", "--layers", "4", "--hidden", "1024", "--heads", "8", "--cluster", "h100-sxm", "--gpus", "1"]
    assert main([*one, "--global-batch", "4", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"]["slowest_device"] == 1.0


# --- what a training run costs -----------------------------------------------------------------------


def test_a_training_run_is_whole_steps_at_the_step_and_gpu_hours_are_its_seconds_on_every_gpu():
    """10^12 tokens at 64 x 8192 a step: 10^12 / 524,288 = 1,907,348.6, so 1,907,349 steps (the last one whole);
    at 4 s that is 7,629,396 s (88.30 days), on 16 GPUs 7,629,396 x 16 / 3600 = 33,908.43 GPU-hours."""
    from parbench.sim.run_cost import format_count, training_run

    run = training_run(10**12, tokens_per_step=64 * 8192, step_time_s=4.0, gpus=16)
    assert (run.steps, run.seconds) == (1_907_349, 7_629_396.0)
    assert run.days == pytest.approx(88.3032, abs=1e-4) and run.gpu_hours == pytest.approx(33_908.4267, abs=1e-4)
    assert training_run(2 * 524_288, tokens_per_step=524_288, step_time_s=1.0, gpus=1).steps == 2  # exact: no extra
    assert (format_count(33_908.43), format_count(2.134e7), format_count(15.6e12), format_count(512)) == \
        ("33.91K", "21.34M", "15.6T", "512")


@pytest.mark.parametrize("text,tokens", [("15.6T", 15_600_000_000_000), ("300b", 300_000_000_000),
                                         ("2e12", 2_000_000_000_000), ("1500000", 1_500_000), ("7K", 7000)])
def test_train_tokens_read_as_written(text, tokens):
    from parbench.sim.run_cost import parse_tokens

    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text,message", [("0", "must be at least one token"), ("-3T", "must be at least one token"),
                                          ("lots", "is not a token count"), ("inf", "must be at least one token"),
                                          ("1.5X", "is not a token count")])
def test_a_bad_token_count_is_refused_before_any_prediction(capsys, text, message):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--model", "llama3-8b", f"--train-tokens={text}"])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_train_tokens_price_the_layout_and_every_searched_one(capsys):
    """The run's steps come from the layout's global batch x the model's sequence, its days from the predicted
    step, its GPU-hours from the GPUs: checked here from the JSON's own step time, for one layout and for each layout
    a search ranks; a layout that does not fit has no step, so no run."""
    one = ["simulate", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--zero", "3",
           "--train-tokens", "1T", "--format", "json"]
    assert main(one) == 0
    out = json.loads(capsys.readouterr().out)
    run, step = out["training_run"], out["prediction"]["step_time_s"]
    assert run["steps"] == -(-10**12 // (64 * 8192)) and run["tokens"] == 10**12
    assert run["seconds"] == pytest.approx(run["steps"] * step) and run["days"] == pytest.approx(run["seconds"] / 86400)
    assert run["gpu_hours"] == pytest.approx(run["seconds"] * 16 / 3600)
    assert main([*one[:-2], "--format", "table"]) == 0
    assert f"a run of 1T tokens  {run['steps']:,} steps, {run['days']:.4g} days on 16 GPUs" in capsys.readouterr().out
    assert main(["simulate", "--model", "llama3-70b", "--gpus", "8", "--train-tokens", "1T", "--format", "json"]) == 3
    assert "training_run" not in json.loads(capsys.readouterr().out)
    assert main(["simulate", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16", "--seq", "2048",
                 "--search", "--top", "3", "--train-tokens", "300B", "--format", "json"]) == 0
    for row in json.loads(capsys.readouterr().out)["top"]:
        assert row["training_run"]["steps"] == -(-300 * 10**9 // (16 * 2048))
        assert row["training_run"]["gpu_hours"] == pytest.approx(row["training_run"]["steps"] * row["step_time_s"] * 8 / 3600)


def test_several_gpu_counts_compare_each_counts_best_layout(capsys):
    """--search --gpus 8,16: each count searched as --gpus N alone would be (its best layout, step and command the
    same), and the table's per-GPU column is each best's samples/s a GPU over the first count's."""
    base = ["simulate", "--model", "llama3-8b", "--layers", "16", "--seq", "2048", "--global-batch", "32", "--search",
            "--train-tokens", "1B"]
    assert main([*base, "--gpus", "8,16", "--format", "json"]) == 0
    by_gpus = json.loads(capsys.readouterr().out)["by_gpus"]
    assert [b["gpus"] for b in by_gpus] == [8, 16]
    for b in by_gpus:
        assert main([*base, "--gpus", str(b["gpus"]), "--format", "json"]) == 0
        alone = json.loads(capsys.readouterr().out)
        assert (b["evaluated"], b["feasible"]) == (alone["evaluated"], alone["feasible"])
        assert b["best"] == alone["top"][0] and b["best"]["training_run"]["steps"] == -(-10**9 // (32 * 2048))
    assert main([*base, "--gpus", "8,16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {int(line.split()[0]): line.split() for line in lines[2:4]}
    first, second = (b["best"]["throughput_samples_per_s"] / b["gpus"] for b in by_gpus)
    assert rows[8][4] == "100.0%" and rows[16][4] == f"{second / first:.1%}"
    assert rows[16][-1].endswith(by_gpus[1]["best"]["layout"].split()[-1])


def test_a_gpu_count_where_nothing_fits_says_how_near_the_nearest_came(capsys):
    """Llama 3 8B's 16 layers on one A100 40GB do not fit in any layout (parameters, gradients and Adam's state alone
    are about 16 bytes a parameter): that count's line names the layout nearest to fitting and how far over it is,
    the next count ranks as usual, and the command exits 3 (a count with no layout)."""
    argv = ["simulate", "--model", "llama3-8b", "--layers", "16", "--seq", "2048", "--cluster", "a100-40gb",
            "--global-batch", "16", "--gpus", "1,8", "--search"]
    assert main([*argv, "--format", "json"]) == 3
    one, eight = json.loads(capsys.readouterr().out)["by_gpus"]
    assert one["best"] is None and one["feasible"] == 0 and eight["best"] is not None
    assert one["none_because"].startswith("the nearest, dp=1 tp=1 pp=1") and one["none_because"].endswith(" over")
    assert main(argv) == 3
    assert f"      1       {one['evaluated']}      0  no layout fits: {one['none_because']}" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--gpus", "8,16"], "--gpus=8,16 lists several counts: --search compares their best layouts"),
    (["--gpus", "8,8", "--search"], "--gpus=8,8 repeats a count"),
    (["--gpus", "8,0", "--search"], "--gpus=0 must be >= 1"),
    (["--gpus", "8,16", "--tp", "16", "--search"], "tp x pp x cp = 16 x 1 x 1 does not divide gpus=8"),
])
def test_a_bad_list_of_gpu_counts_is_named(capsys, argv, message):
    assert main(["simulate", "--model", "llama3-8b", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_gpu_count_that_is_no_number_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--gpus", "8,x", "--search"])
    assert exc.value.code == 2 and "'8,x' is not a GPU count" in capsys.readouterr().err


def test_a_command_line_kept_in_a_file_runs_with_overrides_after_it(tmp_path, capsys):
    """``parbench @FILE``: the search's printed line, saved under a comment, predicts what the line typed out does,
    and a flag after it overrides the file's (here the global batch: 16 in the file, 32 after it)."""
    assert main(["simulate", "--model", "llama3-8b", "--layers", "16", "--seq", "2048", "--gpus", "8",
                 "--global-batch", "16", "--search", "--top", "1", "--format", "json"]) == 0
    command = json.loads(capsys.readouterr().out)["top"][0]["command"]
    saved = tmp_path / "best.args"
    saved.write_text(f"# the best layout of the search\n{command}\n")
    for extra, batch in (([], 16), (["--global-batch", "32"], 32)):
        assert main([f"@{saved}", *extra, "--format", "json"]) == 0
        from_file = json.loads(capsys.readouterr().out)
        assert main([*shlex.split(command)[1:], *extra, "--format", "json"]) == 0
        typed = json.loads(capsys.readouterr().out)
        assert from_file == typed and from_file["layout"]["global_batch_size"] == batch


def test_an_args_file_that_cannot_be_read_is_an_argument_error_naming_it(tmp_path, capsys):
    """A file that names itself (once a RecursionError after a thousand opens), one that is not text, an unbalanced
    quote (once shlex's ValueError) and a bare @: exit 2 with what is wrong, no traceback."""
    loop_a, loop_b = tmp_path / "a.args", tmp_path / "b.args"
    loop_a.write_text(f"simulate --gpus 8\n@{loop_b}\n")
    loop_b.write_text(f"@{loop_a}\n")
    (tmp_path / "bin.args").write_bytes(b"\xff\xfe\x00simulate")
    (tmp_path / "quote.args").write_text('simulate --model "llama3-8b\n')
    for arg, message in ((f"@{loop_a}", f"@{loop_a} names itself ({loop_a} -> {loop_b} -> {loop_a})"),
                         (f"@{tmp_path / 'bin.args'}", "not a text file of arguments (not UTF-8)"),
                         (f"@{tmp_path / 'quote.args'}", "@FILE line 'simulate --model \"llama3-8b': No closing quotation"),
                         (f"@{tmp_path / 'none.args'}", f"@{tmp_path / 'none.args'}: No such file or directory"),
                         ("@", "@: give the file after it (@FILE)")):
        with pytest.raises(SystemExit) as exc:
            main([arg])
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_printed_preset_reads_back_as_a_cluster_file_and_its_edits_take_effect(tmp_path, capsys):
    """--print-cluster writes the preset's fields as JSON; as --cluster FILE it predicts exactly what the preset
    does, and an edit (NVLink at half its bandwidth) slows a tp 8 layout's step and nothing else of its input."""
    assert main(["simulate", "--cluster", "h100-sxm", "--print-cluster"]) == 0
    fields = json.loads(capsys.readouterr().out)
    saved = tmp_path / "mine.json"
    saved.write_text(json.dumps(fields))
    layout = ["--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--global-batch", "8", "--format", "json"]
    assert main(["simulate", "--cluster", "h100-sxm", *layout]) == 0
    preset = json.loads(capsys.readouterr().out)["prediction"]
    assert main(["simulate", "--cluster", str(saved), *layout]) == 0
    assert json.loads(capsys.readouterr().out)["prediction"] == preset
    fields["name"], fields["intra"]["bandwidth_bytes_per_s"] = "h100-half-nvlink", fields["intra"]["bandwidth_bytes_per_s"] / 2
    saved.write_text(json.dumps(fields))
    assert main(["simulate", "--cluster", str(saved), *layout]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cluster"] == "h100-half-nvlink" and out["prediction"]["step_time_s"] > preset["step_time_s"]
    assert out["prediction"]["comm_bytes"] == preset["comm_bytes"]


def test_a_cpu_profile_predicts_float32_alone(tmp_path, capsys):
    """`parbench calibrate` times float32 operators: on a CPU profile (cores set) simulate defaults to fp32 and
    refuses another precision (a bf16 run on an AVX2 CPU took 10x the step predicted at float32's rate)."""
    from dataclasses import replace

    from parbench.sim.hardware import PRESETS, cluster_to_dict

    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps(cluster_to_dict(replace(PRESETS["a100-80gb"], name="cpu-like", cores=2))))
    base = ["simulate", "--cluster", str(cpu), "--workload", "transformer", "--gpus", "1", "--format", "json"]
    for precision in ("amp", "bf16", "tf32", "fp16"):
        assert main([*base, "--precision", precision]) == 2
        assert f"--precision {precision}: cluster cpu-like is a CPU profile" in capsys.readouterr().err
    assert main(base) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*base, "--precision", "fp32"]) == 0
    assert json.loads(capsys.readouterr().out) == default
    assert main([*base, "--cluster", "a100-80gb", "--precision", "amp"]) == 0  # a GPU preset takes it


def test_threads_per_rank_take_a_cpu_profile_s_rates_measured_at_that_many(tmp_path, capsys):
    """`--threads 2` on a CPU profile that measured two threads per rank predicts at those rates (a faster step
    where GEMMs and memory run twice as fast); two ranks of two threads on its two cores, a thread count it never
    measured and a GPU preset are refused by name, before any prediction."""
    from dataclasses import replace

    from parbench.sim.hardware import PRESETS, cluster_to_dict

    c = replace(PRESETS["a100-80gb"], name="cpu-like", cores=2, peak_flops_tf32=0.0, peak_flops_fp32=0.0)
    c = replace(c, threaded={2: {"peak_flops": 2 * c.peak_flops,
                                 "memory_bandwidth_bytes_per_s": 2 * c.memory_bandwidth_bytes_per_s}})
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps(cluster_to_dict(c)))
    base = ["simulate", "--cluster", str(cpu), "--workload", "transformer", "--gpus", "1", "--format", "json"]
    assert main(base) == 0
    one = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert main([*base, "--threads", "2"]) == 0
    two = json.loads(capsys.readouterr().out)["prediction"]["step_time_s"]
    assert two < one
    assert main([*base, "--threads", "2", "--gpus", "2"]) == 2
    assert "2 ranks x 2 threads > 2 cores: threads beyond the cores wait" in capsys.readouterr().err
    assert main([*base, "--threads", "4"]) == 2
    assert "--threads: cpu-like measured its rates at 1 or 2 threads per rank, not 4" in capsys.readouterr().err
    assert main([*base, "--cluster", "a100-80gb", "--threads", "2"]) == 2
    assert "--threads 2: cluster a100-80gb describes GPUs" in capsys.readouterr().err
