"""Hypothesis invariants over random workloads, for every policy x backfilling."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import BACKFILLS, HEURISTICS, SELECTORS, make_policy
from cosim.workloads.base import Workload

ALL_POLICIES = ([f"{h}+{b}" for h in HEURISTICS for b in BACKFILLS] + list(SELECTORS)
                + ["fcfs+relaxed", "saf+relaxed=3", "sjf+relaxed=0.5", "wfp3+relaxed=2"])


@st.composite
def workloads(draw, exact=True):
    cores = draw(st.integers(1, 12))
    n = draw(st.integers(1, 18))
    submit = sorted(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)))
    run = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    procs = draw(st.lists(st.integers(1, cores + 2), min_size=n, max_size=n))
    if exact:
        req = [max(r, 1) for r in run]
    else:
        req = [max(1, r + d) for r, d in zip(run, draw(
            st.lists(st.integers(-20, 30), min_size=n, max_size=n)))]
    with_mem = draw(st.booleans())
    mem = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n)) if with_mem else None
    # wait -1 (unknown) for every job: the recorded policy needs a trace's wait column
    w = Workload.from_columns(submit=submit, run=run, procs=procs, req_time=req, mem=mem,
                              features={"wait": [-1.0] * n})
    return cores, (8 if with_mem else 0), w


def run(cores, mem, w, policy):
    sc = scenario_from_dict({"cluster": {"nodes": 1, "cores_per_node": cores,
                                         "memory_per_node": mem},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    sim = build(env, sc, make_policy(policy, rng=np.random.default_rng(3)), workload=w)
    env.run(until=sim.finished)
    return sim


def check_common(sim, cores, mem):
    jobs = sim.scheduler.jobs
    assert len(jobs) == len(sim.workload)
    ev = sim.events_table()
    # Every job ends exactly once (or is rejected and never starts).
    kinds = np.array(ev["kind"])
    for job in jobs:
        ends = int(np.sum((kinds == "end") & (ev["job_id"] == job.id)))
        starts = int(np.sum((kinds == "start") & (ev["job_id"] == job.id)))
        if job.outcome == "rejected":
            assert (starts, ends) == (0, 0)
            assert job.procs > cores or job.mem > mem > 0
        else:
            assert job.outcome == "completed"
            assert (starts, ends) == (1, 1)
            assert job.start >= job.submit
            assert job.end == pytest.approx(job.start + job.run)
    # Never more cores (or memory) in use than exist, at any instant.
    assert np.all(ev["used_cores"] <= cores)
    started = [j for j in jobs if j.outcome == "completed"]
    times = sorted({j.start for j in started})
    for t in times:
        live = [j for j in started if j.start <= t < j.end]
        assert sum(j.procs for j in live) <= cores
        if mem:
            assert sum(j.mem for j in live) <= mem + 1e-9


FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("policy", ALL_POLICIES)
@FAST
@given(case=workloads(exact=False))
def test_no_oversubscription_and_every_job_ends_once(policy, case):
    cores, mem, w = case
    sim = run(cores, mem, w, policy)
    check_common(sim, cores, mem)
    assert sim.scheduler.counters.refused == 0


@settings(max_examples=150, deadline=None)
@given(case=workloads(exact=True))
def test_easy_head_never_starts_after_its_reservation(case):
    cores, mem, w = case
    sim = run(cores, mem, w, "fcfs+easy")
    check_common(sim, cores, mem)
    assert sim.scheduler.counters.reservations_broken == 0
    for job in sim.scheduler.jobs:
        if job.reservation == job.reservation:
            assert job.start <= job.reservation + 1e-9


@pytest.mark.parametrize("heuristic", list(HEURISTICS))
@settings(max_examples=40, deadline=None)
@given(case=workloads(exact=True))
def test_conservative_never_delays_any_reservation(heuristic, case):
    cores, mem, w = case
    sim = run(cores, mem, w, f"{heuristic}+conservative")
    check_common(sim, cores, mem)
    assert sim.scheduler.counters.reservations_broken == 0
    for job in sim.scheduler.jobs:
        if job.reservation == job.reservation:
            assert job.start <= job.reservation + 1e-9


@st.composite
def early_enders(draw):
    """Workloads whose jobs never outlive their estimate (many end well before it)."""
    cores, mem, w = draw(workloads(exact=True))
    slack = draw(st.lists(st.integers(0, 30), min_size=len(w), max_size=len(w)))
    w.req_time = np.maximum(w.run + np.asarray(slack, dtype=float), 1.0)
    return cores, mem, w


@pytest.mark.parametrize("heuristic", ["fcfs", "sjf", "lcfs", "saf", "largest", "wfp3", "random"])
@settings(max_examples=40, deadline=None)
@given(case=early_enders())
def test_conservative_compression_never_moves_a_promise_later(heuristic, case):
    """Compressing the plan in priority order after early ends moves promises
    earlier only: every job's successive promised starts never increase, and it
    starts by the last one."""
    cores, mem, w = case
    sim = run(cores, mem, w, f"{heuristic}+conservative")
    check_common(sim, cores, mem)
    assert sim.scheduler.counters.reservations_broken == 0
    promises: dict[int, list[float]] = {}
    for _time, job_id, action, _, _, t in sim.scheduler.decisions:
        if action == "reserve":
            promises.setdefault(job_id, []).append(t)
    for job in sim.scheduler.jobs:
        seq = promises.get(job.id, [])
        assert all(b <= a for a, b in zip(seq, seq[1:], strict=False)), (job.id, seq)
        if seq:
            assert job.start <= seq[-1] + 1e-9


@settings(max_examples=30, deadline=None)
@given(case=workloads(exact=False), policy=st.sampled_from(ALL_POLICIES))
def test_same_seed_same_schedule(case, policy):
    cores, mem, w = case
    a = run(cores, mem, w, policy)
    b = run(cores, mem, w, policy)
    assert [(j.id, j.start, j.end, j.mode) for j in a.scheduler.jobs] == \
           [(j.id, j.start, j.end, j.mode) for j in b.scheduler.jobs]
