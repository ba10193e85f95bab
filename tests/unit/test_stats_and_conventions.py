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
