"""The result record: schema, atomic write, and ``load`` (the one way anything reads results).

Layout of a results directory::

    <dir>/runs/<run_id>.json            one record per run (written by rename: never half a file)
    <dir>/sweeps/<sweep_id>/manifest.json
    <dir>/<anything>/runs/<run_id>.json  e.g. the committed reference sweep in results/reference/

Records are flat JSON objects: config columns beside metric columns, units in field names
(nothing is parsed back out of a file name). Nested values (per-rank lists, per-op breakdowns, loss and step-time
series) stay nested; ``load`` keeps them as Python objects in object columns.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import platform
import socket
import subprocess
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any, Iterator

from parbench.config import ConfigError

SCHEMA_VERSION = 1

# name -> description; the README's schema table is generated from this (tests check it).
SCHEMA: dict[str, str] = {
    # identity
    "schema_version": "record schema version",
    "run_id": "unique id of this run (hex)",
    "point_key": "hash of the measured configuration (timeout excluded); equal keys = same measurement",
    "sweep_id": "sweep that produced the run, or null for `parbench run`",
    "repeat": "repeat index within a sweep point (0-based)",
    "status": "ok | failed | timeout | diverged (the loss became NaN or infinite; figures kept)",
    "error": "error message of a failed/timed-out run (with the rank), else null",
    "failed_rank": "rank that failed first, else null",
    # config
    "strategy": "single | ddp | zero1 | zero2 | fsdp | tp | pipeline | hybrid | ps | ep",
    "world_size": "number of rank processes",
    "backend": "gloo | nccl | mpi",
    "device": "cpu | cuda",
    "precision": "fp32 | tf32 | bf16 (bf16: autocast compute, bf16 gradient all-reduce / FSDP traffic)",
    "workload": "mlp | transformer | moe | hf-llama | hf-gpt2 | a plugin",
    "layers": "workload layers (mlp hidden layers / transformer blocks)",
    "hidden": "hidden width",
    "heads": "attention heads (transformer)",
    "seq_len": "tokens per sample (transformer)",
    "vocab_size": "vocabulary (transformer)",
    "dataset": "synthetic | digits | mnist",
    "global_batch_size": "samples per optimizer step, all ranks together",
    "micro_batches": "micro-batches per step (pipeline)",
    "schedule": "pipeline schedule (gpipe | 1f1b | interleaved1f1b), null if no pipeline",
    "virtual_stages": "model chunks per pipeline rank",
    "dp": "data-parallel degree",
    "tp": "tensor-parallel degree",
    "pp": "pipeline-parallel degree",
    "dp_mode": "hybrid: ddp | fsdp on the dp mesh dimension",
    "servers": "parameter-server ranks (ps)",
    "steps": "timed steps",
    "warmup_steps": "untimed warm-up steps before them",
    "seed": "seed of model init and data",
    "threads_per_rank": "torch intra-op threads per rank",
    "data_mode": "sharded | rank0",
    "ep": "expert-parallel degree (ep: experts sharded over ep consecutive ranks; 1 otherwise; null in older records)",
    "experts": "moe: experts per MoE layer, else null",
    "top_k": "moe: experts each token is routed to, else null",
    "capacity_factor": "moe: capacity ceil(factor x seq_len x top_k / experts) assignments per expert per sequence, else null",
    "moe_every": "moe: every moe_every-th block has experts, else null",
    "router": "moe: learned (softmax top-k) | balanced (forced uniform routing), else null",
    "aux_loss_weight": "moe: weight of the Switch load-balancing loss (in the gradient, not in `losses`), else null",
    "data_in_step": "true: each step's input was made inside the timed step; false: before it (time_data_s apart)",
    "loader_workers": "DataLoader worker processes per rank (Dataset workloads; 0 = in the rank's process)",
    "config": "the full RunConfig as a dict (to rerun exactly)",
    # time
    "throughput_samples_per_s": "global_batch_size x steps / timed wall time",
    "throughput_tokens_per_s": "transformer: samples/s x seq_len; else null",
    "step_time_s_median": "median step time (steps delimited by barriers)",
    "step_time_s_p10": "10th percentile step time",
    "step_time_s_p90": "90th percentile step time",
    "step_time_s_iqr": "interquartile range of step times",
    "step_times_s": "every timed step (list)",
    "compute_time_s_median": "ddp: median step time under no_sync (no gradient communication); else null",
    "exposed_comm_time_s": "step_time_s_median - compute_time_s_median, else null",
    "time_data_s": "seconds per step a rank took to make its input, median over timed steps, slowest rank; "
                   "inside step_time_s only when data_in_step",
    "model_flops_per_step": "model FLOPs of one optimizer step (forward + backward = 3x forward)",
    "achieved_flops_per_s_per_rank": "model_flops_per_step / world_size / step_time_s_median",
    "mfu": "achieved / peak FLOP/s of the device at the run's precision where the peak is known, else null",
    "mfu_dtype": "the dtype whose peak is MFU's denominator (the run's precision)",
    "mfu_peak_flops": "that peak: dense FLOP/s per device from its datasheet, null on CPU or an unknown GPU",
    "mfu_peak_source": "where the peak comes from (datasheet and column), or why there is none",
    # step-time breakdown: seconds per step in the traced step of median duration, on the busiest
    # rank (most compute + optimizer time); they sum to traced_step_time_s (parbench.metrics.breakdown)
    "time_compute_s": "main thread running operators (forward, backward, recompute), outside the optimizer; on a GPU the device running kernels, copies or memsets (NCCL's aside) launched outside it",
    "time_comm_exposed_data_s": "waiting on data-category communication that no operator overlapped",
    "time_comm_exposed_parameter_s": "waiting on parameter communication (gradients, parameters) not overlapped",
    "time_comm_exposed_intermediate_s": "waiting on intermediate communication (activations, their gradients) not overlapped",
    "time_bubble_s": "idle waiting for a peer: a send/recv whose peer had not issued its side yet, and the end-of-step wait for the slowest rank",
    "time_optimizer_s": "inside Optimizer.step / zero_grad (on a GPU the kernels they launched, and their host time where the device is idle); its communication, e.g. ZeRO-1's broadcasts, counts as comm",
    "time_other_s": "the rest: Python between operators, data glue, nothing in flight (on a GPU: the device idle)",
    "time_comm_exposed_s": "sum of the three exposed-communication terms",
    "traced_step_time_s": "duration of the traced step the terms come from (from the barrier that starts it to the return of the last rank's step)",
    "traced_steps": "untimed traced steps after the timed ones (torch.profiler + comm timing); null in older records",
    "breakdown_rank": "rank whose terms are the columns (the most compute + optimizer time)",
    "bubble_fraction": "time_bubble_s / traced_step_time_s, mean over ranks ((p-1)/(m+p-1) for GPipe and 1F1B)",
    "breakdown_per_rank": "list of per-rank dicts: rank, role, the seven terms, traced_step_time_s and time_data_s",
    "trace_file": "Chrome trace of the traced steps, relative to the results directory (traces/<run_id>.json), or null",
    # memory (max over ranks; per-rank values in per_rank)
    "peak_rss_bytes": "peak resident set size of a rank process (max over ranks)",
    "mem_param_bytes": "bytes of parameters held by a rank (max over ranks)",
    "mem_grad_bytes": "bytes of gradients held by a rank",
    "mem_optim_bytes": "bytes of optimizer state held by a rank",
    "mem_activation_bytes": "peak bytes of activations saved for backward on a rank",
    "cuda_allocated_peak_bytes": "torch.cuda.max_memory_allocated (GPU runs), else null",
    "cuda_reserved_peak_bytes": "torch.cuda.max_memory_reserved (GPU runs), else null",
    "cuda_device_used_bytes": "GPU runs: device memory in use after the timed steps (mem_get_info total - free: "
                              "adds what torch's allocator does not see, NCCL buffers and the CUDA context), else null",
    "cuda_device_total_bytes": "GPU runs: the device's memory capacity (mem_get_info), else null",
    # communication, per rank per optimizer step, bytes a rank sends (nccl-tests conventions)
    "comm_data_bytes_per_step": "input samples and labels moved between ranks (max over ranks)",
    "comm_parameter_bytes_per_step": "gradients / parameters: all-reduce, all-gather, reduce-scatter, ps push/pull",
    "comm_intermediate_bytes_per_step": "activations and their gradients between model-parallel ranks",
    "comm_total_bytes_per_step": "sum of the three categories on the busiest rank",
    "comm_wire_bytes_per_step": "bytes gloo really sends (its reduce-scatter is an all-reduce), max over ranks; "
                                "null under nccl, which chooses ring or tree itself",
    "comm_ops": "per op and category: count, payload_bytes, sent_bytes, wire_bytes per step (busiest rank)",
    "os_write_bytes_per_step": "bytes the rank wrote per step per /proc/self/io wchar (max over ranks); null under "
                               "nccl, whose NVLink / shared-memory / InfiniBand transfers make no write syscalls",
    # mixture of experts (null for dense workloads and in older records)
    "comm_moe_dispatch_bytes_per_step": "moe: all-to-all bytes a rank sends towards experts (tokens forward, gradients of combined outputs backward), max over ranks; part of comm_intermediate_bytes_per_step",
    "comm_moe_combine_bytes_per_step": "moe: all-to-all bytes a rank sends back from its experts (outputs forward, gradients of dispatched tokens backward); intermediate",
    "comm_moe_counts_bytes_per_step": "moe: bytes of the per-expert token counts exchanged before each token all-to-all (int64, split sizes); intermediate: routing metadata sized by the activations",
    "comm_expert_grad_bytes_per_step": "ep: expert-gradient all-reduce over the ranks holding the same experts; parameter",
    "comm_non_expert_grad_bytes_per_step": "ep: non-expert gradient all-reduce over every rank; parameter",
    "moe_routed_tokens_per_expert_per_step": "moe: [step][moe layer][expert] token assignments the routers chose (before capacity), all ranks",
    "moe_tokens_per_expert_per_step": "moe: [step][moe layer][expert] assignments each expert received (after capacity), all ranks",
    "moe_tokens_per_expert_per_rank": "moe: [rank][expert] assignments rank r sent to expert e in the probe step, summed over moe layers",
    "moe_load_imbalance_per_step": "moe: per step, max over moe layers of max_e / mean_e of the routed assignments (1 = balanced)",
    "moe_load_imbalance_median": "moe: median of moe_load_imbalance_per_step",
    "moe_dropped_fraction_per_step": "moe: per step, share of routed assignments dropped by the capacity",
    "moe_dropped_fraction": "moe: share of routed assignments dropped over every step",
    "mem_expert_param_bytes": "moe: bytes of expert parameters a rank holds (non-expert = mem_param_bytes minus this), else null",
    "mem_expert_grad_bytes": "moe: bytes of expert gradients a rank holds, else null",
    "mem_expert_optim_bytes": "moe: bytes of optimizer state of expert parameters a rank holds, else null",
    # correctness
    "losses": "global loss after every step the run took: warm-up, probe and timed (list)",
    "loss_final": "last loss",
    "loss_max_abs_diff_vs_reference": "max |loss - single-process loss| over all steps (same global batch and seed); NaN or inf when a loss is",
    "reference_error": "why the single-process reference could not run (e.g. the model does not fit one device), "
                       "else null; the reference runs as one rank on the run's device and precision",
    "loss_tolerance": "largest diff still called equivalent at this precision (fp32 1e-5, tf32 1e-2, bf16 5e-2)",
    # per rank
    "per_rank": "list of per-rank dicts: rank, role, memory and communication figures",
    # multi-node (torchrun launches; null for single-host runs)
    "launcher": "torchrun for multi-node runs, else null (torch.multiprocessing forkserver)",
    "nodes": "number of nodes (multi-node runs)",
    "ranks_per_node": "ranks per node (multi-node runs)",
    "node_rank": "--node-rank of the node that wrote the record",
    "node_of_rank": "node index of every global rank (ranks with equal entries share a node)",
    "node_hosts": "host name of every node",
    "comm_intra_node_bytes_per_step": "bytes a rank sends to ranks on its own node (max over ranks)",
    "comm_inter_node_bytes_per_step": "bytes a rank sends to other nodes (max over ranks)",
    "comm_inter_node_bytes_per_step_by_category": "the busiest inter-node rank's split by category",
    "cluster_emulated": "true when run inside `parbench cluster run` (network namespaces)",
    "cluster_topology": "emulated topology (veth pair or bridge)",
    "cluster_link_rate_bit_per_s": "tbf rate of the emulated links, null if unshaped",
    "cluster_node_addresses": "private address of every emulated node",
    # provenance and overhead
    "parbench_version": "parbench version",
    "git_commit": "git commit of the parbench checkout, or null",
    "torch_version": "torch.__version__",
    "python_version": "platform.python_version()",
    "hostname": "host that ran rank 0",
    "cpu_model": "CPU model name",
    "host_cpus": "CPUs the run's processes may run on (the affinity mask) on the host that wrote the record",
    "oversubscribed": "CPU runs: ranks on one host x threads per rank > host_cpus (the ranks take turns on the "
                      "cores: compare timings as ratios within a run); null for GPU runs",
    "gpu_name": "GPU name, or null",
    "created_at": "UTC time the record was written (ISO 8601)",
    "wall_time_s": "the whole run, launch to teardown",
    "overhead_s": "wall_time_s minus the timed steps: launch, rendezvous, build, warm-up, teardown",
}

STATUSES = ("ok", "failed", "timeout", "diverged")

# JSON types of the fields that readers sort, group and compute with. A record whose field has
# another type (``world_size: "two"``, a list as ``sweep_id``) is skipped with a warning naming
# the file and the field, as a corrupt file is. null is always allowed (older records lack fields).
_STR, _INT, _NUM, _BOOL = (str,), (int,), (int, float), (bool,)
NESTED_NUMBERS = {"moe_routed_tokens_per_expert_per_step": 3, "moe_tokens_per_expert_per_step": 3,
                  "moe_tokens_per_expert_per_rank": 2}
"""Arrays of numbers by depth ([step][moe layer][expert], [rank][expert]): every inner list non-empty
(the MoE view's heatmap labels its columns from the first row)."""
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("run_id", "point_key", "sweep_id", "status", "error", "strategy", "backend", "device",
                     "workload", "dataset", "schedule", "dp_mode", "data_mode", "created_at", "hostname",
                     "parbench_version", "git_commit", "torch_version", "trace_file", "precision", "router",
                     "mfu_dtype", "mfu_peak_source", "reference_error", "launcher", "cluster_topology",
                     "python_version", "cpu_model", "gpu_name"), _STR),
    **dict.fromkeys(("schema_version", "repeat", "failed_rank", "world_size", "layers", "hidden", "heads",
                     "seq_len", "vocab_size", "global_batch_size", "micro_batches", "virtual_stages", "dp",
                     "tp", "pp", "servers", "steps", "warmup_steps", "seed", "threads_per_rank", "traced_steps",
                     "breakdown_rank", "ep", "experts", "top_k", "moe_every", "loader_workers", "nodes",
                     "ranks_per_node", "node_rank", "host_cpus"), _INT),
    **dict.fromkeys(("capacity_factor", "aux_loss_weight", "time_data_s", "mfu_peak_flops", "loss_tolerance",
                     "cuda_allocated_peak_bytes", "cuda_reserved_peak_bytes", "cuda_device_used_bytes",
                     "cuda_device_total_bytes", "comm_moe_dispatch_bytes_per_step", "comm_moe_combine_bytes_per_step",
                     "comm_moe_counts_bytes_per_step", "comm_expert_grad_bytes_per_step",
                     "comm_non_expert_grad_bytes_per_step", "moe_load_imbalance_median", "moe_dropped_fraction",
                     "mem_expert_param_bytes", "mem_expert_grad_bytes", "mem_expert_optim_bytes",
                     "comm_intra_node_bytes_per_step", "comm_inter_node_bytes_per_step",
                     "cluster_link_rate_bit_per_s"), _NUM),
    **dict.fromkeys(("data_in_step", "cluster_emulated", "oversubscribed"), _BOOL),
    **dict.fromkeys(("node_of_rank", "node_hosts", "cluster_node_addresses"), (list,)),
    "comm_inter_node_bytes_per_step_by_category": (dict,),
    **dict.fromkeys(("wall_time_s", "overhead_s", "throughput_samples_per_s", "throughput_tokens_per_s",
                     "step_time_s_median", "step_time_s_p10", "step_time_s_p90", "step_time_s_iqr",
                     "compute_time_s_median", "exposed_comm_time_s", "model_flops_per_step",
                     "achieved_flops_per_s_per_rank", "mfu", "peak_rss_bytes", "mem_param_bytes",
                     "mem_grad_bytes", "mem_optim_bytes", "mem_activation_bytes", "comm_data_bytes_per_step",
                     "comm_parameter_bytes_per_step", "comm_intermediate_bytes_per_step",
                     "comm_total_bytes_per_step", "comm_wire_bytes_per_step", "os_write_bytes_per_step",
                     "loss_final", "loss_max_abs_diff_vs_reference", "time_compute_s",
                     "time_comm_exposed_data_s", "time_comm_exposed_parameter_s", "time_comm_exposed_intermediate_s",
                     "time_bubble_s", "time_optimizer_s", "time_other_s", "time_comm_exposed_s",
                     "traced_step_time_s", "bubble_fraction"), _NUM),
    **dict.fromkeys(("losses", "step_times_s", "per_rank", "breakdown_per_rank", "moe_load_imbalance_per_step",
                     "moe_dropped_fraction_per_step", *NESTED_NUMBERS), (list,)),
    **dict.fromkeys(("config", "comm_ops"), (dict,)),
}
_KIND = {_STR: "a string", _INT: "an integer", _NUM: "a number", _BOOL: "true or false", (list,): "a list",
         (dict,): "an object"}
ITEM_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "step_times_s": (_NUM, "numbers"), "losses": ((*_NUM, type(None)), "numbers or null"),
    "moe_load_imbalance_per_step": (_NUM, "numbers"), "moe_dropped_fraction_per_step": (_NUM, "numbers"),
    "node_of_rank": (_INT, "integers"), "node_hosts": (_STR, "strings"), "cluster_node_addresses": (_STR, "strings"),
    "per_rank": ((dict,), "objects"), "breakdown_per_rank": ((dict,), "objects")}
"""What the list fields hold (a loss is null where no rank computed one)."""
RANK_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "rank": _INT, "role": _STR, "device_name": _STR, "losses": (list,),
    **dict.fromkeys(("comm_ops", "comm_bytes_by_label", "extra"), (dict,)), "moe_routing": (list,),
    **dict.fromkeys(("comm_data_bytes_per_step", "comm_parameter_bytes_per_step", "comm_intermediate_bytes_per_step",
                     "comm_wire_bytes_per_step", "os_write_bytes_per_step", "peak_rss_bytes", "mem_param_bytes",
                     "mem_grad_bytes", "mem_optim_bytes", "mem_activation_bytes", "mem_expert_param_bytes",
                     "mem_expert_grad_bytes", "mem_expert_optim_bytes", "cuda_allocated_peak_bytes",
                     "cuda_reserved_peak_bytes", "cuda_device_total_bytes", "cuda_device_used_bytes",
                     "time_data_s", "time_compute_s", "time_comm_exposed_data_s",
                     "time_comm_exposed_parameter_s", "time_comm_exposed_intermediate_s", "time_bubble_s",
                     "time_optimizer_s", "time_other_s", "traced_step_time_s"), _NUM),
}
"""Types of the fields inside ``per_rank`` and ``breakdown_per_rank`` entries (the charts sum and plot
them); null is allowed, as at the top level."""


IDENTITY_FIELDS = ("strategy", "world_size", "workload", "config")
"""What every record states, a failed run's too (``parbench.record``): without them a run cannot be
grouped, compared or predicted."""


def _is_kind(value: Any, kinds: tuple[type, ...]) -> bool:
    """JSON's true and false are a kind of their own, not numbers (Python's bool is an int)."""
    return isinstance(value, kinds) and (not isinstance(value, bool) or bool in kinds)


def _is_array(value: Any, depth: int) -> bool:
    if depth == 0:
        return _is_kind(value, _NUM)
    return isinstance(value, list) and len(value) > 0 and all(_is_array(v, depth - 1) for v in value)


def field_problem(rec: dict[str, Any]) -> str | None:
    """Why a parsed record cannot be used (a missing identity field, the first wrong-typed field), else None."""
    missing = [k for k in IDENTITY_FIELDS if rec.get(k) is None]
    if missing:
        return f"field(s) {', '.join(map(repr, missing))} missing: every run record states them"
    for key, kinds in FIELD_TYPES.items():
        value = rec.get(key)
        if value is None:
            continue
        if not _is_kind(value, kinds):
            return f"field {key!r} is {value!r} ({type(value).__name__}), expected {_KIND[kinds]}"
    for key, (kinds, what) in ITEM_TYPES.items():
        bad = [x for x in rec.get(key) or () if not _is_kind(x, kinds)]
        if bad:
            return f"field {key!r} holds {bad[0]!r} ({type(bad[0]).__name__}), expected {what}"
    for key in ("per_rank", "breakdown_per_rank"):
        for i, entry in enumerate(rec.get(key) or ()):
            for field, kinds in RANK_FIELD_TYPES.items():
                value = entry.get(field)
                if value is not None and not _is_kind(value, kinds):
                    return (f"field '{key}[{i}].{field}' is {value!r} ({type(value).__name__}), "
                            f"expected {_KIND[kinds]}")
    for key, depth in NESTED_NUMBERS.items():
        if rec.get(key) is not None and not _is_array(rec[key], depth):
            return f"field {key!r} is not a {depth}-deep array of numbers with no empty row"
    for op, v in (rec.get("comm_ops") or {}).items():
        if not isinstance(v, dict) or any(isinstance(x, bool) or not isinstance(x, _NUM) for x in v.values()):
            return f"field 'comm_ops' holds {op!r}: {v!r}, expected an object of numbers (count, bytes)"
    if any(t < 0 for t in rec.get("step_times_s") or ()):
        return f"field 'step_times_s' holds a negative time ({min(rec['step_times_s'])})"
    if rec["world_size"] < 1:
        return f"field 'world_size' is {rec['world_size']}, expected >= 1"
    if rec["status"] not in STATUSES:
        return f"field 'status' is {rec['status']!r}, expected one of {', '.join(STATUSES)}"
    return None


def new_run_id() -> str:
    return uuid.uuid4().hex


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any, **dump_options: Any) -> None:
    """Write through a temporary file and rename: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, default=_jsonable, **dump_options)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jsonable(o: Any) -> Any:
    if hasattr(o, "value"):
        return o.value
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


MIN_FREE_BYTES = 256 * 2**10
"""Free space a results directory must have before a run starts: a record is ~7 KB at world size 4
and a sweep manifest ~26 KB for 72 points (the committed reference sweep), so this leaves room for
dozens of records. A disk that fills up later still ends the run or sweep with one clear line."""


def check_writable(results_dir: str | Path) -> None:
    """Raise ``ConfigError`` (exit 2) unless records can be written under ``results_dir``. Creates nothing
    that stays: a probe file goes into the nearest directory that exists and is removed at once."""
    root = Path(results_dir)
    target = next(p for p in (root / "runs", root, *root.parents) if p.exists() or p == Path(p.anchor))
    if not target.is_dir():
        where = "is a file" if target in (root, root / "runs") else f"cannot be created: {target} is a file"
        raise ConfigError(f"results directory {root} {where}, not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=target, prefix=".parbench-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"results directory {root} is not writable: {target}: {exc.strerror}") from None
    stat = os.statvfs(target)
    if stat.f_bavail * stat.f_frsize < MIN_FREE_BYTES:
        raise ConfigError(f"results directory {root}: only {stat.f_bavail * stat.f_frsize // 1024} KiB free "
                              f"on its file system (a run needs {MIN_FREE_BYTES // 1024} KiB to be sure its record fits)")


STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Errors that mean no later record can be written either: a disk or quota full, a read-only file system."""


def is_storage_error(exc: OSError) -> bool:
    return exc.errno in STORAGE_ERRNOS


def check_readable(results_dir: str | Path) -> Path:
    """The results directory as a Path; ConfigError (exit 2) when it is missing or not a directory."""
    root = Path(results_dir)
    if not root.exists():
        raise ConfigError(f"results directory {root} does not exist (parbench run and parbench sweep write one)")
    if not root.is_dir():
        raise ConfigError(f"results directory {root} is a file, not a directory")
    return root


def check_output_file(path: str | Path, what: str) -> Path:
    """A file to write: ConfigError (exit 2) when it is a directory or its directory does not exist."""
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{what} {out} is a directory; give a file name")
    if not out.parent.is_dir():
        raise ConfigError(f"{what} {out}: directory {out.parent} does not exist")
    return out


def write_record(results_dir: str | Path, record: dict[str, Any]) -> Path:
    path = Path(results_dir) / "runs" / f"{record['run_id']}.json"
    write_json_atomic(path, record)
    return path


def iter_record_files(results_dir: str | Path) -> Iterator[Path]:
    """Every ``runs/*.json`` under the directory, at any depth."""
    root = Path(results_dir)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("runs/*.json")):
        if path.is_file():
            yield path


def read_records(results_dir: str | Path, *, warn: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems): a corrupt file is reported in ``problems`` and skipped, never raised."""
    records, problems = [], []
    root = Path(results_dir)
    for path in iter_record_files(root):
        try:
            rec = json.loads(path.read_text())
            if not isinstance(rec, dict) or "run_id" not in rec or "status" not in rec:
                raise ValueError("not a parbench run record")
            problem = field_problem(rec)
            if problem:
                raise ValueError(problem)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        rec["source"] = str(path.parent.parent.relative_to(root)) if path.parent.parent != root else "."
        records.append(rec)
    if warn:
        for p in problems:
            warnings.warn(f"skipped corrupt result record {p}", stacklevel=2)
    return records, problems


def own_records(results_dir: str | Path) -> Iterator[dict[str, Any]]:
    """The readable records directly in ``<dir>/runs/``, not those of other sources under the
    directory (a committed reference sweep); a corrupt file is no record (``parbench results`` names it)."""
    for path in (Path(results_dir) / "runs").glob("*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict):
            yield rec


def recorded_ok(results_dir: str | Path, sweep_id: str) -> set[tuple[str, int]]:
    """(point_key, repeat) of the sweep's ok records in ``<dir>/runs/``: what a resumed sweep skips."""
    return {(rec.get("point_key"), rec.get("repeat")) for rec in own_records(results_dir)
            if rec.get("sweep_id") == sweep_id and rec.get("status") == "ok"}


def load(path: str | Path = "results", *, problems: list[str] | None = None) -> "pandas.DataFrame":  # noqa: F821
    """One row per run, columns as in ``SCHEMA`` (plus ``source``: the folder the record came from).

    Corrupt records are skipped with a warning, or listed in ``problems`` (``path: why``) when it is
    given. An empty or missing directory gives an empty frame that still has every schema column.
    """
    import pandas as pd

    records, found = read_records(path, warn=problems is None)
    if problems is not None:
        problems += found
    columns = list(SCHEMA) + ["source"]
    frame = pd.DataFrame.from_records(records)
    missing = [c for c in columns if c not in frame.columns]  # added at once: no fragmented frame
    frame = pd.concat([frame, pd.DataFrame({c: [None] * len(frame) for c in missing}, index=frame.index)], axis=1)
    return frame[columns + [c for c in frame.columns if c not in columns]]


def export(frame: "pandas.DataFrame", out: str | Path) -> Path:  # noqa: F821
    """CSV or Parquet by suffix; nested columns become JSON strings."""
    out = Path(out)
    flat = frame.copy()
    for col in flat.columns:
        if flat[col].map(lambda v: isinstance(v, (list, dict))).any():
            flat[col] = flat[col].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    if out.suffix == ".csv":
        flat.to_csv(out, index=False)
    elif out.suffix == ".parquet":
        flat.to_parquet(out, index=False)
    else:
        raise ValueError(f"export to {out.name}: use a .csv or .parquet file name")
    return out


# --- provenance ---------------------------------------------------------------------------


def provenance() -> dict[str, Any]:
    """Where and with what a record was measured: parbench version, git commit, torch, host, date."""
    from parbench import __version__

    return {
        "parbench_version": __version__,
        "git_commit": git_commit(),
        "torch_version": _torch_version(),
        "python_version": platform.python_version(),
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "host_cpus": host_cpus(),
        "gpu_name": _gpu_name(),
        "created_at": now_iso(),
    }


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def host_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one; a rank inherits it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def oversubscribed(ranks_here: int, threads_per_rank: int, device: str) -> bool | None:
    """Whether a CPU run's ranks on one host asked for more threads than the host has CPUs (``host_cpus``): its
    ranks then take turns on the cores, and its timings are comparable as ratios within one run only. None for a
    GPU run, whose compute is on the devices."""
    return ranks_here * threads_per_rank > host_cpus() if device == "cpu" else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def _gpu_name() -> str | None:
    """GPU 0 as nvidia-smi names it: asking torch would create a CUDA context in this process."""
    from parbench.devices import list_gpus

    gpus = list_gpus()
    return gpus[0].name if gpus else None
