"""Predictions inside the simulation: sources, fallbacks, promises, requeued jobs.

The kill rule that reads these predictions is tested in ``test_kill_rule.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cosim.compose import attach_predictions, prediction_backend, prepare_models, run_policy
from cosim.config import scenario_from_dict
from cosim.model import build, load_workload
from cosim.policies import KillRule, KillRulePolicy, make_policy
from cosim.prediction_hub import PredictionHub
from cosim.workloads.base import Workload


class FixedBackend:
    """A real backend with hand-picked answers (remaining time fixed per job id)."""

    version = "fixed-1"

    def __init__(self, runtime=None, remaining=None, fail=False):
        self.runtime_by_id = runtime or {}
        self.remaining_by_id = remaining or {}
        self.fail = fail
        self.calls = []

    def runtime(self, batch):
        self.calls.append(("runtime", list(batch["job_id"])))
        if self.fail:
            raise ConnectionError("service down")
        return np.array([self.runtime_by_id[j] for j in batch["job_id"]], float), self.version

    def remaining(self, batch):
        self.calls.append(("remaining", list(batch["job_id"])))
        return np.array([self.remaining_by_id[j] for j in batch["job_id"]], float), self.version


class StepLog:
    """Progress source: one finished ionic step every 100 s of run time."""

    def progress_at(self, index, elapsed):
        return int(elapsed // 100), 0

    def progress_log(self, index, elapsed):
        k = int(elapsed // 100)
        e = np.arange(1, k + 1) * 100.0
        return {"elapsed": e, "denergy": np.zeros(k), "max_force": np.zeros(k),
                "scf_steps": np.full(k, 5.0)}


def sim_with(rows, cores, backend, policy="sjf+easy", progress=None, kill_rule=None, **hub):
    """A small simulation with a hub over ``backend``; ``kill_rule`` wraps the policy in it."""
    w = Workload.from_columns(submit=[r[0] for r in rows], procs=[r[1] for r in rows],
                              run=[r[2] for r in rows], req_time=[r[3] for r in rows],
                              user=[r[4] if len(r) > 4 else 1 for r in rows])
    if progress is not None:
        w.progress = progress
        w.features["progress_index"] = np.arange(len(w))
    sc = scenario_from_dict({"cluster": {"nodes": cores},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    h = PredictionHub(w, backend, feature_names=[], **hub)
    pol = make_policy(policy)
    if kill_rule is not None:
        pol = KillRulePolicy(pol, kill_rule, h)
    sim = build(env, sc, pol, workload=w, hooks=[h])
    return env, sim, h


def test_runtime_predictions_replace_estimates_and_reorder_sjf():
    # 2 cores. Job 1 runs 0-10. Jobs 2 and 3 wait; their requests say 2 is
    # shorter, the predictions say 3 is: SJF must start 3 first.
    rows = [(0, 2, 10, 10), (1, 2, 30, 20), (2, 2, 5, 100)]
    backend = FixedBackend(runtime={1: 10.0, 2: 30.0, 3: 5.0})
    env, sim, hub = sim_with(rows, 2, backend)
    env.run(until=sim.finished)
    starts = {j.id: j.start for j in sim.scheduler.jobs}
    assert starts == {1: 0.0, 2: 15.0, 3: 10.0}
    assert {j.id: j.estimate for j in sim.scheduler.jobs} == {1: 10.0, 2: 30.0, 3: 5.0}
    assert hub.stats.runtime_predictions == 3 and hub.stats.fallbacks == 0
    # One batch per decision point: job 1 alone at 0, job 2 at 1, job 3 at 2.
    assert [c for c in backend.calls if c[0] == "runtime"] == [
        ("runtime", [1]), ("runtime", [2]), ("runtime", [3])]


def test_failing_backend_falls_back_to_user_estimates_and_counts():
    rows = [(0, 2, 10, 10), (1, 2, 30, 20), (2, 2, 5, 100)]
    env, sim, hub = sim_with(rows, 2, FixedBackend(fail=True))
    env.run(until=sim.finished)
    assert hub.stats.fallbacks == 3
    assert hub.stats.fallback_reasons == {"ConnectionError": 3}
    # User estimates: job 2 (20) before job 3 (100).
    assert {j.id: j.start for j in sim.scheduler.jobs} == {1: 0.0, 2: 10.0, 3: 40.0}


def test_remaining_time_moves_the_profile_and_broken_promises_are_recorded():
    # 4 cores. Job 1 (4 cores) asks for 100 s but runs 400 s. Job 2 (4 cores)
    # gets an EASY reservation at 100. At the 150 s progress check the
    # remaining-time prediction (250 s) moves job 1's expected end to 400:
    # the reservation is now later than promised, which is recorded.
    rows = [(0, 4, 400, 100), (10, 4, 50, 50)]
    backend = FixedBackend(runtime={1: 100.0, 2: 50.0}, remaining={1: 250.0, 2: 10.0})
    env, sim, hub = sim_with(rows, 4, backend, policy="fcfs+easy", progress=StepLog(),
                             remaining=True, interval=150.0, min_remaining=1.0)
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert j2.reservation == 100.0
    assert j2.start == 400.0
    assert sim.scheduler.counters.reservations_broken >= 1
    assert hub.stats.remaining_predictions >= 1
    # The overrun at 100 (before any progress) and the prediction at 150 both moved it.
    assert j1.expected_end == 400.0 or j1.end == 400.0


def test_user_history_predictions_follow_the_last_two_runs():
    # One user; jobs run one after another on a 1-core cluster. The request
    # is 1000 s for all; history predicts the mean of the last two finished
    # runs (EASY++), the request until two have finished.
    # Runs: job 1 0-100, job 2 150-450, job 3 500-550, job 4 from 600.
    rows = [(0, 1, 100, 1000), (150, 1, 300, 1000), (500, 1, 50, 1000), (600, 1, 50, 1000)]
    from predictors.history import HistoryBackend

    env, sim, hub = sim_with(rows, 1, HistoryBackend(), policy="fcfs")
    env.run(until=sim.finished)
    est = [j.estimate for j in sim.scheduler.jobs]
    # job 2: one run known -> request; job 3: (100+300)/2; job 4: (300+50)/2.
    assert est == [1000.0, 1000.0, 200.0, 175.0]


@pytest.fixture(scope="module")
def vasp_models(tmp_path_factory):
    cache = tmp_path_factory.mktemp("models")
    raw = {"name": "tiny-vasp", "seed": 3,
           "cluster": {"nodes": 2, "cores_per_node": 64},
           "workload": {"kind": "vasp", "jobs": 250,
                        "params": {"mean_interarrival": 200, "population_seed": 5}},
           "predictor": {"train_jobs": 600, "train_epochs": 2, "cache": str(cache),
                         "update_interval": 300,
                         "kill": {"short": 3600, "long": 2400, "error": 60}}}
    sc = scenario_from_dict(raw)
    bundle = prepare_models(sc, ["fcfs+easy@rnn"], echo=None)
    return sc, bundle


def test_models_are_cached_by_a_hash_of_their_inputs(vasp_models):
    sc, bundle = vasp_models
    again = prepare_models(sc, ["fcfs+easy@rnn"], echo=None)
    assert again.version == bundle.version


def test_precomputed_runtime_equals_batch_by_batch_predictions(vasp_models):
    sc, bundle = vasp_models
    w = load_workload(sc)
    pre = prediction_backend("xgboost", w, bundle)
    from cosim.prediction_hub import feature_columns
    for rows in ([0], [5, 3], list(range(40, 60))):
        cols = feature_columns(w, rows, bundle.feature_names)
        assert np.array_equal(pre.runtime(cols)[0], bundle.runtime(cols)[0])


def test_kill_rule_fires_requeues_and_counts_wasted_time(vasp_models):
    sc, bundle = vasp_models
    summary = run_policy(sc, "sjf+easy@rnn+kill", None, bundle=bundle)
    assert summary["rule_kills"] >= 1
    assert summary["requeues"] >= summary["rule_kills"]
    assert summary["wasted_core_seconds"] > 0
    assert summary["jobs_finished"] == 250
    plain = run_policy(sc, "sjf+easy@rnn", None, bundle=bundle)
    assert plain["rule_kills"] == 0 and plain["wasted_core_seconds"] == 0


def test_killed_job_is_requeued_with_its_lost_time(vasp_models):
    sc, bundle = vasp_models
    w = load_workload(sc)
    env = simpy.Environment()
    sim = build(env, sc, make_policy("sjf+easy"), workload=w)
    hub = attach_predictions(sim, sc, "rnn", True, bundle)
    env.run(until=sim.finished)
    killed = [j for j in sim.scheduler.jobs if j.attempts > 1]
    assert isinstance(sim.scheduler.policy, KillRulePolicy)    # the rule wraps the policy
    assert sim.scheduler.policy.hub is hub and hub.checks > 0  # ...and reads the hub's checks
    assert sim.scheduler.policy.kills == len(killed) >= 1
    assert all(j.kills == 1 for j in killed)                  # max_kills 1
    for job in killed:
        assert job.killed_seconds > 0 and job.outcome == "completed"
        assert job.killed_core_seconds == pytest.approx(job.killed_seconds * job.procs)


class CountingBackend(FixedBackend):
    """Runtime answers change from call to call: a fresh prediction is visible."""

    def __init__(self, runtime_seq, remaining=None):
        super().__init__(remaining=remaining)
        self.runtime_seq = {k: list(v) for k, v in runtime_seq.items()}

    def runtime(self, batch):
        self.calls.append(("runtime", list(batch["job_id"])))
        return np.array([self.runtime_seq[j].pop(0) for j in batch["job_id"]], float), self.version


def test_rule_kills_a_misjudged_job_which_comes_back_re_estimated():
    # 4 cores, SJF+EASY. Job 1 (4 cores, pre-run 1000 s, really 8000 s) starts at
    # 0. Job 2 (4 cores, 100 s) arrives at 10 and waits. At the 300 s progress
    # check the in-run model says 5000 s remain: run_hat 5300 > 3000, 1000 <
    # 3000, |5300 - 1000| > 300, elapsed 300 < 1000: killed and requeued. Its
    # re-estimate comes from the progress of the killed run (300 s + 5000 s =
    # 5300 s), so SJF runs job 2 first (300-400), then job 1 (400-8400), which
    # is not killed again (its len_param 5300 is not short).
    rows = [(0, 4, 8000, 9000), (10, 4, 100, 9000)]
    backend = FixedBackend(runtime={1: 1000.0, 2: 100.0}, remaining={1: 5000.0, 2: 50.0})
    env, sim, hub = sim_with(rows, 4, backend, policy="sjf+easy", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0,
                             kill_rule=KillRule.named("rlschert"))
    policy = sim.scheduler.policy
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert (j2.start, j2.end) == (300.0, 400.0)
    assert (j1.start, j1.end, j1.attempts) == (400.0, 8400.0, 2)
    assert j1.killed_seconds == 300.0
    assert policy.kills == 1 and j1.kills == 1 and j2.kills == 0
    # the re-estimation asked the in-run model about the killed run (elapsed 300)
    assert backend.calls[:4] == [("runtime", [1]), ("runtime", [2]), ("remaining", [1]),
                                 ("remaining", [1])]
    pred = hub.prediction(j1)
    assert pred.prerun == 5300.0 and pred.attempt == 2 and pred.model_prerun == 1000.0
    assert j1.estimate == 5300.0
    # its second run kept being predicted: run_hat = elapsed + 5000
    assert pred.remaining == 5000.0 and pred.run_hat == pred.elapsed + 5000.0


def test_requeued_job_without_in_run_model_gets_a_fresh_pre_run_prediction():
    # Job 1 is killed from outside at t=50 (as an operator or a node failure
    # would) and requeued. The backend now says 999 s: that is its estimate when
    # it comes back, not the 40 s it was first queued with.
    from cosim.decisions import kill

    rows = [(0, 1, 100, 500), (1, 1, 30, 500)]
    backend = CountingBackend({1: [40.0, 999.0], 2: [30.0]})
    env, sim, hub = sim_with(rows, 1, backend, policy="sjf")

    def operator():
        yield env.timeout(50)
        sim.scheduler.apply(kill(sim.scheduler.jobs[0], "operator", requeue=True))

    env.process(operator())
    env.run(until=sim.finished)
    j1, j2 = sim.scheduler.jobs
    assert backend.calls == [("runtime", [1]), ("runtime", [2]), ("runtime", [1])]
    assert j1.estimate == 999.0 and hub.prediction(j1).prerun == 999.0
    assert hub.prediction(j1).attempt == 2
    # SJF with the fresh estimate: job 2 (30 s) goes first after the kill
    assert (j2.start, j1.start) == (50.0, 80.0)


def test_running_predictions_are_readable_during_the_run():
    rows = [(0, 2, 1000, 2000), (0, 2, 700, 2000)]
    backend = FixedBackend(runtime={1: 900.0, 2: 600.0}, remaining={1: 400.0, 2: 100.0})
    env, sim, hub = sim_with(rows, 4, backend, policy="fcfs+easy", progress=StepLog(),
                             remaining=True, interval=300.0, min_remaining=1.0)
    seen = {}

    def reader():
        yield env.timeout(301)
        seen["running"] = [(j.id, p.as_dict()) for j, p in hub.running_predictions()]

    env.process(reader())
    env.run(until=sim.finished)
    # at 300 s both were predicted; job 2 is expected to end first (400 s)
    (id_a, a), (id_b, b) = seen["running"]
    assert (id_a, id_b) == (2, 1)
    assert a["remaining"] == 100.0 and a["elapsed"] == 300.0 and a["run_hat"] == 400.0
    assert b["prerun"] == 900.0 and b["run_hat"] == 700.0 and b["remaining_at"] == 300.0
