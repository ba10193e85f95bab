"""Simulator: a what-if panel (any model shape, cluster preset and layout, predicted with no run and
no calibration), then predicted vs measured for the runs shown, which needs ``parbench calibrate``."""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from parbench.commands.simulate import predict_for, search_options_for
from parbench.config import Schedule
from parbench.sim import charts as sim_charts
from parbench.sim import whatif
from parbench.sim.accuracy import nearest_lines, nearest_published
from parbench.sim.hardware import (
    PRESETS,
    cluster_files,
    cluster_summary,
    load_cluster,
)
from parbench.sim.layout import FP8_SCALINGS, PRECISIONS, SOFTWARE, Recompute
from parbench.sim.validate import (
    age_line,
    calibration_age,
    single_process_ratios,
    single_process_words,
    tracing_cost_words,
)

if TYPE_CHECKING:
    from dashboard.views import ViewContext

TITLE = "Simulator"
HOW = ("**Predicted vs measured** compares the simulator with the runs shown, on a profile of this host: no "
       "calibrated profile in `{dir}/calibration/` yet. Run `parbench calibrate --results-dir {dir}` (a few "
       "minutes: it times GEMMs, elementwise ops and collectives here), then reload. The what-if panel above "
       "needs no calibration.")
CUSTOM = "custom shape"
SOFTWARE_RECIPE = "the software's"
"""The FP8 scaling choice that leaves the recipe to the training software (``--fp8-scaling`` not given)."""
MESH_MAX = 1 << 20
"""The what-if's degrees and batch counts go as far as a search's layouts (and the layout rules say what does not fit)."""


def render(ctx: "ViewContext") -> None:
    st.subheader("What if? (predicted, no run needed)")
    what, cluster = whatif_inputs(ctx.results_dir)
    try:
        layout, prediction = predict_for(what.command_args(), what.model(), cluster)
    except ValueError as exc:
        st.error(f"Not a valid layout: {exc}")
    else:
        st.plotly_chart(whatif.memory_figure(prediction, cluster), key="sim-whatif-memory")
        st.plotly_chart(whatif.time_figure(prediction), key="sim-whatif-time")
        if not prediction.feasible:
            st.warning("Does not fit: " + "; ".join(prediction.reasons))
        if prediction.slowest_device > 1:
            st.caption(f"The compute goes at the pace of the slowest of the {prediction.world_size} devices: "
                       f"+{prediction.slowest_device - 1:.1%} over a typical one's.")
        screened = ["--rank-spread", "0"] if st.session_state.get("sim-screened") and not cluster.rank_spread else []
        tokens = training_run_section(what, layout, prediction)
        command = command_line(what, st.session_state["sim-cluster"], ctx.results_dir,
                               [*what.command_args(), *screened, *(["--train-tokens", tokens] if tokens else [])])
        if command:
            st.caption("The same prediction on the command line, with its memory and time term by term:")
            st.code(command, language="bash")
        nearest_section(what.model(), layout, cluster)
    st.subheader("Every layout at scale (searched, no run needed)")
    search_section(what, cluster, ctx.results_dir)
    st.subheader("Predicted vs measured")
    measured_section(ctx)
    st.subheader("Against published runs (no run needed)")
    published_section()
    st.subheader("Your own runs (a rows file, no run needed)")
    rows_section()


def command_line(what: whatif.WhatIf, cluster_choice: str, results_dir: str, flags: list[str]) -> str | None:
    """The ``parbench simulate`` command with ``flags`` for the what-if's model and cluster, for a published model (a
    preset of the command's ``--model``); None for a shape the command would build another way."""
    from parbench.sim.models import MODELS

    arch = what.shape.arch
    if arch is None or arch.name not in MODELS:
        return None
    cluster = ["--cluster", cluster_choice, *(["--results-dir", results_dir] if cluster_choice == "local" else [])]
    return shlex.join(["parbench", "simulate", "--model", arch.name, *cluster, *flags])


def training_run_section(what: whatif.WhatIf, layout, prediction) -> str:
    """What a training run of the tokens typed costs at this layout's predicted step (``parbench simulate
    --train-tokens``): its steps, days and GPU-hours. Returns the tokens as typed where they are valid, else ''."""
    from parbench.sim.run_cost import LEFT_OUT, format_count, parse_tokens, training_run

    text = st.text_input("a training run of (tokens: 15.6T, 300B, 2e12)", key="sim-train-tokens").strip()
    if not text:
        return ""
    try:
        tokens = parse_tokens(text)
    except ValueError as exc:
        st.error(f"Training run: {exc}")
        return ""
    if not prediction.feasible:
        st.caption("A layout that does not fit has no step, so no training run.")
        return text
    run = training_run(tokens, tokens_per_step=layout.global_batch_size * what.model().tokens_per_sample,
                       step_time_s=prediction.step_time_s, gpus=prediction.world_size)
    st.caption(f"A run of {format_count(run.tokens)} tokens: {run.steps:,} steps, {run.days:.4g} days on "
               f"{prediction.world_size} GPUs, {format_count(run.gpu_hours)} GPU-hours ({LEFT_OUT}).")
    return text


def nearest_section(model, layout, cluster) -> None:
    """How far the model has been from the published runs nearest to this layout (``parbench simulate``'s lines)."""
    nearby = nearest_published(model, layout, cluster)
    if not nearby:
        st.caption(nearest_lines([], cluster)[0].strip())
        return
    st.caption("Nearest published runs (same tensor cores, same kind of model): the step time predicted against "
               "the published one. Every published row: `parbench validate --published`, and below.")
    st.dataframe(pd.DataFrame([{"error %": round(r.error_pct, 1), "published run": r.name, "GPUs": r.gpus,
                                "published s": round(r.published_step_s, 3), "predicted s": round(r.predicted_step_s, 3),
                                "ran as": r.software or "(flags of its own)",
                                "this layout differs in": ", ".join(r.differs) or "-",
                                "source": f"{r.source}, {r.table}"} for r in nearby]),
                 key="sim-whatif-nearest", hide_index=True)
    if any(r.differs for r in nearby):
        st.caption("Where this layout's software flags differ from those a published run ran with, the error shown is "
                   "that run's, under its own flags: choose that training software above (and the flags 'ran as' "
                   "names) to predict this layout as that run ran.")


def search_section(what: whatif.WhatIf, cluster, results_dir: str) -> None:
    """``parbench simulate --search`` for the what-if's model on its cluster at its precision, for a GPU count and
    global batch: every layout ranked by predicted throughput (the command's options, ``search_options_for``), the
    fastest ten, any of which opens in the what-if panel, and all of them against their memory with the Pareto front.
    A search runs when asked (a large one takes tens of seconds); the latest stays until its inputs change."""
    from parbench.sim.accuracy import PAIR_MARGIN_PCT
    from parbench.sim.predict import format_bytes
    from parbench.sim.search import describe, rejected_counts, search, within_margin

    with st.form("sim-search-form"):
        a, b = st.columns(2)
        gpus = int(a.number_input("GPUs", 1, 1 << 20, 64, key="sim-search-gpus"))
        batch = int(b.number_input("global batch (samples a step)", 1, 1 << 24, 512, key="sim-search-batch"))
        asked = st.form_submit_button("Search every layout")
    scaling = [f"--fp8-scaling={what.fp8_scaling}"] if what.fp8_scaling and what.precision == "fp8" else []
    threads = [f"--threads={what.threads}"] if what.threads != 1 else []
    key = (what.shape, cluster.name, what.precision, what.software, *scaling, *threads, gpus, batch)
    flags = [f"--gpus={gpus}", f"--global-batch={batch}", f"--precision={what.precision}", f"--software={what.software}",
             *scaling, *threads, "--search"]
    latest = st.session_state.setdefault("sim-search-latest", {})
    if asked and key not in latest:
        bar = st.progress(0.0, text="searching")
        try:
            options = search_options_for(flags, cluster)
            cands = search(what.model(), cluster, gpus=gpus, global_batch=batch, options=options,
                           progress=lambda done, total: bar.progress(done / total, text=f"{done} of {total} layouts"))
        except ValueError as exc:
            bar.empty()
            st.error(f"Cannot search: {exc}")
            return
        bar.empty()
        latest.clear()  # one search kept: a large one holds thousands of predictions
        latest[key] = cands
    cands = latest.get(key)
    if cands is None:
        st.caption(f"Ranks every layout of this model on {cluster.name} in {what.precision} (dp x tp x pp x cp x ep, "
                   "micro-batch, schedule, ZeRO and HSDP, recomputation) by predicted throughput, as `parbench simulate "
                   "--search` does. Set the GPUs and the global batch, then search.")
        return
    run = searched_run(what, st.session_state.get("sim-train-tokens", ""))
    tokens = [f"--train-tokens={st.session_state['sim-train-tokens'].strip()}"] if run else []
    command = command_line(what, st.session_state["sim-cluster"], results_dir, [*flags, *tokens])
    if command:
        st.caption("The same search on the command line" + (" (days and GPU-hours for the what-if's training run)"
                                                             if run else "") + ":")
        st.code(command, language="bash")
    feasible = [c for c in cands if c.feasible]
    rejected = "; ".join(f"{n} {reason}" for reason, n in sorted(rejected_counts(cands).items(), key=lambda kv: -kv[1]))
    nearest = next((c for c in cands if c.reason.startswith("needs")), None)  # the search puts it first
    st.caption(f"{len(cands)} layouts, {len(feasible)} fit in {format_bytes(cluster.memory_bytes)} a device"
               + (f" (rejected: {rejected})" if rejected else "") + "."
               + (f" Nearest to fitting, {format_bytes(nearest.peak_memory_bytes - cluster.memory_bytes)} over: "
                  f"{describe(nearest.layout)}." if nearest else ""))
    if not feasible:
        st.warning("No layout fits: more GPUs, a device with more memory, or a smaller batch.")
        return
    close = within_margin(feasible)
    st.caption(f"{close} other layouts are predicted within {PAIR_MARGIN_PCT:.0f}% of the best: the model does not "
               f"claim an order inside {PAIR_MARGIN_PCT:.0f}% (`parbench validate --published` checks its order of "
               "published layout pairs).")
    rows = whatif.search_rows(cands, 10, run=run)
    st.dataframe(pd.DataFrame(rows), key="sim-search-top", hide_index=True,
                 column_config={"layout": st.column_config.TextColumn(width="large")})
    a, b = st.columns([4, 1])
    pick = a.selectbox("open in the what-if panel above", range(len(rows)), key="sim-search-pick",
                       format_func=lambda i: f"{i + 1}: {rows[i]['layout']}")
    b.button("Open", key="sim-search-open", on_click=open_in_whatif, args=(feasible[pick].layout,))
    st.plotly_chart(whatif.search_figure(cands, cluster), key="sim-search-chart")


def searched_run(what: whatif.WhatIf, text: str):
    """A searched layout's training run for the what-if's token count (None where none, or none valid, is typed)."""
    from parbench.sim.run_cost import parse_tokens, training_run

    try:
        tokens = parse_tokens(text) if text.strip() else 0
    except ValueError:
        return None
    if not tokens:
        return None
    per_sample = what.model().tokens_per_sample
    return lambda c: training_run(tokens, tokens_per_step=c.layout.global_batch_size * per_sample,
                                  step_time_s=c.prediction.step_time_s, gpus=c.prediction.world_size)


def open_in_whatif(layout) -> None:
    """Set the what-if panel's mesh and schedule to a searched layout (before the panel draws on the next run)."""
    values = {"sim-dp": layout.dp, "sim-tp": layout.tp, "sim-pp": layout.pp, "sim-cp": layout.cp, "sim-ep": layout.ep,
              "sim-replicate": layout.replicate, "sim-zero": layout.zero, "sim-recompute": layout.recompute.value,
              "sim-mbs": layout.micro_batch_size, "sim-mb": layout.micro_batches, "sim-schedule": layout.schedule.value,
              "sim-v": layout.virtual_stages, "sim-sp": layout.sequence_parallel}
    st.session_state.update(values)


def whatif_inputs(results_dir: str):
    """The panel's widgets: model (preset or shape), cluster, mesh (dp, tp, pp, cp, ep, whole experts), combined
    1F1B, ZeRO, recompute, micro-batching, schedule, sequence parallelism and the training software."""
    a, b, c = st.columns(3)
    name = a.selectbox("model", [*whatif.MODEL_PRESETS, CUSTOM], key="sim-model")
    preset = whatif.MODEL_PRESETS.get(name, whatif.MODEL_PRESETS["GPT-3 2.7B"])
    if name == CUSTOM:
        preset = whatif.Shape(layers=a.number_input("layers", 1, 512, preset.layers, key="sim-layers"),
                              hidden=a.number_input("hidden", 8, 65536, preset.hidden, key="sim-hidden"),
                              heads=a.number_input("heads", 1, 512, preset.heads, key="sim-heads"),
                              seq_len=a.number_input("sequence length", 1, 1 << 20, preset.seq_len, key="sim-seq"),
                              vocab_size=a.number_input("vocabulary", 1, 1 << 20, preset.vocab_size, key="sim-vocab"))
    else:
        a.caption(f"{preset.layers} layers, hidden {preset.hidden}, {preset.heads} heads, sequence {preset.seq_len}, "
                  f"vocabulary {preset.vocab_size} ({preset.source})")
    clusters = list(PRESETS) + (["local"] if _has_profile(results_dir) else []) + _cluster_files(results_dir)
    cluster = load_cluster(a.selectbox("cluster", clusters, key="sim-cluster"), results_dir=results_dir)
    a.caption(cluster_summary(cluster))
    if a.checkbox("devices screened to one speed", key="sim-screened", disabled=not cluster.rank_spread,
                  help="`parbench simulate --rank-spread 0`: GPUs of one kind differ in speed (1.6% on the GPU "
                       "presets) and every step waits for its slowest; checked, they do not"):
        cluster = replace(cluster, rank_spread=0.0)
    threads = a.selectbox("intra-op threads per rank", [1, *sorted(cluster.threaded)], key="sim-threads",
                          disabled=not cluster.threaded,
                          help="`parbench simulate --threads`: a CPU profile's rates at that many threads per rank, "
                               "as `parbench calibrate` measured them (1 and each power of two up to its cores)")
    cluster = cluster.with_threads(threads)
    software = a.selectbox("training software", list(SOFTWARE), key="sim-software",
                           help="`parbench simulate --software`: the framework's kernels, overlaps and flags")
    schedules = [s.value for s in Schedule]
    # a CPU profile is calibrated in float32 alone (`parbench simulate` refuses another precision on it)
    precisions = ["fp32"] if cluster.cores else list(PRECISIONS)
    default = "fp32" if cluster.cores else "bf16" if cluster.bf16 else "fp16"
    precision = c.selectbox("precision", precisions, index=precisions.index(default), key="sim-precision",
                            help="bf16 by default; fp16 on a cluster without bf16 tensor cores (V100); fp32 alone on "
                                 "a CPU profile (the local one), the precision `parbench calibrate` measures")
    scaling = c.selectbox("FP8 scaling", [SOFTWARE_RECIPE, *FP8_SCALINGS], key="sim-fp8-scaling",
                          disabled=precision != "fp8",
                          help="`parbench simulate --fp8-scaling`: per tensor (an amax pass per cast), Transformer "
                               "Engine's delayed scaling, or MXFP8's 32-element blocks; with fp8 precision only")
    what = whatif.WhatIf(
        shape=preset, dp=b.number_input("dp", 1, MESH_MAX, 8, key="sim-dp"),
        tp=b.number_input("tp", 1, MESH_MAX, 1, key="sim-tp"),
        pp=b.number_input("pp", 1, MESH_MAX, 1, key="sim-pp"),
        cp=b.number_input("cp (context parallel: seq / cp tokens a rank)", 1, MESH_MAX, 1, key="sim-cp"),
        ep=b.number_input("ep (expert parallel, inside dp: mixtures of experts)", 1, MESH_MAX, 1, key="sim-ep"),
        whole_experts=b.checkbox("whole experts: ep over tp x cp x dp (expert tp 1)", key="sim-etp"),
        moe_a2a_overlap=b.checkbox("combined 1F1B (all-to-alls hidden)", key="sim-a2a"),
        zero=b.selectbox("ZeRO stage", (0, 1, 2, 3), key="sim-zero"),
        replicate=b.number_input("replicas (HSDP with ZeRO 3: each shards over dp / replicas)", 1, MESH_MAX, 1,
                                 key="sim-replicate"),
        recompute=Recompute(c.selectbox("recompute", [r.value for r in Recompute], key="sim-recompute")),
        micro_batch_size=c.number_input("micro-batch size (samples)", 1, MESH_MAX, 1, key="sim-mbs"),
        micro_batches=c.number_input("micro-batches per step", 1, MESH_MAX, 8, key="sim-mb"),
        precision=precision, fp8_scaling="" if scaling == SOFTWARE_RECIPE else scaling,
        schedule=Schedule(c.selectbox("pipeline schedule", schedules, index=schedules.index(Schedule.ONE_F_ONE_B.value),
                                      key="sim-schedule")),
        virtual_stages=c.number_input("virtual stages per pipeline rank (interleaved)", 1, MESH_MAX, 1, key="sim-v"),
        sequence_parallel=c.checkbox("sequence parallelism (with tp)", key="sim-sp",
                                     help="unchecked: the software's choice (NeMo and torchtitan turn it on with tp)"),
        software=software, threads=threads)
    b.caption(f"{what.gpus} GPUs (dp x tp x pp x cp)")
    return what, cluster


def _cluster_files(results_dir: str) -> list[str]:
    """The cluster files under the results directory's ``clusters/`` (``parbench calibrate --nccl-tests`` writes
    them there) that read as clusters; one that does not is left out with a warning."""
    found = []
    for path, cluster in cluster_files(results_dir).items():
        if isinstance(cluster, str):
            st.warning(f"cluster file {path} left out: {cluster}")
        else:
            found.append(path)
    return found


def _has_profile(results_dir: str) -> bool:
    try:
        load_cluster("local", results_dir=results_dir)
    except (FileNotFoundError, ValueError):
        return False
    return True


@st.cache_data(show_spinner="predicting the published runs")
def _published() -> tuple[list[dict], list[dict], dict]:
    from parbench.sim.accuracy import indistinct_runs, source_floors
    from parbench.sim.published import fixed_and_per_micro_batch
    from parbench.sim.published_memory import compare_runs, summarize_by_source

    rows = compare_runs()
    return rows, summarize_by_source(rows, source_floors(indistinct_runs())), fixed_and_per_micro_batch(rows)


@st.cache_data(show_spinner="predicting one published layer")
def _layers() -> list[dict]:
    from parbench.sim.published import compare_layers

    return compare_layers()


@st.cache_data(show_spinner="predicting the published layout pairs")
def _pairs() -> list:
    from parbench.sim.accuracy import layout_pairs

    return layout_pairs()


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def published_section() -> None:
    """Every published run the simulator is checked on (``parbench validate --published``): each row's error
    by source, the per-source summary, the layouts split into fixed and per-micro-batch parts, one layer timed
    alone (``published.compare_layers``), and the published layout pairs the model orders, or not, as they were published (``accuracy.layout_pairs``)."""
    from parbench.sim.accuracy import source_targets

    rows, sources, splits = _published()
    st.plotly_chart(sim_charts.published_errors_figure(rows), key="sim-published")
    targets = source_targets([(s["source"], s["metric_mean_abs_error_pct"], s["metric_max_abs_error_pct"])
                              for s in sources if s["metric_mean_abs_error_pct"] is not None])
    verdict = {name: "yes" for name in targets["met"]} | {m["source"]: "no: " + ", ".join(m["misses"])
                                                          for m in targets["missed"]}
    table = pd.DataFrame([{"source": s["source"], "rows": s["rows"], "metric": s["metric"],
                           "mean |error| %": _round(s["metric_mean_abs_error_pct"]),
                           "max |error| %": _round(s["metric_max_abs_error_pct"]),
                           f"within {targets['mean_target_pct']:g}% / {targets['max_target_pct']:g}%":
                               verdict.get(s["source"], "-"),
                           "max |error| floor %": _round(s["metric_max_floor_pct"]), "memory rows": s["memory_rows"],
                           "memory mean |error| %": _round(s["memory_mean_abs_error_pct"]),
                           "trained, predicted to fit": f"{s['ran_predicted_to_fit']} of {s['ran']}",
                           "OOM, predicted not to fit": f"{s['infeasible_predicted_not_to_fit']} of {s['infeasible']}"}
                          for s in sources])
    st.dataframe(table, key="sim-published-sources", hide_index=True,
                 column_config={"source": st.column_config.TextColumn(width="medium")})
    st.caption(f"{len(targets['met'])} of {len(targets['met']) + len(targets['missed'])} sources are within both "
               f"per-source targets (mean |error| <= {targets['mean_target_pct']:g}%, max <= "
               f"{targets['max_target_pct']:g}%), every constant shared by all rows.")
    st.caption("Max |error| floor: what no model can get under on that source, two of its rows having the same "
               "model, layout and device, so one prediction, yet published steps apart (`parbench validate "
               "--published` lists them).")
    st.caption("One layout at several micro-batch counts per step: the step split into a fixed part (pipeline fill "
               "and drain, gradient reduction, optimizer) and a per-micro-batch part, published beside predicted; "
               "'±': how far the published fixed part moves when any one of its published steps is 1% off.")
    st.dataframe(sim_charts.published_split_frame(splits), key="sim-published-splits", hide_index=True)
    layers = _layers()
    st.caption(f"One layer timed alone, forward + backward per micro-batch ({layers[0]['source']}, "
               f"{layers[0]['table']}: {layers[0]['layer']}): its compute and exposed tensor-parallel "
               "all-reduces, without the step around them.")
    st.dataframe(pd.DataFrame([{"recomputation": r["recompute"], "sequence parallel": r["sequence_parallel"],
                                "published ms": round(r["measured_ms"], 1), "predicted ms": round(r["predicted_ms"], 1),
                                "error %": round(r["error_pct"], 1)} for r in layers]),
                 key="sim-published-layers", hide_index=True)
    from parbench.sim.accuracy import PAIR_MARGIN_PCT, pair_summary

    pairs = _pairs()
    summary = pair_summary(pairs)
    st.plotly_chart(sim_charts.layout_pairs_figure(pairs), key="sim-published-pairs")
    st.caption(f"The run published faster is predicted faster in {summary['decided_ordered']} of {summary['decided']} "
               f"pairs published more than {PAIR_MARGIN_PCT:.0f}% apart ({summary['precision_ordered']} of "
               f"{summary['precision']} that differ in precision alone, {summary['layout_ordered']} of "
               f"{summary['layout']} in the layout) and in {summary['close_ordered']} of {summary['close']} closer ones.")


def rows_section() -> None:
    """``parbench validate --rows FILE`` in the view: a rows file's runs (each a simulate command line and what
    it measured), each row's error by source as the published ones are drawn, and the row table."""
    path = st.text_input("Rows file (TOML: one [[row]] per run, as `parbench validate --rows` reads it)",
                         key="sim-rows-file", placeholder="docs/examples/rows.toml")
    if not path:
        st.caption("Give the path of a rows file to see your cluster's runs beside their predictions; "
                   "`docs/examples/rows.toml` shows the format.")
        return
    from parbench.commands.simulate import command_prediction
    from parbench.config import ConfigError
    from parbench.sim.published_memory import summarize_by_source
    from parbench.sim.rows import compare_rows, load_rows

    try:
        rows = compare_rows(load_rows(path), command_prediction)
    except ConfigError as exc:
        st.error(str(exc))
        return
    st.plotly_chart(sim_charts.published_errors_figure(rows, title="Your runs", against="measured"), key="sim-rows")
    st.dataframe(pd.DataFrame([{"run": r["name"], "source": r["source"], "cluster": r["cluster"], "GPUs": r["gpus"],
                                "metric": r["metric"], "measured": r["published"], "predicted": r["predicted"],
                                "error %": _round(r["metric_error_pct"]),
                                "memory GiB measured": r["memory_gib_published"],
                                "memory GiB predicted": round(r["allocator_gib_predicted"], 1),
                                "predicted to fit": r["predicted_fits"], "simulate": r["simulate"]} for r in rows]),
                 key="sim-rows-table", hide_index=True)
    sources = summarize_by_source(rows)
    st.caption("Per source: " + "; ".join(f"{s['source']}: {s['rows']} rows, mean |error| "
                                          f"{s['metric_mean_abs_error_pct']:.1f}%, max {s['metric_max_abs_error_pct']:.1f}%"
                                          for s in sources))


def measured_section(ctx: "ViewContext") -> None:
    from parbench.sim.validate import summarize, validation_rows

    try:
        cluster = load_cluster("local", results_dir=ctx.results_dir)
    except FileNotFoundError:
        st.info(HOW.format(dir=ctx.results_dir))
        return
    except ValueError as exc:
        st.warning(f"The calibrated profile cannot be read ({exc}): measured runs are not compared.")
        return
    rows, skipped = validation_rows(ctx.results_dir, cluster)
    ids = set(ctx.runs["run_id"])
    rows = [r for r in rows if r["run_id"] in ids]
    if not rows:
        st.info("No ok runs under the current filters: run `parbench sweep` or `parbench run`.")
        return
    frame = pd.DataFrame(rows)
    s = summarize(rows)
    time = (f"step-time |error| median {s['step_time_median_error_pct']:.1f}%, max {s['step_time_max_error_pct']:.1f}%; "
            f"throughput Spearman {s['throughput_spearman']:.2f}") if s["time_compared"] else "step time not compared"
    st.caption(f"{s['runs']} runs; communication bytes exact in {s['comm_bytes_exact']}; memory max error "
               f"{s['memory_max_error_pct']:.2f}%; {time}")
    age = calibration_age(_profile_meta(ctx.results_dir), rows)
    (st.caption if age.get("same_day", True) and age["calibrated_at"] else st.warning)(
        "Calibration " + age_line(age) + ".")
    untimed = Counter(r["time_not_compared"] for r in rows if r["time_not_compared"])
    for why, n in untimed.items():
        st.warning(f"step time not compared for {n} run{'s' if n > 1 else ''}: {why}")
    _layout_order_caption(rows)
    single = single_process_words(single_process_ratios(rows))
    if single:
        st.caption(single[0].upper() + single[1:] + ".")
    st.plotly_chart(sim_charts.predicted_vs_measured(frame), key="sim-predicted-vs-measured")
    st.plotly_chart(sim_charts.terms_figure(frame), key="sim-terms")
    st.caption(terms_caption(cluster))
    by_config = terms_by_config_frame(rows)
    if not by_config.empty:
        st.caption("Each configuration's terms, measured (traced) / predicted ms, medians over its repeats ('-': 0 in "
                   "both), and the term furthest off on that layout: where the model is wrong.")
        st.dataframe(by_config, key="sim-terms-by-config", hide_index=True)
    st.dataframe(frame, key="sim-error-table", hide_index=True)
    # ok runs whose config the simulator takes and whose time it predicts on this profile
    compared = frame[frame["time_not_compared"].isna()]
    predicted = ctx.runs[ctx.runs["run_id"].isin(compared["run_id"])]
    st.plotly_chart(sim_charts.scaling_figure(sim_charts.scaling_curves(predicted, cluster), compared),
                    key="sim-scaling")
    for line in skipped:
        st.warning(f"not predicted: {line}")


def terms_by_config_frame(rows: list[dict]) -> pd.DataFrame:
    """``validate``'s per-configuration terms (``term_errors_by_config``) as a table: one row a configuration (its
    strategy, world size, model-parallel degrees, workload, batch, threads and repeats), one column a term
    ("measured / predicted" ms), and the largest gap, signed (predicted - measured)."""
    from parbench.metrics.breakdown import TERMS, short_name
    from parbench.sim.validate import model_parallel, term_errors_by_config

    out = []
    for c in term_errors_by_config(rows):
        row = {"strategy": c["strategy"], "world size": c["world_size"], "model parallel": model_parallel(c),
               "workload": c["workload"], "batch": c["global_batch_size"], "threads": c["threads_per_rank"],
               "runs": c["runs"]}
        for term in TERMS:
            m, p = c["terms"].get(term, (None, None))
            row[short_name(term)] = "" if m is None else "-" if m == p == 0 else f"{m * 1e3:.1f} / {p * 1e3:.1f}"
        row["largest gap"] = f"{short_name(c['largest'])} {c['largest_gap_s'] * 1e3:+.1f} ms"
        out.append(row)
    return pd.DataFrame(out)


def _profile_meta(results_dir: str) -> dict:
    """The local profile's ``meta`` (when and how steadily it was measured); {} where it has none."""
    import json

    from parbench.sim.hardware import profile_path

    meta = json.loads(profile_path(results_dir).read_text()).get("meta", {})
    return meta if isinstance(meta, dict) else {}


def terms_caption(cluster) -> str:
    """What the term chart sets side by side: the traced steps' terms, and the prediction of a traced step
    where the profile measured what tracing costs."""
    if cluster.tracing_op_overhead_s or cluster.tracing_optimizer_op_overhead_s:
        return (f"Terms: measured on each run's traced steps, predicted for a traced step (the profile's tracing cost "
                f"added: {tracing_cost_words(cluster)}). The step times above are untraced, measured and predicted.")
    return ("Terms: measured on each run's traced steps, predicted for an untraced one (this profile predates the "
            "tracing cost: `parbench calibrate` again), so op-dense terms such as an eager optimizer read high.")


def _layout_order_caption(rows: list[dict]) -> None:
    """``validate``'s local layout order: of the pairs of layouts of one job measured apart, how many the
    model orders as measured (``measured_pairs``, the repeats' noise floor as the margin)."""
    from parbench.sim.validate import measured_pairs, noise_floor, pair_counts

    order = pair_counts(measured_pairs(rows, noise_floor(rows)["repeat_spread_median_pct"]))
    if order["pairs_decided"] + order["pairs_close"]:
        st.caption(f"Layout order (two layouts of one workload, batch and world size): the one measured faster is "
                   f"predicted faster in {order['pairs_decided_ordered']} of {order['pairs_decided']} pairs measured "
                   f"apart (further than the repeats' noise floor, no repeats overlapping), "
                   f"{order['pairs_close_ordered']} of {order['pairs_close']} closer ones.")
