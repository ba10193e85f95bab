"""Training precision in real processes (gloo, CPU): bf16 halves exactly the traffic it claims to, its
losses match a bf16 single-process reference within the bf16 tolerance, and the record states the
precision, the tolerance and the MFU basis."""

from __future__ import annotations

import pytest

from parbench.config import ConfigError, RunConfig
from tests.references import run

# the mlp is the seed documents' 784-512-10 classifier: two Linear layers with biases
MLP_PARAMS = 784 * 512 + 512 + 512 * 10 + 10
BF16, FP32 = 2, 4


def _run(tmp_path, **kw) -> dict:
    rec = run(RunConfig(steps=3, **kw), results_dir=tmp_path)
    assert rec["status"] == "ok", rec["error"]
    return rec


def test_ddp_bf16_gradient_all_reduce_sends_half_the_fp32_bytes(tmp_path):
    fp32 = _run(tmp_path, strategy="ddp", world_size=2)
    bf16 = _run(tmp_path, strategy="ddp", world_size=2, precision="bf16")
    # ring all-reduce, n=2: 2(n-1)/n x Psi = Psi bytes per rank per step
    assert fp32["comm_parameter_bytes_per_step"] == MLP_PARAMS * FP32
    assert bf16["comm_parameter_bytes_per_step"] == MLP_PARAMS * BF16
    assert bf16["precision"] == "bf16" and bf16["loss_tolerance"] == 5e-2
    assert bf16["mfu_dtype"] == "bf16" and bf16["mfu_peak_flops"] is None  # CPU: no stated peak
    assert 0 < bf16["loss_max_abs_diff_vs_reference"] <= bf16["loss_tolerance"]
    assert fp32["loss_max_abs_diff_vs_reference"] <= fp32["loss_tolerance"] == 1e-5
    from parbench.sim import PRESETS, layout_from_run, model_spec, predict

    for precision, rec in (("fp32", fp32), ("bf16", bf16)):  # the simulator's own count of the same run
        cfg = RunConfig(strategy="ddp", world_size=2, precision=precision)
        assert predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"]).comm_bytes["parameter"] \
            == rec["comm_parameter_bytes_per_step"]


def test_fsdp_bf16_gathers_and_reduce_scatters_in_bf16(tmp_path):
    rec = _run(tmp_path, strategy="fsdp", world_size=2, precision="bf16")
    # ZeRO-3: two all-gathers and one reduce-scatter of (n-1)/n x Psi each; no dim 0 of the mlp
    # needs padding at n=2 (512 and 10 rows)
    assert rec["comm_parameter_bytes_per_step"] == 3 * MLP_PARAMS * BF16 // 2
    assert rec["loss_max_abs_diff_vs_reference"] <= rec["loss_tolerance"]


@pytest.mark.parametrize("strategy,extra", [("tp", {}), ("pipeline", {"micro_batches": 2})])
def test_bf16_model_parallel_matches_the_bf16_reference(tmp_path, strategy, extra):
    """Autocast makes a Linear's output bf16 but keeps the residual stream and the norms float32, so of the
    transformer's model-parallel traffic only the row-wise Linears' forward all-reduces halve: per block
    2 forward all-reduces of b s h in bf16 and 4 backward ones (the q, k, v and up inputs' gradients) in
    fp32, each sending S at n = 2; a pipeline boundary carries the fp32 residual stream."""
    rec = _run(tmp_path, strategy=strategy, world_size=2, workload={"name": "transformer"},
               precision="bf16", global_batch_size=16, **extra)  # bf16 is ~6x float32's time on this CPU
    assert rec["loss_max_abs_diff_vs_reference"] <= rec["loss_tolerance"]
    bsh = rec["global_batch_size"] * rec["seq_len"] * rec["hidden"]
    expected = rec["layers"] * bsh * (2 * BF16 + 4 * FP32) if strategy == "tp" else 2 * (bsh // 2) * FP32
    assert rec["comm_intermediate_bytes_per_step"] == expected
    from parbench.sim import PRESETS, layout_from_run, model_spec, predict

    cfg = RunConfig(strategy=strategy, world_size=2, workload={"name": "transformer"}, precision="bf16",
                    global_batch_size=16, **extra)
    assert predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"]).comm_bytes["intermediate"] == expected


@pytest.mark.slow
@pytest.mark.parametrize("strategy,extra", [
    ("zero1", {}), ("zero2", {}), ("ps", {}),
    ("hybrid", {"dp": 2, "pp": 2, "micro_batches": 2}), ("hybrid", {"dp": 2, "tp": 2, "dp_mode": "fsdp"})])
def test_bf16_every_other_strategy(tmp_path, strategy, extra):
    world = 4 if strategy == "hybrid" else 2
    rec = _run(tmp_path, strategy=strategy, world_size=world, workload={"name": "transformer"},
               precision="bf16", **extra)
    assert rec["loss_max_abs_diff_vs_reference"] <= rec["loss_tolerance"]


def test_bad_precisions_are_refused_before_spawning():
    with pytest.raises(ConfigError, match="tf32 is a CUDA tensor-core mode"):
        RunConfig(precision="tf32")
    with pytest.raises(ConfigError, match="unknown precision 'fp16'"):
        RunConfig(precision="fp16")


def test_bf16_expert_parallelism_runs_and_sends_stream_and_expert_dtypes(tmp_path):
    """The mixture of experts under autocast (it failed before: the experts' bf16 outputs were summed into the
    float32 stream). Balanced routing, ep = dp = 2, top 2 of 4 experts, 4 layers: each rank's 8 x 32 tokens
    make 512 assignments, 256 of them for the other rank's experts; per layer and direction a row of h
    carries the norm's float32 output out (and its gradient back) and the expert's bf16 output back (and its
    gradient out): 4 + 2 + 2 + 4 bytes per element; the count exchange sends 4 int64 / 2 per layer."""
    rec = _run(tmp_path, strategy="ep", world_size=2, workload={"name": "moe", "router": "balanced"}, precision="bf16",
               global_batch_size=16)  # bf16 runs ~6x slower than float32 on this CPU: 8 sequences per rank suffice
    assert rec["loss_max_abs_diff_vs_reference"] <= rec["loss_tolerance"]
    h, layers = rec["hidden"], rec["layers"]
    assert rec["comm_intermediate_bytes_per_step"] == layers * 256 * h * (FP32 + BF16 + BF16 + FP32) + layers * 4 * 8 // 2
    assert rec["comm_moe_counts_bytes_per_step"] == layers * 4 * 8 // 2
