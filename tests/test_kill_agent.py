"""The learned kill decision: the ``kill`` action model, its teacher, and ``+kill=DIR``."""

from __future__ import annotations

import numpy as np
import pytest
from test_prediction import StepLog  # one finished ionic step every 100 s

from cosim.config import scenario_from_dict
from cosim.env import SchedulingEnv
from cosim.errors import ScenarioError
from cosim.policies import parse_policy
from cosim.prediction_hub import PredictionHub
from cosim.workloads.base import Workload


class Backend:
    """Pre-run: 1,000 s for every job; remaining: 20,000 s for job 1, 500 s for others."""

    def runtime(self, batch):
        return np.full(len(batch["job_id"]), 1000.0), "fixed"

    def remaining(self, batch):
        return np.array([20000.0 if j == 1 else 500.0 for j in batch["job_id"]]), "fixed"


def env_for(teacher="rule", **kw):
    # 4 cores. J1 (4 cores) really runs 30,000 s although predicted 1,000 s;
    # J2 and J3 (2 cores each) wait. At the first progress check (300 s) J1's
    # predicted run time is 300 + 20,000 s: the paper's rule kills it.
    w = Workload.from_columns(submit=[0, 10, 20], run=[30000, 400, 400], procs=[4, 2, 2],
                              req_time=[40000, 1000, 1000])
    w.progress = StepLog()
    w.features["progress_index"] = np.arange(len(w))
    sc = scenario_from_dict({"cluster": {"nodes": 4},
                             "workload": {"kind": "swf", "path": "unused"}})

    def hub(jobs):
        return PredictionHub(jobs, Backend(), remaining=True, interval=300.0,
                             min_remaining=1.0, feature_names=[])

    return SchedulingEnv(sc, actions="kill", kill_slots=2, workload=w, episode_jobs=3,
                         teacher=teacher, predictions=hub, **kw)


def test_the_kill_model_asks_at_prediction_rounds_and_its_teacher_is_the_rule():
    env = env_for()
    obs, info = env.reset(seed=0)
    assert info["time"] == 300.0                       # the first progress check
    assert info["action_mask"].tolist() == [1, 1, 0]    # keep, kill J1 (the only candidate)
    assert info["teacher_action"] == 1
    assert obs[1, 8] == 1.0                             # the rule's verdict, as a feature
    assert obs[1, 7] > 0.5                              # predicted run far over the pre-run one
    obs, r, term, trunc, info = env.step(1)            # kill J1: requeued, J2 and J3 run
    sched = env.simulation.scheduler
    jobs = {j.id: j for j in sched.jobs}
    assert sched.counters.kills == 1 and jobs[1].attempts == 1
    while not (term or trunc):
        obs, r, term, trunc, info = env.step(int(info["teacher_action"]))
    assert {j.id: j.start for j in sched.jobs}[2] == 300.0
    assert jobs[1].attempts == 2 and jobs[1].outcome == "completed"   # killed once only


def test_keeping_never_kills():
    env = env_for()
    obs, info = env.reset(seed=0)
    term = trunc = False
    while not (term or trunc):
        obs, r, term, trunc, info = env.step(0)
    sched = env.simulation.scheduler
    assert sched.counters.kills == 0
    assert {j.id: j.start for j in sched.jobs}[2] == 30000.0


def test_kill_model_needs_predictions_and_a_valid_base():
    w = Workload.from_columns(submit=[0], run=[5], procs=[1])
    sc = scenario_from_dict({"cluster": {"nodes": 2},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = SchedulingEnv(sc, actions="kill", workload=w, episode_jobs=1)
    with pytest.raises(ScenarioError, match="predictions"):
        env.reset(seed=0)
    with pytest.raises(ScenarioError, match="base_policy"):
        SchedulingEnv(sc, actions="kill", workload=w, episode_jobs=1, base_policy="best")


def test_the_grammar_names_a_kill_agent():
    spec = parse_policy("sjf+easy@rnn+kill=runs/killer")
    assert (spec.order, spec.predictor, spec.kill, spec.kill_agent) == (
        "sjf+easy", "rnn", True, "runs/killer")
    assert parse_policy("sjf+easy@rnn+kill").kill_agent == ""
    with pytest.raises(ScenarioError, match=r"\+kill\[=DIR\]"):
        parse_policy("sjf+easy@rnn+kill=")
