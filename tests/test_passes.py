"""Scheduler passes: idle passes are skipped without changing any record.

The scheduler skips the pass an arrival or an expected end would wake when
the policy says it would decide nothing (EASY's ``pass_is_idle``). These
tests count the passes of a schedule worked out by hand, and check on random
workloads that skipping changes no job, event or decision row.
"""

from __future__ import annotations

import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import scenario_from_dict
from cosim.job import Job
from cosim.model import build
from cosim.policies import make_policy
from cosim.queue import JobQueue
from cosim.workloads.base import Workload


class NoSkip:
    """The same policy without ``pass_is_idle``: the scheduler wakes for everything."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.static_key = inner.static_key

    def decide(self, view):
        return self.inner.decide(view)


def simulate(rows, cores, policy, skip=True, narrow=True):
    """rows: (submit, procs, run, estimate) -> the finished simulation.

    ``skip=False``: the scheduler wakes for everything; ``narrow=False``:
    every EASY pass scans the whole queue."""
    w = Workload.from_columns(submit=[r[0] for r in rows], procs=[r[1] for r in rows],
                              run=[r[2] for r in rows], req_time=[r[3] for r in rows])
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    p = make_policy(policy)
    p.narrow_passes = narrow
    sim = build(env, sc, p if skip else NoSkip(p), workload=w)
    env.run(until=sim.finished)
    return sim


# 4 cores. J1 (2 cores, 0-10) and J2 (2 cores, 0-20) start at 0. J3 (4 cores)
# arrives at 1 and becomes the head: a pass reserves 20 for it. J1 ends at 10
# as expected: 2 cores free, J3 still does not fit and its shadow time stays
# 20: no pass. J2 ends at 20: J3 starts (pass). J3 ends at 25 (pass).
HAND = [(0, 2, 10, 10), (0, 2, 20, 20), (1, 4, 5, 5)]


def test_idle_arrival_and_expected_end_wake_no_pass():
    sim = simulate(HAND, 4, "fcfs+easy")
    s = sim.scheduler
    assert {j.id: j.start for j in s.jobs} == {1: 0.0, 2: 0.0, 3: 20.0}
    assert s.counters.passes == 4          # at 0, 1, 20 and 25
    assert s.counters.wakeups_skipped == 1   # J1's end
    plain = simulate(HAND, 4, "fcfs+easy", skip=False).scheduler
    assert plain.counters.passes == 5      # also at 10
    assert plain.events == s.events and plain.decisions == s.decisions


def test_an_end_that_lets_a_smaller_job_fit_wakes_a_pass():
    # J3 (1 core, 100 s) arrives at 1 and cannot backfill (it would end after
    # the shadow time 20 and there is no extra core); J1's end at 10 frees 2
    # cores that J3 fits in, so a pass runs there and records the hole.
    rows = [(0, 2, 10, 10), (0, 2, 20, 20), (1, 4, 5, 5), (1, 1, 100, 100)]
    sim = simulate(rows, 4, "fcfs+easy")
    s = sim.scheduler
    assert {j.id: j.start for j in s.jobs} == {1: 0.0, 2: 0.0, 3: 20.0, 4: 25.0}
    passes = [row[0] for row in s.events if row[1] == "pass"]
    assert 10.0 in passes


jobs = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.integers(1, 30),
                          st.integers(0, 20)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=jobs, policy=st.sampled_from(["fcfs+easy", "sjf+easy", "lcfs+easy", "saf+easy"]))
def test_skipping_passes_changes_no_record(rows, policy):
    # Estimates at or above the run time, sometimes exact (ends as expected).
    rows = sorted((t, p, r, r + extra if extra % 3 else r) for t, p, r, extra in rows)
    a = simulate(rows, 8, policy).scheduler
    b = simulate(rows, 8, policy, skip=False).scheduler
    assert [(j.id, j.start, j.mode, j.reason) for j in a.jobs] == \
        [(j.id, j.start, j.mode, j.reason) for j in b.jobs]
    assert a.events == b.events
    assert a.decisions == b.decisions
    assert a.counters.passes <= b.counters.passes


# Times on a 5 s grid: arrivals often coincide with ends (passes that are
# not arrival-only but hold new jobs).
long_jobs = st.lists(st.tuples(st.integers(0, 40).map(lambda t: 5 * t), st.integers(1, 8),
                               st.integers(1, 12).map(lambda r: 5 * r), st.integers(0, 20)),
                     min_size=40, max_size=120)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=long_jobs, policy=st.sampled_from(["fcfs+easy", "sjf+easy", "largest+easy"]))
def test_narrow_easy_passes_match_full_scans(rows, policy):
    # Queues long enough for the numpy scans (over 48 slots) and many ends as
    # expected: passes whose reservation stands test only the jobs sized
    # between the last pass's free units and now, with the same outcome as
    # a scan of the whole queue.
    rows = sorted((t, p, r, r + extra if extra % 2 else r) for t, p, r, extra in rows)
    a = simulate(rows, 8, policy).scheduler
    b = simulate(rows, 8, policy, skip=False, narrow=False).scheduler
    assert [(j.id, j.start, j.mode, j.reason) for j in a.jobs] == \
        [(j.id, j.start, j.mode, j.reason) for j in b.jobs]
    assert a.decisions == b.decisions


def test_a_narrow_pass_tests_the_jobs_queued_since():
    # 8 cores. J1 (3 cores, 0-10), J2 (4, 0-100), J3 (1, 0-20) run; J4 (8)
    # arrives at 1 and is reserved at 100 (no extra core); J5 (2 cores, 200 s)
    # arrives at 2. At 10 J1 ends as expected: a pass tests J5 alone (sized
    # between 0 and 3 free) and refuses it. At 20 J3 ends as expected (4
    # free, no queued size in 3..4) and J6 (1 core, 5 s) arrives: the pass
    # must still test J6, which ends before the shadow time and backfills.
    rows = [(0, 3, 10, 10), (0, 4, 100, 100), (0, 1, 20, 20), (1, 8, 5, 5), (2, 2, 200, 200),
            (20, 1, 5, 5)]
    for narrow in (True, False):
        s = simulate(rows, 8, "fcfs+easy", narrow=narrow).scheduler
        assert {j.id: j.start for j in s.jobs} == {1: 0.0, 2: 0.0, 3: 0.0, 4: 100.0,
                                                   5: 105.0, 6: 20.0}
        assert s.jobs[5].reason == "ends before shadow time"


def test_size_groups_in_slot_order():
    q = JobQueue()
    jobs = [Job(i, i, 0.0, 10.0, procs, 10.0, 10.0) for i, procs in
            enumerate([4, 1, 2, 4, 8, 2, 1])]
    for job in jobs:
        q.add(job)
    q.remove(jobs[1])
    q.add(jobs[1])          # requeued: now after every other job of its size

    def ids(above, upto):
        return [[j.id for j in group] for group in q.size_groups(above, upto)]

    assert ids(0, 2) == [[6, 1], [2, 5]]
    assert ids(2, 4) == [[0, 3]]
    assert ids(1, 1) == []
    assert ids(4, 100) == [[4]]
    q.remove(jobs[4])
    assert ids(4, 100) == [] and not q.any_size_between(4, 100)
    q.remove(jobs[6])
    assert ids(0, 1) == [[1]] and q.min_procs() == 1
