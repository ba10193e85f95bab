"""What an accelerator can do, from its vendor's datasheet, and which accelerators this machine has.

Torch-free: the parent process must not create a CUDA context (it would hold ~0.5 GB on GPU 0
for the whole run and skew that rank's memory), so GPUs are listed with ``nvidia-smi`` here and
only the rank processes ever touch CUDA.

Peak figures are *dense* tensor-core FLOP/s (the datasheets print the 2:4-sparsity figure with an
asterisk; dense is half of it). A name is matched by the most specific pattern first, so an
H100 PCIe or NVL is never given the SXM figure.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "bf16", "fp8")
"""Training precisions parbench knows a peak for (fp8: simulator only)."""

LOSS_TOLERANCE = {"fp32": 1e-5, "tf32": 1e-2, "bf16": 5e-2}
"""Largest |loss - reference loss| still called equivalent, per training precision. fp32 runs differ
only in reduction order (<= 5e-7 measured on parbench's workloads); TF32 keeps a 10-bit mantissa and
bf16 an 8-bit one (unit roundoff 2^-8 = 3.9e-3), compounded over a few steps (bf16 runs measured
here: up to 1.7e-3 on the transformer at world size 2)."""


@dataclass(frozen=True, kw_only=True)
class Datasheet:
    """One accelerator model's published peaks, per dtype, and where they are printed."""

    model: str
    peak_flops: dict[str, float]
    """dtype -> dense FLOP/s (fp32: CUDA cores; tf32/bf16/fp16/fp8: tensor cores, no sparsity)."""
    memory_bytes: int
    source: str


_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), SXM and PCIe columns"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), {} column, sparse figures halved"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), {} column, sparse figures halved"
_EXPORT = ("the {} is the {} die and clocks with NVLink cut to 400 GB/s (TechPowerUp, 'NVIDIA Prepares H800 "
           "Adaptation of H100 GPU for the Chinese Market', 2023; DeepSeek-AI, ISCA 2025, arXiv 2505.09343), so its "
           "tensor-core peaks are that datasheet's: ")
_V100 = ("NVIDIA Tesla V100 GPU datasheet (nvidia.com/en-us/data-center/v100), {} column: tensor-core FP16 and CUDA-core "
         "FP32 (Volta has neither BF16 nor TF32 tensor cores, nor sparsity)")
_INSTINCT = ("AMD Instinct {} accelerator datasheet (amd.com/en/products/accelerators/instinct), dense peaks (the "
             "sparse ones halved): {}")
_L40S = "NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s), sparse figures halved"
_BLACKWELL = ("NVIDIA GB200 NVL72 / HGX B200 specifications (nvidia.com/en-us/data-center/gb200-nvl72), 'Individual "
              "Blackwell GPU Specifications', {} column, sparse figures halved")
_BLACKWELL_ULTRA = ("NVIDIA Blackwell Ultra per-GPU specifications as tabulated in verda.com/blog/gb300-nvl72-architecture "
                    "(dense figures; FP8 dense 5 PF on GB300, 4.5 PF on HGX B300) and the DGX B300 page (72 PF sparse FP8 "
                    "for 8 GPUs), {} column")

# (pattern on the device name, datasheet); the first match wins: specific variants before families
DATASHEETS: tuple[tuple[str, Datasheet], ...] = (
    (r"H100.*PCIe", Datasheet(model="H100 PCIe", memory_bytes=80 * 10**9, source=_H100.format("H100 PCIe"),
                              peak_flops={"fp32": 51e12, "tf32": 378e12, "bf16": 756e12, "fp8": 1513e12})),
    (r"H100 NVL", Datasheet(model="H100 NVL", memory_bytes=94 * 10**9, source=_H100.format("H100 NVL"),
                            peak_flops={"fp32": 60e12, "tf32": 417.5e12, "bf16": 835.5e12, "fp8": 1670.5e12})),
    (r"H100.*(HBM3|SXM)", Datasheet(model="H100 SXM", memory_bytes=80 * 10**9, source=_H100.format("H100 SXM"),
                                    peak_flops={"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12,
                                                "fp8": 1979e12})),
    (r"H200 NVL", Datasheet(model="H200 NVL", memory_bytes=141 * 10**9, source=_H200.format("H200 NVL"),
                            peak_flops={"fp32": 60e12, "tf32": 417.5e12, "bf16": 835.5e12, "fp8": 1670.5e12})),
    (r"H200", Datasheet(model="H200 SXM", memory_bytes=141 * 10**9, source=_H200.format("H200 SXM"),
                        peak_flops={"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12, "fp8": 1979e12})),
    (r"GB300", Datasheet(model="GB300", memory_bytes=279 * 10**9, source=_BLACKWELL_ULTRA.format("GB300"),
                         peak_flops={"fp32": 80e12, "tf32": 1250e12, "bf16": 2500e12, "fp8": 5000e12})),
    (r"B300", Datasheet(model="B300 (HGX)", memory_bytes=270 * 10**9, source=_BLACKWELL_ULTRA.format("B300"),
                        peak_flops={"fp32": 75e12, "tf32": 1100e12, "bf16": 2250e12, "fp8": 4500e12})),
    (r"GB200", Datasheet(model="GB200", memory_bytes=186 * 10**9, source=_BLACKWELL.format("GB200 NVL72"),
                         peak_flops={"fp32": 80e12, "tf32": 1250e12, "bf16": 2500e12, "fp8": 5000e12})),
    (r"B200", Datasheet(model="B200 (HGX)", memory_bytes=180 * 10**9, source=_BLACKWELL.format("HGX B200"),
                        peak_flops={"fp32": 75e12, "tf32": 1100e12, "bf16": 2250e12, "fp8": 4500e12})),
    (r"H800(?!.*PCIe)", Datasheet(model="H800 SXM", memory_bytes=80 * 10**9,
                                  source=_EXPORT.format("H800 SXM5", "H100 SXM5") + _H100.format("H100 SXM"),
                                  peak_flops={"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12, "fp8": 1979e12})),
    (r"A800", Datasheet(model="A800", memory_bytes=80 * 10**9, source=_EXPORT.format("A800", "A100") + _A100,
                        peak_flops={"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12})),
    (r"A100", Datasheet(model="A100", memory_bytes=80 * 10**9, source=_A100,
                        peak_flops={"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12})),
    (r"V100S", Datasheet(model="V100S PCIe", memory_bytes=32 * 10**9, source=_V100.format("V100S PCIe"),
                         peak_flops={"fp32": 16.4e12, "fp16": 130e12})),
    (r"V100.*PCIE", Datasheet(model="V100 PCIe", memory_bytes=32 * 10**9, source=_V100.format("V100 PCIe"),
                              peak_flops={"fp32": 14e12, "fp16": 112e12})),
    (r"V100", Datasheet(model="V100 SXM2", memory_bytes=32 * 10**9, source=_V100.format("V100 SXM2"),
                        peak_flops={"fp32": 15.7e12, "fp16": 125e12})),
    (r"MI355X", Datasheet(model="MI355X", memory_bytes=288 * 10**9,
                          source=_INSTINCT.format("MI355X", "FP16/BF16 2.5 PF, FP8 5.0 PF, FP32 157.3 TF; CDNA 4 has no "
                                                  "TF32 (XF32) matrix type"),
                          peak_flops={"fp32": 157.3e12, "bf16": 2516.6e12, "fp8": 5033.2e12})),
    (r"MI350X", Datasheet(model="MI350X", memory_bytes=288 * 10**9,
                          source=_INSTINCT.format("MI350X", "FP16/BF16 2.3 PF (2,306.9 TF), FP8 4.6 PF, FP32 144.2 TF, "
                                                  "1000 W; no TF32"),
                          peak_flops={"fp32": 144.2e12, "bf16": 2306.9e12, "fp8": 4613.7e12})),
    (r"MI325X", Datasheet(model="MI325X", memory_bytes=256 * 10**9,
                          source=_INSTINCT.format("MI325X", "the MI300X's compute (below) with 256 GB of HBM3E at 6 TB/s"),
                          peak_flops={"fp32": 163.4e12, "tf32": 653.7e12, "bf16": 1307.4e12, "fp8": 2614.9e12})),
    (r"MI300X", Datasheet(model="MI300X", memory_bytes=192 * 10**9,
                          source=_INSTINCT.format("MI300X", "FP16/BF16 1,307.4 TF, FP8 2,614.9 TF, TF32 653.7 TF, FP32 "
                                                  "163.4 TF; 192 GB HBM3 at 5.3 TB/s"),
                          peak_flops={"fp32": 163.4e12, "tf32": 653.7e12, "bf16": 1307.4e12, "fp8": 2614.9e12})),
    (r"L40S", Datasheet(model="L40S", memory_bytes=48 * 10**9, source=_L40S,
                        peak_flops={"fp32": 91.6e12, "tf32": 183e12, "bf16": 362e12, "fp8": 733e12})),
)


def datasheet(device_name: str | None) -> Datasheet | None:
    """The datasheet for a device name as CUDA reports it ("NVIDIA H100 80GB HBM3"), or None."""
    if not device_name:
        return None
    return next((sheet for pattern, sheet in DATASHEETS if re.search(pattern, device_name)), None)


@dataclass(frozen=True, kw_only=True)
class PeakBasis:
    """The denominator of an MFU figure: which dtype's peak, how large, and from where."""

    dtype: str
    peak_flops: float | None
    source: str

    def as_record(self) -> dict[str, object]:
        return {"mfu_dtype": self.dtype, "mfu_peak_flops": self.peak_flops, "mfu_peak_source": self.source}


def peak_basis(device_name: str | None, precision: str) -> PeakBasis:
    """MFU's denominator for a run at ``precision`` on ``device_name`` (tf32 and bf16 use tensor cores)."""
    sheet = datasheet(device_name)
    if sheet is None:
        why = "CPU: no stated peak" if not device_name else f"no datasheet figure for {device_name!r}"
        return PeakBasis(dtype=precision, peak_flops=None, source=why)
    peak = sheet.peak_flops.get(precision)
    return PeakBasis(dtype=precision, peak_flops=peak,
                     source=sheet.source if peak else f"{sheet.model} has no {precision} peak")


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    name: str
    memory_bytes: int


def list_gpus(timeout_s: float = 10.0) -> list[Gpu]:
    """The GPUs ``nvidia-smi`` sees (no CUDA context is created); [] without a driver."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=timeout_s, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [parse_gpu_line(line) for line in out.splitlines() if line.strip()]


def parse_gpu_line(line: str) -> Gpu:
    """One ``nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`` line (MiB)."""
    index, name, mib = (part.strip() for part in line.split(","))
    return Gpu(index=int(index), name=name, memory_bytes=int(float(mib)) * 2**20)
