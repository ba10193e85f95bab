"""Every strategy beyond ddp/pipeline in real processes (gloo, CPU): each run checks its loss against
the single-process reference, its bytes per category against the textbook formula for the
model's shapes, and the memory relation that is the point of the strategy."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from parbench.config import RunConfig, WorkloadConfig
from tests.references import run
from parbench.metrics.comm import binomial_children
from parbench.workloads import make
from tests.distributed.test_breakdown import assert_breakdown

MLP = {"name": "mlp"}
GPT = {"name": "transformer"}
FP32 = 4
ADAM_STEP = 4  # AdamW keeps one fp32 ``step`` scalar per parameter tensor


def _run(res_dir, **kw) -> dict:
    kw.setdefault("steps", 4)  # 2 warm-up + probe + 4 timed: 7 steps compared with the reference
    rec = run(RunConfig(**kw), results_dir=res_dir)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    assert len(rec["losses"]) == 7
    assert_breakdown(rec, Path(res_dir))
    return rec


def _model(workload: dict):
    return make(WorkloadConfig(**workload), 0).build(0)


def psi(workload: dict) -> int:
    return sum(p.numel() * FP32 for p in _model(workload).parameters())


def tensors(workload: dict) -> int:
    return len(list(_model(workload).parameters()))


def padded(workload: dict, n: int) -> int:
    """Parameter bytes once FSDP2 pads each dim 0 to a multiple of n."""
    return sum(math.ceil(p.shape[0] / n) * n * math.prod(p.shape[1:]) * FP32
               for p in _model(workload).parameters())


def ring(size: int, n: int) -> int:
    return 2 * (n - 1) * size // n


def ranks(rec: dict) -> dict[int, dict]:
    return {r["rank"]: r for r in rec["per_rank"]}


def tp_split(workload: dict) -> int:
    """Bytes the tp plan splits: column-wise weight and bias, row-wise weight (its bias stays whole)."""
    model = _model(workload)
    total = 0
    for path, style in make(WorkloadConfig(**workload), 0).tp_plan(model).items():
        layer = model.get_submodule(path)
        total += layer.weight.numel() * FP32
        if isinstance(style, ColwiseParallel) and layer.bias is not None:
            total += layer.bias.numel() * FP32
    return total


def tp_bytes(workload: dict, rows: int, t: int) -> int:
    """Megatron: one all-reduce per row-wise layer's output (forward) and per column-wise layer's
    input gradient (backward), except the layer that reads the data itself (the mlp's first)."""
    model = _model(workload)
    total = 0
    for path, style in make(WorkloadConfig(**workload), 0).tp_plan(model).items():
        layer = model.get_submodule(path)
        if isinstance(style, RowwiseParallel):
            total += ring(rows * layer.out_features * FP32, t)
        elif isinstance(style, ColwiseParallel) and not (workload["name"] == "mlp" and path == "units.0.fc"):
            total += ring(rows * layer.in_features * FP32, t)
    return total


@pytest.fixture(scope="module")
def res_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("strategies")


# --- ZeRO / FSDP ------------------------------------------------------------------------------

@pytest.mark.parametrize("workload, n", [(GPT, 2), (MLP, 4)])
def test_zero1_all_reduces_gradients_and_shards_only_optimizer_state(res_dir, workload, n):
    rec = _run(res_dir, strategy="zero1", world_size=n, workload=workload)
    total = psi(workload)
    by_rank = ranks(rec)
    for r in by_rank.values():
        ops = r["comm_ops"]
        assert ops["all_reduce/parameter"]["sent_bytes"] == ring(total, n)  # DDP's gradient all-reduce
        # then each rank broadcasts the parameters its optimizer shard updated
        assert ops["broadcast/parameter"]["sent_bytes"] == r["extra"]["zero1_broadcast_bytes_per_step"]
        assert ops["broadcast/parameter"]["count"] == n  # one flat bucket per owning rank, not one per tensor
        assert r["comm_parameter_bytes_per_step"] == ring(total, n) + r["extra"]["zero1_broadcast_bytes_per_step"]
        assert r["extra"]["modeled_comm_parameter_bytes_per_step"] == ring(total, n)
        assert r["mem_param_bytes"] == r["mem_grad_bytes"] == total  # parameters and gradients stay whole
    own = {rank: r["extra"]["zero1_broadcast_bytes_per_step"] for rank, r in by_rank.items()}
    assert sum(own.values()) == total
    for rank, r in by_rank.items():  # gloo broadcasts down a binomial tree: inner ranks forward shards
        forwarded = sum(size * binomial_children((rank - root) % n, n) for root, size in own.items())
        assert r["comm_wire_bytes_per_step"] == ring(total, n) + forwarded
    assert rec["os_write_bytes_per_step"] == pytest.approx(rec["comm_wire_bytes_per_step"], rel=0.03)
    optim = [r["mem_optim_bytes"] for r in by_rank.values()]
    if workload is GPT:  # AdamW: two moments per element; the shards partition them exactly
        assert sum(optim) == 2 * total + ADAM_STEP * tensors(workload)
        assert max(optim) < 0.6 * sum(optim)
    else:  # plain SGD keeps no state: nothing to shard
        assert optim == [0] * n
    assert rec["comm_intermediate_bytes_per_step"] == rec["comm_data_bytes_per_step"] == 0


@pytest.mark.parametrize("strategy, workload, n", [("fsdp", MLP, 4), ("zero2", GPT, 2), ("fsdp", GPT, 4)])
def test_fsdp_gathers_and_reduce_scatters_padded_shards(res_dir, strategy, workload, n):
    rec = _run(res_dir, strategy=strategy, world_size=n, workload=workload)
    gathers = 2 if strategy == "fsdp" else 1  # ZeRO-3 re-gathers for backward; ZeRO-2 keeps them
    total, pad = psi(workload), padded(workload, n)
    one_pass = (n - 1) * pad // n  # all-gather or reduce-scatter of every (padded) shard
    for r in rec["per_rank"]:
        ops = r["comm_ops"]
        assert ops["all_gather/parameter"]["sent_bytes"] == gathers * one_pass
        assert ops["reduce_scatter/parameter"]["sent_bytes"] == one_pass
        assert r["comm_parameter_bytes_per_step"] == (gathers + 1) * one_pass
        # gloo reduce-scatters by all-reducing: the wire carries twice the convention for that part
        assert r["comm_wire_bytes_per_step"] == (gathers + 2) * one_pass == r["extra"]["modeled_wire_bytes_per_step"]
        assert r["extra"]["modeled_comm_parameter_bytes_per_step"] == (gathers + 1) * ((n - 1) * total // n)
        assert r["extra"]["padded_comm_parameter_bytes_per_step"] == (gathers + 1) * one_pass
    if workload is MLP:  # the 10-class layer pads 10 rows to 12 at n=4: counted > textbook
        assert pad == total + 2 * (512 + 1) * FP32
    by_rank = list(ranks(rec).values())
    # parameters and gradients: the shards partition the model; optimizer state (AdamW) likewise
    assert sum(r["mem_param_bytes"] for r in by_rank) == sum(r["mem_grad_bytes"] for r in by_rank) == total
    assert max(r["mem_param_bytes"] for r in by_rank) <= pad // n
    if workload is GPT:
        assert sum(r["mem_optim_bytes"] for r in by_rank) == 2 * total + n * ADAM_STEP * tensors(workload)
        assert max(r["mem_optim_bytes"] for r in by_rank) <= 2 * pad // n + ADAM_STEP * tensors(workload)


# --- tensor parallel --------------------------------------------------------------------------

@pytest.mark.parametrize("workload, t", [(MLP, 2), (GPT, 4)])
def test_tp_all_reduces_activations_and_splits_weights(res_dir, workload, t):
    batch = 64
    rec = _run(res_dir, strategy="tp", world_size=t, workload=workload, global_batch_size=batch)
    rows = batch * (32 if workload is GPT else 1)  # tokens per step (seq_len 32) or samples
    expected = tp_bytes(workload, rows, t)
    if workload is GPT:  # 4 blocks x (2 forward + 4 backward: q, k, v, up) all-reduces of B x T x d
        assert expected == 4 * 6 * ring(rows * 64 * FP32, t)
    else:  # the row-wise output layer's B x 10 logits; the first layer's input is data
        assert expected == ring(rows * 10 * FP32, 2)
    split = tp_split(workload)
    for r in rec["per_rank"]:
        assert r["comm_intermediate_bytes_per_step"] == expected
        assert r["comm_parameter_bytes_per_step"] == r["comm_data_bytes_per_step"] == 0
        assert r["mem_param_bytes"] == r["mem_grad_bytes"] == psi(workload) - split + split // t
    if workload is GPT:
        assert rec["mem_optim_bytes"] == 2 * rec["mem_param_bytes"] + ADAM_STEP * tensors(GPT)


# --- pipeline: interleaved 1F1B ---------------------------------------------------------------

@pytest.mark.parametrize("workload, pp, m", [(GPT, 2, 4), ({"name": "mlp", "layers": 7}, 4, 4)])
def test_interleaved_1f1b_sends_every_chunk_boundary(res_dir, workload, pp, m):
    v, batch = 2, 32
    rec = _run(res_dir, strategy="pipeline", world_size=pp, workload=workload, schedule="interleaved1f1b",
               virtual_stages=v, micro_batches=m, global_batch_size=batch)
    width = 32 * 64 if workload is GPT else 512  # seq_len x hidden, or the mlp's hidden width
    act = (batch // m) * width * FP32
    chunks = pp * v
    by_rank = ranks(rec)
    for rank, r in by_rank.items():
        held = range(rank, chunks, pp)  # chunk c lives on rank c % pp
        forward = sum(1 for c in held if c < chunks - 1)  # activations to the next chunk
        backward = sum(1 for c in held if c > 0)  # gradients to the previous chunk
        assert r["role"] == "stage " + ",".join(map(str, held))
        assert r["comm_intermediate_bytes_per_step"] == (forward + backward) * m * act
        assert r["comm_parameter_bytes_per_step"] == 0
    assert sum(r["comm_intermediate_bytes_per_step"] for r in by_rank.values()) == 2 * (chunks - 1) * m * act
    assert sum(r["mem_param_bytes"] for r in by_rank.values()) == psi(workload)  # chunks partition the model


# --- hybrids on one DeviceMesh ----------------------------------------------------------------

@pytest.mark.parametrize("dp_mode", ["ddp", "fsdp"])
def test_hybrid_dp_x_tp(res_dir, dp_mode):
    dp, t, batch = 2, 2, 64
    rec = _run(res_dir, strategy="hybrid", world_size=4, dp=dp, tp=t, dp_mode=dp_mode, workload=GPT,
               global_batch_size=batch)
    split = tp_split(GPT)
    local = psi(GPT) - split + split // t  # what one tp rank holds before dp touches it
    for r in rec["per_rank"]:
        # tp traffic on each replica's half of the batch; dp traffic on the tp-local parameters
        assert r["comm_intermediate_bytes_per_step"] == tp_bytes(GPT, batch // dp * 32, t)
        if dp_mode == "ddp":
            assert r["comm_parameter_bytes_per_step"] == ring(local, dp)
            assert r["mem_param_bytes"] == local
        else:  # ZeRO-3 over dp: 2 all-gathers + 1 reduce-scatter of the local shards (no padding here)
            assert r["comm_parameter_bytes_per_step"] == 3 * (dp - 1) * local // dp
            assert r["mem_param_bytes"] == local // dp


def test_hybrid_dp_x_pp_all_reduces_each_stage(res_dir):
    dp, pp, m, batch = 2, 2, 2, 64
    rec = _run(res_dir, strategy="hybrid", world_size=4, dp=dp, pp=pp, micro_batches=m, workload=MLP,
               global_batch_size=batch)
    act = batch // dp // m * 512 * FP32  # one micro-batch of the hidden activation
    stage_bytes = {0: (784 * 512 + 512) * FP32, 1: (512 * 10 + 10) * FP32}
    for r in rec["per_rank"]:
        stage = int(r["role"].split("stage ")[1])
        assert r["comm_parameter_bytes_per_step"] == ring(stage_bytes[stage], dp)
        assert r["comm_intermediate_bytes_per_step"] == m * act  # forward from stage 0, backward from 1
        assert r["mem_param_bytes"] == stage_bytes[stage]


def test_hybrid_tp_x_pp(res_dir):
    t, pp, m, batch = 2, 2, 2, 32
    rec = _run(res_dir, strategy="hybrid", world_size=4, tp=t, pp=pp, micro_batches=m, workload=GPT,
               global_batch_size=batch)
    act = batch // m * 32 * 64 * FP32
    for r in rec["per_rank"]:
        # each stage: its 2 blocks' tp all-reduces on every micro-batch, plus one boundary per micro-batch
        blocks = 2 * 6 * ring(batch // m * 32 * 64 * FP32, t)
        assert r["comm_intermediate_bytes_per_step"] == m * blocks + m * act
        assert r["comm_parameter_bytes_per_step"] == 0
    split = tp_split(GPT)
    assert sum(r["mem_param_bytes"] for r in rec["per_rank"]) == t * (psi(GPT) - split) + split


# --- parameter server -------------------------------------------------------------------------

@pytest.mark.parametrize("workload, n, k, batch", [(MLP, 2, 1, 64), (MLP, 4, 1, 66), (GPT, 4, 2, 64)])
def test_ps_workers_push_and_pull_psi_servers_carry_n_psi_over_k(res_dir, workload, n, k, batch):
    rec = _run(res_dir, strategy="ps", world_size=n, servers=k, workload=workload, global_batch_size=batch)
    total, workers = psi(workload), n - k
    numel = total // FP32
    shard = [(numel // k + (1 if j < numel % k else 0)) * FP32 for j in range(k)]  # earlier shards +1
    for rank, r in ranks(rec).items():
        ops = r["comm_ops"]
        if rank < k:  # server j: receives every worker's push of its shard, sends it back to each
            assert r["role"] == f"server {rank}"
            assert ops["recv/parameter"]["payload_bytes"] == workers * shard[rank]
            assert r["comm_parameter_bytes_per_step"] == workers * shard[rank]
            assert r["mem_param_bytes"] == shard[rank] and r["mem_activation_bytes"] == 0
            assert r["losses"] == [None] * 7
            if workload is GPT:  # the server holds the optimizer state for its shard only
                assert r["mem_optim_bytes"] == 2 * shard[rank] + ADAM_STEP
        else:  # a worker pushes Psi of gradients and pulls Psi of parameters
            assert ops["send/parameter"]["sent_bytes"] == ops["recv/parameter"]["payload_bytes"] == total
            assert r["mem_param_bytes"] == total and r["mem_optim_bytes"] == 0
        assert r["comm_intermediate_bytes_per_step"] == r["comm_data_bytes_per_step"] == 0
    assert rec["comm_parameter_bytes_per_step"] == max(total, workers * max(shard))
    # point-to-point over gloo's sockets: the OS write counter sees the same bytes (RPC would bypass it)
    assert rec["os_write_bytes_per_step"] == pytest.approx(rec["comm_parameter_bytes_per_step"], rel=0.03)


# --- the command line -------------------------------------------------------------------------

def test_cli_runs_a_hybrid_and_refuses_bad_meshes_before_spawning(tmp_path, capsys):
    from parbench.cli import main

    assert main(["run", "--strategy", "hybrid", "--world-size", "4", "--dp", "2", "--tp", "4",
                 "--workload", "transformer", "--no-save"]) == 2
    assert "dp*tp*pp=2*4*1=8 != world_size=4" in capsys.readouterr().err
    assert main(["run", "--strategy", "zero2", "--world-size", "2", "--steps", "2",
                 "--results-dir", str(tmp_path)]) == 0


# --- every strategy at 2 and 4 ranks on both workloads, and a 3-D mesh (slow: 34 runs) ---------

MATRIX = {
    "zero1": {}, "zero2": {}, "fsdp": {}, "tp": {}, "ps": {"servers": 1},
    "pipeline": {"micro_batches": 4, "schedule": "1f1b"},
    "interleaved": {"strategy": "pipeline", "micro_batches": 4, "schedule": "interleaved1f1b", "virtual_stages": 2},
    "hybrid": {},
}


def _matrix_config(name: str, workload: str, n: int) -> dict:
    kw = {"strategy": name, "world_size": n, "workload": {"name": workload}, **MATRIX[name]}
    if name == "ps" and n == 4:
        kw["servers"] = 2  # 2 workers: the default batch of 64 divides
    if name == "pipeline" and workload == "mlp":  # the default mlp has 2 layers: one per stage at most
        kw["workload"]["layers"] = n - 1
    if name == "interleaved":  # p x 2 chunks need as many layers
        kw["workload"]["layers"] = 2 * n if workload == "transformer" else 2 * n - 1
    if name == "hybrid":
        kw.update({"dp": 2, "tp": 2} if n == 4 else {"dp": 1, "tp": 2})
    return kw


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("workload", ["mlp", "transformer"])
@pytest.mark.parametrize("name", list(MATRIX))
def test_every_strategy_runs_at_2_and_4_on_both_workloads(res_dir, name, workload, n):
    kw = _matrix_config(name, workload, n)
    rec = _run(res_dir, **kw)
    assert rec["world_size"] == n and len(rec["per_rank"]) == n


@pytest.mark.slow
@pytest.mark.parametrize("dp_mode", ["ddp", "fsdp"])
def test_hybrid_3d_dp_tp_pp_on_8_ranks(res_dir, dp_mode):
    rec = _run(res_dir, strategy="hybrid", world_size=8, dp=2, tp=2, pp=2, micro_batches=2, dp_mode=dp_mode,
               workload=GPT)
    m, mb = 2, 64 // 2 // 2  # micro-batches; samples per micro-batch per replica
    act = mb * 32 * 64 * FP32
    for r in rec["per_rank"]:
        # 2 blocks per stage x 6 tp all-reduces per micro-batch, plus one boundary per micro-batch
        assert r["comm_intermediate_bytes_per_step"] == m * 2 * 6 * ring(act, 2) + m * act
        if dp_mode == "ddp":  # one flat all-reduce of the stage's tp-local gradients: ring over dp=2 = S
            assert r["comm_parameter_bytes_per_step"] == ring(r["mem_param_bytes"], 2)
        else:  # under a pipeline FSDP gathers per micro-batch forward + once for backward, then reduce-scatters
            assert r["comm_parameter_bytes_per_step"] == (m + 1 + 1) * r["mem_param_bytes"]
    one_replica = 2 * (psi(GPT) - tp_split(GPT)) + tp_split(GPT)  # t=2 copies of the unsplit tensors
    copies = 1 if dp_mode == "fsdp" else 2  # fsdp shards the replica over dp=2; ddp replicates it
    assert sum(r["mem_param_bytes"] for r in rec["per_rank"]) == copies * one_replica
