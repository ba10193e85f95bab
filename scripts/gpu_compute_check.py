"""Check the simulator's compute term against one GPU (run on a CUDA machine; ~3 minutes on an H200).

1. GEMM efficiency curve: bf16 square matmuls from 256 to 16384, timed with CUDA events (median of 20
   after 5 warm-up calls), as achieved / the preset's dense peak, beside the simulator's roofline GEMM
   time for the same shape.
2. A ~1.3B-parameter GPT training step (the runner's own transformer: 24 layers, hidden 2048, 16 heads,
   sequence 2048, vocabulary 51200; bf16 autocast, AdamW), forward+backward and optimizer timed apart
   with CUDA events (median of 10 after 3 warm-up steps), beside the simulator's ``time_compute_s`` and
   ``time_optimizer_s`` for the same model, batch and preset.

Usage: python scripts/gpu_compute_check.py [--cluster h200-sxm] [--batch 4] [--out gpu_check.json]
Prints one JSON document (and writes it to --out); nothing is tuned from it automatically.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace

import torch

from parbench.config import RunConfig, WorkloadConfig
from parbench.sim import PRECISIONS, layout_from_run, load_cluster, model_spec, predict
from parbench.sim.timing import gemm_time_s
from parbench.workloads import transformer


def cuda_median_s(fn, reps: int, warmup: int) -> float:
    """Median seconds of ``fn`` by CUDA events; each timing waits for its own end event (synchronise)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()  # warm-up work must not leak into the first timing
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def gemm_curve(cluster) -> list[dict]:
    rows = []
    for n in (256, 512, 1024, 2048, 4096, 8192, 12288, 16384):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        t = cuda_median_s(lambda: a @ b, reps=20, warmup=5)
        flops = 2.0 * n**3
        predicted = gemm_time_s(cluster, flops, 3 * n * n * 2)
        rows.append({"n": n, "measured_s": t, "achieved_tflops": flops / t / 1e12,
                     "efficiency_of_peak": flops / t / cluster.peak_flops, "predicted_s": predicted,
                     "error_pct": (predicted - t) / t * 100})
    return rows


def gpt_step(cluster, batch: int) -> dict:
    w = WorkloadConfig(name="transformer", layers=24, hidden=2048, heads=16, seq_len=2048, vocab_size=51200)
    model = transformer.build_model(w, 0).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    idx = torch.randint(0, w.vocab_size, (batch, w.seq_len), device="cuda")

    def fwd_bwd() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = transformer.loss(model(idx), idx)
        loss.backward()

    compute = cuda_median_s(fwd_bwd, reps=10, warmup=3)
    optimizer = cuda_median_s(opt.step, reps=10, warmup=3)
    cfg = RunConfig(workload=w, global_batch_size=batch)
    layout = replace(layout_from_run(cfg), precision=PRECISIONS["bf16"])
    p = predict(model_spec(w), layout, cluster)
    params = sum(x.numel() for x in model.parameters())
    return {"params": params, "batch": batch, "measured_compute_s": compute, "measured_optimizer_s": optimizer,
            "predicted_compute_s": p.terms["time_compute_s"], "predicted_optimizer_s": p.terms["time_optimizer_s"],
            "compute_error_pct": (p.terms["time_compute_s"] - compute) / compute * 100,
            "measured_mfu": p.model_flops_per_step / compute / cluster.peak_flops,
            "predicted_parts_s": p.compute_parts_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="h200-sxm")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_compute_check: no CUDA device")
    cluster = load_cluster(a.cluster)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cluster": a.cluster,
              "gemm": gemm_curve(cluster), "gpt_step": gpt_step(cluster, a.batch)}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
