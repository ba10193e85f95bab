"""What this machine offers a run, found before a sweep: GPUs with their datasheet peaks, the
process-group backends and NCCL, GPU peer access, ranks per GPU for a world size, and the
launcher variables torchrun sets. ``diagnose`` runs the same pre-spawn checks as ``parbench run``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from parbench import devices
from parbench.results import host_cpus, oversubscribed

TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                 "MASTER_PORT", "TORCHELASTIC_RUN_ID")


@dataclass
class Finding:
    """One line of the report: what was looked at, what was found, and whether a run can use it."""

    topic: str
    found: str
    ok: bool = True


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    """Why the requested configuration cannot run here (exit 2), else None."""

    def add(self, topic: str, found: str, ok: bool = True) -> None:
        self.findings.append(Finding(topic, found, ok))


def gpu_findings(report: Report, gpus: list[devices.Gpu]) -> None:
    if not gpus:
        report.add("GPUs", "none (nvidia-smi not found or no device): CPU runs only")
    for gpu in gpus:
        sheet = devices.datasheet(gpu.name)
        memory = f"{gpu.memory_bytes / 2**30:.1f} GiB"
        if sheet is None:
            report.add(f"GPU {gpu.index}", f"{gpu.name}, {memory}; no datasheet peak known: mfu will be null")
            continue
        peaks = ", ".join(f"{k} {v / 1e12:g} TFLOP/s" for k, v in sheet.peak_flops.items())
        report.add(f"GPU {gpu.index}", f"{gpu.name} ({sheet.model}), {memory}; dense peaks {peaks}; {sheet.source}")


def torch_findings(report: Report) -> None:
    import torch
    import torch.distributed as dist

    report.add("torch", f"{torch.__version__}, CUDA build {torch.version.cuda or 'none'}")
    built = {"gloo": dist.is_gloo_available(), "nccl": dist.is_nccl_available(), "mpi": dist.is_mpi_available()}
    report.add("backends", ", ".join(f"{k} {'built in' if v else 'not built in'}" for k, v in built.items()))
    if built["nccl"] and torch.cuda.is_available():
        report.add("NCCL", ".".join(str(v) for v in torch.cuda.nccl.version()))
        report.add("bf16", "supported" if torch.cuda.is_bf16_supported() else "not supported by this GPU (needs sm80+)",
                   torch.cuda.is_bf16_supported())
    if torch.cuda.device_count() > 1:
        pairs = [(i, j) for i in range(torch.cuda.device_count()) for j in range(torch.cuda.device_count()) if i != j]
        missing = [p for p in pairs if not torch.cuda.can_device_access_peer(*p)]
        report.add("GPU peer access", "every pair" if not missing else f"missing for {missing}", not missing)
        report.add("NVLink", nvlink_summary())


def nvlink_summary() -> str:
    """Whether ``nvidia-smi topo -m`` shows NVLink (NV#) between GPUs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "unknown (no nvidia-smi)"
    try:
        topo = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (nvidia-smi topo failed)"
    return "present (nvidia-smi topo -m shows NV links)" if " NV" in topo else "not seen (PCIe or SXM without NVLink)"


def layout_findings(report: Report, ranks_here: int, gpus: int, device: str) -> None:
    if device == "cuda":
        per_gpu = ranks_here / gpus if gpus else float("inf")
        report.add("ranks per GPU", f"{ranks_here} ranks on this host over {gpus} GPUs: {per_gpu:g} per GPU "
                   "(must be <= 1: NCCL aborts on a duplicate GPU)", per_gpu <= 1)
    else:
        over = oversubscribed(ranks_here, 1, device)
        report.add("ranks per core", f"{ranks_here} ranks on {host_cpus()} cores "
                   f"({'oversubscribed: compare timings as ratios' if over else 'not oversubscribed'})")
    set_vars = {k: os.environ[k] for k in TORCHRUN_VARS if k in os.environ}
    report.add("torchrun variables", ", ".join(f"{k}={v}" for k, v in set_vars.items()) if set_vars else
               "none set (parbench starts its own ranks; under torchrun use --nnodes/--nproc-per-node)")


def diagnose(cfg, *, ranks_here: int | None = None) -> Report:
    """The findings, and ``error``: the pre-spawn checks of ``parbench run`` for ``cfg``."""
    import torch

    from parbench.config import ConfigError
    from parbench.preflight import check_environment

    report = Report()
    gpus = devices.list_gpus()
    gpu_findings(report, gpus)
    torch_findings(report)
    here = cfg.world_size if ranks_here is None else ranks_here
    layout_findings(report, here, len(gpus) or torch.cuda.device_count(), cfg.device)
    try:
        check_environment(cfg, ranks_here=ranks_here)
    except ConfigError as exc:
        report.error = str(exc)
    return report
