"""Suite-wide hygiene between tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def main_module_kept() -> Iterator[None]:
    """Put ``sys.modules['__main__']`` back as it was. Streamlit's ``AppTest`` runs the dashboard script as
    ``__main__`` and leaves it there; every rank process started afterwards (multiprocessing's forkserver
    re-imports the parent's main module in each child that has no module spec) would then re-run the whole
    dashboard script before its rank function: ~2.3 s per launch on the 2-core machine, against ~0.1 s."""
    main = sys.modules["__main__"]
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@pytest.fixture(autouse=True)
def _keep_main_module() -> Iterator[None]:
    with main_module_kept():
        yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where a selected test runs a Hugging Face workload's ranks (marker ``hf``), start the forkserver now,
    preloading transformers' model code, as ``parbench sweep`` does for such a plan: each of those ranks
    then forks with it instead of importing it (~3 s a process on the 2-core machine)."""
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("hf") for item in session.items):
        from parbench.distributed import prestart
        from parbench.workloads import preload_modules

        prestart(*preload_modules(["hf-llama"]))


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (``cmd &``, as a CI script or ``nohup`` may)
    inherits SIGINT ignored, and every process it starts then ignores it too: the Ctrl-C tests' sweeps and
    clusters ran to the end instead of stopping. Handle it as a terminal's session does; a child's exec turns
    a handled signal back to its default."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
