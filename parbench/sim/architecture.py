"""A decoder-only transformer's architecture as plain data, and a reader for Hugging Face ``config.json``.

One description serves the runner's own transformer, the ``hf-*`` workloads, the named presets
(``parbench.sim.models``) and any ``config.json``: grouped-query attention (Ainslie et al., "GQA",
2023: ``kv_heads`` < ``heads`` shrinks the k/v projections), a feed-forward width of its own, a gated
MLP (Shazeer, "GLU Variants Improve Transformer", 2020: SwiGLU's gate, up and down matrices), tied
or untied input/output embeddings, LayerNorm (weight + bias) or RMSNorm (weight only), learned or
rotary positions, and which Linear layers carry a bias. A mixture-of-experts MLP extends this record
(experts, experts per token, router) and ``Layout`` (an expert-parallel degree) the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from parbench.names import MAX_LAYERS

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rotary", "alibi")
BIASES = ("all", "none", "qkv")
"""Which Linear layers carry a bias: every one (GPT-2, GPT-NeoX, the runner's transformer), none
(Llama, Mistral), or only the q/k/v projections (Qwen2)."""


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """The shapes that fix parameters, FLOPs and activations of a decoder-only transformer."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    """Tokens per training sample."""
    kv_heads: int = 0
    """Key/value heads (grouped-query attention); 0 = ``heads`` (multi-head attention)."""
    head_size: int = 0
    """Width of one attention head (q, k and v alike); 0 = hidden / heads. Some models set it apart from
    the width (Qwen3, Gemma, Mistral NeMo: ``head_dim`` in their config.json), so that q is d x heads x
    head_size and the output projection heads x head_size x d."""
    ffn_hidden: int = 0
    """Width of the MLP's inner layer; 0 = 4 x hidden."""
    gated_mlp: bool = False
    """SwiGLU-style MLP: gate and up projections (d -> ffn each), then down (ffn -> d)."""
    tie_embeddings: bool = False
    """The output head reuses the token embedding's matrix (no separate head parameters)."""
    norm: str = "layernorm"
    positions: str = "learned"
    max_positions: int = 0
    """Rows of a learned position table; 0 = ``seq_len``."""
    bias: str = "all"
    dropout: bool = False
    """Dropout after attention and MLP (adds their 1-byte masks to the saved activations)."""
    norms_last: bool = False
    """Parameter registration order of a block: the norms after attention and MLP (transformers'
    LlamaDecoderLayer) instead of each before its sublayer; fixes DDP's bucket boundaries, not the math."""
    name: str = ""
    experts: int = 0
    """Mixture of experts: experts per MoE layer (0 = dense). Each expert is the block's MLP at width
    ``expert_ffn``; a router (hidden x experts, no bias) picks ``top_k`` of them per token."""
    top_k: int = 1
    capacity_factor: float = 0.0
    """An expert takes at most ceil(capacity_factor x seq_len x top_k / experts) assignments per sequence
    (GShard's capacity, one sequence per group, as the runner's moe workload); 0 = dropless."""
    expert_ffn: int = 0
    """Inner width of one expert's MLP; 0 = ``ffn``."""
    moe_every: int = 1
    """Every moe_every-th block (blocks moe_every-1, 2 moe_every-1, ...) is an MoE block."""
    window: int = 0
    """Sliding-window attention (Beltagy et al., "Longformer", 2020; Mistral 7B, GPT-OSS): a token attends to
    itself and at most ``window`` - 1 earlier tokens; 0 = every earlier token."""
    window_every: int = 1
    """Which blocks slide their window: blocks 0, window_every, 2 window_every, ... (1: all, Mistral 7B; 2: every
    other one, alternating with full attention from the first, GPT-OSS)."""
    window_chunked: bool = False
    """The window is a chunk (Llama 4's chunked attention, ``attention_chunk_size``): the sequence splits into chunks of
    ``window`` tokens and a token attends to the earlier tokens of its own chunk alone, t w / 2 scores a head against a
    sliding window's t w - w^2 / 2."""
    full_every: int = 0
    """The other way to mix sliding and full attention (Gemma 3): every full_every-th block (blocks full_every-1,
    2 full_every-1, ...) attends to the whole sequence and the rest slide the window; 0: ``window_every``'s pattern."""
    dense_first: int = 0
    """The first ``dense_first`` blocks keep the dense MLP (DeepSeek's ``first_k_dense_replace``)."""
    shared_experts: int = 0
    """Experts every token of an MoE block passes through besides its routed ones (DeepSeekMoE's shared experts,
    ``n_shared_experts``): one dense MLP of width shared_experts x expert_ffn."""
    kv_lora_rank: int = 0
    """Multi-head latent attention (DeepSeek-V2/V3) when > 0: k and v come up from a kv_lora_rank-wide latent
    (d -> kv_lora_rank + rope_head_dim, normed, then -> heads x (head_size + v_head_dim)); q and k carry
    head_size + rope_head_dim per head, v v_head_dim."""
    q_lora_rank: int = 0
    """MLA: q through a q_lora_rank-wide latent (d -> q_lora_rank, normed, -> heads x (head_size + rope_head_dim));
    0 projects q from d directly."""
    rope_head_dim: int = 0
    """MLA: the rotary part of each q and k head (shared by every head for k: one rope_head_dim-wide key)."""
    v_head_dim: int = 0
    """MLA: width of a value head (0 = head_size)."""
    mtp_layers: int = 0
    """Multi-token prediction (DeepSeek-V3 report, sec. 2.2; ``num_nextn_predict_layers``): after the last block,
    depth j of ``mtp_layers`` norms the hidden state and the embedding of the token j ahead, projects their
    concatenation 2 hidden -> hidden, runs one more block (block index layers + j-1, MoE where that index would
    be) and predicts through the shared output head with a loss of its own."""

    def __post_init__(self) -> None:
        for f in fields(self):  # a config.json's "x" or null where a count belongs fails here, by name
            kinds, what = FIELD_KINDS[f.type]
            value = getattr(self, f.name)
            if isinstance(value, bool) is not (f.type == "bool") or not isinstance(value, kinds):
                raise ValueError(f"{f.name}={value!r} must be {what}")
            if f.type == "float" and not math.isfinite(value):  # nan passes every comparison below
                raise ValueError(f"{f.name}={value!r} must be a finite number")
        if self.window < 0 or self.window_every < 1 or self.full_every < 0:
            raise ValueError(f"window={self.window} >= 0, window_every={self.window_every} >= 1 and "
                             f"full_every={self.full_every} >= 0 needed")
        if self.window_chunked and not self.window:
            raise ValueError("window_chunked: chunked attention needs its chunk, window > 0")
        if self.full_every and self.window_every != 1:
            raise ValueError(f"full_every={self.full_every} and window_every={self.window_every}: one pattern of "
                             f"sliding blocks, not both")
        for k in ("dense_first", "shared_experts", "kv_lora_rank", "q_lora_rank", "rope_head_dim", "v_head_dim",
                  "mtp_layers"):
            if getattr(self, k) < 0:
                raise ValueError(f"{k}={getattr(self, k)} must be >= 0")
        if not self.kv_lora_rank and (self.q_lora_rank or self.rope_head_dim or self.v_head_dim):
            raise ValueError("q_lora_rank, rope_head_dim and v_head_dim describe multi-head latent attention: set kv_lora_rank")
        if self.experts < 0 or self.top_k < 1 or self.moe_every < 1 or self.capacity_factor < 0 or self.expert_ffn < 0:
            raise ValueError(f"experts={self.experts} >= 0, top_k={self.top_k} >= 1, moe_every={self.moe_every} >= 1, "
                             f"capacity_factor={self.capacity_factor} >= 0 and expert_ffn={self.expert_ffn} >= 0 needed")
        if self.experts and self.top_k > self.experts:
            raise ValueError(f"top_k={self.top_k} > experts={self.experts}")
        for k in ("layers", "hidden", "heads", "vocab", "seq_len"):
            if getattr(self, k) < 1:
                raise ValueError(f"{k}={getattr(self, k)} must be >= 1")
        if self.layers > MAX_LAYERS:
            raise ValueError(f"layers={self.layers} is more than {MAX_LAYERS:,} (ten times the deepest published "
                             "transformer)")
        for k in ("kv_heads", "ffn_hidden", "max_positions", "head_size"):
            if getattr(self, k) < 0:
                raise ValueError(f"{k}={getattr(self, k)} must be >= 0 (0 = the default)")
        if self.hidden % self.heads and not self.head_size:
            raise ValueError(f"heads={self.heads} does not divide hidden={self.hidden} (set head_size for attention "
                             f"heads of their own width)")
        if self.heads % self.n_kv_heads:
            raise ValueError(f"kv_heads={self.n_kv_heads} does not divide heads={self.heads}")
        for k, valid in (("norm", NORMS), ("positions", POSITIONS), ("bias", BIASES)):
            if getattr(self, k) not in valid:
                raise ValueError(f"{k}={getattr(self, k)!r}; valid: {', '.join(valid)}")

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def expert_width(self) -> int:
        return self.expert_ffn or self.ffn

    def is_moe_layer(self, index: int) -> bool:
        """Whether block ``index`` carries experts (as parbench.workloads.moe.is_moe_block)."""
        return self.experts > 0 and index >= self.dense_first and (index + 1) % self.moe_every == 0

    def attention_keys(self, index: int) -> int:
        """Keys the last token of block ``index`` attends to: the window where that block slides (``window_every``,
        ``full_every``) one shorter than the sequence, else the sequence."""
        slides = (index + 1) % self.full_every != 0 if self.full_every else index % self.window_every == 0
        if self.window and slides:
            return min(self.window, self.seq_len)
        return self.seq_len

    @property
    def moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Width of one q (and k) head in the attention scores: head_dim, + rope_head_dim under MLA."""
        return self.head_dim + self.rope_head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def q_width(self) -> int:
        """Width of the q projection's output: heads x head_dim (x (head_dim + rope_head_dim) under MLA)."""
        return self.heads * self.qk_head_dim

    @property
    def kv_width(self) -> int:
        """Width of the k (and of the v) projection's output: kv_heads x head_dim (MLA: ``k_width``, ``v_width``)."""
        return self.n_kv_heads * self.head_dim

    @property
    def k_width(self) -> int:
        return self.heads * self.qk_head_dim if self.mla else self.kv_width

    @property
    def v_width(self) -> int:
        return self.heads * self.v_dim if self.mla else self.kv_width

    @property
    def out_width(self) -> int:
        """Width of the attention output, the output projection's input: heads x the value head's width."""
        return self.heads * self.v_dim

    @property
    def position_rows(self) -> int:
        return (self.max_positions or self.seq_len) if self.positions == "learned" else 0


def _first(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


FIELD_KINDS = {"int": ((int,), "an integer"), "float": ((int, float), "a number"), "bool": ((bool,), "true or false"),
               "str": ((str,), "a string")}
"""What each ``Architecture`` field's annotation admits (a bool is no count, a count no flag)."""


GATED_ACTIVATIONS = ("silu", "swish", "swiglu")
HF_FAMILIES = {
    # model_type -> (norm, positions, bias, default tie_word_embeddings)
    "llama": ("rmsnorm", "rotary", "none", False),
    "mistral": ("rmsnorm", "rotary", "none", False),
    "qwen2": ("rmsnorm", "rotary", "qkv", False),
    "qwen3": ("rmsnorm", "rotary", "none", False),
    "mixtral": ("rmsnorm", "rotary", "none", False),
    "qwen3_moe": ("rmsnorm", "rotary", "none", False),
    "gpt_oss": ("rmsnorm", "rotary", "all", False),
    "deepseek_v3": ("rmsnorm", "rotary", "none", False),
    "gpt2": ("layernorm", "learned", "all", True),
    "gpt_neox": ("layernorm", "rotary", "all", False),
    "bloom": ("layernorm", "alibi", "all", True),
    "opt": ("layernorm", "learned", "all", True),
    "nemotron": ("layernorm", "rotary", "none", False),  # NemotronConfig: LayerNorm1P, squared ReLU, no biases
    "deepseek_v2": ("rmsnorm", "rotary", "none", False),  # DeepSeek-V3's structure without its MTP layers
    "qwen2_moe": ("rmsnorm", "rotary", "qkv", False),
    "gemma": ("rmsnorm", "rotary", "none", True),  # GeGLU MLP, head_dim 256, embedding tied
    "gemma2": ("rmsnorm", "rotary", "none", True),  # and every other block a sliding window, from the first
    "phi3": ("rmsnorm", "rotary", "none", False),
    "olmo2": ("rmsnorm", "rotary", "none", False),  # norms after attention and MLP; its q and k norms left out
    "starcoder2": ("layernorm", "rotary", "all", True),
    "falcon": ("layernorm", "rotary", "none", True),  # parallel attention and MLP; multi-query before Falcon-40B
    "gemma3_text": ("rmsnorm", "rotary", "none", True),  # every 6th block full, the rest a sliding window
    "llama4_text": ("rmsnorm", "rotary", "none", False),  # MoE on every interleave_moe_layer_step-th block, a shared expert
    "glm4_moe": ("rmsnorm", "rotary", "none", False),  # GLM-4.5: DeepSeek-V3's expert layout, grouped-query attention
    "olmoe": ("rmsnorm", "rotary", "none", False),  # OLMoE: every block's MLP 64 experts of intermediate_size, 8 a token
    "dbrx": ("layernorm", "rotary", "none", False),  # DBRX: MPT's key names, its MoE in ffn_config (_dbrx_fields)
}
MULTIMODAL = {"gemma3": "gemma3_text", "llama4": "llama4_text"}
"""Multimodal configs whose ``text_config`` is the language model this reads (the vision tower left out)."""
GATED_FAMILIES = ("gpt_oss", "gemma", "gemma2", "gemma3_text")
"""Families whose MLP is gated whatever ``hidden_act`` names (Gemma's GeGLU: ``gelu_pytorch_tanh``)."""
HF_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6},
}
"""The fields a family's config.json may leave out, at transformers' defaults (``Gemma3TextConfig``: Gemma 3's
multimodal configs list in their ``text_config`` only what differs from them)."""


def _hf_experts(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """Mixture-of-experts fields of a Mixtral or Qwen3-MoE config: experts per layer, experts per token, one
    expert's width, which blocks carry experts (Qwen3-MoE's ``decoder_sparse_step``). Qwen3-MoE's
    ``mlp_only_layers`` (dense blocks at chosen indices) is not modelled and is refused."""
    if kind == "mixtral":
        return {"experts": data["num_local_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["intermediate_size"]}
    if kind == "gpt_oss":
        return {"experts": data["num_local_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["intermediate_size"]}
    if kind in ("deepseek_v3", "deepseek_v2"):
        if data.get("moe_layer_freq", 1) != 1:
            raise ValueError(f"config.json moe_layer_freq={data['moe_layer_freq']}: only every block after "
                             f"first_k_dense_replace carrying experts is modelled")
        return {"experts": data["n_routed_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["moe_intermediate_size"], "shared_experts": data.get("n_shared_experts") or 0,
                "dense_first": data.get("first_k_dense_replace") or 0, "kv_lora_rank": data["kv_lora_rank"],
                "q_lora_rank": data.get("q_lora_rank") or 0, "rope_head_dim": data["qk_rope_head_dim"],
                "v_head_dim": data["v_head_dim"], "head_size": data["qk_nope_head_dim"],
                "mtp_layers": data.get("num_nextn_predict_layers") or 0}
    if kind in ("olmoe", "dbrx"):  # every block's MLP routed, no shared expert
        return {"experts": data["num_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["intermediate_size"]}
    if kind == "glm4_moe":  # DeepSeek-V3's routed and shared experts and first dense blocks, no latent attention
        return {"experts": data["n_routed_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["moe_intermediate_size"], "shared_experts": data.get("n_shared_experts") or 0,
                "dense_first": data.get("first_k_dense_replace") or 0,
                "mtp_layers": data.get("num_nextn_predict_layers") or 0}
    shared = 0
    if kind == "qwen2_moe":  # one shared expert of its own width, modelled as that many whole experts
        width, shared_width = data["moe_intermediate_size"], data.get("shared_expert_intermediate_size") or 0
        if not isinstance(shared_width, int) or not isinstance(width, int) or width <= 0 or shared_width % width:
            raise ValueError(f"config.json shared_expert_intermediate_size={shared_width!r}: modelled as whole "
                             f"experts of moe_intermediate_size={width!r}, so it must be a multiple of it")
        shared = shared_width // width
    if kind == "llama4_text":  # Llama 4: top-k routed experts plus one shared expert of the same width
        chunk = data.get("attention_chunk_size") or 0
        return {"experts": data["num_local_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["intermediate_size"], "moe_every": data.get("interleave_moe_layer_step") or 1,
                "shared_experts": 1, **({"window": chunk, "window_chunked": True, "full_every": _llama4_full_every(data)}
                                        if chunk else {})}
    if kind in ("qwen3_moe", "qwen2_moe"):
        if data.get("mlp_only_layers"):
            raise ValueError(f"config.json mlp_only_layers={data['mlp_only_layers']}: dense blocks at chosen indices "
                             f"are not modelled (experts every decoder_sparse_step-th block only)")
        return {"experts": data["num_experts"], "top_k": data["num_experts_per_tok"],
                "expert_ffn": data["moe_intermediate_size"], "moe_every": data.get("decoder_sparse_step") or 1,
                **({"shared_experts": shared} if shared else {})}
    return {}


def _llama4_full_every(data: dict[str, Any]) -> int:
    """Llama 4's blocks without rotary positions, which attend to the whole sequence (the others chunk it): every
    ``no_rope_layer_interval``-th (default 4), as ``no_rope_layers`` marks them with 0 where the config lists it."""
    every = data.get("no_rope_layer_interval") or 4
    flags = data.get("no_rope_layers")
    if isinstance(flags, list) and flags:
        full = [i for i, f in enumerate(flags) if not f]
        every = full[0] + 1 if full else len(flags) + 1
        if full != list(range(every - 1, len(flags), every)):
            raise ValueError(f"config.json no_rope_layers: full-attention blocks at {full[:8]}...; only every n-th "
                             f"from the n-th is modelled")
    return every


def _hf_window(data: dict[str, Any]) -> dict[str, Any]:
    """Sliding-window fields: ``sliding_window`` (Mistral: every block; null or absent: none; Qwen's is unused
    unless ``use_sliding_window``) and GPT-OSS's ``layer_types``, its blocks alternating "sliding_attention"
    and "full_attention" from the first."""
    window = data.get("sliding_window") or 0
    if data.get("use_sliding_window") is False:  # Qwen2/Qwen3 carry a window they do not use
        window = 0
    types = data.get("layer_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise ValueError(f"config.json layer_types={types!r}: expected a list of block kinds (strings)")
    if window and types is None and data.get("model_type") == "gemma2":  # its config.json predates layer_types
        return {"window": window, "window_every": 2}
    pattern = data.get("sliding_window_pattern")  # Gemma 3's configs before layer_types: every n-th block full
    if window and types is None and isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 1:
        return {"window": window, "full_every": pattern}
    if not window or not types:
        return {"window": window}
    sliding = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
    if not sliding:
        return {"window": 0}
    every = sliding[1] - sliding[0] if len(sliding) > 1 else len(types)
    if sliding == list(range(0, len(types), every)):
        return {"window": window, "window_every": every}
    full = [i for i, kind in enumerate(types) if kind != "sliding_attention"]
    if full == list(range(full[0], len(types), full[0] + 1)):
        return {"window": window, "full_every": full[0] + 1}
    raise ValueError(f"config.json layer_types: sliding-window blocks at {sliding[:8]}...; only every n-th block "
                     f"sliding from the first, or every n-th attending fully from the n-th, is modelled")


def _dbrx_fields(data: dict[str, Any]) -> dict[str, Any]:
    """DBRX's config.json (MPT's names, its attention and MoE in nested tables) under transformers' usual keys: width
    ``d_model``, heads ``n_heads``, blocks ``n_layers``, positions ``max_seq_len``, ``attn_config.kv_n_heads``, and
    ``ffn_config``'s ``moe_num_experts`` experts of ``ffn_hidden_size``, ``moe_top_k`` a token; a gated (GLU) MLP.
    Its norms carry no bias (counted here with one: 2 x d_model a norm)."""
    attn, ffn = data.get("attn_config") or {}, data.get("ffn_config") or {}
    tables = isinstance(attn, dict) and isinstance(ffn, dict)
    if not tables:  # a value error of the file, as every other bad field (the command line's exit 2)
        raise ValueError("config.json of a dbrx model: attn_config and ffn_config must be tables")
    renamed = {"hidden_size": data.get("d_model"), "num_attention_heads": data.get("n_heads"),
               "num_hidden_layers": data.get("n_layers"), "max_position_embeddings": data.get("max_seq_len"),
               "num_key_value_heads": attn.get("kv_n_heads"), "intermediate_size": ffn.get("ffn_hidden_size"),
               "num_experts": ffn.get("moe_num_experts"), "num_experts_per_tok": ffn.get("moe_top_k"),
               "hidden_act": "silu"}
    return {**data, **{k: v for k, v in renamed.items() if v is not None}}


def from_hf_config(data: dict[str, Any], *, seq_len: int = 0) -> Architecture:
    """An Architecture from a Hugging Face ``config.json`` (Llama, Mistral, Qwen2, Qwen3, GPT-2, GPT-NeoX, BLOOM
    (ALiBi, no position table), OPT (learned positions; OPT-350M's projected embedding refused), Nemotron
    (squared-ReLU MLP, not gated; its partial rotary embedding costs no GEMM FLOPs), Gemma and Gemma 2 (GeGLU, their
    own head width, the embedding tied; Gemma 2's sliding window on every other block from the first, its extra
    post-norms and logit soft-capping left out), Gemma 3 (its language model: ``gemma3_text``, or a multimodal
    ``gemma3`` config's ``text_config`` at transformers' defaults, the vision tower left out; every sixth block
    attending fully, the rest a sliding window), Llama 4 (its ``text_config``: routed experts on every
    ``interleave_moe_layer_step``-th block with one shared expert, the dense blocks at ``intermediate_size_mlp``;
    chunked attention over ``attention_chunk_size`` tokens on all but every ``no_rope_layer_interval``-th block),
    Phi-3,
    OLMo 2 (its q and k norms left out), StarCoder2 (biases unless ``use_bias`` is false), Falcon (``multi_query``: one key/value head; ``new_decoder_architecture``:
    ``num_kv_heads``; the parallel attention and MLP's one shared norm counted as two), and
    the mixtures of experts Mixtral, Qwen3-MoE, Qwen2-MoE (its shared expert as ``shared_expert_intermediate_size``
    / ``moe_intermediate_size`` whole experts; its sigmoid gate left out), GPT-OSS, DeepSeek-V2 and DeepSeek-V3:
    their multi-head latent attention, shared experts, first dense blocks and V3's multi-token-prediction layers,
    ``num_nextn_predict_layers``; GLM-4.5 (``glm4_moe``: the same expert layout over grouped-query attention with
    q, k and v biases where ``attention_bias``; its partial rotary embedding costs no GEMM FLOPs, its q and k norms,
    where ``use_qk_norm``, are left out), OLMoE (every block's MLP routed: ``num_experts`` of ``intermediate_size``;
    its q and k norms left out) and DBRX (``_dbrx_fields``)).

    Fields read (transformers' names): layers ``num_hidden_layers``/``n_layer``, width
    ``hidden_size``/``n_embd``/``n_embed``, heads ``num_attention_heads``/``n_head``, ``num_key_value_heads``,
    ``head_dim`` (a head width of its own), ``intermediate_size``/``n_inner``/``ffn_dim``, ``vocab_size``,
    ``max_position_embeddings``/``n_positions`` (else ``seq_length``), ``tie_word_embeddings``, ``hidden_act``/``activation_function``
    (silu: gated MLP), for Llama ``attention_bias``/``mlp_bias``, the experts' fields (``_hf_experts``) and
    the sliding window (``_hf_window``; GPT-OSS: every Linear with a bias, SwiGLU experts).
    Qwen3's per-head q and k norms (2 x head_dim weights a block) are left out. ``seq_len`` 0 trains at the
    model's maximum positions."""
    if isinstance(data.get("model_type"), str) and data["model_type"] in MULTIMODAL and isinstance(data.get("text_config"), dict):
        # the vision tower left out
        data = {"_name_or_path": data.get("_name_or_path"), **data["text_config"],
                "model_type": MULTIMODAL[data["model_type"]]}
    kind = data.get("model_type")
    if kind == "dbrx":
        data = _dbrx_fields(data)
    if isinstance(kind, str) and kind in HF_DEFAULTS:
        data = {**HF_DEFAULTS[kind], **{k: v for k, v in data.items() if v is not None}}
    if not isinstance(kind, str) or kind not in HF_FAMILIES:
        raise ValueError(f"config.json model_type={kind!r} is not supported; valid: {', '.join(HF_FAMILIES)}")
    norm, positions, bias, tie_default = HF_FAMILIES[kind]
    hidden = _first(data, "hidden_size", "n_embd", "n_embed")
    heads = _first(data, "num_attention_heads", "n_head")
    act = str(_first(data, "hidden_act", "activation_function", default="gelu"))
    if kind == "llama" and (data.get("attention_bias") or data.get("mlp_bias")):
        bias = "all"
    if kind == "glm4_moe" and data.get("attention_bias"):
        bias = "qkv"
    if kind == "starcoder2" and data.get("use_bias") is False:
        bias = "none"
    if kind == "falcon" and data.get("bias"):
        bias = "all"
    max_pos = _first(data, "max_position_embeddings", "n_positions", default=0)
    if kind == "opt" and data.get("word_embed_proj_dim", hidden) != hidden:
        raise ValueError(f"config.json word_embed_proj_dim={data['word_embed_proj_dim']} != hidden_size={hidden}: "
                         f"OPT's projected embedding (OPT-350M) is not modelled")
    counts = (("num_hidden_layers", _first(data, "num_hidden_layers", "n_layer")), ("hidden_size", hidden),
              ("num_attention_heads", heads), ("vocab_size", data.get("vocab_size")),
              ("head_dim", data.get("head_dim") or 0))
    missing = [k for k, v in counts if v is None]
    if missing:
        raise ValueError(f"config.json lacks {', '.join(missing)}")
    wrong = [f"{k}={v!r}" for k, v in counts if isinstance(v, bool) or not isinstance(v, int)]
    if wrong:
        raise ValueError(f"config.json {', '.join(wrong)}: expected integers")
    head_dim = data.get("head_dim") or 0
    try:
        experts = _hf_experts(data, kind)
    except KeyError as exc:
        raise ValueError(f"config.json of a {kind} model lacks {exc.args[0]}") from None
    head_size = experts.pop("head_size", head_dim if head_dim * heads != hidden else 0)
    seq = seq_len or max_pos or _first(data, "seq_length", default=2048)
    window = {} if "window" in experts else _hf_window(data)
    return Architecture(
        layers=_first(data, "num_hidden_layers", "n_layer"), hidden=hidden, heads=heads,
        kv_heads=_falcon_kv_heads(data, heads) if kind == "falcon" else _first(data, "num_key_value_heads", default=heads),
        vocab=data["vocab_size"], head_size=head_size,
        ffn_hidden=_first(data, *(("intermediate_size_mlp",) if kind == "llama4_text" else ()), "intermediate_size",
                          "n_inner", "ffn_dim", "ffn_hidden_size", default=0) or 0,
        gated_mlp=act in GATED_ACTIVATIONS or kind in GATED_FAMILIES,
        tie_embeddings=bool(data.get("tie_word_embeddings", tie_default)), norm=norm, positions=positions, bias=bias,
        max_positions=max_pos if positions == "learned" else 0, norms_last=kind == "olmo2",
        seq_len=seq, name=str(data.get("_name_or_path") or kind), **experts, **window)


def _falcon_kv_heads(data: dict[str, Any], heads: int) -> Any:
    """Falcon's key/value heads: ``num_kv_heads`` in its new decoder architecture (Falcon-40B, -180B), else one
    where ``multi_query`` (Falcon-7B; transformers' default) and every head where not."""
    if data.get("new_decoder_architecture"):
        return _first(data, "num_kv_heads", default=heads)
    return 1 if data.get("multi_query", True) else heads


def read_hf_config(path: str | Path, *, seq_len: int = 0) -> Architecture:
    """``from_hf_config`` of a file (a ``config.json`` or the directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"no Hugging Face config at {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{p} is not a JSON config: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p} holds {type(data).__name__}, not a JSON object")
    arch = from_hf_config(data, seq_len=seq_len)
    kind = data.get("model_type")
    return arch if arch.name not in (kind, MULTIMODAL.get(kind) if isinstance(kind, str) else None) else _named(arch, p)


def _named(arch: Architecture, p: Path) -> Architecture:
    from dataclasses import replace

    return replace(arch, name=p.parent.name or arch.name)
