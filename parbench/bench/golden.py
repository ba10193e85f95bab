"""The golden file: deterministic figures of every strategy at fixed shapes, compared exactly.

The golden file (its path is an argument; a checkout keeps it beside its benchmark tests) holds,
per strategy, the shape it was measured at and per rank: parameter count, accounted bytes
(parameters, gradients, optimizer state, saved activations), communication bytes per step by
category, wire bytes, and the per-op breakdown. The gate has
two checks, both exact:

1. **measured == golden**: any change to a figure fails, with the dotted path of every difference;
2. **integrity**: the file's ``updates`` list ends with an entry whose ``fingerprint`` is the
   SHA-256 of the figures it holds and whose ``reason`` is not empty. ``parbench bench golden
   --update --reason "..."`` is the only writer that adds such an entry, so a figure edited by
   hand, or regenerated without a reason, fails. A change of figures therefore lands in CI
   together with the updated file *and* its reason (git shows both in the same commit).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from parbench.results import git_commit, now_iso, write_json_atomic

FORMAT = 1
SHAPE_KEYS = ("world_size", "global_batch_size", "micro_batches", "dp", "tp", "pp")
# Figures measured to vary between runs of unchanged code: kept out of the exact comparison.
# (fsdp's activation bytes used to vary: its per-step unsharded parameters were counted as
# activations and their freed storage addresses reused; memory._is_parameter fixed it.)
EXCLUDED: dict[str, dict[str, str]] = {}


class GoldenError(ValueError):
    """An update the golden file refuses (no reason)."""


def fingerprint(figures: dict[str, Any]) -> str:
    """SHA-256 of the figures' canonical JSON (sorted keys): equal figures, equal fingerprint."""
    return hashlib.sha256(json.dumps(figures, sort_keys=True).encode()).hexdigest()


def shape(cfg) -> dict[str, Any]:
    """The shape a strategy's figures hold for (stored beside them, so a shape change shows too)."""
    return {**{k: getattr(cfg, k) for k in SHAPE_KEYS}, "workload": cfg.workload.shape()}


def measure_all(strategies=None) -> dict[str, Any]:
    """Launch every strategy once at its fixed configuration; ``{strategy: {shape, ranks}}``."""
    from parbench.bench import harness

    out = {}
    for strategy in strategies or harness.implemented_strategies():
        spec = harness.BenchSpec(run=harness.bench_config(strategy), blocks=1, steps_per_block=1)
        out[strategy.value] = entry(spec, harness.launch_bench(spec))
    return out


def entry(spec, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    from parbench.bench.harness import golden_figures

    drop = EXCLUDED.get(spec.run.strategy.value, {})
    figures = {r: {k: v for k, v in f.items() if k not in drop} for r, f in golden_figures(ranks).items()}
    return {"shape": shape(spec.run), "ranks": figures}


def load(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """``{"ddp.ranks.rank0.comm_bytes_per_step.parameter": 123, ...}``: one leaf per dotted path."""
    if isinstance(obj, dict) and (obj or not prefix):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: obj}


def diff(golden: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    """Every leaf whose value differs exactly, or exists on one side only."""
    a, b = flatten(golden), flatten(measured)
    missing = "(absent)"
    return [f"{k}: golden {a.get(k, missing)!r} != measured {b.get(k, missing)!r}"
            for k in sorted(a.keys() | b.keys()) if a.get(k, missing) != b.get(k, missing)]


def integrity(doc: dict[str, Any]) -> list[str]:
    """Problems with the file itself: no reasoned update entry matching the figures it holds."""
    updates = doc.get("updates") or []
    if doc.get("format") != FORMAT:
        return [f"format {doc.get('format')!r} != {FORMAT}"]
    if not updates:
        return ["no update entries: write the file with `parbench bench golden --update --reason ...`"]
    last, problems = updates[-1], []
    if not str(last.get("reason", "")).strip():
        problems.append("the last update has no reason")
    if last.get("fingerprint") != fingerprint(doc["figures"]):
        problems.append("the figures do not match the last update's fingerprint (edited by hand?): "
                        "regenerate with `parbench bench golden --update --reason ...`")
    return problems


def check(measured: dict[str, Any], path: str | Path) -> list[str]:
    """The gate: integrity problems, then every difference between the file and the measurement."""
    doc = load(path)
    return integrity(doc) + diff(doc["figures"], measured)


def update(measured: dict[str, Any], reason: str, path: str | Path) -> list[str]:
    """Write the measured figures with a reasoned update entry; returns the changed paths."""
    if not reason or not reason.strip():
        raise GoldenError("a golden update needs a reason (--reason \"why the figures changed\")")
    path = Path(path)
    doc = load(path) if path.exists() else {"format": FORMAT, "figures": {}, "updates": []}
    changed = diff(doc["figures"], measured)
    if not changed and not integrity(doc):
        return []
    doc.update(format=FORMAT, figures=measured, excluded=EXCLUDED)
    doc["updates"].append({"fingerprint": fingerprint(measured), "reason": reason.strip(),
                           "updated_at": now_iso(), "git_commit": git_commit(),
                           "changed": [c.split(":")[0] for c in changed][:20], "n_changed": len(changed)})
    write_json_atomic(path, doc, indent=1, sort_keys=True)  # indented and sorted: reviewable diffs
    return changed
