"""Every run ends and says why (issue 21, item 1).

Hand-checked schedules for the three ways a run that could go on forever
stops (failure processes that stop with the workload, a starved head job
given up after ``faults.start_limit`` while returning nodes are held for it,
a stall), the failure metrics, and a property over fault settings: every run
ends within a bound of events with every job accounted for exactly once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim import metrics
from cosim.actors.faults import FaultGuard
from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.config import scenario_from_dict
from cosim.decisions import Policy
from cosim.errors import ScenarioError
from cosim.job import Job
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload


def _job(i: int, submit: float, run: float, procs: int) -> Job:
    return Job(i, i, submit, run, procs, run, run)


def _at(env: simpy.Environment, t: float, action) -> None:
    simpy.Timeout(env, t).callbacks.append(lambda _e: action())


def _submit_at(env, sched, job):
    _at(env, job.submit, lambda: sched.submit(job))


class _Never(Policy):
    """A policy that never starts anything (to make a stall)."""

    name = "never"

    def decide(self, view):
        return ()


def test_stall_gives_up_every_queued_job_and_finishes():
    env = simpy.Environment()
    cluster = Cluster(env, nodes=2, cores_per_node=1)
    sched = Scheduler(env, cluster, _Never(), expected_jobs=2)
    a, b = _job(1, 0.0, 10.0, 1), _job(2, 5.0, 10.0, 2)
    _submit_at(env, sched, a)
    _submit_at(env, sched, b)
    env.run(until=sched.finished)
    assert env.now == 5.0
    assert [(j.outcome, j.end, math.isnan(j.start)) for j in (a, b)] == [
        ("rejected", 5.0, True), ("rejected", 5.0, True)]
    assert a.reason.startswith("stalled")


def _guarded(start_limit: float, nodes: int = 4):
    env = simpy.Environment()
    cluster = Cluster(env, nodes=nodes, cores_per_node=1)
    guard = FaultGuard(start_limit)
    return env, cluster, guard


def test_returning_nodes_are_held_for_a_starved_head():
    # Nodes 2 and 3 are down from t=0. A (4 wide) arrives at 1 and is starved
    # (2 up). B (1 wide, 5 s) backfills at 2. Node 2 returns at 3: held for A,
    # so C (1 wide, 3 s, t=4) takes the last free node and D (1 wide, 2 s,
    # t=4.5) must wait (without the hold it would start at 4.5 on node 2).
    env, cluster, guard = _guarded(1000.0)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), hooks=(guard,), expected_jobs=4)
    cluster.node_down(cluster.nodes[2])
    cluster.node_down(cluster.nodes[3])
    jobs = [_job(1, 1.0, 10.0, 4), _job(2, 2.0, 5.0, 1), _job(3, 4.0, 3.0, 1),
            _job(4, 4.5, 2.0, 1)]
    for j in jobs:
        _submit_at(env, sched, j)
    _at(env, 3.0, lambda: cluster.node_up(cluster.nodes[2]))
    _at(env, 6.0, lambda: cluster.node_up(cluster.nodes[3]))
    # What the pool looks like while node 2 is held (between 3 and 6).
    seen = {}
    _at(env, 5.0, lambda: seen.update(held=cluster.held, free=cluster.free,
                                      up=cluster.up_units))
    env.run(until=sched.finished)
    a, b, c, d = jobs
    assert seen == {"held": 1, "free": 0, "up": 2}
    assert (b.start, c.start) == (2.0, 4.0)
    # At 6 node 3 returns: 2 up + 2 held cover A, the hold ends. EASY
    # reserves A for 7 (B and C end then); D (2 s) would end at 8 on a node A
    # needs, so it waits: A runs 7..17, D 17..19.
    assert (a.start, a.end) == (7.0, 17.0)
    assert (d.start, d.end) == (17.0, 19.0)
    assert cluster.held == 0 and cluster.hold_for is None


def test_only_returning_nodes_are_held_freed_cores_stay_with_backfilling():
    # Node 3 is down 0..10. A (4 wide, t=1) is starved; B (1 wide, 2 s) and C
    # (2 wide, 100 s) backfill at 1 and 2. B's core, freed at 3, is not held:
    # D (1 wide, 50 s, t=4) backfills on it. At 10 node 3 is back: held, and
    # at once released (A is no longer wider than the nodes up); EASY
    # reserves A for 102 (C's end).
    env, cluster, guard = _guarded(1000.0)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), hooks=(guard,), expected_jobs=4)
    cluster.node_down(cluster.nodes[3])
    a, b, c, d = (_job(1, 1.0, 10.0, 4), _job(2, 1.0, 2.0, 1), _job(3, 2.0, 100.0, 2),
                  _job(4, 4.0, 50.0, 1))
    for j in (a, b, c, d):
        _submit_at(env, sched, j)
    _at(env, 10.0, lambda: cluster.node_up(cluster.nodes[3]))
    seen = []
    for t in (1.5, 5.0):
        _at(env, t, lambda: seen.append((cluster.hold_for, guard.counting)))
    env.run(until=sched.finished)
    assert [(j.start, j.end) for j in (a, b, c, d)] == [
        (102.0, 112.0), (1.0, 3.0), (2.0, 102.0), (4.0, 54.0)]
    # A is starved 1..10, but its start-limit clock runs only while failures
    # alone keep it waiting, as seen at each pass: from the pass at 1 (before B
    # started: 3 free + the down node = 4) until the pass at 2 (B and C hold
    # cores it needs anyway), so it runs at 1.5 and not at 5.
    assert seen == [(a, a), (a, None)]


def test_starved_head_is_given_up_after_start_limit():
    # Node 3 is down for good: A (4 wide) can never start. It is the starved
    # head from its submit at 1, so it is given up at 1 + 100; B (1 wide)
    # backfills meanwhile.
    env, cluster, guard = _guarded(100.0)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), hooks=(guard,), expected_jobs=2)
    cluster.node_down(cluster.nodes[3])
    a, b = _job(1, 1.0, 10.0, 4), _job(2, 2.0, 5.0, 1)
    _submit_at(env, sched, a)
    _submit_at(env, sched, b)
    env.run(until=sched.finished)
    assert (b.start, b.end, b.outcome) == (2.0, 7.0, "completed")
    assert (a.outcome, a.end, a.attempts) == ("rejected", 101.0, 0)
    assert "faults.start_limit" in a.reason
    assert guard.given_up == 1


def test_start_limit_counts_only_time_starved():
    # Node 3 is down 0..20 and from 58 on; the limit is 30 s starved. A (4
    # wide, t=0) is starved 0..20 only, so it starts at 20. C (4 wide, t=55)
    # starts at once, is lost at 58, requeued and starved from 58: given up
    # at 88, outcome failed (it had started).
    env, cluster, guard = _guarded(30.0)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), hooks=(guard,), expected_jobs=2)
    cluster.node_down(cluster.nodes[3])
    a, c = _job(1, 0.0, 5.0, 4), _job(2, 55.0, 5.0, 4)
    _submit_at(env, sched, a)
    _submit_at(env, sched, c)
    _at(env, 20.0, lambda: cluster.node_up(cluster.nodes[3]))
    _at(env, 58.0, lambda: cluster.node_down(cluster.nodes[3]))
    env.run(until=sched.finished)
    assert (a.start, a.outcome) == (20.0, "completed")
    assert (c.attempts, c.outcome, c.end) == (1, "failed", 88.0)
    assert c.killed_seconds == 3.0


def test_failure_metrics_count_failed_and_given_up_jobs():
    jobs = {"submit": [0.0, 0.0, 0.0, 0.0], "start": [0.0, 10.0, 50.0, math.nan],
            "end": [10.0, 20.0, 60.0, 500.0], "run": [10.0, 10.0, math.nan, math.nan],
            "procs": [1, 1, 1, 1], "outcome": ["completed", "completed", "failed", "rejected"],
            "mode": ["ready", "ready", "ready", ""], "killed_seconds": [0.0, 0.0, 10.0, 0.0],
            "killed_core_seconds": [0.0, 0.0, 10.0, 0.0]}
    s = metrics.summarize(jobs, None, cores=2)
    # finished waits 0 and 10; the failed job queued 60 - 0 - 10 = 50 s, the
    # given-up one 500 s: the longest time queued is 500, their mean 275.
    assert s["wait_mean"] == 5.0
    assert s["wait_max"] == 500.0
    assert s["wait_mean_failed"] == 275.0
    assert (s["jobs_never_started"], s["jobs_given_up"]) == (1, 1)
    assert metrics.headline(jobs, cores=2)["wait_max"] == 500.0


def test_start_limit_must_be_positive():
    with pytest.raises(ScenarioError, match="start_limit"):
        scenario_from_dict({"cluster": {"nodes": 4}, "workload": {"kind": "lublin", "jobs": 2},
                            "faults": {"mtbf": 100, "start_limit": 0}})


class _Tally(SchedulerHooks):
    def __init__(self):
        self.done: dict[int, int] = {}

    def job_done(self, job):
        self.done[job.id] = self.done.get(job.id, 0) + 1


def _run_counted(sc, w, policy, bound, check=False):
    env = simpy.Environment()
    tally = _Tally()
    sim = build(env, sc, make_policy(policy), workload=w, hooks=[tally])
    steps = 0
    cl = sim.cluster
    per = cl.cores_per_node if cl.node_granular else 1   # cores per unit
    while not sim.finished.triggered:
        env.step()
        steps += 1
        assert steps <= bound, "the run did not end within the bound of events"
        if check:
            # Held units are free units on up nodes kept out of the pool.
            actual = sum(n.free_cores for n in cl.nodes if n.up) // per
            assert cl.free >= 0 and cl.held >= 0 and cl.free + cl.held == actual
            assert cl.up_units + cl.held == sum(n.cores for n in cl.nodes if n.up) // per
    return sim, tally, steps


def test_issue_probe_50_jobs_ends():
    # The first probe of issue 21 (never returned before): 50 Lublin jobs on 64
    # nodes that are up half the time.
    from cosim.config import load_scenario

    sc = load_scenario("scenarios/lublin256.yaml", overrides=[
        "workload.jobs=50", "cluster.nodes=64", "faults.mtbf=2000", "faults.mttr=2000"])
    from cosim.model import load_workload

    w = load_workload(sc)
    sim, tally, steps = _run_counted(sc, w, "fcfs+easy", 200_000)
    assert sorted(tally.done) == sorted(int(i) for i in w.job_id)
    assert set(tally.done.values()) == {1}
    assert all(j.outcome in ("completed", "timeout", "failed", "rejected")
               for j in sim.scheduler.jobs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(2, 12), cpn=st.sampled_from([1, 2, 4]),
       granularity=st.sampled_from(["core", "node"]), mtbf=st.floats(200.0, 1e5),
       mttr=st.floats(50.0, 1e4), on_failure=st.sampled_from(["requeue", "fail"]),
       max_attempts=st.integers(1, 3), start_limit=st.none() | st.floats(1.0, 1e5),
       policy=st.sampled_from(["fcfs+easy", "sjf+conservative", "fcfs+none", "fcfs+greedy",
                               "wfp3+easy", "knapsack", "recorded"]),
       seed=st.integers(0, 2**16), data=st.data())
def test_every_fault_setting_ends_with_every_job_accounted(nodes, cpn, granularity, mtbf, mttr,
                                                           on_failure, max_attempts, start_limit,
                                                           policy, seed, data):
    n = data.draw(st.integers(1, 10), label="jobs")
    capacity = nodes if granularity == "node" else nodes * cpn
    submit = sorted(data.draw(st.lists(st.floats(0, 5000), min_size=n, max_size=n)))
    run = data.draw(st.lists(st.floats(1, 5000), min_size=n, max_size=n))
    procs = data.draw(st.lists(st.integers(1, capacity), min_size=n, max_size=n))
    # wait -1 (unknown): the recorded policy starts each job when it fits, from its submit
    w = Workload.from_columns(submit=submit, run=run, procs=procs,
                              features={"wait": [-1.0] * n})
    faults = {"mtbf": mtbf, "mttr": mttr, "on_failure": on_failure,
              "max_attempts": max_attempts}
    if start_limit is not None:
        faults["start_limit"] = start_limit
    sc = scenario_from_dict({"seed": seed, "cluster": {"nodes": nodes, "cores_per_node": cpn,
                                                       "granularity": granularity},
                             "workload": {"kind": "lublin", "jobs": n}, "faults": faults})
    # The bound: the run lasts at most about (jobs x attempts) x (longest run +
    # start limit) past the last submit; node events come at most every
    # min(mtbf, mttr)/nodes on average. A generous multiple of that.
    limit = 10 * mttr if start_limit is None else start_limit
    horizon = submit[-1] + n * max_attempts * (max(run) + limit) + limit
    bound = int(50 * (n + 10) + 20 * nodes * horizon / min(mtbf, mttr)) + 1000
    sim, tally, _ = _run_counted(sc, w, policy, bound, check=True)
    assert sorted(tally.done) == list(range(1, n + 1))
    assert set(tally.done.values()) == {1}
    jobs = sim.scheduler.jobs
    assert len(jobs) == n and len({j.id for j in jobs}) == n
    assert all(j.outcome in ("completed", "timeout", "failed", "rejected") for j in jobs)
    assert np.all([not math.isnan(j.end) for j in jobs])
    assert sim.cluster.held == 0 or sim.cluster.hold_for is not None


def test_issue_probe_3000_jobs_tsafrir_fail_once_ends_and_reports_never_started():
    # The second probe of issue 21 (11 minutes and 6.4 GB before): 3,000 jobs,
    # mtbf 1e5 s, mttr 7200 s, on_failure fail, one attempt, Tsafrir
    # estimates. 256-wide jobs on 256 nodes never find every node up.
    from cosim.compose import run_policy
    from cosim.config import load_scenario

    sc = load_scenario("scenarios/lublin256.yaml", overrides=[
        "workload.jobs=3000", "faults.mtbf=1e5", "faults.mttr=7200", "faults.on_failure=fail",
        "faults.max_attempts=1", "workload.estimates.model=tsafrir"])
    s = run_policy(sc, "fcfs+easy", None)
    assert s["jobs_total"] == 3000 and s["jobs_unfinished"] == 0
    assert s["jobs_completed"] + s["jobs_timeout"] + s["jobs_failed"] + s["jobs_rejected"] == 3000
    assert s["jobs_never_started"] == s["jobs_given_up"] > 0
    # the given-up jobs count in the starvation figure
    assert s["wait_max"] >= s["wait_mean_failed"] > 0


def test_cli_says_on_stderr_and_in_summary_which_jobs_never_started(tmp_path, capsys):
    import json

    from cosim.__main__ import main

    out = tmp_path / "r"
    assert main(["run", "scenarios/lublin256.yaml", "--set", "workload.jobs=50", "--set",
                 "cluster.nodes=64", "--set", "faults.mtbf=2000", "--set", "faults.mttr=2000",
                 "--policy", "fcfs+easy", "--no-plots", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    s = json.loads((out / "fcfs+easy" / "summary.json").read_text())["metrics"]
    n = s["jobs_never_started"]
    assert n >= 1
    assert f"warning: fcfs+easy: {n} of 50 jobs never started" in err
