"""The mlp's real-data options: scikit-learn's digits and an MNIST IDX directory (no downloads)."""

import struct

import pytest
import torch

from parbench.config import WorkloadConfig
from parbench.workloads import make


def _write_idx(path, array: torch.Tensor) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.dim()) + struct.pack(f">{array.dim()}I", *array.shape)
    path.write_bytes(header + array.to(torch.uint8).numpy().tobytes())


def test_mnist_idx_directory(tmp_path):
    images = torch.arange(5 * 28 * 28).reshape(5, 28, 28) % 256
    _write_idx(tmp_path / "train-images-idx3-ubyte", images)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", torch.tensor([3, 1, 4, 1, 5]))
    w = make(WorkloadConfig(name="mlp", dataset="mnist", dataset_path=str(tmp_path)), seed=0)
    assert w.batch is None and w.batch_slice is None and len(w.dataset) == 5
    x, y = w.dataset[2]
    assert x.shape == (784,) and int(y) == 4
    assert torch.equal(x, images[2].reshape(-1).float() / 255.0)
    xs, ys = w.sample(3)
    assert xs.shape == (3, 784) and ys.tolist() == [3, 1, 4]


def test_digits_from_scikit_learn():
    pytest.importorskip("sklearn", reason="scikit-learn (test extra) provides the digits dataset")
    w = make(WorkloadConfig(name="mlp", dataset="digits"), seed=0)
    assert len(w.dataset) == 1797  # scikit-learn's digits: 1797 8x8 images
    x, y = w.sample(16)
    assert x.shape == (16, 784) and y.dtype == torch.int64 and 0 <= int(y.min()) and int(y.max()) <= 9


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_synthetic_batches_identical_across_calls_and_differ_across_steps(name):
    w = make(WorkloadConfig(name=name), seed=1)
    a, b = w.rows(2, 8, 0, 8), w.rows(2, 8, 0, 8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(w.rows(3, 8, 0, 8)[0], a[0])


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_a_slice_is_the_same_rows_of_the_whole_batch(name):
    """What a rank makes for its slice equals those rows of the global batch, for every split."""
    w = make(WorkloadConfig(name=name), seed=0)
    whole = w.rows(5, 16, 0, 16)
    for parts in (2, 4, 8):
        per = 16 // parts
        for r in range(parts):
            part = w.rows(5, 16, r * per, (r + 1) * per)
            assert all(torch.equal(p, t[r * per:(r + 1) * per]) for p, t in zip(part, whole)), (parts, r)


def test_flops_and_parameter_counts_of_the_builtin_models():
    mlp = make(WorkloadConfig(name="mlp"), 0)
    assert mlp.forward_flops_per_sample == 2 * (784 * 512 + 512 * 10)
    gpt_cfg = WorkloadConfig(name="transformer")
    gpt = make(gpt_cfg, 0)
    model = gpt.build(0)
    d, v, t, L = 64, 256, 32, 4
    per_block = 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * 2 * d
    assert sum(p.numel() for p in model.parameters()) == v * d + t * d + L * per_block + 2 * d + d * v
    assert gpt.forward_flops_per_sample == t * (2 * (L * 12 * d * d + d * v) + 2 * L * 2 * t * d)
