"""Example sweep files shipped with parbench (``parbench sweep`` with no file runs default.toml)."""
