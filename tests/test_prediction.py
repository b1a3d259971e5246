"""Predictions inside the simulation: sources, fallbacks, promises, the kill rule."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cosim.config import scenario_from_dict
from cosim.model import build, load_workload
from cosim.policies import make_policy
from cosim.prediction import PredictionHub
from cosim.runner import attach_predictions, prediction_backend, prepare_models, run_policy
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


def sim_with(rows, cores, backend, policy="sjf+easy", progress=None, **hub):
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
    sim = build(env, sc, make_policy(policy), workload=w, hooks=[h])
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
    from cosim.prediction import feature_columns
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
    assert hub.stats.rule_kills == len(killed) >= 1
    for job in killed:
        assert job.killed_seconds > 0 and job.outcome == "completed"
        assert job.killed_core_seconds == pytest.approx(job.killed_seconds * job.procs)
