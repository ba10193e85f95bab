"""Hugging Face architectures built from a transformers config with random weights (nothing downloaded).

``hf-llama`` is ``LlamaForCausalLM`` (RMSNorm, rotary positions, SwiGLU MLP of width 4 x hidden,
heads = key/value heads, untied head); ``hf-gpt2`` is ``GPT2LMHeadModel`` (dropout off, head untied
so pipeline stages own disjoint weights). Shapes come from WorkloadConfig: layers, hidden, heads,
seq_len (maximum positions), vocab_size. transformers is an optional extra: ``pip install
'parbench[hf]' torch==2.13.0``; ``HF_HUB_OFFLINE=1`` is set before it is imported.

Each model is re-expressed as a StagedModel (embeddings = pre, decoder layers = units, final norm +
head = post) whose stages take and return plain tensors, so every strategy, pipeline included, runs
it. Attention is ``sdpa`` with no mask, which is causal (``eager`` without a mask is not).

Tensor parallelism uses the library's own plan (``model.tp_plan``), translated to torch's
``parallelize_module`` styles (TRANSLATION); GPT-2 has none (its Conv1D layers store weights
transposed), so it declares tp unsupported.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import torch
from torch import nn

from parbench.config import ConfigError, WorkloadConfig
from parbench.workloads import transformer
from parbench.workloads.base import StagedModel, Workload

MLP_RATIO = 4


def _transformers(name: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a config needs no download: never fetch at run time
    try:
        import transformers
    except ImportError:
        raise ConfigError(f"workload {name!r} needs transformers: pip install 'parbench[hf]' torch==2.13.0") from None
    return transformers


MODEL_MODULES = ("transformers.models.auto.modeling_auto", "transformers.models.llama.modeling_llama",
                 "transformers.models.gpt2.modeling_gpt2")
"""transformers' code that building these models imports (its package resolves names lazily)."""


def import_models() -> None:
    """Import ``MODEL_MODULES`` offline: ~3 s in a process that has already imported torch and the
    strategies (measured on the 2-core machine), then building a model takes ~0.1 s."""
    _transformers("hf-llama")
    for module in MODEL_MODULES:
        importlib.import_module(module)


class HFEmbed(nn.Module):
    """Token (+ learned position, GPT-2) embeddings; ``plan`` maps sub-module -> HF tp style."""

    def __init__(self, tok: nn.Module, pos: nn.Module | None, plan: dict[str, str]) -> None:
        super().__init__()
        self.tok, self.pos, self.plan = tok, pos, plan

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        return x if self.pos is None else x + self.pos(torch.arange(idx.shape[1], device=idx.device))


class HFUnit(nn.Module):
    """One decoder layer; computes its rotary position embeddings itself so a stage needs only x."""

    def __init__(self, layer: nn.Module, rotary: nn.Module | None, plan: dict[str, str]) -> None:
        super().__init__()
        self.layer, self.rotary, self.plan = layer, rotary, plan

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {"use_cache": False}
        if self.rotary is not None:
            pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
            kwargs.update(position_ids=pos, position_embeddings=self.rotary(x, pos))
        out = self.layer(x, **kwargs)
        return out[0] if isinstance(out, tuple) else out  # a stage must return a plain tensor


class HFHead(nn.Module):
    def __init__(self, norm: nn.Module, head: nn.Module, plan: dict[str, str]) -> None:
        super().__init__()
        self.norm, self.head, self.plan = norm, head, plan

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x))


def _sub_plan(plan: dict[str, str], prefix: str) -> dict[str, str]:
    """Entries of HF's fully prefixed plan under ``prefix`` (``*`` = any layer index), prefix removed."""
    return {k[len(prefix):]: v for k, v in plan.items() if k.startswith(prefix)}


def llama_model(cfg: WorkloadConfig, seed: int) -> StagedModel:
    tf = _transformers("hf-llama")
    hf_cfg = tf.LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, intermediate_size=MLP_RATIO * cfg.hidden,
        num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, num_key_value_heads=cfg.heads,
        max_position_embeddings=cfg.seq_len, tie_word_embeddings=False, use_cache=False)
    torch.manual_seed(seed)
    m = tf.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="sdpa", dtype=torch.float32)
    plan = dict(m.tp_plan or {})
    embed_plan = {"tok": plan["model.embed_tokens"]} if "model.embed_tokens" in plan else {}
    pre = HFEmbed(m.model.embed_tokens, None, embed_plan)
    units = [HFUnit(layer, m.model.rotary_emb, _sub_plan(plan, "model.layers.*.")) for layer in m.model.layers]
    post = HFHead(m.model.norm, m.lm_head, {"head": plan["lm_head"]} if "lm_head" in plan else {})
    return StagedModel(pre, units, post)


def gpt2_model(cfg: WorkloadConfig, seed: int) -> StagedModel:
    tf = _transformers("hf-gpt2")
    hf_cfg = tf.GPT2Config(
        vocab_size=cfg.vocab_size, n_embd=cfg.hidden, n_layer=cfg.layers, n_head=cfg.heads,
        n_positions=cfg.seq_len, bos_token_id=0, eos_token_id=0, tie_word_embeddings=False,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    torch.manual_seed(seed)
    m = tf.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="sdpa", dtype=torch.float32)
    t = m.transformer
    return StagedModel(HFEmbed(t.wte, t.wpe, {}), [HFUnit(block, None, {}) for block in t.h],
                       HFHead(t.ln_f, m.lm_head, {}))


def _style(style: str):
    """HF tp style -> torch ParallelStyle (measured: loss identical to tp=1 at tp=2)."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    translation = {
        "colwise": ColwiseParallel,
        "rowwise": RowwiseParallel,
        "colwise_gather_output": lambda: ColwiseParallel(output_layouts=Replicate()),
        "embedding_rowwise": lambda: RowwiseParallel(input_layouts=Replicate()),
    }
    if style not in translation:
        raise ValueError(f"transformers tp style {style!r} has no translation; known: {', '.join(translation)}")
    return translation[style]()


def tp_plan(model: StagedModel) -> dict:
    """{module path: ParallelStyle} from the plan each wrapper carries; works on a pipeline slice too."""
    plan = {}
    for prefix, module in (("pre.", model.pre), ("post.", model.post)):
        for sub, style in getattr(module, "plan", {}).items():
            plan[prefix + sub] = _style(style)
    for i, unit in enumerate(model.units):
        for sub, style in unit.plan.items():
            plan[f"units.{i}.layer.{sub}"] = _style(style)
    return plan


def _make(cfg: WorkloadConfig, seed: int, *, name: str, build, plan, mlp_matrices: int, what: str) -> Workload:
    """The transformer's FLOP count (Kaplan et al. 2020) with ``mlp_matrices`` MLP matrices of 4 d^2."""
    _transformers(name)  # fail here, in the parent's check, when the extra is missing
    flops = transformer.forward_flops_per_sample(cfg, cfg.layers * mlp_matrices * MLP_RATIO * cfg.hidden ** 2)
    return transformer.token_workload(cfg, seed, name=name, build=lambda s: build(cfg, s), tp_plan=plan,
                                      forward_flops_per_sample=flops, description=what)


def make_llama(cfg: WorkloadConfig, seed: int) -> Workload:
    return _make(cfg, seed, name="hf-llama", build=llama_model, plan=tp_plan, mlp_matrices=3,
                 what="transformers LlamaForCausalLM from a config, random weights; tp from model.tp_plan")


def make_gpt2(cfg: WorkloadConfig, seed: int) -> Workload:
    return _make(cfg, seed, name="hf-gpt2", build=gpt2_model, plan=None, mlp_matrices=2,
                 what="transformers GPT2LMHeadModel from a config, random weights; no tp plan (Conv1D)")
