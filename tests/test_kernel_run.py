"""cosim.kernel.run and Simulation.run: the same schedule as env.run, with the
objects made before the run frozen for the garbage collector meanwhile."""

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
