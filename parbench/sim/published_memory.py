"""Published training runs as memory and feasibility checks: layouts that really trained (each must be
predicted to fit), their peak memory where the source prints it, their published throughput metric,
and layouts published as out-of-memory or clearly infeasible (each must be predicted not to fit).

Every row cites its source file and table; numbers are copied as printed, nothing is derived but the
layout arithmetic the source states (global batch = local batch x data-parallel ranks). Sources:

- torchtitan ``docs/performance.md`` at commit eaea6f6a2fa940f03a10906be1df3489cf30af85 (Tables 1-6):
  Llama 3.1 8B/70B/405B on H100 96GB HBM2e (Grand Teton), FSDP2 / TP / PP / CP, memory in GiB (the
  caching allocator's peak reserved memory), TPS per GPU. Sequence length 8192 unless the table says.
- torchtitan ``benchmarks/llama3_8b_h200_2025-06_torchtitan.md`` at commit bcdeaa37c92d1eaceeec3351e7ac81be6a1488af
  (Trainy, June 2025): Llama 3.1 8B with FSDP on 32 and 64 H200, TPS per GPU and memory in GiB.
- torchtitan ``docs/performance.md`` at commit 041336434916bdc0f88c1f89fda176fd3c2092e4 (Llama 3 and
  Llama 2 tables): FSDP2 on 64 A100 80GB, WPS (tokens/s per GPU) and MFU; its footnote 1 reports the
  Llama 2 70B local-batch-2 selective-op run as out of memory.
- llm-foundry ``scripts/train/benchmarking/README.md`` at commit 061f2c7ce64e655100286584a7629e2a09f827ba
  (tables "H100 80GB BF16" and "A100 80GB with 1600 Gbps node-node interconnect"): MPT models with
  FSDP FULL_SHARD, flash attention, activation checkpointing per block or none; MFU. The MPT shapes
  (vocab 50368, learned positions, tied embeddings, biases) reproduce the table's NumParams exactly.
- Megatron-Bridge ``docs/performance-summary.md`` (NVIDIA NeMo; the 25.11 container's "DGX-H100" table, and
  the 26.02 container's Llama tables in ``docs/performance-summary-archive.md``): Llama 3 70B and Llama 3.1
  405B pre-training in FP8 (current scaling) on DGX H100, the layout as printed (TP, PP, CP, VP, MBS, GBS),
  tokens/s per GPU. What the tables leave to the recipes (``scripts/performance/configs/llama/`` and
  ``src/megatron/bridge/recipes/llama/llama3.py``): Transformer Engine layers, no recomputation, the
  distributed optimizer with ``overlap_grad_reduce`` and ``overlap_param_gather``, tensor-parallel
  communication overlap, pipeline sends overlapped with compute (``CommOverlapConfig`` sets ``overlap_p2p_comm``
  where pp > 1 and vp > 1, gradients reduced in bf16 (``grad_reduce_in_fp32 = False``), sequence parallelism.
- NVIDIA's DGX Cloud benchmarking recipes (github.com/NVIDIA/dgxc-benchmarking): ``nemo_megatron/README_175b.md``
  at commit 0b71cfda5163540778e2a3d2db59858bf62f96f7, ``llama3.1/README_405b.md``, ``llama3.1/README_70b.md``
  and ``nemotron/README_340b.md`` at commit 143b90dd91f9be958fed4773ae95d941a3356a82: GPT-3 175B, Llama 3.1
  405B and 70B and Nemotron-4 340B pre-training on 64 to 2304 DGX H100 GPUs, each in BF16 and in FP8 with the
  same layout (TP, PP, CP, VP, MBS as printed; the global batch grows with the GPUs), NeMo containers 24.09
  and 24.11; seconds per step (the last of 50 or 100 steps).
- NeMo ``docs/source/performance/performance_long_sequence.md`` at commit 0aa267117ae5f1ff9f8d8308ed3d1ba1ce939f82
  (container 24.03.01, DGX-H100, FP8): Llama 2 7B with context parallelism at 16K to 1M tokens, one GPU per
  1K tokens, the layout as printed (TP, PP, DP, CP) and model TFLOP/s per GPU.
- Megatron-LM's runs in ``parbench.sim.published.ALL_ROWS`` (SC21 Tables 1-2, MT-NLG, Korthikanti et al., BLOOM, its
  README's GPT-3 example and its MoE README's Mixtral row).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace

from parbench.config import Schedule, Strategy
from parbench.sim.architecture import Architecture
from parbench.sim.hardware import PRESETS
from parbench.sim.layout import PRECISIONS, SOFTWARE, Layout, Recompute
from parbench.sim.model import architecture_spec
from parbench.sim.models import MODELS
from parbench.sim.predict import Prediction, predict
from parbench.sim.published import MEGATRON_README, MEGATRON_V1
from parbench.sim.stages import account_for_ends, megatron_pipeline_layout

TT_H100 = "torchtitan docs/performance.md @eaea6f6"
TT_A100 = "torchtitan docs/performance.md @0413364"
TT_H200 = "torchtitan benchmarks/llama3_8b_h200_2025-06_torchtitan.md @bcdeaa3"
FOUNDRY = "llm-foundry scripts/train/benchmarking/README.md @061f2c7"
MBRIDGE = "Megatron-Bridge docs/performance-summary.md (DGX H100, B200, GB200; FP8 and BF16)"
MBRIDGE_LATER = ("Megatron-Bridge docs/performance-summary.md, later rows: 26.02.01, 26.02, 25.11's GB300 and FP8-MX "
                 "(held out)")
NEMO = "NeMo docs/source/performance/performance_summary.md @070a0bb (24.07, DGX-H100, FP8)"
NEMO_LONG = "NeMo docs/source/performance/performance_long_sequence.md @0aa2671 (24.03.01, DGX-H100, FP8)"
DGXC = "NVIDIA dgxc-benchmarking recipes (NeMo 24.09-24.11, DGX H100, BF16 and FP8)"
INFEASIBLE = "clearly infeasible (states alone exceed the device)"


@dataclass(frozen=True, kw_only=True)
class Run:
    """One published layout. ``ran``: it trained (must fit); False: published OOM or clearly infeasible."""

    source: str
    table: str
    name: str
    arch: Architecture
    cluster: str
    layout: Layout
    ran: bool = True
    memory_gib: float | None = None
    """Published peak memory per GPU in GiB (torch's max reserved), where given."""
    metric: str = ""
    """A key of ``METRICS``: ``mfu`` (fraction), ``tps_per_gpu``, ``tflops_per_gpu`` (model FLOPs as Megatron counts
    them: every GEMM, the attention scores as if not causal), ``s_per_iteration``, ...; '' when none is published."""
    value: float = 0.0
    series: str = ""
    """Rows of one scaling series (same model and per-GPU work, GPU count varied) share a name."""
    notes: tuple[str, ...] = field(default=())


SDPA = "flash2"
"""torchtitan's Llama calls torch's ``scaled_dot_product_attention`` (``torchtitan/models/llama/model.py``),
whose flash backend is FlashAttention-2 since torch 2.2 (release notes); both tables postdate it."""


def _llama3(name: str, seq: int = 8192) -> Architecture:
    return replace(MODELS[name].arch, seq_len=seq)


def _mpt(size: str, seq: int) -> Architecture:
    """llm-foundry's MPT benchmark shapes: d_model, layers, heads; vocab 50368, learned positions of seq rows,
    tied embeddings, LayerNorm and Linear biases (the table's NumParams equal this architecture's count)."""
    d, layers, heads = {"125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12), "1b": (2048, 24, 16),
                        "3b": (2560, 32, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 48, 64),
                        "70b": (8192, 80, 64)}[size]
    return Architecture(name=f"mpt-{size}", layers=layers, hidden=d, heads=heads, vocab=50368, seq_len=seq,
                        tie_embeddings=True)


def _fsdp(*, gpus: int, local: int, micro: int = 0, tp: int = 1, pp: int = 1, cp: int = 1, recompute: str = "none",
          every: int = 1, precision: str = "bf16", schedule: Schedule = Schedule.ONE_F_ONE_B, v: int = 1,
          kernel: str = "", fused: bool = True, fsdp2: bool = True, early_stop: bool | None = None) -> Layout:
    """FSDP (ZeRO-3, flash attention) over the ranks gpus / (tp pp cp); ``local`` samples per data-parallel
    rank per step in micro-batches of ``micro`` (default: all at once); ``kernel``: the flash kernel that ran;
    ``fused``: False where the source states the run was eager (not compiled); ``fsdp2``: torch's FSDP2
    (torchtitan), False for FSDP1 (llm-foundry). Both clip gradients by their global norm (torchtitan's
    ``max_norm`` 1.0, llm-foundry's ``clipping_threshold`` 1.0). Under a pipeline torchtitan keeps each stage's parameters
    gathered after forward (``apply_fsdp`` in ``torchtitan/parallelisms/parallelize_llama.py``:
    ``reshard_after_forward = False`` when pp is on, "to avoid per-microbatch all-gathers"): FSDP2's ZeRO-2,
    one gather per stage and step. ``early_stop``: the checkpoint's replay skips each block's last GEMM
    (``Layout.recompute_early_stop``; default: torchtitan's, FSDP2 on torch >= 2.4, which checkpoints through
    torch's non-reentrant ``checkpoint_wrapper``)."""
    dp = gpus // (tp * pp * cp)
    micro = micro or local
    return Layout(strategy=Strategy.HYBRID, dp=dp, tp=tp, pp=pp, cp=cp, global_batch_size=local * dp,
                  micro_batches=local // micro, zero=2 if fsdp2 and pp > 1 else 3, fsdp2=fsdp2, recompute=Recompute(recompute), recompute_every=every,
                  sequence_parallel=tp > 1, sp_saves_gathered_input=tp > 1, precision=PRECISIONS[precision], attention="flash", schedule=schedule,
                  virtual_stages=v, attention_kernel=kernel, fused_elementwise=fused, clip_grad_norm=True,
                  recompute_early_stop=fsdp2 if early_stop is None else early_stop)


def _tt_micro(local: int, *, pp: int, v: int) -> int:
    """torchtitan's micro-batch size when the run sets no ``pipeline_parallel_microbatches``: the local batch
    split into one micro-batch per pipeline stage, pp x stages per rank, with 2 stages per rank for looped
    (interleaved) schedules and 1 otherwise (``torchtitan/parallelisms/pipelining_utils.py`` of late 2024:
    ``build_pipeline_schedule``, ``n_microbatches = num_total_stages``; ``generate_split_points``,
    ``num_stages_per_rank = 2``). The tables name no micro-batch count, so the default is what ran."""
    return local // (pp * v)


def _torchtitan_h100() -> list[Run]:
    """Tables 1-6. FSDP2 with selective op AC (Tables 1, 3) or full AC; Float8 where the table says so."""
    rows = []
    for table, gpus, figures in (("Table 1", 8, ((5762, 82.4, "bf16", ""), (6667, 77.0, "bf16", "torch.compile"),
                                                 (8532, 76.8, "fp8", "torch.compile"))),
                                 ("Table 3", 128, ((5605, 67.0, "bf16", ""), (6514, 62.0, "bf16", "torch.compile"),
                                                   (8380, 61.8, "fp8", "torch.compile")))):
        for tps, mem, prec, note in figures:
            rows.append(Run(source=TT_H100, table=table, name=f"Llama 3.1 8B FSDP {gpus} {prec} {note}".strip(),
                            arch=_llama3("llama3-8b"), cluster="h100-96gb", memory_gib=mem,
                            series=f"torchtitan Llama 3.1 8B FSDP {prec} {note}".strip(),
                            layout=_fsdp(kernel=SDPA, gpus=gpus, local=2, recompute="ops", precision=prec,
                                          fused=note == "torch.compile"),
                            metric="tps_per_gpu", value=tps, notes=(note,) if note else ()))
    for cp, seq, tps, mem in ((1, 32768, 3890, 83.9), (2, 65536, 2540, 84.2), (4, 131072, 1071, 84.0),
                              (8, 262144, 548, 84.5)):
        rows.append(Run(source=TT_H100, table="Table 2", name=f"Llama 3.1 8B FSDP {8 // cp} CP {cp} seq {seq}",
                        arch=_llama3("llama3-8b", seq), cluster="h100-96gb", memory_gib=mem,
                        layout=_fsdp(kernel=SDPA, gpus=8, local=1, cp=cp, recompute="full", precision="fp8"),
                        metric="tps_per_gpu", value=tps, notes=("torch.compile",)))
    for name, tps, mem in (("2D", 829, 71.9), ("2D + AsyncTP", 876, 67.6)):
        rows.append(Run(source=TT_H100, table="Table 4", name=f"Llama 3.1 70B FSDP 32 TP 8 {name}",
                        arch=_llama3("llama3-70b"), cluster="h100-96gb", memory_gib=mem,
                        layout=_fsdp(kernel=SDPA, gpus=256, local=16, tp=8, recompute="full", precision="fp8"),
                        metric="tps_per_gpu", value=tps, notes=("torch.compile",)))
    for sched, v, tps, mem in ((Schedule.ONE_F_ONE_B, 1, 100, 82.5), (Schedule.INTERLEAVED_1F1B, 2, 128, 72.7)):
        rows.append(Run(source=TT_H100, table="Table 5", name=f"Llama 3.1 405B FSDP 8 TP 8 PP 8 {sched.value}",
                        arch=_llama3("llama3-405b"), cluster="h100-96gb", memory_gib=mem,
                        layout=_fsdp(kernel=SDPA, gpus=512, local=32, micro=_tt_micro(32, pp=8, v=v), tp=8, pp=8, recompute="full",
                                     precision="fp8", schedule=sched, v=v),
                        metric="tps_per_gpu", value=tps,
                        notes=("torch.compile", f"{8 * v} micro-batches of {_tt_micro(32, pp=8, v=v)} (torchtitan's default)",
                               "interleaved: 2 stages per rank (torchtitan's default split)" if v > 1 else "")))
    for cp, seq, tps, mem in ((1, 32768, 76, 75.3), (2, 65536, 47, 75.9), (4, 131072, 31, 77.1), (8, 262144, 16, 84.9)):
        rows.append(Run(source=TT_H100, table="Table 6", name=f"Llama 3.1 405B FSDP {8 // cp} CP {cp} TP 8 PP 8 seq {seq}",
                        arch=_llama3("llama3-405b", seq), cluster="h100-96gb", memory_gib=mem,
                        layout=_fsdp(kernel=SDPA, gpus=512, local=8, micro=_tt_micro(8, pp=8, v=1), tp=8, pp=8, cp=cp, recompute="full",
                                     precision="fp8"),
                        metric="tps_per_gpu", value=tps, notes=("torch.compile", "8 micro-batches of 1 (torchtitan's default)")))
    return rows


def _torchtitan_h200() -> list[Run]:
    """Llama 3.1 8B on 4 and 8 hosts of 8 H200 (400 Gb/s per GPU), June 2025 (torch 2.8, torchtitan e7c0cae):
    FSDP over every GPU, local batch 2, sequence 8192, torch.compile (which compiles the loss too), Float8 with
    FP8 all-gathers, the train config's selective op AC; TPS per GPU and peak reserved memory at step 100."""
    rows = []
    for hosts, tps, mem in ((4, 10938, 47.96), (8, 10753, 46.97)):
        layout = replace(_fsdp(kernel=SDPA, gpus=8 * hosts, local=2, recompute="ops", precision="fp8"),
                         fp8_all_gather=True, compiled_loss=True)
        rows.append(Run(source=TT_H200, table="Results", name=f"Llama 3.1 8B FSDP {8 * hosts} H200 fp8 torch.compile",
                        arch=_llama3("llama3-8b"), cluster="h200-sxm", memory_gib=mem, layout=layout,
                        series="torchtitan Llama 3.1 8B FSDP fp8 H200", metric="tps_per_gpu", value=tps,
                        notes=("torch.compile", "float8 all-gather")))
    return rows


def _torchtitan_a100() -> list[Run]:
    """64 A100 80GB, FSDP2, local batch as printed; "selective layer" checkpoints every 2nd layer
    (torchtitan's selective_ac_option = '2'), "selective op" is Recompute.OPS."""
    ac = {"no": ("none", 1), "selective layer": ("full", 2), "selective op": ("ops", 1), "full": ("full", 1)}
    table = (("Llama 3", "llama3-8b", 8192, 1, "selective layer", 2904, 0.568),
             ("Llama 3", "llama3-8b", 8192, 1, "selective op", 2973, 0.582),
             ("Llama 3", "llama3-70b", 8192, 1, "full", 331, 0.517),
             ("Llama 2", "llama2-13b", 4096, 2, "no", 2162, 0.611),
             ("Llama 2", "llama2-13b", 4096, 2, "selective layer", 1914, 0.541),
             ("Llama 2", "llama2-13b", 4096, 2, "selective op", 1904, 0.538),
             ("Llama 2", "llama2-70b", 4096, 1, "selective op", 355, 0.508),
             ("Llama 2", "llama2-70b", 4096, 2, "full", 353, 0.505))
    rows = []
    for family, model, seq, local, policy, wps, mfu in table:
        recompute, every = ac[policy]
        arch = _llama3(model, seq)
        rows.append(Run(source=TT_A100, table=f"{family} performance numbers", arch=arch, cluster="a100-80gb",
                        name=f"{model} FSDP 64 local batch {local} AC {policy}", metric="mfu", value=mfu,
                        layout=_fsdp(kernel=SDPA, gpus=64, local=local, recompute=recompute, every=every)))
    rows.append(Run(source=TT_A100, table="footnote 1", name="llama2-70b FSDP 64 local batch 2 AC selective op (OOM)",
                    arch=_llama3("llama2-70b", 4096), cluster="a100-80gb", ran=False,
                    layout=_fsdp(kernel=SDPA, gpus=64, local=2, recompute="ops")))
    return rows


FOUNDRY_TABLES = {
    "H100 80GB BF16": ("h100-sxm", (
        ("70b", 2048, 64, 42.57, 8, 4, True), ("70b", 2048, 32, 36.15, 2, 16, True),
        ("30b", 8192, 8, 29.92, 1, 21, True), ("30b", 4096, 8, 35.86, 1, 21, True),
        ("30b", 2048, 32, 43.92, 14, 3, True), ("30b", 2048, 16, 43.07, 10, 3, True),
        ("30b", 2048, 8, 38.11, 3, 21, True), ("30b", 1024, 8, 38.76, 6, 21, True),
        ("13b", 32768, 8, 31.68, 1, 3, True), ("13b", 16384, 8, 35.55, 3, 3, True),
        ("13b", 4096, 8, 41.6, 10, 3, True), ("13b", 2048, 64, 39.86, 2, 1, False),
        ("13b", 2048, 32, 39.95, 2, 1, False), ("13b", 2048, 16, 39.58, 2, 1, False),
        ("13b", 2048, 8, 39.79, 2, 1, False), ("13b", 1024, 8, 44.27, 40, 3, True),
        ("7b", 65536, 8, 28.59, 1, 2, True), ("7b", 32768, 8, 30.94, 2, 2, True), ("7b", 8192, 8, 37.14, 8, 2, True),
        ("7b", 4096, 8, 40.42, 16, 2, True), ("7b", 2048, 8, 46.44, 6, 1, False),
        ("7b", 1024, 8, 42.83, 64, 2, True), ("3b", 65536, 8, 26.81, 1, 2, True),
        ("3b", 32768, 8, 28.84, 3, 6, True), ("3b", 16384, 8, 36.34, 1, 6, False),
        ("3b", 8192, 8, 40.31, 3, 6, False), ("3b", 4096, 8, 42.31, 5, 6, False),
        ("3b", 2048, 64, 40.8, 6, 3, False), ("3b", 2048, 32, 41.7, 6, 3, False),
        ("3b", 2048, 16, 43.73, 10, 3, False), ("3b", 1024, 8, 46.2, 20, 6, False),
        ("3b", 512, 8, 46.32, 40, 6, False), ("1b", 65536, 8, 26.34, 1, 2, True),
        ("1b", 32768, 8, 33.54, 1, 4, False), ("1b", 16384, 8, 35.22, 2, 4, False),
        ("1b", 8192, 8, 37.73, 3, 4, False), ("1b", 4096, 8, 40.26, 7, 4, False),
        ("1b", 2048, 64, 40.85, 20, 1, False), ("1b", 2048, 32, 41.52, 20, 1, False),
        ("1b", 2048, 16, 42.36, 20, 1, False), ("1b", 2048, 8, 41.82, 14, 1, False),
        ("1b", 1024, 8, 41.95, 18, 4, False), ("1b", 512, 8, 43.21, 56, 4, False),
        ("760m", 32768, 8, 31.84, 1, 2, False), ("760m", 16384, 8, 33.57, 3, 2, False),
        ("760m", 8192, 8, 34.84, 6, 2, False), ("760m", 4096, 8, 35.83, 12, 2, False),
        ("760m", 2048, 32, 37.57, 24, 1, False), ("760m", 2048, 16, 37.89, 24, 1, False),
        ("760m", 2048, 8, 34.9, 24, 2, False), ("760m", 1024, 8, 39.76, 48, 2, False),
        ("760m", 512, 8, 40.42, 96, 2, False),
    )),
    "A100 80GB": ("a100-80gb", (
        ("70b", 2048, 64, 53.33, 8, 4, True), ("70b", 2048, 32, 48.56, 2, 16, True),
        ("30b", 8192, 8, 39.38, 1, 21, True), ("30b", 4096, 8, 51.37, 1, 21, True),
        ("30b", 2048, 8, 55.3, 3, 21, True), ("30b", 1024, 8, 55.82, 6, 21, True),
        ("30b", 512, 8, 56.4, 12, 21, True), ("13b", 32768, 8, 51.69, 1, 3, True),
        ("13b", 16384, 8, 54.07, 3, 3, True), ("13b", 8192, 8, 56.07, 5, 3, True),
        ("13b", 4096, 8, 57.62, 10, 3, True), ("13b", 2048, 8, 59.57, 2, 3, False),
        ("13b", 1024, 8, 59.48, 40, 3, True), ("7b", 65536, 8, 46.97, 1, 2, True),
        ("7b", 32768, 8, 49.46, 2, 2, True), ("7b", 16384, 8, 51.96, 4, 2, True), ("7b", 8192, 8, 54.47, 8, 2, True),
        ("7b", 4096, 8, 54.84, 16, 2, True), ("7b", 2048, 8, 64.23, 6, 2, False),
        ("7b", 1024, 8, 58.01, 64, 2, True), ("3b", 65536, 8, 46.05, 1, 2, True),
        ("3b", 32768, 8, 47.18, 3, 6, True), ("3b", 16384, 8, 57.13, 1, 6, False),
        ("3b", 8192, 8, 59.34, 3, 6, False), ("3b", 4096, 8, 60.53, 5, 6, False),
        ("3b", 2048, 8, 62.11, 10, 2, False), ("3b", 1024, 8, 62.73, 20, 6, False),
        ("3b", 512, 8, 63.71, 40, 6, False), ("1b", 65536, 8, 46.18, 1, 2, True),
        ("1b", 32768, 8, 55.52, 1, 4, False), ("1b", 16384, 8, 56.6, 2, 4, False),
        ("1b", 8192, 8, 56.69, 3, 4, False), ("1b", 4096, 8, 59.0, 7, 4, False),
        ("1b", 2048, 8, 59.86, 14, 4, False), ("1b", 1024, 8, 60.15, 18, 4, False),
        ("1b", 512, 8, 60.68, 56, 4, False), ("760m", 65536, 8, 45.34, 1, 2, True),
        ("760m", 32768, 8, 54.57, 1, 2, False), ("760m", 16384, 8, 54.64, 3, 2, False),
        ("760m", 8192, 8, 55.31, 6, 2, False), ("760m", 4096, 8, 56.05, 12, 2, False),
        ("760m", 2048, 8, 56.85, 24, 2, False), ("760m", 1024, 8, 47.76, 48, 2, False),
        ("760m", 512, 8, 45.07, 96, 2, False), ("350m", 65536, 8, 52.7, 1, 2, False),
        ("350m", 32768, 8, 52.46, 2, 2, False), ("350m", 16384, 8, 53.28, 4, 2, False),
        ("350m", 8192, 8, 53.8, 8, 2, False), ("350m", 4096, 8, 53.31, 16, 2, False),
        ("350m", 2048, 8, 51.62, 32, 2, False), ("350m", 1024, 8, 50.51, 64, 2, False),
        ("350m", 512, 8, 50.61, 128, 2, False), ("125m", 65536, 8, 54.13, 1, 2, False),
        ("125m", 32768, 8, 52.71, 2, 2, False), ("125m", 16384, 8, 50.61, 4, 2, False),
        ("125m", 8192, 8, 48.85, 8, 2, False), ("125m", 4096, 8, 46.08, 16, 2, False),
        ("125m", 2048, 8, 44.79, 40, 2, False), ("125m", 1024, 8, 43.15, 64, 2, False),
        ("125m", 512, 8, 42.56, 128, 2, False),
    )),
}
"""llm-foundry's README tables, every BF16 row of its H100 and A100 80GB tables: (size, seq, gpus, MFU %,
micro-batch, grad accum, activation checkpointing)."""
FOUNDRY_VALIDATION = {
    "H100 80GB BF16": (("70b", 2048, 64), ("70b", 2048, 32), ("30b", 8192, 8), ("30b", 2048, 32), ("13b", 32768, 8),
                       ("13b", 2048, 8), ("7b", 65536, 8), ("7b", 8192, 8), ("7b", 2048, 8), ("3b", 16384, 8),
                       ("1b", 2048, 8)),
    "A100 80GB": (("70b", 2048, 64), ("30b", 2048, 8), ("13b", 2048, 8), ("13b", 32768, 8), ("7b", 2048, 8),
                  ("7b", 65536, 8), ("3b", 16384, 8), ("1b", 32768, 8)),
}
"""The rows of ``FOUNDRY_TABLES`` in the validation set (``runs``; the efficiencies' fit set, one or two per
model size, 2K tokens and the longest); ``foundry_table_check`` predicts every row."""


def _foundry(*, every: bool = False) -> list[Run]:
    """``FOUNDRY_TABLES``'s validation rows (``every``: all of them), run as llm-foundry runs every layout
    (``SOFTWARE['llm-foundry']``: its MPT's default loss is flash-attn's fused cross-entropy), but for the
    checkpoint's replay: the tables predate torch 2.0 (the README's own note: "Update tables with torch 2.0
    after next Composer release"), whose non-reentrant checkpoint replayed the whole block; the replay's early
    stop came with torch 2.1."""
    rows = []
    for name, (cluster, entries) in FOUNDRY_TABLES.items():
        for size, seq, gpus, mfu, micro, accum, ckpt in entries:
            if not every and (size, seq, gpus) not in FOUNDRY_VALIDATION[name]:
                continue
            rows.append(Run(source=FOUNDRY, table=name, name=f"MPT-{size} seq {seq} on {gpus} ({'AC' if ckpt else 'no AC'})",
                            arch=_mpt(size, seq), cluster=cluster, metric="mfu", value=mfu / 100,
                            layout=replace(_fsdp(gpus=gpus, local=micro * accum, micro=micro, fsdp2=False,
                                                 recompute="full" if ckpt else "none"),
                                           **{**SOFTWARE["llm-foundry"].layout_flags(pp=1, zero=3,
                                                                                    precision=PRECISIONS["bf16"]),
                                              "recompute_early_stop": False})))
    return rows


def foundry_table_check() -> dict[str, dict]:
    """A check beyond the validation set, fitting nothing: every row of ``FOUNDRY_TABLES`` predicted, per table:
    rows, mean / median / max |MFU error| %, the median signed error of the rows with and without activation
    checkpointing, and the trained layouts predicted not to fit."""
    from statistics import mean, median

    out = {}
    for name in FOUNDRY_TABLES:
        errs, checkpointed, plain, refused = [], [], [], []
        for run in (r for r in _foundry(every=True) if r.table == name):
            p = predict(architecture_spec(run.arch, megatron=True), run.layout, PRESETS[run.cluster])
            e = (p.mfu / run.value - 1) * 100
            errs.append(abs(e))
            (checkpointed if run.layout.recompute is Recompute.FULL else plain).append(e)
            if not p.feasible:
                refused.append(run.name)
        out[name] = {"rows": len(errs), "mean_abs_error_pct": mean(errs), "median_abs_error_pct": median(errs),
                     "max_abs_error_pct": max(errs), "median_error_pct_checkpointed": median(checkpointed),
                     "median_error_pct_not_checkpointed": median(plain), "trained_predicted_not_to_fit": refused}
    return out


def _nvidia(*, gpus: int, gbs: int, mbs: int = 1, tp: int = 1, pp: int = 1, cp: int = 1, vp: int = 1, ep: int = 1,
            recompute: str = "none", pipeline_layout: str = "", precision: str = "fp8",
            recompute_modules: tuple[str, ...] = (), moe_a2a_overlap: bool = False, fp8_scaling: str = "",
            fp8_param_gather: bool | None = None) -> Layout:
    """The layout of an NVIDIA performance recipe (NeMo, Megatron-Bridge, DGX Cloud benchmarking) as its table
    prints it (GBS, MBS, TP, PP, CP, VP, FP8 or BF16), run as those recipes run every layout
    (``SOFTWARE['nemo']``), on the distributed optimizer (ZeRO-1). An EP that does not divide cp x dp under tp > 1
    is Megatron-Core's expert-parallel folding: its expert mesh, etp x ep x expert-dp, must cover the tp x cp x dp
    ranks, which leaves an expert tensor-parallel size of 1 (``Layout.expert_tp``). ``fp8_scaling``: the table's FP8
    recipe where it names one (Megatron-Bridge's FP8-CS, ``tensorwise``, and FP8-MX, ``mxfp8``); else the recipes'
    Transformer Engine default of their time, ``delayed`` (``SOFTWARE['nemo']``). ``fp8_param_gather``: whether the
    run keeps FP8 parameters and gathers them so (Megatron-Core's ``--fp8-param-gather``, NeMo's ``fp8_params``;
    ``Layout.fp8_all_gather``); None: as the recipes do (``Framework.fp8_param_gather``), False where a source's
    configs set none (NeMo-Framework-Launcher's, which NeMo's 24.07 and long-sequence tables ran)."""
    dp = gpus // (tp * pp * cp)
    expert_tp = 1 if tp > 1 and (cp * dp) % ep else 0
    software = SOFTWARE["nemo"]
    precision = software.precision_for(PRECISIONS[precision])
    schedule = Schedule.INTERLEAVED_1F1B if vp > 1 else Schedule.ONE_F_ONE_B
    return Layout(strategy=Strategy.HYBRID, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, expert_tp=expert_tp,
                  moe_a2a_overlap=moe_a2a_overlap, global_batch_size=gbs,
                  micro_batches=gbs // (dp * mbs), schedule=schedule, virtual_stages=vp, zero=1,
                  precision=precision, attention="flash", recompute=Recompute(recompute),
                  recompute_modules=recompute_modules, **software.tp_flags(tp),
                  chunk_layers=megatron_pipeline_layout(pipeline_layout) if pipeline_layout else (),
                  **replace(software, fp8_scaling=fp8_scaling or software.fp8_scaling,
                            fp8_param_gather=software.fp8_param_gather if fp8_param_gather is None else fp8_param_gather)
                  .layout_flags(pp=pp, zero=1, precision=precision, schedule=schedule))


LLAMA3_70B_H100_LAYOUT = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"
"""Megatron-Bridge's ``llama3_70b_pretrain_64gpu_h100_fp8cs_config`` (GBS 256): 40 chunks over PP 8 x VP 5."""
LLAMA31_405B_LAYOUT = "Et|(t*2|)*62,tL"
"""Megatron-Bridge's ``llama31_405b_pretrain_config`` (every 405B recipe starts from it) sets
``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split``: the embedding and the
loss each count as a layer, so 126 layers + 2 fill 64 chunks of 2, the first and the last holding one layer."""


def _megatron_bridge() -> list[Run]:
    """(container, system, model, GPUs, GBS, MBS, TP, PP, CP, VP, tokens/s per GPU); sequence 8192, FP8-CS, every
    dense Llama row of the tables whose recipe is the distributed optimizer (FSDP 0) on a system with a preset.
    The attention kernel Transformer Engine runs on Hopper and Blackwell is assumed of FlashAttention-3's class
    (``flash3``). Left out: the H100 Llama 3 8B row (Megatron FSDP; the 25.11 recipe it ran is not the one
    published later, which sets full recomputation of 5 layers and no FSDP), the FSDP 70B rows, the MXFP8 and
    NVFP4 rows, GB300 and B300 (no preset), and the mixtures of experts (``docs/simulator.md``). The 70B at GBS 256
    (26.02) runs its recipe's ``pipeline_model_parallel_layout`` (``llama3_70b_pretrain_64gpu_h100_fp8cs_config``
    at GBS 256: one layer and the head on the last chunk, three layers on one other); the GBS 128 recipe sets none."""
    table = (("25.11", "DGX-H100", "llama3-70b", 64, 128, 1, 4, 8, 1, 5, 1602),
             ("25.11", "DGX-H100", "llama3-405b", 1024, 512, 1, 8, 8, 2, 8, 292, LLAMA31_405B_LAYOUT),
             ("26.02", "DGX-H100", "llama3-70b", 64, 256, 1, 4, 8, 1, 5, 1621, LLAMA3_70B_H100_LAYOUT),
             ("26.02", "DGX-H100", "llama3-405b", 1024, 1536, 1, 8, 8, 2, 8, 311, LLAMA31_405B_LAYOUT),
             ("25.11", "DGX-B200", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 30624),
             ("25.11", "DGX-B200", "llama3-405b", 128, 64, 1, 4, 8, 2, 8, 661, LLAMA31_405B_LAYOUT),
             ("25.11", "DGX-GB200", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 31508),
             ("25.11", "DGX-GB200", "llama3-405b", 256, 1536, 1, 4, 16, 1, 4, 813, LLAMA31_405B_LAYOUT),
             ("26.02", "DGX-GB200", "llama3-405b", 256, 1536, 1, 4, 16, 1, 4, 793, LLAMA31_405B_LAYOUT))
    clusters = {"DGX-H100": "h100-sxm", "DGX-B200": "b200", "DGX-GB200": "gb200-nvl72"}
    rows = []
    for container, system, model, gpus, gbs, mbs, tp, pp, cp, vp, tps, *layout in table:
        rows.append(Run(source=MBRIDGE, table=f"{container} NeMo container, {system}",
                        name=f"{model} {gpus} {system.removeprefix('DGX-')} MBS {mbs} TP {tp} PP {pp} CP {cp} VP {vp} GBS {gbs}",
                        arch=_llama3(model), cluster=clusters[system], metric="tps_per_gpu", value=tps,
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, cp=cp, vp=vp, fp8_scaling="tensorwise",
                                           pipeline_layout=layout[0] if layout else ""),
                        notes=("FP8-CS", "Transformer Engine", "attention kernel assumed flash3",
                               f"pipeline layout {layout[0]}" if layout else "")))
    return rows + _megatron_bridge_moe()


MOE_FIT_ROWS = ("qwen3-30b-a3b 8 B200 MBS 1 seq 4096 TP 1 PP 1 VP 1 EP 8 GBS 512",
                "qwen3-30b-a3b 8 GB200 MBS 4 seq 4096 TP 1 PP 1 VP 1 EP 8 GBS 512")
"""The Megatron-Bridge rows ``Cluster.moe_expert_fixed_s`` is fitted on (``efficiency_fits.fit_moe_expert_fixed_s``):
one model, one container and precision on two systems of one GPU generation, at 4096 and 16384 tokens per
micro-batch, which separates a cost per micro-batch from one per token. The other mixtures of experts are held out."""


RECIPE_RECOMPUTE = {"gpt-oss-120b": ("layernorm", "moe_act"), "deepseek-v3": ("mla_up_proj",)}
"""Megatron-Core module recomputation the recipes set: GPT-OSS's BF16 configs on H100, B200 and GB200
(``scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py`` at 07eea52); DeepSeek-V3's GB200 and
B200 configs (``scripts/performance/configs/deepseek/workload_base_configs.py`` at 0fa501a, with
``recompute_granularity="selective"``; one GB200 FP8-MX version adds ``mlp``, which the model does not price)."""


RECIPE_LAYOUT = {("deepseek-v3", 16, 1): "Et*4|(t*4|)*14,tmL", ("deepseek-v3", 4, 4): "Et*4|(t*4|)*14,tmL",
                 ("deepseek-v3", 8, 4): "Et|(tt|)*30mL"}
"""Pipeline layouts per (model, PP, VP). DeepSeek-V3: Megatron-Bridge's ``deepseek_v3.py`` (at 05d003f) maps (16, 1),
(8, 2) and (4, 4) to the embedding and 4 blocks, 14 chunks of 4, and a last chunk of one block, the
multi-token-prediction layer and the loss. At (8, 4) (Megatron-LM splits 61 blocks over 32 chunks only by a
layout) the GB200 recipe the table ran names none; the same file's H100 recipe at (8, 4),
``DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1`` in ``scripts/performance/configs/deepseek/deepseek_workload_base_configs.py``
(at 0426418), sets ``Et|(tt|)*30mL``: the embedding and one block, 30 chunks of 2, then the MTP layer and the loss
alone. Either way the pipeline rank holding the MTP layer and both heads is the slowest (its three chunks of 2
blocks and that one outweigh 8 blocks)."""
RECIPE_A2A_OVERLAP = {("qwen3-235b-a22b", "DGX-H100")}
"""(model, system) whose Megatron Bridge recipe runs Megatron-Core's combined 1F1B (``Layout.moe_a2a_overlap``): the
H100 Qwen3-235B-A22B configs, at the tables' TP 2, PP 8, VP 4, EP 32 and GBS 2048 (V1) and 8192 (V2), set
``moe_a2a_overlap=True`` with ``moe_token_dispatcher_type="alltoall"`` and ``expert_tensor_parallel_size=1``
(``scripts/performance/configs/qwen/qwen3_workload_base_configs.py`` at 01b2977)."""
LAYOUT_ASSUMED = {("deepseek-v3", 8, 4)}
"""The (model, PP, VP) of ``RECIPE_LAYOUT`` whose layout comes from another system's recipe at that (PP, VP)."""


def _megatron_bridge_moe() -> list[Run]:
    """(container, system, model, GPUs, precision, GBS, MBS, sequence, TP, PP, VP, EP, tokens/s per GPU): the Qwen3
    and GPT-OSS mixtures of experts of the same tables, every row on a system with a preset (the 25.11 H100
    Qwen3-235B line's GBS, 2048, as the page prints it at df0289c: an earlier version left it out; its EP 32 over
    DP 16 is expert-parallel folding, ``_nvidia``). The tables state that their MoE benchmarks force-balance the
    tokens over the experts and drop none: balanced, dropless routing, as predicted. FP8-MX (Blackwell's
    32-element block scaling, ``Layout.fp8_scaling`` mxfp8) runs as FP8 at the device's FP8 peak. The module recomputation each recipe sets:
    ``RECIPE_RECOMPUTE`` (the recipe files' micro-batches, pipeline and expert parallelism differ from the 25.11
    table's in places; the rows follow the table). DeepSeek-V3's recipes train one multi-token-prediction layer
    (``mtp_num_layers=1``, ``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``), as the preset does, in the
    pipeline layout ``RECIPE_LAYOUT`` gives."""
    table = (("25.11", "DGX-H100", "qwen3-30b-a3b", 16, "fp8", 512, 2, 4096, 1, 2, 24, 8, 5275),
             ("25.11", "DGX-B200", "qwen3-30b-a3b", 8, "fp8", 512, 1, 4096, 1, 1, 1, 8, 9299),
             ("25.11", "DGX-GB200", "qwen3-30b-a3b", 8, "fp8", 512, 4, 4096, 1, 1, 1, 8, 23766),
             ("25.11", "DGX-B200", "qwen3-235b-a22b", 64, "fp8", 1024, 1, 4096, 1, 8, 2, 8, 3269),
             ("25.11", "DGX-GB200", "qwen3-235b-a22b", 256, "bf16", 8192, 1, 4096, 1, 8, 3, 32, 4916),
             ("25.11", "DGX-H100", "qwen3-235b-a22b", 256, "fp8", 2048, 1, 4096, 2, 8, 4, 32, 1575),
             ("25.11", "DGX-H100", "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 1, 4, 1, 8, 5630),
             ("25.11", "DGX-B200", "gpt-oss-120b", 64, "bf16", 512, 4, 4096, 1, 1, 1, 8, 8213),
             ("25.11", "DGX-GB200", "gpt-oss-120b", 64, "bf16", 1280, 1, 8192, 1, 1, 1, 64, 15876),
             ("25.11", "DGX-GB200", "deepseek-v3", 256, "bf16", 4096, 1, 4096, 1, 4, 4, 64, 3139),
             ("25.11", "DGX-GB200", "deepseek-v3", 256, "fp8", 4096, 1, 4096, 1, 8, 4, 32, 4018),
             ("25.11", "DGX-B200", "deepseek-v3", 256, "fp8", 2048, 1, 4096, 1, 16, 1, 8, 2139))
    clusters = {"DGX-H100": "h100-sxm", "DGX-B200": "b200", "DGX-GB200": "gb200-nvl72"}
    rows = []
    for container, system, model, gpus, precision, gbs, mbs, seq, tp, pp, vp, ep, tps in table:
        rows.append(Run(source=MBRIDGE, table=f"{container} NeMo container, {system}",
                        name=f"{model} {gpus} {system.removeprefix('DGX-')} MBS {mbs} seq {seq} TP {tp} PP {pp} VP {vp} "
                             f"EP {ep} GBS {gbs}",
                        arch=replace(MODELS[model].arch, seq_len=seq), cluster=clusters[system], metric="tps_per_gpu",
                        value=tps,
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, vp=vp, ep=ep, precision=precision,
                                       fp8_scaling="tensorwise" if system == "DGX-H100" else "mxfp8",
                                       recompute_modules=RECIPE_RECOMPUTE.get(model, ()),
                                       pipeline_layout=RECIPE_LAYOUT.get((model, pp, vp), ""),
                                       moe_a2a_overlap=(model, system) in RECIPE_A2A_OVERLAP),
                        notes=("BF16" if precision == "bf16" else "FP8-CS" if system == "DGX-H100" else "FP8-MX",
                               "Transformer Engine", "attention kernel assumed flash3", "balanced dropless routing",
                               *((f"pipeline layout {RECIPE_LAYOUT[model, pp, vp]}"
                                  + (" (assumed: the H100 recipe's at this PP and VP)" if (model, pp, vp) in LAYOUT_ASSUMED else ""),)
                                 if (model, pp, vp) in RECIPE_LAYOUT else ()))))
    return rows


MBRIDGE_LATER_TABLE = (
    # (container, system, model, GPUs, precision, GBS, MBS, sequence, TP, PP, CP, VP, EP, tokens/s per GPU)
    ("26.02.01", "DGX-GB300", "llama3-70b", 64, "mxfp8", 256, 2, 8192, 1, 4, 1, 1, 1, 4798),
    ("26.02.01", "DGX-GB200", "llama3-70b", 64, "mxfp8", 256, 1, 8192, 2, 4, 1, 5, 1, 3837),
    ("26.02.01", "DGX-H100", "llama3-70b", 64, "fp8", 256, 1, 8192, 4, 8, 1, 5, 1, 1639),
    ("26.02.01", "DGX-GB300", "llama3-405b", 256, "mxfp8", 1536, 1, 8192, 2, 8, 2, 4, 1, 949),
    ("26.02.01", "DGX-GB300", "llama3-405b", 256, "fp8", 1536, 1, 8192, 2, 8, 2, 4, 1, 1024),
    ("26.02.01", "DGX-GB200", "llama3-405b", 256, "fp8", 1536, 1, 8192, 4, 16, 1, 4, 1, 818),
    ("26.02.01", "DGX-GB300", "deepseek-v3", 256, "mxfp8", 4096, 2, 4096, 1, 2, 1, 8, 32, 4691),
    ("26.02.01", "DGX-GB200", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 4, 1, 4, 64, 4021),
    ("26.02.01", "DGX-B300", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 16, 1, 1, 8, 3099),
    ("26.02.01", "DGX-B200", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 16, 1, 1, 8, 2790),
    ("26.02.01", "DGX-GB300", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 19366),
    ("26.02.01", "DGX-GB200", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 15754),
    ("26.02.01", "DGX-B300", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 8, 15031),
    ("26.02.01", "DGX-B200", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 8, 13722),
    ("26.02.01", "DGX-H100", "gpt-oss-120b", 64, "bf16", 1280, 1, 4096, 1, 4, 1, 1, 8, 5984),
    ("26.02.01", "DGX-GB300", "qwen3-30b-a3b", 8, "mxfp8", 512, 8, 4096, 1, 1, 1, 1, 8, 30411),
    ("26.02.01", "DGX-GB200", "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 1, 1, 1, 1, 8, 26373),
    ("26.02.01", "DGX-B300", "qwen3-30b-a3b", 8, "mxfp8", 512, 8, 4096, 1, 1, 1, 1, 8, 29454),
    ("26.02.01", "DGX-B200", "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 1, 1, 1, 1, 8, 26695),
    ("26.02.01", "DGX-H100", "qwen3-30b-a3b", 16, "fp8", 1024, 1, 4096, 1, 2, 1, 12, 8, 9058),
    ("26.02.01", "DGX-GB300", "qwen3-235b-a22b", 256, "mxfp8", 8192, 2, 4096, 1, 4, 1, 1, 32, 6583),
    ("26.02.01", "DGX-GB200", "qwen3-235b-a22b", 256, "mxfp8", 8192, 1, 4096, 1, 8, 1, 1, 32, 5530),
    ("26.02.01", "DGX-B300", "qwen3-235b-a22b", 256, "mxfp8", 8192, 1, 4096, 1, 8, 1, 4, 8, 2644),
    ("26.02", "DGX-GB300", "llama3-70b", 64, "mxfp8", 256, 1, 8192, 1, 4, 1, 5, 1, 4596),
    ("26.02", "DGX-GB200", "llama3-70b", 64, "mxfp8", 256, 1, 8192, 2, 4, 1, 5, 1, 3613),
    ("26.02", "DGX-GB300", "llama3-405b", 256, "mxfp8", 1536, 1, 8192, 2, 8, 2, 4, 1, 931),
    ("26.02", "DGX-GB300", "llama3-405b", 256, "fp8", 1536, 1, 8192, 4, 8, 1, 4, 1, 988),
    ("26.02", "DGX-GB300", "deepseek-v3", 256, "mxfp8", 4096, 2, 4096, 1, 2, 1, 8, 32, 4612),
    ("26.02", "DGX-GB200", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 4, 1, 4, 64, 3955),
    ("26.02", "DGX-B300", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 16, 1, 1, 8, 2983),
    ("26.02", "DGX-B200", "deepseek-v3", 256, "mxfp8", 4096, 1, 4096, 1, 16, 1, 1, 8, 2689),
    ("26.02", "DGX-GB300", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 19412),
    ("26.02", "DGX-GB200", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 15784),
    ("26.02", "DGX-B300", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 8359),
    ("26.02", "DGX-B200", "gpt-oss-120b", 64, "bf16", 1280, 4, 4096, 1, 1, 1, 1, 64, 8047),
    ("26.02", "DGX-H100", "gpt-oss-120b", 64, "bf16", 1280, 1, 4096, 1, 4, 1, 1, 8, 5993),
    ("26.02", "DGX-GB300", "qwen3-30b-a3b", 8, "mxfp8", 512, 8, 4096, 1, 1, 1, 1, 8, 30376),
    ("26.02", "DGX-GB200", "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 1, 1, 1, 1, 8, 26084),
    ("26.02", "DGX-B300", "qwen3-30b-a3b", 8, "mxfp8", 512, 8, 4096, 1, 1, 1, 1, 8, 29521),
    ("26.02", "DGX-B200", "qwen3-30b-a3b", 8, "mxfp8", 512, 1, 4096, 1, 1, 1, 1, 8, 9691),
    ("26.02", "DGX-H100", "qwen3-30b-a3b", 16, "fp8", 1024, 1, 4096, 1, 2, 1, 12, 8, 5113),
    ("26.02", "DGX-GB300", "qwen3-235b-a22b", 256, "mxfp8", 8192, 2, 4096, 1, 4, 1, 1, 32, 6583),
    ("26.02", "DGX-GB200", "qwen3-235b-a22b", 256, "mxfp8", 8192, 1, 4096, 1, 8, 1, 1, 32, 5448),
    ("26.02", "DGX-B300", "qwen3-235b-a22b", 256, "mxfp8", 8192, 1, 4096, 1, 8, 1, 4, 8, 2691),
    ("26.02", "DGX-B200", "qwen3-235b-a22b", 256, "mxfp8", 8192, 1, 4096, 1, 8, 1, 1, 8, 3805),
    ("26.02", "DGX-H100", "qwen3-235b-a22b", 256, "fp8", 8192, 1, 4096, 2, 8, 1, 4, 32, 1633),
    ("25.11", "DGX-GB300", "llama3-8b", 8, "fp8", 128, 2, 8192, 1, 1, 1, 1, 1, 37556),
    ("25.11", "DGX-GB300", "llama3-8b", 8, "mxfp8", 128, 2, 8192, 1, 1, 1, 1, 1, 36108),
    ("25.11", "DGX-GB300", "llama3-405b", 256, "fp8", 1536, 1, 8192, 2, 8, 2, 4, 1, 999),
    ("25.11", "DGX-GB300", "gpt-oss-120b", 64, "bf16", 1280, 2, 8192, 1, 1, 1, 1, 64, 18347),
    ("25.11", "DGX-GB300", "qwen3-30b-a3b", 8, "mxfp8", 512, 4, 4096, 1, 1, 1, 1, 8, 28934),
    ("25.11", "DGX-GB300", "qwen3-235b-a22b", 256, "bf16", 8192, 2, 4096, 1, 4, 1, 12, 16, 6131),
    ("25.11", "DGX-GB200", "llama3-8b", 8, "mxfp8", 128, 2, 8192, 1, 1, 1, 1, 1, 29789),
    ("25.11", "DGX-B200", "llama3-8b", 8, "mxfp8", 128, 2, 8192, 1, 1, 1, 1, 1, 29521),
    ("25.11", "DGX-B200", "llama3-405b", 128, "mxfp8", 64, 1, 8192, 4, 8, 2, 8, 1, 624),
)
"""Megatron-Bridge's later tables (``docs/performance-summary.md``, sections "26.02.01 NeMo Container" and "26.02
NeMo Container", per model) and the 25.11 rows the first tables left out: DGX-GB300 and the FP8-MX figures printed in parentheses beside FP8-CS. Every
row with the distributed optimizer (FSDP 0) on a system with a preset. Left out: NVFP4 (no FP4 peak in the
presets), Megatron FSDP rows, Nemotron 3 Nano (a hybrid Mamba model) and Kimi K2 (no preset), the GB200 405B at
PP 16 x VP 8 (128 chunks for 126 blocks, the embedding and the loss: chunks with no block), and 25.11's GB300
DeepSeek-V3 rows (run without multi-token prediction, in a layout the page does not give). MXFP8 runs as FP8 at
the device's FP8 peak, as the first tables' MoE rows do; the parenthesised MXFP8 figures run 3-6% below FP8-CS,
which the model does not tell apart. The 405B recipes split 126 blocks, the embedding and the loss evenly over
their chunks (``account_for_ends``); the H100 70B at GBS 256 runs ``LLAMA3_70B_H100_LAYOUT``; DeepSeek-V3 at PP 2 x
VP 8 (16 chunks) is assumed to run the layout the page's other 16-chunk recipes run."""
MBRIDGE_LATER_LAYOUT = {("deepseek-v3", 2, 8): "Et*4|(t*4|)*14,tmL"}


def _ends_layout(blocks: int, chunks: int) -> str:
    """``account_for_ends`` written as a Megatron-LM layout string."""
    first, *middle, last = account_for_ends(blocks, chunks)
    assert set(middle) == {middle[0]}, middle
    return f"Et*{first}|(t*{middle[0]}|)*{len(middle)},t*{last}L"


def _megatron_bridge_later() -> list[Run]:
    clusters = {"DGX-H100": "h100-sxm", "DGX-B200": "b200", "DGX-B300": "b300", "DGX-GB200": "gb200-nvl72",
                "DGX-GB300": "gb300-nvl72"}
    rows = []
    for container, system, model, gpus, precision, gbs, mbs, seq, tp, pp, cp, vp, ep, tps in MBRIDGE_LATER_TABLE:
        arch = replace(MODELS[model].arch, seq_len=seq)
        if model == "llama3-405b" and pp * vp > 1:
            layout = _ends_layout(arch.layers, pp * vp)
        elif model == "llama3-70b" and system == "DGX-H100" and gbs == 256:
            layout = LLAMA3_70B_H100_LAYOUT
        else:
            layout = MBRIDGE_LATER_LAYOUT.get((model, pp, vp)) or RECIPE_LAYOUT.get((model, pp, vp), "")
        label = {"bf16": "BF16", "mxfp8": "FP8-MX", "fp8": "FP8-CS"}[precision]
        moe = MODELS[model].arch.experts > 0
        rows.append(Run(source=MBRIDGE_LATER,
                        table=f"{container} NeMo container, {system}",
                        name=f"{model} {gpus} {system.removeprefix('DGX-')} {label} MBS {mbs} seq {seq} TP {tp} PP {pp} "
                             f"CP {cp} VP {vp} EP {ep} GBS {gbs} ({container})",
                        arch=arch, cluster=clusters[system], metric="tps_per_gpu", value=tps,
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, cp=cp, vp=vp, ep=ep,
                                       precision="bf16" if precision == "bf16" else "fp8",
                                       fp8_scaling="mxfp8" if precision == "mxfp8" else "tensorwise",
                                       recompute_modules=RECIPE_RECOMPUTE.get(model, ()), pipeline_layout=layout,
                                       moe_a2a_overlap=(model, system) in RECIPE_A2A_OVERLAP),
                        notes=(label, "Transformer Engine", "attention kernel assumed flash3",
                               "balanced dropless routing" if moe else "",
                               f"pipeline layout {layout}" if layout else "")))
    return rows


def megatron_padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron-LM pads the vocabulary to a multiple of ``make_vocab_size_divisible_by`` x TP
    (``_vocab_size_with_padding``), so that each tensor-parallel rank's slice of the head is whole."""
    multiple = divisible_by * tp
    return -(-vocab // multiple) * multiple


def _nemo_arch(model: str, tp: int) -> Architecture:
    """The NeMo-Framework-Launcher's shapes (``launcher_scripts/conf/training``): GPT-3 (GPT-2's 50257-token
    BPE vocabulary, learned positions, LayerNorm, biases, tied embeddings, hidden dropout 0.1 in the
    ``*_fp8_performance.yaml`` recipes), Nemotron (squared-ReLU MLP 4 x hidden, rotary positions, LayerNorm,
    no biases, untied, a 256,000-token vocabulary: Hugging Face transformers' ``NemotronConfig`` default),
    Llama 2 and 3 (``parbench.sim.models``); every vocabulary padded as Megatron pads it."""
    gpt3 = {"gpt3-5b": (24, 4096, 32), "gpt3-20b": (44, 6144, 48), "gpt3-175b": (96, 12288, 96)}
    nemotron = {"nemotron-8b": (32, 4096, 32, 32), "nemotron-15b": (32, 6144, 48, 8), "nemotron-22b": (40, 6144, 48, 48),
                "nemotron-340b": (96, 18432, 96, 8)}
    if model in gpt3:
        layers, hidden, heads = gpt3[model]
        return Architecture(name=model, layers=layers, hidden=hidden, heads=heads, seq_len=2048,
                            vocab=megatron_padded_vocab(50257, tp), tie_embeddings=True, dropout=True)
    if model in nemotron:
        layers, hidden, heads, kv = nemotron[model]
        return Architecture(name=model, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, seq_len=4096,
                            vocab=megatron_padded_vocab(256000, tp), positions="rotary", bias="none")
    arch = MODELS[model].arch
    return replace(arch, vocab=megatron_padded_vocab(arch.vocab, tp))


def _nemo() -> list[Run]:
    """NeMo 24.07's DGX-H100 FP8 pre-training table: (model, GPUs, GBS, MBS, sequence, TP, PP, CP, VP,
    tokens/s per GPU), every layout as printed. Beyond what ``_nvidia`` states for NVIDIA's recipes, the
    launcher's ``gpt3/*_fp8_performance.yaml`` (commit 1e46ac6) set selective recomputation (the attention
    core) for GPT-3; the Llama and Nemotron configs set none. The launcher's configs set no ``fp8_params`` either:
    the parameters gathered in bf16. The table's fine-tuning rows are left out: SFT packs
    short SQuAD samples into 4096 tokens that attend only within each sample, and LoRA trains adapters alone;
    the model represents neither."""
    table = (("gpt3-5b", 64, 2048, 4, 2048, 1, 1, 1, 1, 22521), ("gpt3-20b", 64, 256, 2, 2048, 2, 1, 1, 1, 5851),
             ("gpt3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 726), ("gpt3-175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 782),
             ("llama2-7b", 8, 128, 1, 4096, 1, 1, 1, 1, 16847), ("llama2-13b", 16, 128, 1, 4096, 1, 4, 1, 10, 8646),
             ("llama2-70b", 64, 128, 1, 4096, 4, 4, 1, 20, 1707), ("nemotron-8b", 64, 256, 4, 4096, 2, 1, 1, 1, 12701),
             ("nemotron-22b", 64, 256, 2, 4096, 2, 4, 1, 10, 4256),
             ("nemotron-340b", 128, 32, 1, 4096, 8, 8, 1, 12, 322),
             ("llama3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12036), ("llama3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1533))
    rows = []
    for model, gpus, gbs, mbs, seq, tp, pp, cp, vp, tps in table:
        arch = replace(_nemo_arch(model, tp), seq_len=seq)
        recompute = "selective" if model.startswith("gpt3") else "none"
        rows.append(Run(source=NEMO, table="Pretraining, NeMo 24.07, DGX-H100",
                        name=f"{model} {gpus} H100 MBS {mbs} TP {tp} PP {pp} CP {cp} VP {vp} GBS {gbs}",
                        arch=arch, cluster="h100-sxm", metric="tps_per_gpu", value=tps,
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, cp=cp, vp=vp, recompute=recompute,
                                       fp8_param_gather=False),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3",
                               "selective recomputation" if recompute != "none" else "")))
    return rows


def _nemo_long_sequence() -> list[Run]:
    """NeMo 24.03.01's long-sequence table for Llama 2 7B in FP8 on DGX-H100, its with-CP columns: (sequence in
    K tokens, TP, PP, DP, CP, model TFLOP/s per GPU); the GPUs are TP x PP x DP x CP (the table's "# of GPUs",
    1 per 1K tokens). Its TFLOP/s count the attention scores in full, as Megatron's formula does (Narayanan et
    al. 2021, eq. 3, the s/6h term) and as ``Prediction.model_flops_per_step`` does; a causal count would halve
    the 1M-token row's. The table prints no global or micro-batch: micro-batch 1 and 8 sequences per
    data-parallel rank are assumed; with pipeline size 1 and 8 to 64 sequences per rank the prediction moves by
    at most 1.0%. Left out: the 4K and 8K rows (the 4K prediction moves by 3% over that range, the 8K one, whose
    PP 2 pipeline bubble depends on the micro-batch count, by 10%) and the without-CP column (its layouts are
    not printed). The parameters gathered in bf16, as NeMo 24.07's table (the launcher's configs set no
    ``fp8_params``)."""
    table = ((16, 2, 1, 8, 1, 660), (32, 2, 1, 8, 2, 610), (64, 4, 1, 8, 2, 574), (128, 4, 1, 8, 4, 555),
             (256, 4, 1, 8, 8, 549), (512, 8, 1, 4, 16, 549), (1024, 8, 1, 4, 32, 536))
    rows = []
    for k, tp, pp, dp, cp, tflops in table:
        gpus = tp * pp * dp * cp
        rows.append(Run(source=NEMO_LONG, table="Long Sequence Performance, LLAMA2-7B (FP8), with-CP",
                        name=f"llama2-7b seq {k}K {gpus} H100 TP {tp} PP {pp} DP {dp} CP {cp}",
                        arch=replace(_nemo_arch("llama2-7b", tp), seq_len=k * 1024), cluster="h100-sxm",
                        metric="tflops_per_gpu", value=tflops, series="NeMo long-sequence Llama 2 7B FP8",
                        layout=_nvidia(gpus=gpus, gbs=8 * dp, tp=tp, pp=pp, cp=cp, fp8_param_gather=False),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3",
                               "micro-batch 1, 8 sequences per data-parallel rank (assumed: not printed)")))
    return rows


def _megatron(rows: tuple | None = None) -> list[Run]:
    """Megatron-LM's published runs (by default every row of ``parbench.sim.published``: SC21 Tables 1-2, MT-NLG,
    Korthikanti et al., BLOOM, Megatron-LM's README and its MoE README's Mixtral row) with the layouts
    ``parbench.sim.published`` states; a row without an architecture of its own is Megatron's GPT, dropout on
    (Megatron's default 0.1 for attention and hidden states)."""
    from parbench.sim.published import ALL_ROWS, SEQ, VOCAB, layout_for

    return [Run(source=p.source, table=p.table, name=p.name, cluster=p.cluster, layout=layout_for(p),
                arch=p.arch or Architecture(name=p.name, layers=p.layers, hidden=p.hidden, heads=p.heads, seq_len=SEQ,
                                            vocab=VOCAB, dropout=True),
                metric="s_per_iteration", value=p.measured_s, series=p.series) for p in (rows or ALL_ROWS)]


def _infeasible() -> list[Run]:
    """Layouts whose parameters, gradients and Adam state alone (16 bytes per parameter, ZeRO paper
    sec. 3.1) exceed a device: 175B replicated on 8 A100s, 405B sharded 8 ways, 70B replicated, 8B on one GPU."""
    def plain(gpus: int, zero: int) -> Layout:
        return Layout(strategy=Strategy.HYBRID, dp=gpus, global_batch_size=gpus, zero=zero,
                      precision=PRECISIONS["bf16"], attention="flash")

    return [Run(source=INFEASIBLE, table="16 B/param", name="GPT-3 175B DDP on 8 A100", arch=MODELS["gpt3-175b"].arch,
                cluster="a100-80gb", layout=plain(8, 0), ran=False),
            Run(source=INFEASIBLE, table="16 B/param", name="Llama 3 405B FSDP on 8 H100", cluster="h100-sxm",
                arch=MODELS["llama3-405b"].arch, layout=plain(8, 3), ran=False),
            Run(source=INFEASIBLE, table="16 B/param", name="Llama 3 70B DDP on 64 H100", cluster="h100-sxm",
                arch=MODELS["llama3-70b"].arch, layout=plain(64, 0), ran=False),
            Run(source=INFEASIBLE, table="16 B/param", name="Llama 3 8B on one H100", cluster="h100-sxm",
                arch=MODELS["llama3-8b"].arch, layout=plain(1, 0), ran=False),
            Run(source=INFEASIBLE, table="16 B/param", name="Llama 2 70B ZeRO-1 on 16 A100", cluster="a100-80gb",
                arch=MODELS["llama2-70b"].arch, layout=plain(16, 1), ran=False)]


DGXC_GPT3 = "nemo_megatron/README_175b.md @0b71cfd"
DGXC_LLAMA = "llama3.1/README_{size}.md @143b90d"
DGXC_NEMOTRON = "nemotron/README_340b.md @143b90d"
DGXC_NEMOTRON_15B = "nemotron/README_15b.md @0b71cfd"
DGXC_HELD_OUT = "NVIDIA dgxc-benchmarking nemotron/README_15b.md @0b71cfd (Nemotron-4 15B on 16-2048 DGX H100; held out)"
"""Rows added after the constants were fitted: left out of every fit (``efficiency_fits``), so they test them."""
NEMOTRON4_REPORT = "Parmar et al. 2024, Nemotron-4 15B Technical Report (arXiv 2402.16819v2), Table 2 (held out)"
MLPERF_GPT3 = ("MLPerf Training v3.1, NVIDIA's GPT-3 175B on Eos DGX H100 (mlcommons/training_results_v3.1 @f33f944; "
               "held out)")
MLPERF_GPT3_V41 = ("MLPerf Training v4.1, NVIDIA's GPT-3 175B on Eos DGX H100 and a DGX B200 (mlcommons/training_results_v4.1, "
                   "as mirrored in swsok/training_results_v4.1 @8821c70; held out)")
BIGSCIENCE_PREQUEL = ("BigScience tr11-176B-ml chronicles-prequel.md @053adaf ('Rebalancing layers', 48 Jean Zay "
                      "nodes, 2022-02-28; held out)")
MLPERF_GPT3_V40 = ("MLPerf Training v4.0, NVIDIA's GPT-3 175B on Eos DGX H100 (mlcommons/training_results_v4.0 @62f111b; "
                   "held out)")
DSV3_GB200_GUIDE = ("Megatron-LM docs/discussions/deepseek-v3-gb200-optimization @b6bf017 (DeepSeek-V3 MXFP8 on 256 "
                    "GB200; held out)")
MLPERF_LLAMA405B = ("MLPerf Training v5.0, NVIDIA's Llama 3.1 405B on Eos DGX H100 and Tyche GB200 NVL72 "
                    "(mlcommons/training_results_v5.0, as mirrored in prishajain1/training_results_v5.0 @0fdc28f; held out)")
MLPERF_LLAMA8B_CISCO = ("MLPerf Training v5.1, Cisco's Llama 3.1 8B on H100 (mlcommons/training_results_v5.1 @4da2d1c; "
                        "held out)")
MLPERF_LLAMA8B_V60 = ("MLPerf Training v6.0, Cisco's FP8 Llama 3.1 8B on H100 and H200 (mlcommons/training_results_v6.0, "
                      "as mirrored in Richardyu114/training_results_v6.0 @eabf23a; held out)")
MLPERF_LLAMA8B_AMD = ("MLPerf Training v5.1, AMD's FP8 Llama 3.1 8B on one node of 8 MI355X or MI350X "
                      "(mlcommons/training_results_v5.1 @4da2d1c; held out)")
DGXC_2505 = ("NVIDIA dgxc-benchmarking v25.05.04 @1f6d9f4 (NeMo 25.04, GB200 NVL72 and H100, BF16 and FP8; "
             "held out)")
HELD_OUT_SOURCES = (DGXC_HELD_OUT, NEMOTRON4_REPORT, MLPERF_GPT3, MLPERF_GPT3_V40, MLPERF_GPT3_V41, MEGATRON_README,
                    MEGATRON_V1,
                    BIGSCIENCE_PREQUEL, DSV3_GB200_GUIDE, MLPERF_LLAMA405B, MLPERF_LLAMA8B_CISCO, DGXC_2505,
                    MLPERF_LLAMA8B_V60, MLPERF_LLAMA8B_AMD)
"""Every source added after the constants were fitted; ``efficiency_fits`` leaves them all out."""


def _dgxc() -> list[Run]:
    """NVIDIA's DGX Cloud benchmarking tables: (table, model, container, TP, CP, MBS, then per column: GPUs,
    GBS, layers, PP, VP, and the seconds per step in BF16 and in FP8). MBS 1 but for Nemotron-4 15B's 4 (its
    README: TP 4, PP 1, MBS 4, GA 4, GBS 4 per GPU, 16-2048 H100; the launcher config it links is 24.12's;
    shape: Parmar et al., "Nemotron-4 15B Technical Report", arXiv 2402.16819, 2024, Table 1: 32 layers, hidden
    6144, 48 heads, 8 key/value heads, sequence 4096; the README's FLOP count uses the same 32, 6144, 4096 and
    the 256,000-token vocabulary). Each README names the
    layout it must run and the NeMo-Framework-Launcher config it starts from; what the tables leave to those
    configs is what ``_nvidia`` states for NVIDIA's recipes (no recomputation: the 340B config sets none;
    ``launcher_scripts/conf/training/nemotron/nemotron_340b.yaml`` also sets sequence parallelism, the
    tensor-parallel overlap and overlapped pipeline sends). The 405B rows below 576 GPUs are the README's
    proxy configs: the same layer at 7, 21 or 42 layers (their GBS and PP as printed), not a scaling series.
    Shapes as ``_nemo_arch`` (GPT-3 with the launcher's hidden dropout). Vocabularies: GPT-3's 50257-token BPE; the 405B recipe's GPT-2 BPE tokenizer (its README: 'uses the
    GPT2BPETokenizer as a proxy'); the 70B's Llama 3 tokenizer; Nemotron's 256,000; each padded as Megatron
    pads it."""
    gpt3 = tuple((g, 2 * g, 96, 8, 12, bf, f8) for g, bf, f8 in zip(
        (128, 256, 512, 1024, 2048), (8.309, 8.408, 8.42, 8.453, 8.49), (5.626, 5.725, 5.774, 5.82, 5.96)))
    l405 = ((32, 126, 7, 1, 1, 8.85, 5.80), (96, 126, 21, 3, 7, 8.75, 5.71), (192, 252, 42, 3, 7, 16.93, 11.00),
            (576, 252, 126, 9, 7, 17.20, 11.24), (1152, 504, 126, 9, 7, 17.52, 11.31), (2304, 1008, 126, 9, 7, 17.62, 12.35))
    l70 = tuple((g, 2 * g, 80, 4, 5, bf, f8) for g, bf, f8 in zip(
        (64, 128, 256, 512, 1024, 2048), (14.72, 14.73, 14.8, 14.89, 14.92, 14.98),
        (11.01, 10.93, 11.16, 11.18, 11.28, 11.39)))
    l8 = tuple((g, 16 * g, 32, 1, 1, bf, f8) for g, bf, f8 in zip(
        (8, 16, 32, 64, 128), (12.91, 13.00, 13.05, 13.08, 13.10), (9.67, 9.73, 9.75, 9.80, 9.82)))
    nemotron = tuple((g, g // 4, 96, 8, 12, bf, f8) for g, bf, f8 in zip(
        (128, 256, 512, 1024, 2048), (4.61, 4.67, 4.7, 4.73, 4.84), (3.16, 3.21, 3.26, 3.34, 3.49)))
    nemotron15 = tuple((g, 4 * g, 32, 1, 1, bf, f8) for g, bf, f8 in zip(
        (16, 32, 64, 128, 256, 512, 1024, 2048), (2.812, 2.824, 2.845, 2.859, 2.852, 2.875, 2.895, 2.887),
        (2.039, 2.046, 2.048, 2.059, 2.075, 2.12, 2.094, 2.12)))
    tables = ((DGXC, DGXC_GPT3, "GPT-3 175B", _nemo_arch("gpt3-175b", 4), "", 4, 1, 1, gpt3),
              (DGXC, DGXC_LLAMA.format(size="405b"), "Llama 3.1 405B",
               replace(MODELS["llama3-405b"].arch, vocab=megatron_padded_vocab(50257, 8)), "24.09", 8, 2, 1, l405),
              (DGXC, DGXC_LLAMA.format(size="70b"), "Llama 3.1 70B", _nemo_arch("llama3-70b", 4), "24.09", 4, 2, 1, l70),
              (DGXC, DGXC_LLAMA.format(size="8b"), "Llama 3.1 8B", _nemo_arch("llama3-8b", 1), "24.09", 1, 2, 1, l8),
              (DGXC, DGXC_NEMOTRON, "Nemotron-4 340B", _nemo_arch("nemotron-340b", 8), "24.11", 8, 1, 1, nemotron),
              (DGXC_HELD_OUT, DGXC_NEMOTRON_15B, "Nemotron-4 15B", _nemo_arch("nemotron-15b", 4), "", 4, 1, 4,
               nemotron15))
    rows = []
    for source, table, model, arch, container, tp, cp, mbs, columns in tables:
        full = arch.layers
        for gpus, gbs, layers, pp, vp, *seconds in columns:
            for precision, s in zip(("bf16", "fp8"), seconds):
                proxy = layers != full
                label = f"{model}{f' ({layers}-layer proxy)' if proxy else ''} {precision.upper()}"
                rows.append(Run(source=source, table=f"{table}{f', {container}' if container else ''}, {precision.upper()}",
                                name=f"{label} {gpus} H100 TP {tp} PP {pp} CP {cp} VP {vp}"
                                     f"{f' MBS {mbs}' if mbs > 1 else ''} GBS {gbs}",
                                arch=replace(arch, layers=layers), cluster="h100-sxm", metric="s_per_iteration",
                                value=s, series="" if proxy else f"DGXC {model} {precision.upper()}",
                                layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, cp=cp, vp=vp,
                                               precision=precision),
                                notes=(precision.upper(), "Transformer Engine", "attention kernel assumed flash3",
                                       "proxy config" if proxy else "")))
    return rows


NEMOTRON4_TABLE2 = ((768, 384, 0.57, 34.3), (1536, 768, 0.58, 33.3), (2304, 1152, 0.64, 30.5))
"""The report's Table 2, its batch-size ramp-up: (GPUs, batch size, iteration time in seconds, MFU in %)."""


def _nemotron4_report() -> list[Run]:
    """Nemotron-4 15B's pre-training as its report states it (sec. 2, 'Pre-training'): 384 DGX H100 nodes (8 H100
    80GB SXM5, NVLink and NVSwitch, 8 x 400 Gb/s InfiniBand per node), 8-way tensor parallelism and data
    parallelism with a distributed optimizer, the data-parallel degree 96, 192 and 288 as the batch ramps up
    (Table 2: four 4096-token sequences per data-parallel rank in every stage), the shape of its Table 1 (32 layers,
    hidden 6144, 48 heads, 8 KV heads, a 256,000-token vocabulary; squared ReLU, RoPE, no biases, untied). Not
    stated, so assumed: bf16 (the report quotes the bf16 peak its MFU divides by), micro-batch 1 (as for SC21's and
    MT-NLG's rows, which state none either), and NVIDIA's software as its recipes run every layout (``_nvidia``:
    sequence parallelism and the tensor-parallel overlap at tp 8). Added after every constant was fitted."""
    arch = _nemo_arch("nemotron-15b", 8)
    return [Run(source=NEMOTRON4_REPORT, table="Table 2", name=f"Nemotron-4 15B report {gpus} H100 TP 8 DP {gpus // 8} GBS {gbs}",
                arch=arch, cluster="h100-sxm", metric="s_per_iteration", value=secs, series="Nemotron-4 15B report",
                layout=_nvidia(gpus=gpus, gbs=gbs, mbs=1, tp=8, precision="bf16"),
                notes=("BF16 assumed", "micro-batch 1 assumed", "attention kernel assumed flash3"))
            for gpus, gbs, secs, _ in NEMOTRON4_TABLE2]


MLPERF_GPT3_STEPS = ((96, 128, 11.081), (512, 16, 1.610), (768, 16, 1.617), (1024, 16, 1.621), (1280, 8, 0.925),
                     (1344, 8, 0.930))
"""(DGX H100 nodes, MINIBS, seconds per training step) of NVIDIA's MLPerf Training v3.1 GPT-3 submissions: every
configuration its ``NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_<nodes>x8x<MINIBS>x4x8_mbs1.sh``
states, timed by its logs ``NVIDIA/results/eos*_n<nodes>_ngc23.09_nemo/gpt3/result_{0,1,2}.txt``: each log's
``train_step_timing`` entries in its last 16,000 characters (24-32 steps; the first step after each evaluation,
0.03-0.05 s shorter, left out), their median, then the median of the three logs (which agree within 0.2%). The
steps the logs count advance by GBS x 2048 tokens, GBS = MINIBS x nodes x 8 / 32, as the configs give it."""


def _mlperf_gpt3() -> list[Run]:
    """NVIDIA's MLPerf Training v3.1 GPT-3 175B runs on Eos (DGX H100, NeMo 23.09): TP 4, PP 8, MBS 1 from each
    config; from the implementation's ``conf/custom.yaml``: 12 interleaved virtual stages (``INTERLEAVED_PIPELINE``'s
    default), sequence parallelism, the tensor-parallel overlap (``TP_COMM_OVERLAP=True``), overlapped pipeline
    sends, no activation recomputation, no dropout, 2048-token sequences; FP8 (``config_fp8.sh``, TE's hybrid
    format), its parameters gathered in bf16 (``conf/custom.yaml`` sets no ``fp8_params``, which the later rounds'
    configs pass); GPT-3's shape with the 50,257-token vocabulary the benchmark's reference states
    (``mlcommons/training`` ``large_language_model/megatron-lm/README.md``), padded as Megatron pads it. The
    distributed optimizer and NVIDIA's other recipe settings are ``_nvidia``'s. Added after every fit, held out."""
    arch = replace(_nemo_arch("gpt3-175b", 4), dropout=False)
    rows = []
    for nodes, minibs, secs in MLPERF_GPT3_STEPS:
        gpus = 8 * nodes
        gbs = minibs * gpus // 32
        rows.append(Run(source=MLPERF_GPT3, table=f"config_DGXH100_{nodes}x8x{minibs}x4x8_mbs1.sh, result_0-2",
                        name=f"MLPerf GPT-3 175B FP8 {gpus} H100 TP 4 PP 8 VP 12 GBS {gbs}", arch=arch,
                        cluster="h100-sxm", metric="s_per_iteration", value=secs, series="MLPerf v3.1 GPT-3 175B",
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=1, tp=4, pp=8, vp=12, precision="fp8",
                                       fp8_param_gather=False),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3")))
    return rows


MLPERF_GPT3_V41_STEPS = (("eos_n32_ngc24.09_nemo", "config_DGXH100_32x8x256x4x8_mbs2.sh", "h100-sxm", 32, 2048, 8, 6, 2,
                          18.373),
                         ("eos_n64_ngc24.09_nemo", "config_DGXH100_64x8x128x4x8_mbs2.sh", "h100-sxm", 64, 2048, 8, 6, 2,
                          9.520),
                         ("b200_n8_preview_nemo", "config_DGXB200_8x8x1024x4x8_mbs2_cg.sh", "b200", 8, 2048, 8, 6, 2,
                          36.143))
"""(results directory, its config, preset, nodes, GBS, PP, virtual stages, MBS, seconds per step) of NVIDIA's MLPerf
Training v4.1 GPT-3 runs (NeMo 24.09): each config sets TP 4, PP 8, 6 interleaved virtual stages
(``INTERLEAVED_PIPELINE=6``), MBS 2, the tensor-parallel overlap; the step is the median of the ``train_step_timing
in s`` entries in the last 16,000 characters of ``result_0.txt`` and ``result_1.txt`` together (36 steps each, the
first after each evaluation left out). Their logs' step counters advance by 2048 x 2048 tokens, the GBS the configs
give (MINIBS x nodes x 8 / 32)."""
MLPERF_GPT3_V40_STEPS = (("eos_n64_ngc24.04_nemo", "config_DGXH100_64x8x128x4x8_mbs2.sh", "h100-sxm", 64, 2304, 8, 4, 2,
                          10.982),
                         ("eos-dfw_n1344_ngc24.04_nemo", "config_DGXH100_1344x8x6x4x6_mbs1_cg.sh", "h100-sxm", 1344, 2688,
                          6, 8, 1, 0.9208),
                         ("eos-dfw_n1452_ngc24.04_nemo", "config_DGXH100_1452x8x6x4x6_mbs1_cg.sh", "h100-sxm", 1452, 2904,
                          6, 8, 1, 0.9218))
"""The same for the v4.0 round (NeMo 24.04; configs: TP 4, PP 8 x 4 virtual stages x MBS 2 on 64 nodes, PP 6 x 8 x MBS 1
with per-layer CUDA graphs on 1344 and 1452). Their logs print no ``train_step_timing``, only the benchmark's
``block_start`` / ``block_stop`` times between evaluations and the samples each block trains (``epoch_count``, in
tokens): the step is a block's time over its steps (25,344, 26,880 and 26,136 sequences: 11, 10 and 9 steps of the
GBS the logs print, ``global_batch_size``; 2304 on 64 nodes, whose launch set MINIBS 144 over the config's 128),
the median of each log's last 12 blocks, then of the three logs (which agree within 0.8%)."""


def _mlperf_gpt3_round(source: str, steps: tuple, version: str, logs: str, *, fp8_params: bool = False) -> list[Run]:
    """One MLPerf round's GPT-3 runs, the v3.1 rows' shape and settings (``_mlperf_gpt3``) at their own configs'
    layout (``steps``: ``MLPERF_GPT3_V41_STEPS``'s fields; ``logs``: the result files the steps were read from;
    ``fp8_params``: the round's configs set ``FP8_PARAMS=True``, FP8 weights gathered)."""
    arch = replace(_nemo_arch("gpt3-175b", 4), dropout=False)
    rows = []
    for folder, config, cluster, nodes, gbs, pp, vp, mbs, secs in steps:
        gpus = 8 * nodes
        device = "B200" if cluster == "b200" else "H100"
        rows.append(Run(source=source, table=f"{folder}/{config}, {logs}",
                        name=f"MLPerf {version} GPT-3 175B FP8 {gpus} {device} TP 4 PP {pp} VP {vp} MBS {mbs} GBS {gbs}",
                        arch=arch, cluster=cluster, metric="s_per_iteration", value=secs,
                        series=f"MLPerf {version} GPT-3 175B H100" if cluster == "h100-sxm" else "",
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=4, pp=pp, vp=vp, precision="fp8",
                                       fp8_param_gather=fp8_params),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3",
                               "FP8 parameters gathered" if fp8_params else "")))
    return rows


def _mlperf_gpt3_v41() -> list[Run]:
    """The v4.1 round's GPT-3 runs, with their FP8 parameters gathered as such (``config_common.sh``:
    ``FP8_PARAMS=True``, read in the B200 folder; the H100 folders source a file of the same name that the mirror
    does not hold apart, as it holds no duplicate). Not modelled: the configs' deferred embedding weight gradients,
    the B200 run's CUDA graphs. Held out."""
    return _mlperf_gpt3_round(MLPERF_GPT3_V41, MLPERF_GPT3_V41_STEPS, "v4.1", "result_0-1", fp8_params=True)


def _mlperf_gpt3_v40() -> list[Run]:
    """The v4.0 round's GPT-3 runs, the largest at 11,616 H100 with 6 micro-batches a pipeline, with their FP8
    parameters gathered as such: ``config_common.sh`` sets ``FP8_PARAMS=True`` and ``conf/custom.yaml`` passes it on
    as NeMo's ``fp8_params`` (both read in the fork henrique/training_results_v4.0 @1316e93, which sets them up for
    nodes of 4 GPUs, ``CUDA_VISIBLE_DEVICES`` and ``DGXNGPU``; the copy of the round's repository read here does not
    carry them), as the v4.1 round's ``config_common.sh`` does. Not
    modelled: the per-layer CUDA graphs, and Apex's distributed Adam (``conf/optim/distributed_fused_adam.yaml``:
    100 MB buckets, gradients reduced in bf16) counted as Megatron-Core's distributed optimizer. Held out."""
    return _mlperf_gpt3_round(MLPERF_GPT3_V40, MLPERF_GPT3_V40_STEPS, "v4.0", "result_0-2", fp8_params=True)


MLPERF_LLAMA405B_STEPS = (("eos-dfw_n64_ngc25.01_nemo", "config_DGXH100_64x8x288xtp8pp8cp2.sh", "h100-sxm", 64, 8, 288, 8,
                           55.183),
                          ("eos-dfw_n256_ngc25.01_nemo", "config_DGXH100_256x8x72xtp8pp8cp2.sh", "h100-sxm", 256, 8, 72, 8,
                           14.242),
                          ("eos-dfw_n304_ngc25.01_nemo", "config_DGXH100_304x8x64xtp8pp8cp2.sh", "h100-sxm", 304, 8, 64, 8,
                           12.737),
                          ("eos-dfw_n320_ngc25.01_nemo", "config_DGXH100_320x8x56xtp8pp8cp2.sh", "h100-sxm", 320, 8, 56, 8,
                           11.200),
                          ("eos-dfw_n1024_ngc25.01_nemo", "config_DGXH100_1024x8x24xtp8pp8cp2.sh", "h100-sxm", 1024, 8, 24,
                           8, 5.202),
                          ("tyche_ngpu256_ngc25.04_nemo", "config_GB200_64x4x112xtp4pp8cp2_cg.sh", "gb200-nvl72", 64, 4, 112,
                           4, 19.195),
                          ("tyche_ngpu512_ngc25.04_nemo", "config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh", "gb200-nvl72", 128,
                           4, 112, 4, 19.684))
"""(results directory, its config, preset, nodes, GPUs a node, MINIBS, TP, seconds per step) of NVIDIA's MLPerf Training
v5.0 Llama 3.1 405B runs (NeMo 25.01 on H100, 25.04 on GB200). MINIBS is the micro-batches a pipeline takes per step
(MBS 1); GBS = MINIBS x GPUs / (TP x PP x CP), as ``conf/custom.yaml`` computes it and the logs' sample counter
advances. The step is the median of the ``train_step_time`` entries in the last 16,000 characters of
``result_0.txt`` (34-44 steps, after the run's last evaluation)."""

MLPERF_LLAMA8B_CISCO_STEPS = (("hpf_n8", "config_DGXH100_8x8x1xtp1pp1cp1.sh", 8, 1, 0.7182),
                              ("hpf_n16", "config_DGXH100_16x8x1xtp2pp1cp1.sh", 16, 2, 0.4754))
"""(system, its config, nodes of 8 H100, TP, seconds per step) of Cisco's MLPerf Training v5.1 Llama 3.1 8B runs: the
median of the 33 ``train_step_time`` entries (logged every step) in the last 16,000 characters of ``result_0.txt``."""

MLPERF_LLAMA8B_V60_STEPS = (("Zeus_8xH100_SXM_80GB", "config_DGXH100_8x8x36xtp8pp8cp2.sh", "result_1", "h100-sxm", 8, 2,
                             32, "delayed", 0.3502),
                            ("Zeus_16xH100_SXM_80GB", "config_DGXH100_16x8x36xtp8pp8cp2.sh", "result_1", "h100-sxm", 16, 2,
                             64, "delayed", 0.3496),
                            ("2xC885A_M8-8xH200-SXM-141GB", "config_C885A_H200_2x8x1xtp1pp1cp1_8b.sh", "result_0", "h200-sxm",
                             2, 1, 32, "tensorwise", 1.1813))
"""(system, its config, result file, preset, nodes of 8 GPUs, TP, GBS, FP8 recipe, seconds per step) of Cisco's MLPerf
Training v6.0 Llama 3.1 8B runs in FP8. The step is the median of the last 30 ``train_step_time`` entries of the result
file (21 on H200, all its last three blocks hold), each the mean over the 8 (H100) or 32 (H200) steps since the one
before; the entries just after an evaluation, over a partial window, are left out. The H100 configs' names say
tp8pp8cp2, their contents TP 2, PP 1, CP 1, MINIBS 1; the logs' ``global_batch_size`` agrees with the contents. A
second result file of each H100 system gives 0.3500 s (8 nodes, ``result_2``) and 0.3485 s (16 nodes, ``result_5``)."""

MLPERF_LLAMA8B_AMD_STEPS = (("MI355X_EPYC_9575F_pytorch", "mi355x", 30.662), ("MI350X_EPYC_9575F_pytorch", "mi350x", 24.995))
"""(results directory, preset, samples/s) of AMD's MLPerf Training v5.1 Llama 3.1 8B runs: the median of the 13
``tracked_stats`` throughputs of ``result_0.txt`` after its first (each over one block of 12,288 sequences between
evaluations; the first block holds the warm-up: 30.15 and 24.59). Their spread is 0.3% (MI355X 30.62-30.71, MI350X
24.97-25.01). GBS 32 = 8 data-parallel ranks x 2 micro-batches of 2 (the logs' ``global_batch_size`` 32 and
``gradient_accumulation_steps`` 2; ``config_MI355X_1x8x1_8b.sh``: MBS 2, TP 1, PP 1, CP 1)."""

PREQUEL_TABLE = ((12288, 106, 64, 8, 4, 12, 2, 116.54), (12288, 106, 96, 8, 4, 12, 2, 118.79),
                 (12288, 106, 128, 8, 4, 12, 2, 121.42), (12288, 106, 96, 8, 4, 12, 4, 120.34),
                 (12288, 100, 64, 16, 4, 6, 2, None), (12288, 100, 64, 16, 4, 6, 1, None),
                 (12288, 100, 64, 8, 8, 6, 2, 139.72), (12288, 100, 64, 8, 8, 6, 4, 120.96),
                 (13312, 82, 64, 4, 8, 12, 4, 111.79), (13312, 82, 64, 8, 4, 12, 2, 104.45),
                 (13312, 82, 104, 8, 4, 12, 2, 123.71), (13312, 82, 128, 8, 4, 12, 2, 108.78),
                 (13312, 82, 64, 8, 4, 12, 4, 104.82), (13312, 94, 128, 8, 4, 12, 2, 124.10),
                 (14336, 70, 64, 4, 8, 12, 2, 121.63), (14336, 70, 64, 8, 4, 12, 2, 102.03),
                 (14336, 70, 112, 8, 4, 12, 2, 104.50), (14336, 70, 128, 8, 4, 12, 2, 105.89),
                 (14336, 70, 64, 8, 4, 12, 4, 102.27), (14336, 82, 128, 8, 4, 12, 2, None))
"""The prequel's "Rebalancing layers" tables as printed: (NHIDDEN, NLAYERS, NHEADS, DP, TP, PP, MBS, Sec/it; None
where it prints OOM), every row 48 nodes and GBS 2048."""


def _mlperf_llama405b() -> list[Run]:
    """NVIDIA's MLPerf Training v5.0 Llama 3.1 405B runs (``MLPERF_LLAMA405B_STEPS``): from each config and its
    ``config_common*.sh``: TP 8 (H100) or 4 (GB200), PP 8, CP 2, 8 interleaved virtual stages, MBS 1, the embedding and
    the loss each counted as a pipeline layer (``ASYM_PP_EMBED``, ``ASYM_PP_LOSS``: ``LLAMA31_405B_LAYOUT``), FP8
    (TE's default delayed scaling), the tensor-parallel overlap, the distributed optimizer with its overlapped
    reduce-scatter and gather; from ``conf/custom.yaml``: 8192-token sequences, sequence parallelism, overlapped
    pipeline sends, no activation recomputation. The benchmark trains Llama 3.1 405B with the Mixtral 8x22B tokenizer
    in place of Llama 3's (the implementation's README), 32,768 tokens. FP8 parameters, gathered as such
    (``FP8_PARAMS`` on H100, which ``pretrain.py`` passes on as ``fp8_param_gather``; ``FP8_PARAM_GATHER`` on GB200).
    Not modelled: the GB200 runs' full-iteration CUDA graphs, the deferred embedding weight gradients. Added after
    every fit, held out."""
    arch = replace(_llama3("llama3-405b", 8192), vocab=32768)
    rows = []
    for folder, config, cluster, nodes, per_node, minibs, tp, secs in MLPERF_LLAMA405B_STEPS:
        gpus = nodes * per_node
        gbs = minibs * gpus // (tp * 8 * 2)
        device = "H100" if cluster == "h100-sxm" else "GB200"
        rows.append(Run(source=MLPERF_LLAMA405B, table=f"{folder}/{config}, result_0",
                        name=f"MLPerf v5.0 Llama 3.1 405B FP8 {gpus} {device} TP {tp} PP 8 CP 2 VP 8 MBS 1 GBS {gbs}",
                        arch=arch, cluster=cluster, metric="s_per_iteration", value=secs,
                        series=f"MLPerf v5.0 Llama 3.1 405B {device}",
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=1, tp=tp, pp=8, cp=2, vp=8, precision="fp8",
                                       pipeline_layout=LLAMA31_405B_LAYOUT),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3",
                               "pipeline layout Et|(t*2|)*62,tL", "Mixtral 8x22B tokenizer (32,768 tokens)")))
    return rows


def _mlperf_llama8b_cisco() -> list[Run]:
    """Cisco's MLPerf Training v5.1 Llama 3.1 8B runs (``MLPERF_LLAMA8B_CISCO_STEPS``), NVIDIA's NeMo implementation
    on 8 and 16 nodes of 8 H100 SXM 80GB with 8 x 400 Gb/s NICs each (``Cisco/systems/hpf_n*.json``): from each config
    and ``config_common.sh``: TP 1 or 2 (PP 1, CP 1), MBS 1, MINIBS 1 (GBS 64: one micro-batch of one sequence a
    data-parallel rank, as the logs' sample counter advances), the tensor-parallel overlap, FP8 (``conf/custom.yaml``'s
    default recipe, delayed), the distributed optimizer with its overlapped reduce-scatter and gather, no CUDA graphs
    (``MCORE_CUDA_GRAPH=False``); from ``conf/custom.yaml``: 8192-token sequences, sequence parallelism, no activation
    recomputation. The implementation's README: the Llama 3.1 8B tokenizer. FP8 parameters (``FP8_PARAMS``),
    gathered as such. Not modelled: the deferred embedding weight gradients. Added after every fit, held out."""
    arch = _llama3("llama3-8b", 8192)
    return [Run(source=MLPERF_LLAMA8B_CISCO, table=f"Cisco/results/{system}/llama31_8b/result_0.txt, {config}",
                name=f"MLPerf v5.1 Llama 3.1 8B FP8 {8 * nodes} H100 TP {tp} MBS 1 GBS 64 (Cisco {system})", arch=arch,
                cluster="h100-sxm", metric="s_per_iteration", value=secs,
                layout=_nvidia(gpus=8 * nodes, gbs=64, mbs=1, tp=tp, precision="fp8"),
                notes=("FP8", "Transformer Engine", "attention kernel assumed flash3", "one micro-batch a step"))
            for system, config, nodes, tp, secs in MLPERF_LLAMA8B_CISCO_STEPS]


def _mlperf_llama8b_amd() -> list[Run]:
    """AMD's MLPerf Training v5.1 Llama 3.1 8B runs (``MLPERF_LLAMA8B_AMD_STEPS``) on one Supermicro node of 8 MI355X
    (1400 W) or MI350X (1000 W): NVIDIA's NeMo reference ported to ROCm (its system file: NeMo 2.3.0, Megatron-LM,
    Transformer Engine, hipBLASLt, ROCm 7.0), so run as NVIDIA's recipes run (the distributed optimizer, 8192-token
    sequences, no activation recomputation); its config: TP 1, MBS 2, GBS 32, FP8 with FP8 parameters
    (``FP8_PARAMS=1``; Transformer Engine's default delayed recipe assumed, as the reference's ``conf/custom.yaml``),
    Composable Kernel's fused attention (``NVTE_FUSED_ATTN_CK=1``) at the H100's fused-attention rate (assumed), no
    tensor-parallel overlap (no tensor parallelism). Every efficiency is the H100's: no AMD row enters a fit."""
    arch = _llama3("llama3-8b", 8192)
    rows = []
    for folder, cluster, samples_per_s in MLPERF_LLAMA8B_AMD_STEPS:
        device = cluster.upper()
        rows.append(Run(source=MLPERF_LLAMA8B_AMD, table=f"AMD/results/{folder}/llama31_8b/result_0.txt",
                        name=f"MLPerf v5.1 Llama 3.1 8B FP8 8 {device} MBS 2 GBS 32 (AMD)", arch=arch, cluster=cluster,
                        metric="s_per_iteration", value=round(32 / samples_per_s, 4),
                        layout=_nvidia(gpus=8, gbs=32, mbs=2, precision="fp8", fp8_param_gather=True),
                        notes=("FP8", "Transformer Engine on ROCm", "attention kernel assumed flash3 (CK fused attention)",
                               "FP8 parameters gathered")))
    return rows


def _mlperf_llama8b_v60() -> list[Run]:
    """Cisco's MLPerf Training v6.0 Llama 3.1 8B runs in FP8 (``MLPERF_LLAMA8B_V60_STEPS``), NVIDIA's implementation
    (Megatron-Bridge on the H200, NeMo 2 on the H100s; container 26.04), one sequence of 8192 tokens a micro-batch:
    - H100 (8 and 16 nodes of 8 H100 SXM 80GB, 8 x 400 Gb/s RoCE each): TP 2 with sequence parallelism and the
      tensor-parallel overlap, PP 1, CP 1, one micro-batch a step (GBS = the data-parallel ranks);
      ``config_common.sh``: FP8 with delayed scaling, ``FP8_PARAM_GATHER=True`` (FP8 parameters gathered as such);
    - H200 (2 nodes of 8 H200 SXM): TP 1, 16 data-parallel ranks of two micro-batches (GBS 32, as its log's
      "number of microbatches constant 2"); its log's configuration: ``fp8_recipe: 'tensorwise'``, ``fp8_param``
      and the distributed optimizer's ``fp8_param_gather=True``, no recomputation (``recompute_modules`` is set,
      ``recompute_granularity`` left at its default, none).
    Both: the distributed optimizer with its overlapped reduce-scatter and gather, no activation recomputation.
    Not modelled: full-iteration CUDA graphs (``FULL_CUDA_GRAPH=1``; ``cuda_graph_scope: full_iteration``),
    Transformer Engine's op fuser. Added after every fit, held out."""
    arch = _llama3("llama3-8b", 8192)
    rows = []
    for system, config, result, cluster, nodes, tp, gbs, recipe, secs in MLPERF_LLAMA8B_V60_STEPS:
        gpus, device = 8 * nodes, cluster.split("-")[0].upper()
        rows.append(Run(source=MLPERF_LLAMA8B_V60, table=f"Cisco/results/{system}/llama31_8b/{result}.txt, {config}",
                        name=f"MLPerf v6.0 Llama 3.1 8B FP8 {gpus} {device} TP {tp} MBS 1 GBS {gbs} (Cisco)", arch=arch,
                        cluster=cluster, metric="s_per_iteration", value=secs,
                        series="MLPerf v6.0 Llama 3.1 8B H100" if cluster == "h100-sxm" else "",
                        layout=_nvidia(gpus=gpus, gbs=gbs, mbs=1, tp=tp, precision="fp8", fp8_scaling=recipe,
                                       fp8_param_gather=True),
                        notes=("FP8", "Transformer Engine", "attention kernel assumed flash3", "FP8 parameters gathered",
                               "full-iteration CUDA graphs (not modelled)")))
    return rows


DGXC_2505_STEPS = (
    ("llama3.1/README.md", "Llama 3.1 405B", "llama3-405b", 8192, (
        ("gb200-nvl72", 128, 4, 8, 2, 8, 1, 64, 9.347, 6.131), ("gb200-nvl72", 256, 4, 8, 2, 8, 1, 128, 9.484, 6.183),
        ("gb200-nvl72", 512, 4, 8, 2, 8, 1, 256, 9.508, 6.244), ("h100-sxm", 512, 8, 8, 2, 8, 1, 256, 19.810, 13.020))),
    ("nemotron/README.md", "Nemotron-4 340B", "nemotron-340b", 4096, (
        ("gb200-nvl72", 128, 8, 4, 1, 12, 1, 32, 2.189, 1.483), ("gb200-nvl72", 256, 8, 4, 1, 12, 1, 64, 2.19, 1.517),
        ("gb200-nvl72", 512, 8, 4, 1, 12, 1, 128, 2.229, 1.549), ("gb200-nvl72", 128, 8, 4, 1, 12, 1, 512, 32.66, 21.83),
        ("gb200-nvl72", 256, 8, 4, 1, 12, 1, 512, 16.58, 11.21), ("gb200-nvl72", 512, 8, 4, 1, 12, 1, 512, 8.468, 5.668),
        ("h100-sxm", 256, 8, 8, 1, 12, 1, 64, 4.606, 3.107))),
    ("nemotron/README.md", "Nemotron-4 15B", "nemotron-15b", 4096, (
        ("h100-sxm", 16, 2, 1, 1, 1, 2, 64, 2.746, 1.988),)))
"""(README, model, shape, sequence, rows of (preset, GPUs, TP, PP, CP, VP, MBS, GBS, seconds per step in BF16 and in
FP8)) of NVIDIA's DGX Cloud benchmarking release 25.05.04: each README's layout table and its "Training step time
(seconds per step)" rows, the mean of iterations 11-44 (its ``parse_train_timing.sh``)."""


def _dgxc_2505() -> list[Run]:
    """NVIDIA's DGX Cloud benchmarking recipes, release 25.05.04 (github.com/NVIDIA/dgxc-benchmarking @1f6d9f4; NeMo
    25.04.01 for Llama 3.1, 25.04.00 for Nemotron-4): the same recipes on GB200 NVL72 and on DGX H100, in BF16 and FP8,
    one README per model (``DGXC_2505_STEPS``). The layouts are the READMEs' tables; what they leave to NeMo's
    performance scripts is what ``_nvidia`` states for NVIDIA's recipes. Llama 3.1 405B's 126 layers over PP 8 x VP 8
    split only with the embedding and the loss each counted as a layer (``LLAMA31_405B_LAYOUT``); its tokenizer is
    Llama 3.1's own (the README requires access to Meta's checkpoint), on synthetic data. Left out: DeepSeek-V3 (its
    recipe's recomputation and multi-token prediction unstated), Grok-1 and Llama 4 Maverick (no shape here), and
    the 512-GPU Grok-1 row's throughput, which its step time contradicts. Added after every fit, held out."""
    rows = []
    for readme, model, shape, seq, columns in DGXC_2505_STEPS:
        arch = _llama3(shape, seq) if shape.startswith("llama") else replace(_nemo_arch(shape, 8), seq_len=seq)
        for cluster, gpus, tp, pp, cp, vp, mbs, gbs, *seconds in columns:
            device = "GB200" if cluster == "gb200-nvl72" else "H100"
            chunks = LLAMA31_405B_LAYOUT if shape == "llama3-405b" else ""
            for precision, secs in zip(("bf16", "fp8"), seconds):
                name = (f"DGXC 25.05 {model} {precision.upper()} {gpus} {device} TP {tp} PP {pp} CP {cp} VP {vp}"
                        f"{f' MBS {mbs}' if mbs > 1 else ''} GBS {gbs}")
                strong = gbs == 512 and shape == "nemotron-340b"
                rows.append(Run(source=DGXC_2505, table=f"{readme}, {device} {precision.upper()}", name=name, arch=arch,
                                cluster=cluster, metric="s_per_iteration", value=secs,
                                series=(f"DGXC 25.05 {model} {device} {precision.upper()}{' GBS 512' if strong else ''}"
                                        if device == "GB200" else ""),
                                layout=_nvidia(gpus=gpus, gbs=gbs, mbs=mbs, tp=tp, pp=pp, cp=cp, vp=vp,
                                               precision=precision, pipeline_layout=chunks),
                                notes=(precision.upper(), "Transformer Engine", "attention kernel assumed flash3")))
    return rows


def _bigscience_prequel() -> list[Run]:
    """BigScience's layout search for BLOOM on Jean Zay before its launch (``train/tr11-176B-ml/chronicles-prequel.md``
    in github.com/bigscience-workshop/bigscience at commit 053adafee86d8b0beb10ddd95e5bbbbe3d702f3c), the section
    from which "the testing is happening with BF16 optimizer" (gradients accumulated in fp32) and with
    ``--pp-partition-method 'type:transformer|embedding'`` (each embedding a pipeline slot, so every stage holds
    (NLAYERS + 2) / PP slots): 176B-206B GPTs of BLOOM's kind (its 250,880-row vocabulary, ALiBi, sequence 2048)
    in TP x PP x DP layouts of 384 A100s, the second iteration's seconds, and three layouts that ran out of
    memory. BLOOM's own rows' settings otherwise (``published.bloom_layout``). The same table's BLOOM-shaped row
    (14336 x 70, 112 heads, TP 4, PP 12, MBS 2: 104.50 s) is within 0.2% of BLOOM's logged step at iteration
    85,376 (104.70 s). Added after every constant was fitted; held out."""
    from parbench.sim.published import BLOOM_176B, bloom_layout

    rows = []
    for hidden, layers, heads, dp, tp, pp, mbs, secs in PREQUEL_TABLE:
        per = (layers + 2) // pp
        arch = replace(BLOOM_176B, name=f"BigScience {hidden} x {layers}", hidden=hidden, layers=layers, heads=heads)
        rows.append(Run(source=BIGSCIENCE_PREQUEL, table="Rebalancing layers",
                        name=f"{hidden} x {layers} ({heads} heads) 384 A100 TP {tp} PP {pp} DP {dp} MBS {mbs}",
                        arch=arch, cluster="jean-zay-a100", ran=secs is not None,
                        metric="s_per_iteration" if secs else "", value=secs or 0.0,
                        layout=bloom_layout(dp=dp, tp=tp, pp=pp, micro_batch=mbs,
                                            chunk_layers=(per - 1,) + (per,) * (pp - 2) + (per - 1,)),
                        notes=("iteration 2", "" if secs else "published: OOM")))
    return rows


def megatron_core_flops(arch: Architecture, batch: int) -> float:
    """Model FLOPs of one step of ``batch`` sequences as Megatron-Core counts them for its 'throughput per GPU
    (TFLOP/s/GPU)' (``num_floating_point_operations`` in ``megatron/training/training.py``), for multi-head latent
    attention with experts (DeepSeek-V3's kind), per token 3 (forward, two backward) x 2 (multiply-add) x:
    the MLPs, 3 h f each (SwiGLU) over the dense blocks' f and, in every MoE block, top-k experts' and the shared
    experts' widths; per block (and MTP layer) MLA's projections, q_lora (h + n (d_qk + d_rope) + 1) + kv_lora
    (h + n (d_qk + d_v) + 1) + h d_rope + n d_v h, and its core attention counted causal, s n (d_qk + d_rope) / 2 +
    s n d_v / 2; each MTP layer's norms and projection, 3 h + 2 h^2; the logits, h V per head (the main one and
    each MTP layer's). No recomputation, router or norm FLOPs."""
    h, n, s = arch.hidden, arch.heads, arch.seq_len
    dqk, dr, dv, m = arch.head_dim, arch.rope_head_dim, arch.v_dim, arch.mtp_layers
    moe_blocks = arch.layers - arch.dense_first
    mlp = 3 * h * (arch.ffn * arch.dense_first
                   + (arch.expert_ffn * arch.top_k + arch.expert_ffn * arch.shared_experts) * (moe_blocks + m))
    attention = (arch.q_lora_rank * (h + n * (dqk + dr) + 1) + arch.kv_lora_rank * (h + n * (dqk + dv) + 1)
                 + h * dr + n * dv * h + s * n * (dqk + dr) / 2 + s * n * dv / 2)
    per_token = mlp + (arch.layers + m) * attention + m * (3 * h + 2 * h * h) + h * arch.vocab * (m + 1)
    return 6 * per_token * batch * s


DSV3_GB200_TFLOPS = 970.01
"""The guide's last row: TFLOP/s per GPU after its thirteen optimisations (from 494.46)."""


def _deepseek_gb200_guide() -> list[Run]:
    """NVIDIA's Megatron-Core team, "Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72"
    (github.com/NVIDIA/Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md``
    @b6bf017, and the launch script of ``deepseek-v3-gb200-reproduce-guide.md`` beside it, @32ea0af): DeepSeek-V3 in
    MXFP8 on 256 GB200 (8 nodes a NVL domain of 32), TP 1, PP 8, VP 4, EP 32, MBS 1, GBS 2048, sequence 4096,
    ``--moe-layer-freq ([0]*3+[1]*58)``, the vocabulary padded to a multiple of 3232 (129,280), pipeline layout
    ``Et|(tt|)*30L`` (no MTP layer: the launch sets none), recomputation of ``mlp moe_act``, routing forced balanced
    (``--moe-router-force-load-balancing``, "for performance benchmark"), 970.01 TFLOP/s per GPU. The step is that
    figure turned back into seconds through Megatron-Core's own count (``megatron_core_flops``): 8.44 s. The guide's
    twelve earlier rows (494.46 TFLOP/s at its baseline) differ in software the layout does not describe (the token
    dispatcher, CUDA graphs, fused router, host-side work): left out. ``mlp`` recomputation (the 3 dense blocks' MLPs)
    is not priced. Added after every fit."""
    arch = replace(MODELS["deepseek-v3"].arch, mtp_layers=0)
    layout = _nvidia(gpus=256, gbs=2048, mbs=1, tp=1, pp=8, vp=4, ep=32, precision="fp8", fp8_scaling="mxfp8",
                     recompute_modules=("moe_act",), pipeline_layout="Et|(tt|)*30L")
    step = megatron_core_flops(arch, 2048) / (DSV3_GB200_TFLOPS * 1e12 * 256)
    return [Run(source=DSV3_GB200_GUIDE, table="sec. 1 table, last row (HybridEP, fused quantisation)",
                name="DeepSeek-V3 MXFP8 256 GB200 TP 1 PP 8 VP 4 EP 32 MBS 1 GBS 2048 (970 TFLOP/s)", arch=arch,
                cluster="gb200-nvl72", metric="s_per_iteration", value=step,
                layout=layout, notes=("MXFP8", "Transformer Engine", "balanced dropless routing (forced)",
                                      "no MTP layer", "pipeline layout Et|(tt|)*30L",
                                      "970.01 TFLOP/s by Megatron-Core's count"))]


def runs() -> list[Run]:
    return (_torchtitan_h100() + _torchtitan_h200() + _torchtitan_a100() + _foundry() + _megatron_bridge()
            + _megatron_bridge_later() + _nemo()
            + _nemo_long_sequence() + _dgxc() + _nemotron4_report() + _mlperf_gpt3() + _mlperf_gpt3_v40()
            + _mlperf_gpt3_v41() + _mlperf_llama405b() + _mlperf_llama8b_cisco() + _mlperf_llama8b_v60() + _mlperf_llama8b_amd() + _dgxc_2505() + _megatron() + _bigscience_prequel() + _deepseek_gb200_guide() + _infeasible())


METRICS = {"s_per_iteration": "seconds per training step", "tps_per_gpu": "tokens/s per GPU",
           "mfu": "model FLOPs utilisation, a fraction of the peak (PaLM's count)",
           "tflops_per_gpu": "model TFLOP/s per GPU (PaLM's count: attention scores whole, no recomputation)",
           "tokens_per_s": "tokens/s of the whole run (every GPU together)",
           "samples_per_s": "samples (sequences)/s of the whole run",
           "hfu": "hardware FLOPs utilisation, a fraction of the peak: recomputation counted (MosaicML's HFU)",
           "hw_tflops_per_gpu": "hardware TFLOP/s per GPU, recomputation counted: Megatron-LM's 'achieved teraFLOP/s' "
                                "(Narayanan et al. 2021, eq. 3), BLOOM's logged TFLOPs"}
"""What a published or measured run may print, each compared with the same quantity of its prediction. Every one
but ``s_per_iteration`` is a rate, inversely proportional to the step time of a fixed layout."""


def metric_of(p: Prediction, metric: str, world_size: int) -> float | None:
    """The prediction's value of ``metric`` (``METRICS``) on ``world_size`` GPUs; None for ''."""
    values = {"mfu": lambda: p.mfu, "hfu": lambda: p.hfu, "s_per_iteration": lambda: p.step_time_s,
              "tps_per_gpu": lambda: p.tokens_per_s / world_size, "tokens_per_s": lambda: p.tokens_per_s,
              "samples_per_s": lambda: p.throughput_samples_per_s,
              "tflops_per_gpu": lambda: p.model_flops_per_step / p.step_time_s / world_size / 1e12,
              "hw_tflops_per_gpu": lambda: p.hardware_flops_per_step / p.step_time_s / world_size / 1e12}
    return values[metric]() if metric in values else None


def _metric(p: Prediction, run: Run) -> float | None:
    return metric_of(p, run.metric, run.layout.world_size)


def _published_step_s(p: Prediction, run: Run, metric: float | None) -> float | None:
    """The published step time: as printed, or the predicted step scaled by predicted / published metric
    (tokens/s per GPU, TFLOP/s per GPU and MFU are each inversely proportional to the step time of a fixed layout)."""
    if not run.metric or not metric:
        return None
    return run.value if run.metric == "s_per_iteration" else p.step_time_s * metric / run.value


def timed_runs() -> list[Run]:
    """Every published run with a step time to predict: the runs that trained and print a metric."""
    return [r for r in runs() if r.ran and r.metric]


def step_times_s(run: Run) -> tuple[float, float]:
    """(published, predicted) seconds per step of a run with a published metric, the run on its own preset."""
    p = predict(architecture_spec(run.arch, megatron=True), run.layout, PRESETS[run.cluster])
    return _published_step_s(p, run, _metric(p, run)), p.step_time_s


def _split_key(run: Run) -> str:
    """What must match for two runs to share their per-micro-batch work (source, device, model, and the
    layout but for its data-parallel degree, global batch and micro-batch count), as a short digest."""
    lay = run.layout
    rest = {f.name: getattr(lay, f.name) for f in fields(lay) if f.name not in ("dp", "global_batch_size", "micro_batches")}
    key = repr((run.source, run.cluster, replace(run.arch, name=""), lay.global_batch_size // (lay.dp * lay.micro_batches), rest))
    return hashlib.sha1(key.encode()).hexdigest()[:12]


def _split_label(run: Run) -> str:
    return run.series or run.name.rsplit(" GBS ", 1)[0]


def compare_runs() -> list[dict]:
    """Each run beside its prediction (``compared``)."""
    return [compared(run, predict(architecture_spec(run.arch, megatron=True), run.layout, PRESETS[run.cluster]))
            for run in runs()]


def compared(run: Run, p: Prediction) -> dict:
    """One run beside its prediction: fits?, predicted peak (allocator) memory, the metric and errors in %."""
    metric = _metric(p, run)
    mem = (p.peak_memory_bytes - p.memory.context_bytes) / 2**30  # the worst rank's allocator peak
    splits = run.ran and run.metric and run.arch is not None
    return {"source": run.source, "table": run.table, "name": run.name, "cluster": run.cluster,
            "gpus": run.layout.world_size, "global_batch": run.layout.global_batch_size, "series": run.series,
            "split": _split_key(run) if splits else "", "split_label": _split_label(run),
            "micro_batches": run.layout.micro_batches, "step_s_predicted": p.step_time_s,
            "step_s_published": _published_step_s(p, run, metric),
            "ran": run.ran, "predicted_fits": p.feasible, "peak_gib_predicted": p.peak_memory_bytes / 2**30,
            "allocator_gib_predicted": mem, "memory_gib_published": run.memory_gib,
            "memory_error_pct": (mem - run.memory_gib) / run.memory_gib * 100 if run.memory_gib else None,
            "metric": run.metric, "published": run.value if run.metric else None, "predicted": metric,
            "metric_error_pct": (metric - run.value) / run.value * 100 if run.metric else None,
            "notes": [n for n in run.notes if n]}


def summarize_by_source(rows: list[dict], floors: dict[str, float] | None = None) -> list[dict]:
    """Per source: rows; mean and max |error| of the published metric and of peak memory (%); how many
    layouts that ran are predicted to fit, how many OOM/infeasible ones are predicted not to. ``floors``
    (``parbench.sim.accuracy.source_floors``): the max |error| no model can get under on the source's rows, 0
    where none bounds it; None (not given) leaves ``metric_max_floor_pct`` None."""
    out = []
    for source in dict.fromkeys(r["source"] for r in rows):
        mine = [r for r in rows if r["source"] == source]
        errs = [abs(r["metric_error_pct"]) for r in mine if r["metric_error_pct"] is not None]
        mems = [abs(r["memory_error_pct"]) for r in mine if r["memory_error_pct"] is not None]
        ran = [r for r in mine if r["ran"]]
        oom = [r for r in mine if not r["ran"]]
        out.append({"source": source, "rows": len(mine),
                    "metric": ", ".join(sorted({r["metric"] for r in mine if r["metric"]})) or "-",
                    "metric_mean_abs_error_pct": sum(errs) / len(errs) if errs else None,
                    "metric_max_abs_error_pct": max(errs) if errs else None,
                    "metric_max_floor_pct": None if floors is None else floors.get(source, 0.0),
                    "memory_rows": len(mems), "memory_mean_abs_error_pct": sum(mems) / len(mems) if mems else None,
                    "memory_max_abs_error_pct": max(mems) if mems else None,
                    "ran": len(ran), "ran_predicted_to_fit": sum(r["predicted_fits"] for r in ran),
                    "infeasible": len(oom), "infeasible_predicted_not_to_fit": sum(not r["predicted_fits"] for r in oom)})
    return out
