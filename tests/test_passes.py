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
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload


class NoSkip:
    """The same policy without ``pass_is_idle``: the scheduler wakes for everything."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.static_key = inner.static_key

    def decide(self, view):
        return self.inner.decide(view)


def simulate(rows, cores, policy, skip=True):
    """rows: (submit, procs, run, estimate) -> the finished simulation."""
    w = Workload.from_columns(submit=[r[0] for r in rows], procs=[r[1] for r in rows],
                              run=[r[2] for r in rows], req_time=[r[3] for r in rows])
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    p = make_policy(policy)
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
