"""The trace run-time model: causal history features, the cap at the request, saving."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.workloads.base import Workload
from predictors.persist import load
from predictors.trace import TraceRuntimeRegressor, baselines, fit_on_past, trace_errors
from predictors.trace_features import (
    HISTORY_FEATURES,
    TraceHistory,
    clock_features,
    history_features,
    trace_columns,
)


def _trace(n: int = 400, seed: int = 0) -> Workload:
    """Users with typical run-time ratios, jobs overlapping in time."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 8, n)
    req = rng.choice([600.0, 3600.0, 14400.0], n)
    run = np.minimum(req, req * (0.1 + 0.1 * user) * rng.uniform(0.8, 1.2, n))
    submit = np.sort(rng.uniform(0, 50 * n, n))
    w = Workload.from_columns(submit=submit, run=run, procs=rng.integers(1, 16, n),
                              req_time=req, user=user,
                              features={"wait": rng.uniform(0, 3000, n),
                                        "queue": rng.integers(1, 3, n)})
    w.epoch, w.timezone = 893466664.0, "US/Pacific"
    return w


def test_history_uses_only_jobs_finished_by_the_submit():
    user = [1, 1, 1, 1]
    submit = [0.0, 10.0, 20.0, 100.0]
    end = [50.0, 15.0, 200.0, 300.0]     # job 1 ends first; job 0 at 50; job 2 after job 3 starts
    run = [50.0, 5.0, 180.0, 200.0]
    req = [100.0, 10.0, 200.0, 400.0]
    h = history_features(user, submit, end, run, req)
    assert np.isnan(h[:2, 0]).all() and h[:2, 4].tolist() == [0.0, 0.0]
    assert h[2, 0] == 5.0 and h[2, 4] == 1.0          # job 1 ended at 15 <= 20
    assert h[3, :2].tolist() == [50.0, 5.0] and h[3, 4] == 2.0   # job 2 still running at 100
    assert h[3, 3] == pytest.approx((50 / 100 + 5 / 10) / 2)
    assert h[3, 5] == pytest.approx(27.5)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 39), st.floats(1.0, 1e5))
def test_a_job_ending_after_a_submit_never_changes_that_jobs_features(seed, i, new_run):
    w = _trace(40, seed)
    end = w.submit + w.features["wait"] + w.run
    base = history_features(w.user, w.submit, end, w.run, w.req_time)
    later = np.flatnonzero(end > w.submit[i])
    later = later[later != i]
    if not len(later):
        return
    j = later[0]
    run = w.run.copy()
    run[j] = new_run                          # its run time ...
    end2 = end.copy()
    end2[j] = max(end[j], w.submit[i] + 1.0)  # ... and still ending after job i's submit
    changed = history_features(w.user, w.submit, end2, run, w.req_time)
    assert np.array_equal(changed[i], base[i], equal_nan=True)


def test_a_job_finished_before_the_submit_does_change_them():
    """The test above can fail: the same change to a finished job shows."""
    user, submit, end = [1, 1], [0.0, 100.0], [50.0, 200.0]
    req = [100.0, 100.0]
    a = history_features(user, submit, end, [50.0, 100.0], req)
    b = history_features(user, submit, end, [40.0, 100.0], req)
    assert a[1, 0] == 50.0 and b[1, 0] == 40.0


def test_the_incremental_history_is_the_offline_one():
    w = _trace(200, 3)
    cols = trace_columns(w)
    h = TraceHistory()
    order = np.argsort(cols["end"], kind="stable")
    k = 0
    for i in np.argsort(w.submit, kind="stable"):
        while k < len(order) and cols["end"][order[k]] <= w.submit[i]:
            j = order[k]
            h.observe_finished(w.user[j], w.run[j], w.req_time[j])
            k += 1
        offline = np.array([cols[name][i] for name in HISTORY_FEATURES])
        assert np.array_equal(h.features(w.user[i]), offline, equal_nan=True)


def test_clock_features_on_the_sites_own_clock():
    # 1998-04-24 18:11:04 PDT (a Friday) is Unix time 893466664.
    hour, weekday = clock_features([0.0, 6 * 3600.0], 893466664.0, "US/Pacific").T
    assert hour[0] == pytest.approx(18 + 11 / 60 + 4 / 3600) and weekday[0] == 4
    assert hour[1] == pytest.approx(11 / 60 + 4 / 3600) and weekday[1] == 5
    assert np.isnan(clock_features([1.0], None)).all()


def test_the_model_caps_at_the_request_and_saves_with_identical_predictions(tmp_path):
    w = _trace(600, 1)
    cols = trace_columns(w)
    model, report = fit_on_past(cols, n_estimators=40)
    assert report["chosen"] in [c["params"] for c in report["validation"]["candidates"]]
    pred = model.predict_columns(cols)
    assert np.all(pred <= w.req_time) and np.all(pred >= 0)
    folder = model.save(tmp_path / "trace")
    again = load(folder, expected_class=TraceRuntimeRegressor)
    assert np.array_equal(again.predict_columns(cols), pred)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["class"] == "predictors.trace.TraceRuntimeRegressor"
    assert meta["feature_names"] == list(model.feature_names)
    assert {"user", "queue"} <= set(meta["params"]["categorical"])
    assert meta["training_hash"] and "xgboost" in meta["versions"]
    # Users have typical ratios: the model beats the request by far.
    y = cols["runtime"]
    assert trace_errors(y, pred)["mae"] < 0.5 * trace_errors(y, w.req_time)["mae"]


def test_an_unseen_id_reads_as_unknown_not_as_a_neighbour():
    cols = {"req_time": np.full(200, 1000.0), "user": np.repeat([1, 3], 100)}
    y = np.where(cols["user"] == 1, 100.0, 900.0)
    m = TraceRuntimeRegressor(("req_time", "user"), ("user",), n_estimators=100, learning_rate=0.3,
                              objective="reg:squarederror").fit(
        np.column_stack([cols["req_time"], cols["user"]]), y)
    p = m.predict(np.array([[1000.0, 1], [1000.0, 3], [1000.0, 2], [1000.0, -1]]))
    assert p[0] == pytest.approx(100, rel=0.05) and p[1] == pytest.approx(900, rel=0.05)
    assert p[2] == p[3]      # id 2 was never seen: as unknown as -1


def test_baselines_last_two_is_tsafrirs_rule_on_finished_jobs():
    cols = {"user": np.array([1, 1, 1, 1]), "submit": np.array([0.0, 1.0, 2.0, 500.0]),
            "end": np.array([100.0, 200.0, 300.0, 900.0]),
            "runtime": np.array([100.0, 199.0, 298.0, 400.0]),
            "req_time": np.array([1000.0, 1000.0, 1000.0, 250.0]),
            "user_mean_run": np.array([np.nan, np.nan, np.nan, 199.0])}
    b = baselines(cols)
    assert b["last_two"].tolist() == [1000.0, 1000.0, 1000.0, 248.5]   # (199 + 298) / 2
    assert b["user_mean"].tolist() == [1000.0, 1000.0, 1000.0, 199.0]
    assert b["request"].tolist() == cols["req_time"].tolist()
    cols["req_time"][3] = 240.0
    assert baselines(cols)["last_two"][3] == 240.0                       # capped at the request
