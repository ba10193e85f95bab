"""The strategy registry names where each builder lives; reading it imports no strategy module, so the
parent checks a plan without torch._dynamo, FSDP, DTensor or the pipelining schedules."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from parbench.config import Strategy
from parbench.strategies import BUILDERS, MODULES, builder

HEAVY = ("torch._dynamo", "torch.distributed.fsdp", "torch.distributed.tensor", "torch.distributed.pipelining",
         "parbench.strategies.pipeline", "parbench.strategies.sharded")


def _imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_checking_a_plan_and_loading_the_launcher_import_no_strategy_module():
    loaded = _imported_after("import parbench.launch, parbench.runner, parbench.sweep, parbench.preflight")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_forkserver_preload_imports_every_strategy_module():
    loaded = _imported_after("import parbench.strategies.every")
    assert set(MODULES) <= loaded and "torch.distributed.pipelining" in loaded


@pytest.mark.parametrize("strategy", list(BUILDERS), ids=lambda s: s.value)
def test_every_entry_names_a_keyword_only_builder(strategy: Strategy):
    fn = builder(strategy)
    assert fn.__module__ in MODULES and fn.__name__.startswith("build_")
    params = inspect.signature(fn).parameters
    assert next(iter(params)) == "ctx" and {p.kind for p in params.values()} == {inspect.Parameter.KEYWORD_ONLY}
