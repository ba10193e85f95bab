"""Check the simulator's compute, attention, memory-bandwidth and memory terms against one GPU.

Run on a CUDA machine (about three minutes on an H200); every figure is printed beside the simulator's
prediction for the same shape on the ``--cluster`` preset:

1. memory bandwidth: a device-to-device copy of 1 GiB (bytes read + written / time) against the preset's
   ``memory_bandwidth_bytes_per_s``;
2. GEMM efficiency curve: bf16 square matmuls from 256 to 16384, as achieved / the preset's dense peak,
   beside ``gemm_time_s`` for the same shape; float32 ones at 4096 and 8192 on TF32 tensor cores and on
   CUDA cores, against the preset's TF32 and FP32 peaks; FP8 ones (``torch._scaled_mm``) from 2048 to 16384
   against the preset's FP8 peak, skipped with the reason below compute capability 8.9;
3. the GPT's own GEMMs (each forward GEMM of a block and the head, with its input-gradient and
   weight-gradient products) against ``gemm_time_s``: is backward twice forward?
4. causal attention (``scaled_dot_product_attention``) per backend torch offers (flash, cuDNN,
   memory-efficient), forward and forward+backward, as a fraction of peak, beside the simulator's
   attention-core time for the default kernel and for ``flash3``; the same in float32 (no flash kernel
   takes it: what a float32 run's attention costs);
5. a ~1.3B-parameter GPT training step (the runner's own transformer: 24 layers, hidden 2048, 16 heads,
   sequence 2048, vocabulary 51200; bf16 autocast as the runner's ``--precision bf16``; the runner's
   AdamW, and a fused AdamW after it) at several batch sizes: forward, backward and optimizer timed apart,
   and the allocator's peak, beside the simulator's ``compute_parts_s``, ``time_optimizer_s`` and
   ``peak_memory_bytes``;
6. the mixed-precision passes of a Megatron-style optimizer step over the same GPT's parameters (16-bit
   gradients to float32, fp16's unscale and inf check, the global norm for clipping, float32 master weights into
   bf16), each beside the bytes ``timing.optimizer_pass_bytes_per_element`` charges at the preset's streaming
   bandwidth;
7. the GEMM curve t = fixed + flops / (efficiency x peak) fitted to the bf16 GEMMs of 2 and 3
   (``parbench.sim.efficiency_fits.fit_gemm_curve``) beside the preset's ``gemm_overhead_s`` and
   ``gemm_efficiency``;
8. the two passes an FP8 cast is built from (``timing.FP8_CAST_BYTES``), over 512 Mi bf16 elements: the amax
   reduction per-tensor dynamic scaling runs first (reads 2 bytes an element) and the cast to e4m3 (reads 2,
   writes 1), each beside its bytes at the preset's memory bandwidth, and the two together over the cast alone
   beside the 5 / 3 the model charges per-tensor scaling over delayed scaling.

Every timing is the median of several calls after warm-up calls, by CUDA events (``time.perf_counter``
with ``--smoke``, which runs tiny shapes on the CPU to check this script's code, not the hardware).

Usage: python scripts/gpu_compute_check.py [--cluster h200-sxm] [--batches 1,4,8] [--out gpu_check.json]
Prints one JSON document (and writes it to --out); nothing is tuned from it automatically.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, replace

import torch
import torch.nn.functional as F

from parbench.config import RunConfig, WorkloadConfig
from parbench.sim import layout_from_run, load_cluster, model_spec, predict
from parbench.sim.efficiency_fits import fit_gemm_curve
from parbench.sim.timing import FP8_CAST_BYTES, gemm_bytes, gemm_time_s, unit_times_s
from parbench.workloads import transformer

GPT_1B = WorkloadConfig(name="transformer", layers=24, hidden=2048, heads=16, seq_len=2048, vocab_size=51200)
SMOKE_GPT = WorkloadConfig(name="transformer", layers=2, hidden=64, heads=4, seq_len=32, vocab_size=128)


def median_s(fn, device: str, reps: int = 10, warmup: int = 3) -> float:
    """Median seconds of ``fn``: CUDA events on a GPU (each timing waits for its end event), else a wall clock."""
    return statistics.median(samples_s(lambda: (fn(),), device, reps, warmup)[0])


def samples_s(fn, device: str, reps: int, warmup: int) -> list[list[float]]:
    """Per phase, ``reps`` timings of a function that runs its phases in order and returns after the last.
    ``fn`` returns one callable-free tuple per call; its phases are marked by :func:`mark` events."""
    for _ in range(warmup):
        fn()
    sync(device)  # warm-up work must not leak into the first timing
    out: list[list[float]] = []
    for _ in range(reps):
        marks = [clock(device)]
        for _ in fn():
            marks.append(clock(device))
        sync(device)
        times = elapsed(marks, device)
        out.extend([] for _ in range(len(times) - len(out)))
        for phase, t in enumerate(times):
            out[phase].append(t)
    return out


def clock(device: str):
    if device == "cuda":
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    return time.perf_counter()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def elapsed(marks: list, device: str) -> list[float]:
    if device == "cuda":
        return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]
    return [b - a for a, b in zip(marks, marks[1:])]


def error_pct(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured * 100


def memory_bandwidth(cluster, device: str, smoke: bool) -> dict:
    n = (1 << 20) if smoke else (1 << 30)  # bytes per buffer
    a = torch.empty(n, dtype=torch.uint8, device=device).random_()
    b = torch.empty_like(a)
    t = median_s(lambda: b.copy_(a), device, reps=20, warmup=5)
    return {"bytes_per_copy": n, "measured_s": t, "measured_bytes_per_s": 2 * n / t,
            "preset_bytes_per_s": cluster.memory_bandwidth_bytes_per_s,
            "preset_over_measured": cluster.memory_bandwidth_bytes_per_s / (2 * n / t)}


DTYPES = {"bf16": (torch.bfloat16, ""), "tf32": (torch.float32, "tf32"), "fp32": (torch.float32, "fp32")}
"""name -> (tensor dtype, the simulator's ``gemm_dtype``); tf32 and fp32 differ in ``allow_tf32``."""


def gemm_row(cluster, device: str, m: int, k: int, n: int, *, label: str, transposes: str = "nn",
             dtype: str = "bf16") -> dict:
    """(m x k) @ (k x n); ``transposes``: which operands are stored transposed (as autograd's
    input-gradient (nt) and weight-gradient (tn) products read them)."""
    tensor_dtype, gemm_dtype = DTYPES[dtype]
    a = torch.randn(k, m, device=device, dtype=tensor_dtype).t() if transposes[0] == "t" else \
        torch.randn(m, k, device=device, dtype=tensor_dtype)
    b = torch.randn(n, k, device=device, dtype=tensor_dtype).t() if transposes[1] == "t" else \
        torch.randn(k, n, device=device, dtype=tensor_dtype)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    t = median_s(lambda: a @ b, device, reps=20, warmup=5)
    torch.backends.cuda.matmul.allow_tf32 = False
    flops, peak = 2.0 * m * k * n, cluster.gemm_peak_flops(gemm_dtype)
    predicted = gemm_time_s(cluster, flops, (m * k + k * n + m * n) * a.element_size(), gemm_dtype)
    return {"gemm": label, "dtype": dtype, "m": m, "k": k, "n": n, "transposes": transposes, "measured_s": t,
            "achieved_tflops": flops / t / 1e12, "efficiency_of_peak": flops / t / peak,
            "predicted_s": predicted, "error_pct": error_pct(predicted, t)}


def gemm_curve(cluster, device: str, smoke: bool) -> list[dict]:
    sizes = (64, 128) if smoke else (256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
    rows = [gemm_row(cluster, device, n, n, n, label=f"square {n}") for n in sizes]
    # a float32 run's matmuls: TF32 tensor cores and CUDA cores, against the preset's datasheet peaks
    return rows + [gemm_row(cluster, device, n, n, n, label=f"square {n}", dtype=dtype)
                   for dtype in ("tf32", "fp32") for n in (sizes[-4:-2] or sizes[:1])]


def fp8_gemms(cluster, device: str) -> list[dict] | dict:
    """Square FP8 GEMMs (e4m3 x e4m3 -> bf16 with per-tensor scales, ``torch._scaled_mm``: the FP8 tensor cores
    that Transformer Engine and torchao's float8 training call) at the sizes of the bf16 curve's top half. The
    presets give FP8 GEMMs the bf16 efficiency at the FP8 peak; each row's ``efficiency_of_peak`` beside the bf16
    row of the same size says whether FP8 reaches the same share of its (2x) peak."""
    if device != "cuda" or torch.cuda.get_device_capability() < (8, 9):
        return {"skipped": "FP8 tensor cores need a CUDA device of compute capability 8.9 or newer (Ada, Hopper)"}
    rows, one = [], torch.ones((), device=device)
    for n in (2048, 4096, 8192, 16384):
        a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as the FP8 kernels take it
        t = median_s(lambda a=a, b=b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                     device, reps=20, warmup=5)
        flops = 2.0 * n**3
        predicted = gemm_time_s(cluster, flops, 2 * n * n + 2 * n * n, "fp8")  # 1-byte operands, bf16 result
        rows.append({"gemm": f"square {n}", "dtype": "fp8", "m": n, "k": n, "n": n, "measured_s": t,
                     "achieved_tflops": flops / t / 1e12, "efficiency_of_peak": flops / t / cluster.peak_flops_fp8,
                     "predicted_s": predicted, "error_pct": error_pct(predicted, t)})
    return rows


def fp8_casts(cluster, device: str, smoke: bool) -> dict:
    """The amax pass (``torch.linalg.vector_norm`` of order inf: one read) and the cast to e4m3 (one read, one
    1-byte write) over one bf16 tensor, timed apart, each beside its bytes at ``memory_bandwidth_bytes_per_s``."""
    n = (1 << 20) if smoke else (1 << 29)
    x = torch.randn(n, device=device, dtype=torch.bfloat16)
    passes = {"amax": (lambda: torch.linalg.vector_norm(x, ord=float("inf")), 2),
              "cast_e4m3": (lambda: x.to(torch.float8_e4m3fn), 3)}
    out = {"elements": n}
    for name, (fn, per_element) in passes.items():
        measured = median_s(fn, device, reps=20, warmup=5)
        predicted = n * per_element / cluster.memory_bandwidth_bytes_per_s
        out[name] = {"bytes_per_element": per_element, "measured_s": measured, "predicted_s": predicted,
                     "error_pct": error_pct(predicted, measured), "achieved_bytes_per_s": n * per_element / measured}
    out["tensorwise_over_delayed"] = {"measured": (out["amax"]["measured_s"] + out["cast_e4m3"]["measured_s"])
                                      / out["cast_e4m3"]["measured_s"],
                                      "model": FP8_CAST_BYTES["tensorwise"] / FP8_CAST_BYTES["delayed"]}
    return out


def model_gemms(cluster, device: str, w: WorkloadConfig, batch: int) -> list[dict]:
    """Each distinct forward GEMM of the model (rows = batch x tokens) with its two backward products:
    input gradient dX = dY W^T and weight gradient dW = X^T dY."""
    spec, rows, seen = model_spec(w), [], set()
    for u in (spec.units[0], spec.post):
        for g in u.gemms:
            if g.batched > 1 or (g.m, g.k, g.n) in seen:
                continue
            seen.add((g.m, g.k, g.n))
            m = batch * g.m
            # nn.Linear stores W as (out, in): forward X W^T, input gradient dY W, weight gradient dY^T X
            rows.append(gemm_row(cluster, device, m, g.k, g.n, label=f"forward {g.k}x{g.n}", transposes="nt"))
            rows.append(gemm_row(cluster, device, m, g.n, g.k, label=f"input grad {g.k}x{g.n}"))
            rows.append(gemm_row(cluster, device, g.n, m, g.k, label=f"weight grad {g.k}x{g.n}", transposes="tn"))
            assert gemm_bytes(g, batch, 2) == (m * g.k + g.k * g.n + m * g.n) * 2  # the simulator's own bytes
    return rows


def attention(cluster, device: str, w: WorkloadConfig, batch: int, dtype: str = "bf16") -> dict:
    """Causal SDPA of one layer at the model's shape, per backend; FLOPs counted as the simulator counts
    them (QK^T and AV, half of each under the causal mask; backward 2.5x forward). Efficiencies are of the
    bf16 peak whatever ``dtype`` (float32 has no flash kernel: what a float32 run gets is in the rows)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    d = w.hidden // w.heads
    shape = (batch, w.heads, w.seq_len, d)
    tensor_dtype = DTYPES[dtype][0]
    q, k, v = (torch.randn(shape, device=device, dtype=tensor_dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device=device, dtype=tensor_dtype)
    flops_forward = 2 * (2 * batch * w.heads * w.seq_len * w.seq_len * d) / 2
    unit = model_spec(w).units[0]
    predicted = {kernel or "default": unit_times_s(cluster, unit, mb=batch, tp=1, act_bytes=2, flash=True,
                                                   kernel=kernel)[2] for kernel in ("", "flash3")}
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    rows = []
    for name, backend in backends.items():
        def forward():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def step():
            out = forward()
            yield
            out.backward(grad)
            yield

        try:
            fwd, bwd = (statistics.median(s) for s in samples_s(step, device, reps=10, warmup=3))
        except RuntimeError as e:  # the backend does not run on this device, dtype or shape
            rows.append({"backend": name, "error": str(e).splitlines()[0][:200]})
            continue
        rows.append({"backend": name, "forward_s": fwd, "backward_s": bwd,
                     "forward_efficiency": flops_forward / fwd / cluster.peak_flops,
                     "backward_efficiency": 2.5 * flops_forward / bwd / cluster.peak_flops,
                     "forward_error_pct_vs_default": error_pct(predicted["default"], fwd),
                     "forward_error_pct_vs_flash3": error_pct(predicted["flash3"], fwd)})
    return {"dtype": dtype, "shape_bhsd": list(shape), "flops_forward": flops_forward, "predicted_forward_s": predicted,
            "preset_efficiency": {"default": cluster.attention_efficiency_for(""),
                                  "flash3": cluster.attention_efficiency_for("flash3")},
            "backends": rows}


def gpt_step(cluster, device: str, w: WorkloadConfig, batch: int) -> dict:
    torch.manual_seed(0)
    model = transformer.build_model(w, 0).to(device)
    opt = transformer.make(w, 0).optimizer(model.parameters(), 1e-3)  # the runner's optimizer
    idx = torch.randint(0, w.vocab_size, (batch, w.seq_len), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = transformer.loss(model(idx), idx)
        yield
        loss.backward()
        yield
        opt.step()
        opt.zero_grad(set_to_none=False)
        yield

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    fwd, bwd, optim = (statistics.median(s) for s in samples_s(step, device, reps=8, warmup=3))
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else 0
    reserved = torch.cuda.max_memory_reserved() if device == "cuda" else 0
    opt = None  # frees its states before the fused optimizer makes its own
    fused = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)  # one kernel per step: 28 bytes per element
    fused_s = median_s(lambda: (fused.step(), fused.zero_grad(set_to_none=False)), device, reps=8, warmup=3)
    cfg = RunConfig(workload=w, global_batch_size=batch, precision="bf16")  # the runner's bf16: torch.autocast
    layout = layout_from_run(cfg)
    p = predict(model_spec(w), layout, cluster)
    parts, memory = p.compute_parts_s, p.peak_memory or p.memory
    fused_p = predict(model_spec(w), replace(layout, fused_elementwise=True), cluster).terms["time_optimizer_s"]
    measured = {"forward": fwd, "backward": bwd, "optimizer": optim, "optimizer_fused": fused_s}
    predicted = {"forward": parts["forward"], "backward": parts["backward"], "optimizer": p.terms["time_optimizer_s"],
                 "optimizer_fused": fused_p}
    model = fused = None
    return {"params": sum(t.numel() for t in transformer.build_model(w, 0).parameters()), "batch": batch,
            "measured_s": measured, "predicted_s": predicted,
            "error_pct": {k: error_pct(predicted[k], measured[k]) for k in measured},
            "compute_error_pct": error_pct(p.terms["time_compute_s"], fwd + bwd),
            "measured_mfu": p.model_flops_per_step / (fwd + bwd) / cluster.peak_flops,
            "allocator_peak_bytes": peak, "allocator_reserved_peak_bytes": reserved,
            # what the caching allocator hands out: the peak without the CUDA context and fragmentation
            "predicted_allocated_bytes": p.peak_memory_bytes - memory.context_bytes - memory.fragmentation_bytes,
            "predicted_peak_bytes": p.peak_memory_bytes, "predicted_memory": asdict(memory)}


def optimizer_passes(cluster, device: str, w: WorkloadConfig) -> dict:
    """The mixed-precision passes a Megatron-style optimizer step makes around its update, each over the GPT's
    parameter shapes as one multi-tensor call, timed beside the bytes ``timing.optimizer_pass_bytes_per_element``
    charges for it at the preset's streaming bandwidth: 16-bit gradients copied to float32 (2 + 4 bytes), fp16's
    unscale and inf check (4 + 4), the gradients' global norm for clipping (4), float32 master weights copied into
    bf16 ones (4 + 2)."""
    shapes = [t.shape for t in transformer.build_model(w, 0).parameters()]
    n = sum(torch.Size(s).numel() for s in shapes)
    master = [torch.randn(s, device=device) for s in shapes]
    grads = [torch.randn(s, device=device) for s in shapes]
    half = [torch.empty(s, device=device, dtype=torch.bfloat16) for s in shapes]
    found_inf, inv_scale = torch.zeros(1, device=device), torch.full((1,), 1 / 1024, device=device)
    passes = {
        "grad_to_fp32": (lambda: torch._foreach_copy_(grads, half), 2 + 4),
        "unscale_and_check": (lambda: torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale), 8),
        "grad_norm": (lambda: torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))), 4),
        "master_to_bf16": (lambda: torch._foreach_copy_(half, master), 4 + 2),
    }
    out = {"elements": n}
    for name, (fn, per_element) in passes.items():
        measured = median_s(fn, device)
        predicted = n * per_element / cluster.stream_bandwidth
        out[name] = {"bytes_per_element": per_element, "measured_s": measured, "predicted_s": predicted,
                     "error_pct": error_pct(predicted, measured),
                     "achieved_bytes_per_s": n * per_element / measured}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="h200-sxm")
    ap.add_argument("--batches", default="1,4,8", help="GPT batch sizes, comma-separated")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: checks the script, not a GPU")
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    device = "cpu" if a.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_compute_check: no CUDA device (--smoke runs tiny shapes on the CPU)")
    cluster = load_cluster(a.cluster)
    w = SMOKE_GPT if a.smoke else GPT_1B
    batches = [int(b) for b in a.batches.split(",")]
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
              "cuda": torch.version.cuda, "cluster": a.cluster}
    sections = {"memory_bandwidth": lambda: memory_bandwidth(cluster, device, a.smoke),
                "gemm_square": lambda: gemm_curve(cluster, device, a.smoke),
                "gemm_fp8": lambda: fp8_gemms(cluster, device),
                "gemm_model": lambda: model_gemms(cluster, device, w, batches[0]),
                "attention": lambda: attention(cluster, device, w, max(batches)),
                "attention_fp32": lambda: attention(cluster, device, w, max(batches), "fp32"),
                "gpt_step": lambda: [gpt_step(cluster, device, w, b) for b in batches],
                "optimizer_passes": lambda: optimizer_passes(cluster, device, w),
                "fp8_casts": lambda: fp8_casts(cluster, device, a.smoke)}
    for name, section in sections.items():  # one failing section must not cost the others' figures
        try:
            result[name] = section()
        except Exception as e:  # noqa: BLE001 - recorded in the output, the script goes on
            result[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
    if all(isinstance(result[k], list) for k in ("gemm_square", "gemm_model")):
        preset = {"preset_fixed_s": cluster.gemm_overhead_s, "preset_efficiency": cluster.gemm_efficiency}
        try:
            result["gemm_curve"] = {**fit_gemm_curve(result["gemm_square"] + result["gemm_model"], cluster.peak_flops),
                                    **preset}
        except ValueError as e:  # too few GEMMs above the launch floor, or none that grows with its flops
            result["gemm_curve"] = {"error": str(e), **preset}
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return result


if __name__ == "__main__":
    main()
