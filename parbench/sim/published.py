"""Published at-scale measurements and the simulator's predictions for them.

Sources (figures as printed in the papers; layouts as the papers state them, assumptions marked):
- Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
  SC 2021, Table 1 (also the table in the NVIDIA/Megatron-LM README): GPT models, s = 2048, V = 51200,
  A100-80GB (Selene, 8 GPUs per DGX node, HDR InfiniBand), achieved teraFLOP/s per GPU counted with the
  paper's eq. (3), F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), which includes the recomputation forward.
  A measured iteration time is derived as F / (achieved x GPUs).
  Checked here against a secondary summary of Table 1 (layers, hidden, t, p, GPUs and TFLOP/s per
  GPU of the 145.6B, 530B and 1T rows agree); the global batch sizes and the 310.1B row were written
  from the paper without a second source in this workplace, so treat those as unverified.
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023, abstract:
  530B GPT on 2240 A100 GPUs, sequence parallelism + selective recomputation, MFU 54.2%.
"""

from __future__ import annotations

from dataclasses import dataclass

from parbench.config import Schedule, Strategy, WorkloadConfig
from parbench.sim.hardware import PRESETS, Cluster
from parbench.sim.layout import PRECISIONS, Layout, Recompute
from parbench.sim.model import model_spec
from parbench.sim.predict import predict

SEQ, VOCAB = 2048, 51200


@dataclass(frozen=True)
class Published:
    name: str
    layers: int
    hidden: int
    heads: int
    tp: int
    pp: int
    gpus: int
    global_batch: int
    measured: float
    unit: str
    """``s/iteration`` or ``mfu``."""
    recompute: Recompute
    sequence_parallel: bool
    source: str


def megatron_flops(b: int, l: int, h: int, s: int = SEQ, v: int = VOCAB) -> float:
    """Narayanan et al. 2021, eq. (3): FLOPs of one iteration with full recomputation."""
    return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def _table1(name: str, l: int, h: int, a: int, tp: int, pp: int, gpus: int, b: int, tflops: float) -> Published:
    seconds = megatron_flops(b, l, h) / (tflops * 1e12 * gpus)
    return Published(name, l, h, a, tp, pp, gpus, b, seconds, "s/iteration", Recompute.FULL, False,
                     f"Narayanan et al. SC21 Table 1: {tflops:g} TFLOP/s per GPU on {gpus} A100 (iteration time via eq. 3)")


PUBLISHED = (
    _table1("GPT 145.6B", 80, 12288, 96, 8, 8, 1536, 2304, 148),
    _table1("GPT 310.1B", 96, 16384, 128, 8, 16, 1920, 2160, 155),
    _table1("GPT 529.6B", 105, 20480, 128, 8, 35, 2520, 2520, 163),
    _table1("GPT 1008B", 128, 25600, 160, 8, 64, 3072, 3072, 163),
    Published("GPT 530B (SP + selective)", 105, 20480, 128, 8, 35, 2240, 2240, 0.542, "mfu", Recompute.SELECTIVE, True,
              "Korthikanti et al. MLSys 2023, abstract: MFU 54.2% on 2240 A100 (global batch 2240 assumed)"),
)


def layout_for(p: Published) -> Layout:
    dp = p.gpus // (p.tp * p.pp)
    return Layout(strategy=Strategy.HYBRID, dp=dp, tp=p.tp, pp=p.pp, global_batch_size=p.global_batch,
                  micro_batches=p.global_batch // dp, schedule=Schedule.ONE_F_ONE_B, zero=0,
                  recompute=p.recompute, sequence_parallel=p.sequence_parallel, precision=PRECISIONS["bf16"])


def compare_published(cluster: Cluster | None = None) -> list[dict]:
    """Each published figure beside the prediction on the A100 preset, with the signed error in %."""
    cluster = cluster or PRESETS["a100-80gb"]
    rows = []
    for p in PUBLISHED:
        model = model_spec(WorkloadConfig(name="transformer", layers=p.layers, hidden=p.hidden, heads=p.heads,
                                          seq_len=SEQ, vocab_size=VOCAB), megatron=True)
        pred = predict(model, layout_for(p), cluster)
        value = pred.step_time_s if p.unit == "s/iteration" else pred.mfu
        rows.append({"name": p.name, "gpus": p.gpus, "tp": p.tp, "pp": p.pp, "measured": p.measured,
                     "predicted": value, "unit": p.unit, "error_pct": (value - p.measured) / p.measured * 100,
                     "source": p.source})
    return rows
