"""The workloads' shapes without torch: parameter tensors per pipeline unit, FLOPs, boundary activations.

Mirrors ``parbench.workloads`` (mlp: Linear+ReLU units; transformer: nanoGPT-style pre-LN blocks with
separate q/k/v projections, token+position embeddings as ``pre``, final LayerNorm + untied head as
``post``) so byte counts derived from these shapes equal what the runner's meters count; any other
decoder (``parbench.sim.architecture``: GQA, gated MLP, tied embeddings, RMSNorm) takes the same form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import cached_property, lru_cache

from parbench.config import WorkloadConfig
from parbench.sim.architecture import Architecture

MLP_IN_FEATURES = 28 * 28
MLP_CLASSES = 10
INT64_BYTES = 8


@dataclass(frozen=True, kw_only=True)
class Tensor:
    """One parameter tensor: its name and shape (rows first, as torch stores it)."""

    name: str
    shape: tuple[int, ...]
    tp_split: str = "none"
    """How tensor parallelism shards it: ``rows`` (column-wise Linear), ``cols`` (row-wise Linear),
    ``none`` (replicated: LayerNorm, embeddings, head, biases of row-wise Linears)."""
    expert: int = -1
    """Index of the expert this tensor belongs to in its MoE layer; -1 for every other tensor."""
    linear: bool = False
    """A Linear layer's weight or bias: what autocast casts to the matmul dtype (``Precision.weight_cast_bytes``)."""

    @cached_property
    def numel(self) -> int:
        return math.prod(self.shape)

    def local_numel(self, tp: int) -> int:
        """Elements one tensor-parallel rank stores (Shard(0) for ``rows``, Shard(1) for ``cols``)."""
        if tp == 1 or self.tp_split == "none":
            return self.numel
        if self.tp_split == "rows":
            return -(-self.shape[0] // tp) * (self.numel // self.shape[0])
        return self.shape[0] * -(-self.shape[1] // tp)


@dataclass(frozen=True, kw_only=True)
class Gemm:
    """One matrix multiply of the forward pass per sample: (m x k) @ (k x n), m counted per sample."""

    m: int
    k: int
    n: int
    batched: int = 1
    """Independent products of this shape (attention heads)."""
    tp_sharded: bool = True
    """Whether tensor parallelism divides this GEMM's work by tp."""
    keys: int = 0
    """Attention core of a sliding window: the keys a query sees at most (``Architecture.window``), which this
    product's n (QK^T) or k (AV) already counts; 0 = causal over all m tokens."""
    chunked: bool = False
    """With ``keys``: the window is a chunk (``Architecture.window_chunked``), each query seeing the earlier keys of its
    own chunk, half the m x keys the product counts, not a band of m keys - keys^2 / 2."""
    head: bool = False
    """An output head (hidden -> vocabulary), which FP8 recipes keep in bf16: torchtitan's float8 converter skips
    the module named "output", Megatron-Core's output layer is not a Transformer Engine layer."""

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n * self.batched


@dataclass(frozen=True, kw_only=True)
class Unit:
    """A pipeline unit (mlp Dense, transformer Block) or the pre/post modules around them."""

    params: tuple[Tensor, ...]
    gemms: tuple[Gemm, ...]
    out_elems_per_sample: int
    """Elements of this unit's output per sample (what a pipeline boundary after it sends)."""
    elementwise_elems_per_sample: int = 0
    """Elements touched by memory-bound ops (norms, activations, residual adds) per sample, forward."""
    unfused_fp32_elems_per_sample: int = 0
    """Eager torch (no compiler, no fused kernels): float32 elements the forward's unfused elementwise chains
    read and write beyond ``elementwise_elems_per_sample`` (``eager_elementwise``)."""
    unfused_act_elems_per_sample: int = 0
    """Eager torch: activation-dtype elements those chains read and write beyond the fused count."""
    tp_row_allreduces: int = 0
    """Row-wise Linears: one forward all-reduce of their output each under tensor parallelism."""
    tp_col_inputs: tuple[int, ...] = ()
    """Input widths (per token/sample) of the column-wise Linears: one backward all-reduce each."""
    tp_row_out: int = 0
    """Output width per sample of the row-wise Linears (the forward all-reduce's size per sample)."""
    routed_tp_collectives: tuple[int, tuple[int, ...]] = (0, ())
    """Of an MoE block's tensor-parallel collectives, those of its routed experts' MLP: (row-wise outputs,
    column-wise input widths). Whole experts (``Layout.whole_experts``) issue none of them."""
    ops_forward: int = 0
    """aten operator calls of the forward pass (each pays the per-op overhead; counted with a
    TorchDispatchMode on the runner's modules, as ``parbench.sim.calibrate.count_aten_ops`` does)."""
    ops_backward: int = 0
    """aten operator calls of its backward pass."""
    transcendental_elems_per_sample: int = 0
    """Elements that pass through an exp- or erf-based function per sample, forward (GELU or SiLU over the
    MLP's hidden width, the softmax of the cross-entropy over the classes or vocabulary, an MoE router's
    softmax). Their backward evaluates it again (``Cluster.transcendental_s_per_element``)."""
    score_elems_per_sample: int = 0
    """Attention score elements (heads x s x s) an eager attention writes and reads; flash attention
    never materialises them (Dao et al., "FlashAttention", NeurIPS 2022)."""
    moe_assignments_per_sample: tuple[int, ...] = ()
    """MoE blocks: token assignments each expert keeps per sample (sequence), under balanced routing
    (token t to experts (t k + j) mod E) and the capacity; () for dense units."""
    mtp: bool = False
    """A multi-token-prediction layer (``mtp_unit``): it sits after the blocks on the last chunk and computes a
    loss of its own."""

    def param_numel(self, tp: int = 1) -> int:
        return sum(self.local_numels(tp))

    def local_numels(self, tp: int = 1) -> tuple[int, ...]:
        """Each parameter tensor's tensor-parallel-local elements, in order (``Tensor.local_numel``), worked out
        once per tp: a layout search asks for every unit's at each of its layouts (an MoE block of 256
        experts holds 768 tensors)."""
        return self._local(tp)[0]

    def expert_numel(self, tp: int = 1) -> int:
        """Tensor-parallel-local elements of the unit's experts' tensors."""
        return self._local(tp)[1]

    def _local(self, tp: int) -> tuple[tuple[int, ...], int]:
        if tp not in self._by_tp:
            numels = tuple(t.local_numel(tp) for t in self.params)
            self._by_tp[tp] = numels, sum(n for n, t in zip(numels, self.params) if t.expert >= 0)
        return self._by_tp[tp]

    @cached_property
    def _by_tp(self) -> dict[int, tuple[tuple[int, ...], int]]:
        return {}

    @cached_property
    def shape_key(self) -> int:
        """One number per distinct unit up to its parameters' names: units with equal keys take equal time and
        memory and send the same bytes (a model's identical layers are computed once per prediction; an int
        hashes at no cost)."""
        params = tuple((t.shape, t.tp_split, t.expert, t.linear) for t in self.params)
        key = (params, *(getattr(self, f.name) for f in fields(self) if f.name != "params"))
        return _SHAPE_KEYS.setdefault(key, len(_SHAPE_KEYS))


_SHAPE_KEYS: dict[tuple, int] = {}
"""Unit shapes seen in this process -> their ``Unit.shape_key`` (a few per model)."""


@dataclass(frozen=True, kw_only=True, eq=False)  # identity hash: cheap cache key for the per-stage figures
class ModelSpec:
    name: str
    pre: Unit
    units: tuple[Unit, ...]
    post: Unit
    input_bytes_per_sample: int
    label_bytes_per_sample: int
    tokens_per_sample: int
    hidden: int
    layers: int
    heads: int
    seq_len: int
    vocab: int
    optimizer: str
    """``adamw`` (two moments + a float32 ``step`` tensor per parameter) or ``sgd`` (no state)."""
    megatron: bool = False
    data_kernels: int = 0
    """Operator calls that generate one step's synthetic batch (every rank that needs data builds the global batch)."""
    data_elems_per_sample: int = 0
    """Random elements drawn per sample of that batch."""
    tensors: tuple[Tensor, ...] = field(default=(), repr=False)
    arch: Architecture | None = None
    """The transformer's architecture (None for the mlp)."""
    buffer_bytes: int = 0
    """Module buffers DDP broadcasts from rank 0 before every forward (transformers' rotary embedding keeps
    ``inv_freq`` and ``original_inv_freq``, head_dim / 2 float32 each)."""
    embedding_copy: Tensor | None = None
    """The copy of the word embedding the last pipeline stage holds when it is not the first: the tied head's
    weight, or the embedding multi-token prediction looks its tokens up in (Megatron-LM keeps the copies in
    sync with an all-reduce of their gradients over the stages that hold one)."""

    @property
    def param_numel(self) -> int:
        return self.pre.param_numel() + sum(u.param_numel() for u in self.units) + self.post.param_numel()

    @cached_property
    def blocks(self) -> int:
        """Units an even pipeline split divides: all but the multi-token-prediction layers, which join the last chunk."""
        return sum(not u.mtp for u in self.units)

    @cached_property
    def forward_flops_per_sample(self) -> int:
        """Sum of the GEMMs' 2mkn; equals ``Workload.forward_flops_per_sample`` (Kaplan et al. 2020)."""
        return sum(g.flops for u in (self.pre, *self.units, self.post) for g in u.gemms)


def _linear(name: str, fan_in: int, fan_out: int, *, bias: bool = True, split: str = "none") -> tuple[Tensor, ...]:
    weight = Tensor(name=f"{name}.weight", shape=(fan_out, fan_in), tp_split=split, linear=True)
    if not bias:
        return (weight,)
    bias_split = "rows" if split == "rows" else "none"  # column-wise shards its bias, row-wise replicates it
    return weight, Tensor(name=f"{name}.bias", shape=(fan_out,), tp_split=bias_split, linear=True)


def mlp_spec(cfg: WorkloadConfig) -> ModelSpec:
    """784 -> hidden x layers -> 10 (parbench.workloads.mlp); units pair column/row-wise under TP."""
    w = [MLP_IN_FEATURES] + [cfg.hidden] * cfg.layers + [MLP_CLASSES]
    n = len(w) - 1
    units = []
    for i, (a, b) in enumerate(zip(w, w[1:])):
        paired = (n - (n % 2)) > i  # an odd last layer stays replicated
        split = ("rows" if i % 2 == 0 else "cols") if paired else "none"
        units.append(Unit(
            params=_linear(f"units.{i}.fc", a, b, split=split),
            gemms=(Gemm(m=1, k=a, n=b, tp_sharded=paired),),
            out_elems_per_sample=b, elementwise_elems_per_sample=2 * b,
            tp_row_allreduces=1 if split == "cols" else 0,
            tp_row_out=b if split == "cols" else 0,
            tp_col_inputs=(a,) if split == "rows" else (),
            ops_forward=4, ops_backward=11))
    empty = Unit(params=(), gemms=(), out_elems_per_sample=MLP_IN_FEATURES)
    loss = Unit(params=(), gemms=(), out_elems_per_sample=MLP_CLASSES, transcendental_elems_per_sample=MLP_CLASSES,
                ops_forward=2, ops_backward=2)  # log_softmax + nll_loss
    return ModelSpec(name="mlp", pre=empty, units=tuple(units), post=loss,
                     input_bytes_per_sample=4 * MLP_IN_FEATURES, label_bytes_per_sample=INT64_BYTES,
                     tokens_per_sample=1, hidden=cfg.hidden, layers=cfg.layers, heads=1, seq_len=1,
                     vocab=MLP_CLASSES, optimizer="sgd", data_kernels=4,
                     data_elems_per_sample=MLP_IN_FEATURES * (1 + MLP_CLASSES))


RMSNORM_EAGER = (7, 2)
"""Eager RMSNorm as Llama's reference code writes it (``x.float()``, ``pow(2)``, ``mean(-1)``, ``x *
rsqrt(...)``, ``type_as(x)``, ``* weight``; torchtitan's and transformers' ``RMSNorm``): per element it
writes and reads float32 x, writes and reads x^2, reads x again, writes and reads the product (7 fp32
touches) and reads the input, writes the cast, reads it and writes the output (4 in the activation
dtype) where one fused kernel reads the input and writes the output (2): (fp32, activation) touches beyond
the fused count. LayerNorm is one kernel in eager torch too (``torch.nn.LayerNorm``)."""
ROTARY_EAGER = (4, 0)
"""Eager rotary embedding by complex multiplication (``view_as_complex(x.float())`` x ``freqs_cis``,
``view_as_real``, ``type_as``; Llama's and torchtitan's ``apply_rotary_emb``): the cast writes float32,
the product reads and writes it, the cast back reads it (4 fp32 touches) beyond a fused kernel's one read
and one write in the activation dtype, per element of q and k."""
SWIGLU_EAGER = (0, 2)
"""Eager SwiGLU ``silu(gate) * up``: silu reads and writes the f-wide gate, the product reads both and
writes one (5 touches) where one fused kernel reads two and writes one (3), per hidden element."""


def eager_elementwise(arch: Architecture, mlp_width: int = 0) -> tuple[int, int]:
    """(fp32, activation-dtype) elements per token the unfused elementwise chains of one block touch
    beyond the fused count: two norms, rotary on q and k, the gated MLP's product over ``mlp_width``
    hidden elements per token (default the dense MLP's; an MoE block's top_k experts' widths)."""
    terms = []
    if arch.norm == "rmsnorm":
        terms.append((RMSNORM_EAGER, 2 * arch.hidden))
    if arch.positions == "rotary":  # MLA rotates the rope part of every q head and its one shared key
        terms.append((ROTARY_EAGER, (arch.heads + 1) * arch.rope_head_dim if arch.mla else arch.q_width + arch.kv_width))
    if arch.gated_mlp:
        terms.append((SWIGLU_EAGER, mlp_width or arch.ffn))
    return sum(k[0] * n for k, n in terms), sum(k[1] * n for k, n in terms)


def input_needs_grad(model: "ModelSpec", i: int) -> bool:
    """Whether unit ``i``'s input carries a gradient. Not for the first unit of a model whose pre module holds
    no parameter (the mlp: its first Linear reads the raw features): autograd computes no gradient for an input
    that does not require one, so that Linear's backward is its weight gradient alone, and tensor parallelism
    has no input gradient to all-reduce."""
    return i != 0 or bool(model.pre.params)


def _norm(name: str, d: int, arch: Architecture) -> tuple[Tensor, ...]:
    weight = Tensor(name=f"{name}.weight", shape=(d,))
    return (weight,) if arch.norm == "rmsnorm" else (weight, Tensor(name=f"{name}.bias", shape=(d,)))


def _attention(i: int, arch: Architecture) -> tuple[tuple[Tensor, ...], tuple[Gemm, ...], int]:
    """A block's attention: its parameters in registration order, its GEMMs (the projections, QK^T and AV) and
    the elements per token its extra norms touch. Grouped-query attention: q (d x heads x head_dim), k and v
    (d x kv_heads x head_dim each), proj (heads x head_dim x d). Multi-head latent attention (DeepSeek-V2/V3,
    ``Architecture.kv_lora_rank``): q through its latent (d -> q_lora -> heads x (head_dim + rope)) or straight
    from d, kv_a (d -> kv_lora + rope: the latent and the one shared rotary key), kv_b (kv_lora -> heads x
    (head_dim + v_head_dim)), both latents normed; the down projections are replicated under tensor parallelism
    (Megatron-Core's MLA), the up projections split by heads."""
    d, t, heads = arch.hidden, arch.seq_len, arch.heads
    p = f"units.{i}"
    qkv_bias, other_bias = arch.bias in ("all", "qkv"), arch.bias == "all"
    w = arch.attention_keys(i)
    keys = w if w < t else 0
    chunked = bool(keys) and arch.window_chunked
    core = (Gemm(m=t, k=arch.qk_head_dim, n=w, batched=heads, keys=keys, chunked=chunked),
            Gemm(m=t, k=w, n=arch.v_dim, batched=heads, keys=keys, chunked=chunked))  # QK^T, AV
    proj = _linear(f"{p}.attn.proj", arch.out_width, d, bias=other_bias, split="cols")
    if not arch.mla:
        q, kv = arch.q_width, arch.kv_width
        params = (*_linear(f"{p}.attn.q", d, q, bias=qkv_bias, split="rows"),
                  *_linear(f"{p}.attn.k", d, kv, bias=qkv_bias, split="rows"),
                  *_linear(f"{p}.attn.v", d, kv, bias=qkv_bias, split="rows"), *proj)
        return params, (Gemm(m=t, k=d, n=q + 2 * kv), Gemm(m=t, k=q, n=d), *core), 0
    lq, lkv, rope = arch.q_lora_rank, arch.kv_lora_rank, arch.rope_head_dim
    q_path = ((*_linear(f"{p}.attn.q_a", d, lq, bias=False), *_norm(f"{p}.attn.q_a_norm", lq, arch),
               *_linear(f"{p}.attn.q_b", lq, arch.q_width, bias=False, split="rows")) if lq
              else _linear(f"{p}.attn.q", d, arch.q_width, bias=False, split="rows"))
    params = (*q_path, *_linear(f"{p}.attn.kv_a", d, lkv + rope, bias=False),
              *_norm(f"{p}.attn.kv_a_norm", lkv, arch),
              *_linear(f"{p}.attn.kv_b", lkv, heads * (arch.head_dim + arch.v_dim), bias=False, split="rows"), *proj)
    down = Gemm(m=t, k=d, n=lq + lkv + rope, tp_sharded=False) if lq else None
    gemms = ((down, Gemm(m=t, k=lq, n=arch.q_width)) if lq
             else (Gemm(m=t, k=d, n=lkv + rope, tp_sharded=False), Gemm(m=t, k=d, n=arch.q_width)))
    gemms += (Gemm(m=t, k=lkv, n=heads * (arch.head_dim + arch.v_dim)), Gemm(m=t, k=arch.out_width, n=d), *core)
    return params, gemms, 2 * (lq + lkv)


def _mlp(p: str, arch: Architecture, width: int, *, bias: bool) -> tuple[Tensor, ...]:
    """A dense MLP of ``width``: up (and gate when gated) d x width, down width x d, in the runner's order."""
    d = arch.hidden
    gate = _linear(f"{p}.gate", d, width, bias=bias, split="rows") if arch.gated_mlp else ()
    up = _linear(f"{p}.up", d, width, bias=bias, split="rows")
    return (*gate, *up) if arch.norms_last else (*up, *gate)


def block_unit(i: int, arch: Architecture, *, megatron: bool = False) -> Unit:
    """One pre-norm block: its attention (``_attention``), the MLP (up d x f, plus gate d x f when gated, down
    f x d) and two norms, in the runner's registration order."""
    d, t, f, heads = arch.hidden, arch.seq_len, arch.ffn, arch.heads
    p = f"units.{i}"
    other_bias = arch.bias == "all"
    mlp = _mlp(f"{p}.mlp", arch, f, bias=other_bias) + _linear(f"{p}.mlp.down", f, d, bias=other_bias, split="cols")
    attn, attn_gemms, latent_norms = _attention(i, arch)
    ln1, ln2 = _norm(f"{p}.ln1", d, arch), _norm(f"{p}.ln2", d, arch)
    params = (*attn, *mlp, *ln1, *ln2) if arch.norms_last else (*ln1, *attn, *ln2, *mlp)
    up = 2 * f if arch.gated_mlp else f
    gemms = (*attn_gemms, Gemm(m=t, k=d, n=up), Gemm(m=t, k=f, n=d))  # mlp
    fp32, act = eager_elementwise(arch)
    col_inputs = (d,) * (2 if megatron else 4 + arch.gated_mlp)  # q, k, v (or one qkv), up (and gate) read the stream
    return Unit(params=params, gemms=gemms, out_elems_per_sample=t * d,
                elementwise_elems_per_sample=t * (4 * d + (3 if arch.gated_mlp else 2) * f + latent_norms),
                score_elems_per_sample=heads * t * arch.attention_keys(i), transcendental_elems_per_sample=t * f,
                unfused_fp32_elems_per_sample=t * fp32, unfused_act_elems_per_sample=t * act,
                tp_row_allreduces=2, tp_row_out=t * d, tp_col_inputs=tuple(x * t for x in col_inputs),
                ops_forward=39, ops_backward=92)


def balanced_assignments(arch: Architecture) -> tuple[int, ...]:
    """Assignments each expert keeps per sequence under balanced routing: x = t k + j runs over
    0 .. T k - 1, so expert e gets T k // E (+1 for e < T k mod E), capped at the capacity."""
    e, total = arch.experts, arch.seq_len * arch.top_k
    cap = math.ceil(arch.capacity_factor * total / e) if arch.capacity_factor else total
    return tuple(min(total // e + (1 if i < total % e else 0), cap) for i in range(e))


def moe_block_unit(i: int, arch: Architecture) -> Unit:
    """A block whose MLP is a router (d x E, no bias), E expert MLPs (d -> expert_width -> d) and, with
    ``Architecture.shared_experts``, one shared MLP of shared_experts x expert_width that every token passes
    through, in the runner's registration order (ln1, attention, ln2, router, experts, shared). GEMMs count the
    active path: the router, top_k experts and the shared MLP per token (FLOPs per active parameter); the MLP's
    elementwise work runs over those widths, not the dense block's."""
    dense = block_unit(i, arch)
    d, t, f, k = arch.hidden, arch.seq_len, arch.expert_width, arch.top_k
    fs = arch.shared_experts * f
    p, bias = f"units.{i}", arch.bias == "all"
    def expert(j: int) -> tuple[Tensor, ...]:  # the block's MLP form: SwiGLU experts (Mixtral) gate, up and down
        gate = _linear(f"{p}.mlp.experts.{j}.gate", d, f, bias=bias, split="rows") if arch.gated_mlp else ()
        return (*gate, *_linear(f"{p}.mlp.experts.{j}.up", d, f, bias=bias, split="rows"),
                *_linear(f"{p}.mlp.experts.{j}.down", f, d, bias=bias, split="cols"))

    experts = tuple(replace(x, expert=j) for j in range(arch.experts) for x in expert(j))
    router = Tensor(name=f"{p}.mlp.router.weight", shape=(arch.experts, d), linear=True)
    shared = (_mlp(f"{p}.mlp.shared", arch, fs, bias=bias) + _linear(f"{p}.mlp.shared.down", fs, d, bias=bias, split="cols")
              if fs else ())
    params = tuple(x for x in dense.params if ".mlp." not in x.name) + (router, *experts, *shared)
    up = 2 if arch.gated_mlp else 1
    gemms = dense.gemms[:-2] + (Gemm(m=t, k=d, n=arch.experts, tp_sharded=False),
                                Gemm(m=t * k, k=d, n=up * f), Gemm(m=t * k, k=f, n=d))
    if fs:
        gemms += (Gemm(m=t, k=d, n=up * fs), Gemm(m=t, k=fs, n=d))
    fp32, act = eager_elementwise(arch, mlp_width=k * f + fs)
    per_width = 3 if arch.gated_mlp else 2
    elementwise = dense.elementwise_elems_per_sample + t * per_width * (k * f + fs - arch.ffn)
    # block_unit's column-wise inputs end with the MLP's up (and gate) projection's; a shared MLP keeps them
    routed = (0, ()) if fs else (1, dense.tp_col_inputs[-(1 + arch.gated_mlp):])
    return replace(dense, params=params, gemms=gemms, moe_assignments_per_sample=balanced_assignments(arch),
                   routed_tp_collectives=routed,
                   elementwise_elems_per_sample=elementwise,
                   unfused_fp32_elems_per_sample=t * fp32, unfused_act_elems_per_sample=t * act,
                   transcendental_elems_per_sample=t * (k * f + fs + arch.experts))


def mtp_unit(j: int, arch: Architecture, *, megatron: bool = False, vocab_parallel: bool = False) -> Unit:
    """Multi-token prediction at depth j + 1 (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, sec. 2.2, eq. 21-23;
    Megatron-Core's ``MultiTokenPredictionLayer``): the hidden state and the embedding of the token j + 1 ahead
    (the model's embedding, shared), each normed (hnorm, enorm), concatenated and projected 2d -> d (eh_proj,
    no bias), one transformer block of the kind block index layers + j would be, a final norm, and the model's
    output head (shared: no parameter of its own) with a cross-entropy of its own. The block's parameters carry
    its index; its GEMMs come first, then eh_proj's and the head's. Elementwise work beyond the block per token:
    the two norms and the concatenation (4 d + 4 d), the lookup (d), the final norm (2 d), the loss over the
    vocabulary (3 V, as the model's own)."""
    i = arch.layers + j
    base = moe_block_unit(i, arch) if arch.is_moe_layer(i) else block_unit(i, arch, megatron=megatron)
    d, t, v = arch.hidden, arch.seq_len, arch.vocab
    p = f"units.{i}.mtp"
    params = (*_norm(f"{p}.enorm", d, arch), *_norm(f"{p}.hnorm", d, arch),
              *_linear(f"{p}.eh_proj", 2 * d, d, bias=False, split="rows"), *base.params,
              *_norm(f"{p}.final_norm", d, arch))
    gemms = (*base.gemms, Gemm(m=t, k=2 * d, n=d), Gemm(m=t, k=d, n=v, tp_sharded=vocab_parallel, head=True))
    return replace(base, params=params, gemms=gemms, mtp=True,
                   elementwise_elems_per_sample=base.elementwise_elems_per_sample + t * (11 * d + 3 * v),
                   transcendental_elems_per_sample=base.transcendental_elems_per_sample + t * v,
                   tp_col_inputs=(*base.tp_col_inputs, 2 * t * d, *((t * d,) if vocab_parallel else ())),
                   ops_forward=base.ops_forward + 17, ops_backward=base.ops_backward + 26)


@lru_cache(maxsize=256)
def expert_local(model: "ModelSpec", ep: int, whole: bool = False) -> "ModelSpec":
    """The model one rank of an ep group holds: experts/ep experts of every MoE layer (every rank the
    same count; the first rank's indices stand for all). Compute is unchanged: under balanced
    routing each rank's experts serve as many assignments as its own tokens make. ``whole``: the routed
    experts are not tensor-parallel (``Layout.whole_experts``): their tensors are held whole and their MLP's
    tensor-parallel collectives go (``Unit.routed_tp_collectives``); each rank computes its sequence shard's
    tokens through whole experts, the same FLOPs as every token through 1/tp of each."""
    if (ep == 1 and not whole) or model.arch is None or not model.arch.experts:
        return model
    per = model.arch.experts // ep

    def keep(u: Unit) -> Unit:
        params = tuple(x for x in u.params if x.expert < per)
        if not (whole and u.moe_assignments_per_sample):
            return replace(u, params=params)
        rows, widths = u.routed_tp_collectives
        cols = list(u.tp_col_inputs)
        for w in widths:
            cols.remove(w)
        return replace(u, params=tuple(replace(x, tp_split="none") if x.expert >= 0 else x for x in params),
                       tp_row_allreduces=u.tp_row_allreduces - rows, tp_col_inputs=tuple(cols),
                       routed_tp_collectives=(0, ()))
    return replace(model, units=tuple(keep(u) for u in model.units))


def runner_architecture(cfg: WorkloadConfig) -> Architecture:
    """The built-in token workloads as architectures: ``transformer`` (nanoGPT-style: LayerNorm, biases,
    learned positions, GELU MLP of 4 x hidden, untied head), ``hf-llama`` (RMSNorm, no biases, rotary,
    SwiGLU of 4 x hidden, untied) and ``hf-gpt2`` (the transformer's shape, head untied)."""
    common = dict(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, vocab=cfg.vocab_size, seq_len=cfg.seq_len,
                  name=cfg.name)
    if cfg.name == "hf-llama":
        return Architecture(**common, gated_mlp=True, norm="rmsnorm", positions="rotary", bias="none", norms_last=True)
    if cfg.name == "moe":  # parbench.workloads.moe: the transformer with experts of its MLP's shape
        return Architecture(**common, experts=cfg.experts, top_k=cfg.top_k, capacity_factor=cfg.capacity_factor,
                            moe_every=cfg.moe_every)
    return Architecture(**common)


@lru_cache(maxsize=512)  # one object per architecture: what the per-model caches downstream key on
def architecture_spec(arch: Architecture, *, megatron: bool = False, vocab_parallel: bool | None = None) -> ModelSpec:
    """Embed -> Block x L -> norm + head. ``megatron``: Megatron-LM's tensor-parallel layout (fused qkv:
    2 backward all-reduces per block instead of one per column-wise Linear; vocabulary-parallel
    embedding and head: the (V x d) matrices split by vocabulary rows over tp, Shoeybi et al. 2019,
    sec. 3). ``vocab_parallel`` overrides the embedding/head choice (default: ``megatron``)."""
    d, t, v = arch.hidden, arch.seq_len, arch.vocab
    vp = megatron if vocab_parallel is None else vocab_parallel
    tok = Tensor(name="pre.tok.weight", shape=(v, d), tp_split="rows" if vp else "none")
    pos = (Tensor(name="pre.pos.weight", shape=(arch.position_rows, d)),) if arch.position_rows else ()
    # a vocabulary-parallel embedding all-reduces its partial lookups; its head is column-parallel
    # (an input-gradient all-reduce backward, as every column-wise Linear)
    pre = Unit(params=(tok, *pos), gemms=(), out_elems_per_sample=t * d, elementwise_elems_per_sample=3 * t * d,
               tp_row_allreduces=1 if vp else 0, tp_row_out=t * d if vp else 0, ops_forward=4, ops_backward=4)
    units = tuple(moe_block_unit(i, arch) if arch.is_moe_layer(i) else block_unit(i, arch, megatron=megatron)
                  for i in range(arch.layers))
    units += tuple(mtp_unit(j, arch, megatron=megatron, vocab_parallel=vp) for j in range(arch.mtp_layers))
    head = () if arch.tie_embeddings else (Tensor(name="post.out.weight", shape=(v, d), tp_split=tok.tp_split, linear=True),)
    post = Unit(params=(*_norm("post.ln", d, arch), *head),
                gemms=(Gemm(m=t, k=d, n=v, tp_sharded=vp, head=True),), out_elems_per_sample=t * v,
                elementwise_elems_per_sample=2 * t * d + 3 * t * v,
                unfused_fp32_elems_per_sample=t * d * RMSNORM_EAGER[0] if arch.norm == "rmsnorm" else 0,
                unfused_act_elems_per_sample=t * d * RMSNORM_EAGER[1] if arch.norm == "rmsnorm" else 0,
                transcendental_elems_per_sample=t * v, tp_col_inputs=(t * d,) if vp else (),
                ops_forward=9, ops_backward=14)
    copy = (Tensor(name="post.out.weight" if arch.tie_embeddings else "post.mtp_embedding.weight", shape=(v, d),
                   tp_split=tok.tp_split) if arch.tie_embeddings or arch.mtp_layers else None)
    return ModelSpec(name="transformer", pre=pre, units=units, post=post,
                     input_bytes_per_sample=INT64_BYTES * t, label_bytes_per_sample=INT64_BYTES * t,
                     tokens_per_sample=t, hidden=d, layers=arch.layers, heads=arch.heads, seq_len=t, vocab=v,
                     optimizer="adamw", megatron=megatron, data_kernels=9 + 5 * t, data_elems_per_sample=2 * t,
                     arch=arch, embedding_copy=copy)


def transformer_spec(cfg: WorkloadConfig, *, megatron: bool = False) -> ModelSpec:
    """parbench.workloads.transformer (and the hf-* workloads' shapes): Embed -> Block x L -> norm + head."""
    spec = architecture_spec(runner_architecture(cfg), megatron=megatron)
    if cfg.name == "hf-llama":
        spec = replace(spec, buffer_bytes=2 * (cfg.hidden // cfg.heads // 2) * 4)
    return spec


def model_spec(cfg: WorkloadConfig, *, megatron: bool = False) -> ModelSpec:
    """The spec of a workload config. ``megatron``: Megatron-LM's layout for at-scale predictions (one fused
    qkv projection: 2 backward all-reduces per layer instead of 4; vocabulary-parallel output layer)."""
    if cfg.name == "mlp":
        return mlp_spec(cfg)
    return transformer_spec(cfg, megatron=megatron)
