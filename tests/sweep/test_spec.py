"""Sweep files: every bad-file case fails before any run (file, key, expectation named), and the
grid's combination rules and skips. No processes here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from parbench.cli import main
from parbench.config import ConfigError, Strategy
from parbench.sweep import load_spec, plan
from parbench.sweep.spec import schema_markdown

GOOD = """
name = "t"
strategies = ["single", "ddp", "pipeline"]
world_sizes = [1, 2, 4]
micro_batches = [2, 4]
schedules = ["gpipe", "1f1b"]
global_batch_sizes = [32]
steps = 2
[[workloads]]
name = "mlp"
layers = 1
hidden = [16, 32]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


BAD = [
    ('data_in_step = "yes"', "key 'data_in_step': expected true or false, got 'yes'"),
    ("loader_workers = -1", "key 'loader_workers': expected an integer >= 0, got -1"),
    ('nmae = "x"', "unknown key 'nmae'"),
    ("world_sizes = 2", "key 'world_sizes': expected a list of integers >= 1, got 2"),
    ('world_sizes = ["2"]', "key 'world_sizes'[0]: expected an integer >= 1, got '2'"),
    ("world_sizes = [0, 2]", "key 'world_sizes'[0]: expected an integer >= 1, got 0"),
    ("world_sizes = [2, 2]", "key 'world_sizes': expected a list of distinct integers >= 1"),
    ("world_sizes = []", "key 'world_sizes': expected a non-empty list"),
    ("repeats = 0", "key 'repeats': expected an integer >= 1, got 0"),
    ("repeats = true", "key 'repeats': expected an integer >= 1, got True"),
    ("steps = 1.5", "key 'steps': expected an integer >= 1, got 1.5"),
    ("timeout_s = -1", "key 'timeout_s': expected a finite number > 0, got -1"),
    ("timeout_s = nan", "key 'timeout_s': expected a finite number > 0, got nan"),
    ("timeout_s = inf", "key 'timeout_s': expected a finite number > 0, got inf"),
    ('strategies = ["ddp"]\nworld_sizes = [100000]', "world_size=100000 does not fit on this host: 100000 CPU ranks"),
    ('strategies = ["dpp"]', "key 'strategies'[0]: expected one of single, ddp"),
    ('strategies = "some"', "key 'strategies': expected a list of strategy names"),
    ('schedules = ["zigzag"]', "key 'schedules'[0]: expected one of gpipe, 1f1b, interleaved1f1b"),
    ("virtual_stages = [1]", "key 'virtual_stages'[0]: expected an integer >= 2, got 1"),
    ("meshes = [[2, 2]]", "key 'meshes'[0]: expected a [dp, tp, pp] list of three integers >= 1"),
    ('backends = ["tcp"]', "key 'backends'[0]: expected one of gloo, nccl, mpi"),
    ("workloads = []", "key 'workloads': expected a non-empty list"),
    ('[[workloads]]\nname = "cnn"', "key 'workloads'[0]: unknown workload 'cnn'; valid: mlp, transformer"),
    ('[[workloads]]\nname = "mlp"\nwidth = 3', "key 'workloads'[0]: unknown key 'width'"),
    ('[[workloads]]\nlayers = 3', "key 'workloads'[0]: missing key 'name'"),
    ('[[workloads]]\nname = "mlp"\nheads = [0]', "key 'workloads'[0].heads[0]: expected an integer >= 1, got 0"),
    ('[[workloads]]\nname = "mlp"\nlayers = "2"', "key 'workloads'[0].layers: expected an integer >= 0, got '2'"),
    ('[[workloads]]\nname = "transformer"\nhidden = 30\nheads = 4', "heads=4 does not divide hidden=30"),
    ('strategies = ["single"]\nworld_sizes = [2]', "the grid has no runnable point"),
    ("world_sizes = [1, 2", "not valid TOML"),
    (f'name = "{"x" * 101}"', "is 101 characters, at most 100 (it names the sweep's folder under results/sweeps/)"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[b[1][:40] for b in BAD])
def test_bad_sweep_file_fails_naming_file_key_and_expectation(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        plan(load_spec(path))
    assert str(path) in str(exc.value)
    assert message in str(exc.value)


def test_bad_file_exits_2_before_any_run(tmp_path, capsys):
    path = write(tmp_path, "world_sizes = [0]")
    assert main(["sweep", str(path), "--results-dir", str(tmp_path / "r")]) == 2
    assert f"{path}: key 'world_sizes'[0]: expected an integer >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2


def test_unreadable_sweep_files_are_named(tmp_path):
    (tmp_path / "latin1.toml").write_bytes('name = "caf\u00e9"'.encode("latin-1"))
    cases = {tmp_path / "latin1.toml": "is not UTF-8 text (byte 11: b'\\xe9'); TOML files are UTF-8",
             tmp_path: "is a directory; give the TOML file itself",
             tmp_path / "missing.toml": "does not exist"}
    for path, message in cases.items():
        with pytest.raises(ConfigError) as exc:
            load_spec(path)
        assert str(exc.value) == f"sweep file {path} {message}"


def test_world_sizes_beyond_this_host_are_skipped_with_the_reason(tmp_path):
    from parbench.preflight import RANK_UNIQUE_MEMORY_BYTES, SERVER_MEMORY_BYTES, host_memory_bytes, host_rank_limit

    limit = host_rank_limit()
    assert limit == (host_memory_bytes() - SERVER_MEMORY_BYTES) // RANK_UNIQUE_MEMORY_BYTES
    assert host_rank_limit(SERVER_MEMORY_BYTES + 4 * RANK_UNIQUE_MEMORY_BYTES) == 4  # exact: 4 ranks fit, not 5
    p = plan(load_spec(write(tmp_path, f'strategies = ["ddp"]\nworld_sizes = [2, {limit + 1}]\nglobal_batch_sizes = [64]')))
    assert [pt.config.world_size for pt in p.points] == [2]
    assert [s.reason.split(":")[0] for s in p.skipped] == [f"world_size={limit + 1} does not fit on this host"]
    assert f"at most {limit} ranks here" in p.skipped[0].reason


def test_bad_command_line_override_is_named(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    assert main(["sweep", str(path), "--world-sizes", "0,2", "--dry-run"]) == 2
    assert "command-line override world_sizes[0]: expected an integer >= 1, got 0" in capsys.readouterr().err


def test_strategy_specific_axes_multiply_only_their_points(tmp_path):
    p = plan(load_spec(write(tmp_path, GOOD)))
    by = {}
    for point in p.points:
        by.setdefault((point.config.strategy, point.config.world_size), []).append(point.config)
    # single at 1 only; ddp at 2 and 4 only; 2 mlp widths each
    assert sorted((s.value, w, len(c)) for (s, w), c in by.items()) == [
        ("ddp", 2, 2), ("ddp", 4, 2), ("pipeline", 2, 8), ("single", 1, 2)]
    assert all(c.micro_batches == 1 for c in by[(Strategy.DDP, 2)])
    # pipeline x4 needs 4 stages, the 1-hidden-layer mlp has 2 Linear layers: skipped with the reason
    reasons = {s.label: s.reason for s in p.skipped}
    assert len(reasons) == 8 and all(l.startswith("pipeline x4") for l in reasons)
    assert all("pipeline needs 4 stages" in r and "only 2 splittable layers" in r for r in reasons.values())


def test_unimplemented_strategy_and_hybrid_without_mesh_are_listed_as_skipped(tmp_path, monkeypatch):
    from parbench import strategies

    builders = {k: v for k, v in strategies.BUILDERS.items() if k is not Strategy.DDP}
    monkeypatch.setattr(strategies, "BUILDERS", builders)
    text = GOOD.replace('"pipeline"]', '"pipeline", "hybrid"]')
    p = plan(load_spec(write(tmp_path, text)))
    reasons = [s.reason for s in p.skipped if s.label.startswith("ddp")]
    assert len(reasons) == 4 and all("strategy=ddp is not implemented yet" in r for r in reasons)
    hybrid2 = [s.reason for s in p.skipped if s.label.startswith("hybrid x2")]
    assert len(hybrid2) == 2 and all("no hybrid mesh of world_size=2" in r for r in hybrid2)


def test_all_reads_the_registry_at_run_time(tmp_path):
    from parbench.strategies import BUILDERS

    p = plan(load_spec(write(tmp_path, 'strategies = "all"\nworld_sizes = [1, 2]')))
    assert {pt.config.strategy for pt in p.points} | {Strategy(s.label.split()[0]) for s in p.skipped} \
        == set(BUILDERS)


def test_hybrid_meshes_derived_with_two_degrees_above_one(tmp_path):
    from parbench.sweep.grid import _meshes

    spec = load_spec(write(tmp_path, "world_sizes = [4]"))
    assert sorted((m["dp"], m["tp"], m["pp"]) for m in _meshes(spec, 4)) == [(1, 2, 2), (2, 1, 2), (2, 2, 1)]
    assert _meshes(spec, 2) == []


def test_sweep_identity_ignores_repeats_and_timeout_but_not_the_grid(tmp_path):
    path = write(tmp_path, GOOD)
    base = load_spec(path).sweep_id
    assert re.fullmatch(r"t-[0-9a-f]{8}", base)
    assert load_spec(path, {"repeats": 3, "timeout_s": 9.0}).sweep_id == base
    assert load_spec(path, {"world_sizes": [1, 2]}).sweep_id != base


def test_embedded_default_and_shipped_examples_plan(tmp_path):
    from importlib import resources

    default = plan(load_spec(None))
    assert {p.config.world_size for p in default.points} == {1, 2, 4}
    assert {p.config.workload.name for p in default.points} == {"mlp", "transformer"}
    shipped = [f for f in resources.files("parbench.sweeps").iterdir() if f.name.endswith(".toml")]
    assert len(shipped) >= 5
    for f in shipped:  # valid files (planning each would build every model: the CLI's --dry-run does)
        assert load_spec(Path(str(f))).values["workloads"], f.name


def test_readme_schema_table_is_generated_from_the_schema():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert schema_markdown() in readme


def test_data_in_step_and_loader_workers_reach_every_point(tmp_path):
    spec = load_spec(write(tmp_path, GOOD + "\n"), {"data_in_step": True, "loader_workers": 1})
    points = plan(spec).points
    assert points and all(p.config.data_in_step and p.config.loader_workers == 1 for p in points)
    assert all("data-in-step" in p.label for p in points)
    assert load_spec(write(tmp_path, GOOD)).sweep_id != spec.sweep_id  # a different measurement


def test_a_model_larger_than_the_host_is_skipped_naming_its_parameters(tmp_path, monkeypatch):
    """The parent builds each workload to check it before spawning: a model whose float32 weights, gradients and
    optimizer state on this host's ranks exceed its memory is skipped with its parameter count, before anything is
    built. The default transformer at hidden 1024, 4 blocks: 12 h^2 + 13 h a block (q, k, v, output and the 4h MLP
    with biases, two LayerNorms), token (256 x h) and position (32 x h) embeddings, the final LayerNorm and an
    untied 256 x h head: 50,944,000 parameters; under DDP each of 2 ranks holds weights, gradients and AdamW's two
    moments, 16 bytes a parameter: 1.52 GiB. A 300 MiB host holds two ranks (218 MiB for the process server, 32 MiB
    a rank) but not the model; a 1600 MiB one holds both (the mlp beside it fits either)."""
    from parbench import preflight

    h = 1024
    params = 4 * (12 * h * h + 13 * h) + 256 * h + 32 * h + 2 * h + h * 256
    assert params == 50_944_000
    spec = ('strategies = ["ddp"]\nworld_sizes = [2]\nglobal_batch_sizes = [64]\n'
            '[[workloads]]\nname = "transformer"\nhidden = 1024\nlayers = 4\n[[workloads]]\nname = "mlp"\n')
    monkeypatch.setattr(preflight, "host_memory_bytes", lambda: 300 * 2**20)
    p = plan(load_spec(write(tmp_path, spec)))
    assert [pt.config.workload.name for pt in p.points] == ["mlp"]
    assert [s.reason for s in p.skipped] == [
        (f"workload 'transformer' has {params:,} parameters: the float32 weights, gradients and AdamW state of this "
         f"host's 2 ddp ranks alone need {2 * 16 * params / 2**30:.1f} GiB and this host has 0.3 GiB")]
    monkeypatch.setattr(preflight, "host_memory_bytes", lambda: 1600 * 2**20)
    assert [pt.config.workload.name for pt in plan(load_spec(write(tmp_path, spec))).points] == ["transformer", "mlp"]


def test_the_model_memory_floor_counts_what_each_strategys_ranks_hold_whole():
    """Bytes of weights W, gradients G and optimizer state S (1, 1 and 2 GB: AdamW's two moments): DDP's ranks each
    hold all three; ZeRO-1's the weights and gradients, S / world; FSDP's a share of each; the single-process
    reference all three; the parent's check build W alone, all a GPU run's host holds."""
    from parbench.preflight import model_memory_floor
    from parbench.workloads import ModelState

    state = ModelState(params=250_000_000, weight_bytes=10**9, grad_bytes=10**9, optimizer_bytes=2 * 10**9,
                       optimizer="AdamW")

    def floor(strategy, ranks_here=4, world_size=4, device="cpu"):
        return model_memory_floor(state, strategy=strategy, device=device, ranks_here=ranks_here, world_size=world_size)

    assert floor("ddp") == (4 * 4 * 10**9, "ranks")
    assert floor("zero1") == (4 * (2 * 10**9 + 2 * 10**9 // 4), "ranks")
    assert floor("zero2") == (4 * (10**9 + 3 * 10**9 // 4), "ranks")
    assert floor("fsdp") == (4 * 10**9, "ranks")  # ties with the reference: this host's ranks are named
    assert floor("fsdp", world_size=8) == (4 * 10**9, "reference")  # the other 4 ranks on another node
    assert floor("single", ranks_here=1, world_size=1) == (4 * 10**9, "reference")
    assert floor("ddp", device="cuda") == (10**9, "build")


def test_a_gpu_run_whose_ranks_cannot_hold_their_share_of_the_model_is_refused_naming_the_gpu():
    """On GPUs each rank's share must fit its GPU (nvidia-smi's memory.total): 6e9 parameters under AdamW are
    16 bytes each, 96 GB a DDP rank, more than an 80 GB H100's 81,559 MiB; sharded by FSDP over 2 ranks, 48 GB fit.
    The smallest of the ranks' GPUs is the one named."""
    from parbench.config import RunConfig
    from parbench.devices import Gpu
    from parbench.names import ConfigError
    from parbench.preflight import check_gpu_model_memory
    from parbench.workloads import ModelState

    state = ModelState(params=6 * 10**9, weight_bytes=24 * 10**9, grad_bytes=24 * 10**9, optimizer_bytes=48 * 10**9,
                       optimizer="AdamW")
    gpus = [Gpu(index=i, name="NVIDIA H100 80GB HBM3", memory_bytes=81559 * 2**20) for i in (0, 1)]
    ddp = RunConfig(strategy="ddp", world_size=2, workload={"name": "transformer"})
    with pytest.raises(ConfigError, match=r"has 6,000,000,000 parameters: the float32 weights, gradients and AdamW "
                                          r"state each ddp rank holds alone need 89\.4 GiB and GPU 0 "
                                          r"\(NVIDIA H100 80GB HBM3\) has 79\.6 GiB"):
        check_gpu_model_memory(ddp, state, gpus)
    check_gpu_model_memory(RunConfig(strategy="fsdp", world_size=2, workload={"name": "transformer"}), state, gpus)
    check_gpu_model_memory(ddp, state, [])  # no nvidia-smi: nothing to judge


def test_a_reference_that_preflight_refuses_leaves_the_run_standing_with_the_reason(monkeypatch):
    """The single-process reference is launched like any run; where its own preflight refuses it (the whole model on
    one GPU), the run keeps its record and says why it has no reference, rather than failing after it ran."""
    from parbench import launch
    from parbench.config import RunConfig
    from parbench.names import ConfigError

    def refuse(cfg, **kwargs):
        raise ConfigError("no room for the whole model")

    monkeypatch.setattr(launch.preflight, "check", refuse)
    ref = RunConfig(strategy="ddp", world_size=2, workload={"name": "mlp"}).reference()
    assert launch.reference_losses(ref) == (None, "reference refused: no room for the whole model")
