"""Layout search: enumerate (dp, tp, pp, cp, micro-batch, schedule, virtual stages, ZeRO stage and HSDP
replicas, recompute), reject layouts that break a rule or do not fit in memory (with the reason), rank the rest
by predicted throughput, and extract the throughput-vs-memory Pareto front."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import groupby
from collections.abc import Callable, Iterator

from parbench.config import Schedule, Strategy
from parbench.sim.hardware import Cluster
from parbench.sim.layout import PRECISIONS, Framework, Layout, Precision, Recompute
from parbench.sim.model import ModelSpec
from parbench.sim.predict import Prediction, memory_shortfall, predict, ranks_memory
from parbench.sim.stages import account_for_ends

MICRO_BATCH_SIZES = (1, 2, 4, 8)
VIRTUAL_STAGES = (2, 4)
"""Virtual stages the search tries on any pipeline, chunks equal or not (torch's pipelining splits unevenly, the
earlier chunks taking the remainder). Beside them it tries every count that splits the layers into equal chunks
(``virtual_stage_options``)."""
CP_MIN_TOKENS = 4096
"""The search's context-parallel degrees leave each rank at least this many tokens of a sequence: the published
recipes split no finer (NVIDIA's DGX Cloud recipes run Llama 3.1 8B, 70B and 405B at 8192 tokens over cp 2; Meta's
long-context stage of Llama 3 405B, 131072 tokens over cp 16, 8192 a rank: Dubey et al. 2024, "The Llama 3 Herd of
Models"). A bound of the search space, not of the model: ``--cp`` fixes any degree."""


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    prediction: Prediction | None
    """None where the layout was rejected before its step was predicted (it does not fit, or is not a layout)."""
    reason: str = ""
    """Why the layout was rejected ('' when feasible)."""
    peak_memory_bytes: float = 0.0
    """The busiest rank's memory, also where the layout does not fit."""

    @property
    def feasible(self) -> bool:
        return not self.reason


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """What the search may vary: a field left None is enumerated, a value fixes it."""

    precision: Precision
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    cp: int | None = None
    """Context-parallel degree; None: every degree that divides the GPUs, splits the sequence into 2 x cp chunks
    and leaves each rank ``CP_MIN_TOKENS`` or more (1 for models without attention)."""
    micro_batch: int | None = None
    schedule: Schedule | None = None
    virtual_stages: int | None = None
    zero: int | None = None
    recompute: Recompute | None = None
    recompute_every: int = 1
    recompute_modules: tuple[str, ...] = ()
    """Megatron-Core's module recomputation (``Layout.recompute_modules``), on every layout whose ``recompute`` is
    none or selective (full and ops replay those modules anyway)."""
    sequence_parallel: bool | None = None
    replicate: int | None = None
    """HSDP replicas under ZeRO-3 (``Layout.replicate``); None: every divisor of dp x cp but dp x cp itself (a shard
    group of one rank shards nothing), 1 under ZeRO 0-2."""
    attention: str = "flash"
    fp8_all_gather: bool | None = None
    ep: int | None = None
    """Expert-parallel degree (MoE models); None: every degree ``_ep_options`` allows."""
    expert_tp: int | None = None
    """``Layout.expert_tp`` (MoE models): None tries both where tp > 1, experts tensor-parallel (0) and whole (1)."""
    moe_imbalance: float = 1.0
    moe_a2a_overlap: bool = False
    """Megatron-Core's combined 1F1B (``Layout.moe_a2a_overlap``) on every layout it applies to: ep > 1, and an
    interleaved schedule where pp > 1."""
    tp_comm_overlap: bool = False
    """Tensor-parallel collectives overlapped with their GEMMs in every layout with tp > 1 (also where the
    framework overlaps them)."""
    framework: Framework = Framework()
    """How the training software runs every layout (kernels, FP8 module, overlaps, DeepSpeed's pipeline)."""
    account_for_ends: bool = False
    """Pipelines split as Megatron-LM's ``account_for_embedding/loss_in_pipeline_split`` (``stages.account_for_ends``);
    a pipeline whose blocks + 2 do not fill its chunks evenly is refused."""




def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layout_violations(model: ModelSpec, layout: Layout, cluster: Cluster) -> list[str]:
    """The rules every layout must keep (single-layout mode and the search apply the same ones):
    tensor parallelism stays inside a node (Narayanan et al. 2021, takeaway 1) and divides the heads,
    the key/value heads (or is a multiple of them) and the width; interleaving needs two or more pipeline stages;
    every pipeline chunk holds a layer;
    context parallelism's load-balanced ring splits the sequence into 2 x cp chunks;
    on a CPU profile of ranks of several threads, the ranks' threads fit the cores (``Cluster.with_threads``)."""
    out, t = [], layout.tp
    if cluster.threads > 1 and layout.world_size * cluster.threads > cluster.cores:
        out.append(f"{layout.world_size} ranks x {cluster.threads} threads > {cluster.cores} cores: threads beyond the "
                   "cores wait on each other's spinning, which the profile did not measure")
    if t > cluster.gpus_per_node:
        out.append(f"tp={t} spans more than one node ({cluster.gpus_per_node} GPUs per node)")
    if model.arch is not None:
        arch = model.arch
        if arch.heads % t or arch.hidden % t:
            out.append(f"tp={t} does not divide heads={arch.heads} and hidden={arch.hidden}")
        elif arch.n_kv_heads % t and t % arch.n_kv_heads:
            out.append(f"tp={t} and kv_heads={arch.n_kv_heads}: neither divides the other")
        if layout.cp > 1 and model.seq_len % (2 * layout.cp):
            out.append(f"cp={layout.cp}: seq={model.seq_len} is not divisible by 2 x cp = {2 * layout.cp}")
        if layout.sequence_parallel and model.seq_len % t:
            out.append(f"sequence_parallel: tp={t} does not divide seq={model.seq_len}")
    elif t > 1 and model.name == "mlp" and model.hidden % t:
        out.append(f"tp={t} does not divide hidden={model.hidden}")
    experts = model.arch.experts if model.arch is not None else 0
    if layout.ep > 1 and (not experts or experts % layout.ep):
        out.append(f"ep={layout.ep} does not divide experts={experts}")
    if layout.whole_experts and not experts:
        out.append("expert_tp=1 holds routed experts whole: the model has none")
    if layout.interleaved and layout.pp == 1:
        out.append("schedule interleaved1f1b needs pp > 1 (one stage has no pipeline bubble to shrink)")
    elif layout.virtual_stages > 1 and layout.pp == 1:
        out.append(f"virtual_stages={layout.virtual_stages} needs pp > 1 and schedule interleaved1f1b (one stage "
                   "holds the whole model)")
    if layout.chunks > model.blocks and not layout.chunk_layers:
        out.append(f"pp x virtual stages = {layout.pp} x {layout.v} = {layout.chunks} > layers={model.blocks}")
    if layout.chunk_layers and sum(layout.chunk_layers) != len(model.units):
        mtp = len(model.units) - model.blocks
        out.append(f"the pipeline layout's chunks hold {sum(layout.chunk_layers)} layers, the model {len(model.units)}"
                   + (f" ({model.blocks} blocks t and {mtp} multi-token-prediction layer(s) m, written before the last "
                      f"chunk's L)" if mtp else ""))
    return out


def layouts(model: ModelSpec, cluster: Cluster, *, gpus: int, global_batch: int,
            options: SearchOptions) -> Iterator[tuple[Layout | None, str]]:
    """Every combination, as (layout, '') or (None, reason) for combinations that break a rule."""
    o = options
    for cp in [o.cp] if o.cp else cp_options(model, gpus):
        if gpus % cp:
            yield None, f"cp={cp} does not divide gpus={gpus}"
            continue
        yield from _cp_layouts(model, cluster, gpus=gpus, cp=cp, global_batch=global_batch, o=o)


def cp_options(model: ModelSpec, gpus: int) -> list[int]:
    """Context-parallel degrees the search tries: divisors of the GPUs whose load-balanced ring splits the
    sequence into 2 x cp equal chunks and leaves every rank ``CP_MIN_TOKENS`` or more (1 without attention)."""
    seq = model.seq_len if model.arch is not None else 0
    return [c for c in _divisors(gpus) if c == 1 or (seq % (2 * c) == 0 and seq // c >= CP_MIN_TOKENS)]


def _cp_layouts(model: ModelSpec, cluster: Cluster, *, gpus: int, cp: int, global_batch: int,
                o: SearchOptions) -> Iterator[tuple[Layout | None, str]]:
    for tp in [o.tp] if o.tp else _tp_options(model, cluster, gpus // cp):
        if (gpus // cp) % tp:
            yield None, f"tp={tp} does not divide gpus / cp = {gpus // cp}"
            continue
        for pp in [o.pp] if o.pp else _divisors(gpus // (cp * tp)):
            if (gpus // (cp * tp)) % pp:
                yield None, f"pp={pp} does not divide gpus / (cp x tp) = {gpus // (cp * tp)}"
                continue
            dp = gpus // (cp * tp * pp)
            if o.dp and dp != o.dp:
                yield None, f"--dp {o.dp}: tp={tp} x pp={pp} x cp={cp} leaves dp={dp}"
                continue
            if pp > model.blocks:
                yield None, f"pp={pp} > layers={model.blocks}"
                continue
            if global_batch % dp:
                yield None, f"global_batch={global_batch} not divisible by dp={dp}"
                continue
            yield from _micro_layouts(model, cluster, tp=tp, pp=pp, cp=cp, dp=dp, global_batch=global_batch, o=o)


def _tp_options(model: ModelSpec, cluster: Cluster, gpus: int) -> list[int]:
    heads = model.arch.heads if model.arch else model.heads
    return [t for t in _divisors(gpus) if t <= cluster.gpus_per_node and heads % t == 0 and model.hidden % t == 0]


def _micro_layouts(model: ModelSpec, cluster: Cluster, *, tp: int, pp: int, cp: int, dp: int, global_batch: int,
                   o: SearchOptions) -> Iterator[tuple[Layout | None, str]]:
    per_replica = global_batch // dp
    for mb in [o.micro_batch] if o.micro_batch else MICRO_BATCH_SIZES:
        if per_replica % mb:
            if o.micro_batch:
                yield None, f"micro_batch={mb} does not divide the per-replica batch {per_replica}"
            continue
        m = per_replica // mb
        for schedule, v, (ep, etp) in ((s, v, e) for s, v in _schedules(model, pp, m, o)
                                       for e in _ep_options(model, tp, cp, dp, o)):
            # expert parallelism: replicated or Megatron's distributed optimizer (each group sharded over its ranks)
            zeros = (0, 1) if ep > 1 or etp == 1 < tp else (0, 1, 2, 3) if dp * cp > 1 else (0,)
            for zero, replicate in ((z, r) for z in ([o.zero] if o.zero is not None else zeros)
                                    for r in _replicas(z, dp * cp, o)):
                for recompute in [o.recompute] if o.recompute else Recompute:
                    sp = tp > 1 if o.sequence_parallel is None else o.sequence_parallel
                    try:
                        ends = (account_for_ends(model.blocks, pp * v, len(model.units) - model.blocks)
                                if o.account_for_ends and pp > 1 else ())
                        layout = Layout(chunk_layers=ends, strategy=Strategy.HYBRID, dp=dp, tp=tp, pp=pp, cp=cp, replicate=replicate,
                                        ep=ep, expert_tp=etp, moe_imbalance=o.moe_imbalance,
                                        moe_a2a_overlap=o.moe_a2a_overlap and ep > 1
                                        and (pp == 1 or schedule is Schedule.INTERLEAVED_1F1B),
                                        global_batch_size=global_batch, micro_batches=m, schedule=schedule,
                                        virtual_stages=v, zero=zero, recompute=recompute,
                                        recompute_every=o.recompute_every if recompute is Recompute.FULL else 1,
                                        recompute_modules=(o.recompute_modules if recompute in (Recompute.NONE, Recompute.SELECTIVE)
                                                           else ()),
                                        sequence_parallel=sp,
                                        sp_saves_gathered_input=o.framework.dtensor_sequence_parallel and sp,
                                        tp_comm_overlap=(o.tp_comm_overlap or o.framework.tensor_parallel_overlap) and tp > 1,
                                        precision=o.precision, attention=o.attention,
                                        **_flags(o, pp=pp, zero=zero, schedule=schedule))
                    except ValueError as exc:
                        yield None, str(exc)
                        continue
                    broken = layout_violations(model, layout, cluster)
                    yield (None, "; ".join(broken)) if broken else (layout, "")


def _flags(o: SearchOptions, *, pp: int, zero: int, schedule: Schedule) -> dict:
    """The software's layout flags at this point, FP8 weights gathered as the software does unless the user says."""
    flags = o.framework.layout_flags(pp=pp, zero=zero, precision=o.precision, schedule=schedule)
    return flags if o.fp8_all_gather is None else {**flags, "fp8_all_gather": o.fp8_all_gather}


def _replicas(zero: int, ranks: int, o: SearchOptions) -> list[int]:
    """HSDP replica counts for a ZeRO stage over ``ranks`` (dp x cp) data-parallel ranks: under ZeRO-3 every split
    into replicas of two or more ranks each (``SearchOptions.replicate`` fixes it), else 1."""
    if o.replicate is not None:
        return [o.replicate]
    return [r for r in _divisors(ranks) if r < ranks] if zero == 3 else [1]


def _ep_options(model: ModelSpec, tp: int, cp: int, dp: int, o: SearchOptions) -> list[tuple[int, int]]:
    """(expert-parallel degree, ``Layout.expert_tp``) pairs, each degree dividing the experts: inside dp with the
    experts tensor-parallel (Megatron-Core's default), and where tp > 1 folded over tp x cp x dp with whole experts
    (expert_tp 1, two or more ranks a group). (1, 0) for dense models."""
    experts = model.arch.experts if model.arch is not None else 0
    etps = [o.expert_tp] if o.expert_tp is not None else [0, 1] if experts and tp > 1 else [0]
    out = []
    for etp in etps:
        whole = etp == 1 < tp
        if o.ep:
            out.append((o.ep, etp))
            continue
        degrees = [e for e in _divisors(tp * cp * dp if whole else dp) if experts and experts % e == 0 and (e > 1 or not whole)]
        out += [(e, etp) for e in degrees or [1]]
    return out


def _schedules(model: ModelSpec, pp: int, m: int, o: SearchOptions) -> list[tuple[Schedule, int]]:
    """(schedule, virtual stages) pairs for a pipeline of pp stages and m micro-batches: 1F1B, and interleaved 1F1B
    at every ``virtual_stage_options`` count that fits. A given schedule or count fixes it; a given interleaved
    schedule without a count still tries every count (a combination that breaks a rule is rejected with it)."""
    if o.schedule is not None and o.schedule is not Schedule.INTERLEAVED_1F1B:
        return [(o.schedule, o.virtual_stages or 1)]
    layers = model.blocks + 2 if o.account_for_ends else model.blocks
    counts = [o.virtual_stages] if o.virtual_stages else virtual_stage_options(layers, pp)
    if o.schedule is Schedule.INTERLEAVED_1F1B:  # on one stage, one combination to reject
        return [(o.schedule, v) for v in counts if pp * v <= model.blocks and pp > 1] or [(o.schedule, counts[0])]
    out = [(Schedule.ONE_F_ONE_B, 1)]
    if pp > 1:
        out += [(Schedule.INTERLEAVED_1F1B, v) for v in counts if pp * v <= model.blocks and m % pp == 0]
    return out


def virtual_stage_options(layers: int, pp: int) -> list[int]:
    """Virtual stages per pipeline rank the search tries: ``VIRTUAL_STAGES``, and every count v whose pp x v chunks
    hold the layers evenly, down to one layer a chunk. Megatron-LM's interleaved schedule needs equal chunks (the layers
    a multiple of pp x v; with the embedding and the loss accounted in the split, ``layers`` counts them as two
    more), and the published recipes run them up to one layer a chunk: NeMo's Nemotron-4 340B at pp 8 x v 12 over
    96 layers and Llama 2 70B at pp 4 x v 20 over 80, which the model predicts within 6% and 3%
    (``parbench validate --published``)."""
    even = {v for v in range(2, layers // pp + 1) if layers % (pp * v) == 0}
    return sorted(set(VIRTUAL_STAGES) | even)


def check(model: ModelSpec, cluster: Cluster, layout: Layout) -> Candidate:
    """One layout of a search: its memory first, and its step only where it fits."""
    mems = ranks_memory(model, layout, cluster)
    peak = max(mm.total_bytes for mm in mems)
    shortfall = memory_shortfall(mems, cluster)
    p = None if shortfall else predict(model, layout, cluster, memory=mems)
    return Candidate(layout, p, "; ".join(p.reasons) if p else shortfall, peak_memory_bytes=peak)


_FORKED: tuple[ModelSpec, Cluster] | None = None
"""The model and cluster a parallel search's worker processes inherit when they fork (nothing to pickle)."""


def _check_all(chunk: list[Layout]) -> list[Candidate]:
    model, cluster = _FORKED  # type: ignore[misc]
    return [check(model, cluster, layout) for layout in chunk]


def _checked_in_parallel(model: ModelSpec, cluster: Cluster, todo: list[Layout], jobs: int,
                         progress: Callable[[int], None]) -> list[Candidate]:
    """``check`` of every layout in ``jobs`` forked processes, in ``todo``'s order: each takes a chunk of about
    1% of them, so the progress moves as they finish."""
    global _FORKED
    size = max(1, len(todo) // 100)
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    _FORKED = (model, cluster)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            out: list[Candidate] = []
            for done in pool.map(_check_all, chunks):
                out += done
                progress(len(done))
            return out
    finally:
        _FORKED = None


def search(model: ModelSpec, cluster: Cluster, *, gpus: int, global_batch: int, precision: Precision | None = None,
           options: SearchOptions | None = None, progress: Callable[[int, int], None] | None = None,
           jobs: int = 1) -> list[Candidate]:
    """Every candidate, feasible ones first by descending throughput, then those that do not fit, nearest to
    fitting first, then those that are not layouts. A layout's memory is checked first: one that does not fit
    is not timed (two thirds of a large search; timing is three quarters of a prediction's cost).
    ``progress(done, total)`` is called as layouts are checked (about every 1%). ``jobs`` > 1 checks them in as
    many forked processes (where the platform forks; the same candidates in the same order)."""
    if gpus < 1 or global_batch < 1:
        raise ValueError(f"gpus={gpus} and global_batch={global_batch} must be >= 1")
    if jobs < 1:
        raise ValueError(f"jobs={jobs} must be >= 1")
    options = options or SearchOptions(precision=precision or PRECISIONS["bf16"])
    combos = list(layouts(model, cluster, gpus=gpus, global_batch=global_batch, options=options))
    todo = [layout for layout, _ in combos if layout is not None]
    done, step = 0, max(1, len(combos) // 100)

    def advance(n: int) -> None:
        nonlocal done
        before, done = done, done + n
        if progress and (done // step > before // step or done == len(combos)):
            progress(done, len(combos))

    rules = [Candidate(layout=None, prediction=None, reason=reason)  # type: ignore[arg-type]
             for layout, reason in combos if layout is None]
    advance(len(rules))
    if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
        checked = _checked_in_parallel(model, cluster, todo, jobs, advance)
    else:
        checked = []
        for layout in todo:
            checked.append(check(model, cluster, layout))
            advance(1)
    return sorted(checked + rules, key=lambda c: (not c.feasible, c.layout is None,
                                                  -c.prediction.throughput_samples_per_s if c.prediction
                                                  else c.peak_memory_bytes))


def rejected_counts(candidates: list[Candidate]) -> dict[str, int]:
    """How many layouts were rejected for each reason (every memory shortfall counted as one reason)."""
    out: dict[str, int] = {}
    for c in candidates:
        if not c.feasible:
            key = "does not fit in memory" if c.reason.startswith("needs") else c.reason
            out[key] = out.get(key, 0) + 1
    return out


def within_margin(feasible: list[Candidate]) -> int:
    """How many other layouts are predicted within ``accuracy.PAIR_MARGIN_PCT`` of the best one's throughput: the
    margin under which the model's order of published layout pairs was checked."""
    from parbench.sim.accuracy import PAIR_MARGIN_PCT

    if not feasible:
        return 0
    best = feasible[0].prediction.throughput_samples_per_s
    return sum(c.prediction.throughput_samples_per_s * (1 + PAIR_MARGIN_PCT / 100) >= best for c in feasible[1:])


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """Feasible candidates no other beats on both throughput (higher) and peak memory (lower)."""
    pts = sorted((c for c in candidates if c.feasible), key=lambda c: (c.prediction.peak_memory_bytes,
                                                                       -c.prediction.throughput_samples_per_s))
    front, best = [], -1.0
    for c in pts:
        if c.prediction.throughput_samples_per_s > best:
            front.append(c)
            best = c.prediction.throughput_samples_per_s
    return front


def describe(layout: Layout) -> str:
    v = f" v={layout.virtual_stages}" if layout.schedule is Schedule.INTERLEAVED_1F1B else ""
    cp = f" cp={layout.cp}" if layout.cp > 1 else ""
    hsdp = f" replicate={layout.replicate}" if layout.replicate > 1 else ""
    every = f"/{layout.recompute_every}" if layout.recompute_every > 1 else ""
    every += f"+{','.join(layout.recompute_modules)}" if layout.recompute_modules else ""
    cp += f" ep={layout.ep}" if layout.ep > 1 else ""
    cp += " expert-tp=1" if layout.whole_experts else ""
    cp += " overlap-moe-expert-parallel-comm" if layout.moe_a2a_overlap else ""
    return (f"dp={layout.dp} tp={layout.tp} pp={layout.pp}{cp} mb={layout.micro_batch_size} m={layout.micro_batches} "
            f"{layout.schedule.value}{v} zero={layout.zero}{hsdp} recompute={layout.recompute.value}{every}"
            f"{' sp' if layout.sequence_parallel else ''} {layout.attention} {_precision_name(layout)}"
            f"{' deepspeed-pipeline' if layout.pp_blocking_p2p or layout.fp32_grad_pass_per_micro_batch else ''}"
            f"{f' fp8-scaling={layout.fp8_scaling}' if layout.precision.gemm_dtype == 'fp8' else ''}"
            f"{' fp8-all-gather' if layout.fp8_all_gather else ''}"
            f"{' te-fp8' if layout.te_fp8 else ''}{' overlap-param-gather' if layout.overlap_param_gather else ''}"
            f"{' tp-comm-overlap' if layout.tp_comm_overlap else ''}{' overlap-p2p-comm' if layout.overlap_p2p_comm else ''}"
            f"{' megatron-cross-entropy' if layout.megatron_cross_entropy else ''}{' compiled-loss' if layout.compiled_loss else ''}"
            f"{' megatron-grad-buckets' if layout.megatron_grad_buckets else ''}{' clip-grad-norm' if layout.clip_grad_norm else ''}"
            f"{f' attention-kernel={layout.attention_kernel}' if layout.attention_kernel else ''}"
            f"{' unfused-elementwise' if not layout.fused_elementwise else ''}"
            f"{f' chunk-layers={_runs(layout.chunk_layers)}' if layout.chunk_layers else ''}")


def _runs(values: tuple[int, ...]) -> str:
    """Run-length form of a sequence: (2, 2, 2, 3, 1) -> '2x3,3,1'."""
    out: list[str] = []
    for v, group in groupby(values):
        n = len(list(group))
        out.append(f"{v}x{n}" if n > 1 else str(v))
    return ",".join(out)


def _precision_name(layout: Layout) -> str:
    for k, p in PRECISIONS.items():
        if p == layout.precision:
            return k
        if replace(p, fp32_grad_accumulation=False) == layout.precision and p.fp32_grad_accumulation:
            return f"{k} grad-reduce-in-bf16"
    return "custom"
