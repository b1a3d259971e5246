"""Tests of predictors.history: the EASY++-style user-history predictor."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from predictors.history import UserHistoryRegressor

NAN = float("nan")


def test_online_hand_worked_sequence():
    h = UserHistoryRegressor()
    assert math.isnan(h.predict_one("a"))           # nothing known, no request
    assert h.predict_one("a", 600.0) == 600.0       # no history: the request
    h.observe("a", 100.0)
    assert h.predict_one("a", 600.0) == 600.0       # one run is not enough (min_history=2)
    assert h.predict_one("b") == 100.0              # no request: mean of every run seen
    h.observe("a", 300.0)
    assert h.predict_one("a", 600.0) == 200.0       # (100 + 300) / 2
    h.observe("a", 500.0)
    assert h.predict_one("a", 600.0) == 400.0       # last two: (300 + 500) / 2
    assert h.predict_one("a", 350.0) == 350.0       # capped at the request
    assert h.predict_one("a") == 400.0              # unknown request: no cap
    assert h.predict_one("a", 0.0) == 400.0         # a zero request counts as unknown
    h.observe("a", NAN)                             # ignored
    h.observe("a", -5.0)                            # ignored
    assert h.predict_one("a", 600.0) == 400.0
    assert h.count_ == 3 and h.total_ == 900.0


def test_parameters_change_the_rule():
    h = UserHistoryRegressor(n_last=3, min_history=1, cap_at_request=False)
    h.observe(7, 100.0)
    assert h.predict_one(7, 50.0) == 100.0          # user ids are compared as strings
    for r in (200.0, 300.0, 400.0):
        h.observe("7", r)
    assert h.predict_one("7", 50.0) == 300.0        # mean of 200, 300, 400, not capped


@pytest.mark.parametrize("params, message", [
    ({"n_last": 0}, "n_last must be >= 1"),
    ({"min_history": 3}, "min_history must be in 1..n_last=2"),
    ({"reveal": "later"}, "reveal must be 'submit' or 'end'"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        UserHistoryRegressor(**params).fit({"user": ["a"], "submit": [0.0], "runtime": [1.0]})


# submit order is 2, 0, 3, 1, 4 (rows given out of order on purpose)
TABLE = {
    "user":     ["u1", "u2", "u1", "u1", "u1"],
    "submit":   [10.0, 30.0, 0.0, 20.0, 40.0],
    "req_time": [1000.0, 500.0, 800.0, 50.0, NAN],
    "runtime":  [200.0, 90.0, 100.0, 600.0, 300.0],
}


def test_offline_predictions_use_only_earlier_jobs():
    h = UserHistoryRegressor().fit({"user": [], "submit": [], "runtime": []})
    pred = h.predict(TABLE)
    # row 2 (t=0): no history -> request 800; row 0 (t=10): one run -> request 1000;
    # row 3 (t=20): mean(100, 200) = 150, capped at request 50; row 1 (t=30): u2 new -> 500;
    # row 4 (t=40): mean(200, 600) = 400, request unknown -> no cap
    np.testing.assert_array_equal(pred, [1000.0, 500.0, 800.0, 50.0, 400.0])
    assert h.count_ == 0  # predict does not change the fitted state


def test_reveal_end_waits_for_jobs_to_finish():
    h = UserHistoryRegressor(reveal="end").fit({"user": ["u1"] * 2, "submit": [-9.0, -8.0],
                                                "runtime": [1.0, 3.0]})
    pred = h.predict(TABLE)
    # ends: row 2 at 100, row 0 at 210, row 3 at 620, row 1 at 120: by t=40 none has
    # ended, so every job sees only the fitted history of u1 (mean 2, capped at requests)
    np.testing.assert_array_equal(pred, [2.0, 500.0, 2.0, 2.0, 2.0])
    late = {"user": ["u1", "u1", "u1"], "submit": [0.0, 5.0, 150.0],
            "req_time": [NAN, NAN, NAN], "runtime": [100.0, 40.0, 1.0]}
    # rows 0 and 1 see only the fitted history; row 2 (t=150) sees both earlier jobs,
    # ended at 100 and 45, so the fitted runs drop out: mean(40, 100) = 70
    np.testing.assert_array_equal(h.predict(late), [2.0, 2.0, 70.0])


def test_fit_state_feeds_later_predictions():
    h = UserHistoryRegressor().fit(pa.table({"user": ["u1", "u1"], "submit": [5.0, 1.0],
                                             "runtime": [30.0, 10.0]}))
    assert list(h.history_["u1"]) == [10.0, 30.0]  # replayed in submit order
    new = {"user": ["u1", "u9"], "submit": [100.0, 101.0], "req_time": [1000.0, NAN]}
    np.testing.assert_array_equal(h.predict(new), [20.0, 20.0])  # u9: global mean (10+30)/2


def test_predict_before_fit_raises():
    with pytest.raises(NotFittedError):
        UserHistoryRegressor().predict(TABLE)


def test_clone_keeps_params():
    h = UserHistoryRegressor(n_last=4, min_history=3, cap_at_request=False, reveal="end")
    assert clone(h).get_params() == h.get_params()


jobs_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 100), st.floats(1, 1e4),
              st.one_of(st.just(NAN), st.floats(1, 1e4))),
    min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(jobs_strategy, st.integers(1, 3))
def test_offline_equals_online_replay(rows, n_last):
    users, submit, runtime, req = (list(c) for c in zip(*rows, strict=True))
    table = {"user": users, "submit": submit, "runtime": runtime, "req_time": req}
    offline = UserHistoryRegressor(n_last=n_last, min_history=1).fit(
        {"user": [], "submit": [], "runtime": []}).predict(table)
    online = UserHistoryRegressor(n_last=n_last, min_history=1)
    expected = np.empty(len(rows))
    for i in np.argsort(submit, kind="stable"):
        expected[i] = online.predict_one(users[i], req[i])
        online.observe(users[i], runtime[i])
    np.testing.assert_array_equal(offline, expected)
    # a capped prediction never exceeds a known request
    known = ~np.isnan(np.asarray(req))
    assert np.all(offline[known] <= np.asarray(req)[known])
