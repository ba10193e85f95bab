"""What this machine and this install can run: asked in the parent, before any rank is spawned.

``RunConfig.__post_init__`` checks the configuration against itself (pure rules); the checks here
ask the host (memory for the ranks), torch (backend and device availability), the strategy
registry and the workload itself (built once).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from parbench import devices, strategies, workloads
from parbench.config import RunConfig
from parbench.names import ConfigError
from parbench.workloads.plugins import plugin_deadline


def check(cfg: RunConfig, *, ranks_here: int | None = None) -> None:
    """Every check before a launch; ``ranks_here``: the ranks this host starts (default: all)."""
    check_host_capacity(cfg.world_size if ranks_here is None else ranks_here, cfg.device)  # first: the sweep's order
    check_environment(cfg, ranks_here=ranks_here)
    check_implemented(cfg)


def visible_gpus(gpus: list[devices.Gpu]) -> list[devices.Gpu]:
    """The GPUs the ranks see, in their order: nvidia-smi lists every GPU, ``CUDA_VISIBLE_DEVICES`` (as indices)
    picks and orders those CUDA numbers 0, 1, ...; unset, or given as UUIDs, every GPU as listed."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not all(v.strip().isdigit() for v in visible.split(",") if v.strip()):
        return gpus
    by_index = {g.index: g for g in gpus}
    return [by_index[int(v)] for v in visible.split(",") if v.strip() and int(v) in by_index]


def check_tensor_cores(precision: str, gpus: list[devices.Gpu]) -> None:
    """A bf16 or tf32 run on GPUs whose tensor cores take that type: a GPU whose datasheet has no such peak (Volta:
    fp16 and fp32 alone) would run bf16 emulated and tf32 as plain fp32, under a label and an MFU that are not what
    ran, so it is refused before any rank starts. GPUs without a datasheet entry are not judged."""
    for gpu in gpus:
        sheet = devices.datasheet(gpu.name)
        if sheet is not None and precision not in sheet.peak_flops:
            raise ConfigError(f"precision={precision}: GPU {gpu.index} ({gpu.name}) has no {precision} tensor cores "
                              f"(the {sheet.model} datasheet gives {', '.join(sheet.peak_flops)}); use fp32")


def check_implemented(cfg: RunConfig) -> None:
    """The strategy has a builder in the registry."""
    if cfg.strategy not in strategies.BUILDERS:
        have = ", ".join(s.value for s in strategies.BUILDERS)
        raise ConfigError(f"strategy={cfg.strategy.value} is not implemented yet; implemented: {have}")


RANK_UNIQUE_MEMORY_BYTES = 32 * 2**20
"""Memory one CPU rank needs beyond the pages it shares with the process server it forks from:
29-33 MiB unique set size (USS) measured per rank of the default mlp under ddp at world size 4,
47-52 MiB for the default transformer (torch 2.13 CPU, gloo). The smaller figure is the floor:
a world size that does not fit even so cannot run on the host."""
SERVER_MEMORY_BYTES = 218 * 2**20
"""USS of the process server itself (it has imported torch once for every rank), measured alike."""


def host_memory_bytes() -> int:
    """Physical memory of this host (sysconf: total pages x page size)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def host_rank_limit(memory_bytes: int | None = None) -> int:
    """The most CPU ranks this host's memory can hold: (memory - server) / rank floor."""
    memory = host_memory_bytes() if memory_bytes is None else memory_bytes
    return max((memory - SERVER_MEMORY_BYTES) // RANK_UNIQUE_MEMORY_BYTES, 0)


def check_host_capacity(ranks: int, device: str = "cpu") -> None:
    """``ranks`` CPU rank processes on this host must fit its memory (a GPU run needs one GPU per
    rank instead: ``check_environment``)."""
    limit = host_rank_limit()
    if device == "cpu" and ranks > limit:
        need = SERVER_MEMORY_BYTES + ranks * RANK_UNIQUE_MEMORY_BYTES
        raise ConfigError(
            f"world_size={ranks} does not fit on this host: {ranks} CPU ranks need at least {need / 2**30:.1f} GiB "
            f"({ranks} x {RANK_UNIQUE_MEMORY_BYTES // 2**20} MiB per rank beside the shared torch pages, plus "
            f"{SERVER_MEMORY_BYTES // 2**20} MiB for the process server) and it has {host_memory_bytes() / 2**30:.1f} GiB: "
            f"at most {limit} ranks here (more ranks need more nodes: --nnodes)")


WHOLE_ON_EACH_RANK = {"single": (True, True, True), "ddp": (True, True, True), "ps": (True, True, False),
                      "zero1": (True, True, False), "zero2": (True, False, False)}
"""(weights, gradients, optimizer state) a rank of each strategy holds whole, the rest sharded over the world:
DDP replicates all three; a parameter server's workers hold the weights and their gradients, its server the
optimizer; ZeroRedundancyOptimizer shards the state alone; FSDP2 without resharding after forward holds the
gathered weights from forward to backward. Every other strategy (fsdp, tp, pipeline, hybrid, ep) counts as
sharded all through: a floor, since replicas over a hybrid's data-parallel degree only add to it."""


def model_memory_floor(state: workloads.ModelState, *, strategy: str, device: str, ranks_here: int,
                       world_size: int) -> tuple[int, str]:
    """Host bytes a run's model needs at the least, and when: the largest of the parent's check build
    (``"build"``: the float32 weights whole; every precision the runner takes keeps float32 weights, bf16 being
    autocast) and, on a CPU run, this host's ranks training (``"ranks"``: each the parts ``WHOLE_ON_EACH_RANK``
    gives it whole, a 1/world_size share of the rest) and the single-process reference after them
    (``"reference"``: all three whole). Activations, buffers and torch itself only add to it. A GPU run holds its
    model on the GPUs: the parent's build is what the host needs."""
    moments = {"build": state.weight_bytes}
    if device == "cpu":
        if world_size > 1:  # one rank is the reference itself
            moments["ranks"] = ranks_here * rank_model_bytes(state, strategy=strategy, world_size=world_size)
        moments["reference"] = state.weight_bytes + state.grad_bytes + state.optimizer_bytes
    moment = max(moments, key=moments.get)
    return moments[moment], moment


def rank_model_bytes(state: workloads.ModelState, *, strategy: str, world_size: int) -> int:
    """The model's bytes one rank of ``strategy`` holds at the least: the parts ``WHOLE_ON_EACH_RANK`` gives it
    whole, a 1/world_size share of the rest."""
    whole = WHOLE_ON_EACH_RANK.get(strategy, (False, False, False))
    parts = (state.weight_bytes, state.grad_bytes, state.optimizer_bytes)
    return int(sum(b if w else b / world_size for b, w in zip(parts, whole)))


def _held(state: workloads.ModelState) -> str:
    return f"weights, gradients and {state.optimizer} state" if state.optimizer_bytes else "weights and gradients"


def check_gpu_model_memory(c: RunConfig, state: workloads.ModelState, gpus: list[devices.Gpu]) -> None:
    """Each rank's share of the model (``rank_model_bytes``) must fit its GPU's memory as nvidia-smi gives it; a
    model too large would end every rank in a CUDA out-of-memory error after the launch. The single-process
    reference is not held to it: one that cannot run is recorded as such beside the run."""
    if not gpus:
        return
    need = rank_model_bytes(state, strategy=c.strategy.value, world_size=c.world_size)
    small = min(gpus, key=lambda g: g.memory_bytes)
    if need > small.memory_bytes:
        raise ConfigError(f"workload {c.workload.name!r} has {state.params:,} parameters: the float32 {_held(state)} "
                          f"each {c.strategy.value} rank holds alone need {need / 2**30:.1f} GiB and GPU "
                          f"{small.index} ({small.name}) has {small.memory_bytes / 2**30:.1f} GiB")


def check_model_memory(c: RunConfig, ranks_here: int) -> None:
    """The workload's model must fit this host's memory (``model_memory_floor``): a model too large is refused
    here, not by the kernel's out-of-memory killer (a 26-billion-parameter transformer had this 24 GiB host
    thrashing for minutes while the parent built it, then killed, with nothing said; a 2.4-billion-parameter one
    under AdamW, whose weights fit, thrashed until the run's timeout)."""
    state = workloads.model_state(c)
    if state is None:
        return
    need, moment = model_memory_floor(state, strategy=c.strategy.value, device=c.device, ranks_here=ranks_here,
                                      world_size=c.world_size)
    if c.device == "cuda":
        check_gpu_model_memory(c, state, visible_gpus(devices.list_gpus())[:ranks_here])
    if need > host_memory_bytes():
        held = _held(state)
        where = {"build": "its float32 weights (the parent builds the model to check it)",
                 "ranks": f"the float32 {held} of this host's {ranks_here} {c.strategy.value} ranks",
                 "reference": f"its float32 {held}" + (" (the single-process reference)" if c.world_size > 1 else "")}
        raise ConfigError(f"workload {c.workload.name!r} has {state.params:,} parameters: {where[moment]} alone need "
                          f"{need / 2**30:.1f} GiB and this host has {host_memory_bytes() / 2**30:.1f} GiB")


def check_environment(c: RunConfig, *, ranks_here: int | None = None) -> None:
    """Backend and device availability on this machine (imports torch). ``ranks_here``: the ranks
    this host will start (multi-node: nproc_per_node; default: all of them)."""
    ranks_here = c.world_size if ranks_here is None else ranks_here
    if c.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but torch sees no GPU on this machine")
    if c.device == "cuda" and torch.cuda.device_count() < ranks_here:
        raise ConfigError(f"{ranks_here} ranks on this host need one GPU each; this machine has "
                          f"{torch.cuda.device_count()} (two ranks on one GPU make NCCL abort: duplicate GPU)")
    available = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available(), "mpi": dist.is_mpi_available()}
    if not available[c.backend.value]:
        have = ", ".join(k for k, v in available.items() if v) or "none"
        raise ConfigError(f"backend={c.backend.value} is not built into this torch ({torch.__version__}); available: {have}")
    if c.backend.value == "nccl" and c.device != "cuda":
        raise ConfigError("backend=nccl needs device=cuda")
    if c.device == "cuda" and c.precision in ("bf16", "tf32"):
        check_tensor_cores(c.precision, visible_gpus(devices.list_gpus())[:ranks_here])
    with plugin_deadline(c):
        check_model_memory(c, ranks_here)
        workloads.check(c)  # plugin imports, batch fits model, tp plan / pipeline units for the strategy
