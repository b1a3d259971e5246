"""The compiled forest answers what XGBoost answers (numerical, categorical and missing splits)."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb
from hypothesis import given, settings
from hypothesis import strategies as st

from predictors.forest import CompiledForest


def _data(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    cat = rng.integers(0, 30, n).astype(np.float64)
    x1 = rng.normal(size=n)
    x2 = rng.uniform(0, 100, n)
    y = 2.0 * (cat % 3 == 0) + np.clip(x1, -1, 1) + x2 / 50
    cat[rng.random(n) < 0.1] = np.nan      # unknown ids
    x1[rng.random(n) < 0.15] = np.nan      # missing values, both default ways
    return np.column_stack([cat, x1, x2]), y


def _booster(X, y, objective="reg:squarederror", **extra):
    model = xgb.XGBRegressor(n_estimators=25, max_depth=4, tree_method="hist",
                             enable_categorical=True, max_cat_to_onehot=1,
                             feature_types=["c", "q", "q"], objective=objective, n_jobs=1,
                             **extra)
    return model.fit(X, y).get_booster()


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31))
def test_the_compiled_forest_is_xgboosts_prediction(seed):
    X, y = _data(seed)
    booster = _booster(X, y)
    forest = CompiledForest(booster)
    rows = np.vstack([X, [[np.nan, np.nan, np.nan], [31.0, 0.0, 50.0]]])  # and an id never seen
    expected = booster.inplace_predict(rows)
    assert forest.margin(rows) == pytest.approx(expected, abs=1e-5)


def test_a_base_margin_replaces_the_base_score():
    X, y = _data(1)
    booster = _booster(X, y, objective="reg:quantileerror", quantile_alpha=0.7)
    margin = np.linspace(-1, 1, len(X))
    expected = booster.inplace_predict(X, base_margin=margin)
    assert CompiledForest(booster).margin(X, margin) == pytest.approx(expected, abs=1e-5)


def test_an_objective_with_a_link_is_refused():
    X, y = _data(2)
    booster = _booster(X, (y > 1).astype(float), objective="binary:logistic")
    with pytest.raises(ValueError, match="has a link"):
        CompiledForest(booster)


def test_the_trace_model_answers_the_same_one_row_at_a_time_and_in_a_batch():
    from predictors.trace import FOREST_ROWS, TraceRuntimeRegressor

    rng = np.random.default_rng(4)
    n = FOREST_ROWS + 44
    cols = {"req_time": rng.uniform(100, 5000, n), "user": rng.integers(0, 6, n).astype(float),
            "last_run_1": rng.uniform(50, 4000, n), "last_run_2": rng.uniform(50, 4000, n)}
    cols["last_run_2"][::5] = np.nan
    y = np.minimum(cols["req_time"], cols["last_run_1"] * (0.5 + 0.2 * cols["user"]))
    model = TraceRuntimeRegressor(tuple(cols), ("user",), n_estimators=30)
    X = model.matrix(cols)
    batch = model.fit(X, y).predict(X)                      # XGBoost's own evaluation
    one_by_one = np.concatenate([model.predict(X[i: i + 1]) for i in range(n)])  # compiled
    assert one_by_one == pytest.approx(batch, rel=1e-4)
    assert np.all(one_by_one <= cols["req_time"] * (1 + 1e-6))
