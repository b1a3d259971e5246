"""Tests of predictors.runtime: the XGBoost pre-run model and the feature matrix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from cosim.errors import InputError
from predictors.runtime import UNKNOWN_CODE, FeatureSpec, RuntimeRegressor

NAN = float("nan")
REPO = Path(__file__).resolve().parents[1]

# With log_target=True the estimator refuses negative targets (a run time is
# never negative); these checks fit on standardised targets, half of them < 0.
_NEGATIVE_TARGET_REASON = "fits on standardised targets < 0; a log-target runtime model refuses them"
_NEGATIVE_TARGET_CHECKS = (
    "check_n_features_in_after_fitting", "check_regressors_train",
    "check_regressor_data_not_an_array", "check_regressors_no_decision_function",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in",
)


def _expected_failures(est):
    if est.log_target:
        return dict.fromkeys(_NEGATIVE_TARGET_CHECKS, _NEGATIVE_TARGET_REASON)
    return {}


@parametrize_with_checks(
    [RuntimeRegressor(n_estimators=10, log_target=False), RuntimeRegressor(n_estimators=10)],
    expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_log_target_refuses_negative_runtimes():
    X = np.ones((5, 2))
    with pytest.raises(ValueError, match="run-time targets must be >= 0"):
        RuntimeRegressor(n_estimators=5).fit(X, [1, 2, -3, 4, 5])


def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError):
        RuntimeRegressor().predict(np.ones((2, 2)))


def _product_data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(1, 10, size=(n, 3))
    return X, 60.0 * X[:, 0] * X[:, 1]  # third column is noise


def test_learns_a_product_formula_within_a_few_percent():
    X, y = _product_data(2000, 0)
    Xt, yt = _product_data(500, 1)
    model = RuntimeRegressor(n_estimators=300, learning_rate=0.1).fit(X, y)
    mape = float(np.mean(np.abs(model.predict(Xt) - yt) / yt))
    assert mape < 0.05
    # same seed, same data: identical model
    again = clone(model).fit(X, y)
    np.testing.assert_array_equal(model.predict(Xt), again.predict(Xt))


def test_missing_values_are_allowed():
    X, y = _product_data(300, 2)
    X[::3, 2] = NAN
    pred = RuntimeRegressor(n_estimators=20).fit(X, y).predict(X)
    assert pred.shape == (300,) and np.all(np.isfinite(pred))


@settings(max_examples=15, deadline=None)
@given(arrays(np.float64, (20, 2), elements=st.floats(-1e6, 1e6)))
def test_predictions_are_never_negative(Xt):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(60, 2))
    y = np.where(X[:, 0] > 2.5, 0.0, 3.0)  # zero run times pull expm1 towards -0
    model = RuntimeRegressor(n_estimators=15).fit(X, y)
    assert np.all(model.predict(Xt) >= 0.0)


def test_training_hash_depends_on_data():
    X, y = _product_data(50, 3)
    a = RuntimeRegressor(n_estimators=2).fit(X, y).training_hash_
    b = RuntimeRegressor(n_estimators=2).fit(X, y * 2).training_hash_
    assert a != b and len(a) == 64


# ------------------------------------------------------------------ FeatureSpec

SPEC = FeatureSpec(numeric=("ENCUT", "cores"), categorical={"PREC": ("Normal", "Accurate"),
                                                            "ALGO": ("Fast",)})


def test_feature_spec_names_and_codes():
    # cores is already numeric, so the extra column is not duplicated
    assert SPEC.names == ("ENCUT", "cores", "PREC", "ALGO")
    assert SPEC.categorical_columns == {2: 3, 3: 2}
    jobs = pa.table({"ENCUT": [400.0, NAN, 520.0], "cores": [4, 8, 16],
                     "PREC": ["Accurate", "", "Normal"], "ALGO": ["Fast", "Fast", "Weird"],
                     "other": [1, 2, 3]})
    X = SPEC.matrix(jobs)
    expected = np.array([[400.0, 4, 2, 1], [NAN, 8, UNKNOWN_CODE, 1], [520.0, 16, 1, 0]])
    np.testing.assert_array_equal(X, expected)
    # a mapping of arrays gives the same matrix
    np.testing.assert_array_equal(SPEC.matrix({k: jobs[k].to_pylist() for k in SPEC.names}),
                                  expected)


def test_feature_spec_missing_column_message():
    with pytest.raises(InputError) as err:
        SPEC.matrix({"ENCUT": [1.0]}, where="d/jobs.parquet")
    msg = str(err.value)
    assert msg.startswith("d/jobs.parquet: column 'cores': expected one of the columns ['ENCUT']")
    assert msg.endswith("got no such column")


def test_feature_spec_non_numeric_message():
    jobs = {"ENCUT": ["400", "abc"], "cores": [1, 2], "PREC": ["", ""], "ALGO": ["", ""]}
    with pytest.raises(InputError, match=r"column 'ENCUT': expected numbers .*got non-numeric "
                                         r"value 'abc' in row 1"):
        SPEC.matrix(jobs)


def test_feature_spec_round_trip_keeps_column_order(tmp_path):
    spec = FeatureSpec(numeric=("b", "a"), categorical={"z": ("1",), "y": ("2", "3")})
    text = json.dumps(spec.to_dict(), sort_keys=True)  # sorting keys must not reorder columns
    back = FeatureSpec.from_dict(json.loads(text))
    assert back == spec and back.names == ("cores", "b", "a", "z", "y")
    (tmp_path / "dataset.json").write_text(json.dumps(
        {"version": 1, "features": ["b", "a"], "categorical": {"z": ["1"]}, "n_jobs": 0}))
    assert FeatureSpec.from_dataset(tmp_path).names == ("cores", "b", "a", "z")


def test_feature_spec_bad_dataset_json(tmp_path):
    with pytest.raises(InputError, match=r"dataset.json: expected a dataset folder .*got no such"):
        FeatureSpec.from_dataset(tmp_path)
    (tmp_path / "dataset.json").write_text("{not json")
    with pytest.raises(InputError, match="got invalid JSON"):
        FeatureSpec.from_dataset(tmp_path)
    (tmp_path / "dataset.json").write_text('{"features": "ENCUT"}')
    with pytest.raises(InputError, match=r"'features': expected a list of feature names, "
                                         r"got 'ENCUT'"):
        FeatureSpec.from_dataset(tmp_path)


def test_import_cosim_stays_light():
    code = ("import sys, cosim; import cosim.workloads.base; "
            "bad = [m for m in ('torch', 'xgboost') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
