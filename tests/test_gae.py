"""GAE against hand computations: truncation bootstraps, termination does not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.gae import compute_gae, step_discounts

# Four steps of one env: a termination after step 1, a truncation after step 3.
R = np.array([[1.0], [2.0], [3.0], [4.0]])
V = np.array([[0.5], [1.0], [1.5], [2.0]])
TERM = np.array([[False], [True], [False], [False]])
TRUNC = np.array([[False], [False], [False], [True]])
FINAL = np.array([[0.0], [0.0], [0.0], [10.0]])   # value of the truncated final observation
LAST = np.array([7.0])                            # unused: the last step ended an episode


def test_four_steps_one_truncation_one_termination():
    adv, ret = compute_gae(R, V, TERM, TRUNC, FINAL, LAST, gamma=0.9, lam=0.8)
    # t=3 truncated: 4 + 0.9*10 - 2 = 11
    # t=2: delta 3 + 0.9*2 - 1.5 = 3.3; A = 3.3 + 0.72*11 = 11.22
    # t=1 terminated: 2 - 1 = 1 (no bootstrap, recursion cut)
    # t=0: delta 1 + 0.9*1 - 0.5 = 1.4; A = 1.4 + 0.72*1 = 2.12
    assert adv[:, 0] == pytest.approx([2.12, 1.0, 11.22, 11.0])
    assert ret[:, 0] == pytest.approx([2.62, 2.0, 12.72, 13.0])


def test_last_value_bootstraps_an_unfinished_rollout():
    trunc = np.zeros_like(TRUNC)
    adv, _ = compute_gae(R, V, TERM, trunc, FINAL, LAST, gamma=0.9, lam=0.8)
    # t=3: 4 + 0.9*7 - 2 = 8.3
    assert adv[3, 0] == pytest.approx(8.3)


def test_treating_truncation_as_termination_would_differ():
    adv_ok, _ = compute_gae(R, V, TERM, TRUNC, FINAL, LAST, gamma=0.9, lam=0.8)
    adv_bad, _ = compute_gae(R, V, TERM | TRUNC, np.zeros_like(TRUNC), FINAL, LAST,
                             gamma=0.9, lam=0.8)
    assert adv_bad[3, 0] == pytest.approx(2.0) and adv_ok[3, 0] == pytest.approx(11.0)


def test_smdp_discount_by_elapsed_time():
    dt = np.array([[3600.0], [7200.0], [0.0], [1800.0]])
    adv, _ = compute_gae(R, V, TERM, TRUNC, FINAL, LAST, gamma=0.9, lam=1.0, dt=dt,
                         time_scale=3600.0)
    # discounts 0.9, 0.81, 1, 0.9**0.5
    a3 = 4 + 0.9 ** 0.5 * 10 - 2
    a2 = 3 + 1.0 * 2 - 1.5 + a3
    assert adv[:, 0] == pytest.approx([1 + 0.9 * 1.0 - 0.5 + 0.9 * 1.0, 1.0, a2, a3])
    assert step_discounts(0.9, dt, 3600.0)[:, 0] == pytest.approx([0.9, 0.81, 1.0, 0.9 ** 0.5])


def test_shape_errors():
    with pytest.raises(ValueError, match="values has shape"):
        compute_gae(R, V[:3], TERM, TRUNC, FINAL, LAST, gamma=0.9, lam=0.8)
    with pytest.raises(ValueError, match="last_values"):
        compute_gae(R, V, TERM, TRUNC, FINAL, np.zeros(2), gamma=0.9, lam=0.8)
    with pytest.raises(ValueError, match="non-negative"):
        step_discounts(0.9, np.array([-1.0]))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12), st.integers(1, 3), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_lambda_one_without_dones_is_the_discounted_return(t_len, n, gamma, seed):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(t_len, n))
    v = rng.normal(size=(t_len, n))
    last = rng.normal(size=n)
    z = np.zeros((t_len, n), bool)
    _, ret = compute_gae(r, v, z, z, np.zeros((t_len, n)), last, gamma=gamma, lam=1.0)
    expected = np.array([sum(gamma ** (k - t) * r[k] for k in range(t, t_len))
                         + gamma ** (t_len - t) * last for t in range(t_len)])
    assert np.allclose(ret, expected)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_lambda_zero_is_the_one_step_td_error(t_len, gamma, lam, seed):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(t_len, 1))
    v = rng.normal(size=(t_len, 1))
    last = rng.normal(size=1)
    term = rng.random((t_len, 1)) < 0.3
    trunc = (rng.random((t_len, 1)) < 0.3) & ~term
    final = rng.normal(size=(t_len, 1))
    adv, _ = compute_gae(r, v, term, trunc, final, last, gamma=gamma, lam=0.0)
    nxt = np.vstack([v[1:], last[None]])
    nxt = np.where(trunc, final, np.where(term, 0.0, nxt))
    assert np.allclose(adv, r + gamma * nxt - v)
