"""The SimPy model: embedding in a host environment, faults, kills, walltimes, users."""

from __future__ import annotations

import math

import pytest
import simpy

from cosim.config import scenario_from_dict
from cosim.decisions import kill
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload


def make(rows, cores=4, policy="fcfs+easy", env=None, **sections):
    w = Workload.from_columns(
        submit=[r[0] for r in rows], procs=[r[1] for r in rows], run=[r[2] for r in rows],
        req_time=[r[3] if len(r) > 3 else r[2] for r in rows],
        prev_job=[r[4] if len(r) > 4 else -1 for r in rows],
        think=[r[5] if len(r) > 5 else -1 for r in rows])
    raw = {"cluster": {"nodes": cores}, "workload": {"kind": "swf", "path": "unused"}}
    for key, value in sections.items():
        raw.setdefault(key, {}).update(value)
    env = env or simpy.Environment()
    return env, build(env, scenario_from_dict(raw), make_policy(policy), workload=w)


def test_model_runs_inside_a_host_environment_with_other_processes():
    env = simpy.Environment()
    samples = []

    def power_meter(env, cluster):
        # An unrelated host process: samples utilization every minute, forever.
        while True:
            samples.append((env.now, cluster.used_cores))
            yield env.timeout(60)

    _, sim = make([(0, 2, 150), (30, 4, 100), (200, 1, 10)], cores=4, env=env)
    env.process(power_meter(env, sim.cluster))
    env.run(until=sim.finished)           # the host drives the clock
    starts = {j.id: j.start for j in sim.scheduler.jobs}
    assert starts == {1: 0.0, 2: 150.0, 3: 250.0}
    assert env.now == 260.0
    # Samples at 0, 60, ..., 240 see the jobs the schedule says were running
    # (at 0 the meter runs before the scheduler's first pass of that instant).
    assert samples == [(0, 0), (60, 2), (120, 2), (180, 4), (240, 4)]
    env.run(until=400)                     # the host may go on after our jobs are done
    assert samples[-1] == (360, 0)


def test_kill_requeues_and_accounts_wasted_time():
    env, sim = make([(0, 2, 100), (0, 2, 30)], cores=4)
    sched = sim.scheduler

    def agent(env):
        yield env.timeout(10)
        job = sched.jobs[0]
        assert sched.apply(kill(job, "test kill", requeue=True))

    env.process(agent(env))
    env.run(until=sim.finished)
    job = sched.jobs[0]
    assert job.attempts == 2
    assert job.killed_seconds == 10.0 and job.killed_core_seconds == 20.0
    assert job.start == 10.0 and job.end == 110.0 and job.outcome == "completed"
    assert sched.counters.kills == 1 and sched.counters.requeues == 1
    kinds = [(e[1], e[2]) for e in sched.events if e[1] in ("kill", "requeue")]
    assert kinds == [("kill", 1), ("requeue", 1)]
    # Resources were free at the kill time: the cluster never held 6 cores.
    assert max(e[6] for e in sched.events) <= 4


def test_kill_without_requeue_fails_the_job():
    env, sim = make([(0, 2, 100)], cores=4)
    sched = sim.scheduler

    def agent(env):
        yield env.timeout(25)
        sched.apply(kill(sched.jobs[0], "drop", requeue=False))

    env.process(agent(env))
    env.run(until=sim.finished)
    job = sched.jobs[0]
    assert job.outcome == "failed" and job.end == 25.0 and job.killed_seconds == 25.0
    assert math.isnan(sim.jobs_table()["run"][0])


def test_refused_decisions_are_counted_not_applied():
    env, sim = make([(0, 4, 10), (1, 4, 10)], cores=4)
    sched = sim.scheduler
    env.run(until=2)
    from cosim.decisions import start
    assert not sched.apply(start(sched.jobs[1], "ready", "agent"))   # does not fit
    assert not sched.apply(kill(sched.jobs[1], "not running"))
    assert sched.counters.refused == 2
    env.run(until=sim.finished)
    assert sched.jobs[1].start == 10.0


def test_walltime_enforcement_kills_at_the_limit():
    rows = [(0, 2, 100, 60), (0, 2, 30, 60)]
    env, sim = make(rows, cores=4, scheduler={"enforce_walltime": True})
    env.run(until=sim.finished)
    a, b = sim.scheduler.jobs
    assert a.outcome == "timeout" and a.end == 60.0
    assert b.outcome == "completed" and b.end == 30.0


def test_overrunning_job_extends_expectation_and_keeps_reservation_meaningful():
    # J1 asks for 10 s but runs 100 s (walltime not enforced). J2 needs all
    # cores; at 10 the scheduler learns J1 overran and expects it to run
    # max(60, 0.2 * 10) = 60 s more; J2's reservation moves from 10 to 70.
    env, sim = make([(0, 4, 100, 10), (1, 4, 5)], cores=4)
    env.run(until=sim.finished)
    sched = sim.scheduler
    j1, j2 = sched.jobs
    assert sched.counters.overruns == 2          # at 10 (-> 70) and at 70 (-> 130)
    assert j2.reservation == 10.0 and j2.start == 100.0
    assert sched.counters.reservations_broken >= 1


@pytest.mark.parametrize("rule, outcome, attempts", [("requeue", "completed", 2),
                                                     ("fail", "failed", 1)])
def test_node_failure_requeues_or_fails_by_rule(rule, outcome, attempts):
    env, sim = make([(0, 2, 50), (0, 1, 20)], cores=4, faults={"on_failure": rule})
    sim.cluster.track_placement = True          # a test-made failure needs placement
    cluster = sim.cluster

    def failure(env):
        yield env.timeout(5)
        cluster.node_down(cluster.nodes[0])      # node 0 holds a core of job 1
        yield env.timeout(10)
        cluster.node_up(cluster.nodes[0])

    env.process(failure(env))
    env.run(until=sim.finished)
    j1 = sim.scheduler.jobs[0]
    assert j1.outcome == outcome and j1.attempts == attempts
    assert j1.killed_seconds == 5.0
    assert sim.scheduler.counters.jobs_lost_to_failures == 1
    assert sim.scheduler.counters.node_failures == 1
    if rule == "requeue":
        # 3 cores are up from 5 to 15: job 1 (2 cores) restarts at once at 5.
        assert j1.start == 5.0 and j1.end == 55.0


def test_random_failures_from_the_scenario_are_deterministic_and_consistent():
    rows = [(i * 10, 1 + i % 3, 200 + 37 * i) for i in range(40)]

    def once():
        env, sim = make(rows, cores=8, faults={"mtbf": 2000, "mttr": 300})
        env.run(until=sim.finished)
        return sim

    a, b = once(), once()
    assert a.scheduler.counters.node_failures > 0
    assert [(j.start, j.end, j.attempts) for j in a.scheduler.jobs] == \
           [(j.start, j.end, j.attempts) for j in b.scheduler.jobs]
    for job in a.scheduler.jobs:
        assert job.outcome in ("completed", "failed")
    assert all(e[6] <= e[7] for e in a.scheduler.events)   # used <= up cores, always


def test_user_aware_mode_submits_after_the_predecessor_ends():
    # Job 2 depends on job 1 with a 5 s think time; the trace says it was
    # submitted at 3, but job 1 only ends at 10 here, so it comes at 15.
    rows = [(0, 4, 10), (3, 2, 5, 5, 1, 5), (4, 1, 1)]
    env, sim = make(rows, cores=4, workload={"user_aware": True})
    env.run(until=sim.finished)
    jobs = {j.id: j for j in sim.scheduler.jobs}
    assert jobs[2].submit == 15.0 and jobs[2].start == 15.0
    assert jobs[3].submit == 4.0 and jobs[3].start == 10.0
    env2, replay = make(rows, cores=4)
    env2.run(until=replay.finished)
    assert {j.id: j.submit for j in replay.scheduler.jobs}[2] == 3.0


def test_node_granularity_allocates_whole_nodes_and_checks_memory_per_node():
    # 4 nodes x 16 cores, 64 GB each. Job sizes are in nodes. Job 3 needs
    # 100 GB per node: it can never run and is rejected at submit. Job 2
    # (3 nodes) waits for job 1 (2 nodes) although 32 cores are free.
    w = Workload.from_columns(submit=[0, 1, 2], procs=[2, 3, 1], run=[10, 5, 5],
                              mem=[64.0, 96.0, 100.0])
    raw = {"cluster": {"nodes": 4, "cores_per_node": 16, "memory_per_node": 64,
                       "granularity": "node"},
           "workload": {"kind": "swf", "path": "unused"}}
    env = simpy.Environment()
    sim = build(env, scenario_from_dict(raw), make_policy("fcfs+easy"), workload=w)
    env.run(until=sim.finished)
    j1, j2, j3 = sim.scheduler.jobs
    assert (j1.start, j2.start) == (0.0, 10.0)
    assert j3.outcome == "rejected" and "memory per node" in j3.reason
    assert len(j1.alloc or []) == 0 and all(n.free_cores == 16 for n in sim.cluster.nodes)
    assert sim.cluster.capacity == 4
