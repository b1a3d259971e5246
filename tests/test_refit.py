"""Refitting inside the simulation (``predictor.refit``): when the hub refits a backend,
and that a refit only ever sees jobs that had finished by then (causality)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import simpy

from cosim.config import scenario_from_dict
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.policies import make_policy
from cosim.prediction_hub import PredictionHub
from cosim.workloads import read_swf
from predictors.trace_backend import TraceModelBackend


class FinishedMeanBackend:
    """Predicts each new job as the mean run time of its user's jobs at the last refit
    (else the request); keeps what every refit was fit on and which fit answered whom."""

    version = "finished-mean"

    def __init__(self):
        self.seen: list[tuple[int, int, float, float]] = []   # job_id, user, runtime, end
        self.fits: list[tuple[float, set[int]]] = [(0.0, set())]
        self.means: dict[int, float] = {}
        self.answered_by: dict[int, int] = {}   # job_id -> index of the fit that predicted it

    def observe(self, batch):
        for row in zip(batch["job_id"], batch["user"], batch["runtime"], batch["end"],
                       strict=True):
            self.seen.append(row)

    def training_rows(self, now: float) -> list[tuple[int, int, float, float]]:
        return list(self.seen)

    def refit(self, now: float) -> None:
        rows = self.training_rows(now)
        by_user: dict[int, list[float]] = {}
        for _, user, runtime, _ in rows:
            by_user.setdefault(user, []).append(runtime)
        self.means = {u: float(np.mean(v)) for u, v in by_user.items()}
        self.fits.append((now, {r[0] for r in rows}))

    def runtime(self, batch):
        fit = len(self.fits) - 1
        out = []
        for job_id, user, req in zip(batch["job_id"], batch["user"], batch["req_time"],
                                     strict=True):
            self.answered_by[job_id] = fit
            out.append(min(req, self.means.get(user, req)))
        return np.asarray(out, dtype=float), self.version

    def remaining(self, batch):
        raise NotImplementedError


class LeakyBackend(FinishedMeanBackend):
    """Also learns from jobs still running at the refit (their recorded run times):
    what a model fit on the trace rather than on the simulation would do."""

    def __init__(self, workload, sim_jobs):
        super().__init__()
        self.workload, self.sim_jobs = workload, sim_jobs

    def training_rows(self, now):
        done = {r[0] for r in self.seen}
        extra = [(j.id, j.user, j.run, np.nan) for j in self.sim_jobs()
                 if j.id not in done and j.start == j.start and j.start <= now]
        return list(self.seen) + extra


def _trace(tmp_path: Path, jobs: int = 60, every: int = 90, procs: int = 8, users: int = 4,
           seed: int = 5, longest: int = 2000) -> Path:
    """``jobs`` jobs submitted ``every`` seconds on ``procs`` processors, requests 3x runs."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(1, jobs + 1):
        run = int(rng.integers(30, longest))
        lines.append(f"{i} {i * every} -1 {run} {int(rng.integers(1, procs // 2 + 1))} -1 -1 -1 "
                     f"{run * 3} -1 1 {i % users + 1} -1 -1 -1 -1 -1 -1")
    path = tmp_path / f"t{jobs}.swf"
    path.write_text(f"; MaxProcs: {procs}\n" + "\n".join(lines) + "\n")
    return path


def simulate(tmp_path, make_backend, **refit):
    workload = read_swf(_trace(tmp_path))
    scenario = scenario_from_dict({"workload": {"kind": "swf", "path": "t.swf"},
                                   "cluster": {"nodes": 8}})
    env = simpy.Environment()
    holder = {}
    backend = make_backend(workload, lambda: holder["sim"].scheduler.jobs)
    hub = PredictionHub(workload, backend, **refit)
    sim = build(env, scenario, make_policy("sjf+easy"), workload=workload, hooks=[hub])
    holder["sim"] = sim
    sim.run()
    return sim, hub, backend


def leaks(sim, hub, fits, answered_by) -> list[tuple[int, int]]:
    """(predicted job, job it learnt from) pairs where the latter had not finished by the
    prediction (or the fit): what causality forbids. ``fits``: (time, job ids) of each
    fit, the first one empty; ``answered_by``: job id -> index of the fit that predicted it."""
    end = {j.id: j.end for j in sim.scheduler.jobs}
    out = []
    for job in sim.scheduler.jobs:
        fit_at, fit_on = fits[answered_by[job.id]]
        predicted_at = hub.prediction(job).prerun_at
        assert fit_at <= predicted_at
        out += [(job.id, k) for k in sorted(fit_on) if not end[k] <= fit_at]
    return out


@pytest.mark.parametrize("refit,fits", [({"refit_every_seconds": 1000.0}, None),
                                        ({"refit_every_jobs": 7}, 60 // 7)])
def test_refits_come_on_schedule_and_learn_only_from_finished_jobs(tmp_path, refit, fits):
    sim, hub, backend = simulate(tmp_path, lambda w, jobs: FinishedMeanBackend(), **refit)
    if fits is None:   # one per 1000 simulated seconds until the last job ends
        fits = int(max(j.end for j in sim.scheduler.jobs) // 1000)
    assert hub.stats.refits == fits == len(backend.fits) - 1
    assert hub.stats.as_dict()["model_refits"] == fits
    assert [t for t, _ in backend.fits[1:]] == sorted(t for t, _ in backend.fits[1:])
    assert leaks(sim, hub, backend.fits, backend.answered_by) == []
    # later fits did learn: some predictions are not the request
    assert any(hub.prediction(j).prerun != j.req_time for j in sim.scheduler.jobs)


def test_the_causality_check_catches_a_model_that_learns_from_running_jobs(tmp_path):
    sim, hub, backend = simulate(tmp_path, LeakyBackend, refit_every_seconds=1000.0)
    assert leaks(sim, hub, backend.fits, backend.answered_by) != []


def test_no_refit_without_a_schedule(tmp_path):
    _, hub, backend = simulate(tmp_path, lambda w, jobs: FinishedMeanBackend())
    assert hub.stats.refits == 0 and len(backend.fits) == 1


@pytest.mark.parametrize("refit,message", [
    ({}, "exactly one of every_seconds and every_jobs"),
    ({"every_seconds": 10, "every_jobs": 5}, "exactly one of every_seconds and every_jobs"),
    ({"every_jobs": 0}, "greater than 0"),
    ({"every_weeks": 1}, "unknown key 'every_weeks'"),
])
def test_a_bad_refit_schedule_is_one_line(refit, message):
    with pytest.raises(ScenarioError, match=message):
        scenario_from_dict({"workload": {"kind": "lublin"}, "predictor": {"refit": refit}})


# ----------------------------------------------------------------------------- the trace model


class RecordedTraceModel(TraceModelBackend):
    """The trace model's backend, keeping what each fit learnt from and which fit answered
    whom (the bookkeeping :func:`leaks` reads)."""

    def __init__(self, workload, _jobs):
        super().__init__(workload, min_fit=60, params=None)
        self.fits_log: list[tuple[float, set[int]]] = [(0.0, set())]
        self.answered_by: dict[int, int] = {}

    def refit(self, now):
        before = self.model
        super().refit(now)
        if self.model is not before:
            self.fits_log.append((now, set(self.fitted_on)))

    def runtime(self, batch):
        for j in batch["job_id"]:
            self.answered_by[int(j)] = len(self.fits_log) - 1
        return super().runtime(batch)


def test_the_trace_model_learns_in_the_run_from_finished_jobs_only(tmp_path):
    sim, hub, backend = simulate(tmp_path, RecordedTraceModel, refit_every_jobs=20)
    assert len(backend.fits_log) - 1 == backend.fits == 1   # 60 jobs: one fit, at the 60th end
    assert leaks(sim, hub, backend.fits_log, backend.answered_by) == []
    later = [j for j in sim.scheduler.jobs if backend.answered_by[j.id] > 0]
    assert all(hub.prediction(j).prerun <= j.req_time for j in later)


def test_xgboost_on_a_trace_trains_the_trace_model_without_a_models_folder(tmp_path):
    from cosim.compose import run_policy
    from cosim.config import load_scenario

    path = _trace(tmp_path, jobs=300, every=600, procs=16, users=7, seed=2, longest=3000)
    root = Path(__file__).resolve().parents[1]
    scenario = load_scenario(root / "scenarios" / "swf.yaml", [
        f"workload.path={path}", "predictor.refit.every_jobs=50",
        "scheduler.correction=stepup"])
    summary = run_policy(scenario, "sjf+easy@xgboost", None)
    assert summary["model_refits"] == 3    # at the 200th, 250th and 300th end (200 needed)
    assert summary["model_versions"] == ["request", "trace-model"]
    assert summary["jobs_finished"] == 300
