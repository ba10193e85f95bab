"""The import graph of parbench and the dashboard: no circle, and no module imports from a layer
above its own (function-level imports count too; ``if TYPE_CHECKING:`` blocks do not). Data flows
one way: configuration -> ranks -> records -> sweeps, simulator, reports -> commands and dashboard."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS: tuple[tuple[str, ...], ...] = (
    # 0: names, rules and small pure helpers
    ("parbench", "parbench.names", "parbench.layout", "parbench.validation", "parbench.config", "parbench.splits",
     "parbench.devices", "parbench.layout_key", "parbench.progress"),
    # 1: what a rank is made of, and the record store
    ("parbench.metrics", "parbench.workloads", "parbench.data", "parbench.rank_result", "parbench.distributed",
     "parbench.results"),
    ("parbench.strategies",),
    # 3: one rank's measurement, the parent's checks and the record it builds
    ("parbench.runner", "parbench.preflight", "parbench.record", "parbench.trace"),
    # 4: launching runs (one host, many nodes, benchmarks)
    ("parbench.launch", "parbench.multinode", "parbench.bench", "parbench.summary"),
    # 5: what is built on runs and records
    ("parbench.sweep", "parbench.cluster", "parbench.sim", "parbench.charts", "parbench.time_charts",
     "parbench.figure_basics", "parbench.report", "parbench.slurm", "parbench.doctor"),
    # 6: the user's entry points
    ("parbench.commands", "parbench.cli", "parbench.__main__", "parbench.sweeps", "dashboard"),
)


def modules() -> dict[str, Path]:
    out = {}
    for path in [*ROOT.joinpath("parbench").rglob("*.py"), *ROOT.joinpath("dashboard").rglob("*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Modules of ours that ``name`` imports anywhere in its file, outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def layer(module: str) -> int:
    """The layer of the longest prefix of ``module`` that LAYERS names."""
    best = max((p for ps in LAYERS for p in ps if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, ps in enumerate(LAYERS) if best in ps)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert cycles(graph()) == []


def test_no_import_from_a_higher_layer():
    upward = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
              for a, targets in graph().items() for b in sorted(targets) if layer(b) > layer(a)]
    assert upward == []


def test_every_module_has_a_layer():
    assert [m for m in modules() if not any(m == p or m.startswith(p + ".") for ps in LAYERS for p in ps)] == []


def test_the_package_never_names_the_test_tree():
    """Paths into the checkout's tests/ are arguments (golden file, benchmark suite), never built in."""
    named = [f"{p.relative_to(ROOT)}:{i}" for p in ROOT.joinpath("parbench").rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if "tests/" in line.replace("nccl-tests/", "")]
    assert named == []


def test_the_checks_find_a_circle_and_an_upward_import():
    """The helpers on a made-up graph: the checks above can fail."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("parbench.results") < layer("parbench.sweep.execute")
