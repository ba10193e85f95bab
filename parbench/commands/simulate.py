"""``parbench simulate``: predict throughput, memory and communication of one layout at any scale, or
``--search`` every feasible layout for a model and cluster (ranked, with the throughput-memory Pareto front).
Pure Python: no torch, no process group.

Exit status: 0 the layout fits, 2 bad input (nothing predicted), 3 a valid layout that does not fit in
device memory (its memory breakdown is printed first)."""

from __future__ import annotations

import argparse
import json
import sys

from parbench.config import (
    WORKLOAD_NAMES,
    ConfigError,
    Schedule,
    Strategy,
    WorkloadConfig,
)
from parbench.results import host_cpus

EXIT_INFEASIBLE = 3
TOY_NOTE = ("note: no model given; showing a toy default (transformer, 4 layers, hidden 64). Name a real one "
            "with --model ({models}), --hf-config PATH, or its shape (--layers, --hidden, --heads, ...)")
ARCH_FLAGS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "gated_mlp", "tie_embeddings", "dropout", "seq", "vocab",
              "experts", "top_k", "capacity_factor", "expert_ffn", "moe_every")


def add_parser(sub) -> None:
    from parbench.sim.hardware import PRESETS
    from parbench.sim.layout import (
        ATTENTION_KINDS,
        FP8_SCALINGS,
        PRECISIONS,
        SOFTWARE,
        Recompute,
    )
    from parbench.sim.models import MODELS
    from parbench.sim.search import CP_MIN_TOKENS

    p = sub.add_parser("simulate", help="predict a layout at scale (or --search all layouts)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    w = p.add_argument_group("model (a preset, a Hugging Face config, or a shape; shape flags override the first two)")
    w.add_argument("--model", choices=sorted(MODELS), help="a published model (sources in parbench/sim/models.py)")
    w.add_argument("--list-models", action="store_true",
                   help="list the --model presets (shape, parameters, context, source) and stop")
    w.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2, "
                        "starcoder2, falcon, gpt2, gpt_neox, bloom, opt, nemotron; mixtral, qwen2_moe, qwen3_moe, "
                        "gpt_oss, llama4, deepseek_v2, deepseek_v3, glm4_moe, olmoe and dbrx with their experts; sliding windows from "
                        "sliding_window)")
    w.add_argument("--workload", choices=WORKLOAD_NAMES, help="a runner workload's shape (default transformer)")
    w.add_argument("--layers", type=int, help="decoder blocks (default: the preset's)")
    w.add_argument("--hidden", type=int, help="model width d_model (default: the preset's)")
    w.add_argument("--heads", type=int, help="attention heads (default: the preset's)")
    w.add_argument("--kv-heads", type=int, help="key/value heads (grouped-query attention); default = heads")
    w.add_argument("--head-dim", type=int,
                   help="width of one attention head, where it is not hidden / heads (Qwen3, Mistral NeMo: q is "
                        "hidden x heads x head-dim)")
    w.add_argument("--ffn-hidden", type=int, help="MLP inner width; default 4 x hidden")
    w.add_argument("--gated-mlp", action=argparse.BooleanOptionalAction, help="SwiGLU MLP (gate, up, down)")
    w.add_argument("--tie-embeddings", action=argparse.BooleanOptionalAction, help="head shares the token embedding")
    w.add_argument("--dropout", action=argparse.BooleanOptionalAction,
                   help="hidden dropout after attention and MLP (its masks saved for backward; Megatron's GPT recipes "
                        "set 0.1)")
    w.add_argument("--seq", "--seq-len", dest="seq", type=int, help="tokens per sample (default: the model's context)")
    w.add_argument("--vocab", "--vocab-size", dest="vocab", type=int, help="vocabulary size (default: the preset's)")
    w.add_argument("--experts", type=int, help="mixture of experts: experts per MoE layer (default: dense)")
    w.add_argument("--top-k", type=int, help="MoE: experts per token (default 1)")
    w.add_argument("--capacity-factor", type=float, help="MoE: expert capacity factor per sequence (default 0: dropless)")
    w.add_argument("--expert-ffn", type=int, help="MoE: one expert's MLP inner width (default: --ffn-hidden)")
    w.add_argument("--moe-every", type=int, help="MoE: every k-th block has experts (default 1)")
    w.add_argument("--mtp-layers", type=int,
                   help="multi-token-prediction layers after the last block, each a block of its own with a loss "
                        "through the shared head (DeepSeek-V3: 1; default: the preset's or config's, else 0)")
    w.add_argument("--torch-layout", action="store_true",
                   help="the runner's tensor-parallel layout (separate q/k/v all-reduces, replicated embedding and "
                        "head) instead of Megatron-LM's (fused qkv, vocabulary-parallel embedding and head)")
    c = p.add_argument_group("cluster and layout (under --search, any layout flag given fixes that choice)")
    c.add_argument("--cluster", default="h100-sxm", help=f"{', '.join(PRESETS)}, local, or a .toml/.json file")
    c.add_argument("--results-dir", default="results", help="where `local` looks for the calibrated profile")
    c.add_argument("--list-clusters", action="store_true",
                   help="list the --cluster presets (GPUs a node, peaks, memory, links, efficiencies) and stop")
    c.add_argument("--print-cluster", action="store_true",
                   help="print the --cluster's fields as JSON and stop: a file --cluster FILE reads back, to copy a "
                        "preset and change its peaks, memory or links")
    c.add_argument("--rank-spread", type=float, metavar="SIGMA",
                   help="the spread of the devices' speed (a relative standard deviation; every step waits for the "
                        "slowest rank): 0 for devices screened to one speed (default: the cluster's, 0.016 on GPUs)")
    c.add_argument("--threads", type=int, default=1, metavar="N",
                   help="CPU profiles: intra-op threads per rank, at the rates `parbench calibrate` measured for that "
                        "many (1 and each power of two up to the host's cores); ranks x threads within the cores")
    c.add_argument("--gpus", action=_GpuCounts, default=8,
                   help="devices in the cluster (dp x tp x pp); under --search, several counts (512,1024,2048): each "
                        "searched, their best layouts compared")
    c.add_argument("--dp", type=int, help="default: gpus / (tp x pp x cp)")
    c.add_argument("--tp", type=int, help="tensor-parallel degree (default: 1; --search: every divisor)")
    c.add_argument("--pp", type=int, help="pipeline degree (default: 1; --search: every divisor)")
    c.add_argument("--cp", type=int, help="context parallelism (ring attention): each rank holds seq / cp tokens "
                   f"(--search: every degree that leaves a rank {CP_MIN_TOKENS} tokens or more)")
    c.add_argument("--replicate", type=int, help="HSDP with --zero 3: shard within dp/R ranks, all-reduce across R "
                   "(--search: every split of dp x cp into replicas of two or more ranks)")
    c.add_argument("--micro-batch", type=int, help="samples per micro-batch (default 1)")
    c.add_argument("--global-batch", type=int, help="samples per step (default: dp x micro-batch; --search: gpus)")
    c.add_argument("--ep", type=int, help="expert parallelism inside dp: experts sharded over ep ranks (with "
                   "--expert-tp 1, over tp x cp x dp)")
    c.add_argument("--expert-tp", type=int, choices=(1,), help="Megatron-Core's --expert-tensor-parallel-size 1: "
                   "routed experts whole, ep groups folded over the tensor-parallel ranks too (default: tp; --search: "
                   "both where tp > 1)")
    c.add_argument("--overlap-moe-expert-parallel-comm", action="store_true",
                   help="Megatron-Core's combined 1F1B: each micro-batch's token all-to-alls hide under the compute of "
                   "the micro-batch paired with it (needs --ep > 1, and --schedule interleaved1f1b where pp > 1)")
    c.add_argument("--moe-imbalance", type=float, default=1.0,
                   help="MoE: max/mean tokens per expert rank (>= 1; default 1: balanced routing)")
    c.add_argument("--schedule", choices=[s.value for s in Schedule], help="pipeline schedule (default: 1f1b)")
    c.add_argument("--virtual-stages", type=int, help="model chunks per pipeline rank, interleaved1f1b (default: 1)")
    c.add_argument("--pipeline-layout", metavar="LAYOUT",
                   help="layers of every pipeline chunk in Megatron-LM's pipeline_model_parallel_layout syntax, e.g. "
                        "\"Et*2|(t*2|)*34,t*3|(t*2|)*3,tL\" (E embedding, t layer, L loss, | between chunks); "
                        "default: contiguous, earlier chunks taking the remainder")
    c.add_argument("--account-for-ends", action="store_true",
                   help="split the pipeline as Megatron-LM's account_for_embedding_in_pipeline_split and "
                        "account_for_loss_in_pipeline_split do: the embedding and the loss each count as a layer, so "
                        "the first and last chunks hold one block fewer (also under --search)")
    c.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help="ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters (default: 0)")
    c.add_argument("--recompute", choices=[r.value for r in Recompute],
                   help="none; selective (attention core); ops (keep every other GEMM output); full")
    c.add_argument("--recompute-every", type=int, help="with --recompute full: checkpoint every k-th layer only")
    c.add_argument("--recompute-modules", type=_modules, default=(), metavar="M[,M]",
                   help="with --recompute none or selective, Megatron-Core's module recomputation: layernorm (the "
                        "norms' outputs), moe_act (the experts' activation), mla_up_proj (latent attention's q, k, v, "
                        "its up projections run again); comma-separated")
    c.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, help="Megatron sequence parallelism (needs tp > 1; default: off)")
    c.add_argument("--tp-comm-overlap", action="store_true",
                   help="tensor-parallel collectives overlapped with their GEMMs (default: exposed)")
    f = p.add_argument_group("training software (how the framework runs the layout; --search applies them to every layout)")
    f.add_argument("--software", default="torch", choices=tuple(SOFTWARE),
                   help="the training software's own set of the flags below (each flag given adds to it): torch; "
                        "torchtitan (compiled, its loss too; FlashAttention-2 through torch's SDPA); "
                        "llm-foundry (flash-attn's fused cross-entropy); "
                        "megatron-lm (overlapped interleaved sends, its cross-entropy); megatron-lm-2021 (as the "
                        "2021-22 papers ran it: pipeline tensors in tensor-parallel slices, gradients all-reduced "
                        "after the flush); megatron-deepspeed "
                        "(DeepSpeed's pipeline engine); nemo (NVIDIA's NeMo / Megatron-Bridge recipes: "
                        "Transformer Engine FP8 under --precision fp8, the distributed optimizer's overlapped "
                        "gather under --zero 1, overlapped sends, sequence parallelism and the tensor-parallel "
                        "overlap where tp > 1, bf16 gradient reduction, the Hopper attention kernel where the "
                        "cluster has one)")
    f.add_argument("--deepspeed-pipeline", action="store_true",
                   help="DeepSpeed's pipeline engine (Megatron-DeepSpeed): blocking pipeline sends and receives (pp > 1), "
                        "each a 1/tp slice the receiving stage all-gathers; under bf16/fp8 with zero <= 2, its bf16 "
                        "optimizer's float32 gradient pass per micro-batch; with zero <= 1, the gradients all-reduced "
                        "whole after the flush, then under zero 1 the bf16 weights gathered (default: Megatron-LM's "
                        "and torch's pipelines)")
    f.add_argument("--overlap-param-gather", action="store_true",
                   help="Megatron's distributed optimizer (zero 1) gathers the updated weights under the next forward")
    f.add_argument("--overlap-p2p-comm", action="store_true",
                   help="Megatron-LM's interleaved schedule: pipeline sends and receives run under other chunks' "
                        "compute (its default there; needs --schedule interleaved1f1b and pp > 1)")
    f.add_argument("--megatron-cross-entropy", action="store_true",
                   help="Megatron-LM's vocabulary-parallel cross-entropy: one float32 copy of the logits, worked in "
                        "place (default: torch's loss kernels, three or four float32 copies at the loss's peak)")
    f.add_argument("--compiled-loss", action=argparse.BooleanOptionalAction, default=None,
                   help="a fused cross-entropy (torchtitan's loss compiled with --training.compile, flash-attn's "
                        "CrossEntropyLoss): the logits and their gradient in the activations' dtype, no float32 copy; "
                        "--no-compiled-loss: torch's loss kernels under a software that compiles the loss (torchtitan "
                        "before its --training.compile took the loss in) (default: the software's)")
    f.add_argument("--megatron-grad-buckets", action="store_true",
                   help="Megatron-Core's gradient buckets: max(40M, 1M x dp) parameters each, for its DDP all-reduce and "
                        "its distributed optimizer's reduce-scatter and gather (default of megatron-lm and nemo; "
                        "otherwise torch DDP's 25 MiB)")
    f.add_argument("--clip-grad-norm", action="store_true",
                   help="gradients clipped by their global norm before each update: one more read of the optimizer's "
                        "float32 gradients (the default of every software but torch's, which parbench's runner is)")
    f.add_argument("--te-fp8", action="store_true",
                   help="with --precision fp8: Transformer Engine's modules (weights cast once per step, FP8-saved "
                        "Linear inputs); default: torchao's float8")
    f.add_argument("--grad-reduce-in-bf16", action="store_true",
                   help="bf16/fp8: accumulate and reduce replicated gradients in bf16 (default: float32, as Megatron-LM "
                        "and DeepSpeed do)")
    f.add_argument("--attention-kernel", default="",
                   help="the flash kernel that runs, a name in the cluster preset's attention_kernels (e.g. flash2 on "
                        "A100, flash3 on H100); default: the preset's attention efficiency")
    f.add_argument("--unfused-elementwise", action="store_true",
                   help="eager torch: norms, rotary and the gate run one kernel per operator (default: fused or compiled)")
    f.add_argument("--reentrant-checkpoint", action="store_true",
                   help="--recompute full replays each block to its end (torch's use_reentrant=True checkpoint, "
                        "torch < 2.1, Megatron-LM, DeepSpeed); default for torch, torchtitan and llm-foundry: the "
                        "non-reentrant checkpoint's early stop, which skips a dense block's last GEMM")
    c.add_argument("--precision", choices=tuple(PRECISIONS),
                   help="bytes per element of weights, gradients, optimizer state, activations, and the peak the "
                        "matmuls run at (fp32: the CUDA cores', torch's default; tf32: the TF32 tensor cores'; default: bf16; "
                        "fp16 on a cluster without bf16 tensor cores)")
    c.add_argument("--fp8-all-gather", action=argparse.BooleanOptionalAction,
                   help="with --precision fp8 and --zero 1-3: gather FP8 weights (FSDP's float8 all-gather; Megatron's "
                        "--fp8-param-gather under --zero 1); default: as the software does (--software nemo: on "
                        "under --zero 1 but for MXFP8)")
    c.add_argument("--fp8-scaling", choices=FP8_SCALINGS,
                   help="with --precision fp8: how casts are scaled (Megatron-LM's --fp8-recipe names): tensorwise "
                        "(per tensor, each operand read for its amax first: torchao, Transformer Engine's current "
                        "scaling), delayed (Transformer Engine's amax history), mxfp8 (32-element blocks; Blackwell "
                        "presets only, their GEMMs at 0.95 of the per-tensor rate); default: the software's (delayed "
                        "for megatron-lm and nemo, else tensorwise)")
    c.add_argument("--attention", choices=ATTENTION_KINDS, help="default: flash on GPU clusters, eager on CPU profiles")
    p.add_argument("--search", action="store_true", help="enumerate every layout for --gpus and --global-batch")
    p.add_argument("--top", type=int, default=10, help="--search: layouts to show")
    p.add_argument("--jobs", type=int, default=1,
                   help="--search: processes that check layouts in parallel (0: one per CPU; the same ranking)")
    p.add_argument("--train-tokens", type=_tokens, metavar="TOKENS",
                   help="a training run's length (15.6T, 300B, 2e12): its steps, days and GPU-hours at the predicted "
                        "step (under --search, for every layout shown), with no failures, restarts, evaluation, "
                        "checkpoints or batch ramp-up")
    p.add_argument("--format", choices=("table", "json"), default="table", help="output: a readable table or JSON")
    p.set_defaults(handler=handle, gpu_counts=None)


class _GpuCounts(argparse.Action):
    """``--gpus N``, or ``N,M,...``: ``gpus`` the first, ``gpu_counts`` all of them (None where --gpus is not given)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        try:
            counts = tuple(int(v) for v in values.split(","))
        except ValueError:
            parser.error(f"argument --gpus: {values!r} is not a GPU count or a comma-separated list of counts")
        namespace.gpus, namespace.gpu_counts = counts[0], counts


def _tokens(text: str) -> int:
    """``--train-tokens``: argparse reports the ValueError's message as the flag's error."""
    from parbench.sim.run_cost import parse_tokens

    try:
        return parse_tokens(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _architecture(a: argparse.Namespace):
    """The model's architecture from --model / --hf-config / --workload, with shape flags applied on top."""
    from dataclasses import replace

    from parbench.sim.architecture import read_hf_config
    from parbench.sim.model import runner_architecture
    from parbench.sim.models import preset

    if a.model and a.hf_config:
        raise ConfigError("give --model or --hf-config, not both")
    if a.workload and (a.model or a.hf_config):
        raise ConfigError(f"--workload {a.workload} is a runner workload's shape; --model / --hf-config name another: "
                          "give one")
    if a.model:
        arch = preset(a.model).arch
    elif a.hf_config:
        try:
            arch = read_hf_config(a.hf_config, seq_len=a.seq or 0)
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        if a.seq is None:
            print(f"note: training sequence length {arch.seq_len} taken from max_position_embeddings; set --seq "
                  f"for the length you train with", file=sys.stderr)
    else:
        wl = WorkloadConfig(name=a.workload or "transformer", layers=a.layers or 0, hidden=a.hidden or 0,
                            heads=a.heads or 4, seq_len=a.seq or 2048, vocab_size=a.vocab or 51200)
        arch = runner_architecture(wl)
    changes = {k: v for k, v in (("layers", a.layers), ("hidden", a.hidden), ("heads", a.heads),
                                 ("kv_heads", a.kv_heads), ("head_size", a.head_dim), ("ffn_hidden", a.ffn_hidden), ("gated_mlp", a.gated_mlp),
                                 ("tie_embeddings", a.tie_embeddings), ("dropout", a.dropout), ("seq_len", a.seq),
                                 ("vocab", a.vocab),
                                 ("experts", a.experts), ("top_k", a.top_k), ("capacity_factor", a.capacity_factor),
                                 ("expert_ffn", a.expert_ffn), ("moe_every", a.moe_every), ("mtp_layers", a.mtp_layers))
               if v is not None}
    for k, v in changes.items():
        if k in ("capacity_factor", "mtp_layers"):
            continue  # 0 = dropless, 0 = no MTP; the Architecture refuses a negative one
        if isinstance(v, int) and not isinstance(v, bool) and v < 1:
            flag = {"head_size": "head-dim", "seq_len": "seq", "ffn_hidden": "ffn-hidden"}.get(k, k.replace("_", "-"))
            raise ConfigError(f"--{flag}={v} must be >= 1")
    try:
        arch = replace(arch, **changes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check_moe_flags(a, arch)
    return arch


MOE_FLAGS = (("top_k", "--top-k"), ("capacity_factor", "--capacity-factor"), ("expert_ffn", "--expert-ffn"),
             ("moe_every", "--moe-every"), ("ep", "--ep"), ("expert_tp", "--expert-tp"),
             ("moe_imbalance", "--moe-imbalance"), ("overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm"))
"""The flags that shape or place a mixture of experts' experts: on a model without experts they would change nothing."""


def _check_moe_flags(a: argparse.Namespace, arch) -> None:
    """A mixture-of-experts flag given for a dense model is refused (it would pass unread): ``--experts N`` makes
    one of any model."""
    if arch.experts:
        return
    inert = {"ep": 1, "moe_imbalance": 1.0, "overlap_moe_expert_parallel_comm": False}  # what a dense model runs at
    given = [flag for k, flag in MOE_FLAGS if getattr(a, k, None) not in (None, inert.get(k))]
    if given:
        raise ConfigError(f"{given[0]} applies to a mixture of experts; {arch.name or 'this model'} has none "
                          "(--experts N makes one)")


def _model(a: argparse.Namespace):
    from parbench.sim.model import architecture_spec, model_spec

    if a.workload == "mlp":
        if a.model or a.hf_config:
            raise ConfigError("--workload mlp takes no --model / --hf-config")
        shape = [k for k in (*ARCH_FLAGS, "head_dim", "mtp_layers") if k not in ("layers", "hidden")
                 and getattr(a, k, None) is not None]
        if shape:  # the mlp is Linear layers of one width: nothing else of a transformer's shape is read
            raise ConfigError(f"--{shape[0].replace('_', '-')}: --workload mlp takes --layers and --hidden only")
        return model_spec(WorkloadConfig(name="mlp", layers=a.layers or 0, hidden=a.hidden or 0))
    return architecture_spec(_architecture(a), megatron=not a.torch_layout)


def _modules(text: str) -> tuple[str, ...]:
    """``--recompute-modules``: comma-separated names of ``parbench.sim.layout.RECOMPUTE_MODULES``."""
    from parbench.sim.layout import RECOMPUTE_MODULES

    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in RECOMPUTE_MODULES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown) or repr(text)}: valid {', '.join(RECOMPUTE_MODULES)}")
    return names


def _check_ranges(a: argparse.Namespace) -> None:
    for gpus in a.gpu_counts or (a.gpus,):
        if gpus < 1:
            raise ConfigError(f"--gpus={gpus} must be >= 1")
    counts = a.gpu_counts or ()
    if len(counts) > 1 and not a.search:
        raise ConfigError(f"--gpus={','.join(map(str, counts))} lists several counts: --search compares their best "
                          "layouts; one layout takes one count")
    if len(set(counts)) < len(counts):
        raise ConfigError(f"--gpus={','.join(map(str, counts))} repeats a count")
    if a.top < 1:
        raise ConfigError(f"--top={a.top} must be >= 1")
    if a.jobs < 0:
        raise ConfigError(f"--jobs={a.jobs} must be >= 0 (0: one per CPU)")
    for k in ("dp", "tp", "pp", "cp", "replicate", "micro_batch", "global_batch", "virtual_stages", "recompute_every", "ep"):
        v = getattr(a, k)
        if v is not None and v < 1:
            raise ConfigError(f"--{k.replace('_', '-')}={v} must be >= 1")


def _check_mesh(a: argparse.Namespace) -> None:
    """The degrees given must divide the GPUs (--search chooses only the ones not given; 1 stands for those)."""
    tp, pp, cp = a.tp or 1, a.pp or 1, a.cp or 1
    if a.gpus % (tp * pp * cp):
        raise ConfigError(f"tp x pp x cp = {tp} x {pp} x {cp} does not divide gpus={a.gpus}")


def _layout(a: argparse.Namespace, cluster):
    from parbench.sim.layout import Layout, Recompute

    tp, pp, cp, mb = a.tp or 1, a.pp or 1, a.cp or 1, a.micro_batch or 1
    _check_mesh(a)
    dp = a.dp or a.gpus // (tp * pp * cp)
    gb = a.global_batch or dp * mb
    if gb % (dp * mb):  # the micro-batch count is gb / (dp x micro-batch size)
        raise ConfigError(f"global batch {gb} is not divisible by dp x micro-batch = {dp} x {mb}")
    software = _framework(a, cluster)
    precision, by_software = software.precision_for(_precision(a, cluster)), software.tp_flags(tp)
    chunk_layers = ()
    if a.pipeline_layout and a.account_for_ends:
        raise ConfigError("--pipeline-layout names every chunk's layers; --account-for-ends computes them: give one")
    if a.pipeline_layout:
        from parbench.sim.stages import megatron_pipeline_layout

        try:
            chunk_layers = megatron_pipeline_layout(a.pipeline_layout)
        except ValueError as exc:
            raise ConfigError(f"--pipeline-layout: {exc}") from None
    sp = by_software["sequence_parallel"] if a.sequence_parallel is None else a.sequence_parallel
    flags = software.layout_flags(pp=pp, zero=a.zero or 0, precision=precision, schedule=Schedule(a.schedule or "1f1b"))
    if a.fp8_all_gather is not None:
        flags["fp8_all_gather"] = a.fp8_all_gather
    layout = Layout(chunk_layers=chunk_layers, strategy=Strategy.HYBRID, dp=dp, tp=tp, pp=pp, cp=cp, replicate=a.replicate or 1,
                    global_batch_size=gb, micro_batches=gb // (dp * mb), schedule=Schedule(a.schedule or "1f1b"),
                    virtual_stages=a.virtual_stages or 1, zero=a.zero or 0,
                    recompute=Recompute(a.recompute or "none"), recompute_every=a.recompute_every or 1,
                    recompute_modules=a.recompute_modules,
                    sequence_parallel=sp, sp_saves_gathered_input=software.dtensor_sequence_parallel and sp,
                    precision=precision,
                    attention=_attention(a, cluster),
                    tp_comm_overlap=a.tp_comm_overlap or by_software["tp_comm_overlap"], ep=a.ep or 1,
                    expert_tp=a.expert_tp or 0, moe_imbalance=a.moe_imbalance,
                    moe_a2a_overlap=a.overlap_moe_expert_parallel_comm, **flags)
    if a.overlap_param_gather and not layout.overlap_param_gather:
        raise ConfigError(f"--overlap-param-gather is Megatron's distributed optimizer: it needs --zero 1 (got {layout.zero})")
    if a.overlap_p2p_comm and not layout.overlap_p2p_comm:
        raise ConfigError(f"--overlap-p2p-comm is Megatron-LM's interleaved schedule: it needs pp > 1 and --schedule "
                          f"interleaved1f1b without --deepspeed-pipeline (got pp={pp}, schedule {layout.schedule.value})")
    layout.check_mesh_size(a.gpus)
    return layout


def _default_precision(a: argparse.Namespace, cluster) -> None:
    """--precision where given, else bf16, or fp16 on a cluster without bf16 tensor cores (Volta), or fp32 on a CPU
    profile (``Cluster.cores``)."""
    a.precision = a.precision or ("fp32" if cluster.cores else "bf16" if cluster.bf16 else "fp16")


def _precision(a: argparse.Namespace, cluster):
    """The precision (default bf16, fp16 on a cluster without bf16 tensor cores), with bf16 gradient reduction where
    --grad-reduce-in-bf16 asks for it; FP8 only on a cluster with FP8 tensor cores, bf16 on one with bf16's."""
    _default_precision(a, cluster)
    if cluster.cores and a.precision != "fp32":
        # on this project's 2-core AVX2 VM a 512 x 512 bfloat16 matmul took 60x as long as the float32 one (no
        # native bf16 instruction), and a --precision bf16 run's step 10x as long as the prediction at float32's rate
        raise ConfigError(f"--precision {a.precision}: cluster {cluster.name} is a CPU profile, and `parbench "
                          f"calibrate` times float32 operators alone (a CPU without native bf16 instructions runs "
                          f"bfloat16 matmuls many times slower); give --precision fp32, its default")
    if a.precision in ("bf16", "amp") and not cluster.bf16:
        raise ConfigError(f"--precision {a.precision}: cluster {cluster.name} has no bf16 tensor cores (bf16 = false); "
                          f"give --precision fp16 (its default) or fp32")
    if a.precision == "tf32" and cluster.peak_flops_fp32 and cluster.peak_flops_tf32 <= cluster.peak_flops_fp32:
        raise ConfigError(f"--precision tf32: cluster {cluster.name} has no TF32 tensor cores (its float32 matmuls run "
                          f"on the CUDA cores either way); give --precision fp32")
    if a.precision == "fp8" and not cluster.peak_flops_fp8:
        raise ConfigError(f"--precision fp8: cluster {cluster.name} has no FP8 peak (peak_flops_fp8 = 0)")
    from dataclasses import replace

    from parbench.sim.layout import PRECISIONS

    precision = PRECISIONS[a.precision]
    if not a.grad_reduce_in_bf16:
        return precision
    if not precision.fp32_grad_accumulation:
        raise ConfigError(f"--grad-reduce-in-bf16 applies to bf16 and fp8, whose gradients are otherwise float32; "
                          f"{a.precision} keeps {precision.grad_bytes}-byte gradients already")
    return replace(precision, fp32_grad_accumulation=False)


def _framework(a: argparse.Namespace, cluster):
    """The training software (``--software``) with each flag given added to it, checked against the cluster
    (its attention kernels) before anything runs. A software's own attention kernel falls back to the next
    one the cluster knows (the Hopper kernel's place on an A100 is FlashAttention-2's); under eager attention
    (``--attention eager``, or a CPU profile's default) it runs none."""
    from dataclasses import replace

    from parbench.sim.layout import SOFTWARE

    if a.attention_kernel and a.attention_kernel not in cluster.attention_kernels:
        known = ", ".join(sorted(cluster.attention_kernels)) or "none"
        raise ConfigError(f"--attention-kernel {a.attention_kernel!r}: cluster {cluster.name} knows {known}")
    _default_precision(a, cluster)
    if a.te_fp8 and a.precision != "fp8":
        raise ConfigError(f"--te-fp8 needs --precision fp8 (got {a.precision})")
    if a.fp8_scaling and a.precision != "fp8":
        raise ConfigError(f"--fp8-scaling needs --precision fp8 (got {a.precision})")
    if a.fp8_scaling == "mxfp8" and not cluster.mxfp8_gemm_share:
        from parbench.sim.hardware import PRESETS

        able = ", ".join(name for name, c in PRESETS.items() if c.mxfp8_gemm_share)
        raise ConfigError(f"--fp8-scaling mxfp8: cluster {cluster.name} has no block-scaled FP8 GEMMs (presets that "
                          f"have them: {able})")
    base = SOFTWARE[a.software]
    eager = _attention(a, cluster) == "eager"
    if a.attention_kernel and eager:
        raise ConfigError(f"--attention-kernel {a.attention_kernel!r} names a flash kernel; --attention eager runs none")
    # eager attention asked for: the software's own flash kernel does not run
    kernel = "" if eager else a.attention_kernel or next((k for k in KERNEL_FALLBACK.get(base.attention_kernel, ())
                                                          if k in cluster.attention_kernels), "")
    return replace(base, attention_kernel=kernel, te_fp8=base.te_fp8 or a.te_fp8,
                   fp8_scaling=a.fp8_scaling or base.fp8_scaling,
                   fused_elementwise=base.fused_elementwise and not a.unfused_elementwise,
                   overlap_param_gather=base.overlap_param_gather or a.overlap_param_gather,
                   deepspeed_pipeline=base.deepspeed_pipeline or a.deepspeed_pipeline,
                   overlap_p2p_comm=base.overlap_p2p_comm or a.overlap_p2p_comm,
                   megatron_cross_entropy=base.megatron_cross_entropy or a.megatron_cross_entropy,
                   compiled_loss=(base.compiled_loss and not a.unfused_elementwise) if a.compiled_loss is None
                   else a.compiled_loss,
                   recompute_early_stop=base.recompute_early_stop and not a.reentrant_checkpoint,
                   reduce_grads_in_bf16=base.reduce_grads_in_bf16 or a.grad_reduce_in_bf16,
                   clips_gradients=base.clips_gradients or a.clip_grad_norm,
                   megatron_ddp=base.megatron_ddp or a.megatron_grad_buckets)


KERNEL_FALLBACK = {"flash3": ("flash3", "flash2"), "flash2": ("flash2",)}
"""A software's attention kernel, then what takes its place on a cluster without it."""


def _attention(a: argparse.Namespace, cluster) -> str:
    """--attention, else the cluster's default (``Cluster.default_attention``); flash only where the devices run it."""
    if a.attention == "flash" and not cluster.flash_attention:
        raise ConfigError(f"--attention flash: cluster {cluster.name} runs no flash attention kernel (flash_attention = "
                          f"false); its layouts run --attention eager")
    return a.attention or cluster.default_attention


def _no_model_given(a: argparse.Namespace) -> bool:
    return not (a.model or a.hf_config or a.workload) and all(getattr(a, k) is None for k in ARCH_FLAGS)


def handle(a: argparse.Namespace) -> int:
    from parbench.sim.models import MODELS

    if a.list_models or a.list_clusters:
        print("\n".join(model_lines() if a.list_models else cluster_lines(a.results_dir)))
        return 0
    _check_ranges(a)
    cluster = _cluster(a)
    if a.print_cluster:
        from parbench.sim.hardware import cluster_to_dict

        print(json.dumps(cluster_to_dict(cluster), indent=1))
        return 0
    model = _model(a)
    if _no_model_given(a):
        print(TOY_NOTE.format(models=", ".join(MODELS)), file=sys.stderr)
    if a.search:
        if a.pipeline_layout:
            raise ConfigError("--pipeline-layout names one layout's chunks; give it with --pp and --virtual-stages, "
                              "without --search")
        counts = a.gpu_counts or (a.gpus,)
        for gpus in counts:
            _check_mesh(_at(a, gpus))
        return _search(a, model, cluster) if len(counts) == 1 else _compare_counts(a, model, cluster)
    from parbench.sim.accuracy import nearest_lines, nearest_published

    layout, p = _predict(a, model, cluster)
    nearby = nearest_published(model, layout, cluster, build_row=command_layout)
    if a.format == "json":
        run = _training_run(a, model, layout, p)
        print(json.dumps({"cluster": cluster.name, "model": _model_dict(model), "layout": _layout_dict(layout),
                          "prediction": p.as_dict(), **({"training_run": run.as_dict()} if run else {}),
                          "published_nearest": [{**vars(r), "error_pct": r.error_pct} for r in nearby]}))
    else:
        _print_prediction(cluster, layout, p)
        if p.feasible and a.train_tokens:
            print(_run_line(_training_run(a, model, layout, p), p.world_size))
        if model.arch is not None and model.arch.experts:
            print(f"  mixture of experts: FLOPs and MFU count the active parameters (router + top-{model.arch.top_k} "
                  f"of {model.arch.experts} experts per token); all-to-all bytes assume balanced routing"
                  + (f" x {layout.moe_imbalance} on the busiest rank" if layout.moe_imbalance > 1 else ""))
        if model.arch is not None and model.arch.mtp_layers:
            print(f"  multi-token prediction: {model.arch.mtp_layers} layer(s) on the last pipeline chunk, each a block, "
                  f"a 2d -> d projection and a pass through the shared head with its own loss; their FLOPs count in MFU")
        print("\n".join(nearest_lines(nearby, cluster)))
    return 0 if p.feasible else EXIT_INFEASIBLE


def model_lines() -> list[str]:
    """``--list-models``: each preset's shape (heads as query/key-value), its parameters as counted here beside the
    publisher's (the main model's: DeepSeek-V3's multi-token-prediction layer apart), its context and its experts."""
    from dataclasses import replace

    from parbench.sim.model import architecture_spec
    from parbench.sim.models import MODELS

    lines = [f"{'model':18} {'layers':>6} {'hidden':>6} {'heads':>9} {'params':>8} {'published':>9} {'seq':>6}  experts"]
    for name, p in MODELS.items():
        a = p.arch
        counted = architecture_spec(replace(a, mtp_layers=0)).param_numel
        lines.append(f"{name:18} {a.layers:>6} {a.hidden:>6} {f'{a.heads}/{a.n_kv_heads}':>9} {counted / 1e9:>7.1f}B "
                     f"{p.published_params / 1e9:>8.1f}B {a.seq_len:>6}  {f'{a.top_k} of {a.experts}' if a.experts else '-'}")
    return [*lines, "each with its source in parbench/sim/models.py; --hf-config reads a Hugging Face config.json"]


def cluster_lines(results_dir: str = "results") -> list[str]:
    """``--list-clusters``: each preset's node, dense peaks, memory, links (per GPU and direction, as derated) and
    efficiencies; every figure's source is in ``parbench.sim.hardware`` (``--print-cluster`` writes one as a file).
    Then the cluster files under ``<results_dir>/clusters/`` (``parbench calibrate --nccl-tests`` writes them)."""
    from parbench.sim.hardware import PRESETS, cluster_figures, cluster_files

    lines = [(f"{'cluster':14} {'GPUs/node':>9} {'TFLOP/s':>8} {'FP8':>6} {'GiB':>6} {'HBM GB/s':>8} {'intra GB/s':>10} "
              f"{'inter GB/s':>10} {'GEMM eff':>8}  notes")]
    files = cluster_files(results_dir)
    for name, c in [*PRESETS.items(), *files.items()]:
        if isinstance(c, str):
            lines.append(f"{name}: does not read ({c})")
            continue
        f = cluster_figures(c)
        lines.append(f"{name:14} {f['gpus_per_node']:>9} {f['tflops']:>8.0f} {f['fp8_tflops']:>6.0f} "
                     f"{f['memory_gib']:>6.1f} {f['memory_gb_s']:>8.0f} {f['intra_gb_s']:>10.0f} {f['inter_gb_s']:>10.2f} "
                     f"{f['gemm_efficiency']:>8.2f}  {f['lacks']}".rstrip())
    return [*lines, ("links per GPU and direction as derated; every figure's source: --print-cluster, "
                     "parbench/sim/hardware.py" + ("; the files: --cluster FILE" if files else ""))]


def _cluster(a: argparse.Namespace):
    """The --cluster preset, host profile or file, with --rank-spread in place of its own spread where given and a
    CPU profile's rates at --threads."""
    from dataclasses import replace

    from parbench.sim.hardware import load_cluster

    try:
        cluster = load_cluster(a.cluster, results_dir=a.results_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if a.threads != 1:
        if not cluster.cores:
            raise ConfigError(f"--threads {a.threads}: cluster {cluster.name} describes GPUs; threads per rank are a "
                              "CPU profile's (`--cluster local` after `parbench calibrate`)")
        try:
            cluster = cluster.with_threads(a.threads)
        except ValueError as exc:
            raise ConfigError(f"--threads: {exc}") from None
    try:
        return cluster if a.rank_spread is None else replace(cluster, rank_spread=a.rank_spread)
    except ValueError as exc:
        raise ConfigError(f"--rank-spread: {exc}") from None


def _predict(a: argparse.Namespace, model, cluster):
    """(layout, prediction) of one layout from the command line: ``_checked_layout``, then the prediction."""
    from parbench.sim.predict import predict

    layout = _checked_layout(a, model, cluster)
    return layout, predict(model, layout, cluster)


def _checked_layout(a: argparse.Namespace, model, cluster):
    """The layout of the command line, its pipeline ends where --account-for-ends asks, every layout rule checked."""
    from dataclasses import replace

    layout = _layout(a, cluster)
    if a.account_for_ends and layout.chunks > 1:
        from parbench.sim.stages import account_for_ends
        try:
            ends = account_for_ends(model.blocks, layout.chunks, len(model.units) - model.blocks)
        except ValueError as exc:
            raise ConfigError(f"--account-for-ends: {exc}") from None
        layout = replace(layout, chunk_layers=ends)
    _check_rules(model, layout, cluster)
    return layout


def command_prediction(argv: list[str]):
    """(cluster, model, layout, prediction) of ``parbench simulate ARGV`` for one layout, exactly as the command
    predicts it; ConfigError names what is wrong (argparse's own errors included), --search is refused."""
    from parbench.sim.predict import predict

    cluster, model, layout = command_layout(argv)
    return cluster, model, layout, predict(model, layout, cluster)


def command_layout(argv: list[str]):
    """(cluster, model, layout) of ``parbench simulate ARGV`` for one layout, built and checked as the command
    builds them, without the prediction (what ``reproduce.simulate_args`` compares a run with)."""
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            a = parse(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise ConfigError(lines[-1].split("error: ", 1)[-1] if lines else "not a simulate command line") from None
    if a.search:
        raise ConfigError("--search ranks many layouts; a compared row is one layout")
    _check_ranges(a)
    cluster = _cluster(a)
    model = _model(a)
    return cluster, model, _checked_layout(a, model, cluster)


def _model_dict(model) -> dict:
    d = {"name": model.arch.name if model.arch else model.name, "parameters": model.param_numel}
    if model.arch is not None:
        d.update({k: v for k, v in vars(model.arch).items() if k != "name"})
    return d


def _layout_dict(layout) -> dict:
    d = {k: (v.value if hasattr(v, "value") else v) for k, v in vars(layout).items() if k != "precision"}
    d["precision"] = dict(vars(layout.precision))
    d["micro_batch_size"] = layout.micro_batch_size
    return d


def _memory_lines(cluster, p) -> list[str]:
    from parbench.sim.predict import format_bytes

    worst = p.peak_memory or p.memory  # the rank that sets the peak: its parts add up to it
    parts = ", ".join(f"{k.removesuffix('_bytes')} {format_bytes(v)}" for k, v in worst.as_dict().items() if v)
    return [f"  memory per rank  {format_bytes(p.peak_memory_bytes)} of {format_bytes(cluster.memory_bytes)}: {parts}"]


def _print_prediction(cluster, layout, p) -> None:
    from parbench.sim.predict import format_bytes
    from parbench.sim.search import describe

    print(f"{cluster.name}: {p.world_size} ranks, {describe(layout)}")
    if not p.feasible:
        print(f"  does not fit: needs {format_bytes(p.peak_memory_bytes)} per rank, the device has "
              f"{format_bytes(cluster.memory_bytes)}")
        print("\n".join(_memory_lines(cluster, p)))
    else:
        print("\n".join(_step_lines(p)))
        print(f"  throughput       {p.throughput_samples_per_s:.4g} samples/s, {p.tokens_per_s:.4g} tokens/s, "
              f"MFU {p.mfu:.1%} (PaLM), HFU {p.hfu:.1%} (with recomputation)")
        print("\n".join(_memory_lines(cluster, p)))
    print("  bytes sent per rank per step: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in p.comm_bytes.items()))
    for key, v in p.comm_by_collective.items():
        print(f"    {key:<28}{format_bytes(v):>14}")


def _step_lines(p) -> list[str]:
    """The step time, its three parts, then each breakdown term (``_term_lines``)."""
    step = (f"  step time        {p.step_time_s:.4g} s  (compute {p.compute_time_s:.4g}, bubble {p.bubble_time_s:.4g}, "
            f"communication on the critical path {p.comm_time_s:.4g})")
    return [step, *_term_lines(p)]


def _term_lines(p) -> list[str]:
    """The step as the runner's breakdown terms (seconds and share), compute split and total communication."""
    parts = ", ".join(f"{k} {v:.4g}" for k, v in p.compute_parts_s.items())
    if p.slowest_device > 1:
        parts += f"; the slowest of {p.world_size} devices +{p.slowest_device - 1:.1%}"
    lines = []
    for term, v in p.terms.items():
        name = term[len("time_"):-len("_s")].replace("_", " ")
        extra = f"  ({parts})" if term == "time_compute_s" else ""
        if term.startswith("time_comm_exposed_"):
            category = term[len("time_comm_exposed_"):-2]
            total, latency = p.comm_total_s[category], p.comm_latency_s.get(category, 0.0)
            extra = f"  (of {total:.4g} s in all" + (f", {latency:.3g} s of it latency)" if total else ")")
        lines.append(f"    {name:<28}{v:>10.4g} s {v / p.step_time_s:>6.1%}{extra}")
    return lines


def _progress(done: int, total: int) -> None:
    print(f"\r  {done}/{total} layouts evaluated", end="" if done < total else "\n", file=sys.stderr, flush=True)


def search_options(a: argparse.Namespace, cluster):
    """The search's options from the command line: each layout flag given fixes that choice, the software
    (``--software`` and its flags) runs every layout, the cluster's default attention unless ``--attention``."""
    from parbench.sim.layout import Recompute
    from parbench.sim.search import SearchOptions

    software = _framework(a, cluster)
    return SearchOptions(precision=software.precision_for(_precision(a, cluster)), tp=a.tp, pp=a.pp, dp=a.dp, cp=a.cp,
                         micro_batch=a.micro_batch, schedule=Schedule(a.schedule) if a.schedule else None,
                         virtual_stages=a.virtual_stages, zero=a.zero,
                         recompute=Recompute(a.recompute) if a.recompute else None,
                         recompute_every=a.recompute_every or 1, recompute_modules=a.recompute_modules,
                         sequence_parallel=a.sequence_parallel,
                         replicate=a.replicate, fp8_all_gather=a.fp8_all_gather, ep=a.ep,
                         expert_tp=a.expert_tp, moe_imbalance=a.moe_imbalance,
                         moe_a2a_overlap=a.overlap_moe_expert_parallel_comm, tp_comm_overlap=a.tp_comm_overlap,
                         account_for_ends=a.account_for_ends, attention=_attention(a, cluster), framework=software)


def parse(argv: list[str]) -> argparse.Namespace:
    """``parbench simulate ARGV`` parsed as the command parses it: the dashboard's simulator panels build their
    layouts and searches through it, so they predict what the command predicts."""
    parser = argparse.ArgumentParser(prog="parbench")
    add_parser(parser.add_subparsers())
    return parser.parse_args(["simulate", *argv])


def layout_for(argv: list[str], cluster):
    """The layout ``parbench simulate ARGV`` predicts on ``cluster`` (the default software's flags and attention
    applied); raises ConfigError, a ValueError, naming what is wrong with it."""
    return _layout(parse(argv), cluster)


def predict_for(argv: list[str], model, cluster):
    """(layout, prediction) of ``parbench simulate ARGV`` for ``model`` on ``cluster``, as the command predicts them;
    raises ConfigError, a ValueError, naming what is wrong with the layout or every rule it breaks."""
    return _predict(parse(argv), model, cluster)


def _check_rules(model, layout, cluster) -> None:
    """The layout rules (``search.layout_violations``: tp inside a node and dividing the heads, cp splitting the
    sequence, ep dividing the experts, interleaving on two or more stages, a layer in every pipeline chunk), every
    one it breaks named."""
    from parbench.sim.search import layout_violations

    broken = layout_violations(model, layout, cluster)
    if broken:
        raise ConfigError("; ".join(broken))


def search_options_for(argv: list[str], cluster):
    """What ``parbench simulate --search ARGV`` searches on ``cluster``."""
    return search_options(parse(["--search", *argv]), cluster)


def _search(a: argparse.Namespace, model, cluster) -> int:
    from parbench.sim.accuracy import nearest_lines, nearest_published
    from parbench.sim.search import (
        describe,
        pareto_front,
        rejected_counts,
        search,
        within_margin,
    )

    gb = a.global_batch or a.gpus
    progress = _progress if sys.stderr.isatty() and a.format == "table" else None
    cands = search(model, cluster, gpus=a.gpus, global_batch=gb, options=search_options(a, cluster), progress=progress,
                   jobs=a.jobs or host_cpus())
    feasible = [c for c in cands if c.feasible]
    front = pareto_front(cands)
    rejected = rejected_counts(cands)
    # the best layout's record: how far the model has been from published runs like it
    nearby = nearest_published(model, feasible[0].layout, cluster, build_row=command_layout) if feasible else []
    close = within_margin(feasible)
    if a.format == "json":
        def row(c) -> dict:
            return _candidate_row(a, model, cluster, c)

        print(json.dumps({"evaluated": len(cands), "feasible": len(feasible), "top": [row(c) for c in feasible[:a.top]],
                          "published_nearest_to_best": [{**vars(r), "error_pct": r.error_pct} for r in nearby],
                          "within_margin_of_best": close,
                          "pareto": [row(c) for c in front], "rejected": rejected,
                          "rejected_examples": [{"layout": describe(c.layout) if c.layout else None, "reason": c.reason,
                                                 "peak_memory_bytes": c.peak_memory_bytes or None}
                                                for c in cands if not c.feasible][:20]}))
        return 0 if feasible else EXIT_INFEASIBLE
    from parbench.sim.predict import format_bytes

    print(f"{len(cands)} layouts, {len(feasible)} fit in {format_bytes(cluster.memory_bytes)} per device")
    for reason, n in sorted(rejected.items(), key=lambda kv: -kv[1]):
        print(f"  rejected {n:>5}: {reason}")
    nearest = next((c for c in cands if c.reason.startswith("needs")), None)  # the search puts it first
    if nearest:
        over = format_bytes(nearest.peak_memory_bytes - cluster.memory_bytes)
        print(f"  nearest to fitting ({over} over): {describe(nearest.layout)}: {nearest.reason}")
    runs = (lambda c: _training_run(a, model, c.layout, c.prediction)) if a.train_tokens else None
    _table(f"top {a.top} by throughput", feasible[:a.top], runs)
    if feasible:
        print(f"\nthe best layout, {describe(feasible[0].layout)}: where its step goes")
        print("\n".join([*_step_lines(feasible[0].prediction), *_memory_lines(cluster, feasible[0].prediction)]))
        if runs:
            print(_run_line(runs(feasible[0]), a.gpus))
        command = layout_command(a, model, cluster, feasible[0].layout)
        print(f"  alone, with its collectives: {command}" if command else
              "  (no parbench simulate command line states this layout alone)")
        print("\n".join(nearest_lines(nearby, cluster)))
        print(_margin_line(close))
    _table("throughput-memory Pareto front", front, runs)
    return 0 if feasible else EXIT_INFEASIBLE


def _at(a: argparse.Namespace, gpus: int) -> argparse.Namespace:
    """The command line with one GPU count: what ``--gpus N`` alone would have given."""
    return argparse.Namespace(**{**vars(a), "gpus": gpus, "gpu_counts": None})


def _candidate_row(a: argparse.Namespace, model, cluster, c) -> dict:
    """A searched layout as JSON: its description, its own command line, its prediction and any training run."""
    from parbench.sim.search import describe

    run = _training_run(a, model, c.layout, c.prediction)
    return {"layout": describe(c.layout), "command": layout_command(a, model, cluster, c.layout),
            **c.prediction.as_dict(), **({"training_run": run.as_dict()} if run else {})}


def _compare_counts(a: argparse.Namespace, model, cluster) -> int:
    """``--search`` at each of several GPU counts (the same model, batch, software and flags): each count's best
    layout, its rate per GPU against the first count's, and with ``--train-tokens`` what the run costs there."""
    from parbench.sim.run_cost import format_count
    from parbench.sim.search import describe, search

    progress = _progress if sys.stderr.isatty() and a.format == "table" else None
    best = []
    for gpus in a.gpu_counts:
        one = _at(a, gpus)
        cands = search(model, cluster, gpus=gpus, global_batch=one.global_batch or gpus,
                       options=search_options(one, cluster), progress=progress, jobs=a.jobs or host_cpus())
        fits = [c for c in cands if c.feasible]
        best.append((one, len(cands), len(fits), fits[0] if fits else _why_none(cands, cluster)))
    if a.format == "json":
        print(json.dumps({"by_gpus": [{"gpus": one.gpus, "evaluated": n, "feasible": k,
                                       **({"best": None, "none_because": c} if isinstance(c, str) else
                                          {"best": _candidate_row(one, model, cluster, c)})}
                                      for one, n, k, c in best]}))
        return 0 if all(not isinstance(c, str) for *_, c in best) else EXIT_INFEASIBLE
    batch = f"global batch {a.global_batch}" if a.global_batch else "global batch = GPUs"
    print(f"the best layout at each GPU count ({batch}; a count's whole search: --gpus N --search)")
    print(f"{'GPUs':>7}{'layouts':>9}{'fit':>7}{'samples/s':>11}{'per GPU':>9}{'MFU':>7}{'GiB':>8}"
          + (f"{'days':>9}{'GPU-h':>9}" if a.train_tokens else "") + "  layout")
    first = next(((one.gpus, c) for one, _, _, c in best if not isinstance(c, str)), None)
    for one, n, k, c in best:
        if isinstance(c, str):
            print(f"{one.gpus:>7}{n:>9}{k:>7}  no layout fits: {c}")
            continue
        p = c.prediction
        rate = p.throughput_samples_per_s / one.gpus / (first[1].prediction.throughput_samples_per_s / first[0])
        run = _training_run(one, model, c.layout, p)
        cost = f"{run.days:>9.4g}{format_count(run.gpu_hours):>9}" if run else ""
        print(f"{one.gpus:>7}{n:>9}{k:>7}{p.throughput_samples_per_s:>11.4g}{rate:>8.1%} {p.mfu:>7.1%}"
              f"{p.peak_memory_bytes / 2**30:>8.2f}{cost}  {describe(c.layout)}")
    print(f"  per GPU: each count's samples/s a GPU against the {first[0]}-GPU best's" if first else "")
    return 0 if all(not isinstance(c, str) for *_, c in best) else EXIT_INFEASIBLE


def _why_none(cands, cluster) -> str:
    """Why a search found no layout that fits: the one nearest to fitting and how far over, else the commonest rule
    broken (``search.rejected_counts``)."""
    from parbench.sim.predict import format_bytes
    from parbench.sim.search import describe, rejected_counts

    nearest = next((c for c in cands if c.reason.startswith("needs")), None)  # the search puts it first
    if nearest:
        return (f"the nearest, {describe(nearest.layout)}, is {format_bytes(nearest.peak_memory_bytes - cluster.memory_bytes)} "
                "over")
    counts = rejected_counts(cands)
    return max(counts, key=counts.get) if counts else "no layout to try"


def layout_command(a: argparse.Namespace, model, cluster, layout) -> str:
    """The ``parbench simulate`` line that predicts one searched ``layout`` alone (the search's model, cluster and
    software; ``reproduce.command_args`` checks it builds that layout), '' where no command line states it."""
    import contextlib
    import io
    import shlex

    from parbench.sim.architecture import read_hf_config
    from parbench.sim.model import runner_architecture
    from parbench.sim.models import preset
    from parbench.sim.reproduce import command_args, shape_args

    arch = model.arch
    if arch is None:
        return ""
    if a.model:  # the user's own form: the preset, a Hugging Face config or a workload, then the flags that change it
        base, given = preset(a.model).arch, ["--model", a.model]
    elif a.hf_config:
        base = read_hf_config(a.hf_config, seq_len=a.seq or 0)  # a config may hold only some lengths (Llama 4)
        given = [f"--hf-config={a.hf_config}", *([f"--seq={a.seq}"] if a.seq else [])]
    else:  # a runner workload's shape, every size written out
        sizes = {"layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads, "seq_len": arch.seq_len,
                 "vocab_size": arch.vocab}
        base = runner_architecture(WorkloadConfig(name=a.workload or "transformer", **sizes))
        given = [f"--workload={a.workload or 'transformer'}", *(f"--{k.split('_')[0]}={v}" for k, v in sizes.items())]
    changes = shape_args(arch, base)
    extra = ([f"--rank-spread={a.rank_spread}"] if a.rank_spread is not None else []) + \
        ([f"--threads={a.threads}"] if a.threads != 1 else []) + \
        ([f"--results-dir={a.results_dir}"] if a.cluster == "local" else [])
    with contextlib.redirect_stderr(io.StringIO()):  # the model's notes were printed once, for the search
        argv = command_args(arch, layout, command_layout, cluster=a.cluster, cluster_name=cluster.name,
                            models=() if changes is None else ([*given, *changes],), extra=tuple(extra))
    return shlex.join(["parbench", "simulate", *argv]) if argv else ""


def _training_run(a: argparse.Namespace, model, layout, p):
    """``--train-tokens``'s run at this layout's predicted step (None without the flag, or for a layout that does
    not fit: it has no step)."""
    from parbench.sim.run_cost import training_run

    if not a.train_tokens or not p.feasible:
        return None
    return training_run(a.train_tokens, tokens_per_step=layout.global_batch_size * model.tokens_per_sample,
                        step_time_s=p.step_time_s, gpus=p.world_size)


def _run_line(run, gpus: int) -> str:
    from parbench.sim.run_cost import LEFT_OUT, format_count

    return (f"  a run of {format_count(run.tokens)} tokens  {run.steps:,} steps, {run.days:.4g} days on {gpus} GPUs, "
            f"{format_count(run.gpu_hours)} GPU-hours ({LEFT_OUT})")


def _margin_line(close: int) -> str:
    """What the ranking at the top can be trusted for: the published layout pairs the model orders, by margin."""
    from parbench.sim.accuracy import PAIR_MARGIN_PCT, layout_pairs, pair_summary

    s = pair_summary(layout_pairs())
    checked = (f"published layout pairs more than {PAIR_MARGIN_PCT:.0f}% apart are predicted in their published order "
               f"in {s['decided_ordered']} of {s['decided']}, closer ones in {s['close_ordered']} of {s['close']} "
               f"(parbench validate --published)")
    if not close:
        return f"  no other layout is predicted within {PAIR_MARGIN_PCT:.0f}% of it; {checked}"
    return (f"  {close} other layout{'s are' if close > 1 else ' is'} predicted within {PAIR_MARGIN_PCT:.0f}% of it, "
            f"closer than the order the model was checked on: {checked}")


def _table(title: str, cands, runs=None) -> None:
    """One line a layout: throughput, MFU, memory, and with ``runs`` (a candidate's training run) its days and
    GPU-hours."""
    from parbench.sim.run_cost import format_count
    from parbench.sim.search import describe

    print(f"\n{title}:\n{'samples/s':>11}{'MFU':>7}{'GiB':>8}" + (f"{'days':>9}{'GPU-h':>9}" if runs else "") + "  layout")
    for c in cands:
        p = c.prediction
        cost = f"{runs(c).days:>9.4g}{format_count(runs(c).gpu_hours):>9}" if runs else ""
        print(f"{p.throughput_samples_per_s:>11.4g}{p.mfu:>7.1%}{p.peak_memory_bytes / 2**30:>8.2f}{cost}  {describe(c.layout)}")
