"""In-process remaining-time predictions: flat arrays, asked ahead, and the same schedules.

The hub answers an in-process backend's remaining-time batches from the
workload's flat progress arrays (no per-job lists) and, for a backend whose
answers depend only on their own row (the boosted trees), asks ahead for
the progress checks to come. Both are speed-ups only: the observation is
exactly what the progress source reports, the answers exactly what the
list batches give, and a whole schedule is the same as with one backend
call per check.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cosim.compose.policies import load_policy, parse_policies
from cosim.compose.predictions import prediction_backend, prepare_models
from cosim.compose.run import _build
from cosim.config import load_scenario
from cosim.prediction_hub import PredictionHub
from cosim.workloads.loading import load_workload, resolve_machine, streams
from cosim.workloads.progress_arrays import FlatProgress
from cosim.workloads.vasp import generate_vasp

SETS = ["workload.jobs=250", "predictor.train_jobs=600"]


def _cuts(jobs, rng, per_job=6):
    """(job, elapsed) pairs: random points, step ends exactly, 0, and past the end."""
    out = []
    for j in range(len(jobs)):
        ends = jobs.progress_log(j)["elapsed"]
        run = float(jobs.workload.run[j])
        es = [0.0, run, run + 500.0, *rng.uniform(0, run, per_job).tolist()]
        if len(ends):
            es += [float(ends[0]), float(ends[-1]), float(np.nextafter(ends[0], 0))]
        out += [(j, float(e)) for e in es]
    return out


def test_flat_observation_is_what_the_source_reports():
    jobs = generate_vasp(40, seed=5)
    flat = FlatProgress.of(jobs)
    cuts = _cuts(jobs, np.random.default_rng(1))
    rows = [j for j, _ in cuts]
    b = flat.batch(rows, [e for _, e in cuts])
    for n, (j, e) in enumerate(cuts):
        done, partial = jobs.progress_at(j, e)
        assert (b["k"][n], b["scf_done"][n]) == (done, partial), (j, e)
        log = jobs.progress_log(j, e)
        got = b["values"][b["starts"][n]:b["starts"][n] + b["k"][n]]
        want = np.column_stack([log["elapsed"], log["denergy"], log["max_force"],
                                log["scf_steps"]]).astype(np.float64)
        assert np.array_equal(got, want)
        t0, tl = b["trace_starts"][n], b["trace_len"][n]
        assert np.array_equal(b["trace"][t0:t0 + tl], jobs.scf_trace(j, e))
        su = jobs.startup_at(j, e)
        assert (np.isnan(su) and np.isnan(b["startup"][n])) or su == b["startup"][n]


def test_moves_keeps_the_checks_at_which_progress_moved():
    jobs = generate_vasp(20, seed=2)
    flat = FlatProgress.of(jobs)
    for j in range(len(jobs)):
        es = np.arange(0.0, float(jobs.workload.run[j]) + 900.0, 300.0)
        marks = [jobs.progress_at(j, float(e)) for e in es]
        want = [float(e) for i, e in enumerate(es)
                if marks[i] != (0, 0) and (i == 0 or marks[i] != marks[i - 1])]
        assert flat.moves(j, es) == want


def test_a_source_without_flat_arrays_keeps_the_list_batches():
    assert FlatProgress.of(object()) is None


class _ListsOnly:
    """The same backend seen through the service protocol only (list batches, no arrays)."""

    def __init__(self, backend):
        self.backend = backend
        self.version = backend.version

    def runtime(self, batch):
        return self.backend.runtime(batch)

    def remaining(self, batch):
        return self.backend.remaining(batch)


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    """The reduced VASP scenario with models trained on a small generated history."""
    cache = tmp_path_factory.mktemp("models")
    sc = load_scenario("scenarios/vasp.yaml", [*SETS, f"predictor.cache={cache}"])
    wl = load_workload(sc)
    sc = resolve_machine(sc, wl)
    specs = parse_policies(["sjf+easy@rnn+kill", "fcfs+easy@rnn"], sc)
    bundle = prepare_models(sc, specs, echo=None)
    return sc, wl, specs, bundle


def _schedule(reduced, spec, wrap):
    sc, wl, _, bundle = reduced
    backend = prediction_backend(spec.predictor, wl, bundle)
    policy = load_policy(spec, sc, wl, rng=streams(sc.seed)["policy"])
    env = simpy.Environment()
    sim, hub = _build(env, spec, sc, wl, policy, wrap(backend), bundle.feature_names, None)
    env.run(until=sim.finished)
    return sim.jobs_table(), hub


def test_flat_answers_equal_the_list_answers(reduced):
    sc, wl, specs, bundle = reduced
    backend = prediction_backend("rnn", wl, bundle)
    hub = PredictionHub(wl, backend, remaining=True, feature_names=bundle.feature_names)
    rng = np.random.default_rng(3)
    cuts = _cuts(wl.progress, rng, per_job=2)[:400]
    idx = [j for j, _ in cuts]
    elapsed = [e for _, e in cuts]
    prerun = rng.uniform(60, 5e4, len(cuts))
    flat = hub._flat.batch(idx, elapsed)
    flat.update(job_id=wl.job_id[idx].tolist(), prerun=prerun)
    a, va = backend.remaining_arrays(flat)
    cols = {"job_id": wl.job_id[idx].tolist(), "elapsed": elapsed, "prerun": prerun.tolist(),
            "scf_done": [wl.progress.progress_at(j, e)[1] for j, e in cuts],
            "progress": [np.column_stack([(lg := wl.progress.progress_log(j, e))["elapsed"],
                                          lg["denergy"], lg["max_force"],
                                          lg["scf_steps"]]).tolist() for j, e in cuts],
            "scf_lines": [wl.progress.scf_trace(j, e).tolist() for j, e in cuts],
            "startup": [None if np.isnan(s := wl.progress.startup_at(j, e)) else s
                        for j, e in cuts]}
    b, vb = backend.remaining(cols)
    assert va == vb and np.array_equal(a, b)
    # and row by row: an answer does not depend on the rest of its batch
    for n in (0, 17, 399):
        one = hub._flat.batch([idx[n]], [elapsed[n]])
        one.update(job_id=[cols["job_id"][n]], prerun=prerun[n:n + 1])
        assert backend.remaining_arrays(one)[0][0] == a[n]


@pytest.mark.parametrize("which", [0, 1])
def test_asking_ahead_keeps_the_schedule(reduced, which):
    spec = reduced[2][which]
    fast, hub = _schedule(reduced, spec, lambda b: b)
    slow, ref = _schedule(reduced, spec, _ListsOnly)
    assert hub._ahead and not ref._ahead
    for col in ("start", "end", "estimate", "outcome", "attempts", "killed_seconds"):
        assert np.array_equal(np.asarray(fast[col]), np.asarray(slow[col])), col
    assert hub.stats.as_dict() == ref.stats.as_dict()
    assert hub.stats.remaining_predictions > 100
