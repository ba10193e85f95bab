"""A GPT-style decoder (nanoGPT's shape): token + position embeddings, pre-LN blocks, untied head.

Attention uses separate q/k/v projections so tensor parallelism can split heads column-wise,
and reshapes with ``view(B, T, -1, head_dim)`` so the local head count follows the shard.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from parbench.config import WorkloadConfig
from parbench.workloads.base import Batch, StagedModel, Workload, sample_rows, step_generator


class Embed(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq_len, cfg.hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class Attention(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.head_dim = cfg.hidden // cfg.heads
        self.q = nn.Linear(cfg.hidden, cfg.hidden)
        self.k = nn.Linear(cfg.hidden, cfg.hidden)
        self.v = nn.Linear(cfg.hidden, cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        # -1: under tensor parallelism each rank holds heads/tp heads of head_dim each
        q, k, v = (m(x).view(b, t, -1, self.head_dim).transpose(1, 2) for m in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.down = nn.Linear(4 * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Head(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


def build_model(cfg: WorkloadConfig, seed: int) -> StagedModel:
    torch.manual_seed(seed)
    return StagedModel(Embed(cfg), [Block(cfg) for _ in range(cfg.layers)], Head(cfg))


def forward_flops_per_sample(cfg: WorkloadConfig, mlp_params: int | None = None) -> int:
    """Per token 2 x (matmul parameters) + attention 2 x 2 x T x d per layer (Kaplan et al. 2020, table 1).
    ``mlp_params``: the MLP matmul parameters of all layers (default: up and down, 2 x 4 d^2 per layer)."""
    d, t, L = cfg.hidden, cfg.seq_len, cfg.layers
    matmul_params = L * 4 * d * d + (L * 2 * 4 * d * d if mlp_params is None else mlp_params) + d * cfg.vocab_size
    attention = L * 2 * t * d  # QK^T and AV, causal mask ignored as in the source
    return t * (2 * matmul_params + 2 * attention)


def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def tp_plan(model: StagedModel) -> dict:
    """Megatron-LM (Shoeybi et al. 2019): q/k/v and mlp.up column-wise, attn.proj and mlp.down row-wise."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = {}
    for i in range(len(model.units)):
        for name in ("attn.q", "attn.k", "attn.v", "mlp.up"):
            plan[f"units.{i}.{name}"] = ColwiseParallel()
        for name in ("attn.proj", "mlp.down"):
            plan[f"units.{i}.{name}"] = RowwiseParallel()
    return plan


def bigram_table(cfg: WorkloadConfig, seed: int) -> torch.Tensor:
    """The fixed random bigram table [vocab] the synthetic token sequences follow."""
    return torch.randint(cfg.vocab_size, (cfg.vocab_size,), generator=step_generator(seed, -1, "bigram"))


def synthetic_rows(cfg: WorkloadConfig, table: torch.Tensor, seed: int, step: int, lo: int, hi: int) -> Batch:
    """Samples lo..hi-1 of a step's batch (``sample_rows``): token sequences following ``table`` (built
    once per workload), a tenth of the tokens perturbed; targets are the inputs shifted by one."""
    def draw(g: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randint(cfg.vocab_size, (n, 1), generator=g), torch.rand(n, cfg.seq_len, generator=g)

    start, uniform = sample_rows(seed, step, lo, hi, "tokens", draw)
    noise = uniform < 0.1
    seq = [start]
    for i in range(cfg.seq_len):
        nxt = table[seq[-1]]
        seq.append(torch.where(noise[:, i:i + 1], (nxt + 1) % cfg.vocab_size, nxt))
    tokens = torch.cat(seq, dim=1)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def synthetic_slicer(cfg: WorkloadConfig, seed: int):
    """``batch_slice`` of the token workloads: (step, global_batch_size, lo, hi) -> samples lo..hi-1."""
    table = bigram_table(cfg, seed)
    return lambda step, size, lo, hi: synthetic_rows(cfg, table, seed, step, lo, hi)


def token_workload(cfg: WorkloadConfig, seed: int, **fields) -> Workload:
    """A decoder on the synthetic bigram tokens: AdamW, cross-entropy on the inputs shifted by one
    (the transformer, moe and hf-* workloads); ``fields``: its name, model, FLOPs, tp plan, description."""
    return Workload(batch_slice=synthetic_slicer(cfg, seed), loss=loss, tokens_per_sample=cfg.seq_len,
                    optimizer=lambda params, lr: torch.optim.AdamW(params, lr=lr), **fields)


def make(cfg: WorkloadConfig, seed: int) -> Workload:
    return token_workload(cfg, seed, name="transformer", build=lambda s: build_model(cfg, s),
                          forward_flops_per_sample=forward_flops_per_sample(cfg), tp_plan=tp_plan,
                          description="GPT-style decoder (nanoGPT shape), Megatron tp plan, synthetic bigram tokens")
