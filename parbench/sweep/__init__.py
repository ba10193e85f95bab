"""Sweeps: a TOML grid -> validated spec -> points (and skipped points) -> resumable runs -> records.

``spec`` (schema and validation), ``grid`` (expansion and combination rules), ``execute``
(resume, claims, failure isolation, manifest), ``report`` (the summary table).
"""

from parbench.sweep.execute import SweepOutcome, execute
from parbench.sweep.grid import Plan, Point, Skipped, plan
from parbench.sweep.spec import SweepSpec, load_spec

__all__ = ["Plan", "Point", "Skipped", "SweepOutcome", "SweepSpec", "execute", "load_spec", "plan"]
