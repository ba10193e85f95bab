"""Real image data for the mlp, from disk only: scikit-learn's digits or an MNIST IDX directory."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import torch
import torch.nn.functional as F

from parbench.workloads.base import step_generator


def load(name: str, path: Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(images [N, 784] float in [0, 1], labels [N] int64)."""
    if name == "digits":
        return _digits()
    if name == "mnist":
        return _mnist(path)
    raise ValueError(f"unknown dataset {name!r}")


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 1797 8x8 digits (shipped with the package), upsampled to 28x28."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise RuntimeError("dataset='digits' needs scikit-learn: pip install scikit-learn") from exc
    d = load_digits()
    images = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
    return images.reshape(len(images), -1), torch.tensor(d.target, dtype=torch.int64)


def _read_idx(path: Path) -> torch.Tensor:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    dtype_code, ndim = data[2], data[3]
    if dtype_code != 0x08:
        raise ValueError(f"{path}: only unsigned-byte IDX files are supported")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def _find(root: Path, stem: str) -> Path:
    for candidate in sorted(root.glob(f"{stem}*")):
        return candidate
    raise FileNotFoundError(f"no {stem}* file in MNIST directory {root}")


def _mnist(root: Path | None) -> tuple[torch.Tensor, torch.Tensor]:
    if root is None or not root.is_dir():
        raise FileNotFoundError(f"MNIST directory {root} does not exist")
    images = _read_idx(_find(root, "train-images"))
    labels = _read_idx(_find(root, "train-labels"))
    return images.reshape(len(images), -1).float() / 255.0, labels.long()


def batch(images: torch.Tensor, labels: torch.Tensor, seed: int, step: int, size: int):
    """A seeded random draw of ``size`` samples for ``step`` (with replacement across steps)."""
    idx = torch.randint(len(images), (size,), generator=step_generator(seed, step, "dataset"))
    return images[idx], labels[idx]
