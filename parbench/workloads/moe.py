"""A GPT-style decoder whose MLP is a mixture of experts (GShard, Lepikhin et al. 2020; Switch
Transformer, Fedus et al. 2021).

Every ``moe_every``-th block replaces its MLP by ``experts`` copies of it and a router: a softmax
over the experts, each token goes to its ``top_k`` most probable ones and its output is the sum of
their outputs weighted by those probabilities (no renormalisation, as in GShard and Switch).

Routing is computed per sequence, so it never depends on how a batch is sharded over ranks:

- capacity: an expert takes at most C = ceil(capacity_factor x seq_len x top_k / experts)
  assignments of one sequence (GShard's expert capacity with one sequence per group). Assignments
  are served first choices first, then by token position; the rest are dropped (the token keeps
  its residual only), deterministically.
- load-balancing loss per sequence: E x sum_e f_e x P_e (Switch eq. 4, extended to top-k: f_e is
  the share of the sequence's top-k assignments routed to e, P_e its mean router probability),
  averaged over the sequences. It is added to the gradient, not to the reported loss (Megatron-LM's
  ``MoEAuxLossAutoScaler`` does the same): the reported loss is the language-model loss alone.

Expert parallelism (``parbench.strategies.expert_parallel``) gives an MoE layer a placement: it
then keeps only its own experts and exchanges tokens with ``all_to_all_single``; without one the
same code runs every expert locally, so the single-process reference and the sharded run share
one forward.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from parbench.config import WorkloadConfig
from parbench.workloads import transformer
from parbench.workloads.base import StagedModel, Workload

if TYPE_CHECKING:
    from parbench.metrics.comm import CommMeter

DISPATCH, COMBINE, COUNTS = "moe_dispatch", "moe_combine", "moe_counts"
"""Labels of the all-to-all traffic: tokens (or their gradients) travelling from a token's rank to
its expert's rank, back from the expert's rank, and the routing counts exchanged before them."""


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where one MoE layer's experts live: ``size`` ranks of ``group`` hold experts/size each."""

    group: dist.ProcessGroup
    rank: int
    """This rank's index in the expert-parallel group."""
    size: int
    meter: "CommMeter | None" = None


def capacity(cfg: WorkloadConfig) -> int:
    """C = ceil(capacity_factor x seq_len x top_k / experts): assignments an expert takes per sequence."""
    return math.ceil(cfg.capacity_factor * cfg.seq_len * cfg.top_k / cfg.experts)


def balanced_choice(batch: int, seq_len: int, top_k: int, experts: int) -> torch.Tensor:
    """[batch*seq_len, top_k] expert indices: token t picks (t*k + j) mod E. With seq_len*k a
    multiple of E every expert receives seq_len*k/E assignments of every sequence."""
    t = torch.arange(seq_len).repeat(batch).unsqueeze(1)
    return (t * top_k + torch.arange(top_k)) % experts


def capacity_mask(choice: torch.Tensor, batch: int, seq_len: int, experts: int, cap: int) -> torch.Tensor:
    """[N, k] bool: which assignments fit their expert's capacity, first choices served first."""
    k = choice.shape[1]
    ordered = choice.view(batch, seq_len, k).transpose(1, 2).reshape(batch, k * seq_len)
    onehot = F.one_hot(ordered, experts)
    position = (onehot.cumsum(1) * onehot).sum(-1) - 1  # place of each assignment in its expert's queue
    return (position < cap).view(batch, k, seq_len).transpose(1, 2).reshape(batch * seq_len, k)


def balance_loss(probs: torch.Tensor, choice: torch.Tensor, batch: int, experts: int) -> torch.Tensor:
    """Mean over sequences of E x sum_e f_e P_e (Switch Transformer, Fedus et al. 2021, eq. 4)."""
    onehot = F.one_hot(choice, experts).sum(1).view(batch, -1, experts).float()  # [B, T, E]
    f = onehot.sum(1) / onehot.sum((1, 2)).unsqueeze(1)
    p = probs.view(batch, -1, experts).mean(1)
    return (experts * (f * p).sum(1)).mean()


class _AttachAux(torch.autograd.Function):
    """Identity on x whose backward also sends gradient ``weight`` into the auxiliary loss."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, aux: torch.Tensor, weight: float) -> torch.Tensor:
        ctx.weight, ctx.aux_shape = weight, aux.shape
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, torch.full(ctx.aux_shape, ctx.weight, dtype=grad.dtype, device=grad.device), None


def all_to_all(x: torch.Tensor, out_rows: list[int], in_rows: list[int], where: Placement, label: str) -> torch.Tensor:
    """all_to_all_single of rows: ``in_rows[r]`` rows go to rank r, ``out_rows[r]`` arrive from it."""
    out = x.new_empty((sum(out_rows), *x.shape[1:]))
    with _counted(where, label):
        dist.all_to_all_single(out, x.contiguous(), out_rows, in_rows, group=where.group)
    return out


def _counted(where: Placement, label: str):
    """Count an exchange as *intermediate* under ``label``: it carries activations (or their
    gradients), or the counts that size them; whatever group the ep ranks share (all of them)."""
    if where.meter is None:
        return contextlib.nullcontext()
    from parbench.metrics.comm import Category  # noqa: PLC0415 - only an expert-parallel run counts

    stack = contextlib.ExitStack()
    stack.enter_context(where.meter.category(Category.INTERMEDIATE))
    stack.enter_context(where.meter.label(label))
    return stack


class _AllToAll(torch.autograd.Function):
    """Differentiable token exchange: the backward sends the gradients back along the same routes."""

    @staticmethod
    def forward(ctx, x, out_rows, in_rows, where, label, back_label):
        ctx.args = (out_rows, in_rows, where, back_label)
        return all_to_all(x, out_rows, in_rows, where, label)

    @staticmethod
    def backward(ctx, grad):
        out_rows, in_rows, where, back_label = ctx.args
        return all_to_all(grad, in_rows, out_rows, where, back_label), None, None, None, None, None


class MoE(nn.Module):
    """Router + experts; ``placement`` (set by expert parallelism) says which experts are local."""

    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.router = nn.Linear(cfg.hidden, cfg.experts, bias=False)
        self.experts = nn.ModuleList(transformer.MLP(cfg) for _ in range(cfg.experts))
        self.placement: Placement | None = None
        self.history: list[dict[str, list[int]]] = []
        """One entry per forward: tokens this rank routed to each expert (``routed``, before the
        capacity) and sent to it (``kept``)."""

    def shard(self, placement: Placement) -> None:
        """Keep only this rank's experts/size experts (contiguous: rank r holds r*E/ep ... )."""
        per = self.cfg.experts // placement.size
        mine = list(self.experts)[placement.rank * per:(placement.rank + 1) * per]
        self.experts = nn.ModuleList(mine)
        self.placement = placement

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg, (b, t, d) = self.cfg, x.shape
        flat = x.reshape(-1, d)
        probs = F.softmax(self.router(flat), dim=-1)
        if cfg.router == "balanced":
            choice = balanced_choice(b, t, cfg.top_k, cfg.experts).to(x.device)
        else:
            choice = probs.topk(cfg.top_k, dim=-1).indices
        keep = capacity_mask(choice, b, t, cfg.experts, capacity(cfg))
        self.history.append({"routed": torch.bincount(choice.flatten(), minlength=cfg.experts).tolist(),
                             "kept": torch.bincount(choice[keep], minlength=cfg.experts).tolist()})
        out = self._mix(flat, choice, probs.gather(1, choice), keep)
        out = _AttachAux.apply(out, balance_loss(probs, choice, b, cfg.experts), cfg.aux_loss_weight)
        return out.view(b, t, d)

    def _mix(self, flat: torch.Tensor, choice: torch.Tensor, gate: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Sum over kept assignments of gate x expert(token), assignments sorted by expert (stable)."""
        token = torch.arange(flat.shape[0], device=flat.device).unsqueeze(1).expand_as(choice)[keep]
        expert, weight = choice[keep], gate[keep]
        order = torch.argsort(expert, stable=True)
        token, expert, weight = token[order], expert[order], weight[order]
        counts = torch.bincount(expert, minlength=self.cfg.experts)
        y = self._experts(flat[token], counts)
        # under autocast the experts' Linears return bf16 while the residual stream stays fp32: sum in its dtype
        return torch.zeros_like(flat).index_add(0, token, (y * weight.unsqueeze(1)).to(flat.dtype))

    def _experts(self, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Rows sorted by expert, ``counts[e]`` of them for expert e -> the experts' outputs, same order."""
        if self.placement is None:
            # every expert runs, on an empty slice if need be: its parameters stay in the graph
            return torch.cat([e(part) for e, part in zip(self.experts, rows.split(counts.tolist()))])
        return self._exchange(rows, counts, self.placement)

    def _exchange(self, rows: torch.Tensor, counts: torch.Tensor, where: Placement) -> torch.Tensor:
        """Dispatch rows to their experts' ranks, run the local experts, combine the outputs back."""
        per = len(self.experts)
        arriving = torch.empty_like(counts)
        with _counted(where, COUNTS):
            # the split sizes of the token exchange: every rank must know what arrives from whom
            dist.all_to_all_single(arriving, counts, group=where.group)
        send = counts.view(where.size, per).sum(1).tolist()
        recv_counts = arriving.view(where.size, per)  # [source rank, local expert]
        recv = recv_counts.sum(1).tolist()
        received = _AllToAll.apply(rows, recv, send, where, DISPATCH, COMBINE)
        outputs = self._local_experts(received, recv_counts)
        return _AllToAll.apply(outputs, send, recv, where, COMBINE, DISPATCH)

    def _local_experts(self, received: torch.Tensor, recv_counts: torch.Tensor) -> torch.Tensor:
        """Rows arrive source-major (then by expert): run each expert on its rows from every source."""
        sizes = recv_counts.flatten().tolist()
        parts = list(received.split(sizes))
        sources, per = recv_counts.shape
        for e, expert in enumerate(self.experts):
            idx = [s * per + e for s in range(sources)]
            out = expert(torch.cat([parts[i] for i in idx]))
            for i, piece in zip(idx, out.split([sizes[i] for i in idx])):
                parts[i] = piece
        return torch.cat(parts)


class MoEBlock(transformer.Block):
    """The transformer block with its MLP replaced by a mixture of experts."""

    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__(cfg)
        self.mlp = MoE(cfg)


def is_moe_block(cfg: WorkloadConfig, index: int) -> bool:
    """Blocks moe_every-1, 2 moe_every-1, ... carry experts (every block when moe_every = 1)."""
    return (index + 1) % cfg.moe_every == 0


def build_model(cfg: WorkloadConfig, seed: int) -> StagedModel:
    torch.manual_seed(seed)
    blocks = [(MoEBlock if is_moe_block(cfg, i) else transformer.Block)(cfg) for i in range(cfg.layers)]
    return StagedModel(transformer.Embed(cfg), blocks, transformer.Head(cfg))


def moe_layers(model: nn.Module) -> list[MoE]:
    return [m for m in model.modules() if isinstance(m, MoE)]


def is_expert_parameter(name: str) -> bool:
    """Parameters of an expert MLP (``...mlp.experts.<i>...``); the router is not one."""
    return ".experts." in name


def routing_history(model: nn.Module) -> list[dict[str, Any]]:
    """Per forward: ``routed`` and ``kept`` tokens per expert, [moe layer][expert], this rank's tokens."""
    layers = moe_layers(model)
    steps = len(layers[0].history) if layers else 0
    return [{key: [layer.history[i][key] for layer in layers] for key in ("routed", "kept")} for i in range(steps)]


def forward_flops_per_sample(cfg: WorkloadConfig) -> int:
    """The transformer's count (Kaplan et al. 2020) on *active* parameters: an MoE block's MLP
    counts top_k experts (each 8 d^2 multiply-adds per token) plus the router (d x E); dropped
    assignments are counted as computed."""
    d, moe = cfg.hidden, cfg.moe_layers
    mlp = (cfg.layers - moe) * 8 * d * d + moe * (cfg.top_k * 8 * d * d + d * cfg.experts)
    return transformer.forward_flops_per_sample(cfg, mlp)


def make(cfg: WorkloadConfig, seed: int) -> Workload:
    return transformer.token_workload(
        cfg, seed, name="moe", build=lambda s: build_model(cfg, s),
        forward_flops_per_sample=forward_flops_per_sample(cfg),
        description=f"GPT-style decoder, {cfg.experts} experts top-{cfg.top_k} every {cfg.moe_every} block(s), "
                    "capacity per sequence, Switch load-balancing loss; synthetic bigram tokens")
