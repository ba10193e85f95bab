import math

import pytest

from parbench.metrics import stats
from parbench.metrics.conventions import sent_bytes


def test_quantiles_exact():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert stats.median(xs) == 2.5
    assert stats.quantile(xs, 0.1) == pytest.approx(1.3)
    assert stats.quantile(xs, 0.9) == pytest.approx(3.7)
    assert stats.iqr(xs) == pytest.approx(1.5)
    assert math.isnan(stats.median([]))
    assert stats.summary([1.0, 2.0, 3.0], "t") == {"t_median": 2.0, "t_p10": 1.2, "t_p90": pytest.approx(2.8), "t_iqr": 1.0}


@pytest.mark.parametrize("kind, payload, n, root, expected", [
    ("all_reduce", 1000, 2, False, 1000),     # 2(n-1)/n x S
    ("all_reduce", 1000, 4, False, 1500),
    ("all_gather", 1000, 4, False, 750),      # (n-1)/n x S, S = full buffer
    ("reduce_scatter", 1000, 4, False, 750),
    ("broadcast", 1000, 4, True, 1000),       # S from the root
    ("broadcast", 1000, 4, False, 0),
    ("scatter", 1000, 4, True, 750),
    ("scatter", 1000, 4, False, 0),
    ("send", 1000, 2, False, 1000),
    ("recv", 1000, 2, False, 0),
    ("all_reduce", 1000, 1, False, 0),
])
def test_sent_bytes_conventions(kind, payload, n, root, expected):
    assert sent_bytes(kind, payload, n, is_root=root) == expected


def test_ranks_average_ties():
    assert stats.ranks([10.0, 20.0, 20.0, 30.0]) == [1.0, 2.5, 2.5, 4.0]
    assert stats.ranks([3.0, 1.0, 2.0]) == [3.0, 1.0, 2.0]


def test_spearman_exact():
    # no ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)) = 1 - 6 * 4 / 120 = 0.8 (Spearman 1904)
    assert stats.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8, abs=1e-15)
    # ties: Pearson of the ranks [1..5] and [1, 2, 3.5, 5, 3.5]: cov 8, variances 10 and 9.5
    assert stats.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95), abs=1e-15)
    assert stats.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0, abs=1e-15)
    assert math.isnan(stats.spearman([1, 2], [3, 3])) and math.isnan(stats.spearman([1], [1]))
