"""Tests of predictors.remaining: ragged progress logs and the RNN + MLP remaining-time model.

scikit-learn's estimator checks do not apply to :class:`RemainingTimeRegressor`:
``fit(X, progress, runtime)`` and ``predict(X, progress, elapsed)`` take a
ragged sequence input and an elapsed time besides ``X``, which the generic
checks (2-D ``X`` and 1-D ``y`` only) cannot build. The contract parts that
do apply (params stored untouched, ``clone``, ``NotFittedError``, fit returns
self, determinism) are tested here directly.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from predictors.remaining import FRACTIONS, Progress, RemainingTimeRegressor, scf_done_at
from predictors.runtime import RuntimeRegressor

NAN = float("nan")


# ------------------------------------------------------------------- Progress

def test_progress_from_arrays_prefix_take():
    p = Progress.from_arrays([
        [[10, -1.0, 0.5, 20], [20, -0.1, 0.3, 6], [30, -0.01, 0.1, 5]],
        np.zeros((0, 4)),
        [[5, -2.0, NAN, 30]],
    ])
    assert p.lengths().tolist() == [3, 0, 1]
    assert p.offsets.tolist() == [0, 3, 3, 4]
    cut = p.prefix([20.0, 99.0, 4.9])
    assert cut.lengths().tolist() == [2, 0, 0]
    assert cut[0][:, 0].tolist() == [10.0, 20.0]
    sub = p.take([2, 0])
    assert sub.lengths().tolist() == [1, 3] and sub[0][0, 0] == 5.0 and sub[1][2, 0] == 30.0
    assert Progress.empty(3).lengths().tolist() == [0, 0, 0]


def test_progress_from_table_groups_and_sorts_steps():
    table = pa.table({"job_id": ["b", "a", "b", "zz", "b"], "step": [2, 1, 1, 1, 3],
                      "elapsed": [20.0, 7.0, 10.0, 1.0, 30.0], "energy": [0.0] * 5,
                      "denergy": [-0.2, -0.5, -1.0, 0.0, -0.1], "max_force": [0.4, NAN, 0.8, 1, 0.2],
                      "scf_steps": [6, 21, 19, 1, 5]})
    p = Progress.from_table(table, ["a", "c", "b"])  # "zz" is not a job here: ignored
    assert p.lengths().tolist() == [1, 0, 3]
    np.testing.assert_array_equal(p[2], [[10, -1.0, 0.8, 19], [20, -0.2, 0.4, 6],
                                         [30, -0.1, 0.2, 5]])
    assert p[0][0, 0] == 7.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.floats(0, 100), max_size=6), min_size=1, max_size=6),
       st.data())
def test_steps_done_matches_brute_force(logs, data):
    seqs = [np.column_stack([np.sort(e), np.zeros((len(e), 3))]) for e in logs]
    p = Progress.from_arrays(seqs)
    job = np.asarray(data.draw(st.lists(st.integers(0, len(logs) - 1), min_size=1, max_size=10)))
    now = np.asarray(data.draw(st.lists(st.floats(-1, 101), min_size=len(job),
                                        max_size=len(job))))
    got = RemainingTimeRegressor._steps_done(p, job, now)
    expected = [int(np.sum(seqs[j][:, 0] <= t)) for j, t in zip(job, now, strict=True)]
    assert got.tolist() == expected
    # prefix() agrees with the per-job count
    assert p.prefix(now[:1].repeat(len(logs))).lengths().tolist() == [
        int(np.sum(s[:, 0] <= now[0])) for s in seqs]


# --------------------------------------------------------------------- model

def relaxations(n: int, seed: int):
    """Multi-step jobs whose pace is hidden from the pre-run features.

    Job i has ``steps`` ionic steps (a feature) of ``10 * x * speed`` seconds
    each, where ``x`` is a feature and ``speed`` (lognormal, sigma 0.5) is
    not, plus 5 s start-up and 2 s of final I/O. Before the run the pace is
    unknowable; after a few steps it is measured.
    """
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, 3, n)
    steps = rng.integers(6, 20, n)
    speed = rng.lognormal(0.0, 0.5, n)
    dur = 10 * x * speed
    X = np.column_stack([x, steps, rng.integers(0, 3, n)])  # last column: a category
    logs = []
    for i in range(n):
        k = np.arange(1, steps[i] + 1)
        logs.append(np.column_stack([5 + k * dur[i], -0.5 * 0.6 ** k, 0.8 * 0.7 ** k,
                                     np.full(len(k), 6.0)]))
    runtime = 5 + steps * dur + 2
    return X, Progress.from_arrays(logs), runtime


def single_points(n: int, seed: int):
    """One-ionic-step jobs: ``n_scf`` SCF steps (a feature) of a hidden pace.

    The only completed ionic step ends with the job, so only the SCF progress
    of the step under way tells how fast the job is going.
    """
    rng = np.random.default_rng(seed)
    n_scf = rng.integers(10, 30, n)
    t_scf = rng.lognormal(np.log(20.0), 0.5, n)
    X = np.column_stack([rng.uniform(1, 3, n), n_scf, rng.integers(0, 3, n)])
    end = n_scf * t_scf
    logs = [[[end[i], -1.0, NAN, n_scf[i]]] for i in range(n)]
    return X, Progress.from_arrays(logs), end + 2


def mixed(n: int, seed: int):
    a, b = relaxations(n, seed), single_points(n // 2, seed + 100)
    return (np.vstack([a[0], b[0]]), Progress.from_arrays([*map(a[1].__getitem__, range(n)),
                                                           *map(b[1].__getitem__, range(n // 2))]),
            np.concatenate([a[2], b[2]]))


def test_scf_done_at():
    p = Progress.from_arrays([[[100.0, -1, 0.5, 20], [130.0, -0.1, 0.2, 6]], np.zeros((0, 4))])
    # job 0: first step 0..100 s with 20 SCF steps (5 s each), second 100..130 s with 6
    got = scf_done_at(p, [0.0, 12.0, 99.9, 100.0, 114.9, 129.0, 140.0, 50.0], [0] * 7 + [1])
    assert got.tolist() == [0, 2, 19, 0, 2, 5, 0, 0]


@pytest.fixture(scope="module")
def fitted():
    X, p, y = mixed(300, 0)
    model = RemainingTimeRegressor(epochs=25, hidden_size=16, mlp_hidden=32, batch_size=256,
                                   categorical_columns={2: 3}, random_cuts=2,
                                   runtime_model=RuntimeRegressor(n_estimators=60))
    return model.fit(X, p, y)


def _mape(yhat, y):
    return float(np.mean(np.abs(yhat - y) / y))


def test_single_points_need_scf_progress(fitted):
    X, p, y = single_points(150, 1)
    prerun = fitted.predict_runtime(X)
    now = 0.5 * y
    base = np.maximum(prerun - now, fitted.min_remaining)
    # without SCF progress nothing is known in-run: exactly the pre-run fallback
    np.testing.assert_array_equal(fitted.predict(X, p, now), base)
    rem = fitted.predict(X, p, now, scf_done=scf_done_at(p, now))
    rnn, pre = _mape(now + rem, y), _mape(now + base, y)
    assert rnn * 3 < pre and rnn < 0.15, (rnn, pre)


def test_in_run_model_beats_pre_run_model(fitted):
    X, p, y = relaxations(200, 1)
    prerun = fitted.predict_runtime(X)
    for f, factor in ((0.5, 3.0), (0.8, 3.0)):
        now = f * y
        rem = fitted.predict(X, p, now)
        base = np.maximum(prerun - now, fitted.min_remaining)
        rnn, pre = _mape(now + rem, y), _mape(now + base, y)
        assert rnn * factor < pre, (f, rnn, pre)
        assert rnn < 0.1, (f, rnn)


def test_predict_shapes_floor_and_fallback(fitted):
    X, p, y = relaxations(30, 2)
    now = 0.5 * y
    rem = fitted.predict(X, p, now)
    assert rem.shape == (30,) and np.all(rem >= fitted.min_remaining)
    # no completed step: exactly the pre-run fallback max(runtime_hat - elapsed, floor)
    empty = fitted.predict(X, Progress.empty(30), now)
    np.testing.assert_array_equal(
        empty, np.maximum(fitted.runtime_model_.predict(X) - now, fitted.min_remaining))
    # steps after the elapsed time are ignored: full logs equal their prefixes
    np.testing.assert_array_equal(rem, fitted.predict(X, p.prefix(now), now))
    # a list of arrays works like a Progress; a cached pre-run prediction gives the same
    as_list = [p.prefix(now)[i] for i in range(30)]
    np.testing.assert_array_equal(rem, fitted.predict(X, as_list, now,
                                                      prerun=fitted.predict_runtime(X)))


def test_batched_equals_one_by_one(fitted):
    X, p, y = relaxations(12, 3)
    now = np.linspace(0.05, 0.95, 12) * y
    batch = fitted.predict(X, p, now)
    single = np.array([fitted.predict(X[i:i + 1], p.take([i]), now[i:i + 1])[0]
                       for i in range(12)])
    np.testing.assert_allclose(batch, single, rtol=1e-5)


def test_training_is_deterministic_and_clone_keeps_params():
    X, p, y = relaxations(60, 4)
    params = dict(epochs=2, hidden_size=8, mlp_hidden=8, runtime_model=RuntimeRegressor(
        n_estimators=5), stack_folds=2, random_state=7)
    a = RemainingTimeRegressor(**params)
    assert a.fit(X, p, y) is a
    b = clone(RemainingTimeRegressor(**params)).fit(X, p, y)
    now = 0.5 * y
    np.testing.assert_array_equal(a.predict(X, p, now), b.predict(X, p, now))
    assert a.loss_curve_ == b.loss_curve_ and len(a.loss_curve_) == 2
    c = RemainingTimeRegressor(**{**params, "random_state": 8}).fit(X, p, y)
    assert not np.array_equal(a.predict(X, p, now), c.predict(X, p, now))
    # the given pre-run model is not fitted in place (it is cloned)
    assert not hasattr(params["runtime_model"], "model_")


@pytest.mark.parametrize("rnn, no_progress", [("lstm", "prerun"), ("gru", "network")])
def test_variants_fit_and_predict(rnn, no_progress):
    X, p, y = relaxations(60, 5)
    m = RemainingTimeRegressor(rnn=rnn, no_progress=no_progress, epochs=1, hidden_size=8,
                               mlp_hidden=8, runtime_model=RuntimeRegressor(n_estimators=5))
    m.fit(X, p, y)
    rem = m.predict(X, Progress.empty(60), 0.1 * y)
    assert np.all(np.isfinite(rem)) and np.all(rem >= 1.0)
    fallback = np.maximum(m.predict_runtime(X) - 0.1 * y, 1.0)
    # "network" answers jobs without progress itself, "prerun" hands them over
    assert np.array_equal(rem, fallback) == (no_progress == "prerun")


def test_fraction_grid():
    assert FRACTIONS == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def test_bad_inputs():
    X, p, y = relaxations(10, 6)
    m = RemainingTimeRegressor(epochs=1, runtime_model=RuntimeRegressor(n_estimators=3))
    with pytest.raises(NotFittedError):
        m.predict(X, p, y)
    with pytest.raises(ValueError, match="progress has 9 jobs, X has 10 rows"):
        m.fit(X, p.take(np.arange(9)), y)
    with pytest.raises(ValueError, match="runtime must be one finite value > 0 per job"):
        m.fit(X, p, -y)
    with pytest.raises(ValueError, match="rnn must be 'gru' or 'lstm'"):
        RemainingTimeRegressor(rnn="transformer").fit(X, p, y)
    m.fit(X, p, y)
    with pytest.raises(ValueError, match="X has 2 features, but the model was fitted with 3"):
        m.predict(X[:, :2], p, y)
    with pytest.raises(ValueError, match="elapsed must be finite and >= 0"):
        m.predict(X, p, -1.0)
