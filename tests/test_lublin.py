"""Tests for the Lublin-Feitelson generator (cosim.workloads.lublin)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import WorkloadError
from cosim.workloads.lublin import LUBLIN_KINDS, LUBLIN_PARAMS, arrival_weights, lublin
from cosim.workloads.swf import read_swf

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


def is_pow2(x: np.ndarray) -> np.ndarray:
    return (x & (x - 1)) == 0


@pytest.fixture(scope="module")
def big():
    return lublin(20_000, procs=256, seed=7)


def test_valid_and_sorted(big):
    big.validate()
    assert len(big) == 20_000
    assert big.max_procs == 256
    assert big.procs.min() >= 1 and big.procs.max() <= 256
    assert np.all(big.run >= 1) and np.all(big.run == np.floor(big.run))
    assert np.all(big.submit == np.floor(big.submit)) and big.submit[0] >= 0
    np.testing.assert_array_equal(big.req_time, big.run)
    np.testing.assert_array_equal(big.job_id, np.arange(1, 20_001))


def test_size_shares(big):
    # serial share 0.244: binomial sd over 20k jobs is 0.003, the band is 5 sd
    assert abs((big.procs == 1).mean() - 0.244) < 0.015
    # at least serial + explicit power-of-two share (0.244 + 0.576); rounding adds a few
    assert 0.83 < is_pow2(big.procs).mean() < 0.90


def test_mean_log_run_time_matches_hyper_gamma(big):
    p = LUBLIN_PARAMS["typeless"]
    mix = np.clip(p.pa * big.procs + p.pb, 0, 1)
    expected = np.mean(mix * p.a1 * p.b1 + (1 - mix) * p.a2 * p.b2)  # E[log run | size]
    observed = np.log(big.run).mean()
    # flooring to whole seconds lowers the mean a little (about 0.03 observed)
    assert expected - 0.1 < observed < expected + 0.02
    # pa < 0: larger jobs run longer
    assert np.log(big.run[big.procs >= 64]).mean() > np.log(big.run[big.procs == 1]).mean() + 0.5


def test_arrivals_follow_daily_cycle(big):
    counts = np.bincount(((big.submit % 86400) // 1800).astype(int), minlength=48)
    w = arrival_weights("typeless")
    assert np.corrcoef(counts, w)[0, 1] > 0.95
    assert 24 <= counts.argmax() <= 31  # 12:00-16:00
    assert counts[:12].sum() < counts[24:36].sum() / 2  # nights are quiet


def test_arrival_weights_by_hand():
    # Gamma(anum, bnum) mode (anum - 1) * bnum over bucket index i, stored at (i - 1) % 48:
    # typeless 7.1737 * 3.9631 = 28.4 -> 27; batch 5.1271 * 5.274 = 27.0 -> 26;
    # interactive 7.9186 * 3.668 = 29.0 -> 28
    for kind, peak in [("typeless", 27), ("batch", 26), ("interactive", 28)]:
        w = arrival_weights(kind)
        assert w.shape == (48,) and w.mean() == pytest.approx(1.0)
        assert w.argmax() == peak
        # the fitted day starts at index 10 and ends at 9: the minimum is at that seam
        assert w.argmin() in (9, 10)


def test_deterministic_and_seed_sensitive():
    a, b, c = lublin(500, seed=3), lublin(500, seed=3), lublin(500, seed=4)
    for name, col in a.columns().items():
        np.testing.assert_array_equal(col, getattr(b, name))
    assert not np.array_equal(a.run, c.run)


@settings(max_examples=30, deadline=None)
@given(procs=st.integers(1, 5000), kind=st.sampled_from(LUBLIN_KINDS), seed=st.integers(0, 2**31))
def test_sizes_within_machine(procs, kind, seed):
    w = lublin(300, procs=procs, seed=seed, kind=kind)
    w.validate()
    assert len(w) == 300
    assert 1 <= w.procs.min() and w.procs.max() <= procs


def test_both_kinds_marks_interactive():
    w = lublin(5000, seed=1, kind="both")
    inter = w.features["interactive"]
    assert inter.dtype == bool and 0.5 < inter.mean() < 0.99
    # interactive jobs are much shorter (their run-time gammas are smaller)
    assert np.log(w.run[inter]).mean() + 2 < np.log(w.run[~inter]).mean()


def test_load_and_rate_knobs():
    for kind in ("typeless", "both"):
        w = lublin(5000, seed=2, kind=kind, load=0.7)
        offered = (w.run * w.procs).sum() / (w.max_procs * w.submit[-1])
        assert offered == pytest.approx(0.7, rel=1e-3)
    slow, fast = lublin(5000, seed=2), lublin(5000, seed=2, arrival_rate=2.0)
    np.testing.assert_array_equal(slow.run, fast.run)
    assert 0.4 < fast.submit[-1] / slow.submit[-1] < 0.6


def test_zero_jobs():
    w = lublin(0)
    w.validate()
    assert len(w) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_jobs": -1}, "lublin.n_jobs: expected an integer >= 0, got -1"),
        ({"n_jobs": 10, "procs": 0}, "lublin.procs: expected an integer >= 1, got 0"),
        ({"n_jobs": 10, "kind": "weird"}, "lublin.kind: expected one of"),
        ({"n_jobs": 10, "arrival_rate": 0}, "lublin.arrival_rate: expected a positive finite number"),
        ({"n_jobs": 10, "load": -1.0}, "lublin.load: expected a positive finite number"),
        ({"n_jobs": 10, "load": 0.5, "arrival_rate": 2.0}, "only one of load and arrival_rate"),
        ({"n_jobs": 10, "start_hour": 24}, "lublin.start_hour: expected an hour in 0..23"),
    ],
)
def test_bad_arguments(kwargs, message):
    n = kwargs.pop("n_jobs")
    with pytest.raises(WorkloadError, match=message.replace(".", r"\.")):
        lublin(n, **kwargs)


def test_similar_to_lublin_256_trace():
    path = TRACES / "lublin_256.swf"
    if not path.exists():
        pytest.skip(f"shared trace {path} not present (needs ../shared/traces next to the repo)")
    trace = read_swf(path)
    gen = lublin(len(trace), procs=256, seed=0)
    assert abs((gen.procs == 1).mean() - (trace.procs == 1).mean()) < 0.03
    assert abs(is_pow2(gen.procs).mean() - is_pow2(trace.procs).mean()) < 0.05
    assert abs(np.log(gen.run).mean() - np.log(np.maximum(trace.run, 1)).mean()) < 0.3
    assert 0.5 < gen.procs.mean() / trace.procs.mean() < 2
    ratio = np.diff(gen.submit).mean() / np.diff(trace.submit).mean()
    assert 0.5 < ratio < 2  # same order of magnitude of inter-arrival time
