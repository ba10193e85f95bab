"""How much torch's step-coupled interleaved 1F1B costs over the same order run by dependencies alone.

    python scripts/pipeline_step_replay.py [--pp 8] [--backward 3]

torch.distributed.pipelining's ``PipelineScheduleMulti`` (late 2024, the version torchtitan's 405B tables
ran) walks each rank's list of time steps in order; after a step's compute it posts that step's sends and
the receives matching its neighbours' same-numbered steps, and waits on them all (``_batch_p2p(ops).wait()``).
A rank therefore cannot leave step t before each neighbour it exchanges with has finished its own step t.
The order is ``ScheduleInterleaved1F1B``'s: on rank r, (v - 1) p + 2 (p - 1 - r) warm-up forwards after r idle
steps, then forward / backward pairs, then the remaining backwards; chunk c of the model on rank c mod p.

Prints, per (v, m), the bubble (makespan / work - 1) of that step-coupled replay, of the same order run as
soon as each chunk's input is ready, and the formula (p - 1) / (v m). Durations: a forward 1 / v, a
backward ``--backward`` / v (3 under full recomputation: the forward again and the backward's two GEMMs).
Transfers are taken as free (they are milliseconds against seconds of compute in the rows it explains).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Action = tuple[str, int, int]  # ("F" | "B", global chunk index, micro-batch)


def interleaved_order(p: int, v: int, m: int, rank: int) -> list[Action | None]:
    """One rank's time steps in ``ScheduleInterleaved1F1B``'s order (None: an idle step)."""
    warm = min((v - 1) * p + 2 * (p - 1 - rank), m * v)
    steady = v * m - warm
    post_warm = (v * p + 2 * (p - 1 - rank)) - (warm + rank)
    order: list[Action | None] = [None] * rank
    seen = {"F": {}, "B": {}}

    def take(kind: str, chunk: int) -> Action:
        mb = seen[kind].get(chunk, 0)
        seen[kind][chunk] = mb + 1
        return kind, chunk, mb

    fwd, bwd = 0, warm
    for op in range(warm + steady + warm):
        if op < warm or op < warm + steady:
            order.append(take("F", ((fwd // p) % v) * p + rank))
            if fwd == warm - 1:
                order.extend([None] * post_warm)
            fwd += 1
        else:
            order.append(None)
        if op >= warm:
            order.append(take("B", (v - 1 - ((bwd - warm) // p) % v) * p + rank))
            bwd += 1
    return order


def _duration(action: Action | None, f: float, b: float) -> float:
    return 0.0 if action is None else (f if action[0] == "F" else b)


def chunk_durations(forward: list[list[float]], backward: list[list[float]]) -> Callable[[Action], float]:
    """Durations of unequal chunks: ``forward[r][c]`` is rank r's c-th chunk (global chunk c p + r)."""
    p = len(forward)
    return lambda a: (forward if a[0] == "F" else backward)[a[1] % p][a[1] // p]


def step_coupled_makespan(p: int, v: int, m: int, f: float, b: float) -> float:
    """Each rank's step t ends when its compute and every exchange of step t with a neighbour are done."""
    orders = [interleaved_order(p, v, m, r) for r in range(p)]
    last = p * v - 1

    def at(r: int, t: int) -> Action | None:
        return orders[r][t] if t < len(orders[r]) else None

    end = [0.0] * p
    for t in range(max(len(o) for o in orders)):
        ready = [end[r] + _duration(at(r, t), f, b) for r in range(p)]
        new = list(ready)
        for r in range(p):
            partners, a = [], at(r, t)
            if a and a[0] == "F" and a[1] < last:
                partners.append((r + 1) % p)
            if a and a[0] == "B" and a[1] > 0:
                partners.append((r - 1) % p)
            prev, nxt = at((r - 1) % p, t), at((r + 1) % p, t)
            if prev and prev[0] == "F" and prev[1] < last:
                partners.append((r - 1) % p)
            if nxt and nxt[0] == "B" and nxt[1] > 0:
                partners.append((r + 1) % p)
            new[r] = max([ready[r]] + [ready[q] for q in partners])
        end = new
    return max(end)


def dependency_makespan(p: int, v: int, m: int, f: float, b: float,
                        duration: Callable[[Action], float] | None = None) -> float:
    """The same per-rank order, each action started once its rank is free and its input exists. ``duration``:
    each action's time where chunks differ (``chunk_durations``), else a forward f and a backward b."""
    orders = [[a for a in interleaved_order(p, v, m, r) if a] for r in range(p)]
    last = p * v - 1
    done: dict[Action, float] = {}
    pos, free = [0] * p, [0.0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pos[r] < len(orders[r]):
                kind, chunk, mb = orders[r][pos[r]]
                if kind == "F":
                    need = ("F", chunk - 1, mb) if chunk > 0 else None
                else:
                    need = ("F", chunk, mb) if chunk == last else ("B", chunk + 1, mb)
                if need and need not in done:
                    break
                free[r] = max(free[r], done[need] if need else 0.0) + (
                    duration((kind, chunk, mb)) if duration else _duration((kind, chunk, mb), f, b))
                done[(kind, chunk, mb)] = free[r]
                pos[r] += 1
                moved = True
    if any(pos[r] < len(orders[r]) for r in range(p)):
        raise RuntimeError("the order deadlocks")
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=8)
    parser.add_argument("--backward", type=float, default=3.0, help="backward time over forward time")
    args = parser.parse_args()
    p = args.pp
    for v, m in ((1, 8), (1, 16), (2, 16), (4, 32)):
        f, b = 1.0 / v, args.backward / v
        work = m * (1.0 + args.backward)
        coupled, free = step_coupled_makespan(p, v, m, f, b), dependency_makespan(p, v, m, f, b)
        print(f"pp {p}, v {v}, m {m:3d}: bubble step-coupled {coupled / work - 1:.3f}, "
              f"by dependencies {free / work - 1:.3f}, (p - 1) / (v m) {(p - 1) / (v * m):.3f}")


if __name__ == "__main__":
    main()
