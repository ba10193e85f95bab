"""Workloads from outside parbench: ``package.module:factory``, ``path/to/file.py:factory``, or an
installed distribution's entry point in group ``parbench.workloads`` (``name = "module:factory"``).

A factory has the built-ins' signature: ``factory(cfg: WorkloadConfig, seed: int) -> Workload``.
Every failure is a ConfigError naming the workload and what is wrong, so the launcher reports it
(exit 2) before a rank exists. Ranks fork from a server that started before the plugin was named,
so a file is loaded by its path in each process (not through ``sys.path``); a dotted module must be
importable there (installed, or on ``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

from parbench.config import ConfigError, RunConfig, WorkloadConfig, installed_plugins

Factory = Callable[[WorkloadConfig, int], object]


def resolve(name: str) -> Factory:
    """The factory a plugin name points to (entry point, dotted path or file path)."""
    spec = installed_plugins().get(name, name)
    target, _, attr = spec.rpartition(":")
    module = _load_file(name, target) if target.endswith(".py") else _import(name, target)
    factory = getattr(module, attr, None)
    if factory is None:
        public = sorted(k for k, v in vars(module).items()
                        if callable(v) and not k.startswith("_") and getattr(v, "__module__", None) == module.__name__)
        raise ConfigError(f"workload {name!r}: {target} has no attribute {attr!r}; callables there: "
                          f"{', '.join(public) or 'none'}")
    if not callable(factory):
        raise ConfigError(f"workload {name!r}: {target}:{attr} is a {type(factory).__name__}, not a factory")
    _check_signature(name, factory)
    return factory


def _import(name: str, module: str):
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure while importing user code is bad input
        raise ConfigError(f"workload {name!r}: cannot import module {module!r}: {type(exc).__name__}: {exc}") from exc


def _load_file(name: str, path: str):
    """Import a file by path, once per process, under a name derived from the path."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"workload {name!r}: plugin file {path} does not exist")
    key = f"parbench_plugin_{file.stem}_{hashlib.sha1(str(file).encode()).hexdigest()[:8]}"
    if key in sys.modules:
        return sys.modules[key]
    if str(file.parent) not in sys.path:
        sys.path.append(str(file.parent))  # so the plugin can import modules beside it
    spec = importlib.util.spec_from_file_location(key, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001
        del sys.modules[key]
        raise ConfigError(f"workload {name!r}: cannot import {path}: {type(exc).__name__}: {exc}") from exc
    return module


def _check_signature(name: str, factory: Factory) -> None:
    try:
        inspect.signature(factory).bind(WorkloadConfig(), 0)
    except TypeError as exc:
        raise ConfigError(f"workload {name!r}: the factory must accept (cfg: WorkloadConfig, seed: int); "
                          f"{getattr(factory, '__qualname__', factory)}{_signature(factory)} does not ({exc})") from None


def _signature(factory: Factory) -> str:
    try:
        return str(inspect.signature(factory))
    except (TypeError, ValueError):
        return "(...)"


class _Expired(BaseException):
    """Raised by the alarm; a BaseException, so that the checks' ``except Exception`` around plugin code let it by."""


@contextlib.contextmanager
def plugin_deadline(c: RunConfig) -> Iterator[None]:
    """A plugin's code runs in this process before any rank exists (its import, factory, build, two samples through
    the model): bound it by the run's timeout, so that a plugin that hangs there is refused by name instead of
    hanging ``parbench run`` or a whole sweep. SIGALRM interrupts Python code and sleeps, not a C call already
    running; it is armed only in the main thread (the only one a signal reaches), and only for plugins. An alarm
    already armed by the caller (a test runner's timeout) is left to fire first when it is due sooner, and is
    re-armed with what is left of it afterwards."""
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if (not c.workload.is_plugin or threading.current_thread() is not threading.main_thread()
            or 0 < outer_left <= c.timeout_s):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _Expired

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, c.timeout_s)
    try:
        yield
    except _Expired:
        raise ConfigError(f"workload {c.workload.name!r}: its import, factory, build and two samples through the "
                          f"model did not finish in {c.timeout_s:g} s (the run's timeout) before any rank was "
                          "started") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))
