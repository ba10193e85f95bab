"""How parbench cuts things into contiguous parts; pure Python, shared by the runner and the simulator."""

from __future__ import annotations


def contiguous_splits(total: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of ``parts`` contiguous pieces of ``total`` items, earlier pieces taking the
    remainder (pipeline units over stages, parameter elements over servers)."""
    base, extra = divmod(total, parts)
    bounds, lo = [], 0
    for c in range(parts):
        hi = lo + base + (1 if c < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds
