import math

import pytest

from pear_agent.bench.stats import latency_stats, mcnemar_exact, wilson


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (50, 50, 0.9287, 1.0)],
)
def test_wilson_matches_published_values(k, n, lo, hi) -> None:
    a, b = wilson(k, n)
    assert a == pytest.approx(lo, abs=1e-4) and b == pytest.approx(hi, abs=1e-4)


def test_wilson_without_data_is_uninformative() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(6, 0) == mcnemar_exact(0, 6)
    assert mcnemar_exact(3, 3) == 1.0
    # b=1, c=9: 2 * P(X <= 1), X ~ Bin(10, 1/2)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    assert mcnemar_exact(0, 50) < 1e-14 and not math.isnan(mcnemar_exact(0, 50))


def test_latency_stats() -> None:
    assert latency_stats([]) == (None, None)
    med, p90 = latency_stats([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert med == 5.5 and p90 == pytest.approx(9.1)
