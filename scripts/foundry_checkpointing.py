"""Whether llm-foundry's rows with and without activation checkpointing split by memory pressure.

    python scripts/foundry_checkpointing.py [--cluster a100-80gb] [--gemm-efficiency 0.80]

Every BF16 row of llm-foundry's benchmark tables for one device (``FOUNDRY_TABLES``), predicted with that
device's GEMM efficiency replaced, printed by its predicted allocator peak as a share of the device's
memory: the MFU error in %, the micro-batch and the row. At the efficiency where the checkpointed rows come
out right, a split caused by memory pressure on the runs without checkpointing (which take the largest
micro-batch that fits) would show as errors that grow with that share.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from statistics import median

from parbench.sim.hardware import PRESETS
from parbench.sim.model import architecture_spec
from parbench.sim.predict import predict
from parbench.sim.published_memory import _foundry


def rows(cluster: str, gemm_efficiency: float) -> list[tuple[float, float, int, str]]:
    """(allocator peak / device memory, MFU error %, micro-batch, row name) for each of the device's rows."""
    device = replace(PRESETS[cluster], gemm_efficiency=gemm_efficiency)
    out = []
    for run in _foundry(every=True):
        if run.cluster != cluster:
            continue
        p = predict(architecture_spec(run.arch, megatron=True), run.layout, device)
        allocator = p.peak_memory_bytes - p.memory.context_bytes
        out.append((allocator / device.memory_bytes, (p.mfu / run.value - 1) * 100,
                    run.layout.micro_batch_size, run.name))
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="a100-80gb", choices=("a100-80gb", "h100-sxm"))
    ap.add_argument("--gemm-efficiency", type=float, default=0.80)
    args = ap.parse_args()
    table = rows(args.cluster, args.gemm_efficiency)
    for share, error, micro, name in table:
        print(f"{share:5.2f} {error:+6.1f}%  micro-batch {micro:<4} {name}")
    for label, keep in (("with checkpointing", True), ("without", False)):
        errors = [e for _, e, _, n in table if ("(AC)" in n) == keep]
        print(f"{label}: {len(errors)} rows, median {median(errors):+.1f}%")


if __name__ == "__main__":
    main()
