"""Every kind of bad workload input is a ConfigError naming the workload and the fault, raised in
the parent before any rank exists (the CLI turns it into exit code 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parbench import cli, workloads
from parbench.config import ConfigError, RunConfig, WorkloadConfig

PLUGINS = Path(__file__).parent / "plugins"
BAD = f"{PLUGINS / 'bad_plugins.py'}"
MNIST = f"{PLUGINS / 'mnist_plugin.py'}:make"


def _check(name: str, **run) -> str:
    run.setdefault("world_size", 2 if run.get("strategy", "single") != "single" else 1)
    if run.get("strategy") == "pipeline":
        run.setdefault("micro_batches", run["world_size"])  # 1F1B needs a micro-batch per stage at least
    with pytest.raises(ConfigError) as info:
        workloads.check(RunConfig(workload=WorkloadConfig(name=name, hidden=16), global_batch_size=8, **run))
    return str(info.value)


@pytest.mark.parametrize("name, expected", [
    ("no_such_module_for_parbench:make", "cannot import module 'no_such_module_for_parbench': ModuleNotFoundError"),
    (f"{PLUGINS / 'missing.py'}:make", "missing.py does not exist"),
    (f"{PLUGINS / 'broken_import.py'}:make", "cannot import", ),
    (f"{PLUGINS / 'mnist_plugin.py'}:nope", "has no attribute 'nope'; callables there: batch, build, make"),
    (f"{BAD}:NOT_A_FACTORY", "is a int, not a factory"),
    (f"{BAD}:one_argument", "the factory must accept (cfg: WorkloadConfig, seed: int); one_argument(cfg) does not"),
    (f"{BAD}:returns_dict", "the factory returned dict, not a parbench.workloads.Workload"),
    (f"{BAD}:raises", "the factory raised RuntimeError: the plugin's own bug"),
    (f"{BAD}:negative_flops", "forward_flops_per_sample=-1 must be an int >= 0"),
    (f"{BAD}:mismatched", "its model does not fit its batch (inputs (2, 100) torch.float32"),
    (f"{BAD}:samples_last", "inputs are (784, 2)"),
    (f"{BAD}:plain_module", "build() returned Linear, not a StagedModel"),
    (f"{BAD}:optimizer_returns_none", "optimizer(params, lr) returned NoneType, not a torch.optim.Optimizer"),
    (f"{BAD}:optimizer_raises", "optimizer(params, lr=0.001) raised ValueError: Invalid learning rate: -0.001"),
    (f"{BAD}:nothing_to_train",
     "its model has no parameter that requires a gradient, so there is nothing to train and no gradient to communicate"),
])
def test_a_bad_plugin_is_refused_with_its_name_and_fault(name, expected):
    message = _check(name)
    assert message.startswith(f"workload {name!r}: ")
    assert expected in message
    if "broken_import" in name:
        assert "no_such_dependency_for_parbench" in message


def test_a_split_point_that_does_not_exist():
    message = _check(f"{BAD}:bad_split", strategy="pipeline")
    assert "split point(s) [5] do not exist: the model has 2 units, so a stage can begin at units 1..1" in message


def test_split_points_that_forbid_the_even_split():
    message = _check(f"{BAD}:four_units_split_at_one", strategy="pipeline")
    assert "2 even stages begin at units [2], but the workload allows splits only at [1]" in message


def test_more_pipeline_stages_than_units():
    message = _check(MNIST, strategy="pipeline", world_size=4)
    assert message == (f"workload {MNIST!r} has 2 pipeline unit(s) and 1 split point(s): at most 2 stages, "
                       "but pp=4 needs 4")


def test_tensor_parallel_without_a_plan_names_what_is_missing():
    message = _check(MNIST, strategy="tp")
    assert message.startswith(f"workload {MNIST!r} provides no tensor-parallel plan (Workload.tp_plan is None), "
                              "so tp=2 cannot run; it runs under single, ddp")


@pytest.mark.parametrize("plugin, expected", [
    ("tp_plan_raises", "tp_plan(model) raised IndexError: index 7 is out of range"),
    ("tp_plan_of_names", ("tp_plan(model) must return a non-empty {module path: ParallelStyle} dict (ColwiseParallel(), "
                          "RowwiseParallel(), ...), got dict {'units.0': 'colwise', 'units.1.0': 'rowwise'}")),
])
def test_a_tp_plan_that_raises_or_is_not_parallel_styles_is_named(plugin, expected):
    """Once a traceback in the parent (a plan that raised) or in every rank (torch's parallelize_module)."""
    assert expected in _check(f"{BAD}:{plugin}", strategy="tp")


def test_a_dataset_without_a_length_is_named():
    assert ("len(dataset) raised NotImplementedError: streamed: length unknown; a map-style Dataset has a length"
            in _check(f"{BAD}:dataset_without_length", strategy="ddp"))


def test_a_tp_plan_naming_a_missing_module():
    assert "its tp plan names modules the model lacks: units.7.fc" in _check(f"{BAD}:bad_tp_plan", strategy="tp")


def test_an_unknown_name_is_refused_by_the_config():
    with pytest.raises(ConfigError, match="unknown workload 'resnet'; valid: mlp, transformer, hf-llama, hf-gpt2"):
        WorkloadConfig(name="resnet")


def test_the_cli_exits_2_before_spawning(capsys):
    code = cli.main(["run", "--workload", f"{BAD}:mismatched", "--no-save", "--world-size", "2", "--strategy", "ddp"])
    assert code == 2
    assert "its model does not fit its batch" in capsys.readouterr().err


@pytest.mark.parametrize("plugin", ["hangs_in_its_factory", "hangs_building"])
def test_a_plugin_that_hangs_before_any_rank_is_refused_at_the_runs_timeout(capsys, plugin):
    """The parent runs a plugin's factory and build to check it; one that never returns once hung
    ``parbench run`` (and a whole sweep) with no rank to time out. Now the run's timeout bounds it."""
    import signal
    import time

    handler, (left, _) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's
    start = time.monotonic()
    code = cli.main(["run", "--workload", f"{BAD}:{plugin}", "--no-save", "--world-size", "2", "--strategy", "ddp",
                     "--timeout", "2"])
    assert code == 2 and time.monotonic() - start < 30
    assert (f"workload '{BAD}:{plugin}': its import, factory, build and two samples through the model did not "
            "finish in 2 s (the run's timeout) before any rank was started") in capsys.readouterr().err
    # the caller's alarm is its own again, with what was left of it
    assert signal.getsignal(signal.SIGALRM) is handler
    now_left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert now_left == 0 if left == 0 else 0 < now_left < left - 1


def test_a_plugin_that_hangs_skips_its_sweep_points_and_the_others_are_planned(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(f'strategies = ["ddp"]\nworld_sizes = [2]\nglobal_batch_sizes = [8]\nsteps = 1\ntimeout_s = 1\n'
                    f'[[workloads]]\nname = "{BAD}:hangs_building"\n[[workloads]]\nname = "mlp"\nhidden = 16\n')
    assert cli.main(["sweep", str(spec), "--dry-run", "--results-dir", str(tmp_path / "r")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich folds long lines
    assert "1 points x 1 repeats = 1 runs, 1 points skipped" in out and "run ddp x2 mlp" in out
    assert f"skip ddp x2 {BAD}:hangs_building" in out and "did not finish in 1 s (the run's timeout)" in out


def test_a_good_plugin_passes_every_check():
    for strategy, world in (("single", 1), ("ddp", 2), ("pipeline", 2)):
        workloads.check(RunConfig(strategy=strategy, world_size=world, workload=WorkloadConfig(name=MNIST),
                                  micro_batches=2 if strategy == "pipeline" else 1))


def test_a_relative_plugin_path_becomes_absolute(monkeypatch):
    monkeypatch.chdir(PLUGINS)
    assert WorkloadConfig(name="mnist_plugin.py:make").name == MNIST
    assert WorkloadConfig(name="pkg.module:factory").name == "pkg.module:factory"


def test_hf_workload_without_transformers_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(ConfigError, match=r"workload 'hf-llama' needs transformers: pip install 'parbench\[hf\]'"):
        workloads.check(RunConfig(workload=WorkloadConfig(name="hf-llama")))


def test_workloads_inspect_says_why_a_run_would_refuse_each_installed_plugin(tmp_path, monkeypatch, capsys):
    """`parbench workloads --inspect` builds every installed plugin. One whose build returns a plain module once
    ended the listing in a traceback (AttributeError: no ``units``), one whose model does not fit its batch was
    listed as fine, one whose tp plan holds strings claimed tp_plan=yes, and one that hangs hung the command. Each
    now gets the reason `parbench run` would give, and the listing goes on."""
    import time

    info = tmp_path / "site" / "bad_demo-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-demo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[parbench.workloads]\nplain = bad_plugins:plain_module\nmismatched = bad_plugins:mismatched\n"
        "tpnames = bad_plugins:tp_plan_of_names\nhangs = bad_plugins:hangs_building\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(PLUGINS))
    start = time.monotonic()
    assert cli.main(["workloads", "--inspect", "--timeout", "2"]) == 0
    assert time.monotonic() - start < 120
    out = capsys.readouterr().out
    assert ("cannot run: workload 'plain': build() returned Linear, not a StagedModel(pre, units, post)"
            in out)
    assert "cannot run: workload 'mismatched': its model does not fit its batch (inputs (2, 100)" in out
    assert ("tp refused: workload 'tpnames': tp_plan(model) must return a non-empty {module path: ParallelStyle} "
            "dict") in out
    assert "cannot run: workload 'hangs': its import, factory, build and two samples through the model did not " \
           "finish in 2 s" in out
    tpnames = out.split("\ntpnames", 1)[1].splitlines()
    assert "pipeline_units=2 tp_plan=no" in tpnames[1]  # it builds and trains; tp alone is refused
    import importlib.util
    import re

    refused = set(re.findall(r"cannot run: workload '([^']+)'", out))  # the built-ins all build (hf-*: transformers)
    no_hf = importlib.util.find_spec("transformers") is None
    assert refused == {"plain", "mismatched", "hangs"} | ({"hf-llama", "hf-gpt2"} if no_hf else set())


@pytest.mark.parametrize("value, why", [("0", "0 must be a number of seconds above 0, at most 1e+09"),
                                        ("nan", "nan must be a number of seconds above 0, at most 1e+09"),
                                        ("inf", "inf must be a number of seconds above 0, at most 1e+09"),
                                        ("1e12", "1e12 must be a number of seconds above 0, at most 1e+09"),
                                        ("soon", "'soon' is not a number of seconds")])
def test_workloads_inspect_refuses_a_timeout_that_is_not_seconds(value, why, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["workloads", "--inspect", "--timeout", value])
    assert info.value.code == 2 and f"argument --timeout: {why}" in capsys.readouterr().err


def test_a_run_timeout_past_what_the_store_and_the_alarm_take_is_refused_by_name():
    """--timeout 1e300 ended a run in the rendezvous store's OverflowError, 1e12 a plugin's check in the alarm's;
    both are refused before anything starts, and the longest allowed runs a plugin's check. In a process of its
    own: pytest-timeout's alarm here would leave the plugin's deadline unarmed."""
    import subprocess
    import sys

    plugin = ["--workload", f"{PLUGINS / 'mnist_plugin.py'}:make", "--hidden", "16", "--no-save",
              "--global-batch-size", "8", "--steps", "1"]
    for timeout in ("1e12", "1e300"):
        assert cli.main(["run", "--workload", "mlp", "--hidden", "16", "--no-save", "--timeout", timeout]) == 2
    ran = subprocess.run([sys.executable, "-m", "parbench", "run", *plugin, "--timeout", "1e9"], capture_output=True,
                         text=True, timeout=240, check=False)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]
