"""``parbench doctor``: check this machine before a sweep. Prints the GPUs (name, memory, datasheet
peak FLOP/s per dtype and its source), the backends and NCCL, GPU peer access and NVLink, ranks per
GPU for the world size asked, and the torchrun variables set. Exit 2 when that configuration cannot
run here (the same checks ``parbench run`` makes before spawning), else 0."""

from __future__ import annotations

import argparse

from parbench.config import ConfigError, RunConfig


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="check this machine (GPUs, NCCL, ranks per GPU) before a sweep",
                       description=__doc__)
    p.add_argument("--world-size", type=int, default=2, help="ranks the run would start (default: 2)")
    p.add_argument("--nproc-per-node", type=int, default=None,
                   help="multi-node: ranks on this host (default: the whole world size)")
    p.add_argument("--backend", default="gloo", help="gloo, nccl or mpi (default: gloo)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--precision", default="fp32", help="fp32, tf32 or bf16 (default: fp32)")
    p.set_defaults(handler=handle)


def handle(a: argparse.Namespace) -> int:
    from parbench.doctor import diagnose

    if a.nproc_per_node is not None and not (0 < a.nproc_per_node <= a.world_size
                                             and a.world_size % a.nproc_per_node == 0):
        raise ConfigError(f"--nproc-per-node {a.nproc_per_node} must divide --world-size {a.world_size} "
                          "(torchrun starts the same number of ranks on every node)")
    strategy = "ddp" if a.world_size > 1 else "single"
    cfg = RunConfig(strategy=strategy, world_size=a.world_size, backend=a.backend, device=a.device,
                    precision=a.precision, global_batch_size=64 * a.world_size)  # ConfigError -> exit 2
    report = diagnose(cfg, ranks_here=a.nproc_per_node)
    width = max(len(f.topic) for f in report.findings)
    for f in report.findings:
        print(f"{'  ' if f.ok else '! '}{f.topic:<{width}}  {f.found}")
    where = f"world size {a.world_size}, {a.backend} on {a.device}, {a.precision}"
    if report.error:
        print(f"\ncannot run ({where}): {report.error}")
        return 2
    print(f"\nready: {where}")
    return 0
