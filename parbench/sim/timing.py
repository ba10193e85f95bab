"""Compute time from FLOPs and bytes on a roofline (Williams et al., "Roofline", CACM 2009): a GEMM costs
overhead + max(flops / (peak x efficiency), bytes / memory bandwidth), so the attention core's batched
per-head products (k or n = head dim: ~100 FLOPs per byte, below an A100's ~190) run at memory speed;
a memory-bound operator costs overhead + bytes / bandwidth."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from statistics import NormalDist

from parbench.names import ConfigError
from parbench.sim.hardware import Cluster
from parbench.sim.layout import Layout, Recompute
from parbench.sim.memory import FP32_BYTES
from parbench.sim.model import Gemm, ModelSpec, Unit, input_needs_grad

ADAMW_BYTES_PER_ELEMENT = 28
"""A fused AdamW kernel (``torch.optim.AdamW(fused=True)``, Apex's and Transformer Engine's FusedAdam under
Megatron-LM, torchtitan's default): read p, g, m, v and write p, m, v once, 7 x fp32."""
ADAMW_UNFUSED_BYTES_PER_ELEMENT = 80
"""torch's default AdamW (the for-loop form on the CPU, foreach on CUDA), one kernel per operation, fp32 bytes
read + written per element: weight decay p.mul_ (8), m.lerp_(g) (12), v.mul_ (8), v.addcmul_(g, g) (12),
v.sqrt() (8), / bias correction (8), + eps (8), p.addcdiv_(m, denom) (16) (``torch/optim/adamw.py``,
``_single_tensor_adam`` and ``_multi_tensor_adam``). Measured on an H200: 33.4 ms for 1.42e9 parameters
(``scripts/gpu_compute_check.py``), 80 x 1.42e9 / 4.17 TB/s = 27.3 ms against 9.6 ms at 28 bytes."""
ADAMW_OPS_PER_TENSOR = 10  # aten ops per tensor of torch's for-loop AdamW step (counted, steady state)
SGD_BYTES_PER_ELEMENT = 12
SGD_OPS_PER_TENSOR = 1.5  # counted: add_ per tensor plus the param-group bookkeeping
FP32_GRAD_PASS_BYTES_PER_ELEMENT = 18
"""``Layout.fp32_grad_pass_per_micro_batch``: DeepSpeed's ``BF16_Optimizer.update_hp_grads`` runs
``hp_grad.add_(lp.grad.to(hp_grad.dtype))`` per parameter: the cast reads the bf16 gradient (2 bytes) and
writes a float32 copy (4), the add reads that copy and the float32 gradient (4 + 4) and writes the sum (4).
The bf16 gradients are set to None before each backward (``clear_lp_grads``), so nothing zeroes them."""
FP8_CAST_BYTES = {"tensorwise": 5.0, "delayed": 3.0, "mxfp8": 3.0 + 1 / 32}
"""Bytes an FP8 cast moves per element of its bf16 operand, by scaling recipe (``Layout.fp8_scaling``; Megatron-LM's
``--fp8-recipe`` names): the operand read (2 bytes) and written as FP8 (1), and where the recipe needs it first, a
pass that reads the operand for its amax (2). ``tensorwise``, dynamic per-tensor scaling (Micikevicius et al., "FP8
Formats for Deep Learning", 2022, sec. 4; torchao's float8, Transformer Engine's current scaling): 2 + 2 + 1.
``delayed``: Transformer Engine's ``DelayedScaling`` (its one FP8 recipe through Transformer Engine 1.x; Megatron-LM's
``--fp8-recipe`` default, ``megatron/training/arguments.py``) scales with the amax history of earlier steps and
records the operand's amax in the pass that casts it: 2 + 1. ``mxfp8``: one E8M0 scale per 32 consecutive elements
(Transformer Engine's MXFP8 documentation), worked out from the block in the casting pass: 2 + 1 + 1/32, the bytes
an MXFP8 quantizer's effective bandwidth counts (fal.ai, "Chasing 6+ TB/s: an MXFP8 quantizer on Blackwell"). Left out
alike for every recipe: the second FP8 copy the backward GEMMs take (a transpose on Hopper, whose FP8 GEMMs take one
layout; MXFP8's copy scaled along the other dimension) and the read a cast saves where Transformer Engine fuses it
into the kernel that produces the operand (its norms' and activations' FP8 outputs). Counted with both, every
recipe one byte dearer, the H100's 108 dense rows come out at a mean |error| of 4.77% at their best efficiencies
against 4.67% (``efficiency_fits.fit_hopper_efficiencies``)."""


def cpu_flash_query_block(seq: int) -> int:
    """Query rows per block of torch's CPU flash attention kernel (``aten/src/ATen/native/cpu/
    FlashAttentionKernel.cpp``: 32 below 192 tokens, 64 below 768, else 256; keys in blocks of 512)."""
    return 32 if seq < 192 else 64 if seq < 768 else 256


def causal_fraction(c: Cluster, seq: int) -> float:
    """Share of the s x s scores a causal flash kernel computes. GPU presets: the ideal half (their fitted
    attention efficiencies absorb their kernels' tiling). A CPU profile runs torch's CPU kernel, which computes
    for each query block every key up to the block's last row, the diagonal block whole: sum over blocks of
    rows x min(block end, s), of s^2 (1 at 32 tokens, 0.75 at 64, 0.625 at 128 where the ideal is 0.5)."""
    return 0.5 if c.host_runs_ahead else cpu_causal_fraction(seq)


def cpu_causal_fraction(seq: int) -> float:
    block = min(cpu_flash_query_block(seq), seq)
    return sum(min(block, seq - lo) * min(lo + block, seq) for lo in range(0, seq, block)) / seq**2


def gemm_time_s(c: Cluster, flops: float, bytes_moved: float = 0.0, gemm_dtype: str = "",
                efficiency: float = 0.0) -> float:
    """overhead + max(compute, memory) seconds of one GEMM reading A and B and writing C once; FP8 GEMMs
    run at the device's FP8 peak (``Cluster.gemm_peak_flops``) times its ``fp8_gemm_share``. ``efficiency``:
    the kernel's fraction of peak (default: the cluster's GEMM efficiency)."""
    share = c.fp8_gemm_share if gemm_dtype == "fp8" else 1.0
    peak = c.gemm_peak_flops(gemm_dtype) * (efficiency or c.gemm_efficiency) * share
    return c.gemm_overhead_s + max(flops / peak, bytes_moved / c.memory_bandwidth_bytes_per_s)


def gemm_bytes(g: Gemm, mb: int, act_bytes: int) -> float:
    """Bytes of A (M x k), B (k x n) and C (M x n), M = mb x m rows; batched products read their own B."""
    rows = mb * g.m
    if g.batched > 1:
        return mb * g.batched * (g.m * g.k + g.k * g.n + g.m * g.n) * act_bytes
    return (rows * g.k + g.k * g.n + rows * g.n) * act_bytes


@dataclass(frozen=True)
class ChunkTime:
    """Seconds of a model chunk on one micro-batch, split as the step-time breakdown reports compute."""

    forward: float
    backward: float
    recompute: float
    """The forward work activation recomputation repeats during backward (Korthikanti et al. 2022)."""
    gemm: float
    """GEMM seconds of forward + backward (what tensor-parallel overlap can hide collectives under)."""
    attention: float
    """Attention-core seconds of forward + backward (what ring attention hides its K/V exchange under)."""

    def _values(self) -> tuple[float, ...]:  # dataclasses.astuple deep-copies: 35% of a search's time
        return self.forward, self.backward, self.recompute, self.gemm, self.attention

    def __add__(self, o: "ChunkTime") -> "ChunkTime":
        return ChunkTime(*(a + b for a, b in zip(self._values(), o._values())))

    def scaled(self, k: float) -> "ChunkTime":
        return ChunkTime(*(a * k for a in self._values()))

    @property
    def total(self) -> float:
        return self.forward + self.backward + self.recompute


ZERO_TIME = ChunkTime(0.0, 0.0, 0.0, 0.0, 0.0)


def unit_times_s(c: Cluster, u: Unit, *, mb: int, tp: int, act_bytes: int, cp: int = 1, flash: bool = False,
                 gemm_dtype: str = "", kernel: str = "", fused: bool = True,
                 weight_casts: float = 1.0, cast_bytes: float = FP8_CAST_BYTES["tensorwise"],
                 input_grad: bool = True) -> tuple[float, float, float, float]:
    """(forward, backward, attention-core forward, GEMM forward) seconds of one unit on one micro-batch of
    ``mb`` samples. Backward computes two GEMMs (input and weight gradients) per forward GEMM
    (Narayanan et al. 2021) and touches every element twice. Flash attention never writes the s x s
    scores and recomputes QK^T in backward (Dao et al., NeurIPS 2022); context parallelism gives each
    rank 1/cp of the tokens and of the attention work. ``kernel``: the flash kernel that ran
    (``Cluster.attention_efficiency_for``). ``fused``: elementwise chains run as fused kernels (torch.compile,
    Megatron's and Apex's fused norms and activations); False adds what eager torch's one kernel per op
    moves through memory (``parbench.sim.model.eager_elementwise``), twice over in backward. ``weight_casts``:
    FP8 weight casts per micro-batch (1; 1/m where Transformer Engine caches them over a step's m; a rank's
    shard alone, 1/``Layout.shard_group``, where FP8 weights are gathered: ``Layout.fp8_all_gather``);
    ``cast_bytes``: what each cast moves per element under the run's scaling recipe (``FP8_CAST_BYTES``).
    ``input_grad``: False where the unit's input needs no gradient (``parbench.sim.model.input_needs_grad``):
    its first GEMM's backward is the weight gradient alone. The Linears' backward GEMMs run at
    ``Cluster.backward_gemm_ratio`` of the forward's rate; exp- and erf-based elementwise functions cost
    ``Cluster.transcendental_s_per_element``, a third of it forward and two thirds backward (the backward
    evaluates the function and its derivative: on this project's CPU, GELU 0.5 + 1.3 ns and the
    cross-entropy 0.6 + 0.8-1.5 ns per element). Where ``Cluster.weight_read_bandwidth_bytes_per_s`` is set (a
    CPU profile), each Linear also brings in its weight, 1/tp of it where sharded, in series with its GEMMs:
    once forward, twice backward (once where ``input_grad`` is False for the first Linear)."""
    gemm = attn = cast_forward = cast_backward = weights = 0.0
    first_linear = first_weight = -1.0
    for g in u.gemms:
        share = (tp if g.tp_sharded else 1) * cp
        if g.batched == 1:  # a Linear: its weight is k x n
            weight = g.k * g.n * act_bytes / (tp if g.tp_sharded else 1)
            weights += weight
            first_weight = weight if first_weight < 0 else first_weight
        flops, moved = mb * g.flops / share, gemm_bytes(g, mb, act_bytes) / share
        dtype, eff = gemm_dtype, 0.0
        if dtype == "fp8" and (g.batched > 1 or g.head):  # FP8 recipes cast only the Linears, not the head
            dtype = ""  # (``Gemm.head``) nor attention; a float32 run's attention and head stay float32
        if flash and g.batched > 1:
            # causal flash attention skips the key blocks above the diagonal (about half of QK^T and of AV;
            # Dao, "FlashAttention-2", 2023, sec. 3.1; ``causal_fraction``) and keeps the s x s scores on
            # chip: QK^T reads Q and K, AV reads V and writes O; neither touches the largest (s x s) operand
            sizes = (g.m * g.k, g.k * g.n, g.m * g.n)
            # a sliding window of w keys over m queries computes m w - w^2 / 2 of the m x w this product counts;
            # chunks of w tokens, each causal within itself, m w / 2
            band = 0.5 if g.chunked else 1 - g.keys / (2 * g.m)
            flops = flops * (band if g.keys else causal_fraction(c, g.m))
            moved = mb * g.batched * (sum(sizes) - max(sizes)) * act_bytes / share
            eff = c.attention_efficiency_for(kernel)
        if dtype == "fp8":  # forward casts the input and the weight, backward the output's gradient
            cast_forward += (mb * g.m * g.k / share + weight_casts * g.k * g.n / (tp if g.tp_sharded else 1)) * g.batched
            cast_backward += mb * g.m * g.n / share * g.batched
        t = gemm_time_s(c, flops, moved, dtype, eff)
        gemm += t
        if g.batched > 1:
            attn += t
        elif first_linear < 0:
            first_linear = t
    elems = u.elementwise_elems_per_sample + (0 if flash else u.score_elems_per_sample)
    # an op of the chain reads two tensors of the unit's output size and writes one (an add; a norm or an
    # activation reads one): where those outgrow a CPU core's caches it streams (``Cluster.cache_bytes``)
    bandwidth = c.elementwise_bandwidth(3 * mb * u.out_elems_per_sample * act_bytes / tp / cp)
    elementwise = mb * elems * act_bytes * 2 / tp / cp / bandwidth
    unfused = 0.0  # eager torch: each op of a norm, rotary or gate chain is its own kernel through memory
    if not fused:
        eager_bytes = u.unfused_fp32_elems_per_sample * 4 + u.unfused_act_elems_per_sample * act_bytes
        unfused = mb * eager_bytes / tp / cp / bandwidth
    to_s = cast_bytes / c.memory_bandwidth_bytes_per_s
    transcendental = mb * u.transcendental_elems_per_sample / tp / cp * c.transcendental_s_per_element
    linear_backward = (2 * (gemm - attn) - (0.0 if input_grad else max(first_linear, 0.0))) / c.backward_gemm_ratio
    if c.weight_read_bandwidth_bytes_per_s:  # forward reads each weight; backward reads it and writes its gradient
        read = weights / c.weight_read_bandwidth_bytes_per_s
        linear_backward += 2 * read - (0.0 if input_grad else max(first_weight, 0.0) / c.weight_read_bandwidth_bytes_per_s)
    else:
        read = 0.0
    forward = (read + gemm + elementwise + unfused + cast_forward * to_s + u.ops_forward * c.training_op_overhead_s
               + transcendental / 3)
    backward = (linear_backward + 2 * attn + 2 * (elementwise + unfused) + cast_backward * to_s
                + u.ops_backward * c.training_op_overhead_s + (attn / 2 if flash else 0.0) + 2 * transcendental / 3)
    return forward, backward, attn + (0.0 if flash else elementwise / 2), gemm


def chunk_times_s(c: Cluster, model: ModelSpec, layout: Layout, units: tuple[Unit, ...], *,
                  first: bool, last: bool) -> ChunkTime:
    """Seconds of a model chunk per micro-batch: forward, backward, recomputation, GEMM and attention shares."""
    members = ((model.pre,) if first else ()) + units + ((model.post,) if last else ())
    if layout.fp8_scaling == "mxfp8":  # block-scaled FP8 GEMMs run at their own share of the FP8 rate
        if not c.mxfp8_gemm_share:
            raise ConfigError(f"fp8_scaling 'mxfp8': cluster {c.name} has no block-scaled FP8 GEMMs (mxfp8_gemm_share = 0)")
        c = replace(c, fp8_gemm_share=c.fp8_gemm_share * c.mxfp8_gemm_share)
    total = ZERO_TIME
    core = layout.recompute is Recompute.SELECTIVE
    ops = layout.recompute is Recompute.OPS  # every other GEMM (and the elementwise work) runs again
    kwargs = dict(mb=layout.micro_batch_size, tp=layout.tp, act_bytes=layout.precision.activation_bytes,
                  cp=layout.cp, flash=layout.attention == "flash", gemm_dtype=layout.precision.gemm_dtype,
                  kernel=layout.attention_kernel, fused=layout.fused_elementwise,
                  weight_casts=(1 / layout.micro_batches if layout.te_fp8 else 1.0)
                  / (layout.shard_group if layout.fp8_all_gather else 1),
                  cast_bytes=FP8_CAST_BYTES[layout.fp8_scaling])
    counts: dict[tuple, int] = {}
    shapes: dict[tuple, tuple[Unit, str, bool]] = {}
    for u in members:
        raw = first and u is model.units[0] and not input_needs_grad(model, 0)
        key = (u.shape_key, raw)  # a model's identical layers: timed once, counted
        counts[key] = counts.get(key, 0) + 1
        shapes.setdefault(key, (u, raw))
    for key, (u, raw) in shapes.items():
        f, b, attn, gemm = unit_times_s(c, u, **kwargs, input_grad=not raw)
        fixed = moe_expert_fixed_s(c, u, layout)  # a third forward, two thirds backward, as the experts' GEMMs
        f, b = f + fixed / 3, b + 2 * fixed / 3
        redo = 0.0  # checkpointing wraps the layers, never the embedding or the head and loss
        if u is not model.pre and u is not model.post:
            tail = replay_skipped_s(c, u, layout, **kwargs)
            redo = ((f - tail) * layout.recomputed_fraction + (attn if core else 0.0)
                    + ((gemm - attn) / 2 + (f - gemm) if ops else 0.0) + module_recompute_s(c, model, u, layout)
                    + up_projections_s(c, model, u, layout, **kwargs))
        total = total + ChunkTime(f, b, redo, 3 * gemm, 3 * attn).scaled(counts[key])
    return total


def module_recompute_s(c: Cluster, model: ModelSpec, u: Unit, layout: Layout) -> float:
    """Seconds a layer's ``Layout.recompute_modules`` replay per micro-batch, memory-bound kernels at the device's
    bandwidth: ``layernorm`` reads both norms' inputs (the residual stream's dtype) and writes their outputs;
    ``moe_act`` reads each kept assignment's first-GEMM output (2 f_e gated, f_e not) and writes the f_e-wide
    activation. Per token of the rank (seq / cp, / tp as the layer's other elementwise work)."""
    arch, modules = model.arch, layout.recompute_modules
    if arch is None or not modules or layout.te_fp8:
        return 0.0
    e, r = layout.precision.activation_bytes, layout.precision.residual_bytes
    per_token = 2 * (r + e) * arch.hidden if "layernorm" in modules else 0.0
    if "moe_act" in modules and u.moe_assignments_per_sample:
        kept = sum(u.moe_assignments_per_sample) / arch.seq_len
        per_token += kept * e * arch.expert_width * (3 if arch.gated_mlp else 2)
    tokens = layout.micro_batch_size * model.seq_len / layout.cp / layout.tp
    return tokens * per_token / c.memory_bandwidth_bytes_per_s


def up_projections_s(c: Cluster, model: ModelSpec, u: Unit, layout: Layout, *, mb: int, tp: int, act_bytes: int,
                     cp: int = 1, gemm_dtype: str = "", **_) -> float:
    """Forward seconds of a latent-attention block's two up projections (q from its latent, k and v from theirs:
    the block's second and third GEMMs), which ``mla_up_proj`` recomputation runs again in backward."""
    if model.arch is None or not model.arch.mla or "mla_up_proj" not in layout.recompute_modules:
        return 0.0
    return sum(gemm_time_s(c, mb * g.flops / (tp * cp), gemm_bytes(g, mb, act_bytes) / (tp * cp), gemm_dtype)
               for g in u.gemms[1:3])


def replay_skipped_s(c: Cluster, u: Unit, layout: Layout, *, mb: int, tp: int, act_bytes: int, cp: int = 1,
                     gemm_dtype: str = "", **_) -> float:
    """Forward seconds a full recomputation does not replay (``Layout.recompute_early_stop``): a dense block's
    last GEMM, the MLP's output projection, whose input is saved before its kernel runs. An MoE block's last
    operator weighs the experts' outputs by the router's probabilities and saves both, so its replay runs to
    the end; so does every reentrant checkpoint."""
    if (not (layout.recompute_early_stop and layout.recompute is Recompute.FULL) or u.moe_assignments_per_sample
            or u.mtp):  # a multi-token-prediction layer ends in its loss
        return 0.0
    g = u.gemms[-1] if u.gemms else None
    if g is None or g.batched > 1:
        return 0.0
    share = (tp if g.tp_sharded else 1) * cp
    return gemm_time_s(c, mb * g.flops / share, gemm_bytes(g, mb, act_bytes) / share, gemm_dtype)


def moe_expert_fixed_s(c: Cluster, u: Unit, layout: Layout) -> float:
    """Seconds an MoE block's experts cost per micro-batch beyond their GEMMs' FLOPs: ``Cluster.moe_expert_fixed_s``
    for each expert this rank holds (experts / ep), forward + backward; 0 for a dense block. Charged on top of
    the device's work, not under it: a dropless dispatcher sizes its all-to-all and the experts' grouped GEMM
    from token counts it first copies to the host and waits for (Megatron-Core's ``MoEAlltoAllTokenDispatcher``
    synchronises "before expert parallel AlltoAll communication to get the input_splits and output_splits CPU
    values"), so the device starts every MoE block's expert path with an empty queue."""
    if not u.moe_assignments_per_sample:
        return 0.0
    return len(u.moe_assignments_per_sample) // layout.ep * c.moe_expert_fixed_s


def adamw_bytes_per_element(fused: bool) -> int:
    return ADAMW_BYTES_PER_ELEMENT if fused else ADAMW_UNFUSED_BYTES_PER_ELEMENT


def optimizer_pass_bytes_per_element(layout: Layout) -> int:
    """Bytes per optimizer element of the passes a mixed-precision step makes besides the update, in the
    order of Megatron-LM's ``MixedPrecisionOptimizer.step`` (``megatron/core/optimizer/optimizer.py``), each
    a memory-bound multi-tensor kernel over the rank's optimizer shard:

    - 16-bit gradients under a float32 master copy are copied to float32 first (``_copy_model_grads_to_main_grads``:
      read 2, write 4); float32-accumulated ones are used in place;
    - fp16's loss scaling unscales them and checks for inf/NaN (``Precision.loss_scaling``: read 4, write 4);
    - clipping by the global norm reads them once (``Layout.clip_grad_norm``: 4);
    - after the update the float32 master weights are copied into the model's 16-bit ones
      (``_copy_main_params_to_model_params``: read 4, write 2), where the two are kept apart: replicated
      parameters or ZeRO-1/2 shards (FSDP's float32 shard is the master; its gathers cast it).
    """
    pr, out = layout.precision, 0
    master = pr.master_bytes and layout.zero <= 2
    if master and layout.grad_elem_bytes < FP32_BYTES:
        out += layout.grad_elem_bytes + FP32_BYTES
    if pr.loss_scaling:
        out += 2 * FP32_BYTES
    if layout.clip_grad_norm:
        out += FP32_BYTES
    if master:
        out += pr.master_bytes + pr.param_bytes
    return out


def optimizer_time_s(c: Cluster, model: ModelSpec, elements: int, tensors: int, grad_elements: int,
                     fused: bool = True, zeroed_tensors: int = 0, pass_bytes: int = 0) -> float:
    """zero_grad (write the gradients) + the optimizer's update, memory-bound, ``ops`` operators per tensor
    for the update and one for zero_grad, each costing the cluster's optimizer-op overhead; on a GPU the
    launches overlap the kernels (``Cluster.host_runs_ahead``). ``fused``: a fused AdamW kernel
    (``Layout.fused_elementwise``), else torch's one kernel per operation. ``zeroed_tensors``: the tensors whose
    gradients zero_grad writes where they are not the ``tensors`` updated (0: the same ones; torch's
    ZeroRedundancyOptimizer updates its rank's shard and zeroes every gradient). ``pass_bytes``: bytes per
    element of the mixed-precision passes around the update (``optimizer_pass_bytes_per_element``).

    Each element's compulsory bytes (the first read of its weight, gradient and moments, the last writes;
    what a fused kernel moves) go at the streaming bandwidth (``Cluster.stream_bandwidth``: after a backward
    pass they are in DRAM); an unfused step's further passes over one tensor's temporaries go at the cached
    ``memory_bandwidth_bytes_per_s``. Measured on this project's 2-core VM right after a backward: the check
    transformer's AdamW (69 tensors, 0.93 M elements) 4.3 ms + zero_grad 0.3 ms, predicted 4.2 ms; the check
    mlp's SGD 0.52 + 0.21 ms, predicted 0.75 ms."""
    per_el = adamw_bytes_per_element(fused) if model.optimizer == "adamw" else SGD_BYTES_PER_ELEMENT
    compulsory = min(per_el, ADAMW_BYTES_PER_ELEMENT if model.optimizer == "adamw" else SGD_BYTES_PER_ELEMENT)
    memory = ((elements * (compulsory + pass_bytes) + grad_elements * 4) / c.stream_bandwidth
              + elements * (per_el - compulsory) / c.memory_bandwidth_bytes_per_s)
    host = optimizer_ops(model, tensors, zeroed_tensors) * c.optimizer_op_s
    return max(memory, host) if c.host_runs_ahead else memory + host


def optimizer_ops(model: ModelSpec, tensors: int, zeroed_tensors: int = 0) -> float:
    """Operators of an eager optimizer step over ``tensors`` parameter tensors and zero_grad over
    ``zeroed_tensors`` (0: the same ones): per tensor ``ADAMW_OPS_PER_TENSOR`` or ``SGD_OPS_PER_TENSOR``, and
    one for zero_grad."""
    per = ADAMW_OPS_PER_TENSOR if model.optimizer == "adamw" else SGD_OPS_PER_TENSOR
    return tensors * per + (zeroed_tensors or tensors)


def training_ops(model: ModelSpec, units: tuple[Unit, ...] | None = None, *, first: bool = True,
                 last: bool = True) -> int:
    """Operators of one micro-batch's forward and backward through ``units`` (default: the whole model), with
    the embedding where ``first`` and the head and loss where ``last`` (their units' counts)."""
    members = ((model.pre,) if first else ()) + (model.units if units is None else tuple(units)) + ((model.post,) if last else ())
    return sum(u.ops_forward + u.ops_backward for u in members)


@cache
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint rule on
    [-9, 9] in steps of 0.01 (to 1e-5 of Tippett's 1925 tables, Biometrika 17: 0.5642 for 2, 1.5388 for 10,
    2.5076 for 100, 3.2414 for 1000)."""
    if n <= 1:
        return 0.0
    unit = NormalDist()
    h = 0.01
    total = 0.0
    for i in range(1800):
        x = -9.0 + (i + 0.5) * h
        total += x * unit.pdf(x) * unit.cdf(x) ** (n - 1)
    return n * total * h


def slowest_of(c: Cluster, ranks: int) -> float:
    """How much longer than a typical device the slowest of ``ranks`` devices computes: 1 + spread x E[max of
    ``ranks`` standard normals] (``Cluster.rank_spread``). A synchronous step (every rank's gradients reduced
    together, every stage waiting for its neighbours) goes at that rank's pace, so the per-GPU rate falls as a
    run scales out even where its communication stays hidden."""
    return 1.0 + c.rank_spread * expected_max_normal(ranks) if c.rank_spread else 1.0


def oversubscription(c: Cluster, ranks: int) -> float:
    """CPU profiles: how much slower each rank computes with ``ranks`` ranks at once, each of ``Cluster.threads``
    intra-op threads: the slowdown of ranks x threads single-thread computations at once over that of the rank's own
    threads (its rates were measured with those threads busy: ``Cluster.with_threads``)."""
    return _concurrent_slowdown(c, ranks * c.threads) / _concurrent_slowdown(c, c.threads)


def _concurrent_slowdown(c: Cluster, n: int) -> float:
    """How much slower each of ``n`` single-thread computations runs at once than alone: calibrated factors where
    measured (linear between group sizes, n / cores-proportional beyond); else n / cores."""
    f = c.compute_slowdown
    if not f:
        return max(1.0, n / c.cores) if c.cores else 1.0
    if n in f:
        return f[n]
    lo = max((k for k in f if k < n), default=min(f))
    hi = min((k for k in f if k > n), default=None)
    if hi is None:
        return f[lo] * n / lo
    return f[lo] + (f[hi] - f[lo]) * (n - lo) / (hi - lo)


RANDOM_BYTES_PER_ELEMENT = 32  # drawing a random number costs ~8 float32 copies (estimate, not calibrated)


def data_time_s(c: Cluster, model: ModelSpec, samples: int) -> float:
    """Generating ``samples`` of a synthetic batch (the runner's workloads; each rank makes its own slice):
    one op per generation call (the transformer's bigram walk is one op per token) + the random draws."""
    return model.data_kernels * c.op_overhead_s + samples * model.data_elems_per_sample * RANDOM_BYTES_PER_ELEMENT / c.memory_bandwidth_bytes_per_s


def fp32_grad_pass_s(c: Cluster, elements: int) -> float:
    """One micro-batch's float32 gradient accumulation pass over ``elements`` parameters (memory-bound)."""
    return 2 * c.op_overhead_s + elements * FP32_GRAD_PASS_BYTES_PER_ELEMENT / c.stream_bandwidth
