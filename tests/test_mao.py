"""Tests for the DeepRM / Mao workload (cosim.workloads.mao)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import WorkloadError
from cosim.workloads.mao import mao


@pytest.fixture(scope="module")
def big():
    return mao(20_000, seed=5)


def test_durations_from_published_mixture(big):
    big.validate()
    units = big.run
    short = units <= 3
    assert set(np.unique(units[short])) == {1, 2, 3}
    assert set(np.unique(units[~short])) == set(range(10, 16))
    # 80 % short: binomial sd over 20k jobs is 0.0028
    assert abs(short.mean() - 0.8) < 0.015
    np.testing.assert_array_equal(big.req_time, big.run)


def test_one_dominant_resource_per_job(big):
    cpu = big.procs / 20
    mem = big.mem / 20.0
    # Default 20 cores: dominant 0.25-0.5 -> 5..10 cores, other 0.05-0.1 -> 1..2 cores.
    assert set(np.unique(big.procs)) == {1, 2, 5, 6, 7, 8, 9, 10}
    cpu_dom = (cpu >= 0.25) & (cpu <= 0.5)
    mem_dom = (mem >= 0.25) & (mem <= 0.5)
    assert np.all(cpu_dom ^ mem_dom)
    assert np.all(np.where(cpu_dom, (mem >= 0.05) & (mem <= 0.1), (cpu >= 0.05) & (cpu <= 0.1)))
    assert abs(cpu_dom.mean() - 0.5) < 0.02


def test_bernoulli_arrivals(big):
    steps = big.submit
    assert steps[0] >= 0
    gaps = np.diff(steps)
    assert np.all(gaps >= 1) and np.all(gaps == np.floor(gaps))  # at most one job per step
    # geometric gaps: mean 1/p = 1/0.7, P(gap == 1) = p
    assert np.mean(gaps) == pytest.approx(1 / 0.7, rel=0.02)
    assert np.mean(gaps == 1) == pytest.approx(0.7, abs=0.015)


def test_load_knob_sets_job_rate():
    # By hand: E[duration] = 0.8 * 2 + 0.2 * 12.5 = 4.1 units; E[cpu share] =
    # (7.5 + 1.5) / 2 / 20 = 0.225; load 0.5 -> p = 0.5 / (4.1 * 0.225) = 0.54200
    w = mao(20_000, load=0.5, seed=2)
    assert "job_rate=0.542005" in w.source
    span = w.submit[-1] + 1
    assert (w.run * w.procs).sum() / (20 * span) == pytest.approx(0.5, rel=0.05)
    with pytest.raises(WorkloadError, match=r"mao\.load: expected at most 0\.9225"):
        mao(10, load=0.95)


def test_time_unit_and_cluster_scale():
    w = mao(2000, seed=3, time_unit=60.0, cluster_cpu=128, cluster_mem=256.0)
    assert set(np.unique(w.run / 60)) <= {1, 2, 3, *range(10, 16)}
    assert np.all(w.submit % 60 == 0)
    # 0.25 * 128 = 32 .. 0.5 * 128 = 64 cores dominant; 0.05 * 128 = 6.4 -> 7 .. 12.8 -> 12
    dom = w.procs >= 32
    assert w.procs[dom].min() >= 32 and w.procs[dom].max() <= 64
    assert w.procs[~dom].min() >= 7 and w.procs[~dom].max() <= 12
    assert w.mem.max() <= 0.5 * 256 and w.max_procs == 128


def test_thesis_table_5_4_short_environment():
    w = mao(3000, seed=4, job_rate=0.3, short_len=(1, 9), long_len=(32, 48))
    assert set(np.unique(w.run)) <= set(range(1, 10)) | set(range(32, 49))


def test_deterministic():
    a, b = mao(300, seed=9), mao(300, seed=9)
    for name, col in a.columns().items():
        np.testing.assert_array_equal(col, getattr(b, name))
    assert not np.array_equal(a.submit, mao(300, seed=10).submit)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 200), rate=st.floats(0.01, 1.0), cpu=st.integers(1, 512), seed=st.integers(0, 10**6))
def test_always_valid(n, rate, cpu, seed):
    w = mao(n, job_rate=rate, cluster_cpu=cpu, seed=seed)
    w.validate()
    assert len(w) == n
    assert np.all((w.procs >= 1) & (w.procs <= cpu))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_rate": 0.0}, r"mao\.job_rate: expected a probability in \(0, 1\], got 0\.0"),
        ({"job_rate": 1.5}, r"mao\.job_rate: expected a probability"),
        ({"job_rate": 0.5, "load": 0.3}, "only one of load and job_rate"),
        ({"time_unit": 0}, r"mao\.time_unit: expected a positive finite number, got 0"),
        ({"cluster_cpu": 2.5}, r"mao\.cluster_cpu: expected a positive integer"),
        ({"short_len": (3, 1)}, r"mao\.short_len: expected a pair \(low, high\)"),
        ({"dominant": (0.2, 1.5)}, r"mao\.dominant: expected a pair"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        mao(10, **kwargs)
    with pytest.raises(WorkloadError, match=r"mao\.n_jobs: expected an integer >= 0, got -3"):
        mao(-3)
