"""The last partial rows of issue 21 (item 8): Tetris* as sched-rl-gym defines
it, and a knapsack over cores and memory; hand-checked schedules."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler
from cosim.job import Job
from cosim.policies import make_policy
from cosim.policies.heuristics import HEURISTICS
from cosim.policies.knapsack import knapsack, knapsack2
from cosim.queue import JobQueue


def _schedule(policy: str, jobs: list[Job], *, nodes: int, cores: int, memory: float = 0.0):
    env = simpy.Environment()
    cluster = Cluster(env, nodes=nodes, cores_per_node=cores, memory_per_node=memory)
    sched = Scheduler(env, cluster, make_policy(policy), expected_jobs=len(jobs))
    for j in jobs:
        simpy.Timeout(env, j.submit).callbacks.append(lambda _e, j=j: sched.submit(j))
    env.run(until=sched.finished)
    return {j.id: (j.start, j.end) for j in jobs}


def _job(i, submit, run, procs, est=None, mem=0.0):
    est = run if est is None else est
    return Job(i, i, submit, run, procs, est, est, mem)


# -- Tetris* ---------------------------------------------------------------------------------

def test_tetris_star_keys_by_hand():
    # 2 nodes x 4 cores, 8 GB each, pooled: 8 cores and 16 GB free.
    env = simpy.Environment()
    cluster = Cluster(env, nodes=2, cores_per_node=4, memory_per_node=8.0)
    q = JobQueue()
    for j in (_job(1, 0, 100, 2, mem=10.0), _job(2, 0, 100, 3, mem=1.0), _job(3, 0, 1, 1)):
        q.add(j, 0.0)
    keys = HEURISTICS["tetris_star"].dynamic(q, q.slots(), 0.0, cluster, None)
    # p = 0.5 (free*procs + free_mem + mem) + 0.5 / estimate:
    #   0.5 (16 + 16 + 10) + 0.005 = 21.005; 0.5 (24 + 16 + 1) + 0.005 = 20.505;
    #   0.5 (8 + 16 + 0) + 0.5 = 12.5.  Keys are -p (smaller runs first).
    assert keys.tolist() == pytest.approx([-21.005, -20.505, -12.5])


def test_tetris_star_packs_first_then_shortest():
    # 4 cores, all at 0. p: A (1 core, 10 s) 0.5*4 + 0.05 = 2.05; B (4, 100 s)
    # 0.5*16 + 0.005 = 8.005; C (2, 5 s) 0.5*8 + 0.1 = 4.1. B first and the
    # machine is full; at 100, C then A.
    jobs = [_job(1, 0, 10, 1), _job(2, 0, 100, 4), _job(3, 0, 5, 2)]
    assert _schedule("tetris_star", jobs, nodes=4, cores=1) == {
        1: (100.0, 110.0), 2: (0.0, 100.0), 3: (100.0, 105.0)}
    # fcfs+greedy on the same jobs starts A and C at once and B last.
    again = [_job(1, 0, 10, 1), _job(2, 0, 100, 4), _job(3, 0, 5, 2)]
    assert _schedule("fcfs+greedy", again, nodes=4, cores=1)[2] == (10.0, 110.0)


def test_tetris_star_sjf_term_orders_equal_packings():
    # Same size: the packing terms are equal (0.5*2*2 = 2), 0.5/10 > 0.5/100: E first.
    jobs = [_job(1, 0, 100, 2), _job(2, 0, 10, 2)]
    assert _schedule("tetris_star", jobs, nodes=2, cores=1) == {1: (10.0, 110.0), 2: (0.0, 10.0)}


# -- knapsack over cores and memory ---------------------------------------------------------

def test_knapsack2_by_hand():
    # cores 10, memory 10. B + C is the best set by cores (1.4) but needs 11 of memory.
    assert knapsack([6, 5, 5], [1.0, 0.7, 0.7], 10) == [1, 2]
    assert knapsack2([6, 5, 5], [2.0, 5.0, 6.0], [1.0, 0.7, 0.7], 10, 10.0) == [0]
    # Fractional memory that adds up exactly: 2.5 + 5 + 2.5 = 10.
    assert knapsack2([2, 2, 2], [2.5, 5.0, 2.5], [1.0, 1.0, 1.0], 6, 10.0) == [0, 1, 2]
    # Memory alone binds: two of the three fit.
    assert knapsack2([1, 1, 1], [4.0, 4.0, 4.0], [0.5, 0.9, 0.7], 3, 8.0) == [1, 2]
    assert knapsack2([], [], [], 4, 4.0) == []


def test_knapsack2_matches_brute_force():
    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(1, 8))
        w = rng.integers(1, 6, n).tolist()
        m = (rng.integers(1, 9, n) * 0.5).tolist()
        v = rng.random(n).tolist()
        cap, mcap = int(rng.integers(1, 12)), float(rng.integers(1, 16) * 0.5)
        got = knapsack2(w, m, v, cap, mcap)
        assert sum(w[i] for i in got) <= cap and sum(m[i] for i in got) <= mcap + 1e-9
        best = 0.0
        for mask in range(1 << n):
            idx = [i for i in range(n) if mask >> i & 1]
            if sum(w[i] for i in idx) <= cap and sum(m[i] for i in idx) <= mcap + 1e-9:
                best = max(best, sum(v[i] for i in idx))
        assert sum(v[i] for i in got) == pytest.approx(best)


def test_knapsack_policy_chooses_a_set_that_fits_memory():
    # 2 nodes x 5 cores, 5 GB each (pooled: 10 cores, 10 GB). At 0 all waits
    # are 0, values (2/3) procs / 10: A (6 cores, 2 GB) 0.4, B (5, 5 GB) and
    # C (5, 6 GB) 1/3 each. By cores alone B + C wins (and C then does not fit
    # memory: only B would start); over both, A alone is best. At 10 B and C
    # tie (B + C needs 11 GB): B, then C at 20.
    jobs = [_job(1, 0, 10, 6, mem=2.0), _job(2, 0, 10, 5, mem=5.0), _job(3, 0, 10, 5, mem=6.0)]
    assert _schedule("knapsack", jobs, nodes=2, cores=5, memory=5.0) == {
        1: (0.0, 10.0), 2: (10.0, 20.0), 3: (20.0, 30.0)}
