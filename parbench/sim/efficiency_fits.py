"""The efficiencies the device presets carry, fitted to published rows: one GEMM efficiency per device
and one attention efficiency per device, each a physical constant every row shares (never a per-row or
per-source correction). The rows a fit uses are named in each function; every other source is held out."""

from __future__ import annotations

from dataclasses import replace

from parbench.sim.hardware import HOPPER_FLASH3_OVER_FLASH2, PRESETS, Cluster
from parbench.sim.model import architecture_spec
from parbench.sim.predict import predict
from parbench.sim.published import TABLE1, Published, compare_published
from parbench.sim.published_memory import FOUNDRY, _metric, runs


def best_efficiency(mae) -> float:
    """The GEMM efficiency on a 0.01 grid from 0.40 to 0.95 that minimises ``mae(efficiency)``."""
    return min((round(0.40 + 0.01 * i, 2) for i in range(56)), key=mae)


def fit_gemm_efficiency(rows: tuple[Published, ...] = TABLE1, cluster: Cluster | None = None) -> float:
    """The device's GEMM efficiency (a physical constant every row shares) minimising the mean |error| over
    ``rows``: how the A100 preset's figure was obtained from SC21 Table 1, with Table 2 and MT-NLG held out."""
    base = cluster or PRESETS["a100-80gb"]

    def mae(e: float) -> float:
        errs = [abs(r["error_pct"]) for r in compare_published(replace(base, gemm_efficiency=e), rows)]
        return sum(errs) / len(errs)

    return best_efficiency(mae)


def fit_foundry_efficiencies(cluster: str = "h100-sxm", *, fit_gemm: bool = True, rounds: int = 4) -> tuple[float, float]:
    """(GEMM, attention) efficiencies of a preset: the pair minimising the mean |error| of llm-foundry's
    rows on ``cluster`` (their MFU), by coordinate descent on 0.01 grids (each round fits one with the
    other fixed, from the preset's pair, until neither moves). ``fit_gemm=False`` keeps the preset's GEMM
    efficiency (the A100's comes from SC21 Table 1) and fits the attention efficiency alone. torchtitan's
    tables, SC21 Table 2, MT-NLG and the Mixtral row are held out."""
    base = PRESETS[cluster]
    mine = [r for r in runs() if r.source == FOUNDRY and r.metric and r.cluster == cluster]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}

    def mae(gemm: float, attention: float) -> float:
        c = replace(base, gemm_efficiency=gemm, attention_efficiency=attention)
        return sum(abs(_metric(predict(specs[id(r)], r.layout, c), r) / r.value - 1) for r in mine) / len(mine)

    gemm, attention = base.gemm_efficiency, base.attention_efficiency
    for _ in range(rounds):
        g = best_efficiency(lambda e: mae(e, attention)) if fit_gemm else gemm
        a = min((round(0.10 + 0.01 * i, 2) for i in range(41)), key=lambda e: mae(g, e))
        if (g, a) == (gemm, attention):
            break
        gemm, attention = g, a
    return gemm, attention


def h100_rows_grid(gemms: tuple[float, ...] = (0.55, 0.60, 0.65, 0.70),
                   attentions: tuple[float, ...] = (0.17, 0.19, 0.21, 0.23)) -> list[dict]:
    """A check, not a fit: the mean |error| of every published row with a metric on the H100's tensor cores
    (llm-foundry, which the presets' pair is fitted on, and the held-out torchtitan H100 and H200, Megatron-Bridge
    H100 and NeMo rows) over a grid of (GEMM,
    attention) efficiencies, the Hopper kernel kept at ``HOPPER_FLASH3_OVER_FLASH2`` x the attention figure as the preset derives it."""
    mine = [r for r in runs() if r.metric and PRESETS[r.cluster].peak_flops == PRESETS["h100-sxm"].peak_flops]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}
    out = []
    for gemm in gemms:
        for attention in attentions:
            errs: dict[str, list[float]] = {}
            for r in mine:
                c = replace(PRESETS[r.cluster], gemm_efficiency=gemm, attention_efficiency=attention,
                            attention_kernels={"flash3": HOPPER_FLASH3_OVER_FLASH2 * attention})
                errs.setdefault(r.source, []).append(abs(_metric(predict(specs[id(r)], r.layout, c), r) / r.value - 1) * 100)
            every = [e for v in errs.values() for e in v]
            out.append({"gemm": gemm, "attention": attention, "mean_abs_error_pct": sum(every) / len(every),
                        "by_source": {k: (sum(v) / len(v), max(v)) for k, v in errs.items()}})
    return out


def fit_overlap_interference() -> float:
    """The GPU presets' ``overlap_interference`` on a 0.05 grid from 0 to 1 minimising the mean |error| of
    llm-foundry's rows (both devices: FSDP, whose all-gathers and reduce-scatters overlap nearly all of their
    traffic), each device's efficiencies kept. torchtitan's tables and every other source are held out."""
    mine = [r for r in runs() if r.source == FOUNDRY and r.metric]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}

    def mae(k: float) -> float:
        return sum(abs(_metric(predict(specs[id(r)], r.layout, replace(PRESETS[r.cluster], overlap_interference=k)), r)
                       / r.value - 1) for r in mine) / len(mine)

    return min((round(0.05 * i, 2) for i in range(21)), key=mae)
