"""Every sweep file the package ships plans: each point a valid run, before anything is spawned."""

from __future__ import annotations

from importlib import resources

import pytest

from parbench.cli import main

BUNDLED = sorted(p.name for p in resources.files("parbench.sweeps").iterdir() if p.name.endswith(".toml"))


def test_the_package_ships_its_sweeps():
    assert {"default.toml", "simcheck.toml", "threads.toml"} <= set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_a_bundled_sweep_plans_every_point(name, tmp_path, capsys):
    path = resources.files("parbench.sweeps").joinpath(name)
    assert main(["sweep", str(path), "--dry-run", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert " runs, " in out and "\n  run  " in out
    assert not (tmp_path / "runs").exists()  # a dry run writes no record
