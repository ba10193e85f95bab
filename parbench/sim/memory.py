"""Memory per rank: parameters, gradients, optimizer state (ZeRO, Rajbhandari et al. SC 2020) and
activations by schedule (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", 2022, sec. 4: s*b*h*(34 + 5*a*s/h) bytes per layer with 2-byte activations)."""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import Schedule
from parbench.sim.comm import fsdp_group_numels, stage_local_numels, zero1_max_shard
from parbench.sim.layout import Layout, Recompute
from parbench.sim.model import ModelSpec
from parbench.sim.stages import Stage

STEP_TENSOR_BYTES = 4  # torch AdamW keeps a float32 ``step`` tensor per parameter


@dataclass(frozen=True)
class Memory:
    param_bytes: int
    grad_bytes: int
    optim_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.param_bytes + self.grad_bytes + self.optim_bytes + self.activation_bytes


def state_numels(model: ModelSpec, layout: Layout, stage: Stage) -> tuple[int, int, int, int]:
    """(params, grads, optimizer-state elements, optimizer tensors) one rank of ``stage`` holds (worst rank)."""
    tp, n, key = layout.tp, layout.dp, (model, layout.pp, layout.v, layout.tp)
    local = stage_local_numels(*key)[stage.rank]
    full = sum(local)
    if layout.fsdp2 and layout.zero >= 2:
        shard = sum(fsdp_group_numels(*key, n, stage.rank, True)) // n  # rank 0 holds the full chunks
        return shard, shard, shard, len(local)
    sharded = -(-full // n)
    if layout.zero == 1 and layout.fsdp2:
        own, count = zero1_max_shard(*key, n, stage.rank)  # torch's ZeroRedundancyOptimizer
        return full, full, own, count
    params = sharded if layout.zero >= 3 else full
    grads = sharded if layout.zero >= 2 else full
    optim = sharded if layout.zero >= 1 else full
    return params, grads, optim, -(-len(local) // n) if layout.zero >= 1 else len(local)


def in_flight_micro_batches(layout: Layout, stage_rank: int) -> float:
    """Micro-batches whose activations a stage holds at its peak: GPipe m; 1F1B min(p - s, m)
    (Narayanan et al. 2021); interleaved p(1 + (p-1)/(p v)) on the first stage (Korthikanti et al. 2022)."""
    p, m = layout.pp, layout.micro_batches
    if layout.schedule is Schedule.GPIPE:
        return m
    if layout.schedule is Schedule.INTERLEAVED_1F1B and p > 1:
        return min(m, (p - stage_rank) * (1 + (p - 1) / (p * layout.v)))
    return min(p - stage_rank, m)


def activation_bytes_per_layer(model: ModelSpec, layout: Layout) -> float:
    """Korthikanti et al. 2022, eq. 1-3 and table 2: per transformer layer and micro-batch,
    none: sbh(10 + 24/t + 5as/(ht)); with sequence parallelism sbh/t (34 + 5as/h); selective drops
    the 5as/h attention term; full keeps only the layer input 2sbh (/t with SP). Scaled for the dtype."""
    s, b, h, a, t = model.seq_len, layout.micro_batch_size, model.hidden, model.heads, layout.tp
    scale = layout.precision.activation_bytes / 2
    if model.name != "transformer":
        return scale * 2 * b * 3 * h * 2  # mlp: input, pre-activation and output of each Linear
    sbh = s * b * h
    if layout.recompute is Recompute.FULL:
        return scale * 2 * sbh / (t if layout.sequence_parallel else 1)
    attention = 0 if layout.recompute is Recompute.SELECTIVE else 5 * a * s / h
    if layout.sequence_parallel:
        return scale * sbh / t * (34 + attention)
    return scale * sbh * (10 + 24 / t + attention / t)


def stage_memory(model: ModelSpec, layout: Layout, stage: Stage) -> Memory:
    """The worst rank of a pipeline stage."""
    pr = layout.precision
    params, grads, optim, tensors = state_numels(model, layout, stage)
    if model.optimizer == "adamw":
        optim_bytes = optim * (2 * pr.moment_bytes + pr.master_bytes) + STEP_TENSOR_BYTES * tensors
    else:
        optim_bytes = optim * pr.master_bytes  # plain SGD keeps no state
    layers = sum(c.hi - c.lo for c in stage.chunks)
    per_layer = activation_bytes_per_layer(model, layout)
    acts = per_layer * layers / layout.v * in_flight_micro_batches(layout, stage.rank) if layers else 0
    if stage.chunks[-1].last and model.name == "transformer":  # logits in fp32 for the loss (Korthikanti eq. 4)
        acts += 4 * model.seq_len * layout.micro_batch_size * model.vocab / layout.tp
    return Memory(param_bytes=params * pr.param_bytes, grad_bytes=grads * pr.grad_bytes,
                  optim_bytes=int(optim_bytes), activation_bytes=int(acts))


def ps_memory(model: ModelSpec, layout: Layout) -> list[Memory]:
    """Parameter server: a worker holds the whole model and its gradients (no optimizer); server 0 (the
    largest shard) holds its flat shard, its gradient and the optimizer state for it."""
    from parbench.sim.comm import ps_shards

    pr, psi = layout.precision, model.param_numel
    shard = ps_shards(psi, max(layout.servers, 1))[0]
    optim = shard * (2 * pr.moment_bytes + pr.master_bytes) + STEP_TENSOR_BYTES if model.optimizer == "adamw" else 0
    worker = Memory(param_bytes=psi * pr.param_bytes, grad_bytes=psi * pr.grad_bytes, optim_bytes=0,
                    activation_bytes=int(activation_bytes_per_layer(model, layout) * len(model.units)))
    server = Memory(param_bytes=shard * pr.param_bytes, grad_bytes=shard * pr.grad_bytes, optim_bytes=optim,
                    activation_bytes=0)
    return [worker, server]
