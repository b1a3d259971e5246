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


def test_objects_before_the_run_are_frozen_during_it_and_unfrozen_after():
    env = simpy.Environment()
    seen = []
    env.timeout(1).callbacks.append(lambda _e: seen.append(gc.get_freeze_count()))
    before = gc.get_freeze_count()
    kernel.run(env)
    assert before == 0 and seen[0] > 0 and gc.get_freeze_count() == 0


def test_unfrozen_after_an_error_in_the_run():
    env = simpy.Environment()

    def boom(_e):
        raise RuntimeError("boom")

    env.timeout(1).callbacks.append(boom)
    with pytest.raises(RuntimeError, match="boom"):
        kernel.run(env)
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_alone():
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        env = simpy.Environment()
        seen = []
        env.timeout(1).callbacks.append(lambda _e: seen.append(gc.get_freeze_count()))
        kernel.run(env)
        assert seen == [mine] and gc.get_freeze_count() == mine
    finally:
        gc.unfreeze()


def test_a_disabled_collector_stays_disabled_and_nothing_is_frozen():
    gc.disable()
    try:
        env = simpy.Environment()
        seen = []
        env.timeout(1).callbacks.append(lambda _e: seen.append(gc.get_freeze_count()))
        kernel.run(env)
        assert seen == [0] and not gc.isenabled()
    finally:
        gc.enable()
