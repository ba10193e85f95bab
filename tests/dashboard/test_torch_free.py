"""The dashboard, the report and the simulator are torch-free: importing every module of ``parbench.sim``,
``dashboard.app`` and the report's, then rendering every view over real records, leaves torch unimported. A fresh
interpreter, so that nothing another test imported hides an import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import APP, FIXTURE_RESULTS

SCRIPT = """
import importlib, os, pkgutil, sys
import parbench.sim
for mod in pkgutil.walk_packages(parbench.sim.__path__, "parbench.sim."):
    importlib.import_module(mod.name)
from streamlit.testing.v1 import AppTest
from dashboard.views import VIEWS
import dashboard.app
import parbench.charts, parbench.report, parbench.commands.dashboard, parbench.commands.report
os.environ["PARBENCH_RESULTS_DIR"] = sys.argv[2]
at = AppTest.from_file(sys.argv[1], default_timeout=120)
at.query_params["source"] = ["reference", "."]
at.run()
assert not at.exception, at.exception
for _, view in VIEWS:
    at.radio(key="view").set_value(view.TITLE).run()
    assert not at.exception, (view.TITLE, at.exception)
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


@pytest.mark.slow
def test_simulator_and_every_dashboard_view_never_import_torch():
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(APP), str(FIXTURE_RESULTS)], capture_output=True,
                         text=True, cwd=Path(APP).parents[1], timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
