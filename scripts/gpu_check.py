"""The first run on a GPU machine, checked in one go (< 8 minutes on one GPU); prints one table.

1. ``parbench doctor`` for the machine.
2. Every strategy at world size 1 on both workloads (cuda + nccl): status or the refusal, allocator
   peaks, MFU with its basis.
3. One trainer's step timed twice: the runner's clock (perf_counter around the step and a
   ``torch.cuda.synchronize``) against CUDA events on the same steps.
4. Data generation at seq 1024: the transformer's synthetic batch (64 samples), per call.
5. The peak-memory reset: the allocator peak of building the model on the GPU, and the run's peak
   taken after the reset (what the record reports).
6. A world size larger than the GPU count: refused before spawning (exit 2).
7. One rank under torchrun (``--nnodes 1 --nproc-per-node 1``).
8. With two or more GPUs: every strategy at world size 2, its bytes per category equal to the
   same run's on gloo/CPU.

Usage: python scripts/gpu_check.py [--device cuda] [--out gpu_check.json]
``--device cpu`` runs the same script with gloo on the CPU (how it is tested without a GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import torch

from parbench.config import ConfigError, RunConfig, WorkloadConfig
from parbench.launch import run

STRATEGIES = ("single", "ddp", "zero1", "zero2", "fsdp", "tp", "pipeline", "hybrid", "ps")
WORKLOADS = ({"name": "mlp"}, {"name": "transformer"})
CATEGORIES = ("data", "parameter", "intermediate")


def parbench_cli(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "parbench", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def config(strategy: str, world: int, workload: dict, device: str, backend: str, **kw) -> RunConfig:
    extra = {"pipeline": {"micro_batches": 2}, "hybrid": {"dp": world, "tp": 1, "pp": 1}}.get(strategy, {})
    return RunConfig(strategy=strategy, world_size=world, device=device, backend=backend, workload=workload,
                     steps=5, timeout_s=120, **extra, **kw)


def try_run(cfg_factory: Callable[[], RunConfig]) -> dict[str, Any]:
    try:
        cfg = cfg_factory()
    except ConfigError as exc:
        return {"status": "refused", "error": str(exc)}
    return run(cfg, results_dir=None)


def strategies_at(world: int, device: str, backend: str) -> list[dict[str, Any]]:
    rows = []
    for workload in WORKLOADS:
        for strategy in STRATEGIES:
            rec = try_run(lambda: config(strategy, world, workload, device, backend))
            rows.append({"check": f"{strategy} x{world} {workload['name']}", "status": rec["status"],
                         "allocated_peak_MiB": _mib(rec.get("cuda_allocated_peak_bytes")),
                         "reserved_peak_MiB": _mib(rec.get("cuda_reserved_peak_bytes")),
                         "mfu": rec.get("mfu"), "mfu_basis": rec.get("mfu_peak_source"),
                         "bytes": {c: rec.get(f"comm_{c}_bytes_per_step") for c in CATEGORIES},
                         "note": (rec.get("error") or "")[:120]})
    return rows


def timing_check(device: str, backend: str) -> dict[str, Any]:
    """The runner's clock vs CUDA events on the same single-rank steps (transformer)."""
    from parbench import strategies, workloads
    from parbench.metrics.comm import CommMeter
    from parbench.strategies.base import RankContext

    cfg = config("single", 1, {"name": "transformer"}, device, backend)
    dev = torch.device(device, 0) if device == "cuda" else torch.device("cpu")
    ctx = RankContext(config=cfg, rank=0, world_size=1, device=dev, workload=workloads.make(cfg.workload, 0),
                      meter=CommMeter(rank=0))
    trainer = strategies.build(ctx)
    for i in range(3):
        trainer.step(i)  # warm-up: allocator, kernels selected
    clock, events = [], []
    for i in range(3, 13):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            trainer.step(i)
            end.record()
            torch.cuda.synchronize()  # as the runner does at the end of a timed step
            clock.append(time.perf_counter() - t0)
            events.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            trainer.step(i)
            clock.append(time.perf_counter() - t0)
    clock_ms = statistics.median(clock) * 1e3
    events_ms = statistics.median(events) * 1e3 if events else None
    return {"check": "timing: runner clock vs CUDA events (median of 10, ms)", "status": "ok",
            "note": f"clock {clock_ms:.3f} ms, events {events_ms if events_ms is None else f'{events_ms:.3f}'} ms"}


def data_check() -> dict[str, Any]:
    from parbench import workloads

    w = workloads.make(WorkloadConfig(name="transformer", seq_len=1024), 0)
    w.batch(0, 64)
    t0 = time.perf_counter()
    for i in range(1, 11):
        w.batch(i, 64)
    per = (time.perf_counter() - t0) / 10
    return {"check": "data generation: transformer, 64 samples x seq 1024", "status": "ok",
            "note": f"{per * 1e3:.2f} ms per batch (CPU, outside the timed step unless --data-in-step)"}


def memory_reset_check(device: str, backend: str) -> dict[str, Any]:
    """fsdp at world size 1 on the transformer: the allocator peak of the build vs the record's."""
    if device != "cuda":
        return {"check": "peak-memory reset", "status": "skipped", "note": "CPU has no allocator peak"}
    from parbench import workloads

    torch.cuda.reset_peak_memory_stats()
    model = workloads.make(WorkloadConfig(name="transformer"), 0).build(0).to("cuda")
    build_peak = torch.cuda.max_memory_allocated()
    del model
    rec = run(config("fsdp", 1, {"name": "transformer"}, device, backend), results_dir=None)
    return {"check": "peak-memory reset: build peak vs recorded peak (fsdp x1)", "status": rec["status"],
            "note": f"build {build_peak / 2**20:.1f} MiB; recorded allocated peak "
                    f"{_mib(rec.get('cuda_allocated_peak_bytes'))} MiB (taken after the build)"}


def refusal_check(device: str, backend: str) -> dict[str, Any]:
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    world = gpus + 1 if device == "cuda" else 2
    out = parbench_cli("run", "--strategy", "ddp", "--world-size", str(world), "--device", "cuda",
                       "--backend", backend, "--global-batch-size", str(64 * world), "--no-save")
    ok = out.returncode == 2
    return {"check": f"world size {world} > {gpus} GPUs refused before spawning", "status": "ok" if ok else "FAILED",
            "note": (out.stderr.strip().splitlines() or [""])[-1][:120]}


def torchrun_check(device: str, backend: str) -> dict[str, Any]:
    """A c10d rendezvous endpoint sends even one node through torchrun (parbench.multinode)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = parbench_cli("run", "--strategy", "single", "--nnodes", "1", "--nproc-per-node", "1",
                       "--rdzv-endpoint", f"127.0.0.1:{port}", "--device", device, "--backend", backend,
                       "--steps", "3", "--no-save")
    return {"check": "one rank under torchrun", "status": "ok" if out.returncode == 0 else "FAILED",
            "note": (out.stdout + out.stderr).strip().splitlines()[0][:120] if (out.stdout + out.stderr).strip() else ""}


def bytes_vs_gloo(device: str, backend: str) -> list[dict[str, Any]]:
    """Every strategy at world size 2 on the device, its bytes compared with the gloo/CPU run's."""
    if device == "cuda" and torch.cuda.device_count() < 2:
        return [{"check": "world size 2 bytes vs gloo", "status": "skipped", "note": "needs 2 GPUs"}]
    rows = []
    for strategy in STRATEGIES[1:]:
        dev = try_run(lambda: config(strategy, 2, {"name": "mlp"}, device, backend))
        cpu = try_run(lambda: config(strategy, 2, {"name": "mlp"}, "cpu", "gloo"))
        same = all(dev.get(f"comm_{c}_bytes_per_step") == cpu.get(f"comm_{c}_bytes_per_step") for c in CATEGORIES)
        rows.append({"check": f"{strategy} x2 mlp bytes = gloo's", "status": dev["status"] if same else "BYTES DIFFER",
                     "bytes": {c: dev.get(f"comm_{c}_bytes_per_step") for c in CATEGORIES},
                     "note": (dev.get("error") or "")[:120]})
    return rows


def _mib(n: int | None) -> str | None:
    return None if n is None else f"{n / 2**20:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (gloo: tests the script itself)")
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    a = parser.parse_args()
    backend = "nccl" if a.device == "cuda" else "gloo"
    doctor = parbench_cli("doctor", "--device", a.device, "--backend", backend,
                          "--world-size", str(max(torch.cuda.device_count(), 1)))
    print(doctor.stdout)
    rows = strategies_at(1, a.device, backend)
    rows += [timing_check(a.device, backend), data_check(), memory_reset_check(a.device, backend),
             refusal_check(a.device, backend), torchrun_check(a.device, backend)]
    rows += bytes_vs_gloo(a.device, backend)
    width = max(len(r["check"]) for r in rows)
    for r in rows:
        mem = f"alloc {r['allocated_peak_MiB']} MiB" if r.get("allocated_peak_MiB") else ""
        mfu = f"MFU {r['mfu']:.1%}" if r.get("mfu") else ""
        print(f"{r['check']:<{width}}  {r['status']:<12} {mem:<18} {mfu:<10} {r.get('note') or ''}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["status"] in ("FAILED", "BYTES DIFFER", "failed", "timeout")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
