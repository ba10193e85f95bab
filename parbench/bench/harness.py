"""Benchmark one strategy's training step in real rank processes, and take its deterministic figures.

A step cannot be timed from the pytest process (it runs in W rank processes), so the ranks time it
and hand the timings back. Each rank, in one launch:

1. runs the product's own ``parbench.runner.measure`` (warm-up, probe step with every meter on,
   timed steps): its figures (bytes per category, accounted memory) are what the golden file pins;
2. runs ``blocks`` rounds of three blocks of ``steps_per_block`` steps each, the order rotated every
   round so that no mode always runs first (drift and cache warmth cancel in the block ratios):

   ``bare``     the lower bound a user would write: a plain loop on inputs built before the block,
                one barrier before and one after it. For ddp a bare torch loop (its own
                ``DistributedDataParallel`` of the model, zero_grad / forward / loss / backward /
                step on one prebuilt batch: nothing of parbench); for the other strategies their
                step with every input of the block made before the block starts
   ``timed``    ``runner.timed_steps``: exactly the runner's timed loop (the chunk's inputs made before
                it, a barrier either side of the chunk, a clock per step, the OS write counter)
   ``metered``  every step under the probe's meters (CommMeter's dispatch mode + ActivationTracker)

``inject_delay_s`` sleeps inside every step of the two instrumented modes: the test hook that
shows the overhead gate can fail. It travels in the spec because ranks fork from a server that
does not see the launching process's environment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch.distributed as dist

from parbench import preflight, runner
from parbench.config import ConfigError, RunConfig, Strategy, WorkloadConfig
from parbench.distributed import RankInfo, spawn
from parbench.metrics import memory

MODES = ("bare", "timed", "metered")
LOOP_COST_CHUNKS, LOOP_COST_STEPS = 10, 10  # 100 empty steps: ~0.1 s at W=2
# The fixed small configuration every strategy is benchmarked and pinned at (golden file).
WORKLOAD = WorkloadConfig(name="transformer", layers=2, hidden=64, heads=4, seq_len=32, vocab_size=256)
BASE = {"world_size": 2, "global_batch_size": 16, "steps": 2, "warmup_steps": 2, "seed": 0, "timeout_s": 180.0}
# Strategies that need more than "world size 2, defaults" to be a meaningful configuration.
OVERRIDES: dict[Strategy, dict[str, Any]] = {
    Strategy.SINGLE: {"world_size": 1},
    Strategy.PIPELINE: {"micro_batches": 2},
    Strategy.HYBRID: {"dp": 1, "tp": 1, "pp": 2, "micro_batches": 2},
    # the same decoder with 4 experts top-2 in every block; balanced routing keeps every byte
    # independent of floating-point rounding in the router
    Strategy.EP: {"workload": WorkloadConfig(name="moe", layers=2, hidden=64, heads=4, seq_len=32,
                                             vocab_size=256, router="balanced")},
}
GOLDEN_KEYS = ("role", "param_count", "mem_param_bytes", "mem_grad_bytes", "mem_optim_bytes",
               "mem_activation_bytes", "comm_bytes_per_step", "comm_wire_bytes_per_step", "comm_ops")


class BenchError(RuntimeError):
    """A benchmark launch whose ranks failed or timed out."""


@dataclass(frozen=True, kw_only=True)
class BenchSpec:
    """One benchmark launch: a run configuration plus how many blocks of steps to time."""

    run: RunConfig
    blocks: int = 5
    """Rounds of (bare, timed, metered) blocks; the overhead ratio is the median over rounds."""
    steps_per_block: int = 8
    """Steps per block; a block's figure is its wall time / steps."""
    inject_delay_s: float = 0.0
    """Test hook: seconds slept inside every instrumented step (timed and metered modes)."""

    def __post_init__(self) -> None:
        if self.blocks < 1 or self.steps_per_block < 1:
            raise ConfigError(f"blocks={self.blocks} and steps_per_block={self.steps_per_block} must be >= 1")
        if self.inject_delay_s < 0:
            raise ConfigError(f"inject_delay_s={self.inject_delay_s} must be >= 0")


def bench_config(strategy: Strategy | str, **changes: Any) -> RunConfig:
    """The fixed small configuration of ``strategy`` (world size 2 unless it needs otherwise)."""
    strategy = Strategy(strategy)
    return RunConfig(strategy=strategy, **{"workload": WORKLOAD, **BASE, **OVERRIDES.get(strategy, {}), **changes})


def implemented_strategies() -> list[Strategy]:
    """Every strategy in the registry, in the registry's order."""
    from parbench.strategies import BUILDERS

    return list(BUILDERS)


# --- the launching side -----------------------------------------------------------------


def launch_bench(spec: BenchSpec) -> list[dict[str, Any]]:
    """Start the ranks, wait for them (the launcher's watchdog and deadline), return each rank's result."""
    cfg = spec.run
    preflight.check(cfg)
    outcome = spawn(cfg.world_size, bench_rank, spec, timeout_s=cfg.timeout_s, backend=cfg.backend.value,
                    device=cfg.device, threads=cfg.threads)
    if outcome.status != "ok":
        raise BenchError(f"{cfg.strategy.value}: {outcome.status}: {outcome.error}")
    return outcome.results


def golden_figures(ranks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The deterministic figures of every rank: ``{"rank0": {key: value}, ...}``."""
    return {f"rank{r['figures'].rank}": {k: getattr(r["figures"], k) for k in GOLDEN_KEYS} for r in ranks}


# --- the rank side --------------------------------------------------------------------------


def bench_rank(spec: BenchSpec, info: RankInfo) -> dict[str, Any]:
    """The rank function: the product's own measurement (what a record reports), then the timed rounds."""
    ctx, trainer = runner.prepare(spec.run, info)
    figures = runner.measure(ctx, trainer)
    cfg = spec.run
    first = cfg.warmup_steps + 1 + cfg.steps + len(figures.compute_times_s)
    return {"figures": figures, "times": _rounds(ctx, trainer, spec, first, bare_counterpart(ctx, trainer))}


def bare_counterpart(ctx, trainer) -> tuple[Callable[[int], Any], Any]:
    """(step, feed to prebuild its inputs from) of the bare loop a strategy is compared with.

    ddp: plain torch, on one prebuilt batch of this rank's slice (two warm-up steps here, so that
    DDP's bucket rebuild is behind it). Other strategies: their own step, inputs made before the block."""
    if ctx.config.strategy is not Strategy.DDP:
        return trainer.step, trainer.feed
    from torch.nn.parallel import DistributedDataParallel

    from parbench import data

    cfg, w = ctx.config, ctx.workload
    model = DistributedDataParallel(w.build(cfg.seed).to(ctx.device))
    optimizer = w.optimizer(list(model.parameters()), cfg.lr)
    x, y = data.to_device(data.replica_source(cfg, w, dp_rank=ctx.rank, dp_size=ctx.world_size)(0), ctx.device)

    def step(i: int):
        optimizer.zero_grad(set_to_none=False)
        loss = w.loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    for i in range(2):
        step(i)
    return step, None


def _rounds(ctx, trainer, spec: BenchSpec, first: int, bare: tuple[Callable[[int], Any], Any]) -> dict[str, list[float]]:
    """``blocks`` rounds of one block per mode; seconds per step of every block, by mode."""
    step = _slowed(trainer.step, spec.inject_delay_s)
    bare_step, bare_feed = bare
    blocks = {"bare": lambda i, n: _plain_block(bare_step, i, n, bare_feed),
              "timed": lambda i, n: _timed_block(ctx, step, i, n, trainer.feed),
              "metered": lambda i, n: _plain_block(_metered(ctx, trainer, step), i, n, trainer.feed)}
    out: dict[str, list[float]] = {f"{m}_s": [] for m in MODES}
    out["timed_step_times_s"] = []
    i, n = first, spec.steps_per_block
    for r in range(spec.blocks):
        for mode in MODES[r % 3:] + MODES[:r % 3]:  # rotate: no mode always runs first
            per_step, step_times = blocks[mode](i, n)
            out[f"{mode}_s"].append(per_step)
            out["timed_step_times_s"] += step_times
            i += n
    out["loop_cost_s"] = _loop_cost(ctx, _slowed(lambda i: None, spec.inject_delay_s))
    return out


def _loop_cost(ctx, noop: Callable[[int], Any], chunks: int = LOOP_COST_CHUNKS, n: int = LOOP_COST_STEPS) -> list[float]:
    """Seconds per step the runner's timed loop adds around a step: its loop run on an empty step
    (the clock, /proc/self/io, a chunk's two barriers), wall time per step of each chunk. Many short
    repetitions make this small cost resolvable where a step-vs-step difference is lost in noise."""
    out = []
    for _ in range(chunks):
        dist.barrier()  # all ranks start the chunk together
        t0 = time.perf_counter()
        runner.timed_steps(ctx, noop, 0, n)
        out.append((time.perf_counter() - t0) / n)
    return out


def _plain_block(step: Callable[[int], Any], start: int, n: int, feed=None) -> tuple[float, list[float]]:
    """n steps back to back on inputs made before the block (``feed``); barriers only around the
    block, so that all ranks start and end together."""
    for i in range(start, start + n):
        if feed is not None:
            feed.prepare(i)  # prebuilt: the block times the steps only
    dist.barrier()  # every rank starts the block together
    t0 = time.perf_counter()
    for i in range(start, start + n):
        step(i)
    dist.barrier()  # the block ends when the slowest rank is done
    return (time.perf_counter() - t0) / n, []


def _timed_block(ctx, step: Callable[[int], Any], start: int, n: int, feed=None) -> tuple[float, list[float]]:
    """The runner's timed loop itself; its per-step figure is what a record reports (their mean here)."""
    times, *_ = runner.timed_steps(ctx, step, start, n, feed)
    return sum(times) / n, times


def _metered(ctx, trainer, step: Callable[[int], Any]) -> Callable[[int], Any]:
    """The step with the probe's meters on: every c10d op intercepted, every saved tensor tracked."""
    tracker = memory.ActivationTracker()
    tracker.exclude_params(trainer.params)

    def metered(i: int):
        with ctx.meter.counting(), tracker.tracking():
            return step(i)

    return metered


def _slowed(step: Callable[[int], Any], delay_s: float) -> Callable[[int], Any]:
    if delay_s <= 0:
        return step

    def slowed(i: int):
        time.sleep(delay_s)  # injected slowdown (tests of the overhead gate)
        return step(i)

    return slowed
