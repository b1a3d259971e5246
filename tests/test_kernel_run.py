"""The kernel's fast paths: Simulation.run (cosim.kernel.run) gives the schedule
env.run gives, with full garbage collections put off meanwhile; bare timers and
wake-ups (cosim.kernel.timer) come exactly where simpy.Timeout and a
fired Event would; a scheduler whose passes run as callbacks refuses a policy
that breaks its word and yields an event."""

from __future__ import annotations

import gc

import pytest
import simpy

from cosim import kernel
from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload


def _sim(record: bool = True):
    sc = scenario_from_dict({"cluster": {"nodes": 4}, "workload": {"kind": "lublin", "jobs": 4}})
    w = Workload.from_columns(submit=[0, 1, 2, 2], run=[5, 5, 2, 1], procs=[4, 2, 2, 1],
                              req_time=[5, 6, 2, 10])
    env = simpy.Environment()
    return build(env, sc, make_policy("fcfs+easy"), workload=w, record=record)


def test_simulation_run_gives_the_schedule_env_run_gives():
    a, b = _sim(), _sim()
    a.env.run(until=a.finished)
    b.run()
    assert [(j.start, j.end, j.mode) for j in a.scheduler.jobs] == \
        [(j.start, j.end, j.mode) for j in b.scheduler.jobs]
    # hand-checked: the 4-core job fills the machine 0-5; both 2-core jobs start
    # when it ends, and the 1-core job when the shorter of them ends at 7
    assert [(j.start, j.end) for j in b.scheduler.jobs] == \
        [(0.0, 5.0), (5.0, 10.0), (5.0, 7.0), (7.0, 8.0)]
    assert b.scheduler.events == a.scheduler.events


def test_simulation_run_stops_at_a_time():
    sim = _sim()
    sim.run(until=3.0)
    assert sim.env.now == 3.0 and not sim.finished.triggered
    sim.run()
    assert sim.finished.triggered


def _probe(env, seen):
    env.timeout(1).callbacks.append(lambda _e: seen.append(gc.get_threshold()))


def test_full_collections_are_put_off_during_the_run_and_the_threshold_restored():
    before = gc.get_threshold()
    env = simpy.Environment()
    seen = []
    _probe(env, seen)
    kernel.run(env)
    assert seen == [(before[0], before[1], kernel.RUN_FULL_THRESHOLD)]
    assert gc.get_threshold() == before


def test_the_threshold_is_restored_after_an_error_in_the_run():
    before = gc.get_threshold()
    env = simpy.Environment()

    def boom(_e):
        raise RuntimeError("boom")

    env.timeout(1).callbacks.append(boom)
    with pytest.raises(RuntimeError, match="boom"):
        kernel.run(env)
    assert gc.get_threshold() == before


def test_a_higher_threshold_of_the_callers_is_left_alone():
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], 5000)
    try:
        env = simpy.Environment()
        seen = []
        _probe(env, seen)
        kernel.run(env)
        assert seen == [(before[0], before[1], 5000)]
        assert gc.get_threshold() == (before[0], before[1], 5000)
    finally:
        gc.set_threshold(*before)


def test_back_to_back_runs_keep_no_more_garbage_than_env_run():
    # Simulations are reference cycles: only the collector frees them. After
    # many runs, the garbage left is bounded as with plain env.run.
    def left(run) -> int:
        gc.collect()
        base = len(gc.get_objects())
        for _ in range(150):
            sim = _sim(record=False)
            run(sim)
            del sim
        return len(gc.get_objects()) - base

    plain = left(lambda sim: sim.env.run(until=sim.finished))
    ours = left(lambda sim: sim.run())
    assert ours <= max(2 * plain, 5000)


def test_a_timer_comes_where_a_timeout_made_at_the_same_moment_would():
    env = simpy.Environment()
    order = []
    for i in range(6):
        if i % 2:
            kernel.timer(env, 3.0 - i % 3, lambda _e, i=i: order.append((env.now, i)))
        else:
            env.timeout(3.0 - i % 3).callbacks.append(lambda _e, i=i: order.append((env.now, i)))
    env.run()
    # times 3, 2, 1, 3, 2, 1 for i = 0..5: by time, then in the order made
    assert order == [(1.0, 2), (1.0, 5), (2.0, 1), (2.0, 4), (3.0, 0), (3.0, 3)]


def test_a_timer_due_now_runs_after_the_events_already_due():
    # how a scheduler whose passes are callbacks wakes: as a fired event would
    env = simpy.Environment()
    order = []

    def first(_e):
        order.append(("first", env.now))
        kernel.timer(env, 0, lambda _c: order.append(("pass", env.now)))

    env.timeout(1).callbacks.append(first)
    env.timeout(1).callbacks.append(lambda _e: order.append(("second", env.now)))
    env.run()
    assert order == [("first", 1), ("second", 1), ("pass", 1)]


class _Liar:
    name = "liar"
    yields_events = False

    def __init__(self, env):
        self.env = env

    def decide(self, view):
        yield self.env.timeout(1)


def test_a_policy_that_says_it_yields_no_events_and_yields_one_is_refused():
    from cosim.actors.nodes import Cluster
    from cosim.actors.scheduler import Scheduler
    from cosim.job import Job

    env = simpy.Environment()
    sched = Scheduler(env, Cluster(env, nodes=2, cores_per_node=1), _Liar(env))
    sched.submit(Job(1, 0, 0.0, 5.0, 1, 5.0, 5.0))
    with pytest.raises(TypeError, match="policy 'liar' says it yields no events"):
        env.run()


def test_heuristic_passes_run_as_callbacks():
    sim = _sim()
    sim.run()
    assert not sim.scheduler.process.is_alive   # ended at once: passes are callbacks
    assert sim.scheduler.counters.passes > 0
