"""The ``parbench simulate`` command line that predicts a published run, where the command can state it.

A published run is built here from the source's own description (``parbench.sim.published_memory``); a user
reaches the same prediction only through ``parbench simulate``. ``simulate_args`` writes the run's model (a
``--model`` preset and the shape flags that differ from it), its mesh and batch, the training software and the
flags that adjust it (``software.software_of``), then builds that command line with the command's own parser and
keeps it only if the architecture, the cluster and every layout field come out equal to the run's: a command is
returned only where it reproduces the run exactly. ``parbench validate --published --format rows`` writes every
such run as a rows file (``parbench.sim.rows``), which ``parbench validate --rows`` predicts back.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import fields, replace

from parbench.config import ConfigError
from parbench.sim.architecture import Architecture
from parbench.sim.layout import PRECISIONS, SOFTWARE, Layout
from parbench.sim.models import MODELS
from parbench.sim.published_memory import Run
from parbench.sim.software import software_of

SHAPE_FLAGS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads", "kv_heads": "--kv-heads",
               "head_size": "--head-dim", "ffn_hidden": "--ffn-hidden", "seq_len": "--seq", "vocab": "--vocab",
               "experts": "--experts", "top_k": "--top-k", "capacity_factor": "--capacity-factor",
               "expert_ffn": "--expert-ffn", "moe_every": "--moe-every", "mtp_layers": "--mtp-layers"}
"""Architecture fields ``parbench simulate`` sets with a value flag (the two booleans below take a pair)."""
BOOL_FLAGS = {"gated_mlp": "gated-mlp", "tie_embeddings": "tie-embeddings", "dropout": "dropout"}


def arch_args(arch: Architecture) -> list[str] | None:
    """``--model PRESET`` and the shape flags that turn the preset into ``arch`` (the preset needing the fewest);
    None where every preset differs in a field no flag sets (norm, positions, biases, dropout, windows, ...)."""
    best = None
    for name, preset in MODELS.items():
        flags = shape_args(arch, preset.arch)
        if flags is not None and (best is None or len(flags) < len(best) - 2):
            best = ["--model", name, *flags]
    return best


def shape_args(arch: Architecture, base: Architecture) -> list[str] | None:
    """The shape flags that turn ``base`` (a preset's or a Hugging Face config's architecture) into ``arch``; None
    where the two differ in a field no flag sets."""
    arch, base = _canonical(arch), _canonical(base)
    differ = [f.name for f in fields(Architecture) if f.name != "name" and getattr(base, f.name) != getattr(arch, f.name)]
    if any(k not in SHAPE_FLAGS and k not in BOOL_FLAGS for k in differ):
        return None
    return [f"{SHAPE_FLAGS[k]}={getattr(arch, k)}" if k in SHAPE_FLAGS
            else f"--{'' if getattr(arch, k) else 'no-'}{BOOL_FLAGS[k]}" for k in differ]


def _canonical(arch: Architecture) -> Architecture:
    """``arch`` with its MLP width written out (0 stands for 4 x hidden: ``Architecture.ffn``)."""
    return replace(arch, ffn_hidden=arch.ffn)


def pipeline_layout_text(chunks: tuple[int, ...], mtp: int = 0) -> str:
    """A chunk split as Megatron-LM's layout string (``stages.megatron_pipeline_layout`` reads it back): the
    embedding opens the first chunk, the loss closes the last, multi-token-prediction layers end it."""
    parts = [f"t*{n}" for n in chunks]
    last = chunks[-1] - mtp
    parts[-1] = (f"t*{last}" if last else "") + (f"m*{mtp}" if mtp else "")
    return f"E{'|'.join(parts)}L"


def layout_args(layout: Layout, moe: bool, mtp: int = 0) -> list[str] | None:
    """The mesh, batch, schedule, memory and software flags of ``layout``, those at the command's defaults left out
    (``simulate_args`` checks the result); None where no ``--software`` and flag adjustments give its
    software-set fields (``software.software_of``)."""
    software = software_of(layout, moe=moe)
    if not software:
        return None
    by_software = SOFTWARE[software.split()[1]].tp_flags(layout.tp)
    if "--sequence-parallel" in software:
        by_software["sequence_parallel"] = True
    mbs = layout.global_batch_size // (layout.dp * layout.micro_batches)
    given = {"gpus": layout.world_size, "tp": layout.tp, "pp": layout.pp, "cp": layout.cp, "ep": layout.ep,
             "replicate": layout.replicate, "micro-batch": mbs, "global-batch": layout.global_batch_size,
             "schedule": layout.schedule.value, "virtual-stages": layout.virtual_stages, "zero": layout.zero,
             "recompute": layout.recompute.value, "recompute-every": layout.recompute_every,
             "attention": layout.attention}
    defaults = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "replicate": 1, "micro-batch": 1, "schedule": "1f1b",
                "virtual-stages": 1, "zero": 0, "recompute": "none", "recompute-every": 1, "attention": "flash"}
    args = [f"--{k}={v}" for k, v in given.items() if defaults.get(k) != v]
    args += software.split()
    if layout.sequence_parallel != by_software["sequence_parallel"]:
        args.append("--sequence-parallel" if layout.sequence_parallel else "--no-sequence-parallel")
    args += ["--tp-comm-overlap"] if layout.tp_comm_overlap and not by_software["tp_comm_overlap"] else []
    args += [f"--recompute-modules={','.join(layout.recompute_modules)}"] if layout.recompute_modules else []
    args += [f"--expert-tp={layout.expert_tp}"] if layout.expert_tp else []
    args += [f"--moe-imbalance={layout.moe_imbalance}"] if layout.moe_imbalance != 1 else []
    args += ["--overlap-moe-expert-parallel-comm"] if layout.moe_a2a_overlap else []
    sw = SOFTWARE[software.split()[1]]
    if layout.fp8_all_gather != sw.gathers_fp8(zero=layout.zero, precision=layout.precision, fp8_scaling=layout.fp8_scaling):
        args.append("--fp8-all-gather" if layout.fp8_all_gather else "--no-fp8-all-gather")
    if layout.precision.gemm_dtype == "fp8" and layout.fp8_scaling != sw.fp8_scaling:
        args.append(f"--fp8-scaling={layout.fp8_scaling}")
    args += [f"--pipeline-layout={pipeline_layout_text(layout.chunk_layers, mtp)}"] if layout.chunk_layers else []
    return args


def simulate_args(run: Run, build_row: Callable[[list[str]], tuple]) -> list[str] | None:
    """The ``parbench simulate`` arguments that reproduce ``run`` exactly (its architecture, cluster and layout, so
    its prediction), or None where the command cannot state it (``command_args``)."""
    return command_args(run.arch, run.layout, build_row, cluster=run.cluster)


def command_args(arch: Architecture, layout: Layout, build_row: Callable[[list[str]], tuple], *, cluster: str,
                 cluster_name: str = "", models: tuple[list[str], ...] = (), extra: tuple[str, ...] = ()) -> list[str] | None:
    """The ``parbench simulate`` arguments that build exactly ``arch`` and ``layout`` on ``--cluster=cluster`` (whose
    preset or file is named ``cluster_name``, by default ``cluster``), or None where no command line states them.
    ``build_row(argv)``: (cluster, model, layout, ...) as ``parbench simulate ARGV`` builds them
    (``parbench.commands.simulate.command_layout``, which stops before the prediction, or ``command_prediction``).
    The model's flags are each of ``models`` (the user's own form: a preset, a Hugging Face config, a runner
    workload, with the shape flags that change it), then ``arch_args``'s; ``extra`` flags
    pass as given (``--rank-spread``, ``--results-dir``). A line is returned only once the command, run, has built
    the same architecture, cluster and layout: the precision it takes from trying each."""
    flags = layout_args(layout, moe=bool(arch.experts), mtp=arch.mtp_layers)
    if flags is None:
        return None
    for model in (m for m in (*models, arch_args(arch)) if m is not None):
        for precision in PRECISIONS:
            argv = [*model, f"--cluster={cluster}", *extra, *flags, f"--precision={precision}"]
            try:
                built_cluster, spec, built = build_row(argv)[:3]
            except ConfigError:
                continue
            if not arch.experts:  # how a MoE block weights its experts: no field of a dense model's step
                built = replace(built, moe_saved_outputs=layout.moe_saved_outputs)
            same_model = spec.arch is not None and _canonical(replace(spec.arch, name=arch.name)) == _canonical(arch)
            if built_cluster.name == (cluster_name or cluster) and same_model and built == layout:
                return argv
    return None


def rows_toml(runs: list[Run], build_row: Callable[[list[str]], tuple]) -> str:
    """``runs`` as a rows file (``parbench.sim.rows``): each one the command can state (``simulate_args``) as a
    ``[[row]]``, the others listed in a comment."""
    out, left, seen = [], [], {}
    for run in runs:
        argv = simulate_args(run, build_row)
        if argv is None:
            left.append(run.name)
            continue
        seen[run.name] = seen.get(run.name, 0) + 1  # a rows file's names are unique: a source's repeats numbered
        name = run.name if seen[run.name] == 1 else f"{run.name} [{seen[run.name]}]"
        row = {"name": name, "source": run.source, "table": run.table, "series": run.series,
               "simulate": shlex.join(argv), "metric": run.metric, "value": run.value}
        if run.memory_gib:
            row["memory_gib"] = run.memory_gib
        out.append("[[row]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in row.items() if v != ""))
    head = (f"# {len(out)} published runs as parbench simulate command lines (parbench validate --rows reads this file)"
            + (f"; {len(left)} the command cannot state: " + "; ".join(left) if left else "") + "\n")
    return head + "\n".join(out)
