"""Human-readable summaries of records (rich tables)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def fmt_bytes(n: float | None) -> str:
    if n is None or n != n:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def fmt_num(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None or x != x else format(x, spec)


def _experts_line(rec: dict[str, Any]) -> str:
    """Routing balance, drops, the all-to-all bytes and the expert share of the memory (moe runs)."""
    line = (f"imbalance max/mean {rec['moe_load_imbalance_median']:.2f} (median over steps; capacity factor "
            f"{rec.get('capacity_factor')}), {rec['moe_dropped_fraction']:.1%} of assignments dropped")
    if rec.get("comm_moe_dispatch_bytes_per_step"):
        line += (f"; all-to-all dispatch {fmt_bytes(rec['comm_moe_dispatch_bytes_per_step'])}, combine "
                 f"{fmt_bytes(rec['comm_moe_combine_bytes_per_step'])}, counts "
                 f"{fmt_bytes(rec['comm_moe_counts_bytes_per_step'])} / step")
    if rec.get("mem_expert_param_bytes") is not None:
        line += f"; expert params {fmt_bytes(rec['mem_expert_param_bytes'])} of {fmt_bytes(rec['mem_param_bytes'])}"
    return line


def print_run(rec: dict[str, Any], results_dir: str | None, console: Console | None = None) -> None:
    console = console or Console()
    precision = rec.get("precision") or "fp32"
    title = (f"{rec['strategy']} x{rec['world_size']} on {rec['workload']} ({rec['backend']}, {precision}, "
             f"global batch {rec['global_batch_size']}): {rec['status']}")
    if rec["status"] not in ("ok", "diverged"):  # diverged: every figure was measured, show them
        console.print(f"[bold red]{title}[/]\n{rec['error']}")
        return
    t = Table(title=title, show_header=False)
    rows = [
        ("throughput", f"{fmt_num(rec['throughput_samples_per_s'], '.1f')} samples/s"
         + (f", {fmt_num(rec['throughput_tokens_per_s'], '.0f')} tokens/s" if rec.get("throughput_tokens_per_s") else "")),
        ("step time", f"median {fmt_num(rec['step_time_s_median'] * 1e3, '.2f')} ms "
                      f"(p10 {fmt_num(rec['step_time_s_p10'] * 1e3, '.2f')}, p90 {fmt_num(rec['step_time_s_p90'] * 1e3, '.2f')})"),
        ("input", "-" if rec.get("time_data_s") is None else
         f"{rec['time_data_s'] * 1e3:.2f} ms/step to make, "
         + ("inside the step time (--data-in-step)" if rec.get("data_in_step") else "before each step, not in its time")),
        ("exposed comm", "-" if rec.get("exposed_comm_time_s") is None else f"{rec['exposed_comm_time_s'] * 1e3:.2f} ms/step"),
        ("achieved", f"{fmt_num(rec['achieved_flops_per_s_per_rank'] / 1e9, '.2f')} GFLOP/s per rank; {_mfu(rec)}"),
        ("memory / rank", f"peak RSS {fmt_bytes(rec['peak_rss_bytes'])}; params {fmt_bytes(rec['mem_param_bytes'])}, "
                          f"grads {fmt_bytes(rec['mem_grad_bytes'])}, optimizer {fmt_bytes(rec['mem_optim_bytes'])}, "
                          f"activations {fmt_bytes(rec['mem_activation_bytes'])}"),
        ("comm / rank / step", f"data {fmt_bytes(rec['comm_data_bytes_per_step'])}, parameter "
                               f"{fmt_bytes(rec['comm_parameter_bytes_per_step'])}, intermediate "
                               f"{fmt_bytes(rec['comm_intermediate_bytes_per_step'])}"),
        ("OS-measured sent", "- (nccl: NVLink / shared memory / InfiniBand make no write syscalls)"
         if rec.get("os_write_bytes_per_step") is None else
         f"{fmt_bytes(rec['os_write_bytes_per_step'])} / step (busiest rank)"),
        ("loss", f"final {fmt_num(rec['loss_final'], '.5f')}; max |diff| vs single "
                 f"{fmt_num(rec['loss_max_abs_diff_vs_reference'], '.2e')}"),
        ("overhead", f"{rec['overhead_s']:.2f} s of {rec['wall_time_s']:.2f} s (launch, build, warm-up, teardown)"),
    ]
    if rec.get("cuda_allocated_peak_bytes") is not None:
        rows.insert(5, ("GPU memory / rank", _gpu_memory(rec)))
    rows.insert(3, ("where it goes", _breakdown_line(rec)))  # after exposed comm
    if rec.get("moe_load_imbalance_median") is not None:
        rows.insert(-2, ("experts", _experts_line(rec)))
    if rec.get("oversubscribed"):
        cores = (f"oversubscribed: the ranks on one host x {rec['threads_per_rank']} thread(s) each outnumber its "
                 f"{rec['host_cpus']} CPUs; compare timings as ratios within one run")
        rows.insert(2, ("cores", cores))
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)
    if rec["status"] == "diverged":
        console.print(f"[bold red]diverged[/]: {rec['error']}")
    if results_dir:
        console.print(f"record: {results_dir}/runs/{rec['run_id']}.json")
        if rec.get("trace_file"):
            console.print(f"trace:  {results_dir}/{rec['trace_file']} (parbench trace {rec['run_id'][:8]})")


def _breakdown_line(rec: dict[str, Any]) -> str:
    """The traced step's terms as shares (busiest rank), e.g. ``compute 72% · comm.intermediate 16% · ...``."""
    step = rec.get("traced_step_time_s")
    if not step:
        return "-"
    parts = {"compute": rec["time_compute_s"], "comm": rec["time_comm_exposed_s"], "bubble": rec["time_bubble_s"],
             "optimizer": rec["time_optimizer_s"], "other": rec["time_other_s"]}
    shares = " · ".join(f"{k} {100 * v / step:.0f}%" for k, v in parts.items())
    return f"traced step {step * 1e3:.2f} ms (rank {rec['breakdown_rank']}): {shares}"


def _mfu(rec: dict[str, Any]) -> str:
    """MFU with its basis (dtype, peak and where the peak comes from), or why there is none."""
    if rec.get("mfu") is None:
        return f"MFU - ({rec.get('mfu_peak_source') or 'no stated peak'})"
    return (f"MFU {rec['mfu']:.1%} of {rec['mfu_peak_flops'] / 1e12:g} TFLOP/s {rec['mfu_dtype']} "
            f"({rec['mfu_peak_source']})")


def _gpu_memory(rec: dict[str, Any]) -> str:
    """Allocator peak (since the build) and whole-device use, each as a share of the device."""
    total = rec.get("cuda_device_total_bytes")
    share = lambda n: f" ({n / total:.0%})" if total and n is not None else ""  # noqa: E731
    used = rec.get("cuda_device_used_bytes")
    return (f"allocated peak {fmt_bytes(rec['cuda_allocated_peak_bytes'])}{share(rec['cuda_allocated_peak_bytes'])}, "
            f"reserved peak {fmt_bytes(rec['cuda_reserved_peak_bytes'])}{share(rec['cuda_reserved_peak_bytes'])}, "
            f"device in use {fmt_bytes(used)}{share(used)} of {fmt_bytes(total)}")
