"""One cache of single-process reference losses for the whole test session.

A reference's losses depend only on its configuration (workload, global batch, seed, steps,
precision: ``RunConfig.reference``), so the tests whose runs share one compare against one launch
of it, as a sweep's strategies and repeats do (``parbench.launch.References``)."""

from __future__ import annotations

from typing import Any

from parbench import launch
from parbench.config import RunConfig

REFERENCES = launch.References()


def run(cfg: RunConfig, **kwargs: Any) -> dict[str, Any]:
    """``parbench.launch.run`` with the session's reference cache."""
    return launch.run(cfg, references=REFERENCES, **kwargs)
