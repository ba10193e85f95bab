"""Published at-scale training throughputs and the simulator's predictions for them.

Every row is a layout a paper or a framework's benchmark page ran, with the throughput it printed,
the table it printed it in, and what the row leaves unstated (marked ``assumed``). Throughputs printed
as teraFLOP/s per GPU use Narayanan et al.'s eq. (3), F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per
iteration (GEMM FLOPs including the recomputation forward), so a row's iteration time is
F / (teraFLOP/s x GPUs); rows printed as iteration times are taken as printed. The model is predicted
on one cluster preset per row with nothing fitted per row or per source: every constant is the
preset's (``parbench.sim.hardware``).

Sources (A100-80GB SXM, DGX A100 nodes of 8 GPUs, 8 x HDR InfiniBand per node):
- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
  SC 2021 (arXiv 2104.04473): Table 1 (weak scaling, tensor x pipeline layouts, 1.7B to 1T) and Table 2
  (PTD-P rows: 175B and 530B at three GPU counts each, same global batch, micro-batch 1). Megatron-LM
  as then: fp16 mixed precision, full activation recomputation (eq. 3 counts it), the non-interleaved
  1F1B schedule (Table 1 assumed: the table does not say; Table 2 is the scaling study of sec. 5.2),
  data-parallel gradients all-reduced after the pipeline flush (Megatron's own DDP: the README's
  "performs gradient all-reduce at the end of back propagation step").
  Values cross-checked in three independent transcriptions of both tables (every cell agrees).
- Smith et al., "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B", 2022 (arXiv
  2201.11990), sec. 2.4: 530B (105 layers, hidden 20480, 128 heads, s = 2048) at tensor 8 x pipeline 35
  on 280, 350 and 420 DGX A100 nodes, global batch 1920, iteration times 60.1, 50.2 and 44.4 s
  (126, 121, 113 teraFLOP/s per GPU, which eq. (3) with V = 51200 reproduces to 0.5%). DeepSpeed's
  pipeline engine: 1F1B, micro-batch 1 (assumed), full recomputation, gradients reduced after the flush,
  blocking sends and receives issued one after another (``Layout.pp_blocking_p2p``).
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023 (arXiv
  2205.05198), sec. 6 on Selene (as above): Table 3's four layouts (22B: tp 8, micro-batch 4, batch 4 on 8
  GPUs; 175B: tp 8 x pp 8 on 64; 530B: tp 8 x pp 35 on 280; 1T: tp 8 x pp 64 on 512; micro-batch 1 beyond
  the 22B; no data parallelism; the interleaved schedule with three stages per rank for the 175B and the
  530B), each timed in Table 5 with full recomputation and with sequence parallelism + selective
  recomputation ("present work"); and sec. 6.3's 530B at 8-way data parallelism (2240 GPUs, the batch x 8,
  gradients all-reduced after the flush, "we do not use any overlapping"): 39.15 s. Megatron-LM as of 2022:
  "mixed precision" (fp16 assumed, as SC21), s = 2048, V = 51200, no flash attention yet (its selective
  recomputation recomputes the attention core).

- Megatron-LM's README (github.com/NVIDIA/Megatron-LM, README.md at commit d086a2e, "GPT-3 Example"): GPT-3 175B
  on 1024 A100s at TP 8 x PP 16, global batch 1536, about 32 s an iteration and 138 teraFLOP/s per GPU. The
  README names the layout and batch; micro-batch 1, fp16 and full recomputation are the script it was printed
  with (``examples/pretrain_gpt3_175B.sh`` at commit 090e141, container ``pytorch:20.12``). Held out.

Mixture of experts (H100 80GB SXM, 8 per node, 8 x 400 Gbit/s InfiniBand):
- Megatron-LM, ``megatron/core/transformer/moe/README.md`` (github.com/NVIDIA/Megatron-LM, MCore v0.9,
  commit 022bcb5): "468 TFLOPS for Mixtral 8X7B bf16 training", and its "Reference Best Parallel
  Mapping": Mixtral 8x7B dropless, vocabulary 32K, all-to-all dispatcher, BF16, 64 GPUs, sequence
  4096, TP 1, EP 8, PP 4, VP 8, micro-batch 1, global batch 256. Mixtral's shape (32 layers, hidden
  4096, 32 heads, 8 key/value groups, SwiGLU of 14336, 8 experts top-2, RMSNorm, rotary, untied) is
  the README's own example script. The teraFLOP/s are counted as Megatron-LM counts them
  (``megatron_moe_flops``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from parbench.config import Schedule, Strategy
from parbench.sim.hardware import PRESETS, Cluster
from parbench.sim.layout import PRECISIONS, SOFTWARE, Layout, Recompute
from parbench.sim.architecture import Architecture
from parbench.sim.model import ModelSpec, architecture_spec
from parbench.sim.models import MODELS
from parbench.sim.comm import tp_ops
from parbench.sim.overlap import tensor_parallel_exposed_s
from parbench.sim.predict import op_time_s, predict
from parbench.sim.stages import Chunk, Stage
from parbench.sim.timing import chunk_times_s, slowest_of

SEQ, VOCAB = 2048, 51200
SC21 = "Narayanan et al. SC21"
MTNLG = "Smith et al. 2022 (MT-NLG)"


@dataclass(frozen=True, kw_only=True)
class Published:
    """One published throughput with the full layout it was measured on."""

    name: str
    source: str
    table: str
    series: str = ""
    """Rows of one scaling series (same model and batch, GPU count varied) share a name."""
    layers: int
    hidden: int
    heads: int
    tp: int
    pp: int
    gpus: int
    global_batch: int
    micro_batch: int = 1
    measured_s: float
    """The iteration time (printed, or derived from the printed teraFLOP/s per GPU with eq. 3)."""
    printed: str
    """The figure as the source prints it."""
    recompute: Recompute = Recompute.FULL
    sequence_parallel: bool = False
    cluster: str = "a100-80gb"
    assumed: str = ""
    arch: Architecture | None = None
    """The model's full architecture where it is not Megatron's GPT at s = 2048, V = 51200 (MoE rows)."""
    ep: int = 1
    virtual_stages: int = 1
    zero: int = 0
    precision: str = "bf16"
    """SC21: fp16 (Megatron-LM then: fp16 gradients); MT-NLG and the MoE row: bf16 (float32 gradient accumulation)."""
    overlap_grad_reduce: bool = False
    """Gradients reduced in buckets during the last backward (Megatron-LM's ``--overlap-grad-reduce``, set by
    the MoE README's example script); False: one flat reduction after the pipeline flush."""
    overlap_param_gather: bool = False
    """The distributed optimizer's parameter gathers under the next forward (``--overlap-param-gather``, set by
    the MoE README's example script; ``Layout.overlap_param_gather``)."""
    blocking_p2p: bool = False
    """DeepSpeed's pipeline engine (MT-NLG): blocking sends and receives one after another (``Layout.pp_blocking_p2p``),
    and under bf16 its bf16 optimizer's float32 gradient pass after every micro-batch
    (``Layout.fp32_grad_pass_per_micro_batch``)."""
    attention: str = ""
    """The attention as run: '' flash where the row has an architecture of its own, else eager (Megatron-LM
    before flash attention: its fused scale-mask-softmax between two batched GEMMs)."""
    chunk_layers: tuple[int, ...] = ()
    """Transformer layers per pipeline stage where the source states its own split (``Layout.chunk_layers``)."""

    def __post_init__(self) -> None:
        if self.gpus % (self.tp * self.pp) or self.global_batch % (self.gpus // (self.tp * self.pp) * self.micro_batch):
            raise ValueError(f"{self.name}: gpus={self.gpus}, tp={self.tp}, pp={self.pp}, batch={self.global_batch} "
                             f"and micro-batch={self.micro_batch} do not form a layout")

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)


def megatron_flops(b: int, l: int, h: int, s: int = SEQ, v: int = VOCAB) -> float:
    """Narayanan et al. 2021, eq. (3): FLOPs of one iteration with full recomputation."""
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def _tflops_row(name: str, table: str, l: int, h: int, a: int, tp: int, pp: int, gpus: int, b: int, tflops: float,
                *, source: str = SC21, series: str = "", assumed: str = "") -> Published:
    seconds = megatron_flops(b, l, h) / (tflops * 1e12 * gpus)
    return Published(name=name, source=source, table=table, series=series, layers=l, hidden=h, heads=a, tp=tp, pp=pp,
                     gpus=gpus, global_batch=b, measured_s=seconds, printed=f"{tflops:g} TFLOP/s per GPU",
                     assumed=assumed, precision="fp16")


T1_ASSUMED = "micro-batch 1 and the 1F1B schedule (Table 1 states neither)"
TABLE1 = tuple(_tflops_row(f"GPT {n}B", "Table 1", *row, assumed=T1_ASSUMED) for n, row in (
    ("1.7", (24, 2304, 24, 1, 1, 32, 512, 137)),
    ("3.6", (30, 3072, 32, 2, 1, 64, 512, 138)),
    ("7.5", (36, 4096, 32, 4, 1, 128, 512, 142)),
    ("18.4", (40, 6144, 48, 8, 1, 256, 1024, 135)),
    ("39.1", (48, 8192, 64, 8, 2, 512, 1536, 138)),
    ("76.1", (60, 10240, 80, 8, 4, 1024, 1792, 140)),
    ("145.6", (80, 12288, 96, 8, 8, 1536, 2304, 148)),
    ("310.1", (96, 16384, 128, 8, 16, 1920, 2160, 155)),
    ("529.6", (105, 20480, 128, 8, 35, 2520, 2520, 163)),
    ("1008", (128, 25600, 160, 8, 64, 3072, 3072, 163)),
))
TABLE2 = tuple(
    _tflops_row(f"GPT {n}B on {gpus} GPUs", "Table 2 (PTD-P)", l, h, a, 8, pp, gpus, b, tf, series=f"SC21 {n}B",
                assumed="the 1F1B schedule")
    for n, l, h, a, pp, b, runs in (
        ("174.6", 96, 12288, 96, 12, 1536, ((384, 153), (768, 149), (1536, 141))),
        ("529.6", 105, 20480, 128, 35, 2240, ((560, 171), (1120, 167), (2240, 159))))
    for gpus, tf in runs)
MT_NLG = tuple(
    Published(name=f"MT-NLG 530B on {nodes} nodes", source=MTNLG, table="sec. 2.4", series="MT-NLG 530B",
              layers=105, hidden=20480, heads=128, tp=8, pp=35, gpus=8 * nodes, global_batch=1920, measured_s=secs,
              printed=f"{secs} s per iteration", blocking_p2p=True,
              assumed="micro-batch 1; bf16 through DeepSpeed's bf16 optimizer (its float32 gradient pass per micro-batch)")
    for nodes, secs in ((280, 60.1), (350, 50.2), (420, 44.4)))

KORTHIKANTI = "Korthikanti et al. 2022"
K22_ASSUMED = "fp16 mixed precision (the paper: 'mixed precision')"
K22_LAYOUTS = {"22B": (48, 6144, 64, 8, 1, 8, 4, 4, 1), "175B": (96, 12288, 96, 8, 8, 64, 64, 1, 3),
               "530B": (105, 20480, 128, 8, 35, 280, 280, 1, 3), "1T": (128, 25600, 160, 8, 64, 512, 512, 1, 1)}
"""Table 3: layers, hidden, heads, tp, pp, GPUs, global batch, micro-batch; then the virtual stages (sec. 6)."""
K22_TABLE5 = {"22B": (1.42, 1.10), "175B": (18.13, 13.75), "530B": (49.05, 37.83), "1T": (94.42, 71.49)}
"""Table 5: seconds per iteration with full recomputation, and with sequence parallelism + selective recomputation."""


def _k22_row(n: str, *, present: bool, secs: float, gpus: int = 0, table: str = "Table 5", series: str = "") -> Published:
    l, h, a, tp, pp, g, b, mb, v = K22_LAYOUTS[n]
    gpus = gpus or g
    return Published(name=f"GPT {n} {'SP + selective' if present else 'full recompute'} on {gpus} GPUs",
                     source=KORTHIKANTI, table=table, series=series, layers=l, hidden=h, heads=a, tp=tp, pp=pp,
                     gpus=gpus, global_batch=b * gpus // g, micro_batch=mb, virtual_stages=v, measured_s=secs,
                     printed=f"{secs} s per iteration", recompute=Recompute.SELECTIVE if present else Recompute.FULL,
                     sequence_parallel=present, precision="fp16", assumed=K22_ASSUMED)


K22_TABLE4 = {(Recompute.NONE, False): 19.6e-3, (Recompute.NONE, True): 19.0e-3, (Recompute.FULL, False): 27.2e-3,
              (Recompute.SELECTIVE, False): 20.9e-3, (Recompute.SELECTIVE, True): 20.3e-3}
"""Table 4: forward + backward seconds of one 22B layer (tp 8, micro-batch 4), per (recomputation, sequence
parallelism): no recomputation, with sequence parallelism, full recomputation, selective, selective + sequence."""
K22_530B = "Korthikanti 530B SP + selective"
K22 = tuple(_k22_row(n, present=present, secs=secs, series=K22_530B if n == "530B" and present else "")
            for n, times in K22_TABLE5.items() for present, secs in zip((False, True), times)) + (
    _k22_row("530B", present=True, secs=39.15, gpus=2240, table="sec. 6.3", series=K22_530B),)

BIGSCIENCE = "BigScience BLOOM 176B (tr11-176B-ml README)"
BLOOM_176B = replace(MODELS["bloom-176b"].arch, name="BLOOM 176B")
"""BLOOM's shape as its training README states it (``parbench.sim.models``'s ``bloom-176b``). Its extra LayerNorm
after the embedding is left out (one norm of s x h per micro-batch against 70 layers)."""
BLOOM_ASSUMED = ("the README's 'Replica setup' (TP 4, PP 12, DP 8, MBS 2), full activation checkpointing, DeepSpeed's "
                 "BF16 optimizer (its own ZeRO-1), its pipeline partition (embedding + 5 layers, 10 x 6, 5 layers + "
                 "head); ALiBi attention unfused (no flash attention)")
BLOOM = tuple(
    Published(name=f"BLOOM 176B on 384 A100 GBS {gbs}", source=BIGSCIENCE, table=table, layers=70, hidden=14336,
              heads=112, tp=4, pp=12, gpus=384, global_batch=gbs, micro_batch=2, measured_s=secs,
              printed=f"{secs:.2f} s per iteration ({tflops} TFLOPs, hardware FLOPs with recomputation)",
              cluster="jean-zay-a100", arch=BLOOM_176B, zero=1, blocking_p2p=True, attention="eager",
              chunk_layers=(5,) + (6,) * 10 + (5,), assumed=BLOOM_ASSUMED + note)
    for gbs, secs, tflops, table, note in (
        (2048, 104.70, 149.77, "Important checkpoints (iteration 85376)", ""),
        (16, 15.23, 8.04, "Global batch size (iteration 3707)",
         ("; a step at the batch ramp-up's first size, 'measured on our setup' before the launch (its log: "
          "iteration 3707 of 128,728): one micro-batch per pipeline"))))
"""The README's two logged steps of one layout: 128 micro-batches per pipeline at GBS 2048, one at GBS 16, so the
step splits into a fixed and a per-micro-batch part (``fixed_and_per_micro_batch``)."""


def bloom_layout(*, dp: int, tp: int, pp: int, micro_batch: int, chunk_layers: tuple[int, ...],
                 global_batch: int = 2048) -> Layout:
    """BLOOM's software as its rows above ran it (DeepSpeed's pipeline engine and BF16 optimizer, full activation
    checkpointing, eager attention) at another layout of Jean Zay's A100s (``published_memory``'s prequel rows)."""
    return layout_for(replace(BLOOM[0], tp=tp, pp=pp, gpus=dp * tp * pp, micro_batch=micro_batch,
                              global_batch=global_batch, chunk_layers=chunk_layers))


MEGATRON_README = "Megatron-LM README, 'GPT-3 Example' (held out)"
README_175B = (_tflops_row("GPT-3 175B on 1024 GPUs", "GPT-3 Example", 96, 12288, 96, 8, 16, 1024, 1536, 138,
                           source=MEGATRON_README,
                           assumed=("the settings of examples/pretrain_gpt3_175B.sh, the script the figure was "
                                    "printed with: micro-batch 1, fp16, --checkpoint-activations (full "
                                    "recomputation, which eq. (3) counts), no virtual stages (the 1F1B schedule)")),)
"""The README's "GPT-3 Example": 175B on 1024 A100s at TP 8 x PP 16, global batch 1536, "each iteration takes
around 32 seconds resulting in 138 teraFLOPs per GPU which is 44% of the theoretical peak FLOPs" (eq. (3) gives
31.9 s from the 138). Added after every constant was fitted; held out of every fit."""
MEGATRON_V1 = "ADLR (NVIDIA), 'MegatronLM's Supercharged V1.0' (held out)"
V1_ASSUMED = ("the shapes of Shoeybi et al. 2019 Table 1 for its 1.2B and 4.2B (the post names the sizes alone; "
              "hidden 96 per head), its sequence of 1024 and vocabulary of 51,200, fp16, activation checkpointing after "
              "every layer (sec. 4.2) and GPT-2's tied embedding; Megatron-LM's attention unfused into flash (eager)")


def gpt2_megatron_2019(params: str, layers: int, hidden: int, heads: int) -> Architecture:
    """A GPT-2 of Shoeybi et al. 2019 (arXiv 1909.08053, sec. 5.1 and Table 1): learned positions over 1024 tokens,
    the vocabulary padded to 51,200, LayerNorm and biases, GELU MLP of 4 x hidden, the embedding tied to the head,
    dropout 0.1 (a position table as long as the sequence: ``Architecture.max_positions`` left at 0)."""
    return Architecture(name=f"GPT-2 {params}", layers=layers, hidden=hidden, heads=heads, seq_len=1024, vocab=51200,
                        tie_embeddings=True, dropout=True)


V1_WEAK_SCALING = tuple(
    Published(name=f"GPT-2 {params} on {tp} V100", source=MEGATRON_V1, table="Table 1 (weak model parallel scaling)",
              layers=layers, hidden=hidden, heads=heads, tp=tp, pp=1, gpus=tp, global_batch=8, micro_batch=8,
              measured_s=ms / 1000, printed=f"{ms} ms per iteration", cluster="v100-dgx2h", precision="fp16",
              arch=gpt2_megatron_2019(params, layers, hidden, heads), attention="eager", assumed=V1_ASSUMED)
    for params, layers, hidden, heads, tp, ms in (("1.2B", 40, 1536, 16, 1, 1288), ("4.2B", 64, 2304, 24, 4, 1357)))
"""Megatron-LM v1.0 on DGX-2H V100s (nv-adlr.github.io/MegatronLMV1, Table 1): batch 8 at every size, tensor
parallelism growing with the model; iteration times 1288 ms (1.2B, 1 GPU) and 1357 ms (4.2B, 4 GPUs). Its 2.0B and
8.7B rows are left out: no published shape gives those sizes. The paper's own runs (Shoeybi et al. 2019, Table 2:
days per epoch of 68,507 iterations) ran software the post reports 1.6x slower on the same 1.2B baseline
(39 against 62.4 TFLOP/s), so they are not a row of this software. Added after every constant was fitted."""
PUBLISHED: tuple[Published, ...] = TABLE1 + TABLE2 + MT_NLG + K22 + BLOOM + README_175B + V1_WEAK_SCALING


def megatron_moe_flops(b: int, arch: Architecture) -> float:
    """FLOPs of one iteration as Megatron-LM's ``num_floating_point_operations`` counts them (training.py):
    12 B s L h^2 [(1 + g/a + s/h) + (ffn/h) x top_k x 3/2 (SwiGLU) + V / (2 L h)], MHA/GQA with g key/value
    groups, every layer an MoE layer, no router term, no recomputation."""
    s, l, h = arch.seq_len, arch.layers, arch.hidden
    gated = 1.5 if arch.gated_mlp else 1.0
    mlp = arch.expert_width / h * (arch.top_k if arch.experts else 1) * gated
    return 12 * b * s * l * h * h * ((1 + arch.n_kv_heads / arch.heads + s / h) + mlp + arch.vocab / (2 * l * h))


MIXTRAL_8X7B = replace(MODELS["mixtral-8x7b"].arch, name="Mixtral 8x7B", seq_len=4096)
"""The model preset at the 4096 tokens Megatron-LM's MoE README benchmarks it at."""
MCORE_MOE = "Megatron-LM MoE README (MCore v0.9)"
MOE_ROWS: tuple[Published, ...] = (
    Published(name="Mixtral 8x7B on 64 H100", source=MCORE_MOE, table="Reference Best Parallel Mapping",
              layers=32, hidden=4096, heads=32, tp=1, pp=4, ep=8, virtual_stages=8, gpus=64, global_batch=256,
              measured_s=megatron_moe_flops(256, MIXTRAL_8X7B) / (468e12 * 64), printed="468 TFLOP/s per GPU",
              recompute=Recompute.NONE, cluster="h100-sxm", arch=MIXTRAL_8X7B, zero=1, overlap_grad_reduce=True,
              overlap_param_gather=True,
              assumed="the headline 468 TFLOPS measured on the README's reference mapping; VP 8 = 8 virtual "
                      "stages per pipeline rank; dropless routing predicted as balanced; no recomputation "
                      "(the README's example sets none); distributed optimizer (ZeRO-1)"),
)
ALL_ROWS: tuple[Published, ...] = PUBLISHED + MOE_ROWS


def model_for(p: Published) -> ModelSpec:
    """Megatron-LM's GPT of the row: fused qkv, vocabulary-parallel embedding and head, dropout 0.1 on
    attention probabilities and hidden states (Megatron's default), V = 51200, s = 2048."""
    if p.arch is not None:
        return architecture_spec(p.arch, megatron=True)
    return architecture_spec(Architecture(name=p.name, layers=p.layers, hidden=p.hidden, heads=p.heads, seq_len=SEQ,
                                          vocab=VOCAB, dropout=True), megatron=True)


def software_for(p: Published) -> str:
    """The ``--software`` a row ran: DeepSpeed's pipeline engine, Megatron-LM as the 2021-22 papers ran it
    (gradients reduced after the flush), or Megatron-Core's overlapped reduction (MCore v0.9)."""
    return "megatron-deepspeed" if p.blocking_p2p else "megatron-lm" if p.overlap_grad_reduce else "megatron-lm-2021"


def layout_for(p: Published) -> Layout:
    """Megatron-style hybrid: tensor x pipeline x data, gradients all-reduced as one buffer after the flush,
    pipeline tensors sent in tensor-parallel slices (the Megatron-LM of these papers: SC21 sec. 4.1's
    scatter/gather; DeepSpeed's engine partitions them alike)."""
    interleaved = p.virtual_stages > 1
    return Layout(strategy=Strategy.HYBRID, dp=p.dp, tp=p.tp, pp=p.pp, global_batch_size=p.global_batch,
                  micro_batches=p.global_batch // (p.dp * p.micro_batch),
                  schedule=Schedule.INTERLEAVED_1F1B if interleaved else Schedule.ONE_F_ONE_B,
                  virtual_stages=p.virtual_stages, zero=p.zero, ep=p.ep,
                  recompute=p.recompute, sequence_parallel=p.sequence_parallel,
                  **replace(SOFTWARE[software_for(p)], overlap_param_gather=p.overlap_param_gather)
                  .layout_flags(pp=p.pp, zero=p.zero, precision=PRECISIONS[p.precision],
                                schedule=Schedule.INTERLEAVED_1F1B if interleaved else Schedule.ONE_F_ONE_B),
                  precision=PRECISIONS[p.precision], chunk_layers=p.chunk_layers,
                  attention=p.attention or ("flash" if p.arch is not None else "eager"))


def layer_time_s(p: Published, cluster: Cluster | None = None) -> float:
    """Forward + backward seconds of one of the row's transformer layers on one micro-batch, as a step predicts
    them: its compute (recomputation included) at the pace of the run's slowest device and its tensor-parallel
    collectives after their overlap rule.
    Korthikanti et al. 2022 time one 22B layer so in their Table 4 (``K22_TABLE4``)."""
    c, model, layout = cluster or PRESETS[p.cluster], model_for(p), layout_for(p)
    unit = model.units[1]  # a middle layer: its input needs a gradient
    chunk = chunk_times_s(c, model, layout, (unit,), first=False, last=False).scaled(slowest_of(c, layout.world_size))
    alone = Stage(rank=0, chunks=(Chunk(0, 1, 2, False, False),), modules=((unit,),), holders=())
    tp = sum(op_time_s(c, layout, op) for op in tp_ops(model, layout, alone)) / layout.micro_batches
    return chunk.total + tensor_parallel_exposed_s(tp, chunk.gemm, layout.tp, overlap=layout.tp_comm_overlap,
                                                   hide=c.overlap)


def compare_layers(cluster: Cluster | None = None) -> list[dict]:
    """Table 4 of Korthikanti et al. 2022 beside the prediction: one 22B layer's forward + backward per micro-batch
    under each recomputation and sequence-parallel setting, the layer alone, without the step around it."""
    out = []
    for (recompute, sp), measured in K22_TABLE4.items():
        pred = layer_time_s(replace(K22[0], recompute=recompute, sequence_parallel=sp), cluster)
        out.append({"source": KORTHIKANTI, "table": "Table 4", "layer": "22B (tp 8, micro-batch 4)",
                    "recompute": recompute.value, "sequence_parallel": sp, "measured_ms": measured * 1e3,
                    "predicted_ms": pred * 1e3, "error_pct": (pred - measured) / measured * 100})
    return out


def compare_published(cluster: Cluster | None = None, rows: tuple[Published, ...] = ALL_ROWS) -> list[dict]:
    """Each published row beside its prediction (``cluster`` overrides every row's preset), signed error in %
    of the iteration time, and the predicted breakdown terms."""
    out = []
    for p in rows:
        pred = predict(model_for(p), layout_for(p), cluster or PRESETS[p.cluster])
        out.append({"name": p.name, "source": p.source, "table": p.table, "series": p.series, "gpus": p.gpus,
                    "global_batch": p.global_batch,
                    "tp": p.tp, "pp": p.pp, "dp": p.dp, "printed": p.printed, "assumed": p.assumed,
                    "measured_s": p.measured_s, "predicted_s": pred.step_time_s,
                    "error_pct": (pred.step_time_s - p.measured_s) / p.measured_s * 100,
                    "predicted_mfu": pred.mfu, **{f"pred_{k}": v for k, v in pred.terms.items()}})
    return out


WHOLE_RUN_METRICS = ("tokens_per_s", "samples_per_s")
"""Rates of every GPU together (``published_memory.METRICS``): a scaling series compares them per GPU."""


def per_gpu_rate(metric: str, value: float, gpus: int, batch: int = 1) -> float:
    """What a scaling series compares: work per GPU per second (MFU and tokens/s per GPU already are; a whole run's
    tokens/s or samples/s is divided by its GPUs; an iteration time of ``batch`` samples becomes batch / (seconds x
    GPUs): a weak-scaling series grows its batch with its GPUs)."""
    if metric == "s_per_iteration":
        return batch / (value * gpus)
    return value / gpus if metric in WHOLE_RUN_METRICS else value


def trends(rows: list[dict]) -> dict[str, dict]:
    """Per scaling series (rows sharing ``series``, ``gpus``, ``metric``, ``published``, ``predicted`` and, where
    the metric is an iteration time, ``global_batch``): the sign of the per-GPU rate's change from the smallest
    to the largest GPU count, published and predicted, and the change itself in % (``measured_change_pct``,
    ``predicted_change_pct``: how far a wrong sign is from flat)."""
    out = {}
    for name in dict.fromkeys(r["series"] for r in rows if r.get("series")):
        s = sorted((r for r in rows if r.get("series") == name), key=lambda r: r["gpus"])
        lo, hi = s[0], s[-1]
        rate = lambda r, k: per_gpu_rate(r["metric"], r[k], r["gpus"], r.get("global_batch", 1))  # noqa: E731
        change = {k: rate(hi, k) / rate(lo, k) - 1 for k in ("published", "predicted")}
        measured, predicted = _sign(change["published"]), _sign(change["predicted"])
        out[name] = {"source": lo["source"], "gpus": [r["gpus"] for r in s], "measured_sign": measured,
                     "predicted_sign": predicted, "match": measured == predicted,
                     "measured_change_pct": 100 * change["published"], "predicted_change_pct": 100 * change["predicted"]}
    return out


def scale_out_excess(series: dict[str, dict]) -> dict:
    """How much flatter than published the predicted per-GPU rate is across ``trends``' series: per series, the
    predicted minus the published change in log rate per doubling of GPUs, in % (``excess_pct_per_doubling``:
    positive where the prediction loses less per GPU as it scales out than the run did); ``flatter``, how many
    series are positive, and their median."""
    from statistics import median

    excess = {name: 100 * (math.log1p(t["predicted_change_pct"] / 100) - math.log1p(t["measured_change_pct"] / 100))
              / math.log2(t["gpus"][-1] / t["gpus"][0]) for name, t in series.items()}
    return {"excess_pct_per_doubling": excess, "flatter": sum(e > 0 for e in excess.values()),
            "median_pct_per_doubling": median(excess.values()) if excess else 0.0}


def fixed_and_per_micro_batch(rows: list[dict]) -> dict[str, dict]:
    """Where a source ran one layout at two or more micro-batch counts per step (more data-parallel ranks at
    the same global batch, or a larger global batch on the same ranks), its step time splits in two: a part
    that grows with the count m (each micro-batch's compute and transfers) and a part that does not (pipeline
    fill and drain, the gradient reduction and optimizer step after the flush). Fitting step = fixed + m x
    per_micro_batch to the published step times and, apart, to the predicted ones (``fit.fit_alpha_beta``:
    least squares of the relative residuals, both parts >= 0) says which part the model gets wrong.

    Rows carry ``split`` (the layout without its data-parallel degree, global batch and micro-batch count;
    '' where not comparable), ``split_label`` (a group is named by its rows' scaling series where one has it), ``micro_batches``, ``step_s_published`` and ``step_s_predicted``.
    A group needs two distinct counts; ``fit_max_pct``: how far the published rows lie from their own line;
    ``fixed_s_published_spread``: how far the published fixed part moves when any one published step is 1% off
    (``fixed_part_spread_s``), since an intercept read from a few steps at nearby counts amplifies their error."""
    from parbench.sim.fit import fit_alpha_beta, pct_errors

    out = {}
    for key in dict.fromkeys(r["split"] for r in rows if r.get("split")):
        group = sorted((r for r in rows if r.get("split") == key), key=lambda r: r["micro_batches"])
        ms = [r["micro_batches"] for r in group]
        if len(set(ms)) < 2:
            continue
        steps = [r["step_s_published"] for r in group]
        published = fit_alpha_beta(ms, steps)
        predicted = fit_alpha_beta(ms, [r["step_s_predicted"] for r in group])
        label = next((r["series"] for r in group if r.get("series")), group[0]["split_label"])
        out[label] = {
            "source": group[0]["source"], "rows": [r["name"] for r in group], "micro_batches": ms,
            "fixed_s_published": published[0], "fixed_s_predicted": predicted[0],
            "fixed_s_published_spread": fixed_part_spread_s(ms, steps),
            "per_micro_batch_s_published": published[1], "per_micro_batch_s_predicted": predicted[1],
            "per_micro_batch_error_pct": (predicted[1] - published[1]) / published[1] * 100,
            "fit_max_pct": max(pct_errors(*published, ms, steps))}
    return out


def fixed_part_spread_s(ms: list[int], steps: list[float], share: float = 0.01) -> float:
    """The largest change of the fixed part of step = fixed + m x per_micro_batch (``fit.fit_alpha_beta``) when
    one of ``steps`` moves by ``share`` up or down, each in turn: between two counts m1 < m2 the fixed part is
    (m2 y1 - m1 y2) / (m2 - m1), so an error in y1 reaches it m2 / (m2 - m1) times over."""
    from parbench.sim.fit import fit_alpha_beta

    fixed = fit_alpha_beta(ms, steps)[0]
    moved = ([y * (1 + sign * share) if j == i else y for j, y in enumerate(steps)]
             for i in range(len(steps)) for sign in (1, -1))
    return max(abs(fit_alpha_beta(ms, ys)[0] - fixed) for ys in moved)


def per_source(rows: list[dict]) -> list[dict]:
    """Per source: rows, mean and max |error| % of the iteration time, and each scaling series' trend."""
    out = []
    as_metric = [{**r, "metric": "s_per_iteration", "published": r["measured_s"], "predicted": r["predicted_s"]}
                 for r in rows]
    for source in dict.fromkeys(r["source"] for r in rows):
        errs = [abs(r["error_pct"]) for r in rows if r["source"] == source]
        out.append({"source": source, "rows": len(errs), "mean_abs_error_pct": sum(errs) / len(errs),
                    "max_abs_error_pct": max(errs),
                    "series": trends([r for r in as_metric if r["source"] == source])})
    return out


def _sign(x: float) -> int:
    return 0 if math.isclose(x, 0.0, abs_tol=1e-12) else (1 if x > 0 else -1)
