"""One status line on a terminal: what a long command is doing now (launch, warm-up, probe, timed
steps; building a workload), rewritten in place on stderr and erased when the work is done.

Torch-free. Off when stderr is not a terminal (logs and pipes stay clean); ``PARBENCH_PROGRESS=1``
forces it on, ``=0`` off. Rank processes inherit stderr from the launching command, so rank 0 can
report its own phases on the same line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

ENV = "PARBENCH_PROGRESS"


def enabled(stream: TextIO | None = None) -> bool:
    """On for a terminal, unless ``PARBENCH_PROGRESS`` says otherwise."""
    forced = os.environ.get(ENV)
    if forced in ("0", "1"):
        return forced == "1"
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Status:
    """``phase(text)`` replaces the line; ``done()`` erases it. A no-op when not ``enabled``."""

    def __init__(self, prefix: str = "parbench", stream: TextIO | None = None, on: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.prefix = prefix
        self.on = enabled(self.stream) if on is None else on
        self.start = time.monotonic()

    def phase(self, text: str) -> None:
        if self.on:
            elapsed = time.monotonic() - self.start
            # \r: back to the line start; \033[K: erase to its end (every terminal since the VT100)
            self.stream.write(f"\r\033[K{self.prefix}: {text} [{elapsed:.0f} s]")
            self.stream.flush()

    def done(self) -> None:
        if self.on:
            self.stream.write("\r\033[K")
            self.stream.flush()


def for_rank(rank: int, prefix: str = "parbench run") -> Status:
    """A rank's status line: on for rank 0 only, and only when the launching command asked for it
    (``PARBENCH_PROGRESS=1`` in the environment the ranks started with), so a sweep's ranks stay quiet."""
    return Status(prefix, on=rank == 0 and os.environ.get(ENV) == "1")
