"""A non-editable install in a fresh virtual environment ships the dashboard beside parbench, and
``parbench dashboard`` finds it there (slow: ~80 s for the venv and the wheels)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_fresh_non_editable_install_has_the_dashboard(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "torch==2.13.0", str(ROOT)], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed copy, not the checkout
    code = ("import dashboard.app, dashboard.views as v, parbench.commands.dashboard as d; "
            "print(d.app_path(), len(v.VIEWS))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=300, check=True)
    app, views = out.stdout.split()
    assert Path(app).is_relative_to(venv) and Path(app).name == "app.py" and int(views) > 0
