"""Well-known models as architectures (``parbench simulate --model NAME``), each with its source and the
parameter count its publisher reports (a test pins the architecture's count to it within 0.5%).

Registry as plain data: name -> ModelPreset. Shapes come from the papers' architecture tables and the
publishers' Hugging Face ``config.json`` files; ``seq_len`` is the context the model was trained with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from parbench.sim.architecture import Architecture


@dataclass(frozen=True, kw_only=True)
class ModelPreset:
    arch: Architecture
    published_params: float
    """The parameter count the publisher reports (as printed, e.g. 6.74e9)."""
    source: str


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, seq: int) -> Architecture:
    """Llama family: RMSNorm, rotary positions, SwiGLU MLP, no biases, untied embeddings."""
    return Architecture(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn_hidden=ffn, vocab=vocab,
                        seq_len=seq, gated_mlp=True, norm="rmsnorm", positions="rotary", bias="none")


def _qwen3_moe(name: str, layers: int, hidden: int, heads: int, ffn: int, expert_ffn: int) -> Architecture:
    """Qwen3's mixtures of experts: Llama's block with 4 key/value heads of 128, every MLP 128 SwiGLU experts
    of which a router picks 8, a 151,936-token vocabulary, trained at 4096 tokens (the report's general
    pre-training stage); the per-head q and k norms (256 weights a block) left out."""
    return Architecture(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=4, head_size=128, ffn_hidden=ffn,
                        vocab=151936, seq_len=4096, gated_mlp=True, norm="rmsnorm", positions="rotary", bias="none",
                        experts=128, top_k=8, expert_ffn=expert_ffn)


_GPT_OSS_120B = Architecture(name="gpt-oss-120b", layers=36, hidden=2880, heads=64, kv_heads=8, head_size=64,
                             ffn_hidden=2880, vocab=201088, seq_len=4096, gated_mlp=True, norm="rmsnorm",
                             positions="rotary", bias="all", experts=128, top_k=4, window=128, window_every=2)

MODELS: dict[str, ModelPreset] = {
    "gpt3-175b": ModelPreset(
        arch=Architecture(name="gpt3-175b", layers=96, hidden=12288, heads=96, vocab=50257, seq_len=2048,
                          tie_embeddings=True),
        published_params=175.0e9,
        source="Brown et al., 'Language Models are Few-Shot Learners', 2020, Table 2.1 (175.0B, 96 layers, "
               "d_model 12288, 96 heads, context 2048) and sec. 2.1 (GPT-2's architecture: learned positions, "
               "tied embeddings, LayerNorm; GPT-2's 50257-token vocabulary, Radford et al. 2019)"),
    "bloom-176b": ModelPreset(
        arch=Architecture(name="bloom-176b", layers=70, hidden=14336, heads=112, vocab=250880, seq_len=2048,
                          tie_embeddings=True, positions="alibi", dropout=True),
        published_params=176.247e9,
        source="BigScience, train/tr11-176B-ml/README.md in github.com/bigscience-workshop/bigscience (70 layers, "
               "hidden 14336, 112 heads, sequence 2048, ALiBi positions, GELU MLP of 4 x hidden, LayerNorm and "
               "biases, the 250,880-row padded vocabulary tied to the head, Megatron's default dropout of 0.1; "
               "'embedding size: v*h' 3,596,615,680 and 'one layer size: 12*h**2 + 13*h' 2,466,437,120 params: "
               "176.247B with 70 layers); the LayerNorm after its embedding (2 x 14336 weights) left out"),
    "llama2-7b": ModelPreset(
        arch=_llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096), published_params=6.74e9,
        source="Touvron et al., 'Llama 2', 2023, Table 1 (context 4096, GQA for 34B/70B only); "
               "huggingface.co/meta-llama/Llama-2-7b-hf config.json and its 6.74B params"),
    "llama2-13b": ModelPreset(
        arch=_llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096), published_params=13.0e9,
        source="Touvron et al. 2023, Table 1; huggingface.co/meta-llama/Llama-2-13b-hf config.json and its 13.0B params"),
    "llama2-70b": ModelPreset(
        arch=_llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096), published_params=69.0e9,
        source="Touvron et al. 2023, Table 1 (GQA); huggingface.co/meta-llama/Llama-2-70b-hf config.json and "
               "its 69.0B params"),
    "llama3-8b": ModelPreset(
        arch=_llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192), published_params=8.03e9,
        source="Llama Team, 'The Llama 3 Herd of Models', 2024, Table 3 (32 layers, 4096, FFN 14336, 32 heads, "
               "8 kv heads); huggingface.co/meta-llama/Llama-3.1-8B config.json (vocab 128256) and its 8.03B params"),
    "llama3-70b": ModelPreset(
        arch=_llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192), published_params=70.6e9,
        source="Llama 3 Herd, Table 3 (80 layers, 8192, FFN 28672, 64 heads, 8 kv heads); "
               "huggingface.co/meta-llama/Llama-3.1-70B config.json and its 70.6B params"),
    "llama3-405b": ModelPreset(
        arch=_llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192), published_params=406e9,
        source="Llama 3 Herd, Table 3 (126 layers, 16384, FFN 53248, 128 heads, 8 kv heads); "
               "huggingface.co/meta-llama/Llama-3.1-405B config.json and its 406B params"),
    "mistral-7b": ModelPreset(
        arch=replace(_llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 8192), window=4096), published_params=7.24e9,
        source="Jiang et al., 'Mistral 7B', 2023, Table 1 (dim 4096, 32 layers, hidden_dim 14336, 32 heads, "
               "8 kv heads, window_size 4096, context 8192, vocab 32000); huggingface.co/mistralai/Mistral-7B-v0.1 "
               "and its 7.24B params"),
    "mixtral-8x7b": ModelPreset(
        arch=replace(_llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768), experts=8, top_k=2),
        published_params=46.7e9,
        source="Jiang et al., 'Mixtral of Experts', arXiv 2401.04088, 2024, Table 1 (dim 4096, 32 layers, head_dim 128, "
               "hidden_dim 14336, 32 heads, 8 kv heads, context 32768, vocab 32000, 8 experts of which 2 per token); "
               "huggingface.co/mistralai/Mixtral-8x7B-v0.1 (46.7B parameters, no sliding window, untied)"),
    "mixtral-8x22b": ModelPreset(
        arch=replace(_llama("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 65536), experts=8, top_k=2),
        published_params=141e9,
        source="Mistral AI, 'Cheaper, Better, Faster, Stronger' (mistral.ai/news/mixtral-8x22b, 2024: 141B parameters, "
               "39B active, a 64K-token context); huggingface.co/mistralai/Mixtral-8x22B-v0.1 config.json (56 layers, "
               "hidden 6144, intermediate 16384, 48 heads, 8 kv heads, vocab 32768, 8 experts of which 2 per token)"),
    "dbrx": ModelPreset(
        arch=Architecture(name="dbrx", layers=40, hidden=6144, heads=48, kv_heads=8, vocab=100352, seq_len=32768,
                          ffn_hidden=10752, gated_mlp=True, norm="layernorm", positions="rotary", bias="none",
                          experts=16, top_k=4),
        published_params=132e9,
        source="Databricks, 'Introducing DBRX: A New State-of-the-Art Open LLM' (2024: 132B total parameters, 36B "
               "active on any input, 16 experts of which 4 per token, a 32K-token context); "
               "huggingface.co/databricks/dbrx-base config.json (d_model 6144, 40 layers, 48 heads, kv_n_heads 8, "
               "ffn_hidden_size 10752, vocab 100352, untied; its norms have no bias, counted here with one)"),
    "nemotron-4-340b": ModelPreset(
        arch=Architecture(name="nemotron-4-340b", layers=96, hidden=18432, heads=96, kv_heads=8, ffn_hidden=73728,
                          vocab=256000, seq_len=4096, positions="rotary", bias="none"),
        published_params=341.0e9,
        source="NVIDIA, 'Nemotron-4 340B Technical Report', arXiv 2406.11704, 2024, Table 1 (96 layers, hidden 18432, "
               "96 attention heads, 8 KV heads, sequence 4096, vocabulary 256,000) and sec. 2.1 (9.4B embedding and "
               "331.6B non-embedding parameters; rotary positions, squared-ReLU MLP of 4 x hidden, no biases, untied "
               "embeddings; LayerNorm: the squared ReLU and the norm cost the same bytes as the GELU and LayerNorm modelled)"),
    "nemotron-4-15b": ModelPreset(
        arch=Architecture(name="nemotron-4-15b", layers=32, hidden=6144, heads=48, kv_heads=8, vocab=256000, seq_len=4096,
                          positions="rotary", bias="none"),
        published_params=15.7e9,
        source="Parmar et al., 'Nemotron-4 15B Technical Report', arXiv 2402.16819, 2024, Table 1 (32 layers, hidden "
               "6144, 48 attention heads, 8 KV heads, sequence 4096, vocabulary 256,000) and sec. 2 (3.2B embedding "
               "and 12.5B non-embedding parameters; rotary positions, squared-ReLU MLP of 4 x hidden, no biases, "
               "untied embeddings)"),
    "gpt-neox-20b": ModelPreset(
        arch=Architecture(name="gpt-neox-20b", layers=44, hidden=6144, heads=64, vocab=50432, seq_len=2048,
                          positions="rotary"),
        published_params=20.554567680e9,
        source="Black et al., 'GPT-NeoX-20B: An Open-Source Autoregressive Language Model', 2022 (44 layers, hidden "
               "6144, 64 heads, context 2048, rotary positions on a quarter of each head, parallel attention and MLP "
               "of 4 x hidden, LayerNorm and biases, untied); huggingface.co/EleutherAI/gpt-neox-20b config.json "
               "(vocab padded to 50432) and its 20,554,567,680 parameters"),
    "opt-175b": ModelPreset(
        arch=Architecture(name="opt-175b", layers=96, hidden=12288, heads=96, vocab=50272, seq_len=2048,
                          tie_embeddings=True, max_positions=2048, dropout=True),
        published_params=175e9,
        source="Zhang et al., 'OPT: Open Pre-trained Transformer Language Models', arXiv 2205.01068, 2022, Table 1 "
               "(175B: 96 layers, 96 heads, embedding size 12288) and sec. 2 (GPT-3's architecture: learned "
               "positions, context 2048, ReLU MLP of 4 x hidden, LayerNorm and biases, dropout 0.1); Hugging Face "
               "facebook/opt-* configs (vocabulary 50272, tied embeddings)"),
    "qwen3-30b-a3b": ModelPreset(
        arch=_qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 6144, 768), published_params=30.5e9,
        source="Qwen Team, 'Qwen3 Technical Report', 2025, its MoE architecture table (48 layers, 32 q / 4 kv heads, 128 experts, "
               "8 activated); huggingface.co/Qwen/Qwen3-30B-A3B config.json (hidden 2048, head_dim 128, "
               "moe_intermediate_size 768, vocab 151936, untied) and its 30.5B parameters"),
    "qwen3-235b-a22b": ModelPreset(
        arch=_qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 12288, 1536), published_params=235e9,
        source="the same table (94 layers, 64 q / 4 kv heads, 128 experts, 8 activated); "
               "huggingface.co/Qwen/Qwen3-235B-A22B config.json (hidden 4096, head_dim 128, "
               "moe_intermediate_size 1536, vocab 151936, untied) and its 235B parameters"),
    "gpt-oss-120b": ModelPreset(
        arch=_GPT_OSS_120B,
        published_params=116.8e9,
        source="OpenAI, 'gpt-oss-120b & gpt-oss-20b Model Card', 2025 (36 layers, 116.8B parameters, 128 experts "
               "of which 4 per token, attention alternating a banded window of 128 tokens with dense attention, "
               "64 query and 8 key/value heads of 64, biases, the 201,088-token o200k_harmony vocabulary); "
               "huggingface.co/openai/gpt-oss-120b config.json (hidden 2880, intermediate_size 2880, "
               "initial_context_length 4096, untied); attention sinks (64 logits a block) left out"),
    "gpt-oss-20b": ModelPreset(
        arch=replace(_GPT_OSS_120B, name="gpt-oss-20b", layers=24, experts=32), published_params=20.91e9,
        source="OpenAI, 'gpt-oss-120b & gpt-oss-20b Model Card', 2025 (24 layers, 20.91B parameters, 32 experts of "
               "which 4 per token; the 120B's attention, widths and vocabulary); huggingface.co/openai/gpt-oss-20b "
               "config.json"),
    "deepseek-v3": ModelPreset(
        arch=Architecture(name="deepseek-v3", layers=61, hidden=7168, heads=128, kv_heads=128, head_size=128, ffn_hidden=18432,
                          vocab=129280, seq_len=4096, gated_mlp=True, norm="rmsnorm", positions="rotary", bias="none",
                          experts=256, top_k=8, expert_ffn=2048, shared_experts=1, dense_first=3, kv_lora_rank=512,
                          q_lora_rank=1536, rope_head_dim=64, v_head_dim=128, mtp_layers=1),
        published_params=671e9,
        source="DeepSeek-AI, 'DeepSeek-V3 Technical Report', arXiv 2412.19437, 2024, abstract (\"671B total parameters "
               "with 37B activated for each token\") and sec. 4.2 (61 layers, hidden 7168, 128 heads of 128, MLA with "
               "KV compression 512, query compression 1536, decoupled rotary 64; the first three layers dense; 1 shared "
               "and 256 routed experts of 2048, 8 per token); huggingface.co/deepseek-ai/DeepSeek-V3 config.json (FFN "
               "18432, vocab 129280, untied, num_nextn_predict_layers 1: one multi-token-prediction layer, an MoE block and a "
               "2 x 7168 -> 7168 projection beside the shared embedding and head; the model card's \"685B\" is the "
               "671B and 14B of MTP weights that include their own copies of the embedding and head)"),
    "deepseek-v2": ModelPreset(
        arch=Architecture(name="deepseek-v2", layers=60, hidden=5120, heads=128, kv_heads=128, head_size=128, ffn_hidden=12288,
                          vocab=102400, seq_len=4096, gated_mlp=True, norm="rmsnorm", positions="rotary", bias="none",
                          experts=160, top_k=6, expert_ffn=1536, shared_experts=2, dense_first=1, kv_lora_rank=512,
                          q_lora_rank=1536, rope_head_dim=64, v_head_dim=128),
        published_params=236e9,
        source="DeepSeek-AI, 'DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language Model', arXiv "
               "2405.04434, 2024, abstract (\"236B total parameters, of which 21B are activated for each token\") and "
               "sec. 3.1 (60 layers, hidden 5120, 128 heads of 128, MLA with KV compression 512, query compression 1536, "
               "decoupled rotary 64; every layer but the first MoE: 2 shared and 160 routed experts of 1536, 6 per "
               "token; pre-trained at 4K tokens); huggingface.co/deepseek-ai/DeepSeek-V2 config.json (the first layer's "
               "FFN 12288, vocab 102400, untied)"),
    "qwen2.5-72b": ModelPreset(
        arch=replace(_llama("qwen2.5-72b", 80, 8192, 64, 8, 29568, 152064, 4096), bias="qkv"),
        published_params=72.7e9,
        source="Qwen Team, 'Qwen2.5 Technical Report', arXiv 2412.15115, 2024, Table 1 (80 layers, 64 query and 8 "
               "key/value heads, untied) and sec. 3 (pre-training at 4,096 tokens, then 32,768); "
               "huggingface.co/Qwen/Qwen2.5-72B config.json (hidden 8192, intermediate 29568, vocab 152064, SwiGLU, "
               "RMSNorm, biases on q, k and v) and its model card's 72.7B parameters"),
    "gemma3-27b": ModelPreset(
        arch=Architecture(name="gemma3-27b", layers=62, hidden=5376, heads=32, kv_heads=16, head_size=128, ffn_hidden=21504,
                          vocab=262208, seq_len=32768, gated_mlp=True, tie_embeddings=True, norm="rmsnorm",
                          positions="rotary", bias="none", window=1024, full_every=6),
        published_params=27.016e9,
        source="Gemma Team, 'Gemma 3 Technical Report', arXiv 2503.19786, 2025, Table 1 (27B: 1,416M embedding and "
               "25,600M non-embedding parameters, the 417M vision encoder apart; 262,208 x 5376 is 1,409.6M, the rest "
               "about the 1152 x 5376 image projection, 6.2M, not counted here) and sec. 2 (five local layers of a "
               "1024-token sliding "
               "window to each global one; pre-trained at 32K tokens before the 128K extension); "
               "huggingface.co/google/gemma-3-27b-pt config.json text_config (hidden 5376, intermediate 21504, 62 layers, "
               "32 heads of 128, 16 key/value heads; GeGLU, tied embedding, vocab 262208 by transformers' default); "
               "its extra post-norms and q/k norms, 0.7M, left out"),
    "llama4-maverick": ModelPreset(
        arch=Architecture(name="llama4-maverick", layers=48, hidden=5120, heads=40, kv_heads=8, head_size=128,
                          ffn_hidden=16384, vocab=202048, seq_len=8192, gated_mlp=True, norm="rmsnorm", positions="rotary",
                          bias="none", experts=128, top_k=1, expert_ffn=8192, moe_every=2, shared_experts=1, window=8192,
                          window_chunked=True, full_every=4),
        published_params=400e9,
        source="Meta, Llama 4 model card (github.com/meta-llama/llama-models, models/llama4/MODEL_CARD.md: Maverick, "
               "17B activated and 400B total parameters, 128 experts); huggingface.co/meta-llama/"
               "Llama-4-Maverick-17B-128E config.json text_config (48 layers, hidden 5120, 40 heads of 128, 8 key/value "
               "heads, experts of 8192 on every other layer from the second with one shared expert, one routed a token, "
               "dense layers of 16384, vocab 202048, untied, chunked attention over 8192 tokens on three layers of four); "
               "trained here at one chunk, 8192 tokens (the pre-training length is not published); the vision encoder "
               "left out"),
}


def preset(name: str) -> ModelPreset:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; presets: {', '.join(MODELS)}")
    return MODELS[name]
