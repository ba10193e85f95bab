"""ddp x2 mlp step time with the input pipeline before and after it left the step, measured as
alternating blocks in the same two rank processes, so that the machine's load affects every side alike.

    python scripts/data_before_after.py --pairs 15 --steps 10

Three DDP trainers of the same model (global batch 64, 32 samples per rank, one thread per rank)
live in each rank; the rounds rotate which one runs first:

  before    the input as it was made until this change, inside the timed step: every rank made the
            whole global batch (``synthetic_batch`` below, the teacher included) and kept its half
  after     the default now: the rank's own 32 samples, made before the timed block starts
  in-step   ``--data-in-step``: the rank's own 32 samples, made inside the timed step

Each block is ``--steps`` steps of the runner's own timed loop (steps back to back, a barrier either
side of the block); a block's figure is its median step. Prints every round, per side the median and the fastest
block (interference only adds time: the fastest block is the least disturbed) and the rank's input
making time per step, the median of the per-round ratios, and the load average at both ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics

import torch

from parbench import runner, strategies, workloads
from parbench.distributed import RankInfo, spawn
from parbench.config import RunConfig
from parbench.metrics.comm import CommMeter
from parbench.strategies.base import RankContext
from parbench.workloads.base import step_generator
from parbench.workloads.mlp import CLASSES, IN_FEATURES

MODES = ("before", "after", "in-step")


def synthetic_batch(seed: int, step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The mlp's data as it was made until this change: the whole batch and the teacher, every step."""
    teacher = torch.randn(IN_FEATURES, CLASSES, generator=step_generator(seed, -1, "teacher"))
    x = torch.randn(size, IN_FEATURES, generator=step_generator(seed, step, "mlp"))
    return x, (x @ teacher).argmax(dim=1)


def trainers(rank: int) -> dict:
    """mode -> (context, trainer), built in the same order on both ranks (DDP's constructor broadcasts)."""
    after = RunConfig(strategy="ddp", world_size=2, global_batch_size=64)
    in_step = dataclasses.replace(after, data_in_step=True)
    new = workloads.make(after.workload, after.seed)
    old = dataclasses.replace(new, batch=lambda step, size: synthetic_batch(after.seed, step, size), batch_slice=None)
    out = {}
    for mode, cfg, workload in (("before", in_step, old), ("after", after, new), ("in-step", in_step, new)):
        ctx = RankContext(config=cfg, rank=rank, world_size=2, device=torch.device("cpu"), workload=workload,
                          meter=CommMeter(rank=rank))
        out[mode] = (ctx, strategies.build(ctx))
    return out


def rank_blocks(plan: tuple[int, int], info: RankInfo) -> dict | None:
    """The rank function (one thread per rank, gloo): every round's block medians; rank 0 returns them."""
    pairs, steps = plan
    built = trainers(info.rank)
    for ctx, trainer in built.values():
        for i in range(3):
            trainer.step(i)  # warm-up: DDP allocates its buckets in step 1 and rebuilds them in step 2
    medians: dict[str, list[float]] = {m: [] for m in MODES}
    start = 3
    for r in range(pairs):
        for mode in MODES[r % 3:] + MODES[:r % 3]:  # rotate: no side always runs first
            ctx, trainer = built[mode]
            times, _, _ = runner.timed_steps(ctx, trainer.step, start, steps, trainer.feed)
            medians[mode].append(statistics.median(times))
        start += steps
    making = {m: statistics.median(list(built[m][1].feed.seconds.values())[3:]) for m in MODES}
    return {"medians": medians, "making_s": making} if info.rank == 0 else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=15, help="rounds (each runs one block of every mode)")
    p.add_argument("--steps", type=int, default=10, help="steps per block")
    a = p.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    outcome = spawn(2, rank_blocks, (a.pairs, a.steps), timeout_s=3600)
    if outcome.status != "ok":
        raise SystemExit(f"{outcome.status}: {outcome.error}")
    result = outcome.results[0]
    medians = result["medians"]
    for r in range(a.pairs):
        print(f"round {r}: " + ", ".join(f"{m} {medians[m][r] * 1e3:.2f} ms" for m in MODES))
    for m in MODES:
        print(f"{m:>8}: block medians: median {statistics.median(medians[m]) * 1e3:.2f} ms, fastest "
              f"{min(medians[m]) * 1e3:.2f} ms; input making {result['making_s'][m] * 1e3:.3f} ms/step (rank 0)")
    for a_, b_ in (("before", "after"), ("in-step", "after")):
        ratios = [x / y for x, y in zip(medians[a_], medians[b_])]
        print(f"{a_} / {b_}: median of per-round ratios {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f}); fastest blocks "
              f"{min(medians[a_]) / min(medians[b_]):.3f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
