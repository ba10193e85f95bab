"""A dashboard test must not leave the rank processes started after it re-running the dashboard script."""

from __future__ import annotations

import sys

from streamlit.testing.v1 import AppTest

from parbench.distributed import spawn

from ..conftest import main_module_kept
from .conftest import APP


def main_script(payload, info) -> str | None:
    """The file this rank process ran as its parent's main module (None: none)."""
    return getattr(sys.modules.get("__mp_main__"), "__file__", None)


def test_ranks_started_after_an_app_test_do_not_run_the_dashboard_script():
    before = sys.modules["__main__"]
    with main_module_kept():
        AppTest.from_file(str(APP), default_timeout=60).run()
        # Streamlit leaves the script as __main__ (if a release stops doing so, this test has nothing left to guard)
        assert getattr(sys.modules["__main__"], "__file__", None) == str(APP)
    assert sys.modules["__main__"] is before
    outcome = spawn(2, main_script, None, timeout_s=60)
    assert outcome.status == "ok", outcome.error
    assert str(APP) not in outcome.results, outcome.results
