"""Real image data for the mlp, from disk only: scikit-learn's digits or an MNIST IDX directory.

Each is a ``TensorDataset`` of (image [784] float in [0, 1], label int64), read by the ranks like any
Dataset: a DataLoader with a DistributedSampler (``parbench.data``)."""

from __future__ import annotations

import gzip
import importlib.util
import struct
from pathlib import Path

import torch
import torch.nn.functional as F

from torch.utils.data import TensorDataset


def load(name: str, path: Path | None) -> TensorDataset:
    """(images [N, 784] float in [0, 1], labels [N] int64) as a Dataset."""
    if name == "digits":
        return TensorDataset(*_digits())
    if name == "mnist":
        return TensorDataset(*_mnist(path))
    raise ValueError(f"unknown dataset {name!r}")


def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's 1797 8x8 digits (shipped with the package), upsampled to 28x28.

    Read from the package's own data file (rows of 64 pixel values 0..16, then the label), the file
    ``sklearn.datasets.load_digits`` reads, without importing scikit-learn: the import costs every
    rank seconds on a loaded machine."""
    pixels, labels = _digits_file()
    images = pixels.reshape(-1, 1, 8, 8) / 16.0
    images = F.interpolate(images, size=(28, 28), mode="bilinear", align_corners=False)
    return images.reshape(len(images), -1), labels


def _digits_file() -> tuple[torch.Tensor, torch.Tensor]:
    import numpy as np

    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("dataset='digits' needs scikit-learn: pip install scikit-learn")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    rows = torch.from_numpy(np.loadtxt(path, delimiter=",", dtype=np.float32))
    return rows[:, :-1], rows[:, -1].long()


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
