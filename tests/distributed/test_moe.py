"""Expert parallelism in real processes (gloo, CPU): losses against the single-process reference,
all-to-all bytes against the token counts the routers produced and against the closed form for
uniform routing, gradient bytes against the ring formula, and expert memory against the shapes."""

from __future__ import annotations

import math
import re

import pytest

from parbench.config import ConfigError, RunConfig
from tests.references import run

FP32, INT64 = 4, 8
BASE = {"name": "moe", "layers": 2, "hidden": 32, "heads": 2, "seq_len": 16, "vocab_size": 64}


def _run(res_dir, **kw) -> dict:
    kw.setdefault("steps", 2)
    kw.setdefault("global_batch_size", 8)
    rec = run(RunConfig(**kw), results_dir=res_dir)
    assert rec["status"] == "ok", rec["error"]
    assert rec["loss_max_abs_diff_vs_reference"] < 1e-5
    return rec


def expert_bytes(hidden: int) -> int:
    """One expert MLP: hidden -> 4 hidden -> hidden with biases."""
    return (hidden * 4 * hidden + 4 * hidden + 4 * hidden * hidden + hidden) * FP32


def dense_bytes(w: dict, moe_layers: int) -> int:
    """Every parameter but the experts: embeddings, attention, norms, routers, dense MLPs, head."""
    d, v, t, L = w["hidden"], w["vocab_size"], w["seq_len"], w["layers"]
    block = 4 * (d * d + d) + 2 * 2 * d  # q, k, v, proj + two layer norms
    head = 2 * d + d * v
    return (v * d + t * d + L * block + moe_layers * d * w["experts"]
            + (L - moe_layers) * expert_bytes(d) // FP32 + head) * FP32


def ring(size: int, n: int) -> int:
    return 2 * (n - 1) * size // n


def test_ep_learned_router_bytes_follow_the_token_counts(tmp_path):
    """2 ranks, experts 4, capacity 1.0: the learned router drops some assignments, and the
    all-to-all bytes equal the kept tokens each rank sends to the other rank's experts."""
    w = {**BASE, "experts": 4, "top_k": 2, "capacity_factor": 1.0}
    rec = _run(tmp_path, strategy="ep", world_size=2, workload=w)
    probe, d, local = rec["warmup_steps"], w["hidden"], 2
    sent = {}
    for r in rec["per_rank"]:
        kept = r["moe_routing"][probe]["kept"]  # [layer][expert], this rank's tokens
        sent[r["rank"]] = [[sum(n for e, n in enumerate(layer) if e // local == dest) for dest in range(2)]
                           for layer in kept]  # [layer][destination rank]
    for r in rec["per_rank"]:
        me, other = r["rank"], 1 - r["rank"]
        to_experts = sum(layer[other] for layer in sent[me])  # my tokens to the other rank's experts
        from_experts = sum(layer[me] for layer in sent[other])  # the other's tokens, sent back
        labels = r["comm_bytes_by_label"]
        # forward dispatch + the backward of the combine travel the same way: x2
        assert labels["moe_dispatch"] == 2 * to_experts * d * FP32
        assert labels["moe_combine"] == 2 * from_experts * d * FP32
        assert labels["moe_counts"] == 2 * (w["experts"] // 2) * INT64  # one exchange per layer, half leaves
        assert r["comm_intermediate_bytes_per_step"] == sum(labels[k] for k in ("moe_dispatch", "moe_combine", "moe_counts"))
        assert r["comm_parameter_bytes_per_step"] == ring(dense_bytes(w, 2), 2)
        assert r["mem_expert_param_bytes"] == 2 * local * expert_bytes(d)
        assert r["mem_param_bytes"] - r["mem_expert_param_bytes"] == dense_bytes(w, 2)
        assert r["mem_expert_optim_bytes"] == 2 * r["mem_expert_param_bytes"] + 2 * local * 4 * FP32  # Adam m, v + steps
    assert 0 < rec["moe_dropped_fraction"] < 1
    assert rec["moe_load_imbalance_median"] >= 1
    tokens = rec["global_batch_size"] * w["seq_len"] * w["top_k"]
    assert all(sum(layer) == tokens for step in rec["moe_routed_tokens_per_expert_per_step"] for layer in step)
    assert rec["comm_moe_dispatch_bytes_per_step"] == max(r["comm_bytes_by_label"]["moe_dispatch"] for r in rec["per_rank"])


def test_ep_inside_dp_with_uniform_routing_matches_the_closed_form(tmp_path):
    """4 ranks, ep=2 (two expert-data-parallel replicas), every 2nd block MoE, balanced router:
    each rank sends (ep-1)/ep x tokens x top_k x hidden x 4 bytes per layer and direction."""
    w = {**BASE, "layers": 4, "moe_every": 2, "experts": 4, "top_k": 2, "router": "balanced"}
    rec = _run(tmp_path, strategy="ep", world_size=4, ep=2, workload=w)
    ep, moe_layers, d = 2, 2, w["hidden"]
    tokens = rec["global_batch_size"] // 4 * w["seq_len"]  # this rank's tokens
    one_way = (ep - 1) * tokens * w["top_k"] * d * FP32 // ep
    expert_local = moe_layers * (w["experts"] // ep) * expert_bytes(d)
    for r in rec["per_rank"]:
        labels = r["comm_bytes_by_label"]
        assert labels["moe_dispatch"] == labels["moe_combine"] == 2 * moe_layers * one_way
        assert labels["moe_expert_grad"] == ring(expert_local, 4 // ep)
        assert labels["moe_non_expert_grad"] == ring(dense_bytes(w, moe_layers), 4)
        assert r["mem_expert_param_bytes"] == expert_local
    assert rec["moe_dropped_fraction"] == 0
    assert rec["moe_load_imbalance_per_step"] == [1.0] * len(rec["losses"])
    assert rec["moe_tokens_per_expert_per_rank"] == [[moe_layers * tokens * w["top_k"] // w["experts"]] * 4] * 4


@pytest.mark.slow
def test_ep_inside_a_hybrid_pipeline_matches_single_and_the_closed_form(tmp_path):
    """hybrid dp2 x pp2 with ep=2 inside dp: each stage's MoE block exchanges its replica's tokens
    (two micro-batches of 2 samples) with the other replica of the same stage."""
    w = {**BASE, "experts": 4, "top_k": 2, "router": "balanced"}
    rec = _run(tmp_path, strategy="hybrid", world_size=4, dp=2, tp=1, pp=2, ep=2, micro_batches=2, workload=w)
    tokens = rec["global_batch_size"] // 2 * w["seq_len"]  # per replica, over its micro-batches
    one_way = tokens * w["top_k"] * w["hidden"] * FP32 // 2
    for r in rec["per_rank"]:
        labels = r["comm_bytes_by_label"]
        assert labels["moe_dispatch"] == labels["moe_combine"] == 2 * one_way  # one MoE block per stage
        assert labels["moe_counts"] == 2 * (w["experts"] // 2) * INT64  # once per micro-batch
        assert "moe_expert_grad" not in labels  # dp / ep = 1: nobody else holds these experts


@pytest.mark.parametrize("kw, message", [
    ({"workload": {**BASE, "top_k": 5}}, "top_k=5 > experts=4"),
    ({"ep": 3}, "ep=3 does not divide dp=2"),
    ({"workload": {**BASE, "experts": 6}, "ep": 4, "world_size": 4}, "ep=4 does not divide experts=6"),
    ({"workload": {"name": "transformer"}}, "needs workload=moe"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "tp": 2, "pp": 1, "ep": 2}, "hybrid ep=2 composes with dp"),
    ({"strategy": "hybrid", "world_size": 4, "dp": 2, "tp": 1, "pp": 2, "ep": 4}, "ep=4 does not divide dp=2"),
])
def test_bad_shapes_raise_config_errors(kw, message):
    kw = {"strategy": "ep", "world_size": 2, "workload": BASE, **kw}
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunConfig(**kw)


def test_ep_degree_needs_the_ep_strategy():
    with pytest.raises(ConfigError, match="ep=2 applies to strategy=ep or hybrid only"):
        RunConfig(strategy="ddp", world_size=2, ep=2, workload=BASE)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "zero1"])
def test_moe_under_dense_strategies_matches_single(tmp_path, strategy):
    w = {**BASE, "experts": 4, "top_k": 2, "capacity_factor": 1.0}
    rec = _run(tmp_path, strategy=strategy, world_size=2, workload=w)
    assert rec["moe_dropped_fraction"] > 0
    assert rec["mem_expert_param_bytes"] is not None


@pytest.mark.slow
def test_ep_four_ranks_learned_top1(tmp_path):
    w = {**BASE, "experts": 8, "top_k": 1, "capacity_factor": 1.5}
    rec = _run(tmp_path, strategy="ep", world_size=4, workload=w)
    for r in rec["per_rank"]:
        assert r["mem_expert_param_bytes"] == 2 * 2 * expert_bytes(w["hidden"])
    assert math.isclose(sum(rec["moe_dropped_fraction_per_step"]) / len(rec["losses"]),
                        rec["moe_dropped_fraction"], rel_tol=1e-9)


@pytest.mark.slow
def test_shipped_moe_sweep_plans_ep_ddp_and_fsdp_at_2_and_4_ranks():
    from importlib import resources
    from pathlib import Path

    from parbench.sweep.grid import plan
    from parbench.sweep.spec import load_spec

    the_plan = plan(load_spec(Path(str(resources.files("parbench.sweeps").joinpath("moe.toml")))))
    points = {(p.config.strategy.value, p.config.world_size, p.config.ep) for p in the_plan.points}
    assert points == {("single", 1, 1), ("ep", 2, 2), ("ep", 4, 4), ("ep", 4, 2),
                      ("ddp", 2, 1), ("ddp", 4, 1), ("fsdp", 2, 1), ("fsdp", 4, 1)}
    assert not the_plan.skipped


def _gradients_rank(kw: dict, info) -> dict:
    """One rank of the gradient check: forward, backward and the gradient averaging of ep on this
    rank's shard of the batch; {parameter name in the full model: gradient}."""
    from parbench.metrics.comm import CommMeter
    from parbench.strategies.base import RankContext
    from parbench.strategies.expert_parallel import sharded_model
    from parbench.workloads import make

    cfg, rank, world = RunConfig(**kw), info.rank, info.world_size
    workload = make(cfg.workload, cfg.seed)
    ctx = RankContext(config=cfg, rank=rank, world_size=world, device=info.device, workload=workload,
                      meter=CommMeter(rank=rank))
    mesh, model, sync = sharded_model(ctx)
    n = cfg.global_batch_size // world
    x, y = workload.rows(0, cfg.global_batch_size, rank * n, (rank + 1) * n)
    workload.loss(model(x), y).backward()
    sync()
    first = mesh.get_local_rank("ep") * (cfg.workload.experts // cfg.ep)
    grads = {}
    for name, p in model.named_parameters():
        if ".experts." in name:  # local index -> the expert's index in the full model
            head, _, tail = name.partition(".experts.")
            local, _, rest = tail.partition(".")
            name = f"{head}.experts.{first + int(local)}.{rest}"
        grads[name] = p.grad
    return grads


@pytest.mark.slow
@pytest.mark.parametrize("world, ep", [(2, 2), (4, 2)])
def test_ep_gradients_equal_the_single_process_gradients(tmp_path, world, ep):
    """Adam's update hardly depends on a gradient's scale, so equal losses cannot catch a wrongly
    averaged gradient: compare every gradient after ep's averaging with the full model's on the
    whole batch (learned router, capacity 1.0: drops included)."""
    import torch

    from parbench.distributed import spawn
    from parbench.workloads import make

    w = {**BASE, "experts": 4, "top_k": 2, "capacity_factor": 1.0}
    kw = dict(strategy="ep", world_size=world, ep=ep, workload=w, global_batch_size=8)
    outcome = spawn(world, _gradients_rank, kw, timeout_s=300)
    assert outcome.status == "ok", outcome.error
    cfg = RunConfig(**kw)
    workload = make(cfg.workload, cfg.seed)
    model = workload.build(cfg.seed)
    x, y = workload.rows(0, cfg.global_batch_size, 0, cfg.global_batch_size)
    workload.loss(model(x), y).backward()
    reference = dict(model.named_parameters())
    for rank, grads in enumerate(outcome.results):
        assert grads, rank
        for name, g in grads.items():
            torch.testing.assert_close(g, reference[name].grad, rtol=1e-5, atol=1e-6, msg=f"rank {rank} {name}")


def test_an_moe_layers_saved_activations_are_what_the_simulator_keeps(tmp_path):
    """One process, balanced routing, nothing dropped: the saved-tensor peak of the moe workload less that of the
    transformer of the same shapes equals the simulator's MoE layers less its dense ones, plus what the simulator
    leaves out, the routing's integers: per kept assignment its expert, its token's row and its place in the sort
    by expert (int64 each) and the capacity mask (1 byte), per layer the balance loss's B x E float32 shares."""
    from parbench.sim import PRESETS
    from parbench.sim.layout import layout_from_run
    from parbench.sim.model import model_spec
    from parbench.sim.predict import predict

    w = {**BASE, "experts": 4, "top_k": 2, "capacity_factor": 1.25, "router": "balanced"}
    dense = {k: v for k, v in w.items() if k in BASE}
    measured, predicted = {}, {}
    for name, workload in (("moe", w), ("dense", {**dense, "name": "transformer"})):
        cfg = RunConfig(strategy="single", world_size=1, global_batch_size=8, steps=1, workload=workload)
        rec = run(cfg, results_dir=tmp_path)
        assert rec["status"] == "ok", rec["error"]
        measured[name] = rec["mem_activation_bytes"]
        predicted[name] = predict(model_spec(cfg.workload), layout_from_run(cfg), PRESETS["a100-80gb"]).memory.activation_bytes
    layers, batch, tokens, k, experts = w["layers"], 8, 8 * w["seq_len"], w["top_k"], w["experts"]
    routing = layers * (tokens * k * (3 * INT64 + 1) + batch * experts * FP32)
    assert measured["moe"] - measured["dense"] == predicted["moe"] - predicted["dense"] + routing
