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

Where the cluster pools memory, the knapsack has two capacities, the free
cores and the free memory (:func:`knapsack2`): the chosen set fits both, and
no better set that fits both is left out (a cores-only knapsack would choose
a set whose memory does not fit and then start only part of it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from math import ceil, floor, gcd

import numpy as np

from cosim.decisions import Decision, start
from cosim.job import Mode

__all__ = ["KnapsackPolicy", "knapsack", "knapsack2", "MAX_CELLS"]

#: Largest (cores x memory) table :func:`knapsack2` builds; beyond it memory is
#: counted in coarser units (requests rounded up, so what it picks still fits).
MAX_CELLS = 1 << 18


def _scaled(weights: Sequence[int], capacity: int) -> tuple[int, list[int]]:
    """Capacity and weights divided by the weights' greatest common divisor (same answer)."""
    g = 0
    for w in weights:
        g = gcd(g, int(w))
    g = max(g, 1)
    return int(capacity) // g, [int(w) // g for w in weights]


def knapsack(weights: list[int], values: list[float], capacity: int) -> list[int]:
    """Indices of the subset with the largest total value whose weights fit ``capacity``.

    Dynamic programming over capacities, one numpy row per item; weights are
    divided by their greatest common divisor first (sizes are often powers of
    two), which shrinks the table without changing the answer. Ties keep the
    earlier items.

    >>> knapsack([6, 5, 5], [1.0, 0.7, 0.7], 10)
    [1, 2]
    """
    cap, scaled = _scaled(weights, capacity)
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


def _memory_units(mems: list[float], capacity: float, cells: int) -> tuple[list[int], int]:
    """Memory requests and capacity in whole units of a common size.

    The unit is exact when every value is a multiple of some 1/1000 (the
    greatest common divisor of the values in thousandths); requests are
    rounded up and the capacity down, so a set that fits in units fits in
    memory. If the table would have more than ``cells`` memory columns, the
    unit grows (then a few sets that fit exactly may be missed).
    """
    unit = 0.0
    for k in (1, 10, 100, 1000):
        ints = [round(m * k) for m in mems]
        if all(abs(m * k - i) < 1e-6 for m, i in zip(mems, ints)):
            g = 0
            for i in ints:
                g = gcd(g, i)
            if g:
                unit = g / k
            break
    if unit <= 0.0:
        unit = capacity / cells if capacity > 0 else 1.0
    if capacity / unit > cells:
        unit = capacity / cells
    cap = floor(capacity / unit + 1e-9)
    return [ceil(m / unit - 1e-9) for m in mems], cap


def knapsack2(weights: list[int], mems: list[float], values: list[float], capacity: int,
              mem_capacity: float, max_cells: int = MAX_CELLS) -> list[int]:
    """Indices of the subset with the largest total value that fits both capacities.

    The 0-1 knapsack with two constraints (cores and memory): dynamic
    programming over a (cores x memory) table, one item at a time; cores are
    divided by their greatest common divisor, memory counted in the units of
    :func:`_memory_units` (at most ``max_cells`` cells in all). Ties keep the
    earlier items.

    >>> knapsack2([6, 5, 5], [2.0, 5.0, 6.0], [1.0, 0.7, 0.7], 10, 10.0)
    [0]
    >>> knapsack2([6, 5, 5], [2.0, 5.0, 5.0], [1.0, 0.7, 0.7], 10, 10.0)
    [1, 2]
    """
    cap, scaled = _scaled(weights, capacity)
    mem_units, mcap = _memory_units([float(m) for m in mems], float(mem_capacity),
                                    max(1, max_cells // (cap + 1) - 1))
    best = np.zeros((cap + 1, mcap + 1))
    take = np.zeros((len(scaled), cap + 1, mcap + 1), dtype=bool)
    for i, (w, m, v) in enumerate(zip(scaled, mem_units, values)):
        if w > cap or m > mcap or v <= 0:
            continue
        # The RHS reads the previous table (numpy evaluates it first): each item once.
        with_item = best[:cap + 1 - w, :mcap + 1 - m] + v
        region = best[w:, m:]
        better = with_item > region
        take[i, w:, m:] = better
        best[w:, m:] = np.where(better, with_item, region)
    chosen, c, k = [], cap, mcap
    for i in range(len(scaled) - 1, -1, -1):
        if take[i, c, k]:
            chosen.append(i)
            c -= scaled[i]
            k -= mem_units[i]
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
        if cl.memory_pooled and free_mem != float("inf"):
            chosen = knapsack2([j.procs for j in items], [j.mem for j in items], values, free,
                               free_mem)
        else:
            chosen = knapsack([j.procs for j in items], values, free)
        for i in chosen:
            job = items[i]
            # Chosen sets fit both capacities; the check guards the policy's contract.
            if cl.fits_now(job.procs, job.mem):
                yield start(job, Mode.READY if job is head else Mode.BACKFILLED, "knapsack")
