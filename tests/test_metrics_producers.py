"""Every producer of bsld and wait gives the figures of ``summary.json``.

bsld and wait are defined once, in :mod:`cosim.metrics` (``docs/metrics.md``);
the producers are the run summary (``summary.json``, :func:`cosim.compose.run_policy`),
the evaluation rows the tuner and the protocol compare (:func:`cosim.evaluation.run_window`),
the environment's episode metrics (what learners log) and its ``bsld`` reward.
On a run with node failures (attempts lost, so ``killed_seconds`` > 0, and jobs
failed after their last attempt) and on an episode with a kill they must agree
to the last bit: a second formula anywhere (a wait without the killed seconds,
a max wait over finished jobs only) shows here. ``tests/test_architecture.py``
also looks for a copy of the formulas outside :mod:`cosim.metrics`.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from test_kill_agent import env_for  # an episode whose teacher kills a job

from cosim import metrics, records
from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.env import SchedulingEnv
from cosim.env.rewards import BsldReward, RewardParams
from cosim.evaluation import capacity_of, job_rows, run_window
from cosim.model import build, load_workload
from cosim.policies import make_policy

SCENARIO = "scenarios/lublin256.yaml"
#: 150 Lublin jobs on 256 nodes that fail (mean 200,000 s between failures of a node)
#: and are repaired in an hour; a job lost twice fails.
FAULTS = ["faults.mtbf=200000", "faults.mttr=3600", "faults.max_attempts=2", "workload.jobs=150"]
KEYS = ("bsld_mean", "wait_mean", "wait_max")


@pytest.fixture(scope="module")
def faulty():
    scenario = load_scenario(SCENARIO, FAULTS)
    workload = load_workload(scenario)
    summary = run_policy(scenario, "fcfs+easy", None, workload=workload)
    # What makes the run a test of the definitions: time run in lost attempts
    # (not waiting) and jobs that left the queue unfinished (in the max wait).
    assert summary["killed_seconds"] > 0 and summary["jobs_failed"] > 0
    return scenario, workload, summary


def test_evaluation_rows_are_the_summary(faulty):
    scenario, workload, summary = faulty
    row = run_window(scenario, "fcfs+easy", workload)
    assert {k: getattr(row, k) for k in KEYS} == {k: summary[k] for k in KEYS}


def test_bsld_reward_charges_the_summary_bsld(faulty):
    scenario, workload, summary = faulty
    reward = BsldReward(RewardParams(tau=scenario.metrics.tau, capacity=capacity_of(scenario),
                                     waste_weight=0.0))
    sim = build(simpy.Environment(), scenario, make_policy("fcfs+easy"), workload=workload,
                record=False, hooks=[reward])
    sim.run()
    charged = -reward.collect(sim.env.now)
    assert charged == pytest.approx(summary["bsld_mean"] * summary["jobs_finished"], rel=1e-12)
    # ... and the same run's rows, by the evaluation's per-job reading, are the summary's.
    bsld, wait, queued = job_rows(sim.scheduler.jobs, len(workload), scenario.metrics.tau)
    done = ~np.isnan(bsld)
    assert (bsld[done].mean(), wait[done].mean(), np.nanmax(queued)) == tuple(
        summary[k] for k in KEYS)


def test_env_episode_metrics_are_the_summary_of_its_jobs(faulty):
    scenario, workload, _ = faulty
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload),
                        teacher="fcfs+easy")
    _, info = env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(info["teacher_action"])
        done = terminated or truncated
    sched = env.simulation.scheduler
    summary = metrics.summarize(records.jobs_table(sched.jobs), None, cores=env.capacity,
                                tau=scenario.metrics.tau)
    assert summary["killed_seconds"] > 0
    got = info["episode_metrics"]
    assert {k: got[k] for k in KEYS} == {k: summary[k] for k in KEYS}
    assert got["jobs_finished"] == summary["jobs_finished"]


def test_a_killed_job_waits_the_time_it_was_not_running():
    # J1 runs 0-300 s and is killed (test_kill_agent's episode); J2 and J3 run
    # 300-700 s; J1 restarts at 700 s: it waited 700 - 300 = 400 s, not 700 s.
    env = env_for()
    _, info = env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(int(info["teacher_action"]))
        done = terminated or truncated
    jobs = {j.id: j for j in env.simulation.scheduler.jobs}
    assert (jobs[1].start, jobs[1].killed_seconds) == (700.0, 300.0)
    assert float(metrics.wait(jobs[1].start, jobs[1].submit, jobs[1].killed_seconds)) == 400.0
    waits = {1: 400.0, 2: 300.0 - 10.0, 3: 300.0 - 20.0}
    m = info["episode_metrics"]
    assert m["wait_mean"] == pytest.approx(np.mean(list(waits.values())), rel=1e-12)
    assert m["wait_max"] == 400.0
    summary = metrics.summarize(records.jobs_table(env.simulation.scheduler.jobs), None,
                                cores=4)
    assert (summary["wait_mean"], summary["wait_max"]) == (m["wait_mean"], m["wait_max"])


def test_the_formulas():
    # bsld = max(1, response / max(tau, run)); wait = start - submit - killed_seconds
    assert metrics.bsld([100.0, 5.0, 30.0], [50.0, 5.0, 30.0], 10.0).tolist() == [2.0, 1.0, 1.0]
    assert metrics.bsld([4.0], [2.0], 10.0).tolist() == [1.0]        # short jobs count as tau
    assert metrics.bsld([60.0], [2.0], 10.0).tolist() == [6.0]
    assert metrics.wait([700.0, 300.0], [0.0, 10.0], [300.0, 0.0]).tolist() == [400.0, 290.0]
