"""The one interval method (cosim.paired.mean_interval): edges, determinism, coverage.

Studies, benchmarks and the tuning protocol all print intervals from it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.paired import mean_interval


def test_mean_interval_edges_and_determinism():
    assert mean_interval([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0, 3.0)
    mean, lo, hi = mean_interval([4.0])
    assert mean == 4.0 and np.isnan(lo) and np.isnan(hi)
    assert all(np.isnan(mean_interval([])))
    assert mean_interval([1.0, np.nan, 3.0, np.inf, 2.0])[0] == 2.0   # non-finite left out
    x = np.random.default_rng(1).exponential(size=12)
    assert mean_interval(x) == mean_interval(x)
    mean, lo, hi = mean_interval(x, confidence=0.95)
    _, lo90, hi90 = mean_interval(x, confidence=0.90)
    assert lo < lo90 < mean < hi90 < hi


def test_mean_interval_matches_normal_theory_on_a_large_sample():
    x = np.random.default_rng(2).normal(10.0, 2.0, size=400)
    mean, lo, hi = mean_interval(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert mean == pytest.approx(x.mean())
    assert lo == pytest.approx(mean - half, abs=0.1 * half)
    assert hi == pytest.approx(mean + half, abs=0.1 * half)


def test_mean_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(3)
    trials, covered = 300, 0
    for t in range(trials):
        x = rng.normal(5.0, 1.0, size=20)
        _, lo, hi = mean_interval(x, resamples=999, seed=t)
        covered += lo <= 5.0 <= hi
    assert 0.89 <= covered / trials <= 0.99


def test_mean_interval_leaves_out_none_and_infinities():
    m, lo, hi = mean_interval([7.0])
    assert m == 7.0 and math.isnan(lo) and math.isnan(hi)
    assert all(math.isnan(x) for x in mean_interval([float("nan"), None]))
    m, lo, hi = mean_interval([1.0, 2.0, None, 3.0, 4.0, 5.0, float("inf")])
    assert m == 3.0 and 1.0 <= lo < m < hi <= 5.0
    assert mean_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (m, lo, hi)
