"""Imports every strategy module the registry names. The forkserver preloads this module
(``parbench.distributed.launcher.PRELOAD``) so that a rank it forks builds any strategy without importing it."""

from __future__ import annotations

import importlib

from parbench.strategies import MODULES

for _module in MODULES:
    importlib.import_module(_module)
