"""The simulator's prediction backends in predictors: precomputed bundle and user history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.errors import InputError
from predictors.bundle import ModelBundle, PrecomputedBackend
from predictors.history import HistoryBackend, UserHistoryRegressor
from predictors.remaining import RemainingTimeRegressor
from predictors.runtime import FeatureSpec, RuntimeRegressor

SPEC = FeatureSpec(numeric=("ENCUT",), categorical={"PREC": ("Normal", "Accurate")})

# ----------------------------------------------------------------------------- precomputed


class _RowSums:
    """Pre-run stand-in: a job's prediction is the sum of its feature row."""

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, X):
        self.calls += 1
        return X.sum(axis=1)


class _Remaining:
    """Remaining-time stand-in: 1000 * cores + elapsed + prerun + scf_done + completed steps.

    With the SCF view it adds the number of SCF lines and the start-up time.
    """

    def predict(self, X, progress, elapsed, prerun=None, scf_done=None, scf_lines=None,
                startup=None):
        assert elapsed.dtype == np.float64 and prerun.dtype == np.float64
        assert scf_done.dtype == np.int64
        out = 1000 * X[:, 0] + elapsed + prerun + scf_done + progress.lengths()
        if scf_lines is not None:
            out = out + np.array([len(v) for v in scf_lines])
        if startup is not None:
            assert startup.dtype == np.float64
            out = out + np.nan_to_num(startup)
        return out


def _columns() -> dict:
    # feature rows: cores, ENCUT, PREC code (Accurate 2, Normal 1, unknown 0)
    return {"job_id": [10, 11, 12], "user": ["a", "b", "a"], "req_time": [60.0, 60.0, 60.0],
            "cores": [4, 8, 16], "ENCUT": [400.0, 500.0, 600.0],
            "PREC": ["Accurate", "Normal", "Weird"]}


def _pick(columns: dict, rows: list[int]) -> dict:
    return {k: [v[r] for r in rows] for k, v in columns.items()}


def test_precomputed_runtime_is_one_call_then_lookups_by_job_id():
    model = _RowSums()
    bundle = ModelBundle(model, None, SPEC, "v1")
    backend = bundle.precomputed(_columns())
    assert isinstance(backend, PrecomputedBackend) and model.calls == 1
    values, version = backend.runtime({"job_id": [12, 10, 12]})
    # 16 + 600 + 0, 4 + 400 + 2
    assert values.tolist() == [616.0, 406.0, 616.0] and version == "v1"
    assert backend.runtime({"job_id": []})[0].shape == (0,)
    assert model.calls == 1, "runtime answers must come from the up-front predictions"
    cols = _columns()
    assert bundle.runtime(_pick(cols, [2, 0]))[0].tolist() == [616.0, 406.0]


def test_precomputed_remaining_uses_the_rows_of_the_batch_jobs():
    bundle = ModelBundle(_RowSums(), _Remaining(), SPEC, "v2")
    backend = bundle.precomputed(_columns())
    batch = {"job_id": [11, 10], "elapsed": [30.0, 5], "scf_done": [2, 0],
             "prerun": [100.0, 50.0], "progress": [[[10.0, -0.1, 0.5, 6]], []]}
    values, version = backend.remaining(batch)
    # 8 cores: 8000 + 30 + 100 + 2 + 1 step; 4 cores: 4000 + 5 + 50 + 0 + 0
    assert values.tolist() == [8133.0, 4055.0] and version == "v2"
    full = {**_pick(_columns(), [1, 0]), **batch}
    assert bundle.remaining(full)[0].tolist() == [8133.0, 4055.0]
    # the SCF view columns reach the model: + lines seen + start-up (null: unknown)
    scf = {**batch, "scf_lines": [[0.5, -0.1, 0.01], []], "startup": [40.0, None]}
    assert backend.remaining(scf)[0].tolist() == [8133.0 + 3 + 40, 4055.0]


def test_precomputed_errors_are_input_errors():
    backend = ModelBundle(_RowSums(), None, SPEC, "v").precomputed(_columns())
    with pytest.raises(InputError, match=r"^job_id: expected a job the predictions were "
                                         r"precomputed for, got 99$"):
        backend.runtime({"job_id": [10, 99]})
    with pytest.raises(InputError, match="no remaining-time model in this bundle"):
        backend.remaining({"job_id": [10], "elapsed": [1.0], "scf_done": [0], "prerun": [1.0],
                           "progress": [[]]})
    with pytest.raises(InputError, match="workload features: column 'ENCUT'"):
        ModelBundle(_RowSums(), None, SPEC, "v").precomputed({"job_id": [1], "cores": [1]})


@pytest.fixture(scope="module")
def trained():
    """A small real bundle and a 60-job workload with running-job batches."""
    rng = np.random.default_rng(4)
    n = 60
    cols = {"job_id": [f"j{i}" for i in range(n)], "user": ["u"] * n, "req_time": [1e4] * n,
            "cores": rng.choice([4, 8, 16], n).tolist(),
            "ENCUT": rng.uniform(300, 600, n).tolist(),
            "PREC": rng.choice(["Normal", "Accurate", ""], n).tolist()}
    X = SPEC.matrix(cols)
    steps = rng.integers(2, 7, n)
    dur = X[:, 1] / 10 * rng.lognormal(0, 0.2, n)
    logs = [np.column_stack([np.arange(1, s + 1) * d, np.full(s, -0.1),
                             0.5 * 0.7 ** np.arange(s), np.full(s, 6.0)])
            for s, d in zip(steps, dur, strict=True)]
    runtime = steps * dur + 5
    rt = RuntimeRegressor(n_estimators=15).fit(X, runtime)
    rem = RemainingTimeRegressor(epochs=2, hidden_size=8, mlp_hidden=8, runtime_model=rt,
                                 categorical_columns=SPEC.categorical_columns,
                                 stack_folds=0).fit(X, logs, runtime)
    return ModelBundle(rt, rem, SPEC, "real"), cols, logs, runtime


def test_precomputed_gives_exactly_the_bundle_answers(trained):
    bundle, cols, logs, runtime = trained
    backend = bundle.precomputed(cols)
    for rows in ([0], [7, 3], list(range(20, 45)), [59, 0, 59]):
        sub = _pick(cols, rows)
        a, b = backend.runtime({"job_id": sub["job_id"]}), bundle.runtime(sub)
        assert np.array_equal(a[0], b[0]) and a[1] == b[1] == "real"
        elapsed = [float(0.5 * runtime[r]) for r in rows]
        running = {"elapsed": elapsed, "scf_done": [r % 3 for r in rows],
                   "prerun": a[0].tolist(),
                   "progress": [logs[r][logs[r][:, 0] <= e].tolist()
                                for r, e in zip(rows, elapsed, strict=True)]}
        a = backend.remaining({"job_id": sub["job_id"], **running})
        b = bundle.remaining({**sub, **running})
        assert np.array_equal(a[0], b[0]) and a[1] == b[1]
        assert np.all(a[0] >= bundle.remaining_model.min_remaining)


# ----------------------------------------------------------------------------- user history


def test_history_backend_answers_and_learns():
    backend = HistoryBackend()
    assert isinstance(backend.regressor, UserHistoryRegressor)
    values, version = backend.runtime({"job_id": [1, 2], "user": ["alice", "bob"],
                                       "req_time": [3600.0, math.nan]})
    # no history: the request, else the mean of all run times (none yet: NaN)
    assert values[0] == 3600.0 and math.isnan(values[1]) and version == "history"
    for job_id, runtime in ((1, 100.0), (3, 300.0), (4, math.nan)):
        backend.observe({"job_id": [job_id], "user": ["alice"], "req_time": [3600.0],
                         "runtime": [runtime]})
    values, _ = backend.runtime({"job_id": [5, 6, 7, 8], "user": ["alice", "alice", "bob", "bob"],
                                 "req_time": [3600.0, 150.0, math.nan, 50.0]})
    # mean of 100 and 300 (NaN ignored); capped at the request; global mean; the request
    assert values.tolist() == [200.0, 150.0, 200.0, 50.0]
    assert values.dtype == np.float64
    assert backend.runtime({"job_id": [], "user": [], "req_time": []})[0].shape == (0,)


def test_history_backend_equals_the_regressor_row_by_row():
    reg = UserHistoryRegressor(n_last=3, min_history=1).fit(
        {"user": ["a", "b", "a"], "submit": [0, 1, 2], "runtime": [10.0, 20.0, 40.0]})
    backend = HistoryBackend(reg)
    assert backend.regressor is reg
    batch = {"job_id": [1, 2, 3], "user": ["a", "b", "c"], "req_time": [1000.0, 15.0, 7.0]}
    expected = [reg.predict_one(u, r) for u, r in zip(batch["user"], batch["req_time"], strict=True)]
    assert backend.runtime(batch)[0].tolist() == expected
    assert backend.runtime(batch)[0].tolist() == [25.0, 15.0, 7.0]
    backend.observe({"job_id": [9, 10], "user": ["c", "a"], "req_time": [1.0, 1.0],
                     "runtime": [5.0, 70.0]})
    assert reg.predict_one("c", math.nan) == 5.0 and reg.predict_one("a", 1e9) == 40.0


def test_history_backend_has_no_remaining_time():
    with pytest.raises(InputError, match="got a user-history backend"):
        HistoryBackend().remaining({"job_id": [1]})
