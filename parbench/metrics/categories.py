"""The three communication categories (torch-free, so records, dashboard and simulator share them).

``data``: samples and labels moved between ranks; ``parameter``: gradients and parameters
(all-reduce, all-gather, reduce-scatter, parameter-server push/pull); ``intermediate``:
activations and their gradients between model-parallel ranks (tensor and pipeline parallelism).
"""

from __future__ import annotations

import enum


class Category(str, enum.Enum):
    DATA = "data"
    PARAMETER = "parameter"
    INTERMEDIATE = "intermediate"


CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)
