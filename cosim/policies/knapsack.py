"""DRAS's "Optimization" baseline: a 0-1 knapsack over the jobs that fit now.

Seed 004 (DRAS, section IV-A) compares its agents with an optimization method
that "formulates cluster scheduling as a 0-1 knapsack problem solved using
dynamic programming" with the same objective as the agents' reward. Here, at
every scheduler pass, the first ``window`` queued jobs (arrival order) that
fit now are the items, their sizes the weights, the free units the capacity,
and each job's value is its additive share of DRAS's capability reward
(eq. 1): ``w1 * wait / max_wait + (w2 + w3) * size / N`` (the job's wait
against the longest wait in the window, its size, and the utilization it
adds). The chosen set starts at once; nothing is reserved, so, as the paper
reports for this baseline, wide jobs can wait long.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import gcd

import numpy as np

from cosim.job import Mode
from cosim.policy import Decision, start

__all__ = ["KnapsackPolicy", "knapsack"]


def knapsack(weights: list[int], values: list[float], capacity: int) -> list[int]:
    """Indices of the subset with the largest total value whose weights fit ``capacity``.

    Dynamic programming over capacities, one numpy row per item; weights are
    divided by their greatest common divisor first (sizes are often powers of
    two), which shrinks the table without changing the answer. Ties keep the
    earlier items.

    >>> knapsack([6, 5, 5], [1.0, 0.7, 0.7], 10)
    [1, 2]
    """
    g = 0
    for w in weights:
        g = gcd(g, int(w))
    g = max(g, 1)
    cap = int(capacity) // g
    scaled = [int(w) // g for w in weights]
    best = np.zeros(cap + 1)
    take = np.zeros((len(scaled), cap + 1), dtype=bool)
    for i, (w, v) in enumerate(zip(scaled, values)):
        if w > cap or v <= 0:
            continue
        # RHS uses the previous row entirely (numpy evaluates it before the
        # assignment), so each item is taken at most once.
        with_item = best[:cap + 1 - w] + v
        better = with_item > best[w:]
        take[i, w:] = better
        best[w:] = np.where(better, with_item, best[w:])
    chosen, c = [], cap
    for i in range(len(scaled) - 1, -1, -1):
        if take[i, c]:
            chosen.append(i)
            c -= scaled[i]
    return chosen[::-1]


class KnapsackPolicy:
    """Start the value-maximizing set of fitting jobs at every pass (see the module docstring).

    Args:
        window: how many queued jobs (from the head, arrival order) are items.
        weights: ``(w1, w2, w3)`` of DRAS eq. 1.

    Examples:
        >>> from cosim.policies import make_policy
        >>> make_policy("knapsack").name
        'knapsack'
    """

    name = "knapsack"
    static_key = None

    def __init__(self, window: int = 50, weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)):
        self.window = int(window)
        self.weights = tuple(float(w) for w in weights)

    def decide(self, view) -> Iterator[Decision]:
        """Decisions for this pass (a generator: each is applied before the next)."""
        q, cl = view.queue, view.cluster
        if not q.count or cl.free <= 0:
            return
        if q.small():
            jobs = q.live_jobs()[:self.window]
        else:
            jobs = [q.jobs[s] for s in q.slots()[:self.window].tolist()]
        now = view.now
        free, free_mem = cl.free, cl.free_mem
        items = [j for j in jobs if j.procs <= free and j.mem <= free_mem]
        if not items:
            return
        w1, w2, w3 = self.weights
        max_wait = max(max(now - j.submit for j in jobs), 1e-9)
        n = cl.capacity
        values = [w1 * (now - j.submit) / max_wait + (w2 + w3) * j.procs / n for j in items]
        head = jobs[0]
        for i in knapsack([j.procs for j in items], values, free):
            job = items[i]
            # Memory is a second constraint the table does not hold: skip what no longer fits.
            if cl.fits_now(job.procs, job.mem):
                yield start(job, Mode.READY if job is head else Mode.BACKFILLED, "knapsack")
