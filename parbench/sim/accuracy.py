"""How far the simulator is from published runs like the one asked for.

A prediction is only as good as the model is on layouts of its kind. Every published row that
``parbench validate --published`` checks, that ran on the same tensor cores (the same dense BF16 peak: an
H100 SXM, the 96 GB H100 and the H200 share one) and whose model is of the same kind (dense, or a mixture of
experts, whose error the experts' path sets) is a candidate; the ones nearest to the asked-for layout, by
the traits that move the model's error most (the GEMM precision, the tensor-, pipeline-, context- and
expert-parallel degrees, interleaving, the model's scale, the sequence and the GPU count), are predicted on
their own presets and shown with their step-time error. Nothing is
fitted or corrected here: the errors are the ones ``validate --published`` reports for those rows.

Published rows the model cannot tell apart (one architecture, layout and device, so one prediction) are
listed with the least error any model of those inputs must make on one of them (``indistinct_runs``).

What a layout search needs most is the order of two layouts of one job, not either's absolute time. Published
rows of one model on one device and GPU count in two layouts (or precisions) are such pairs: ``layout_pairs``
says for each which one trained faster and whether the model predicts the same one faster.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from parbench.sim.architecture import Architecture
from parbench.sim.hardware import PRESETS, Cluster
from parbench.sim.layout import Layout
from parbench.sim.model import ModelSpec
from parbench.sim.software import SOFTWARE_FIELDS, software_of

NEAREST = 3
"""Published rows shown beside a prediction."""

WEIGHTS = {"precision": 1.0, "tp": 1.0, "pp": 1.0, "cp": 1.0, "ep": 1.0, "interleaved": 0.5,
           "scale": 0.5, "seq": 0.5, "gpus": 0.25}
"""Distance weights: FP8 against BF16 counts one, as does each factor of two in a parallel degree counts one, in the model's scale (layers x hidden^2)
or sequence half, in the GPU count a quarter (the published errors change little along scaling series)."""


@dataclass(frozen=True)
class Nearby:
    """One published row near the asked-for layout, predicted on its own preset."""

    source: str
    table: str
    name: str
    cluster: str
    gpus: int
    distance: float
    published_step_s: float
    predicted_step_s: float
    software: str = ""
    """The ``parbench simulate`` flags (``--software`` ...) that give the row's layout its software-set fields ('' where
    none gives all of them: ``software_of``)."""
    differs: tuple[str, ...] = ()
    """The software-set layout fields (``SOFTWARE_FIELDS``) in which the asked-for layout differs from the row's."""
    simulate: str = ""
    """The row's own ``parbench simulate`` arguments (``reproduce.simulate_args``); '' where not asked for or where
    the command cannot state the row."""

    @property
    def error_pct(self) -> float:
        """Step time, predicted against published, in % (positive: the model is slower than the run was)."""
        return (self.predicted_step_s / self.published_step_s - 1) * 100


def traits(arch: Architecture | None, layout: Layout) -> dict[str, float]:
    """What the distance compares, as numbers (log2 of each size, 0/1 flags), and ``moe``, the kind that must
    match; a model without an architecture (the runner's MLP) counts as one dense layer of width 1."""
    layers, hidden, seq = (arch.layers, arch.hidden, arch.seq_len) if arch is not None else (1, 1, 1)
    return {"moe": float(bool(arch is not None and arch.experts)),
            "precision": float(layout.precision.gemm_dtype == "fp8"),
            "tp": math.log2(layout.tp), "pp": math.log2(layout.pp), "cp": math.log2(layout.cp),
            "ep": math.log2(layout.ep), "interleaved": float(layout.virtual_stages > 1),
            "scale": math.log2(layers * hidden * hidden), "seq": math.log2(seq), "gpus": math.log2(layout.world_size)}


def distance(a: dict[str, float], b: dict[str, float]) -> float:
    return sum(w * abs(a[k] - b[k]) for k, w in WEIGHTS.items())


def nearest_published(model: ModelSpec, layout: Layout, cluster: Cluster, k: int = NEAREST,
                      build_row: Callable[[list[str]], tuple] | None = None) -> list[Nearby]:
    """The ``k`` published rows nearest to (model, layout) among those of its kind (dense or a mixture of
    experts) run on ``cluster``'s tensor cores, nearest first (ties by name); [] where none ran on such a
    device (a CPU, a profile of another peak) or none of its kind did. With ``build_row`` (``parbench simulate``'s
    own builder, ``commands.simulate.command_layout``) each row carries its own command line."""
    import shlex

    from parbench.sim.published_memory import step_times_s, timed_runs
    from parbench.sim.reproduce import simulate_args

    mine = traits(model.arch, layout)
    rows = [r for r in timed_runs() if PRESETS[r.cluster].peak_flops == cluster.peak_flops
            and traits(r.arch, r.layout)["moe"] == mine["moe"]]
    ranked = sorted(rows, key=lambda r: (distance(mine, traits(r.arch, r.layout)), r.name))[:k]
    out = []
    for r in ranked:
        published, predicted = step_times_s(r)
        out.append(Nearby(source=r.source, table=r.table, name=r.name, cluster=r.cluster, gpus=r.layout.world_size,
                          distance=distance(mine, traits(r.arch, r.layout)), published_step_s=published,
                          predicted_step_s=predicted, software=software_of(r.layout, moe=bool(mine["moe"])),
                          differs=tuple(f for f in SOFTWARE_FIELDS if getattr(layout, f) != getattr(r.layout, f)
                                        and (mine["moe"] or f != "moe_saved_outputs")),
                          simulate=shlex.join(simulate_args(r, build_row) or []) if build_row else ""))
    return out


def nearest_lines(rows: list[Nearby], cluster: Cluster) -> list[str]:
    """The table's lines for ``rows``: each row's error, name and source, or why there are none."""
    if not rows:
        return [(f"  published runs   none of this model's kind on a device of this one's {cluster.peak_flops / 1e12:.4g} "
                "TFLOP/s peak; `parbench validate` compares the runs measured here")]
    lines = [("  nearest published runs (same tensor cores), step time predicted vs published; all of them: "
             "parbench validate --published")]
    lines += [f"    {r.error_pct:+6.1f}%  {r.name}  ({r.source}, {r.table})" for r in rows]
    for software, differs in dict.fromkeys((r.software, r.differs) for r in rows if r.differs):
        ran = [r for r in rows if (r.software, r.differs) == (software, differs)]
        which = "they" if len(ran) == len(rows) else ", ".join(f"{rows.index(r) + 1}." for r in ran)
        how = f" ran as `{software}`;" if software else ""
        lines.append(f"    {which}{how} this layout differs from {'theirs' if len(ran) > 1 else 'its'} in "
                     f"{', '.join(differs)}")
    if rows[0].simulate:
        lines.append(f"    the nearest, as it ran: parbench simulate {rows[0].simulate}")
    return lines


@dataclass(frozen=True)
class Indistinct:
    """Published runs the model cannot tell apart: one architecture, layout and device, so one prediction."""

    names: tuple[str, ...]
    sources: tuple[str, ...]
    tables: tuple[str, ...]
    published_step_s: tuple[float, ...]
    predicted_step_s: float

    @property
    def spread_pct(self) -> float:
        """How much longer the slowest published step is than the fastest, in %."""
        return (max(self.published_step_s) / min(self.published_step_s) - 1) * 100

    @property
    def floor_pct(self) -> float:
        """The least worst |error| any single prediction can have over these runs: for steps a < b no prediction
        is within (b - a) / (a + b) of both (the step's harmonic-mean point balances the two errors)."""
        lo, hi = min(self.published_step_s), max(self.published_step_s)
        return (hi - lo) / (hi + lo) * 100


def source_floors(groups: list[Indistinct]) -> dict[str, float]:
    """Per source, the max |error| in % that no model of these inputs can get under on its own rows: within one
    ``indistinct_runs`` group, the floor of that source's rows alone (``Indistinct.floor_pct``), the largest over
    its groups. The same floor holds on a rate (tokens/s, MFU) as on the step: for steps a < b, (b - a) / (a + b) =
    (1/a - 1/b) / (1/a + 1/b). Sources with no two such rows are absent: nothing bounds them."""
    out: dict[str, float] = {}
    for g in groups:
        for source in set(g.sources):
            steps = tuple(s for src, s in zip(g.sources, g.published_step_s) if src == source)
            if len(steps) > 1:
                floor = Indistinct((), (), (), steps, 0.0).floor_pct
                out[source] = max(out.get(source, 0.0), floor)
    return out


SOURCE_MEAN_TARGET_PCT = 5.0
SOURCE_MAX_TARGET_PCT = 12.0
"""The accuracy the simulator is held to on each published source: a mean |error| of at most 5% over the source's
rows and a max of at most 12% (the max bounded below by the source's own floor, ``source_floors``)."""


def source_targets(sources: list[tuple[str, float, float]]) -> dict:
    """Which sources meet both per-source targets, from (source, mean |error| %, max |error| %) triples: the names
    that do, in order, and for each that does not, its two figures and which target it misses."""
    met, missed = [], []
    for name, mean, worst in sources:
        misses = [k for k, v, target in (("mean", mean, SOURCE_MEAN_TARGET_PCT), ("max", worst, SOURCE_MAX_TARGET_PCT))
                  if v > target]
        if misses:
            missed.append({"source": name, "mean_abs_error_pct": mean, "max_abs_error_pct": worst, "misses": misses})
        else:
            met.append(name)
    return {"mean_target_pct": SOURCE_MEAN_TARGET_PCT, "max_target_pct": SOURCE_MAX_TARGET_PCT, "met": met,
            "missed": missed}


def indistinct_runs() -> list[Indistinct]:
    """Groups of published rows with a metric whose inputs to the model are the same (the architecture but for its
    name, the layout, the device preset), largest spread first. Each group is either two sources disagreeing on
    one run, which bounds what any model of these inputs can reach on them (``Indistinct.floor_pct``), or a
    difference the published rows make and the layout does not describe."""
    from dataclasses import replace

    from parbench.sim.published_memory import step_times_s, timed_runs

    groups: dict[str, list] = {}
    for r in timed_runs():
        groups.setdefault(repr((replace(r.arch, name=""), r.layout, r.cluster)), []).append(r)
    out = []
    for rows in groups.values():
        if len(rows) < 2:
            continue
        steps = [step_times_s(r) for r in rows]
        out.append(Indistinct(names=tuple(r.name for r in rows), sources=tuple(r.source for r in rows),
                              tables=tuple(r.table for r in rows), published_step_s=tuple(p for p, _ in steps), predicted_step_s=steps[0][1]))
    return sorted(out, key=lambda g: -g.spread_pct)


PRECISION_FIELDS = {"precision", "te_fp8", "fp8_scaling", "fp8_all_gather"}
PAIR_MARGIN_PCT = 5.0
"""Published pairs closer than this are not counted as ordered or misordered: 5% is the mean |error| per source
the model is held to, and a model within it may put such a pair either way round."""


@dataclass(frozen=True)
class LayoutPair:
    """Two published runs of one model (its architecture but for its name) on one device preset and GPU count in
    two layouts: which one trained faster, as published and as predicted. Rate: tokens per second (global batch
    x sequence over the step), so runs of two global batches compare too."""

    faster: str
    """The run published faster."""
    slower: str
    sources: tuple[str, str]
    """The faster run's source, the slower one's."""
    published_ratio: float
    """The faster run's rate over the slower one's, as published (>= 1)."""
    predicted_ratio: float
    """The same two runs' rates, predicted, in the same order: above 1 where the model orders them as published."""
    differs: tuple[str, ...]
    """The ``Layout`` fields the two runs differ in."""

    @property
    def precision_only(self) -> bool:
        """The runs differ in their GEMMs' precision alone (and Transformer Engine's FP8 flag, the FP8 recipe and
        whether the FP8 weights are gathered as such, which go with it)."""
        return set(self.differs) <= PRECISION_FIELDS

    @property
    def ordered(self) -> bool:
        return self.predicted_ratio > 1

    @property
    def decided(self) -> bool:
        """Published more than ``PAIR_MARGIN_PCT`` apart."""
        return (self.published_ratio - 1) * 100 > PAIR_MARGIN_PCT


def layout_pairs() -> list[LayoutPair]:
    """Every pair of published runs with a metric that share a model, device preset and GPU count and differ in
    layout (runs with one layout as well are ``indistinct_runs``); misordered pairs first, then the widest apart."""
    from dataclasses import fields, replace

    from parbench.sim.published_memory import step_times_s, timed_runs

    groups: dict[str, list] = {}
    for r in timed_runs():
        groups.setdefault(repr((replace(r.arch, name=""), r.cluster, r.layout.world_size)), []).append(r)
    names = [f.name for f in fields(Layout)]
    out = []
    for rows in groups.values():
        rates = []
        for r in rows:
            tokens = r.layout.global_batch_size * r.arch.seq_len
            published, predicted = step_times_s(r)
            rates.append((r, tokens / published, tokens / predicted))
        for i, (a, pub_a, pred_a) in enumerate(rates):
            for b, pub_b, pred_b in rates[i + 1:]:
                if a.layout == b.layout:
                    continue
                (fast, pub_f, pred_f), (slow, pub_s, pred_s) = sorted(
                    ((a, pub_a, pred_a), (b, pub_b, pred_b)), key=lambda t: -t[1])
                differs = tuple(n for n in names if getattr(a.layout, n) != getattr(b.layout, n))
                out.append(LayoutPair(faster=fast.name, slower=slow.name, sources=(fast.source, slow.source),
                                      published_ratio=pub_f / pub_s, predicted_ratio=pred_f / pred_s,
                                      differs=differs))
    return sorted(out, key=lambda p: (p.ordered or not p.decided, p.ordered, -p.published_ratio))


def pair_summary(pairs: list[LayoutPair]) -> dict[str, int]:
    """How many pairs are published more than ``PAIR_MARGIN_PCT`` apart (``decided``: those differing in precision
    alone, ``precision``, and the others, ``layout``) and closer (``close``), and how many of each the model
    orders as published (``*_ordered``)."""
    kinds = {"decided": [p for p in pairs if p.decided],
             "precision": [p for p in pairs if p.decided and p.precision_only],
             "layout": [p for p in pairs if p.decided and not p.precision_only],
             "close": [p for p in pairs if not p.decided]}
    return {key: n for kind, rows in kinds.items()
            for key, n in ((kind, len(rows)), (f"{kind}_ordered", sum(p.ordered for p in rows)))}
