"""The scheduler's seams: hooks, policies that wait on events, and agents as plain policies."""

from __future__ import annotations

import numpy as np
import simpy

from cosim import records
from cosim.actors.scheduler import SchedulerHooks
from cosim.config import scenario_from_dict
from cosim.decisions import start
from cosim.env import SchedulingEnv
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload
from cosim.workloads.lublin import lublin


def scenario(cores: int, **extra):
    return scenario_from_dict({"cluster": {"nodes": cores},
                               "workload": {"kind": "swf", "path": "unused"}, **extra})


class Recorder(SchedulerHooks):
    """Writes down every moment with its time."""

    def __init__(self):
        self.log = []

    def attach(self, scheduler):
        self.env = scheduler.env
        self.log.append(("attach", None, scheduler.env.now))

    def job_queued(self, job):
        self.log.append(("queued", job.id, self.env.now))

    def job_started(self, job):
        self.log.append(("started", job.id, self.env.now))

    def job_left(self, job, completed):
        self.log.append(("left" if completed else "left-early", job.id, self.env.now))

    def job_done(self, job):
        self.log.append(("done", job.id, self.env.now))

    def prepare(self, view):
        self.log.append(("prepare", len(view.new_jobs), view.now))
        yield self.env.timeout(0)


def test_hooks_hear_every_moment_in_order():
    # 2 cores, FCFS: J1 (2 cores, 0-10), J2 (1 core, submitted 1, runs 10-15),
    # J3 (3 cores) never fits: rejected at submit.
    w = Workload.from_columns(submit=[0, 1, 2], run=[10, 5, 5], procs=[2, 1, 3])
    env = simpy.Environment()
    rec = Recorder()
    sim = build(env, scenario(2), make_policy("fcfs"), workload=w, hooks=[rec])
    env.run(until=sim.finished)
    moments = [m for m in rec.log if m[0] != "prepare"]
    assert moments == [
        ("attach", None, 0), ("queued", 1, 0), ("started", 1, 0), ("queued", 2, 1),
        ("done", 3, 2), ("left", 1, 10), ("done", 1, 10), ("started", 2, 10),
        ("left", 2, 15), ("done", 2, 15)]
    # One prepare per decision point, seeing the jobs queued since the last one.
    assert [m for m in rec.log if m[0] == "prepare"] == [
        ("prepare", 1, 0), ("prepare", 1, 1), ("prepare", 0, 10), ("prepare", 0, 15)]


def test_a_policy_may_wait_on_an_event_while_time_stands_still():
    w = Workload.from_columns(submit=[0], run=[5], procs=[1])
    answers = []

    class Remote:
        name = "remote"

        def decide(self, view):
            if not view.queue.count:
                return
            job = view.queue.first()
            reply = view.env.event()
            # The answer comes from elsewhere (here: a process at the same instant).
            view.env.process(answer(view.env, reply, start(job, "ready", "remote says so")))
            yield reply

    def answer(env, reply, decision):
        yield env.timeout(0)
        answers.append(env.now)
        reply.succeed(decision)

    env = simpy.Environment()
    sim = build(env, scenario(1), Remote(), workload=w)
    env.run(until=sim.finished)
    job = sim.scheduler.jobs[0]
    assert answers == [0] and (job.start, job.end, job.reason) == (0.0, 5.0, "remote says so")


def _last_start(obs, mask, window=8):
    """The legal window slot furthest back (tail first), else Wait."""
    legal = np.flatnonzero(mask)
    starts = legal[legal < window]
    return int(starts[-1]) if len(starts) else window


def test_an_agent_as_a_plain_policy_schedules_exactly_as_in_the_env():
    w = lublin(300, procs=64, seed=5)
    sc = scenario(64)
    env = SchedulingEnv(sc, workload=w, window=(6, 2), kill_slots=1, episode_jobs=len(w),
                        guard_wait=6 * 3600.0)
    obs, info = env.reset(seed=0, options={"jobs": w})
    done = False
    while not done:
        obs, _, term, trunc, info = env.step(_last_start(obs, info["action_mask"]))
        done = term or trunc
    in_env = records.jobs_table(env.simulation.scheduler.jobs)

    sim_env = simpy.Environment()
    policy = env.acting_policy(_last_start, name="rl:test")
    sim = build(sim_env, sc, policy, workload=w)
    sim_env.run(until=sim.finished)
    as_policy = records.jobs_table(sim.scheduler.jobs)
    for col in in_env:
        assert np.array_equal(np.asarray(in_env[col]), np.asarray(as_policy[col]),
                              equal_nan=np.asarray(in_env[col]).dtype.kind == "f"), col
    assert sim.scheduler.counters.kills == env.simulation.scheduler.counters.kills


class FlagRecorder:
    """FCFS without backfilling that writes down the view's flags at each pass."""

    name = "flags"

    def __init__(self):
        self.inner = make_policy("fcfs")
        self.passes = []

    def decide(self, view):
        self.passes.append((view.now, view.released, view.surprise))
        return self.inner.decide(view)


def test_replan_asks_for_a_full_pass_and_wake_for_a_plain_one():
    # J1 (2 cores, 0-10) on 2 cores. At 3 an outside process wakes the
    # scheduler (nothing changed: no flag); at 5 it asks for a replan (both
    # flags, so no policy takes an incremental shortcut); at 10 J1 ends.
    w = Workload.from_columns(submit=[0], run=[10], procs=[2])
    env = simpy.Environment()
    policy = FlagRecorder()
    sim = build(env, scenario(2), policy, workload=w)

    def outside(env):
        yield env.timeout(3)
        sim.scheduler.wake()
        yield env.timeout(2)
        sim.scheduler.replan()

    env.process(outside(env))
    env.run(until=sim.finished)
    assert policy.passes == [(0.0, True, True), (3.0, False, False), (5.0, True, True),
                             (10.0, True, False)]
