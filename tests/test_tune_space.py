"""``agents.tuning.space.SearchSpace``: the search starts at the heuristic's own schedule, and
each extra coordinate means what the tuner says it means."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from agents.tuning.space import DAY, SLACK_SCALE, SearchSpace, drain_of
from cosim.config import load_scenario
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.priority import (
    BACKLOG_FEATURES,
    FEATURES,
    USER_FEATURES,
    heuristic_weights,
    make_priority_policy,
    user_history,
)
from cosim.workloads.loading import load_workload

CORES = 256
# exact estimates: with rounded requests (Tsafrir, real traces) SAF breaks area ties by queue
# order, and its log-space point by the last bit of a sum of logs (a neighbour of SAF)
SCENARIO = load_scenario("scenarios/lublin256.yaml",
                         ["workload.jobs=500"])


def starts(policy, workload):
    env = simpy.Environment()
    sim = build(env, SCENARIO, policy, workload=workload, record=False)
    env.run(until=sim.finished)
    return [(j.start, j.mode) for j in sim.scheduler.jobs]


@pytest.mark.parametrize("user_features", [False, True])
@pytest.mark.parametrize("backfill_order", [False, True])
@pytest.mark.parametrize("name", ["fcfs", "sjf", "saf", "f1"])
def test_the_seed_point_is_the_heuristics_own_schedule(name, backfill_order, user_features):
    # The tuner starts CMA-ES at the best heuristic's point: that point must be the
    # heuristic's own EASY schedule, job for job. F1 needs its submit-time term
    # (without it the seed is F1's area term alone, a neighbour of F1).
    wl = load_workload(SCENARIO)
    if user_features:
        wl.features.update(user_history(wl))
    space = SearchSpace.of(CORES, submit_time=name == "f1", user_features=user_features,
                           backfill_order=backfill_order)
    assert len(space.features) == (len(FEATURES) - (name != "f1")
                                   - (0 if user_features else len(USER_FEATURES))
                                   - len(BACKLOG_FEATURES))
    x = space.seed(heuristic_weights(name, CORES))
    assert len(x) == len(space.features) * (2 if backfill_order else 1)
    ours = starts(make_priority_policy(space.spec(x, name)), wl)
    assert ours == starts(make_policy(f"{name}+easy"), wl)
    if name == "sjf":       # the comparison can fail: another order, another schedule
        assert ours != starts(make_policy("saf+easy"), wl)


def test_guard_drain_and_slack_coordinates_by_hand():
    space = SearchSpace.of(CORES, submit_time=True, user_features=False, backfill_order=True,
                           guarded=True, drained=True, relaxed=True)
    k = len(space.features)
    assert FEATURES.index("log_submit") in space.features
    assert space.guard_index == 2 * k
    x = np.concatenate([space.seed(heuristic_weights("saf", CORES)),
                        [math.log10(2.0)],            # guard: 2 days
                        [math.log10(30.0), 0.0],      # drain: D = 30, grace 1 day
                        [0.4]])                       # slack: 5 x 0.4
    w = space.spec(x, "p")
    assert w.promote_after == pytest.approx(2 * DAY)
    assert (w.drain_factor, w.drain_grace) == pytest.approx((30.0, DAY))
    assert w.slack == pytest.approx(SLACK_SCALE * 0.4) == pytest.approx(2.0)
    assert np.linalg.norm(w.weights) == pytest.approx(1.0)
    # a negative slack coordinate is textbook EASY; the drain past its threshold is off
    x[-1], x[-3] = -1.0, 6.0
    w = space.spec(x)
    assert w.slack == 0.0 and (w.drain_factor, w.drain_grace) == drain_of(6.0, 0.0) == (0, 0)


def test_fcfs_without_submit_time_seeds_oldest_first():
    space = SearchSpace.of(CORES, submit_time=False, user_features=False, backfill_order=False)
    x = space.seed(heuristic_weights("fcfs", CORES))
    assert x[space.features.index(FEATURES.index("log_wait"))] == pytest.approx(-1.0)
    assert np.count_nonzero(x) == 1


def test_with_the_backlog_products_the_seed_point_is_still_the_heuristics_schedule():
    # The backlog weights start at 0, so searching them moves nothing at the seed.
    wl = load_workload(SCENARIO)
    space = SearchSpace.of(CORES, submit_time=False, user_features=False, backlog=True)
    assert {FEATURES[i] for i in space.features} >= set(BACKLOG_FEATURES)
    x = space.seed(heuristic_weights("saf", CORES))
    assert starts(make_priority_policy(space.spec(x, "saf")), wl) == \
        starts(make_policy("saf+easy"), wl)
    x[space.features.index(FEATURES.index("backlog_log_est"))] = -2.0   # the test can fail
    assert starts(make_priority_policy(space.spec(x, "b")), wl) != starts(make_policy("saf+easy"), wl)
