"""Memory per rank: what a training step holds at its peak, term by term.

peak = parameters + gradients + optimizer state (ZeRO stages: Rajbhandari et al., SC 2020, sec. 5)
     + activations in flight (per layer: Korthikanti et al., "Reducing Activation Recomputation in
       Large Transformer Models", MLSys 2023, sec. 4, generalised to GQA, gated MLPs and flash
       attention; times the micro-batches the schedule keeps alive, counted as torch's and Megatron-LM's
       schedules do)
     + the larger of two backward transients that never coexist: the loss's fp32 logit buffers and
       the layer being recomputed
     + transient buffers: FSDP's unsharded units (Zhao et al., "PyTorch FSDP", VLDB 2023, sec. 3.3:
       the current unit, one prefetched, the root kept between forward and backward, and an unsharded
       gradient being reduce-scattered), gradient communication buckets
     + the cluster's fixed costs: CUDA context and communicator buffers per process group
     + allocator fragmentation, a fraction of what the caching allocator hands out and takes back every step.
The fixed terms are properties of the cluster (``Cluster.context_bytes``, ``comm_buffer_bytes``,
``fragmentation``), never of the model.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache

from parbench.config import Schedule
from parbench.sim.comm import (DDP_BUCKET_BYTES, fsdp_group_numels, stage_expert_numels, stage_local_numels,
                               stage_numels, zero1_max_shard)
from parbench.sim.hardware import Cluster
from parbench.sim.layout import Layout, Recompute
from parbench.sim.model import ModelSpec, Unit
from parbench.sim.stages import Stage, stages

STEP_TENSOR_BYTES = 4  # torch AdamW keeps a float32 ``step`` tensor per parameter
FP32_BYTES = 4
LOSS_FP32_BUFFERS = 3
LOSS_PARALLEL_FP32_BUFFERS = 4
MASK_BYTES = 1  # a dropout mask keeps one byte per element (Korthikanti et al. 2022, sec. 4.1)


@dataclass(frozen=True)
class Memory:
    """Bytes one rank holds at its peak, by kind (as the record's ``mem_*_bytes`` for the first four)."""

    param_bytes: int
    grad_bytes: int
    optim_bytes: int
    activation_bytes: int
    unsharded_bytes: int = 0
    """FSDP (zero=3): parameters all-gathered for compute and an unsharded gradient before its reduce-scatter."""
    loss_bytes: int = 0
    """The last stage's fp32 logit buffers at the loss's backward (``loss_bytes``)."""
    buffer_bytes: int = 0
    """Gradient communication buckets outside the gradients themselves."""
    context_bytes: int = 0
    """CUDA context and communicator buffers (outside the caching allocator)."""
    fragmentation_bytes: int = 0
    """Reserved but unusable by the caching allocator (block rounding, split segments)."""

    @property
    def total_bytes(self) -> int:  # every field, spelled out: a search sums tens of thousands
        return (self.param_bytes + self.grad_bytes + self.optim_bytes + self.activation_bytes + self.unsharded_bytes
                + self.loss_bytes + self.buffer_bytes + self.context_bytes + self.fragmentation_bytes)

    @property
    def churn_bytes(self) -> int:
        """What a step allocates and frees again: activations, gathered parameters and gradients, the loss's
        buffers and communication buckets (not the weights, gradients and optimizer state, allocated once)."""
        return self.activation_bytes + self.unsharded_bytes + self.loss_bytes + self.buffer_bytes

    @property
    def allocator_bytes(self) -> int:
        """What torch's caching allocator reserves (torch.cuda.max_memory_reserved): all but the context."""
        return self.total_bytes - self.context_bytes

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def state_numels(model: ModelSpec, layout: Layout, stage: Stage) -> tuple[int, int, int, int]:
    """(params, grads, optimizer-state elements, optimizer tensors) one rank of ``stage`` holds (worst rank)."""
    n, key = layout.shard_group, (model, layout.pp, layout.split, layout.tp)
    local = stage_local_numels(*key)[stage.rank]
    full = stage_numels(*key)[stage.rank]
    if layout.fsdp2 and layout.zero >= 2:
        shard = sum(fsdp_group_numels(*key, n, stage.rank, True)) // n  # rank 0 holds the full chunks
        return shard, shard, shard, len(local)
    sharded = -(-full // n)
    if (layout.ep > 1 or layout.whole_experts) and layout.zero:  # a rank's experts are shared by fewer ranks
        experts = stage_expert_numels(*key)[stage.rank]
        sharded = -(-(full - experts) // n) + -(-experts // layout.expert_shard_group)
    if layout.zero == 1 and layout.fsdp2:
        own, count = zero1_max_shard(*key, n, stage.rank)  # torch's ZeroRedundancyOptimizer
        return full, full, own, count
    params = sharded if layout.zero >= 3 else full
    grads = sharded if layout.zero >= 2 else full
    optim = sharded if layout.zero >= 1 else full
    return params, grads, optim, -(-len(local) // n) if layout.zero >= 1 else len(local)


def in_flight_micro_batches(layout: Layout, stage_rank: int) -> float:
    """Micro-batches of the whole stage (all its chunks) whose activations stage ``s`` holds at its peak:
    GPipe m; 1F1B min(p - s, m) (Narayanan et al. 2021); interleaved: the warm-up forwards plus the first
    steady-state one, (v-1)p + 2(p-1-s) + 1 chunk forwards (Megatron-LM's and torch.distributed.pipelining's
    ScheduleInterleaved1F1B warm-up count), each 1/v of the stage: p(1 + (p-1)/(pv)) on the first stage
    (Korthikanti et al. 2022, sec. 4.2.3), capped at m."""
    p, m, v = layout.pp, layout.micro_batches, layout.v
    if layout.schedule is Schedule.GPIPE:
        return m
    if layout.schedule is Schedule.INTERLEAVED_1F1B and p > 1:
        return min(m, ((v - 1) * p + 2 * (p - 1 - stage_rank) + 1) / v)
    return min(p - stage_rank, m)


def activation_bytes_per_layer(model: ModelSpec, layout: Layout, unit: Unit | None = None) -> float:
    """Bytes one transformer layer keeps for backward per micro-batch (Korthikanti et al. 2022, sec. 4.1,
    term by term, with s the rank's tokens (seq / cp), b the micro-batch, a heads, t = tp, e the
    activation bytes, f the MLP width, k the k/v width, h_q = heads x head_dim, h unless the heads have a width
    of their own; under multi-head latent attention q, k and v take their own widths and the latents join the
    replicated terms):

    - replicated over t unless sequence parallel: both norms' inputs, the qkv and MLP inputs: 4 e sbh,
      plus two 1-byte dropout masks 2 sbh (with dropout); under sequence parallelism the qkv and MLP
      inputs stay whole (2 e sbh) where the framework saves them all-gathered
      (``Layout.sp_saves_gathered_input``);
    - split over t: q, k, v e sb(h_q + 2k); the attention output e sb h_q; the MLP e sbf x (2: activation
      input and down input; gated: gate, up and down input, 3, when the gate runs fused (Megatron-LM's
      ``bias_swiglu_impl`` and Transformer Engine's ``LayerNormMLP`` save only the first Linear's output
      and recompute silu in backward, as torch.compile's partitioner does), 4 in eager torch, whose
      ``silu(gate) * up`` also saves silu's output for the product's backward); the attention core:
      eager a s^2 b (e for the softmax output, + 1 + e for dropout's mask and output), flash only its
      fp32 log-sum-exp 4 a s b (Dao et al. 2022).

    With e = 2, a GELU MLP of 4h, h_kv = h and dropout this is Korthikanti's sbh(10 + 24/t + 5as/(ht)).
    Under ``Layout.te_fp8`` the Linear layers' saved inputs (qkv, projection, MLP and down inputs) are the
    1-byte FP8 tensors Transformer Engine cast them to (``transformer_engine/pytorch/module/linear.py``
    saves the quantized input for the weight gradient), the projection's beside flash's own output.
    Policies (``Recompute``): selective drops the eager attention core; ops keeps the layer input, half
    the GEMM outputs and the attention output; full keeps the layer input (e sbh, /t with SP) on the
    ``recomputed_fraction`` of layers. ``unit``: the layer; an MoE block's MLP keeps ``moe_mlp_bytes``
    in place of the dense MLP's."""
    if model.arch is None:
        e = layout.precision.activation_bytes
        return e * 6 * layout.micro_batch_size * model.hidden  # mlp: input, pre-activation and output of each Linear
    arch, t, e, r = model.arch, layout.tp, layout.precision.activation_bytes, layout.precision.residual_bytes
    s, b, h, f, a = model.seq_len / layout.cp, layout.micro_batch_size, arch.hidden, arch.ffn, arch.heads
    q, kv, out = arch.q_width, arch.k_width + arch.v_width, arch.out_width
    sb, sp = s * b, layout.sequence_parallel
    layer_input = r * sb * h / (t if sp else 1)
    moe = unit is not None and bool(unit.moe_assignments_per_sample)
    if layout.recompute is Recompute.OPS:
        mlp_outputs = moe_mlp_widths(arch, unit)[1] if moe else (2 if arch.gated_mlp else 1) * f + h
        gemm_outputs = q + kv + h + mlp_outputs
        kept = layer_input + (e * sb * gemm_outputs / 2 + e * sb * out + FP32_BYTES * a * sb) / t
    else:
        # the norms' inputs (the residual stream's dtype) and dropout masks, then the norms' outputs: the inputs
        # of qkv and of the MLP
        replicated = 2 * r * sb * h + (2 * MASK_BYTES * sb * h if arch.dropout else 0)
        if arch.mla:  # the latents, whole on every tensor-parallel rank: norm inputs, then the up projections' inputs
            lq, lkv = arch.q_lora_rank, arch.kv_lora_rank
            replicated += e * sb * (lq + lkv + arch.rope_head_dim) + saved_input_bytes(layout) * sb * (lq + lkv)
        g = saved_input_bytes(layout)  # a Linear's saved input: Transformer Engine keeps its FP8 cast
        norms_redone = "layernorm" in layout.recompute_modules and not layout.te_fp8
        gemm_inputs = 0 if norms_redone else 2 * g * sb * h
        mlp = (3 if layout.fused_elementwise else 4) if arch.gated_mlp else 2
        # the attention output is flash's saved output and the projection's input; TE keeps an FP8 copy too
        up_redone = arch.mla and "mla_up_proj" in layout.recompute_modules
        split = (0 if up_redone else e * sb * (q + kv)) + e * sb * out + (g * sb * out if layout.te_fp8 else 0)
        split += moe_mlp_bytes(arch, unit, layout) * sb if moe else e * sb * f * (mlp - 1) + g * sb * f
        if layout.attention == "flash":
            split += FP32_BYTES * a * sb
        elif layout.recompute is not Recompute.SELECTIVE:
            split += a * s * model.seq_len * b * (e + (MASK_BYTES + e if arch.dropout else 0))
        if not sp:
            kept = replicated + gemm_inputs + split / t
        else:
            kept = (replicated + split) / t + gemm_inputs / (1 if layout.sp_saves_gathered_input else t)
    r = layout.recomputed_fraction
    return r * layer_input + (1 - r) * kept


def loss_bytes(model: ModelSpec, layout: Layout) -> float:
    """The loss's peak on the last stage, per micro-batch, in fp32 buffers of the rank's logits (4 s b V / t for
    a vocabulary-parallel head; the e-byte logits are freed once cast to fp32). torch's cross_entropy
    (log_softmax + nll_loss kernels) peaks in backward with three: the saved log-softmax, nll_loss's gradient
    and log_softmax's gradient. Vocabulary-parallel (torch.distributed.tensor.parallel.loss_parallel, its
    ``_nll_loss_and_log_softmax_backward``) holds four: the saved log-softmax, the zeroed grad_input,
    exp(log-softmax) and their sum, beside which the product is written. Megatron-LM's
    (``Layout.megatron_cross_entropy``) holds one, the softmax made in place from its float32 copy and turned
    in place into the gradient, and the e-byte copy of that gradient the head's backward receives: 1 + e / 4.
    A compiled loss (``Layout.compiled_loss``) holds the e-byte logits it saves and its e-byte gradient: 2 e / 4.
    Each multi-token-prediction layer's loss (``Architecture.mtp_layers``) keeps what its forward saved while
    the other loss's backward peaks: one float32 buffer (the log-softmax, or Megatron-LM's softmax), e / 4
    compiled."""
    if model.arch is None:
        return 0.0
    vocab_split = layout.tp if model.post.gemms[0].tp_sharded else 1
    e = layout.precision.activation_bytes / FP32_BYTES
    if layout.compiled_loss:
        buffers = 2 * e
    elif layout.megatron_cross_entropy:
        buffers = 1 + e
    else:
        buffers = LOSS_PARALLEL_FP32_BUFFERS if vocab_split > 1 else LOSS_FP32_BUFFERS
    buffers += model.arch.mtp_layers * (e if layout.compiled_loss else 1)
    s = model.seq_len / layout.cp
    return buffers * FP32_BYTES * s * layout.micro_batch_size * model.vocab / vocab_split


def unsharded_bytes(model: ModelSpec, layout: Layout, stage: Stage) -> int:
    """FSDP (zero=3): the root group (embeddings, final norm, head) stays gathered from forward to backward;
    at most two units are gathered at once (the one computing and the one prefetched: FSDP's rate
    limiter, Zhao et al. 2023, sec. 3.3); one unit's full gradient waits for its reduce-scatter.
    Parameters gather in their dtype (the blocks at 1 byte with FP8 all-gather). Under a pipeline the whole stage
    stays gathered, its unsharded gradients accumulating over the micro-batches. ZeRO-2 (zero=2) under a
    pipeline accumulates the same full gradients: a stage reduce-scatters once, after its last backward
    (comm.py), so until then each gradient is whole; the textbook's parameters are whole anyway, FSDP2's
    (``Layout.fsdp2``: sharded at rest) are gathered at the stage's first forward and stay so."""
    if layout.zero < 2 or layout.shard_group == 1:
        return 0
    full, root, top2, biggest = _gathered_numels(model, layout.pp, layout.split, layout.tp, stage.rank)
    if layout.pp > 1:  # under a pipeline schedule the stage stays gathered and accumulates full gradients
        # until its last backward (m + 1 gathers, comm.py), in FSDP2's reduce dtype (fp32 under mixed precision
        # with a master copy; the communication dtype under the runner's autocast policy)
        reduce_bytes = layout.precision.comm_bytes or (FP32_BYTES if layout.precision.master_bytes else layout.precision.grad_bytes)
        gathered = (root * layout.gather_elem_bytes + (full - root) * layout.fp8_gathered_elem_bytes
                    if layout.zero == 3 or layout.fsdp2 else 0)
        return full * reduce_bytes + gathered
    if layout.zero == 2:
        return 0
    fp8_casts = 2 * biggest if layout.precision.gemm_dtype == "fp8" and not layout.fp8_all_gather else 0
    # a unit's whole gradient, in the compute dtype where a mixed-precision policy gathers in one
    return (root * layout.gather_elem_bytes + top2 * layout.fp8_gathered_elem_bytes
            + max(biggest, root) * (layout.precision.comm_bytes or layout.precision.grad_bytes) + fp8_casts)


@lru_cache(maxsize=4096)
def _gathered_numels(model: ModelSpec, pp: int, v: int, tp: int, rank: int) -> tuple[int, int, int, int]:
    """(the stage's elements, its root group's, its two largest units', its largest unit's), tp-local."""
    stage = stages(model, pp, v)[rank]
    units = sorted([u.param_numel(tp) for mods in stage.modules for u in mods if u.params] or [0], reverse=True)
    root = sum(t.local_numel(tp) for t in stage.root)
    return stage_numels(model, pp, v, tp)[rank], root, sum(units[:2]), units[0]


def process_groups(layout: Layout) -> int:
    """Communicators a rank belongs to (each holds its own buffers): one per mesh dimension larger than 1."""
    dims = (layout.shard_group, layout.replicate, layout.tp, layout.pp, layout.cp)
    return sum(1 for d in dims if d > 1)


def saved_input_bytes(layout: Layout) -> int:
    """Bytes of a Linear's saved input: Transformer Engine's FP8 cast under ``te_fp8``, else the activations'."""
    return 1 if layout.te_fp8 else layout.precision.activation_bytes


def moe_mlp_widths(arch, unit: Unit) -> tuple[float, float]:
    """(kept assignments per token, elements per token an MoE MLP's GEMMs write): k' = the unit's kept
    assignments over the sequence (top_k, less what the capacity drops); the router's E logits and, per
    assignment, the experts' inner layer (2 f_e gated) and their output (h)."""
    kept = sum(unit.moe_assignments_per_sample) / arch.seq_len
    inner = (2 if arch.gated_mlp else 1) * arch.expert_width
    return kept, arch.experts + kept * (inner + arch.hidden)


def moe_mlp_bytes(arch, unit: Unit, layout: Layout) -> float:
    """Bytes per token an MoE block's MLP keeps for backward beyond its input (the norm's output, the
    router's input, counted with the dense block's): the router's probabilities in float32 (its softmax's
    output; Megatron-Core and the runner's ``MoE`` both take the softmax in float32), then per kept
    assignment k' its router probability (float32), the token's dispatched copy (the experts' first GEMM
    input), the experts' inner activations as a dense MLP of width f_e keeps them, and
    ``Layout.moe_saved_outputs`` copies of the expert's output (where the probability weights it after the
    experts). GEMM inputs take Transformer Engine's FP8 byte under ``te_fp8``. The routing's integer indices
    (a few int64 per assignment) are left out."""
    e, g = layout.precision.activation_bytes, saved_input_bytes(layout)
    mlp = (3 if layout.fused_elementwise else 4) if arch.gated_mlp else 2
    kept, _ = moe_mlp_widths(arch, unit)
    f, h = arch.expert_width, arch.hidden
    act_out = 0 if "moe_act" in layout.recompute_modules and not layout.te_fp8 else g * f  # the second GEMM's input
    per_assignment = FP32_BYTES + g * h + e * f * (mlp - 1) + act_out + layout.moe_saved_outputs * e * h
    return FP32_BYTES * arch.experts + kept * per_assignment


def stage_layer_bytes(model: ModelSpec, layout: Layout, units) -> float:
    """``activation_bytes_per_layer`` summed over ``units``: dense layers alike, MoE layers alike (one of
    each kind computed); a multi-token-prediction layer keeps its block's and ``mtp_extra_bytes``."""
    moe = [u for u in units if u.moe_assignments_per_sample]
    dense = len(units) - len(moe)
    total = activation_bytes_per_layer(model, layout) * dense if dense else 0.0
    mtp = sum(u.mtp for u in units)
    total += mtp_extra_bytes(model, layout) * mtp if mtp else 0.0
    return total + (activation_bytes_per_layer(model, layout, moe[0]) * len(moe) if moe else 0.0)


def mtp_extra_bytes(model: ModelSpec, layout: Layout) -> float:
    """What a multi-token-prediction layer keeps per micro-batch beyond its block (``parbench.sim.model.mtp_unit``),
    per token: the looked-up embedding (enorm's input, e h; hnorm's input is the model's normed output, which
    its head already keeps), the projection's input (both normed halves, 2 h, a Linear's saved input), the
    block's output (the final norm's input, the residual stream's r h) and the head's input (e h). Split over
    tp with sequence parallelism, as a layer's norm inputs are."""
    e, r, g = layout.precision.activation_bytes, layout.precision.residual_bytes, saved_input_bytes(layout)
    sb = model.seq_len / layout.cp * layout.micro_batch_size
    return sb * model.hidden * (2 * e + 2 * g + r) / (layout.tp if layout.sequence_parallel else 1)


def kept_activation_bytes(model: ModelSpec, layout: Layout, stage: Stage) -> float:
    """What the stage's layers keep for backward over the micro-batches in flight (``in_flight`` counts
    micro-batches of the whole stage, all its chunks: Korthikanti et al. 2022, sec. 4.2.3, L/p layers x
    p(1 + (p-1)/(pv)) under interleaving), plus the embedding output on the first stage and the head's
    input on the last."""
    units = [u for c in stage.chunks for u in model.units[c.lo:c.hi]]
    acts = stage_layer_bytes(model, layout, units) * in_flight_micro_batches(layout, stage.rank)
    if model.arch is None:
        return acts
    sbh = layout.precision.activation_bytes * model.seq_len / layout.cp * layout.micro_batch_size * model.hidden
    if stage.chunks[0].first:  # the embedding's output: the residual stream
        acts += sbh * layout.precision.residual_bytes / layout.precision.activation_bytes
    if stage.chunks[-1].last:  # the head's input, saved for its weight gradient (sharded only as a layer's gemm inputs are)
        acts += sbh / (layout.tp if layout.sequence_parallel and not layout.sp_saves_gathered_input else 1)
    return acts


def recompute_bytes(model: ModelSpec, layout: Layout) -> float:
    """Full or op-level recomputation: the layer whose forward runs again in backward holds, for that
    moment, all a layer without recomputation keeps, beyond the checkpoint it already counts."""
    if layout.recompute not in (Recompute.FULL, Recompute.OPS):
        return 0.0
    whole = replace(layout, recompute=Recompute.NONE, recompute_every=1)
    moe = next((u for u in model.units if u.moe_assignments_per_sample), None)  # an MoE layer holds the most
    return activation_bytes_per_layer(model, whole, moe) - activation_bytes_per_layer(model, layout, moe)


def weight_cast_bytes(layout: Layout, tensors) -> int:
    """torch.autocast's cached low-precision copies of a rank's Linear weights and biases, made in the first
    forward and held until backward has used them (``Precision.weight_cast_bytes``). Sharded parameters
    (zero >= 2: FSDP2's ``MixedPrecisionPolicy``) are gathered in the compute dtype and used as they are."""
    if not layout.precision.weight_cast_bytes or layout.zero >= 2:
        return 0
    return layout.precision.weight_cast_bytes * sum(t.local_numel(layout.tp) for t in tensors if t.linear)


def held_grad_bytes(layout: Layout) -> int:
    """Gradient bytes a rank holds per parameter at its peak: ``Layout.grad_elem_bytes``, and under DeepSpeed's bf16
    optimizer (``Layout.fp32_grad_pass_per_micro_batch``) the bf16 gradients beside its float32 ones. Its pipeline
    engine frees them before each backward (``clear_lp_grads``: ``param.grad = None``) and keeps them after it
    (``update_hp_grads(clear_lp_grads=False)``), so every backward ends with both (deepspeed/runtime/bf16_optimizer.py,
    deepspeed/runtime/pipe/engine.py); BigScience put the optimizer's cost at "4 bytes x params" more than fp16's
    (train/tr11-176B-ml/chronicles-prequel.md, 'Rebalancing layers'), 2 + 4 bytes of gradients where fp16 holds 2."""
    extra = layout.precision.grad_bytes if layout.fp32_grad_pass_per_micro_batch else 0
    return layout.grad_elem_bytes + extra


def stage_memory(model: ModelSpec, layout: Layout, stage: Stage, cluster: Cluster | None = None, *,
                 redo_bytes: float | None = None) -> Memory:
    """The worst rank of a pipeline stage. ``redo_bytes``: ``recompute_bytes(model, layout)``, where the caller
    has it (the same for every stage)."""
    pr = layout.precision
    params, grads, optim, tensors = state_numels(model, layout, stage)
    if model.optimizer == "adamw":
        optim_bytes = optim * (2 * pr.moment_bytes + pr.master_bytes) + STEP_TENSOR_BYTES * tensors
    else:
        optim_bytes = optim * pr.master_bytes  # plain SGD keeps no state
    layers = sum(c.hi - c.lo for c in stage.chunks)
    loss = loss_bytes(model, layout) if stage.chunks[-1].last else 0.0
    acts = kept_activation_bytes(model, layout, stage) + weight_cast_bytes(layout, stage.tensors)
    # backward runs the loss first and frees its buffers before any layer's recomputation starts, so the
    # recomputed layer adds to the peak only by what it holds beyond them
    redo = recompute_bytes(model, layout) if redo_bytes is None else redo_bytes
    acts += max(0.0, redo - loss) if layers else 0.0
    buckets = 2 * DDP_BUCKET_BYTES if layout.zero in (1, 2) and layout.shard_group > 1 and not layout.fsdp2 else 0
    mem = Memory(param_bytes=params * pr.param_bytes, grad_bytes=grads * held_grad_bytes(layout), optim_bytes=int(optim_bytes),
                 activation_bytes=int(acts), unsharded_bytes=unsharded_bytes(model, layout, stage),
                 loss_bytes=int(loss), buffer_bytes=buckets)
    return with_cluster_terms(mem, layout, cluster)


def stages_memory(model: ModelSpec, layout: Layout, sts: tuple[Stage, ...], cluster: Cluster | None = None) -> list[Memory]:
    """``stage_memory`` of every stage; stages of equal shapes (``Stage.shape_key``) that hold as many micro-batches
    in flight hold the same, and are computed once."""
    out, done, redo = [], {}, recompute_bytes(model, layout)
    for st in sts:
        key = (st.shape_key, in_flight_micro_batches(layout, st.rank))
        if key not in done:
            done[key] = stage_memory(model, layout, st, cluster, redo_bytes=redo)
        out.append(done[key])
    return out


def with_cluster_terms(mem: Memory, layout: Layout, cluster: Cluster | None) -> Memory:
    """Add the cluster's fixed costs: the CUDA context, communicator buffers per process group, and the
    allocator's fragmentation as a fraction of what it allocates and frees every step (``Memory.churn_bytes``):
    the weights, gradients and optimizer state are allocated once, before the first step, and fill their
    blocks; the caching allocator's unusable remainders come from the tensors a step keeps making."""
    if cluster is None:
        return mem
    context = cluster.context_bytes + cluster.comm_buffer_bytes * process_groups(layout)
    return replace(mem, context_bytes=context, fragmentation_bytes=int(cluster.fragmentation * mem.churn_bytes))


def ps_memory(model: ModelSpec, layout: Layout) -> list[Memory]:
    """Parameter server: a worker holds the whole model and its gradients (no optimizer); server 0 (the
    largest shard) holds its flat shard, its gradient and the optimizer state for it."""
    from parbench.sim.comm import ps_shards

    pr, psi = layout.precision, model.param_numel
    shard = ps_shards(psi, max(layout.servers, 1))[0]
    optim = shard * (2 * pr.moment_bytes + pr.master_bytes) + STEP_TENSOR_BYTES if model.optimizer == "adamw" else 0
    worker = Memory(param_bytes=psi * pr.param_bytes, grad_bytes=psi * pr.grad_bytes, optim_bytes=0,
                    activation_bytes=int(stage_layer_bytes(model, layout, model.units))
                    + weight_cast_bytes(layout, [t for u in (model.pre, *model.units, model.post) for t in u.params]),
                    loss_bytes=int(loss_bytes(model, layout)))
    server = Memory(param_bytes=shard * pr.param_bytes, grad_bytes=shard * pr.grad_bytes, optim_bytes=optim,
                    activation_bytes=0)
    return [worker, server]
