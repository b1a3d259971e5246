"""Tests for the run-time estimate models (cosim.workloads.estimates)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload
from cosim.workloads.estimates import (
    ESTIMATE_MODELS,
    GaussianEstimates,
    TsafrirEstimates,
    apply_estimates,
)
from cosim.workloads.lublin import lublin

H, M = 3600, 60


@pytest.fixture(scope="module")
def jobs():
    return lublin(10_000, seed=11)


def test_registry_names():
    assert set(ESTIMATE_MODELS) == {"exact", "gaussian", "tsafrir"}


def test_exact_is_run_time_at_least_one_second():
    w = Workload.from_columns(submit=[0, 1, 2], run=[0, 0.5, 77], procs=[1, 1, 1], req_time=[9, 9, 9])
    e = apply_estimates(w, "exact")
    assert e.req_time.tolist() == [1.0, 1.0, 77.0]
    assert w.req_time.tolist() == [9, 9, 9]  # input untouched
    np.testing.assert_array_equal(e.run, w.run)
    assert "estimates exact(seed=0)" in e.source


def test_gaussian_directions(jobs):
    run = jobs.run
    over = apply_estimates(jobs, "gaussian", seed=1, nu=1.0, mode="over").req_time
    under = apply_estimates(jobs, "gaussian", seed=1, nu=1.0, mode="under").req_time
    assert np.all(over >= run)
    assert np.all(under <= run)  # run >= 1 s for Lublin jobs, so the 1 s floor never lifts above
    assert np.all(under >= 1)
    assert np.any(over > run) and np.any(under < run)
    # same seed: the two one-sided variants mirror the same draws
    big = under > 1
    np.testing.assert_allclose((over - run)[big], (run - under)[big])


def test_gaussian_two_sided_scale():
    run = np.full(20_000, 1000.0)
    rel = (GaussianEstimates(nu=0.3).estimate(run, np.random.default_rng(2)) - run) / run
    # N(0, nu * run): mean 0 (se 0.002), relative sd nu
    assert abs(rel.mean()) < 0.01
    assert rel.std() == pytest.approx(0.3, rel=0.03)
    assert np.array_equal(GaussianEstimates(nu=0).estimate(run, np.random.default_rng(3)), run)


def test_gaussian_deterministic(jobs):
    a = apply_estimates(jobs, "gaussian", seed=5, nu=0.5)
    b = apply_estimates(jobs, "gaussian", seed=5, nu=0.5)
    c = apply_estimates(jobs, "gaussian", seed=6, nu=0.5)
    np.testing.assert_array_equal(a.req_time, b.req_time)
    assert not np.array_equal(a.req_time, c.req_time)


def test_tsafrir_head_values_by_hand():
    # max 18 h: the 14 joint values below it, then 15 h (5 h steps), 16 h, 14 h
    # (2 h steps), 17 h, 13 h (1 h steps) complete the 20 head values.
    values, counts = TsafrirEstimates(max_est=18 * H, n_bins=20).histogram(
        5000, np.random.default_rng(0))
    expected = [5 * M, 10 * M, 15 * M, 20 * M, 30 * M] + [h * H for h in
                                                         (1, 2, 3, 4, 5, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18)]
    assert values.tolist() == expected
    assert counts.sum() == 5000


def test_tsafrir_popularity_by_hand():
    m = TsafrirEstimates(max_est=24 * H)
    values, counts = m.histogram(100_000, np.random.default_rng(1))
    # published fit: rank r = 2..20 uses 14.0491 exp(-0.177531 r) + 0.462513 percent,
    # the maximum gets the rest of 89 % (21.73 %), the tail 11 %.
    ranks = sum(14.0491 * math.exp(-0.177531 * r) + 0.462513 for r in range(2, 21))
    assert 89 - ranks == pytest.approx(21.733, abs=0.001)
    share = counts / counts.sum()
    assert values[np.argmax(counts)] == 24 * H
    assert share.max() == pytest.approx((89 - ranks) / 100, abs=1e-4)
    assert np.sort(share)[-20:].sum() == pytest.approx(0.89, abs=1e-4)
    # number of distinct values: linear fit through (70000, 340) and (250000, 565)
    assert len(values) == round(340 + 30_000 * 225 / 180_000)


def test_tsafrir_estimates_modal_and_cover_run(jobs):
    m = TsafrirEstimates()
    req = m.estimate(jobs.run, np.random.default_rng(4))
    values, counts = m.histogram_
    assert np.all(req >= jobs.run)
    assert np.isin(req, values).all()
    # the histogram is used exactly: each value is given to as many jobs as it has
    used = np.unique(req, return_counts=True)
    np.testing.assert_array_equal(used[1], counts[np.isin(values, used[0])])
    assert counts[~np.isin(values, used[0])].sum() == 0
    # default maximum: longest run rounded up to a whole hour
    assert values.max() == math.ceil(jobs.run.max() / H) * H
    assert m.repaired_ == 0


def test_tsafrir_repairs_when_too_many_long_jobs():
    run = np.full(1000, 17.5 * H)  # every job needs one of the few values >= 17.5 h
    m = TsafrirEstimates(max_est=18 * H)
    req = m.estimate(run, np.random.default_rng(0))
    values, counts = m.histogram_
    assert np.all(req >= run)
    assert np.isin(req, values).all()
    # only a few values are >= 17.5 h (18 h holds about 22 % of the histogram),
    # so most draws were raised to the smallest covering value
    assert m.repaired_ > 500
    assert counts[values >= 17.5 * H].sum() < 500


@settings(max_examples=40, deadline=None)
@given(
    run=st.lists(st.floats(0, 3 * 86400, allow_nan=False), min_size=0, max_size=300),
    seed=st.integers(0, 2**32 - 1),
)
def test_tsafrir_always_covers_run(run, seed):
    run = np.array(run)
    m = TsafrirEstimates()
    req = m.estimate(run, np.random.default_rng(seed))
    assert req.shape == run.shape
    assert np.all(req >= run) and np.all(req >= 1)
    assert np.isin(req, np.maximum(m.histogram_[0], 1)).all()


def test_tsafrir_deterministic(jobs):
    a = apply_estimates(jobs, "tsafrir", seed=3).req_time
    b = apply_estimates(jobs, "tsafrir", seed=3).req_time
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, apply_estimates(jobs, "tsafrir", seed=4).req_time)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("psychic", {}, r"estimates\.model: expected one of \['exact', 'gaussian', 'tsafrir'\], got 'psychic'"),
        ("gaussian", {"sigma": 1}, r"estimates\.gaussian: expected parameters among \['nu', 'mode'\], "
                                   r"got unknown parameter\(s\) \['sigma'\]"),
        ("gaussian", {"nu": -1}, r"estimates\.gaussian\.nu: expected a finite number >= 0, got -1"),
        ("gaussian", {"mode": "sideways"}, r"estimates\.gaussian\.mode: expected one of"),
        ("exact", {"nu": 1}, r"estimates\.exact: expected no parameters"),
        ("tsafrir", {"max_est": 60}, r"estimates\.tsafrir\.max_est: expected seconds >= 3600"),
        ("tsafrir", {"max_est": 3600}, r"max_est: expected a maximum estimate >= every run time"),
    ],
)
def test_bad_model_or_parameters(jobs, name, params, message):
    with pytest.raises(WorkloadError, match=message):
        apply_estimates(jobs, name, **params)
