"""A plugin whose own import fails (a dependency that is not installed)."""

import no_such_dependency_for_parbench  # noqa: F401


def make(cfg, seed):
    raise AssertionError("never reached")
