"""A parallel layout to simulate: mesh degrees, micro-batching, schedule, ZeRO stage, recompute, dtypes.

Pure data with validation in ``__post_init__`` (every factor named; the mesh and batch rules are
``parbench.layout``'s, shared with ``RunConfig``), convertible from a ``RunConfig`` so that
validation predicts exactly what the runner ran.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

from parbench.config import RunConfig
from parbench.layout import ParallelLayout
from parbench.names import ConfigError, DataMode, DataParallelMode, Schedule, Strategy

RECOMPUTE_MODULES = ("layernorm", "moe_act", "mla_up_proj")
"""``Layout.recompute_modules``: Megatron-Core's ``recompute_modules`` names the model prices."""


class Recompute(str, enum.Enum):
    """Activation recomputation, as frameworks ship it (the per-layer ratio is ``Layout.recompute_every``).

    - none: every layer keeps all it saves for backward.
    - selective: the attention core (scores, softmax, its dropout) is recomputed, the rest kept
      (Korthikanti et al. 2022, sec. 5; Megatron-LM ``--recompute-activations``). Under flash
      attention the scores are never kept anyway, so this equals none.
    - ops: GEMM outputs are kept (every other one), elementwise ops recomputed (torchtitan's
      ``selective_ac_option = "op"``: a save list of matmuls and attention, every second matmul dropped).
    - full: only each layer's input is kept; the layer's forward runs again in backward (Chen et al.,
      "Training Deep Nets with Sublinear Memory Cost", 2016; Megatron ``--recompute-granularity full``).
    """

    NONE = "none"
    SELECTIVE = "selective"
    OPS = "ops"
    FULL = "full"


ATTENTION_KINDS = ("flash", "eager")
"""flash: tiled attention that never materialises the s x s scores and recomputes them in backward
(Dao et al., NeurIPS 2022); eager: scores written, softmaxed and kept for backward."""


GEMM_DTYPES = ("", "fp8", "tf32", "fp32")


@dataclass(frozen=True, kw_only=True)
class Precision:
    """Bytes per element of each kind of state (mixed precision: Micikevicius et al. 2018)."""

    param_bytes: int = 4
    grad_bytes: int = 4
    master_bytes: int = 0
    """A float32 master copy of the weights kept in the optimizer state (0 when params are fp32)."""
    moment_bytes: int = 4
    """Each Adam moment."""
    activation_bytes: int = 4
    gemm_dtype: str = ""
    """The peak matrix multiplies run at (``Cluster.gemm_peak_flops``): '' the cluster's training-dtype peak
    (``peak_flops``); ``fp8`` the FP8 peak (Micikevicius et al., "FP8 Formats for Deep Learning", 2022);
    ``tf32`` and ``fp32`` a float32 run's (TF32 tensor cores, or CUDA cores), where the cluster states them."""
    norm_input_bytes: int = 0
    """Bytes of each element of the residual stream, which the norms save for backward (0: ``activation_bytes``).
    torch.autocast keeps it float32: the embedding and the residual adds stay fp32 and layer_norm runs in fp32
    (autocast's fp32 op list), so only the Linears' inputs and outputs are bf16."""
    comm_bytes: int = 0
    """Bytes per element that gradient reductions and FSDP's parameter gathers carry (0: the gradients' and the
    parameters' own dtypes). parbench's bf16 runs keep float32 weights and gradients but reduce bf16 (a DDP
    comm hook, FSDP2's ``MixedPrecisionPolicy``, the pipeline's flat all-reduce)."""
    weight_cast_bytes: int = 0
    """Bytes per Linear parameter of a low-precision copy made in forward and kept for backward: torch.autocast
    casts each fp32 weight and bias once per autocast region and caches the copy, which the Linear's backward
    reads for the input gradient (2 for bf16; 0: weights are used in their own dtype)."""
    loss_scaling: bool = False
    """fp16's dynamic loss scaling (Micikevicius et al., "Mixed Precision Training", ICLR 2018, sec. 3.2): before
    each update the float32 gradients are unscaled and checked for inf/NaN (Megatron-LM's
    ``_unscale_main_grads_and_check_for_nan``, torch's ``_amp_foreach_non_finite_check_and_unscale_``). bf16's
    range needs none."""
    fp32_grad_accumulation: bool = False
    """bf16 training accumulates and reduces replicated gradients in float32: Megatron-LM forces it for bf16
    (``arguments.py``: "bfloat16 requires gradient accumulation and all-reduce to be done in fp32"), DeepSpeed's
    ``BF16_Optimizer`` keeps fp32 gradient accumulation buffers. fp16 keeps fp16 gradients (the ZeRO paper's
    2 + 2 + 12 bytes per parameter). See ``Layout.grad_elem_bytes``."""

    def __post_init__(self) -> None:
        for k in ("param_bytes", "grad_bytes", "moment_bytes", "activation_bytes"):
            if getattr(self, k) not in (1, 2, 4, 8):
                raise ConfigError(f"{k}={getattr(self, k)} must be 1, 2, 4 or 8 bytes")
        for k in ("norm_input_bytes", "weight_cast_bytes", "comm_bytes"):
            if getattr(self, k) not in (0, 1, 2, 4, 8):
                raise ConfigError(f"{k}={getattr(self, k)} must be 0 (none or the default), 1, 2, 4 or 8 bytes")
        if self.gemm_dtype not in GEMM_DTYPES:
            raise ConfigError(f"gemm_dtype={self.gemm_dtype!r}: one of {GEMM_DTYPES}")

    @property
    def residual_bytes(self) -> int:
        return self.norm_input_bytes or self.activation_bytes


PRECISIONS = {
    # float32 throughout; its matmuls on the CUDA cores, torch's default (torch.backends.cuda.matmul.allow_tf32 is
    # False), where the cluster states that peak (a CPU profile's one figure otherwise)
    "fp32": Precision(gemm_dtype="fp32"),
    # float32 tensors, matmuls on the TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32 = True; Ampere on)
    "tf32": Precision(gemm_dtype="tf32"),
    # torch.autocast(bfloat16) over fp32 weights, gradients and Adam state (parbench's own runs at --precision
    # bf16): Linears and attention compute and keep bf16, the residual stream stays fp32
    "amp": Precision(activation_bytes=2, norm_input_bytes=4, weight_cast_bytes=2, comm_bytes=2),
    # ZeRO paper (Rajbhandari et al. 2020, sec. 3.1): 2 + 2 + K bytes/param, K = 12 (fp32 master, m, v);
    # bf16 accumulates replicated gradients in fp32 (Precision.fp32_grad_accumulation)
    "bf16": Precision(param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, activation_bytes=2,
                      fp32_grad_accumulation=True),
    "fp16": Precision(param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, activation_bytes=2, loss_scaling=True),
    # FP8 GEMMs with the bf16 recipe's weights, gradients, fp32 master and moments (Transformer Engine,
    # torchao float8 training): only the matrix multiplies' inputs are cast
    "fp8": Precision(param_bytes=2, grad_bytes=2, master_bytes=4, moment_bytes=4, activation_bytes=2, gemm_dtype="fp8",
                     fp32_grad_accumulation=True),
}

FP8_SCALINGS = ("tensorwise", "delayed", "mxfp8")
"""``Layout.fp8_scaling``'s recipes (``parbench.sim.timing.FP8_CAST_BYTES``: the bytes each cast moves)."""

ZERO_STAGE = {Strategy.ZERO1: 1, Strategy.ZERO2: 2, Strategy.FSDP: 3}
MEGATRON_BUCKET_MIN_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
"""Megatron-Core's default gradient bucket: max(40M, 1M x dp) parameters (``Layout.megatron_grad_buckets``)."""


@dataclass(frozen=True, kw_only=True)
class Layout(ParallelLayout):
    """Where every rank sits and what it holds: the mesh and micro-batching (``ParallelLayout``, its
    rules included) plus what the simulator varies; world_size = dp x tp x pp x cp (+ servers for ps)."""

    DEGREES = (*ParallelLayout.DEGREES, "cp")
    strategy: Strategy = Strategy.SINGLE
    zero: int = 0
    """0: replicated optimizer (DDP); 1: optimizer state sharded; 2: + gradients; 3: + parameters (FSDP)."""
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    data_in_step: bool = False
    """The step's input is prepared inside the timed step (the runner's ``data_in_step``); False: ahead of
    it, off the critical path, as a loader's workers have it ready."""
    sp_saves_gathered_input: bool = False
    """Sequence parallelism keeps, for each column-parallel linear's weight gradient, its all-gathered input
    (e s b h per rank, not / tp): what autograd saves under torch DTensor's ``ColwiseParallel`` after the
    redistribute from ``Shard(1)`` (torchtitan). False: Megatron-LM's way, which keeps the sequence shard and
    all-gathers it again in backward (Korthikanti et al. 2022, sec. 4.2.2)."""
    tp_comm_overlap: bool = False
    """Tensor-parallel collectives decomposed and overlapped with their GEMMs (Megatron-Core's
    ``--tp-comm-overlap``; Wang et al., ASPLOS 2023); False: exposed on the critical path."""
    servers: int = 0
    """Parameter-server ranks (ps only)."""
    cp: int = 1
    """Context parallelism: each rank holds seq/cp tokens of every sample; K/V blocks travel around the
    ring of cp ranks (Liu et al., "Ring Attention", 2023). Weights are replicated over cp, so gradients
    are reduced (and ZeRO shards held) over dp x cp ranks."""
    expert_tp: int = 0
    """Megatron-Core's expert tensor parallelism (``--expert-tensor-parallel-size``), the ranks one routed expert's
    Linears are sharded over. 0: tp, Megatron-Core's default, the ep groups inside data parallelism (ep divides
    dp). 1 with tp > 1: whole experts, and the MoE layers take a mesh of their own over the same ranks
    ("expert parallel folding": ``parallel_state.initialize_model_parallel`` builds the expert ranks as
    etp x ep x expert-dp, etp innermost, over a stage's tp x cp x dp ranks), so ep divides tp x cp x dp and an ep
    group spans ep consecutive ranks, the tensor-parallel ones included. Each rank then routes its own sequence
    shard's tokens, and the routed experts' Linears issue no tensor-parallel collective (the shared experts
    keep theirs)."""
    replicate: int = 1
    """HSDP (zero=3): shard within groups of dp x cp / replicate ranks, all-reduce the gradient shards
    across the ``replicate`` groups (Zhao et al., "PyTorch FSDP", VLDB 2023, sec. 3.2.2)."""
    recompute_every: int = 1
    """With full recomputation: checkpoint every k-th layer only (1/k of the layers recomputed)."""
    recompute_modules: tuple[str, ...] = ()
    """Megatron-Core's module-level recomputation (``--recompute-modules``, beside ``recompute`` none or
    selective): ``layernorm`` drops both norms' outputs, recomputing them before the GEMMs' backward;
    ``moe_act`` drops the experts' activation output (their second GEMM's input), recomputed from the first
    GEMM's saved output. Both only where that tensor is the one the GEMM saved (not under ``te_fp8``, whose
    Linears keep an FP8 cast of their own); their replay is memory-bound (``timing.module_recompute_s``).
    ``mla_up_proj`` (multi-head latent attention) drops q, k and v, the up projections' outputs the attention
    kernel saved, and runs those two GEMMs again from the latents it keeps."""
    recompute_early_stop: bool = False
    """Full recomputation through torch's non-reentrant checkpoint (torch >= 2.1, ``use_reentrant=False``, its
    default ``early_stop``) or torch.compile's: the replay stops once it has re-saved every tensor the layer's
    backward reads. An operator saves its inputs before its kernel runs, so a dense block's last GEMM (the MLP's
    output projection, whose input is saved) and the residual add after it never run again; measured with a
    TorchDispatchMode on a Llama block: 7 of its 8 forward GEMM and attention calls replayed, 8 with
    ``set_checkpoint_early_stop(False)``; compiled, 6 of its 7 Linears. False: a reentrant checkpoint
    (Megatron-LM's and DeepSpeed's ``CheckpointFunction``, torch's ``use_reentrant=True``, torch < 2.1) re-runs
    the whole layer."""
    attention: str = "eager"
    attention_kernel: str = ""
    """Which flash kernel ran, where the source states it: a key of ``Cluster.attention_kernels`` (e.g.
    ``flash2``: FlashAttention-2, which torch's scaled_dot_product_attention runs since torch 2.2); '' =
    the device's default flash kernel (``Cluster.attention_efficiency``)."""
    pp_blocking_p2p: bool = False
    """DeepSpeed's pipeline engine: every pipeline send and receive is a blocking call of its own
    (``deepspeed/runtime/pipe/p2p.py``: ``send``/``recv`` assert ``async_op == False``), issued one after
    another between the compute instructions of its schedule (``RecvActivation``, ``ForwardPass``,
    ``SendActivation``, ``RecvGrad``, ``BackwardPass``, ``SendGrad``), so a micro-batch waits for its receives
    as well as its sends. False: Megatron-LM's and torch's batched isend/irecv, each receive running
    under the send it is paired with."""
    pp_scatter_gather: bool = False
    """Pipeline tensors sent in tensor-parallel slices: each of the tp ranks sends 1/tp of the activation (or its
    gradient) to its peer, and the receiving stage all-gathers the slices over its tp ranks before using them.
    DeepSpeed's pipeline engine does so wherever tp > 1 (``deepspeed/runtime/pipe/engine.py``:
    ``is_pipe_partitioned = is_model_parallel``, a ``PartitionedTensor`` over the slice-parallel group, whose
    ``full()`` all-gathers it; gradients alike, ``is_grad_partitioned``). Under sequence parallelism the tensors
    are already split. False: every tp rank sends the whole tensor (torch's pipelining, Megatron-Core)."""
    overlap_p2p_comm: bool = False
    """Megatron-LM's interleaved schedule with ``overlap_p2p_comm`` (its default: ``--no-overlap-p2p-communication``
    turns it off, and ``arguments.py`` forces it off for any other schedule; Megatron Bridge's
    ``CommOverlapConfig`` sets it wherever pp > 1 and vp > 1): each pipeline send and receive is issued
    asynchronously before another chunk's forward or backward and waited after it
    (``forward_backward_pipelining_with_interleaving`` in ``megatron/core/pipeline_parallel/schedules.py``),
    so the transfers run under the micro-batch's compute (``overlap.pipeline_send_exposed_s``). False: each
    transfer precedes the compute that needs it."""
    megatron_cross_entropy: bool = False
    """Megatron-LM's vocabulary-parallel cross-entropy (``megatron/core/tensor_parallel/cross_entropy.py``, also
    Megatron-DeepSpeed's and NeMo's): one float32 copy of the rank's logits, turned in place into the softmax it
    saves and in backward, again in place, into the gradient; beside it only the activations' dtype copy of
    that gradient handed back to the head (``parbench.sim.memory.loss_bytes``). False: torch's loss kernels."""
    compiled_loss: bool = False
    """A fused cross-entropy that keeps no float32 copy of the logits: the loss compiled with the model
    (torchtitan's ``training.compile`` compiles its loss function, ``torchtitan/components/loss.py``; Inductor
    fuses the float32 upcast into the log-softmax and its backward) or flash-attn's ``CrossEntropyLoss``
    (``flash_attn/losses/cross_entropy.py``, llm-foundry's MPT default ``loss_fn: fused_crossentropy``: it
    saves the logits as given and one float32 log-sum-exp per row, and returns the gradient in the logits'
    dtype). Either holds the e-byte logits and the e-byte gradient (``parbench.sim.memory.loss_bytes``)."""
    te_fp8: bool = False
    """FP8 through Transformer Engine's modules (Megatron-Core, NeMo): each weight is cast to FP8 on a step's
    first micro-batch and the cast reused by the others (``is_first_microbatch``), and each Linear saves its
    FP8-cast input for backward (``memory.activation_bytes_per_layer``). False with fp8: torchao's float8
    (torchtitan), which casts the weights on every forward and saves the inputs in bf16."""
    overlap_param_gather: bool = False
    """ZeRO-1 as Megatron-Core's distributed optimizer runs it with ``--overlap-param-gather`` ("overlap
    parameter all-gather with fprop", Megatron Bridge's argument table): the updated parameters are
    gathered bucket by bucket under the next step's first forward (``overlap.prefetch_exposed_s``).
    False: the gathers follow the optimizer step, exposed."""
    fp32_grad_pass_per_micro_batch: bool = False
    """DeepSpeed's bf16 optimizer under its pipeline engine: every micro-batch's backward zeroes the bf16
    gradients first (``clear_lp_grads``) and adds them into the float32 gradient buffer after
    (``BF16_Optimizer.update_hp_grads``, called from ``deepspeed/runtime/pipe/engine.py``
    ``_exec_backward_pass``): a memory-bound pass over the rank's parameters per micro-batch
    (``timing.FP32_GRAD_PASS_BYTES_PER_ELEMENT``). False: Megatron-LM accumulates into its float32 main
    gradients inside the weight-gradient GEMM (``gradient_accumulation_fusion``), torch's autograd in place."""
    megatron_grad_buckets: bool = False
    """Gradients bucketed as Megatron-Core's DDP buckets them (``Framework.megatron_ddp``): a bucket of
    ``max(40,000,000, 1,000,000 x dp)`` parameters, every bucket alike ("larger DP sizes need larger buckets to
    ensure collectives do not become latency-bound", ``DistributedDataParallelConfig.bucket_size``, the default
    set in ``megatron/core/distributed/distributed_data_parallel.py``), for both its all-reduce and its
    distributed optimizer's reduce-scatter and gather. False: torch DDP's 1 MiB first bucket, then 25 MiB.
    Megatron-Core buckets only the first pipeline stage's first model chunk: every other chunk reduces as one
    bucket, during the pipeline's drain (``comm.ddp_bucket_counts``, ``predict.step_terms``)."""
    clip_grad_norm: bool = False
    """Gradients clipped by their global norm before each update (``Framework.clips_gradients``): one more
    read of the optimizer's float32 gradients per step (``timing.optimizer_pass_bytes_per_element``). False:
    parbench's own runner, which does not clip."""
    fused_elementwise: bool = True
    """Elementwise chains (norms, rotary, the gated MLP's product) run as fused kernels: torch.compile, or
    Megatron's and Apex's fused kernels. False: eager torch, one kernel per operator, where the source
    states the run was not compiled."""
    fp8_all_gather: bool = False
    """Sharded weights are gathered as FP8, 1 byte each instead of the parameters' dtype (fp8 precision, zero >=
    1): FSDP2 under torchao's float8 all-gather (``enable_fsdp_float8_all_gather``: each rank casts its shard,
    then gathers it), or Megatron-Core's ``--fp8-param-gather`` under its distributed optimizer (the updated
    shard is written to FP8 parameters, which are gathered). Either way the weights reach the GEMMs already
    cast: each rank casts only its 1/``shard_group`` of them (``timing.chunk_times_s``)."""
    fp8_scaling: str = "tensorwise"
    """How FP8 casts are scaled, by Megatron-LM's ``--fp8-recipe`` names: ``tensorwise`` (dynamic per-tensor
    scaling: torchao's float8, Transformer Engine's current scaling), ``delayed`` (Transformer Engine's amax
    history) or ``mxfp8`` (32-element blocks, Blackwell). What each cast moves: ``timing.FP8_CAST_BYTES``. Kept
    at ``tensorwise`` unless the precision is fp8."""
    data_mode: DataMode = DataMode.SHARDED
    precision: Precision = field(default_factory=Precision)
    fsdp2: bool = False
    """torch FSDP2 semantics (what the runner uses for zero2/fsdp): parameters sharded at rest even at
    zero=2, each parameter's dim 0 padded to a multiple of dp. False: the ZeRO paper's textbook."""
    moe_imbalance: float = 1.0
    """Tokens the busiest expert rank exchanges relative to balanced routing (max/mean >= 1): scales
    its all-to-all bytes and time. 1 = balanced (bytes then equal the runner's balanced router's)."""
    moe_a2a_overlap: bool = False
    """Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-comm``): the forward of one micro-batch runs
    beside the backward of another, layer by layer, and each one's token all-to-alls hide under the other's
    attention and MLP compute ("EP A2A in forward step is hidden by the attention/mlp computation in the backward
    step, and vice versa": ``megatron.core.pipeline_parallel.combined_1f1b``). It needs ep > 1, and an interleaved
    schedule where pp > 1 (Megatron Bridge's checks); NVIDIA advises against it under full recomputation.
    ``overlap.expert_exchange_exposed_s``. False: the experts wait for their tokens, exposed in full."""
    moe_saved_outputs: int = 2
    """Copies of each expert assignment's output an MoE block keeps for backward (``memory.moe_mlp_bytes``).
    2: the output weighted by its router probability after the experts, then summed per token with
    ``index_add``, whose backward keeps its source (the runner's ``MoE``; transformers' Mixtral); 1: the same
    weighting summed with ``scatter_add``, which keeps only its index (torchtitan); 0: the probability
    multiplied inside the activation function (Megatron-Core's grouped experts, ``weighted_bias_swiglu_impl``),
    which recomputes what that gradient needs from the first GEMM's saved output."""
    flat_grad_allreduce: bool = False
    """Gradients all-reduced as one flat buffer per stage after the pipeline's flush instead of in DDP's buckets
    under backward: the runner's hybrid dp x pp (DDP cannot wrap a pipeline stage in torch 2.13), and DeepSpeed's
    pipeline engine (``_exec_reduce_grads`` after the last backward; under ZeRO-1 its BF16 optimizer then
    all-gathers the updated bf16 weights, ``comm._grad_ops``), which refuses ZeRO-2 and 3."""
    chunk_layers: tuple[int, ...] = ()
    """Layers of every pipeline chunk in chunk order (pp x virtual stages of them; chunk c on rank c mod pp,
    the embedding on the first, the head and loss on the last): Megatron-LM's ``pipeline_model_parallel_layout``,
    which recipes set to balance the head. Empty: contiguous chunks, the earlier taking the remainder."""

    def __post_init__(self) -> None:
        if self.expert_tp not in (0, 1, self.tp):
            raise ConfigError(f"expert_tp={self.expert_tp} must be 1 or tp={self.tp} (0: tp)")
        self.check_layout()
        for k in ("replicate", "recompute_every"):
            if getattr(self, k) < 1:
                raise ConfigError(f"{k}={getattr(self, k)} must be >= 1")
        if self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"zero={self.zero} must be 0, 1, 2 or 3")
        if self.sequence_parallel and self.tp == 1:
            raise ConfigError("sequence_parallel needs tp > 1")
        if self.sp_saves_gathered_input and not self.sequence_parallel:
            raise ConfigError("sp_saves_gathered_input needs sequence_parallel")
        if self.pp_blocking_p2p and self.pp == 1:
            raise ConfigError("pp_blocking_p2p needs pp > 1")
        if self.pp_scatter_gather and self.pp == 1:
            raise ConfigError("pp_scatter_gather needs pp > 1")
        if self.overlap_p2p_comm and (self.pp == 1 or self.schedule is not Schedule.INTERLEAVED_1F1B or self.pp_blocking_p2p):
            raise ConfigError("overlap_p2p_comm is Megatron-LM's interleaved schedule: it needs pp > 1, "
                              "schedule interleaved1f1b and no blocking (DeepSpeed) p2p")
        if self.te_fp8 and self.precision.gemm_dtype != "fp8":
            raise ConfigError("te_fp8 needs precision fp8")
        if self.overlap_param_gather and (self.zero != 1 or self.fsdp2):
            raise ConfigError("overlap_param_gather is Megatron's distributed optimizer: it needs zero=1 (not torch's)")
        if self.fp32_grad_pass_per_micro_batch and not (self.precision.fp32_grad_accumulation and self.zero <= 2):
            raise ConfigError("fp32_grad_pass_per_micro_batch needs float32 gradient accumulation (bf16 or fp8) "
                              "and zero <= 2")
        if self.tp_comm_overlap and self.tp == 1:
            raise ConfigError("tp_comm_overlap needs tp > 1")
        if self.attention not in ATTENTION_KINDS:
            raise ConfigError(f"attention={self.attention!r}; valid: {', '.join(ATTENTION_KINDS)}")
        if self.attention_kernel and self.attention != "flash":
            raise ConfigError(f"attention_kernel={self.attention_kernel!r} needs attention='flash'")
        if self.replicate > 1 and (self.zero != 3 or (self.dp * self.cp) % self.replicate):
            raise ConfigError(f"replicate={self.replicate} needs zero=3 and to divide dp x cp = {self.dp} x {self.cp}")
        unknown = set(self.recompute_modules) - set(RECOMPUTE_MODULES)
        if unknown:
            raise ConfigError(f"recompute_modules {', '.join(sorted(unknown))}: valid {', '.join(RECOMPUTE_MODULES)}")
        if self.recompute_modules and self.recompute not in (Recompute.NONE, Recompute.SELECTIVE):
            raise ConfigError(f"recompute_modules apply with recompute none or selective, not {self.recompute.value} "
                              f"(which replays the modules anyway)")
        if self.recompute_every > 1 and self.recompute is not Recompute.FULL:
            raise ConfigError(f"recompute_every={self.recompute_every} applies to recompute=full only")
        if self.moe_saved_outputs not in (0, 1, 2):
            raise ConfigError(f"moe_saved_outputs={self.moe_saved_outputs} must be 0, 1 or 2")
        if self.moe_a2a_overlap and (self.ep < 2 or (self.pp > 1 and self.schedule is not Schedule.INTERLEAVED_1F1B)):
            raise ConfigError("moe_a2a_overlap (Megatron-Core's combined 1F1B) needs ep > 1, and schedule "
                              f"interleaved1f1b where pp > 1 (got ep={self.ep}, pp={self.pp}, {self.schedule.value})")
        if not 1 <= self.moe_imbalance < math.inf:  # nan and inf too
            raise ConfigError(f"moe_imbalance={self.moe_imbalance} must be a finite number >= 1 (max/mean tokens per expert rank)")
        if self.chunk_layers and (len(self.chunk_layers) != self.chunks or min(self.chunk_layers) < 0):
            raise ConfigError(f"chunk_layers={self.chunk_layers} must give pp x virtual stages = {self.chunks} "
                              f"chunks of >= 0 layers")
        if self.fp8_all_gather and (self.precision.gemm_dtype != "fp8" or self.zero < 1):
            raise ConfigError("fp8_all_gather needs precision fp8 and sharded weights (zero >= 1: FSDP's float8 "
                              "all-gather, or Megatron's --fp8-param-gather under its distributed optimizer)")
        if self.fp8_scaling not in FP8_SCALINGS:
            raise ConfigError(f"fp8_scaling={self.fp8_scaling!r} must be one of {', '.join(FP8_SCALINGS)}")
        if self.fp8_scaling != "tensorwise" and self.precision.gemm_dtype != "fp8":
            raise ConfigError(f"fp8_scaling={self.fp8_scaling!r} needs precision fp8")

    @property
    def world_size(self) -> int:
        return self.mesh_size + (self.servers if self.strategy is Strategy.PS else 0)

    @property
    def etp(self) -> int:
        """The ranks one routed expert's Linears are sharded over (``expert_tp``; 0 means tp)."""
        return self.expert_tp or self.tp

    @property
    def whole_experts(self) -> bool:
        """Routed experts held whole under tensor parallelism: expert-parallel folding (``expert_tp`` 1, tp > 1)."""
        return self.etp == 1 < self.tp

    @property
    def ep_ranks(self) -> int:
        """Ranks the ep groups are drawn from: the data-parallel ones, or with whole experts every tensor-,
        context- and data-parallel rank of a stage."""
        return self.tp * self.cp * self.dp if self.whole_experts else self.dp

    def ep_misfit(self) -> str:
        if not self.whole_experts:
            return super().ep_misfit()
        return (f"ep={self.ep} does not divide tp x cp x dp = {self.tp} x {self.cp} x {self.dp} = {self.ep_ranks} "
                "(with expert_tp=1 the ep groups fold over the tensor-, context- and data-parallel ranks)")

    @property
    def expert_shard_group(self) -> int:
        """Ranks one rank's experts' ZeRO shards are spread over: the shard group's ranks holding its experts."""
        return max((self.tp if self.whole_experts else 1) * self.shard_group // self.ep, 1)

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts, over which their gradients are reduced (and ZeRO shards held)."""
        return self.ep_ranks // self.ep

    @property
    def split(self) -> int | tuple[int, ...]:
        """How the pipeline splits the layers (``parbench.sim.stages.stages``): the layers of every chunk where
        the layout names them, else the chunks per rank."""
        return self.chunk_layers or self.v

    @property
    def shard_group(self) -> int:
        """Ranks a ZeRO/FSDP shard is split over: dp x cp, divided into ``replicate`` HSDP groups."""
        return self.dp * self.cp // self.replicate

    @property
    def grad_elem_bytes(self) -> int:
        """Bytes per gradient element as held and reduced: float32 under ``fp32_grad_accumulation`` while the
        parameters are replicated (zero <= 2: DeepSpeed's ZeRO-2 keeps float32 gradient partitions too);
        sharded parameters (zero=3) keep the precision's figure, the float32 shard of FSDP standing for the
        master copy (the same 16 bytes per parameter in all)."""
        if self.precision.fp32_grad_accumulation and self.zero <= 2:
            return 4
        return self.precision.grad_bytes

    @property
    def grad_bucket_elements(self) -> int:
        """Parameters per gradient bucket under ``megatron_grad_buckets`` (0: torch DDP's byte caps)."""
        return max(MEGATRON_BUCKET_MIN_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * self.dp) if self.megatron_grad_buckets else 0

    @property
    def grad_reduce_bytes(self) -> int:
        """Bytes per gradient element as reduced over the data-parallel ranks (``Precision.comm_bytes``)."""
        return self.precision.comm_bytes or self.grad_elem_bytes

    @property
    def gather_elem_bytes(self) -> int:
        """Bytes per element of a sharded parameter's all-gather, and of the gathered copy: the parameters'
        dtype (float32 gradient accumulation leaves the weights in bf16), the communication dtype where the
        precision names one (FSDP2's ``param_dtype``). Where FP8 weights are gathered, the blocks' Linear weights
        take 1 byte instead (``comm.gathered_bytes``; ``fp8_gathered_elem_bytes``)."""
        return self.precision.comm_bytes or self.precision.param_bytes

    @property
    def fp8_gathered_elem_bytes(self) -> int:
        """Bytes per gathered element of a block's Linear weight: 1 where FP8 weights are gathered."""
        return 1 if self.fp8_all_gather else self.gather_elem_bytes

    @property
    def recomputed_fraction(self) -> float:
        """Share of the layers whose forward runs again in backward (full recomputation)."""
        return 1.0 / self.recompute_every if self.recompute is Recompute.FULL else 0.0


@dataclass(frozen=True, kw_only=True)
class Framework:
    """What the training software does with any layout, as ``Layout`` flags: each applies where the layout
    allows it (the param-gather overlap under ZeRO-1, DeepSpeed's blocking p2p under a pipeline, its float32
    gradient pass where gradients are float32 and replicated, its gradient all-reduce after the flush, Megatron-LM's overlapped p2p under its
    interleaved schedule, Transformer Engine's FP8 modules under FP8, sequence parallelism and the
    tensor-parallel overlap where tp > 1). ``SOFTWARE`` names the frameworks' own sets."""

    attention_kernel: str = ""
    te_fp8: bool = False
    fp8_scaling: str = "tensorwise"
    """``Layout.fp8_scaling`` under fp8: the software's default FP8 recipe."""
    fused_elementwise: bool = True
    overlap_param_gather: bool = False
    deepspeed_pipeline: bool = False
    overlap_p2p_comm: bool = False
    megatron_cross_entropy: bool = False
    compiled_loss: bool = False
    pipeline_scatter_gather: bool = False
    """``Layout.pp_scatter_gather``: pipeline tensors sent in tensor-parallel slices, as the Megatron-LM of 2021-22
    did (``scatter_gather_tensors_in_pipeline``, on unless ``--no-scatter-gather-tensors-in-pipeline``: Narayanan
    et al. SC21, sec. 4.1); DeepSpeed's pipeline engine (``deepspeed_pipeline``) always does."""
    tensor_parallel_overlap: bool = False
    """Sequence parallelism, and the tensor-parallel collectives overlapped with their GEMMs (Transformer
    Engine's userbuffers), wherever tp > 1."""
    reduce_grads_in_bf16: bool = False
    """Replicated gradients accumulated and reduced in bf16 (``grad_reduce_in_fp32 = False``) under bf16/FP8."""
    recompute_early_stop: bool = False
    """Activation checkpointing through torch's non-reentrant checkpoint (``Layout.recompute_early_stop``)."""
    moe_saved_outputs: int = 2
    """``Layout.moe_saved_outputs``: how the software's MoE block weights its experts' outputs."""
    megatron_ddp: bool = False
    """``Layout.megatron_grad_buckets``: Megatron-Core's DDP and distributed optimizer bucket the gradients."""
    grad_reduce_after_flush: bool = False
    """``Layout.flat_grad_allreduce`` (zero <= 1): the gradients all-reduced as one buffer after the pipeline flush,
    not under backward, as Megatron-LM did before its ``--overlap-grad-reduce`` (its README then: "performs gradient
    all-reduce at the end of back propagation step"; Narayanan et al. SC21, Korthikanti et al. 2022)."""
    fsdp2: bool = False
    """``Layout.fsdp2``: its sharded data parallelism is torch's FSDP2 (``fully_shard``), parameters sharded at rest."""
    dtensor_sequence_parallel: bool = False
    """Sequence parallelism wherever tp > 1, as torch DTensor's tensor-parallel plan runs it (``SequenceParallel``
    norms, ``ColwiseParallel`` from ``Shard(1)``): the all-gathered input kept for backward
    (``Layout.sp_saves_gathered_input``)."""
    clips_gradients: bool = False
    """``Layout.clip_grad_norm``: the software clips gradients by their global norm by default (Megatron-LM's
    ``--clip-grad`` 1.0, DeepSpeed's ``gradient_clipping`` in the Megatron-DeepSpeed recipes, torchtitan's
    ``max_norm`` 1.0, llm-foundry's ``clipping_threshold`` 1.0, NeMo's ``clip_grad`` 1.0)."""
    fp8_param_gather: bool = False
    """``Layout.fp8_all_gather`` under fp8 and the distributed optimizer (zero=1), but for MXFP8, whose parameters
    Megatron-Core gathers in bf16 into the gradient buffer (``reuse_grad_buf_for_mxfp8_param_ag``): NVIDIA's
    recipes keep FP8 parameters and gather them so (Megatron-Bridge's and NeMo 2's mixed-precision presets for
    delayed and current scaling set ``fp8_param_gather``; DGX Cloud's NeMo 1 recipes pass ``model.fp8_params``)."""

    def layout_flags(self, *, pp: int, zero: int, precision: Precision, schedule: Schedule = Schedule.ONE_F_ONE_B) -> dict:
        fp8 = precision.gemm_dtype == "fp8"
        return dict(attention_kernel=self.attention_kernel, te_fp8=self.te_fp8 and fp8,
                    fp8_scaling=self.fp8_scaling if fp8 else "tensorwise",
                    fp8_all_gather=self.gathers_fp8(zero=zero, precision=precision),
                    fused_elementwise=self.fused_elementwise,
                    overlap_param_gather=self.overlap_param_gather and zero == 1,
                    pp_blocking_p2p=self.deepspeed_pipeline and pp > 1,
                    pp_scatter_gather=(self.pipeline_scatter_gather or self.deepspeed_pipeline) and pp > 1,
                    overlap_p2p_comm=(self.overlap_p2p_comm and pp > 1 and schedule is Schedule.INTERLEAVED_1F1B
                                      and not self.deepspeed_pipeline),
                    megatron_cross_entropy=self.megatron_cross_entropy, compiled_loss=self.compiled_loss,
                    recompute_early_stop=self.recompute_early_stop, moe_saved_outputs=self.moe_saved_outputs,
                    clip_grad_norm=self.clips_gradients, megatron_grad_buckets=self.megatron_ddp, fsdp2=self.fsdp2,
                    fp32_grad_pass_per_micro_batch=(self.deepspeed_pipeline and zero <= 2
                                                    and precision.fp32_grad_accumulation),
                    flat_grad_allreduce=(self.deepspeed_pipeline and pp > 1 or self.grad_reduce_after_flush) and zero <= 1)

    def gathers_fp8(self, *, zero: int, precision: Precision, fp8_scaling: str = "") -> bool:
        """``Layout.fp8_all_gather`` as the software sets it (``fp8_param_gather``) for this ZeRO stage, precision
        and FP8 recipe (default: the software's own)."""
        return (self.fp8_param_gather and precision.gemm_dtype == "fp8" and zero == 1
                and (fp8_scaling or self.fp8_scaling) != "mxfp8")

    def tp_flags(self, tp: int) -> dict:
        """Sequence parallelism and the tensor-parallel overlap, where the software turns them on and tp > 1 (the
        gathered input DTensor's sequence parallelism keeps: ``dtensor_sequence_parallel`` and the final choice)."""
        on = self.tensor_parallel_overlap and tp > 1
        return {"sequence_parallel": on or (self.dtensor_sequence_parallel and tp > 1), "tp_comm_overlap": on}

    def precision_for(self, precision: Precision) -> Precision:
        """The precision as the software runs it: bf16 gradient reduction where it reduces in bf16."""
        if self.reduce_grads_in_bf16 and precision.fp32_grad_accumulation:
            return replace(precision, fp32_grad_accumulation=False)
        return precision


SOFTWARE: dict[str, Framework] = {
    "torch": Framework(recompute_early_stop=True),
    "torchtitan": Framework(attention_kernel="flash2", compiled_loss=True, recompute_early_stop=True, moe_saved_outputs=1,
                            clips_gradients=True, fsdp2=True, dtensor_sequence_parallel=True),
    "megatron-lm": Framework(fp8_scaling="delayed", overlap_p2p_comm=True, megatron_cross_entropy=True, moe_saved_outputs=0,
                             clips_gradients=True, megatron_ddp=True),
    "megatron-lm-2021": Framework(overlap_p2p_comm=True, megatron_cross_entropy=True, moe_saved_outputs=0,
                                  clips_gradients=True, megatron_ddp=True, pipeline_scatter_gather=True,
                                  grad_reduce_after_flush=True),
    "megatron-deepspeed": Framework(deepspeed_pipeline=True, megatron_cross_entropy=True, moe_saved_outputs=0,
                                    clips_gradients=True),
    "llm-foundry": Framework(compiled_loss=True, recompute_early_stop=True, clips_gradients=True),
    "nemo": Framework(attention_kernel="flash3", te_fp8=True, fp8_scaling="delayed", overlap_param_gather=True, overlap_p2p_comm=True,
                      megatron_cross_entropy=True, tensor_parallel_overlap=True, reduce_grads_in_bf16=True,
                      moe_saved_outputs=0, clips_gradients=True, megatron_ddp=True, fp8_param_gather=True),
}
"""Training software by name (``parbench simulate --software``): torch's own (FSDP2, DTensor); torchtitan with
``training.compile`` (torch's scaled_dot_product_attention, FlashAttention-2 on these GPUs, and the loss compiled
with the model; ``--unfused-elementwise`` makes it eager, its loss too); MosaicML's llm-foundry (FSDP through
Composer, flash-attn's fused cross-entropy, ``Layout.compiled_loss``); the three checkpoint through torch's
non-reentrant checkpoint (torchtitan's and torch's ``checkpoint_wrapper`` default, llm-foundry's benchmark
script sets ``activation_checkpointing_reentrant: False``); Megatron-LM
(its interleaved schedule's overlapped sends, its vocabulary-parallel cross-entropy); Megatron-LM as the 2021-22
papers ran it (Narayanan et al. SC21, Korthikanti et al.: pipeline tensors in tensor-parallel slices, gradients
all-reduced after the flush); Megatron-DeepSpeed
(DeepSpeed's pipeline engine around Megatron's layers); and NVIDIA's NeMo / Megatron-Bridge performance
recipes: Transformer Engine's FP8 modules under FP8, FP8 parameters gathered as such (but MXFP8's), the
distributed optimizer's overlapped parameter gather, overlapped pipeline sends, sequence parallelism with the tensor-parallel overlap, gradients reduced
in bf16, and the Hopper attention kernel (``parbench.sim.published_memory._nvidia``, the recipes' files).
Megatron-LM and NeMo bucket the gradients as Megatron-Core does (``Layout.megatron_grad_buckets``) and scale FP8
with Transformer Engine's delayed recipe (Megatron-LM's ``--fp8-recipe`` default; NeMo's 2024 recipes; Megatron
Bridge's later ones choose ``tensorwise`` on Hopper and ``mxfp8`` on Blackwell: ``--fp8-scaling``), the others
per tensor as torchao does; every software but torch's clips gradients by their global norm
(``Layout.clip_grad_norm``)."""


RUN_PRECISIONS = {"fp32": Precision(gemm_dtype="fp32"), "tf32": Precision(gemm_dtype="tf32"), "bf16": PRECISIONS["amp"]}
"""The runner's ``--precision`` as the simulator's: float32 matmuls at the device's float32 or TF32 peak
(a CPU profile's one calibrated peak), bf16 as torch.autocast (``parbench.strategies.precision``)."""


def layout_from_run(cfg: RunConfig) -> Layout:
    """The layout the runner builds for ``cfg`` (hybrid with dp_mode=fsdp shards like ZeRO-3)."""
    zero = ZERO_STAGE.get(cfg.strategy, 0)
    if cfg.strategy is Strategy.HYBRID and cfg.dp_mode is DataParallelMode.FSDP:
        zero = 3
    uses_pipeline = cfg.uses_pipeline
    # ep all-reduces its gradients by hand, as flat buffers (parbench.strategies.expert_parallel)
    flat = (cfg.strategy is Strategy.HYBRID and cfg.pp > 1 and zero == 0) or cfg.strategy is Strategy.EP or cfg.ep > 1
    return Layout(fsdp2=True, flat_grad_allreduce=flat, strategy=cfg.strategy, dp=cfg.dp, tp=cfg.tp, pp=cfg.pp,
                  global_batch_size=cfg.global_batch_size,
                  micro_batches=cfg.micro_batches, schedule=cfg.schedule if uses_pipeline else Schedule.ONE_F_ONE_B,
                  virtual_stages=cfg.virtual_stages if uses_pipeline else 1, zero=zero,
                  servers=cfg.servers if cfg.strategy is Strategy.PS else 0, data_mode=cfg.data_mode,
                  ep=getattr(cfg, "ep", 1) or 1, data_in_step=cfg.data_in_step,
                  # every decoder workload calls scaled_dot_product_attention(is_causal=True): torch's flash kernel
                  attention="eager" if cfg.workload.name == "mlp" else "flash",
                  fused_elementwise=False,  # eager torch: one kernel per operator, nothing compiled
                  precision=RUN_PRECISIONS[cfg.precision])
