"""The efficiencies the device presets carry, fitted to published rows: one GEMM efficiency per device
and one attention efficiency per device, each a physical constant every row shares (never a per-row or
per-source correction). The rows a fit uses are named in each function; every other source is held out."""

from __future__ import annotations

from dataclasses import replace
from itertools import product

from parbench.sim.fit import fit_alpha_beta
from parbench.sim.hardware import (
    BLACKWELL_ULTRA_SPEEDUP,
    HOPPER_FLASH3_OVER_FLASH2,
    PRESETS,
    Cluster,
)
from parbench.sim.model import architecture_spec
from parbench.sim.predict import predict
from parbench.sim.published import BIGSCIENCE, TABLE1, Published, compare_published
from parbench.sim.published_memory import (
    FOUNDRY,
    HELD_OUT_SOURCES,
    MOE_FIT_ROWS,
    _metric,
    runs,
)


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
    efficiency (the A100's comes from SC21 Table 1) and fits the attention efficiency alone, at most half the GEMM
    efficiency (causal flash attention executes half the FLOPs MFU counts: above that, MFU could pass the GEMM
    efficiency). torchtitan's tables, SC21 Table 2, MT-NLG and the Mixtral row are held out."""
    base = PRESETS[cluster]
    mine = [r for r in runs() if r.source == FOUNDRY and r.metric and r.cluster == cluster]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}

    def mae(gemm: float, attention: float) -> float:
        c = replace(base, gemm_efficiency=gemm, attention_efficiency=attention)
        return sum(abs(_metric(predict(specs[id(r)], r.layout, c), r) / r.value - 1) for r in mine) / len(mine)

    gemm, attention = base.gemm_efficiency, base.attention_efficiency
    for _ in range(rounds):
        g = best_efficiency(lambda e: mae(e, attention)) if fit_gemm else gemm
        a = min((e for e in (round(0.10 + 0.01 * i, 2) for i in range(41)) if 2 * e <= g), key=lambda e: mae(g, e))
        if (g, a) == (gemm, attention):
            break
        gemm, attention = g, a
    return gemm, attention


HOPPER_GRID = {"gemms": tuple(round(0.58 + 0.01 * i, 2) for i in range(13)), "attentions": (0.17, 0.19, 0.21, 0.23),
               "fp8_shares": (0.80, 0.85, 0.875, 0.90, 0.925, 0.95, 1.0)}
"""The grid ``fit_hopper_efficiencies`` searches: GEMM 0.58-0.70 by 0.01, attention 0.17-0.23 by 0.02, FP8 share
0.80-1.0 (364 points, about 90 s)."""


def h100_rows_grid(gemms: tuple[float, ...] = (0.55, 0.60, 0.65, 0.70),
                   attentions: tuple[float, ...] = (0.17, 0.19, 0.21, 0.23),
                   fp8_shares: tuple[float, ...] = (1.0,)) -> list[dict]:
    """The mean |error| of every published dense row with a metric on the H100's tensor cores (llm-foundry's,
    torchtitan's H100 and H200, Megatron-Bridge's 25.11 H100, NeMo's and the DGX Cloud tables' rows) at each point of a
    grid of (GEMM, attention) efficiencies and FP8 shares (``Cluster.fp8_gemm_share``), the Hopper kernel kept at
    ``HOPPER_FLASH3_OVER_FLASH2`` x the attention figure as the preset derives it; per source its mean and max
    |error| (``by_source``) and rows (``rows_by_source``)."""
    from parbench.sim.published_memory import MBRIDGE_LATER

    mine = [r for r in runs() if r.metric and PRESETS[r.cluster].peak_flops == PRESETS["h100-sxm"].peak_flops
            and not r.arch.experts  # dense: an MoE row's error is its experts' path, not these efficiencies
            and r.source not in (MBRIDGE_LATER, *HELD_OUT_SOURCES)]  # Megatron-Bridge's later tables are held out
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}
    out = []
    for gemm, attention, share in product(gemms, attentions, fp8_shares):
        errs: dict[str, list[float]] = {}
        for r in mine:
            base = PRESETS[r.cluster]
            c = replace(base, gemm_efficiency=gemm, attention_efficiency=attention, fp8_gemm_share=share,
                        attention_kernels={"flash3": HOPPER_FLASH3_OVER_FLASH2 * attention})
            errs.setdefault(r.source, []).append(abs(_metric(predict(specs[id(r)], r.layout, c), r) / r.value - 1) * 100)
        every = [e for v in errs.values() for e in v]
        out.append({"gemm": gemm, "attention": attention, "fp8_share": share, "mean_abs_error_pct": sum(every) / len(every),
                    "by_source": {k: (sum(v) / len(v), max(v)) for k, v in errs.items()},
                    "rows_by_source": {k: len(v) for k, v in errs.items()}})
    return out


def fit_hopper_efficiencies(grid: list[dict] | None = None) -> tuple[float, float, float]:
    """The H100's (GEMM efficiency, attention efficiency, FP8 share): the point of ``HOPPER_GRID`` (or of a
    given ``h100_rows_grid``) with the lowest mean |error| over every published dense row on the H100's tensor
    cores, each row weighing the same. One set of constants every row and source shares; how well a fit of this
    kind predicts a source it did not see is ``leave_one_source_out``'s."""
    best = min(grid or h100_rows_grid(**HOPPER_GRID), key=lambda g: g["mean_abs_error_pct"])
    return best["gemm"], best["attention"], best["fp8_share"]


def leave_one_source_out(grid: list[dict], baseline: tuple[float, float, float] = (0.65, 0.19, 1.0)) -> list[dict]:
    """Cross-validation of ``fit_hopper_efficiencies`` on ``h100_rows_grid``'s output: for each source held out,
    the grid point with the lowest mean |error| over every other source's rows (each row weighing the same), and
    that point's mean and max |error| on the held-out source beside the ``baseline`` point's (default: the pair
    llm-foundry's H100 rows alone give, ``fit_foundry_efficiencies``, FP8 at the BF16 share). A fit to more
    sources earns its place only if the sources it did not see come out better than the baseline predicts them."""
    def others_mean(g: dict, held: str) -> float:
        n = {k: v for k, v in g["rows_by_source"].items() if k != held}
        return sum(g["by_source"][k][0] * v for k, v in n.items()) / sum(n.values())

    fixed = next((g for g in grid if (g["gemm"], g["attention"], g["fp8_share"]) == baseline), None)
    if fixed is None:
        raise ValueError(f"the baseline (GEMM, attention, FP8 share) = {baseline} is not a point of the grid")
    out = []
    for held in fixed["by_source"]:
        best = min(grid, key=lambda g: others_mean(g, held))
        out.append({"held_out": held, "rows": fixed["rows_by_source"][held],
                    "fitted": (best["gemm"], best["attention"], best["fp8_share"]),
                    "held_out_mean_max_pct": best["by_source"][held], "baseline_mean_max_pct": fixed["by_source"][held]})
    return out


def overlap_interference_errors(values: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))) -> dict[float, float]:
    """The mean |error| of every published dense row with a metric (each source, each device) at each value of the
    GPU presets' ``overlap_interference``, every other constant kept. FSDP's and the distributed optimizer's
    gathers and reduce-scatters, DDP's all-reduces and the pipelines' sends all overlap compute in these rows.
    The rows added after the fit (``published_memory.HELD_OUT_SOURCES``, ``published.BIGSCIENCE``) are left out."""
    mine = [r for r in runs() if r.metric and not r.arch.experts and r.source not in (*HELD_OUT_SOURCES, BIGSCIENCE)]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}
    return {k: sum(abs(_metric(predict(specs[id(r)], r.layout, replace(PRESETS[r.cluster], overlap_interference=k)), r)
                       / r.value - 1) for r in mine) / len(mine) * 100 for k in values}


def fit_overlap_interference() -> float:
    """The GPU presets' ``overlap_interference`` on a 0.05 grid from 0 to 1 minimising ``overlap_interference_errors``.
    The rows pin it loosely: over the 148 rows, 0.45-0.60 lie within 0.06 points of the best."""
    errors = overlap_interference_errors()
    return min(errors, key=errors.get)


def fit_moe_expert_fixed_s() -> float:
    """The GPU presets' ``moe_expert_fixed_s`` on a 10 us grid from 0 to 1 ms minimising the mean |error| of the
    Megatron-Bridge rows named in ``MOE_FIT_ROWS`` (Qwen3-30B-A3B on 8 B200 and on 8 GB200), every other
    constant kept. The other Qwen3 rows (H100, Qwen3-235B-A22B) and the Megatron-LM Mixtral row are held out."""
    mine = [r for r in runs() if r.name in MOE_FIT_ROWS]
    assert len(mine) == len(MOE_FIT_ROWS), [r.name for r in mine]
    specs = {id(r): architecture_spec(r.arch, megatron=True) for r in mine}

    def mae(k: float) -> float:
        return sum(abs(_metric(predict(specs[id(r)], r.layout, replace(PRESETS[r.cluster], moe_expert_fixed_s=k)), r)
                       / r.value - 1) for r in mine) / len(mine)

    return min((round(1e-5 * i, 5) for i in range(101)), key=mae)


def same_layout_speedup(faster: str, slower: str) -> tuple[float, list[tuple[str, float]]]:
    """The mean ratio of published tokens/s per GPU over Megatron-Bridge's run pairs that differ in the system alone
    (cluster ``faster`` against ``slower``: same container, model, layout and precision), and each pair's name and
    ratio: ``BLACKWELL_ULTRA_SPEEDUP`` (DGX-B300 over DGX-B200, DGX-GB300 over DGX-GB200)."""
    from parbench.sim.published_memory import MBRIDGE, MBRIDGE_LATER

    bridge = [r for r in runs() if r.source in (MBRIDGE, MBRIDGE_LATER) and r.metric == "tps_per_gpu"]

    def key(r):
        return r.table.split(",")[0], r.arch, r.layout, r.notes[0]

    slow = {key(r): r for r in bridge if r.cluster == slower}
    pairs = [(r.name, r.value / slow[key(r)].value) for r in bridge if r.cluster == faster and key(r) in slow]
    if not pairs:
        raise ValueError(f"no published run pairs differ only in the system between {faster} and {slower}")
    return sum(ratio for _, ratio in pairs) / len(pairs), pairs


LAUNCH_BOUND = 1.5
"""A measured GEMM within this factor of the fastest one timed is bound by its launch, not its kernel, and
stays out of ``fit_gemm_curve``: on one H200 the 256-, 512- and 1024-wide square GEMMs read 21.6, 21.7 and
30.0 us, the time torch takes to launch one from the host (2048-wide: 38.2 us)."""


def fit_gemm_curve(rows: list[dict], peak_flops: float) -> dict:
    """A device's GEMM curve, t = fixed + flops / (efficiency x peak), fitted to measured bf16 GEMMs
    (``scripts/gpu_compute_check.py``'s rows: m, k, n, measured_s) by the calibration's least squares on
    relative error (``fit.fit_alpha_beta``); the launch-bound ones are left out (``LAUNCH_BOUND``), so
    ``rows`` must hold one small enough to show the launch floor (the check's 256-wide square)."""
    timed = [r for r in rows if r.get("dtype", "bf16") == "bf16"]
    floor = min(r["measured_s"] for r in timed)
    kept = [r for r in timed if r["measured_s"] >= LAUNCH_BOUND * floor]
    flops = [2.0 * r["m"] * r["k"] * r["n"] for r in kept]
    times = [r["measured_s"] for r in kept]
    fixed, per_flop = fit_alpha_beta(flops, times)
    if per_flop <= 0:  # the fit clamped the slope: no kept GEMM took longer for more flops (noise, or all launch-bound)
        raise ValueError(f"no efficiency to fit: the {len(kept)} GEMMs above the launch floor do not take longer "
                         f"with more flops ({', '.join(f'{t * 1e6:.1f} us' for t in times)})")
    worst = max(abs((fixed + per_flop * f) / t - 1) for f, t in zip(flops, times))
    return {"fixed_s": fixed, "efficiency": 1.0 / (per_flop * peak_flops), "gemms": len(kept),
            "left_out_launch_bound": len(timed) - len(kept), "max_error_pct": worst * 100}


HOPPER_PRESETS = ("h100-sxm", "h100-96gb", "h200-sxm", "h800-sxm", "b200", "gb200-nvl72")
"""The presets that carry the H100's fitted pair (the Blackwell ones inherit it, nothing refitted)."""


HOPPER_NEIGHBOURHOOD = {"gemms": (0.65, 0.66, 0.67, 0.68, 0.69), "attentions": (0.17, 0.19, 0.21),
                        "fp8_shares": (0.85, 0.875, 0.90, 0.95)}
"""The part of ``HOPPER_GRID`` around the presets' point that ``gemm_overhead_grid`` refits on (60 points)."""


def gemm_overhead_grid(overheads: tuple[float, ...] = (0.0, 5e-6, 10e-6, 15e-6, 22e-6),
                       grid: dict | None = None) -> list[dict]:
    """A check, not a fit: for each fixed cost per GEMM on the Hopper and Blackwell presets, the H100's (GEMM,
    attention, FP8 share) refitted over every H100 row (``fit_hopper_efficiencies`` on ``grid``, default
    ``HOPPER_NEIGHBOURHOOD``; ``set_hopper_efficiencies``) and every source's mean |error| with it. The presets are
    swapped for the duration of each step and restored."""
    from parbench.sim.published import compare_published, per_source
    from parbench.sim.published_memory import compare_runs, summarize_by_source

    saved = dict(PRESETS)
    out = []
    try:
        for overhead in overheads:
            for n in (*HOPPER_PRESETS, *BLACKWELL_ULTRA_SPEEDUP):
                PRESETS[n] = replace(saved[n], gemm_overhead_s=overhead)
            gemm, attention, share = fit_hopper_efficiencies(h100_rows_grid(**(grid or HOPPER_NEIGHBOURHOOD)))
            set_hopper_efficiencies(gemm, attention, share)
            means = {s["source"]: s["metric_mean_abs_error_pct"] for s in summarize_by_source(compare_runs())
                     if s["metric_mean_abs_error_pct"] is not None}
            means.update({s["source"]: s["mean_abs_error_pct"] for s in per_source(compare_published())})
            out.append({"gemm_overhead_s": overhead, "gemm": gemm, "attention": attention, "fp8_share": share,
                        "mean_abs_error_pct": means})
    finally:
        PRESETS.update(saved)
    return out


A100_PRESETS = ("a100-80gb", "jean-zay-a100", "a100-40gb", "a800-80gb")
"""The presets that carry the A100's fitted GEMM and attention efficiencies."""

SPREAD_HOPPER_GRID = {"gemms": tuple(round(0.63 + 0.01 * i, 2) for i in range(9)), "attentions": (0.17, 0.19, 0.21),
                      "fp8_shares": (0.85, 0.875, 0.90)}
"""The part of ``HOPPER_GRID`` (widened to 0.71) that ``rank_spread_errors`` refits the H100 on at each spread."""


def refit_efficiencies(grid: dict | None = None) -> dict[str, tuple[float, ...]]:
    """Refit, in place, every efficiency the presets carry from published rows at the presets' other constants:
    the A100's GEMM efficiency (``fit_gemm_efficiency``), then its attention efficiency
    (``fit_foundry_efficiencies``), then the H100's (GEMM, attention, FP8 share) (``fit_hopper_efficiencies`` on
    ``grid``, default ``SPREAD_HOPPER_GRID``), which the Hopper and Blackwell presets take (Blackwell Ultra's x its
    ``BLACKWELL_ULTRA_SPEEDUP``; ``set_hopper_efficiencies``). Returns what was fitted."""
    gemm = fit_gemm_efficiency()
    for n in A100_PRESETS:
        PRESETS[n] = replace(PRESETS[n], gemm_efficiency=gemm)
    attention = fit_foundry_efficiencies("a100-80gb", fit_gemm=False)[1]
    for n in A100_PRESETS:
        PRESETS[n] = replace(PRESETS[n], attention_efficiency=attention)
    h100 = fit_hopper_efficiencies(h100_rows_grid(**(grid or SPREAD_HOPPER_GRID)))
    set_hopper_efficiencies(*h100)
    return {"a100": (gemm, attention), "h100": h100}


def set_hopper_efficiencies(gemm: float, attention: float, share: float) -> None:
    """Give the Hopper and Blackwell presets (``HOPPER_PRESETS``) the H100's (GEMM, attention, FP8 share), in
    place, FlashAttention-2 at the attention figure and the Hopper kernel at ``HOPPER_FLASH3_OVER_FLASH2`` x it,
    as the presets derive them; Blackwell Ultra's take them x its ``BLACKWELL_ULTRA_SPEEDUP``."""
    kernels = {"flash2": attention, "flash3": round(attention * HOPPER_FLASH3_OVER_FLASH2, 2)}
    for n in HOPPER_PRESETS:
        PRESETS[n] = replace(PRESETS[n], gemm_efficiency=gemm, attention_efficiency=attention, fp8_gemm_share=share,
                             attention_kernels=kernels)
    for n, f in BLACKWELL_ULTRA_SPEEDUP.items():
        PRESETS[n] = replace(PRESETS[n], gemm_efficiency=round(gemm * f, 2), attention_efficiency=round(attention * f, 2),
                             fp8_gemm_share=share, attention_kernels={k: round(v * f, 2) for k, v in kernels.items()})


RANK_SPREADS = tuple(round(0.002 * i, 3) for i in range(13))
"""The grid ``fit_rank_spread`` searches: 0 to 2.4% by 0.2%."""


def rank_spread_errors(spreads: tuple[float, ...] = RANK_SPREADS, grid: dict | None = None) -> dict[float, dict]:
    """For each spread of the devices' speed (``Cluster.rank_spread``, set on every GPU preset): the efficiencies
    refitted at it (``refit_efficiencies``) and the mean |error| of the rows ``overlap_interference_errors`` weighs
    (every published dense row with a metric but the held-out sources') at the presets' interference. A spread
    slows every step by its slowest device, more the more devices, so it trades with the efficiencies: it is fitted
    with them, never at fixed ones. The presets are swapped for the duration and restored."""
    saved = dict(PRESETS)
    out = {}
    try:
        for spread in spreads:
            PRESETS.update({n: replace(c, rank_spread=spread) for n, c in saved.items()})
            fitted = refit_efficiencies(grid)
            interference = PRESETS["h100-sxm"].overlap_interference
            out[spread] = {**fitted, "mean_abs_error_pct": overlap_interference_errors((interference,))[interference]}
    finally:
        PRESETS.update(saved)
    return out


def fit_rank_spread(spreads: tuple[float, ...] = RANK_SPREADS) -> float:
    """The point of ``spreads`` whose ``rank_spread_errors`` is least. The GPU presets' ``rank_spread`` is read off
    these errors; where two points lie within what the rows resolve (0.001 points), the presets keep theirs (the
    source the presets cite for it says which and why)."""
    errors = rank_spread_errors(spreads)
    return min(errors, key=lambda s: errors[s]["mean_abs_error_pct"])
