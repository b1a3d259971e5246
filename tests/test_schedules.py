"""Hand-checked schedules: start times worked out on paper for each policy.

Each workload is small enough to follow by hand; the expected start times in
the comments were derived before the code ran.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.base import Workload


def simulate(rows, cores, policy, **cluster):
    """rows: (submit, procs, run[, estimate]) -> {job_id: (start, mode)}."""
    submit = [r[0] for r in rows]
    procs = [r[1] for r in rows]
    run = [r[2] for r in rows]
    req = [r[3] if len(r) > 3 else r[2] for r in rows]
    w = Workload.from_columns(submit=submit, run=run, procs=procs, req_time=req)
    sc = scenario_from_dict({"cluster": {"nodes": cores, **cluster},
                             "workload": {"kind": "swf", "path": "unused"}})
    env = simpy.Environment()
    sim = build(env, sc, make_policy(policy), workload=w)
    env.run(until=sim.finished)
    return {j.id: (j.start, j.mode) for j in sim.scheduler.jobs}, sim


# A: 10 cores. J2 (8 cores) waits for J1; its shadow time is 10 with 2 extra
# cores. J3 (2 cores, 20 s) ends after the shadow time but fits in the extra
# cores, so textbook EASY backfills it at 2; J4 (2 cores, 3 s) ends before the
# shadow time and backfills at 3; J5 has nowhere to go until J2 ends at 15.
WORKLOAD_A = [(0, 6, 10), (1, 8, 5), (2, 2, 20), (3, 2, 3), (4, 1, 100)]


@pytest.mark.parametrize("policy, starts", [
    # Strict FCFS: at 10 J2 starts and J3, next in order, fits beside it.
    ("fcfs", {1: 0, 2: 10, 3: 10, 4: 15, 5: 15}),
    ("fcfs+easy", {1: 0, 2: 10, 3: 2, 4: 3, 5: 15}),
    ("fcfs+conservative", {1: 0, 2: 10, 3: 2, 4: 3, 5: 15}),
    # Greedy protects nobody: J5 takes a core at 6, so J2 waits for J3 (22).
    ("fcfs+greedy", {1: 0, 2: 22, 3: 2, 4: 3, 5: 6}),
])
def test_easy_backfills_onto_extra_processors(policy, starts):
    got, sim = simulate(WORKLOAD_A, 10, policy)
    assert {k: v[0] for k, v in got.items()} == starts
    if policy == "fcfs+easy":
        assert got[3][1] == "backfilled" and got[4][1] == "backfilled"
        assert got[2][1] == "reserved" and got[1][1] == "ready"
        reasons = {j.id: j.reason for j in sim.scheduler.jobs}
        assert reasons[3] == "uses extra cores"
        assert reasons[4] == "ends before shadow time"
    assert sim.scheduler.counters.reservations_broken == 0


def test_shadow_only_variant_would_not_backfill_job3():
    # The stricter "ends before the shadow time" rule would refuse J3: its end
    # (22) is after the shadow time (10). Our EASY starts it because it uses
    # only the extra cores; without them (9 cores for J2) it must wait.
    rows = [(0, 6, 10), (1, 9, 5), (2, 2, 20)]
    got, _ = simulate(rows, 10, "fcfs+easy")
    assert got[3][0] == 15   # J2 holds 9 of 10 cores from 10 to 15; J3 starts when J2 ends


# B: 10 cores. EASY protects only the head (J2): J4 (2 cores, 50 s) uses the
# extra cores at J2's shadow time, starts at 3 and delays J3 (10 cores) until
# J4 ends at 53. Conservative gives J3 a reservation at 20 when it arrives, so
# J4 may not start before 30.
WORKLOAD_B = [(0, 8, 10), (1, 4, 10), (2, 10, 10), (3, 2, 50)]


@pytest.mark.parametrize("policy, starts", [
    ("fcfs", {1: 0, 2: 10, 3: 20, 4: 30}),
    ("fcfs+easy", {1: 0, 2: 10, 3: 53, 4: 3}),
    ("fcfs+conservative", {1: 0, 2: 10, 3: 20, 4: 30}),
])
def test_conservative_and_easy_differ(policy, starts):
    got, sim = simulate(WORKLOAD_B, 10, policy)
    assert {k: v[0] for k, v in got.items()} == starts
    assert sim.scheduler.counters.reservations_broken == 0


# C: 4 cores, priorities. J1 (3 cores) runs 0-10. Queue at 10: J2 (4 cores,
# est 5, submitted 1), J3 (1 core, est 3, submitted 2), J4 (2 cores, est 20,
# submitted 3).
#  FCFS: J2 10-15, then J3 and J4 at 15.
#  SJF (no backfill): J3 is shortest and starts at 2 (fits beside J1); at 10
#    J2 (est 5) before J4 (est 20): J2 10-15, J4 at 15.
#  LCFS: at 3 J4 is newest but does not fit (free 0 after J3? no: J3 is not
#    started under LCFS at 2 because at 2 J3 is newest and fits -> starts 2).
#    At 10: J4 newest, fits (free 3) -> 10; then J2 (4) waits for J4 and J3:
#    J3 ends 5, J4 ends 30 -> J2 at 30.
#  SAF (area): J3 area 3, J2 20, J4 40 -> like SJF here.
WORKLOAD_C = [(0, 3, 10), (1, 4, 5), (2, 1, 3), (3, 2, 20)]


@pytest.mark.parametrize("policy, starts", [
    ("fcfs", {1: 0, 2: 10, 3: 15, 4: 15}),
    ("sjf", {1: 0, 2: 10, 3: 2, 4: 15}),
    ("saf", {1: 0, 2: 10, 3: 2, 4: 15}),
    ("lcfs", {1: 0, 2: 30, 3: 2, 4: 10}),
    ("sjf+easy", {1: 0, 2: 10, 3: 2, 4: 15}),
    ("largest", {1: 0, 2: 10, 3: 2, 4: 15}),
])
def test_priority_orders(policy, starts):
    got, _ = simulate(WORKLOAD_C, 4, policy)
    assert {k: v[0] for k, v in got.items()} == starts


def test_memory_is_a_second_resource():
    # 8 cores, 8 GB pooled (one node). J1 takes 2 cores but 6 GB; J2 (2 cores,
    # 4 GB) must wait for memory although cores are free; J3 (1 core, 1 GB)
    # fits both and starts at once under greedy.
    rows = [(0, 2, 10), (1, 2, 10), (2, 1, 5)]
    submit = [r[0] for r in rows]
    w = Workload.from_columns(submit=submit, run=[r[2] for r in rows],
                              procs=[r[1] for r in rows], mem=[6.0, 4.0, 1.0])
    sc = scenario_from_dict({"cluster": {"nodes": 1, "cores_per_node": 8, "memory_per_node": 8},
                             "workload": {"kind": "mao"}})
    env = simpy.Environment()
    sim = build(env, sc, make_policy("fcfs+greedy"), workload=w)
    env.run(until=sim.finished)
    assert [j.start for j in sim.scheduler.jobs] == [0.0, 10.0, 2.0]


def test_jobs_that_never_fit_are_rejected_with_a_reason():
    got, sim = simulate([(0, 20, 5), (1, 2, 5)], 10, "fcfs+easy")
    jobs = {j.id: j for j in sim.scheduler.jobs}
    assert jobs[1].outcome == "rejected" and "needs 20 cores, cluster has 10" in jobs[1].reason
    assert jobs[2].start == 1.0 and jobs[2].outcome == "completed"


# D: 10 cores, J1 holds them all until 10; J2 (6 cores), J3 and J4 (5 cores
# each) queue behind it. At 10 the waits are 9, 8, 7 s (max 9), so the
# knapsack values (DRAS eq. 1, w = 1/3) are J2 = 1/3 + 2/3*0.6 = 0.733,
# J3 = 8/27 + 1/3 = 0.630, J4 = 7/27 + 1/3 = 0.593: J3 + J4 (1.222, 10 cores)
# beat J2 alone, so they start at 10 and J2 at 15. FCFS starts J2 first.
WORKLOAD_D = [(0, 10, 10), (1, 6, 5), (2, 5, 5), (3, 5, 5)]


@pytest.mark.parametrize("policy, starts", [
    ("knapsack", {1: 0, 2: 15, 3: 10, 4: 10}),
    ("fcfs+easy", {1: 0, 2: 10, 3: 15, 4: 15}),
])
def test_knapsack_fills_the_machine_with_the_best_set(policy, starts):
    got, _ = simulate(WORKLOAD_D, 10, policy)
    assert {k: v[0] for k, v in got.items()} == starts


def test_knapsack_dp_matches_brute_force():
    from itertools import combinations

    from cosim.policies import knapsack

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        weights = [int(w) for w in rng.choice([1, 2, 3, 4, 6, 8, 12, 16], size=n)]
        values = [float(v) for v in rng.random(n)]
        cap = int(rng.integers(0, 30))
        chosen = knapsack(weights, values, cap)
        assert sum(weights[i] for i in chosen) <= cap
        best = max(sum(values[i] for i in c) for r in range(n + 1)
                    for c in combinations(range(n), r) if sum(weights[i] for i in c) <= cap)
        assert sum(values[i] for i in chosen) == pytest.approx(best)


def test_knapsack_takes_no_backfilling_suffix():
    from cosim.errors import ScenarioError

    with pytest.raises(ScenarioError, match="knapsack alone"):
        make_policy("knapsack+easy")


# E: 4 cores, conservative backfilling ordered by the heuristic. J1 (4 cores,
# estimate 10) really ends at 2. J2 (3 cores, 10 s) arrives at 1 and is promised
# 10; J3 (3 cores, 4 s) arrives at 1.5 and is promised 20 (after J2). When J1
# ends early the plan is compressed in priority order, each job taking the
# earliest start the others' reservations leave it:
#  FCFS (and largest: a tie, kept in arrival order): J2 first -> 2-12, then J3 -> 12.
#  SJF, SAF, LCFS: J3 first -> 2-6 (J2's reservation at 10 is not in its way),
#    then J2 -> 6, earlier than its promised 10.
# Nobody starts after a start it was promised.
WORKLOAD_E = [(0, 4, 2, 10), (1, 3, 10), (1.5, 3, 4)]


@pytest.mark.parametrize("policy, starts", [
    ("fcfs+conservative", {1: 0, 2: 2, 3: 12}),
    ("largest+conservative", {1: 0, 2: 2, 3: 12}),
    ("sjf+conservative", {1: 0, 2: 6, 3: 2}),
    ("saf+conservative", {1: 0, 2: 6, 3: 2}),
    ("lcfs+conservative", {1: 0, 2: 6, 3: 2}),
])
def test_conservative_compresses_in_priority_order(policy, starts):
    got, sim = simulate(WORKLOAD_E, 4, policy)
    assert {k: v[0] for k, v in got.items()} == starts
    jobs = {j.id: j for j in sim.scheduler.jobs}
    assert (jobs[2].reservation, jobs[3].reservation) == (10.0, 20.0)   # the first promises
    assert sim.scheduler.counters.reservations_broken == 0
    assert got[2][1] == got[3][1] == "reserved"


def test_conservative_heuristics_give_different_schedules():
    """With reservations made in arrival order and never revised, every heuristic
    gave the FCFS schedule. Now jobs that end before their estimate open room
    that the heuristic hands out. (With exact estimates nothing ends early and
    conservative backfilling is the same for every order, by its guarantee.)"""
    from cosim.config import load_scenario
    from cosim.workloads.loading import load_workload

    sc = load_scenario("scenarios/lublin256.yaml", ["workload.jobs=400",
                                                    "workload.estimates.model=tsafrir"])
    w = load_workload(sc)
    schedules = {}
    for h in ("fcfs", "sjf", "lcfs", "saf"):
        env = simpy.Environment()
        sim = build(env, sc, make_policy(f"{h}+conservative"), workload=w)
        env.run(until=sim.finished)
        schedules[h] = tuple(j.start for j in sim.scheduler.jobs)
    assert len(set(schedules.values())) == 4
