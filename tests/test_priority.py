"""The parametric priority policy: classic orders are points of its space; learned:DIR runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.config import load_scenario
from cosim.errors import InputError
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.names import grammar_help, parse_policy
from cosim.policies.priority import (
    FEATURES,
    USER_FEATURES,
    PriorityWeights,
    heuristic_weights,
    make_priority_policy,
    user_history,
    user_history_applies,
)
from cosim.workloads.loading import load_workload

SCENARIO = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=600"])


def starts(policy, workload):
    env = simpy.Environment()
    sim = build(env, SCENARIO, policy, workload=workload, record=False)
    env.run(until=sim.finished)
    return [(j.start, j.mode) for j in sim.scheduler.jobs]


@pytest.fixture(scope="module")
def lublin():
    return load_workload(SCENARIO)


@pytest.mark.parametrize("name", ["sjf", "saf", "f1", "fcfs"])
def test_exact_instances_give_the_heuristics_schedule(name, lublin):
    # The same order, so the same EASY schedule, job for job (600 Lublin jobs).
    w = PriorityWeights(heuristic_weights(name, 256), 256, "easy")
    assert starts(make_priority_policy(w), lublin) == starts(make_policy(f"{name}+easy"), lublin)


def test_scaling_the_weights_keeps_the_policy(lublin):
    w = heuristic_weights("saf", 256)
    a = PriorityWeights(tuple(0.37 * x for x in w), 256)
    b = PriorityWeights(tuple(5.0 * x for x in w), 256)
    assert starts(make_priority_policy(a), lublin) == starts(make_priority_policy(b), lublin)


def test_a_wait_weight_makes_the_key_dynamic():
    w = [0.0] * len(FEATURES)
    w[FEATURES.index("wait_per_est")] = -1.0
    spec = PriorityWeights(tuple(w), 256)
    assert spec.dynamic and make_priority_policy(spec).static_key is None
    assert not PriorityWeights(heuristic_weights("sjf", 256), 256).dynamic


def test_learned_folder_runs_through_the_grammar(tmp_path, lublin):
    spec = PriorityWeights(heuristic_weights("saf", 256), 256, "easy")
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    parsed = parse_policy(f"learned:{tmp_path}")
    assert (parsed.kind, parsed.checkpoint, parsed.order) == ("learned", str(tmp_path),
                                                              f"learned:{tmp_path}")
    policy = make_policy(f"learned:{tmp_path}")
    assert starts(policy, lublin) == starts(make_policy("saf+easy"), lublin)
    (tmp_path / "policy.json").write_text(json.dumps({"kind": "heuristic", "name": "f1+easy"}))
    assert make_policy(f"learned:{tmp_path}").name == "f1+easy"
    assert "learned:DIR" in grammar_help()


def test_bad_learned_folders_are_clear(tmp_path):
    with pytest.raises(InputError, match="learned:DIR with DIR a folder holding policy.json"):
        make_policy(f"learned:{tmp_path / 'missing'}")
    (tmp_path / "policy.json").write_text('{"kind": "priority", "weights": [1, 2]}')
    with pytest.raises(InputError, match="features"):
        make_policy(f"learned:{tmp_path}")
    (tmp_path / "policy.json").write_text(json.dumps(
        {"kind": "priority", "features": list(FEATURES), "weights": [1, 2], "capacity": 8}))
    with pytest.raises(InputError, match=f"{len(FEATURES)} numbers"):
        make_policy(f"learned:{tmp_path}")
    (tmp_path / "policy.json").write_text('{"kind": "heuristic", "name": "nope+easy"}')
    with pytest.raises(InputError, match="saf\\+easy"):
        make_policy(f"learned:{tmp_path}")


@pytest.mark.parametrize(("field", "values"), [
    ("weights", [1e308] + [0.0] * (len(FEATURES) - 1)),
    ("weights", [-1e7] + [0.0] * (len(FEATURES) - 1)),
    ("backfill_weights", [0.0] * (len(FEATURES) - 1) + [1e308]),
    ("slack", 1e308),
])
def test_a_learned_folder_past_the_weight_or_slack_bound_is_refused(tmp_path, field, values):
    # 1e308 x a feature is infinite: every key ties and the order is arbitrary
    spec = PriorityWeights(heuristic_weights("saf", 256), 256, "easy")
    (tmp_path / "policy.json").write_text(json.dumps({**spec.as_dict(), field: values}))
    with pytest.raises(InputError) as err:
        make_policy(f"learned:{tmp_path}")
    bound = "+-1e+06" if "weights" in field else "from 0 to 1000"
    assert str(err.value).startswith(f"{tmp_path / 'policy.json'}: expected ")
    assert f"{field}: " in str(err.value) and bound in str(err.value)
    assert PriorityWeights((1e6,) + (0.0,) * (len(FEATURES) - 1), 256).weights[0] == 1e6


@pytest.mark.parametrize("capacity", ["0", "-5", "true", "256.7", "Infinity", "NaN", '"256"', "null"])
def test_a_learned_folder_with_a_bad_capacity_is_one_clear_error(capacity, tmp_path):
    # 0 used to divide by zero in the F1 term; -5, true and 256.7 ran as some other machine
    (tmp_path / "policy.json").write_text(
        f'{{"kind": "priority", "features": {json.dumps(list(FEATURES))}, '
        f'"weights": {json.dumps([1.0] + [0.0] * (len(FEATURES) - 1))}, "capacity": {capacity}}}')
    with pytest.raises(InputError, match="capacity: .*expected a whole number of schedulable "
                                         "units >= 1"):
        make_policy(f"learned:{tmp_path}")


# -- hand-checked keys and orders ------------------------------------------------------
def _unit_weights(name):
    w = [0.0] * len(FEATURES)
    w[FEATURES.index(name)] = 1.0
    return tuple(w)


def test_each_feature_by_hand():
    # One job: estimate 100 s, 4 cores, submitted at 1000 s, waited 9 s, N = 16.
    # Both the key (its wait-free terms cached per queue slot) and the uncached one.
    from types import SimpleNamespace

    import numpy as np

    from cosim.policies.priority import _dynamic_key
    from cosim.queue import JobQueue

    class Job(SimpleNamespace):
        __hash__ = object.__hash__
    q = JobQueue()
    q.add(Job(procs=4, mem=0.0, estimate=100.0, submit=1000.0, queue_slot=-1, index=0))
    backlog = np.log10(1 + 100 * 4 / 3600 / 16)      # the queue's core-hours over N
    expected = {"log_est": 2.0, "log_procs": np.log10(4), "log_wait": 1.0,
                "log_est_procs": 2 * np.log10(4), "wait_per_est": 0.09, "log_submit": 3.0,
                "f1_area": 2.0 * 4 / 16, "backlog_log_est": backlog * 2.0,
                "backlog_log_procs": backlog * np.log10(4), "backlog_log_wait": backlog}
    for name, value in expected.items():
        key = _dynamic_key(_unit_weights(name), 16)
        for got in (key(q, np.array([0]), 1009.0, None, None),
                    key.uncached(q, np.array([0]), 1009.0, None, None)):
            assert got[0] == pytest.approx(value), name


TINY = load_scenario("scenarios/lublin256.yaml", ["cluster.nodes=10"])


def tiny_starts(spec, submit, run, procs):
    from cosim.workloads.base import Workload
    w = Workload.from_columns(submit=submit, run=run, procs=procs)
    env = simpy.Environment()
    sim = build(env, TINY, make_priority_policy(spec), workload=w, record=False)
    env.run(until=sim.finished)
    return {int(j.id): j.start for j in sim.scheduler.jobs}


def test_a_priority_order_by_hand():
    # R fills the 10 cores until 100; A (run 1000), B (10) and C (100) take 10 cores
    # each and queue at 10, 20, 30. SJF (log estimate): B at 100, C at 110, A at 210.
    # Oldest first (-log wait): A at 100, B at 1100, C at 1110.
    job = dict(submit=[0, 10, 20, 30], run=[100, 1000, 10, 100], procs=[10] * 4)
    sjf = tiny_starts(PriorityWeights(_unit_weights("log_est"), 10), **job)
    assert sjf == {1: 0, 2: 210, 3: 100, 4: 110}
    oldest = tiny_starts(PriorityWeights(tuple(-x for x in _unit_weights("log_wait")), 10), **job)
    assert oldest == {1: 0, 2: 100, 3: 1100, 4: 1110}


def test_the_backlog_turns_the_order_by_hand():
    # Key log_est * (1 - B), B = log10(1 + queued core-hours / 10 cores): shortest first
    # on a short queue, longest first on a long one. R fills the 10 cores until 100; A
    # and B take the 10 cores and queue at 1 and 2. A 100 s, B 1000 s: B = log10(1 +
    # 11000 / 3600 / 10) = 0.12, so A at 100, B at 200. A 10^4 s, B 10^5 s: B = log10(1 +
    # 30.6) = 1.50 > 1, so B goes first at 100 and A at 100,100.
    w = [0.0] * len(FEATURES)
    w[FEATURES.index("log_est")], w[FEATURES.index("backlog_log_est")] = 1.0, -1.0
    spec = PriorityWeights(tuple(w), 10)
    assert spec.dynamic
    short = tiny_starts(spec, submit=[0, 1, 2], run=[100, 100, 1000], procs=[10] * 3)
    assert short == {1: 0, 2: 100, 3: 200}
    long_ = tiny_starts(spec, submit=[0, 1, 2], run=[100, 10_000, 100_000], procs=[10] * 3)
    assert long_ == {1: 0, 2: 100_100, 3: 100}
    # Without the backlog term the long queue goes shortest first too.
    w[FEATURES.index("backlog_log_est")] = 0.0
    assert tiny_starts(PriorityWeights(tuple(w), 10), submit=[0, 1, 2],
                       run=[100, 10_000, 100_000], procs=[10] * 3) == {1: 0, 2: 100, 3: 10_100}


def test_the_backfill_order_is_honoured():
    # R (8 of 10 cores) runs until 100; H (10 cores) queues at 1 and is the head
    # (largest first), reserved at 100 with no extra cores. X (2 cores, 90 s) and
    # Y (2 cores, 30 s) arrive together at 2: either may backfill (both end by
    # 100), not both. Backfilling shortest first starts Y (then X, ending after
    # 100, waits for H); longest first, or the queue order (X's slot first),
    # starts X. H starts at 100 either way (the reservation holds).
    job = dict(submit=[0, 1, 2, 2], run=[100, 50, 90, 30], procs=[8, 10, 2, 2])
    largest = tuple(-x for x in _unit_weights("log_procs"))
    short = tiny_starts(PriorityWeights(largest, 10, backfill_weights=_unit_weights("log_est")),
                        **job)
    assert short == {1: 0, 2: 100, 3: 150, 4: 2}
    long_ = tiny_starts(PriorityWeights(largest, 10, backfill_weights=tuple(
        -x for x in _unit_weights("log_est"))), **job)
    assert long_ == {1: 0, 2: 100, 3: 2, 4: 150}
    assert tiny_starts(PriorityWeights(largest, 10), **job) == long_


def test_backfill_weights_same_as_the_queue_order_keep_the_schedule(lublin):
    w = heuristic_weights("f1", 256)
    two = make_priority_policy(PriorityWeights(w, 256, backfill_weights=w))
    assert starts(two, lublin) == starts(make_policy("f1+easy"), lublin)


def test_backfill_weights_round_trip_and_bad_values(tmp_path, lublin):
    spec = PriorityWeights(heuristic_weights("saf", 256), 256,
                           backfill_weights=heuristic_weights("sjf", 256))
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    assert starts(make_policy(f"learned:{tmp_path}"), lublin) == \
        starts(make_priority_policy(spec), lublin)
    with pytest.raises(ValueError, match="only with easy"):
        PriorityWeights(heuristic_weights("saf", 256), 256, "conservative",
                        backfill_weights=heuristic_weights("sjf", 256))
    bad = dict(spec.as_dict(), backfill_weights=[1, 2])
    (tmp_path / "policy.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="backfill_weights"):
        make_policy(f"learned:{tmp_path}")


# -- user-history features (Tsafrir, Etsion and Feitelson, TPDS 2007) -------------------
def _table():
    from cosim.workloads.base import Workload
    # user 1: job 0 ends at 100; job 2 ends at 500; job 3 waited 400 (recorded), ends at 660.
    # user 2: job 1 ends at 60.
    return Workload.from_columns(
        submit=[0, 10, 200, 250, 600, 700], run=[100, 50, 300, 10, 30, 40],
        req_time=[1000, 500, 400, 20, 3000, 30], procs=[1] * 6, user=[1, 2, 1, 1, 1, 2],
        features={"wait": np.array([0.0, 0.0, 0.0, 400.0, 0.0, -1.0])})


def test_user_history_by_hand():
    got = user_history(_table())
    pred = [1000,          # no history: the request
            500,           # user 2's first job: the request
            100,           # job 0 (100 s) done at 100 < 200
            20,            # job 2 still running at 250 (ends 500): job 0 only, capped at 20
            200,           # jobs 0 and 2 done; job 3 ends at 660 (its recorded wait) > 600
            30]            # job 1 (50 s), capped at the request 30
    acc = [1, 1, 0.1, 0.1, (0.1 + 0.75) / 2, 0.1]
    assert got["log_user_pred"] == pytest.approx(np.log10(pred))
    assert got["log_user_accuracy"] == pytest.approx(np.log10(acc))


def test_user_history_applies_where_users_are_named_and_requests_loose():
    from cosim.workloads.base import Workload

    # The table: every job names its user; request / run is 10, 10, 1.33, 2, 100 and
    # 0.75: 5 of 6 jobs request more than 1.25x their run time.
    on, why = user_history_applies(_table())
    assert on and why == "100% of jobs name their user, 83% request more than 1.25x their run time"
    exact = Workload.from_columns(submit=[0, 1, 2, 3], run=[10, 20, 30, 40],
                                  req_time=[10, 20, 30, 40], procs=[1] * 4, user=[1, 2, 1, 2])
    assert user_history_applies(exact) == (
        False, "100% of jobs name their user, 0% request more than 1.25x their run time")
    anonymous = Workload.from_columns(submit=[0, 1, 2, 3], run=[10, 20, 30, 40],
                                      req_time=[100, 200, 300, 400], procs=[1] * 4)
    assert not user_history_applies(anonymous)[0]
    # Exactly half on both counts is enough.
    half = Workload.from_columns(submit=[0, 1, 2, 3], run=[10, 20, 30, 40],
                                 req_time=[100, 200, 30, 40], procs=[1] * 4, user=[1, 1, -1, -1])
    assert user_history_applies(half)[0]


def test_user_history_fallbacks_and_strict_completion():
    from cosim.workloads.base import Workload
    # No recorded wait: a job completes at submit + run. Job 0 ends at 100, exactly
    # job 1's submit: not before it, not used. Unknown users (-1) get the request.
    w = Workload.from_columns(submit=[0, 100, 150, 160], run=[100, 10, 20, 30],
                              req_time=[200, 50, 60, 70], procs=[1] * 4, user=[3, 3, 3, -1])
    got = user_history(w)
    assert got["log_user_pred"] == pytest.approx(np.log10([200, 50, 55, 70]))
    assert got["log_user_accuracy"] == pytest.approx(np.log10([1, 1, (0.5 + 0.2) / 2, 1]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_user_history_is_causal(data):
    from cosim.workloads.base import Workload
    n = data.draw(st.integers(2, 12))
    gaps = data.draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    submit = np.cumsum(gaps).astype(float)

    def rows(k):
        return dict(run=data.draw(st.lists(st.integers(0, 120), min_size=k, max_size=k)),
                    wait=data.draw(st.lists(st.integers(-1, 80), min_size=k, max_size=k)),
                    req=data.draw(st.lists(st.integers(1, 150), min_size=k, max_size=k)),
                    user=data.draw(st.lists(st.integers(-1, 2), min_size=k, max_size=k)))
    a = rows(n)
    k = data.draw(st.integers(1, n - 1))       # jobs k.. change, submit times kept
    b = {c: v[:k] + rows(n - k)[c] for c, v in a.items()}

    def feats(r):
        w = Workload.from_columns(submit=submit, run=r["run"], req_time=r["req"],
                                  procs=[1] * n, user=r["user"],
                                  features={"wait": np.array(r["wait"], dtype=float)})
        return user_history(w)
    fa, fb = feats(a), feats(b)
    for name in USER_FEATURES:
        assert np.array_equal(fa[name][:k], fb[name][:k]), name


def test_user_feature_orders_the_queue_by_hand():
    from cosim.workloads.base import Workload
    # 10 cores. R (user 9) fills them until 100. P (user 1) has a 1 s history job
    # (H, done at 1); A (user 1, request 1000) and B (user 2, request 500) queue at
    # 10 and 20 with 10 cores each. By request (SJF) B goes first; by user history
    # A's prediction is 1 s (its user's last job), B's its request: A first.
    w = Workload.from_columns(submit=[0, 0, 10, 20], run=[1, 100, 1000, 500],
                              req_time=[1, 100, 1000, 500], procs=[1, 10, 10, 10],
                              user=[1, 9, 1, 2])

    def run_with(weights):
        env = simpy.Environment()
        sim = build(env, TINY, make_priority_policy(PriorityWeights(weights, 10)), workload=w,
                    record=False)
        env.run(until=sim.finished)
        return {int(j.id): j.start for j in sim.scheduler.jobs}
    assert run_with(_unit_weights("log_est")) == {1: 0, 2: 1, 3: 601, 4: 101}
    assert run_with(_unit_weights("log_user_pred")) == {1: 0, 2: 1, 3: 101, 4: 1101}
    # the same in the dynamic (vectorized) path: a zero-weight wait term makes it dynamic
    dyn = tuple(x + (1e-12 if f == "wait_per_est" else 0.0)
                for x, f in zip(_unit_weights("log_user_pred"), FEATURES))
    assert run_with(dyn) == {1: 0, 2: 1, 3: 101, 4: 1101}


def test_user_features_round_trip_through_learned_dir(tmp_path):
    from cosim.workloads.base import Workload
    rng = np.random.default_rng(3)
    n = 400
    w = Workload.from_columns(submit=np.cumsum(rng.exponential(20, n)),
                              run=rng.lognormal(5, 1.5, n).clip(1, 20_000),
                              req_time=np.full(n, 30_000.0), procs=rng.integers(1, 64, n),
                              user=rng.integers(-1, 8, n))
    weights = list(heuristic_weights("saf", 256))
    weights[FEATURES.index("log_user_pred")] = 0.8
    weights[FEATURES.index("log_user_accuracy")] = 0.3
    spec = PriorityWeights(tuple(weights), 256, backfill_weights=_unit_weights("log_user_pred"))
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    learned = starts(make_policy(f"learned:{tmp_path}"), w)
    assert learned == starts(make_priority_policy(spec), w)
    assert learned != starts(make_policy("saf+easy"), w)   # the user terms matter here
    # A file an earlier version wrote (7 features) still loads: the user weights are 0.
    old = dict(PriorityWeights(heuristic_weights("saf", 256), 256).as_dict())
    old["features"], old["weights"] = old["features"][:7], old["weights"][:7]
    (tmp_path / "policy.json").write_text(json.dumps(old))
    assert starts(make_policy(f"learned:{tmp_path}"), w) == starts(make_policy("saf+easy"), w)


# -- relaxed EASY (Ward, Mahood and West, JSSPP 2002) -------------------------------------
def test_relaxed_easy_by_hand():
    # R (8 of 10 cores) runs until 100; H (10 cores, 50 s) queues at 1 and is the head
    # (largest first), its shadow time 100 with no extra cores. X (2 cores, 120 s)
    # arrives at 2 and would end at 122. EASY: X waits for H (H at 100, X at 150).
    # Slack 1 promises H 100 + 1 x 50 = 150: X ends by then and starts at 2, H at 122.
    # Slack 0.2 promises 110: X would end after it and waits, as under EASY.
    job = dict(submit=[0, 1, 2], run=[100, 50, 120], procs=[8, 10, 2])
    largest = tuple(-x for x in _unit_weights("log_procs"))
    assert tiny_starts(PriorityWeights(largest, 10), **job) == {1: 0, 2: 100, 3: 150}
    assert tiny_starts(PriorityWeights(largest, 10, slack=1.0), **job) == {1: 0, 2: 122, 3: 2}
    assert tiny_starts(PriorityWeights(largest, 10, slack=0.2), **job) == {1: 0, 2: 100, 3: 150}


def test_relaxed_easy_with_no_slack_is_easy_and_round_trips(tmp_path, lublin):
    w = heuristic_weights("saf", 256)
    assert starts(make_priority_policy(PriorityWeights(w, 256, slack=0.0)), lublin) == \
        starts(make_policy("saf+easy"), lublin)
    spec = PriorityWeights(w, 256, slack=2.5, backfill_weights=heuristic_weights("sjf", 256))
    assert spec.as_dict()["slack"] == 2.5 and "slack" not in PriorityWeights(w, 256).as_dict()
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    relaxed = starts(make_policy(f"learned:{tmp_path}"), lublin)
    assert relaxed == starts(make_priority_policy(spec), lublin)
    assert relaxed != starts(make_priority_policy(PriorityWeights(
        w, 256, backfill_weights=heuristic_weights("sjf", 256))), lublin)
    for bad in (dict(slack=-1.0), dict(slack=math.inf), dict(slack=1.0, backfill="greedy")):
        with pytest.raises(ValueError, match="slack"):
            PriorityWeights(w, 256, **bad)
    (tmp_path / "policy.json").write_text(json.dumps(dict(spec.as_dict(), slack=-2)))
    with pytest.raises(InputError, match="slack"):
        make_policy(f"learned:{tmp_path}")


@st.composite
def relaxed_cases(draw):
    cores = draw(st.integers(1, 12))
    n = draw(st.integers(1, 18))
    submit = sorted(draw(st.lists(st.integers(0, 60), min_size=n, max_size=n)))
    run = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    procs = draw(st.lists(st.integers(1, cores), min_size=n, max_size=n))
    over = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    exact = draw(st.booleans())
    req = [max(1, r + (0 if exact else d)) for r, d in zip(run, over)]
    order = draw(st.sampled_from(["fcfs", "saf", "sjf"]))
    slack = draw(st.floats(0.0, 4.0))
    guard = draw(st.sampled_from([0.0, 5.0, 20.0]))
    drain = draw(st.sampled_from([(0.0, 0.0), (0.1, 60.0), (0.5, 30.0), (2.0, 1000.0)]))
    return cores, submit, run, procs, req, order, slack, guard, drain


@settings(max_examples=150, deadline=None)
@given(case=relaxed_cases())
def test_relaxed_easy_keeps_every_promise(case):
    # (With or without the starvation guard, which only reorders the queue, and the
    # drain-aware rule, which makes no promise rather than break one.) Every job that backfills around the head ends by the head's relaxed promise
    # or uses extra cores, so the head starts by it: no promise is broken, and
    # under FCFS (the head only changes when it starts) every job starts by the
    # first promise it was given. No oversubscription; every job runs once.
    from cosim.config import scenario_from_dict
    from cosim.workloads.base import Workload
    cores, submit, run, procs, req, order, slack, guard, drain = case
    w = Workload.from_columns(submit=submit, run=run, procs=procs, req_time=req)
    sc = scenario_from_dict({"cluster": {"nodes": 1, "cores_per_node": cores},
                             "workload": {"kind": "swf", "path": "unused"}})
    spec = PriorityWeights(heuristic_weights(order, cores), cores, slack=slack,
                           promote_after=guard, drain_factor=drain[0], drain_grace=drain[1])
    env = simpy.Environment()
    sim = build(env, sc, make_priority_policy(spec), workload=w)
    env.run(until=sim.finished)
    jobs = sim.scheduler.jobs
    assert sim.scheduler.counters.reservations_broken == 0
    assert all(j.outcome == "completed" and j.end == pytest.approx(j.start + j.run)
               for j in jobs)
    for t in {j.start for j in jobs}:
        assert sum(j.procs for j in jobs if j.start <= t < j.end) <= cores
    if order == "fcfs":
        for j in jobs:
            if j.reservation == j.reservation:
                assert j.start <= j.reservation + 1e-9


# -- the starvation guard -------------------------------------------------------------------
def test_starvation_guard_by_hand():
    # R fills the 10 cores until 100. W1 (run 1000) and W2 (500) queue at 1 and 2, S1-S3
    # (100 each) at 3-5; every job takes the 10 cores. SJF: S1 100, S2 200, S3 300, W2
    # 400, W1 900. With the guard at 250 s: at the passes of 100 and 200 the W jobs have
    # waited less, so S1 and S2 go; at 300 both have waited >= 250 and go first, oldest
    # first (W1 300, W2 1300), then S3 at 1800.
    job = dict(submit=[0, 1, 2, 3, 4, 5], run=[100, 1000, 500, 100, 100, 100], procs=[10] * 6)
    sjf = _unit_weights("log_est")
    assert tiny_starts(PriorityWeights(sjf, 10), **job) == \
        {1: 0, 2: 900, 3: 400, 4: 100, 5: 200, 6: 300}
    assert tiny_starts(PriorityWeights(sjf, 10, promote_after=250.0), **job) == \
        {1: 0, 2: 300, 3: 1300, 4: 100, 5: 200, 6: 1800}
    # A guard longer than any wait changes nothing.
    assert tiny_starts(PriorityWeights(sjf, 10, promote_after=5000.0), **job) == \
        {1: 0, 2: 900, 3: 400, 4: 100, 5: 200, 6: 300}


def test_starvation_guard_round_trips_and_bad_values(tmp_path, lublin):
    w = heuristic_weights("saf", 256)
    plain = PriorityWeights(w, 256)
    assert not plain.dynamic and "promote_after" not in plain.as_dict()
    spec = PriorityWeights(w, 256, promote_after=3600.0)
    assert spec.dynamic and spec.as_dict()["promote_after"] == 3600.0
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    guarded = starts(make_policy(f"learned:{tmp_path}"), lublin)
    assert guarded == starts(make_priority_policy(spec), lublin)
    assert guarded != starts(make_policy("saf+easy"), lublin)    # 600 Lublin jobs wait > 1 h
    for bad in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="promote_after"):
            PriorityWeights(w, 256, promote_after=bad)
    (tmp_path / "policy.json").write_text(json.dumps(dict(spec.as_dict(), promote_after=-5)))
    with pytest.raises(InputError, match="promote_after"):
        make_policy(f"learned:{tmp_path}")


# -- drain-aware EASY ------------------------------------------------------------------------
def test_drain_aware_easy_by_hand():
    # R (8 of 10 cores) runs until 1000; H (10 cores, 10 s) queues at 1 and is the head
    # (largest first), its shadow time 1000: 999 s away, 99.9x its estimate. S (2 cores,
    # 2000 s) arrives at 2 and would end at 2002, past the shadow time, with no extra
    # cores. EASY: H at 1000, S at 1010.
    job = dict(submit=[0, 1, 2], run=[1000, 10, 2000], procs=[8, 10, 2])
    largest = tuple(-x for x in _unit_weights("log_procs"))
    assert tiny_starts(PriorityWeights(largest, 10), **job) == {1: 0, 2: 1000, 3: 1010}
    # D = 10, G = 500 s: H gets no reservation (999 > 10 x 10), so S starts at 2. At 1000
    # R ends; H has waited 999 s, past its grace, and is reserved at S's end: 2002.
    drained = PriorityWeights(largest, 10, drain_factor=10.0, drain_grace=500.0)
    assert tiny_starts(drained, **job) == {1: 0, 2: 2002, 3: 2}
    # D = 200: 999 s is less than 200 x 10 s away, so H is reserved as under EASY; and
    # a grace of 0 s reserves for every head at once.
    for near in (dict(drain_factor=200.0, drain_grace=500.0),
                 dict(drain_factor=10.0, drain_grace=0.0)):
        assert tiny_starts(PriorityWeights(largest, 10, **near), **job) == \
            {1: 0, 2: 1000, 3: 1010}


def test_drain_aware_easy_round_trips_and_bad_values(tmp_path, lublin):
    w = heuristic_weights("saf", 256)
    assert "drain_factor" not in PriorityWeights(w, 256).as_dict()
    spec = PriorityWeights(w, 256, drain_factor=3.0, drain_grace=86400.0)
    assert (spec.as_dict()["drain_factor"], spec.as_dict()["drain_grace"]) == (3.0, 86400.0)
    (tmp_path / "policy.json").write_text(json.dumps(spec.as_dict()))
    drained = starts(make_policy(f"learned:{tmp_path}"), lublin)
    assert drained == starts(make_priority_policy(spec), lublin)
    assert drained != starts(make_policy("saf+easy"), lublin)
    for bad in (dict(drain_factor=-1.0), dict(drain_factor=1.0, drain_grace=math.inf),
                dict(drain_factor=1.0, drain_grace=60.0, backfill="greedy")):
        with pytest.raises(ValueError, match="drain_factor, drain_grace"):
            PriorityWeights(w, 256, **bad)
    (tmp_path / "policy.json").write_text(json.dumps(dict(spec.as_dict(), drain_grace=-5)))
    with pytest.raises(InputError, match="drain_grace"):
        make_policy(f"learned:{tmp_path}")


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["add", "add", "add", "remove", "estimate"]),
                              st.integers(0, 10**6)), min_size=1, max_size=300),
       weights=st.lists(st.floats(-1, 1), min_size=len(FEATURES), max_size=len(FEATURES)),
       bound=st.booleans(), promote=st.sampled_from([0.0, 5_000.0]))
def test_the_cached_dynamic_key_equals_the_uncached_one_to_the_bit(ops, weights, bound,
                                                                   promote):
    # The wait-free terms are cached per queue slot; keys must not move by one ulp
    # through adds, removes (with compaction and reset), estimates set while queued,
    # jobs outside the bound workload and the backlog terms.
    from cosim.policies.priority import _dynamic_key, _UserColumns
    from cosim.queue import JobQueue

    class Job:          # hashed by identity, as the engine's jobs
        def __init__(self, **kw):
            self.__dict__.update(kw)

    rng = np.random.default_rng(ops[0][1])
    users = _UserColumns()
    if bound:
        users._pred_np = rng.normal(3, 1, 400)
        users._acc_np = -rng.random(400)
    key = _dynamic_key(tuple(weights), 512, users, promote_after=promote)
    q, queued, now = JobQueue(capacity=8), [], 0.0
    for step, (op, x) in enumerate(ops):
        now += x % 997
        if op == "add" or not queued:
            job = Job(procs=1 + x % 64, mem=0.0, estimate=float(1 + x % 90_000),
                      submit=now - x % 500, queue_slot=-1,
                      index=x % 420 - 10)      # some rows outside the workload
            q.add(job)
            queued.append(job)
        elif op == "remove":
            q.remove(queued.pop(x % len(queued)))
        else:
            job = queued[x % len(queued)]
            job.estimate = float(1 + (x * 7) % 50_000)
            q.set_estimate(job)
        if queued and step % 3 == 0:
            slots = q.slots()
            got = key(q, slots, now, None, None)
            want = key.uncached(q, slots, now, None, None)
            assert got.tobytes() == want.tobytes()
