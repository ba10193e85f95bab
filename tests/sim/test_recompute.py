"""Full activation recomputation: what a checkpoint replays in backward, measured on torch itself, and what the
model charges for it (``Layout.recompute_early_stop``, ``parbench.sim.timing.replay_skipped_s``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

from parbench.config import RunConfig, WorkloadConfig
from parbench.sim import PRECISIONS, PRESETS, Layout, Recompute, layout_from_run, model_spec, predict
from parbench.sim.architecture import Architecture
from parbench.sim.model import architecture_spec
from parbench.sim.models import MODELS
from parbench.config import Strategy

A100 = PRESETS["a100-80gb"]


class _Products(TorchDispatchMode):
    """Records every matrix product and attention kernel torch runs, with its operands' shapes."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, tuple]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in ("mm", "addmm", "bmm") or name.startswith("_scaled_dot_product"):
            self.calls.append((name, tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))


class _LlamaBlock(nn.Module):
    """RMSNorm, q/k/v/o projections, causal attention, SwiGLU MLP, two residual adds (d 64, f 176, 4 heads)."""

    def __init__(self, d: int = 64, f: int = 176, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3, self.w2 = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False), nn.Linear(f, d, bias=False)
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        y = self.n1(x)
        q, k, v = (w(y).view(b, t, self.heads, d // self.heads).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.wo(a)
        y = self.n2(x)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


def _replayed(early_stop: bool | None) -> tuple[list, list]:
    """(forward calls, calls backward replays beyond a plain backward's) of one block: None = no checkpoint."""
    torch.manual_seed(0)
    block, x = _LlamaBlock(), torch.randn(2, 16, 64, requires_grad=True)
    plain = _Products()
    with plain:
        block(x).sum().backward()
    with _Products() as fwd:
        with set_checkpoint_early_stop(bool(early_stop)):
            out = checkpoint(block, x, use_reentrant=False)
    with _Products() as bwd:
        out.sum().backward()
    plain_backward = plain.calls[len(fwd.calls):]
    extra = list(bwd.calls)
    for call in plain_backward:
        extra.remove(call)
    return fwd.calls, extra


def test_torchs_non_reentrant_checkpoint_replays_every_product_but_the_blocks_last():
    """torch's default (early stop) replays 7 of the block's 8 forward products: not the MLP's output projection
    (t x f by f x d), whose input is saved before its kernel runs. Without early stop it replays all 8."""
    forward, early = _replayed(True)
    _, full = _replayed(False)
    assert len(forward) == 8 and sorted(full) == sorted(forward)
    assert len(early) == 7
    [skipped] = [c for c in forward if c not in early]
    assert skipped == ("mm", ((32, 176), (176, 64)))


def _llama(layers: int = 4) -> Architecture:
    return replace(MODELS["llama2-7b"].arch, layers=layers, seq_len=2048)


def _layout(**kw) -> Layout:
    return Layout(strategy=Strategy.HYBRID, global_batch_size=2, micro_batches=2, precision=PRECISIONS["bf16"],
                  attention="flash", recompute=Recompute.FULL, **kw)


def test_the_early_stop_takes_each_layers_output_projection_out_of_the_recompute():
    """The recompute drops, per layer and micro-batch, the down projection's time as the GEMM formula gives it:
    overhead + max(2 t f d / (peak x efficiency), bytes / bandwidth), t = 2048 tokens, f 11008, d 4096."""
    arch = _llama()
    spec = architecture_spec(arch)
    replay, stop = (predict(spec, _layout(recompute_early_stop=s), A100).compute_parts_s["recompute"] for s in (False, True))
    t, f, d = arch.seq_len, arch.ffn, arch.hidden
    down = A100.gemm_overhead_s + max(2 * t * f * d / (A100.peak_flops * A100.gemm_efficiency),
                                      (t * f + f * d + t * d) * 2 / A100.memory_bandwidth_bytes_per_s)
    assert replay - stop == pytest.approx(arch.layers * 2 * down)  # 2 micro-batches of 1
    # 22% of a Llama 2 7B layer's Linear FLOPs (d f of 4 d^2 + 3 d f); the attention core runs beside them
    assert 0.15 < (replay - stop) / replay < 0.22


def test_an_early_stop_checkpoint_every_other_layer_drops_half_as_much():
    spec = architecture_spec(_llama())
    parts = {(s, k): predict(spec, _layout(recompute_early_stop=s, recompute_every=k), A100).compute_parts_s["recompute"]
             for s in (False, True) for k in (1, 2)}
    assert parts[False, 2] == pytest.approx(parts[False, 1] / 2)
    assert parts[False, 2] - parts[True, 2] == pytest.approx((parts[False, 1] - parts[True, 1]) / 2)


def test_an_moe_blocks_replay_runs_to_its_end():
    """Its last operator weighs the experts' outputs by the router's probabilities and saves both."""
    arch = replace(MODELS["qwen3-30b-a3b"].arch, layers=2, seq_len=1024)
    spec = architecture_spec(arch)
    replay, stop = (predict(spec, _layout(recompute_early_stop=s), PRESETS["h100-sxm"]).compute_parts_s["recompute"]
                    for s in (False, True))
    assert replay == stop > 0


def test_tensor_parallel_replays_repeat_the_forward_all_reduces_but_the_skipped_projections():
    """2 blocks x (2 forward all-reduces (proj, down) + 4 backward), plus the replay's 2 per checkpointed block,
    1 where the replay stops before the down projection, B x T x d x 4 bytes each."""
    cfg = RunConfig(strategy="tp", world_size=2, global_batch_size=4, workload=WorkloadConfig(name="transformer", layers=2))
    spec, base = model_spec(cfg.workload), layout_from_run(cfg)
    size = 4 * 32 * 64 * 4

    def moved(**kw):
        return predict(spec, replace(base, **kw), A100).comm_bytes["intermediate"]

    assert moved() == 2 * 6 * size
    assert moved(recompute=Recompute.FULL) == 2 * 8 * size
    assert moved(recompute=Recompute.FULL, recompute_early_stop=True) == 2 * 7 * size
    assert moved(recompute=Recompute.FULL, recompute_every=2) == (2 * 6 + 2) * size


def test_torch_compiles_a_checkpointed_block_into_a_backward_that_replays_all_but_its_last_gemm():
    """torch.compile's partitioner keeps in the backward graph only the replayed nodes the backward reads: 6 of
    the forward's 7 Linear products (the block's backward alone has 14). torchtitan's compiled rows run so."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    class Checkpointed(nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)

    def products(module) -> dict[str, int]:
        counts = {}

        def compiler(tag):
            def compile_graph(gm, _inputs):
                counts[tag] = sum(n.op == "call_function" and "mm" in str(n.target) for n in gm.graph.nodes)
                return gm.forward
            return compile_graph

        torch._dynamo.reset()
        backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                               partition_fn=min_cut_rematerialization_partition)
        torch.manual_seed(0)
        torch.compile(module, backend=backend)(torch.randn(2, 16, 64, requires_grad=True)).sum().backward()
        return counts

    torch.manual_seed(0)
    block = _LlamaBlock()
    plain, checkpointed = products(block), products(Checkpointed(block))
    assert plain == {"forward": 7, "backward": 14}
    assert checkpointed == {"forward": 7, "backward": 14 + 6}


def test_under_sequence_parallelism_the_replay_still_gathers_the_mlps_input():
    """Per checkpointed block the early-stopping replay runs the attention's and the MLP's input all-gathers
    and the attention output's reduce-scatter, not the output projection's reduce-scatter."""
    cfg = RunConfig(strategy="tp", world_size=2, global_batch_size=4, workload=WorkloadConfig(name="transformer", layers=2))
    spec = model_spec(cfg.workload)
    base = replace(layout_from_run(cfg), sequence_parallel=True)

    def forward_counts(**kw) -> dict[str, int]:
        from parbench.sim.comm import rank_ops
        ops = [o for o in rank_ops(spec, replace(base, **kw))["stage0"] if o.group == "tp" and o.phase == "forward"]
        return {k: sum(o.count for o in ops if o.kind == k) for k in ("all_gather", "reduce_scatter")}

    assert forward_counts() == {"all_gather": 2 * 2, "reduce_scatter": 2 * 2}
    assert forward_counts(recompute=Recompute.FULL) == {"all_gather": 2 * 4, "reduce_scatter": 2 * 4}
    assert forward_counts(recompute=Recompute.FULL, recompute_early_stop=True) == {"all_gather": 2 * 4,
                                                                                   "reduce_scatter": 2 * 3}
