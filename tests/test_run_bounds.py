"""Runs with failures end at a bound whatever the settings (issue: every run ends).

Fault rates past the documented minimum are refused; the default start limit
is finite whatever ``mttr`` is; a run that reaches its bound (the horizon in
simulated time, or the count of node failures) ends with every job accounted
for, its results written and one warning naming the bound.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import simpy

from cosim import limits
from cosim.actors.faults import RunBound
from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler
from cosim.config import load_scenario, scenario_from_dict
from cosim.errors import ScenarioError
from cosim.job import Job
from cosim.model import run_horizon, start_limit
from cosim.policies import make_policy
from cosim.workloads.base import Workload

ROOT = Path(__file__).resolve().parents[1]
LUBLIN = str(ROOT / "scenarios" / "lublin256.yaml")


@pytest.mark.parametrize("override", ["faults.mtbf=1", "faults.mtbf=1e-6", "faults.mtbf=59.9"])
def test_failures_more_often_than_the_minimum_are_refused(override):
    with pytest.raises(ScenarioError, match=r"faults.mtbf: expected 0 \(no failures\) or at "
                                            r"least 60 s \(cosim.limits.MIN_MTBF"):
        load_scenario(LUBLIN, [override])
    assert load_scenario(LUBLIN, ["faults.mtbf=60"]).faults.mtbf == 60


def test_the_prediction_update_interval_has_a_floor():
    with pytest.raises(ScenarioError, match=r"predictor.update_interval: expected greater than "
                                            r"or equal to 1, got 0.001"):
        load_scenario(ROOT / "scenarios" / "vasp.yaml", ["predictor.update_interval=0.001"])


@pytest.mark.parametrize("mttr", [".inf", "1e308"])
def test_the_default_start_limit_is_finite_whatever_mttr(mttr):
    sc = load_scenario(LUBLIN, ["faults.mtbf=1e5", f"faults.mttr={mttr}"])
    assert start_limit(sc) == limits.MAX_START_LIMIT == 7 * 86400
    assert start_limit(load_scenario(LUBLIN, ["faults.mtbf=1e5"])) == 36000.0
    with pytest.raises(ScenarioError, match="faults.mttr"):
        load_scenario(LUBLIN, ["faults.mttr=.nan"])


def test_the_horizon_is_the_serial_time_past_the_last_submit():
    sc = scenario_from_dict({"cluster": {"nodes": 4}, "workload": {"kind": "lublin", "jobs": 2},
                             "faults": {"mtbf": 1000, "max_attempts": 2}})
    w = Workload.from_columns(submit=[0, 50], run=[10, 30], procs=[1, 4], req_time=[20, 25])
    # 50 + 2 x (20 + 30) + 100
    assert run_horizon(sc, w, 100.0) == 250.0


def test_a_job_still_queued_at_the_horizon_is_given_up_and_running_ones_finish():
    env = simpy.Environment()
    cluster = Cluster(env, nodes=1, cores_per_node=1)
    sched = Scheduler(env, cluster, make_policy("fcfs+easy"), expected_jobs=2)
    bound = RunBound(env, horizon=100.0, max_failures=10)
    sched.add_hook(bound)
    a, b = Job(1, 1, 0.0, 1000.0, 1, 1000.0, 1000.0), Job(2, 2, 1.0, 10.0, 1, 10.0, 10.0)
    simpy.Timeout(env, 0.0).callbacks.append(lambda _e: sched.submit(a))
    simpy.Timeout(env, 1.0).callbacks.append(lambda _e: sched.submit(b))
    env.run(until=sched.finished)
    assert (a.outcome, a.end) == ("completed", 1000.0)
    assert (b.outcome, b.end) == ("rejected", 100.0)
    assert "horizon of 100 s" in b.reason and bound.reached_by.startswith("the run's horizon")


def _small(overrides):
    return load_scenario(LUBLIN, ["workload.jobs=300", "cluster.nodes=32", *overrides])


def test_a_run_that_reaches_the_failure_bound_ends_written_with_one_warning(
        tmp_path, monkeypatch, capsys):
    from cosim.__main__ import main

    monkeypatch.setenv("COSIM_MAX_NODE_FAILURES", "50")
    out = tmp_path / "r"
    code = main(["run", LUBLIN, "--set", "workload.jobs=300", "--set", "cluster.nodes=32",
                 "--set", "faults.mtbf=60", "--set", "faults.mttr=3600", "--policy",
                 "fcfs+conservative", "--out", str(out), "--no-plots"])
    assert code == 0
    err = capsys.readouterr().err
    bound_lines = [line for line in err.splitlines() if "reached its bound" in line]
    assert len(bound_lines) == 1 and "50 node failures (COSIM_MAX_NODE_FAILURES)" in bound_lines[0]
    summary = json.loads((out / "fcfs+conservative" / "summary.json").read_text())
    s = summary.get("metrics", summary)
    assert s["run_bound"].startswith("50 node failures")
    assert 50 <= s["node_failures"] <= 60   # failures stop at the bound
    assert s["jobs_unfinished"] == 0 and s["jobs_total"] == 300


@pytest.mark.parametrize("policy", ["fcfs+easy", "fcfs+conservative"])
def test_failures_every_minute_never_repaired_end(policy):
    from cosim.compose import run_policy

    s = run_policy(_small(["faults.mtbf=60", "faults.mttr=.inf"]), policy, None)
    # every node down once, never back: the queue waits to the horizon
    assert s["node_failures"] == 32 and s["run_bound"].startswith("the run's horizon")
    assert s["jobs_unfinished"] == 0
    assert s["jobs_completed"] + s["jobs_failed"] + s["jobs_rejected"] + s["jobs_timeout"] == 300
    assert np.isfinite(s["wait_max"])


def test_runs_without_failures_have_no_bound():
    from cosim.compose import run_policy

    s = run_policy(_small([]), "fcfs+easy", None)
    assert s["run_bound"] is None
