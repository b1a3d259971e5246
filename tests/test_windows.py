"""Tests for windows and sampled jobsets (cosim.workloads.windows)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import InputError, WorkloadError
from cosim.workloads.base import Workload
from cosim.workloads.lublin import lublin
from cosim.workloads.windows import (
    DAY,
    HOUR,
    WEEK,
    arrival_profile,
    curriculum,
    jobsets,
    profiled_arrivals,
    window,
)


@pytest.fixture
def small():
    # job 3 depends on job 2, job 5 on job 1
    return Workload.from_columns(
        submit=[100, 110, 130, 160, 200, 250],
        run=[1, 2, 3, 4, 5, 6],
        procs=[1, 2, 3, 4, 5, 6],
        prev_job=[-1, -1, 2, -1, 1, -1],
        think=[-1, -1, 7, -1, 9, -1],
        source="small",
    )


def test_window_by_hand(small):
    w = window(small, 3, start=2)
    w.validate()
    assert w.job_id.tolist() == [3, 4, 5]
    assert w.submit.tolist() == [0, 30, 70]
    assert w.run.tolist() == [3, 4, 5]
    # jobs 2 and 1 are outside the window: both dependencies are cut
    assert w.prev_job.tolist() == [-1, -1, -1] and w.think.tolist() == [-1, -1, -1]
    assert w.cleaning["prev_job_cut"] == 2
    assert w.source == "small [jobs 2..4]"
    # the source workload is untouched
    assert small.submit[0] == 100 and small.prev_job[2] == 2


def test_window_keeps_inner_dependency(small):
    w = window(small, 3, start=1)
    assert w.prev_job.tolist() == [-1, 2, -1]
    assert w.think.tolist() == [-1, 7, -1]
    assert w.cleaning["prev_job_cut"] == 0


def test_random_window_deterministic_and_covers_offsets():
    w = lublin(200, seed=1)
    a = window(w, 50, rng_or_seed=4)
    b = window(w, 50, rng_or_seed=np.random.default_rng(4))
    np.testing.assert_array_equal(a.job_id, b.job_id)
    starts = {int(window(w, 50, rng_or_seed=s).job_id[0]) - 1 for s in range(400)}
    assert min(starts) >= 0 and max(starts) <= 150
    assert len(starts) > 100  # spread over the 151 possible offsets
    full = window(w, 200, rng_or_seed=0)
    np.testing.assert_array_equal(full.job_id, w.job_id)


@settings(max_examples=40, deadline=None)
@given(n_total=st.integers(1, 60), data=st.data())
def test_window_invariants(n_total, data):
    w = lublin(n_total, seed=3)
    n = data.draw(st.integers(1, n_total))
    seed = data.draw(st.integers(0, 2**31))
    out = window(w, n, rng_or_seed=seed)
    out.validate()
    assert len(out) == n and out.submit[0] == 0
    first = int(np.flatnonzero(w.job_id == out.job_id[0])[0])
    np.testing.assert_array_equal(out.job_id, w.job_id[first:first + n])
    np.testing.assert_allclose(out.submit, w.submit[first:first + n] - w.submit[first])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_jobs": 7, "start": 0}, r"window\.n_jobs: expected an integer in 1\.\.6, got 7"),
        ({"n_jobs": 0, "start": 0}, r"window\.n_jobs: expected an integer in 1\.\.6, got 0"),
        ({"n_jobs": 3, "start": 4}, r"window\.start: expected an integer in 0\.\.3, got 4"),
        ({"n_jobs": 3, "start": -1}, r"window\.start: expected an integer in 0\.\.3, got -1"),
        ({"n_jobs": 3}, r"window\.rng_or_seed: expected a seed or numpy Generator, or an explicit start"),
        ({"n_jobs": 3, "rng_or_seed": "x"}, r"window\.rng_or_seed: expected a non-negative integer seed"),
    ],
)
def test_window_bad_arguments(small, kwargs, message):
    with pytest.raises(InputError, match=message):
        window(small, **kwargs)


def test_jobsets_shapes_and_poisson_times():
    w = lublin(2000, seed=2)
    sets = jobsets(w, 4, 500, arrival_rate=0.01, seed=9)
    assert len(sets) == 4
    for s in sets:
        s.validate()
        assert len(s) == 500 and s.submit[0] == 0
        assert len(np.unique(s.job_id)) == 500 and np.all(np.diff(s.job_id) > 0)
        assert np.isin(s.job_id, w.job_id).all()
        # run time and size travel with the job
        idx = s.job_id - 1
        np.testing.assert_array_equal(s.run, w.run[idx])
        np.testing.assert_array_equal(s.procs, w.procs[idx])
        gaps = np.diff(s.submit)
        assert gaps.mean() == pytest.approx(100, rel=0.15)  # exponential, mean 1/rate
        assert gaps.std() == pytest.approx(100, rel=0.2)  # exponential: sd == mean
    assert not np.array_equal(sets[0].job_id, sets[1].job_id)


def test_jobsets_default_rate_is_trace_average():
    w = lublin(3000, seed=5)
    rate = (len(w) - 1) / (w.submit[-1] - w.submit[0])
    (s,) = jobsets(w, 1, 2000, seed=1)
    assert np.diff(s.submit).mean() == pytest.approx(1 / rate, rel=0.1)
    assert f"Poisson {rate:.6g}/s" in s.source


def test_jobsets_deterministic_and_prefix_stable():
    w = lublin(500, seed=6)
    a = jobsets(w, 2, 100, arrival_rate=1.0, seed=3)
    b = jobsets(w, 5, 100, arrival_rate=1.0, seed=3)
    for x, y in zip(a, b[:2], strict=True):
        np.testing.assert_array_equal(x.job_id, y.job_id)
        np.testing.assert_array_equal(x.submit, y.submit)


def test_jobsets_cut_dependencies(small):
    (s,) = jobsets(small, 1, 6, arrival_rate=1.0, seed=0)
    np.testing.assert_array_equal(s.prev_job, small.prev_job)  # all jobs drawn: kept
    assert s.cleaning["prev_job_cut"] == 0
    cut = sum(x.cleaning["prev_job_cut"] for x in jobsets(small, 20, 3, arrival_rate=1.0, seed=1))
    assert cut > 0
    for x in jobsets(small, 20, 3, arrival_rate=1.0, seed=1):
        assert np.all((x.prev_job == -1) | np.isin(x.prev_job, x.job_id))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0, 2), {}, r"jobsets\.n_sets: expected an integer in 1\.\.1000000000, got 0"),
        ((1, 7), {}, r"jobsets\.set_size: expected an integer in 1\.\.6, got 7"),
        ((1, 2), {"arrival_rate": 0.0}, r"jobsets\.arrival_rate: expected a positive finite number"),
    ],
)
def test_jobsets_bad_arguments(small, args, kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        jobsets(small, *args, **kwargs)


def test_jobsets_need_rate_for_zero_span():
    w = Workload.from_columns(submit=[5, 5, 5], run=[1, 1, 1], procs=[1, 1, 1])
    with pytest.raises(WorkloadError, match=r"jobsets\.arrival_rate: expected an explicit arrival rate"):
        jobsets(w, 1, 2)


def test_curriculum_phases_are_deterministic_and_distinct():

    w = Workload.from_columns(submit=np.arange(0, 2000, 10.0), run=np.arange(1, 201) % 37 + 1,
                              procs=np.arange(200) % 5 + 1)
    a = curriculum(w, 20, sampled=2, periods=2, synthetic=2, seed=3)
    b = curriculum(w, 20, sampled=2, periods=2, synthetic=2, seed=3)
    assert [x.submit.tolist() for x in a] == [x.submit.tolist() for x in b]
    assert [x.job_id.tolist() for x in a] == [x.job_id.tolist() for x in b]
    # Phase 2 keeps the trace's own 10 s gaps; phases 1 and 3 are re-timed.
    assert np.all(np.diff(a[2].submit) == 10.0) and np.all(np.diff(a[3].submit) == 10.0)
    assert not np.all(np.diff(a[0].submit) == 10.0)
    # Phase 3 draws with replacement and renumbers, so ids are 1..20.
    assert a[4].job_id.tolist() == list(range(1, 21))
    assert all(x.submit[0] == 0.0 for x in a)


@pytest.mark.parametrize("kwargs, message", [
    ({"sampled": 0, "periods": 0, "synthetic": 0}, "curriculum: expected .* >= 1, got no episodes"),
    ({"periods": -1}, "curriculum.periods"),
    ({"load_range": (2.0, 1.0)}, "curriculum.load_range"),
])
def test_curriculum_bad_arguments(kwargs, message):

    w = Workload.from_columns(submit=[0, 10, 20], run=[5] * 3, procs=[1] * 3)
    with pytest.raises(WorkloadError, match=message):
        curriculum(w, 2, **kwargs)


def office_hours(weeks: int = 4, per_hour: int = 6, seed: int = 0) -> Workload:
    """Arrivals only from 9:00 to 17:00, Monday (day 0) to Friday, for ``weeks`` weeks."""
    rng = np.random.default_rng(seed)
    t = [d * DAY + h * HOUR + rng.uniform(0, HOUR) for d in range(7 * weeks) if d % 7 < 5
         for h in range(9, 17) for _ in range(per_hour)]
    t = np.sort(t)
    n = len(t)
    return Workload.from_columns(submit=t, run=rng.integers(1, 1000, n).astype(float),
                                 procs=rng.integers(1, 64, n))


def test_arrival_profile_measures_hours_and_days():
    hourly, daily = arrival_profile(office_hours())
    assert np.all(hourly[:9] == 0) and np.all(hourly[17:] == 0)
    # 8 busy hours of 24 at mean 1: each busy hour is 3 times the mean rate.
    assert hourly[9:17] == pytest.approx(np.full(8, 3.0), rel=0.05)
    # 5 busy days of 7: 1.4 each (the first and last day of the trace are partly
    # observed, which makes their estimates a few per cent noisier).
    assert np.all(daily[5:] == 0) and daily[:5] == pytest.approx(np.full(5, 1.4), rel=0.1)
    assert hourly.mean() == pytest.approx(1.0) and daily.mean() == pytest.approx(1.0)


def test_arrival_profile_is_flat_for_short_traces():
    w = Workload.from_columns(submit=np.arange(0, DAY, 60.0), run=np.ones(1440),
                              procs=np.ones(1440))
    hourly, daily = arrival_profile(w)
    assert np.all(hourly == 1.0) and np.all(daily == 1.0)


def test_profiled_arrivals_follow_the_profile_and_the_mean_rate():
    hourly, daily = arrival_profile(office_hours())
    rng = np.random.default_rng(1)
    t = profiled_arrivals(20_000, 0.002, hourly, daily, rng, start=3.5 * DAY)
    assert np.all(np.diff(t) >= 0) and t[0] > 3.5 * DAY
    hour, day = (t % DAY) // HOUR, (t % WEEK) // DAY
    assert np.all((hour >= 9) & (hour < 17)) and np.all(day < 5)    # none off hours
    # Mean rate over whole weeks: rate * mean(hourly * daily) = 0.002 per second.
    weeks = np.floor((t[-1] - 3.5 * DAY) / WEEK)
    inside = np.sum(t < 3.5 * DAY + weeks * WEEK)
    assert inside / (weeks * WEEK) == pytest.approx(0.002, rel=0.03)
    # A flat profile is a plain Poisson process: exponential gaps of mean 1/rate.
    flat = profiled_arrivals(20_000, 0.01, np.ones(24), np.ones(7), rng)
    assert np.mean(np.diff(flat)) == pytest.approx(100.0, rel=0.03)
    with pytest.raises(WorkloadError, match="profiled_arrivals.rate"):
        profiled_arrivals(5, 0.01, np.zeros(24), np.ones(7), rng)


def test_synthetic_phase_keeps_the_trace_shape_sizes_and_run_times():
    w = office_hours(weeks=3)
    shaped = curriculum(w, 600, sampled=0, periods=0, synthetic=3, seed=2)
    flat = curriculum(w, 600, sampled=0, periods=0, synthetic=3, seed=2, arrival_shape=False)
    for s in shaped:
        # 600 jobs at ~6 an office hour span days: nights and weekends leave gaps of 16 h or more.
        assert np.diff(s.submit).max() >= 16 * HOUR - 1
        assert "hourly/daily profile" in s.source and s.submit[0] == 0.0
        # Every job is one of the trace's (size, run time, request) triples.
        trace = set(zip(w.procs.tolist(), w.run.tolist(), w.req_time.tolist()))
        assert set(zip(s.procs.tolist(), s.run.tolist(), s.req_time.tolist())) <= trace
    for s in flat:
        assert np.diff(s.submit).max() < 8 * HOUR and "Poisson" in s.source
