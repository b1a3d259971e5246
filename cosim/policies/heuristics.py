"""Classic priority heuristics: the queue orders that policies combine with backfilling.

A heuristic orders the queue: smaller key runs first. Static keys depend only
on the job and are computed once when it joins the queue; dynamic keys depend
on the time or on the free resources and are recomputed, vectorized over the
queue, at every pass. :mod:`cosim.policies.names` composes them with a
backfilling variant (``fcfs+easy``, ``sjf+conservative``, ``f1``).

Sources: F1 from Carastan-Santos & de Camargo (SC 2017); WFP3 and UNICEF from
Tang et al. (IPDPS 2009); Tetris alignment score from Grandl et al. (SIGCOMM
2014) as used by DeepRM (Mao et al. 2016); all as listed in seeds 001 and 003.
Tetris* (``tetris_star``) is the variant of sched-rl-gym (Cunha, seed 003's
environment; renatolfc/sched-rl-gym, ``schedgym/scheduler/tetris_scheduler.py``
and ``packer_scheduler.py`` at commit 1507b60), restated in :func:`_tetris_star`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from cosim.job import Job
from cosim.queue import JobQueue

if TYPE_CHECKING:
    from cosim.decisions import ClusterState

__all__ = ["Heuristic", "HEURISTICS"]

DynamicKey = Callable[[JobQueue, np.ndarray, float, "ClusterState", np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Heuristic:
    """A queue order.

    Attributes:
        name: short name used in policy names.
        doc: one line shown by ``python -m cosim policies``.
        static: key from the job alone, computed when it is queued.
        dynamic: keys for the given queue slots, recomputed at every pass.
        default_backfill: backfilling used when the name has no ``+BACKFILL``.
    """

    name: str
    doc: str
    static: Callable[[Job], float] | None = None
    dynamic: DynamicKey | None = None
    default_backfill: str = "none"


def _wfp3(q: JobQueue, slots, now, cluster, rng):
    wait = now - q.submit[slots]
    est = np.maximum(q.estimate[slots], 1.0)
    return -((wait / est) ** 3) * q.procs[slots]


def _unicef(q: JobQueue, slots, now, cluster, rng):
    wait = now - q.submit[slots]
    est = np.maximum(q.estimate[slots], 1.0)
    # log2(n + 1) keeps serial jobs finite (log2(1) = 0 in the published form).
    return -wait / (np.log2(q.procs[slots] + 1.0) * est)


def _random(q: JobQueue, slots, now, cluster, rng):
    return rng.random(len(slots))


def _tetris(q: JobQueue, slots, now, cluster, rng):
    # Alignment: dot product of the job's demand and the free resources, both
    # normalized by capacity; larger is better, so the key is its negative.
    cap = cluster.capacity
    score = (q.procs[slots] / cap) * (cluster.free / cap)
    if cluster.memory_pooled:
        total_mem = cluster.memory_per_node * len(cluster.nodes)
        score = score + (q.mem[slots] / total_mem) * (cluster.free_mem / total_mem)
    return -score


#: Tetris*'s dial between packing (1) and shortest-job-first (0); sched-rl-gym's default.
TETRIS_STAR_RATIO = 0.5


def _tetris_star(q: JobQueue, slots, now, cluster, rng):
    """Tetris* as sched-rl-gym defines it: a larger priority runs first,

    ``p = r * (free_procs * procs + free_mem + mem) + (1 - r) / requested_time``

    with ``r`` = :data:`TETRIS_STAR_RATIO`, resources in absolute units (not
    normalized), free resources as they are when the pass starts (the queue is
    sorted once per pass, then every job that fits starts in that order). The
    memory term is written there as a sum, not the product its Packer uses;
    it is kept as written. Memory counts only where the cluster pools it
    (elsewhere both memory terms are 0). Here the requested time is the
    scheduler's estimate (at least 1 s), as for SJF.
    """
    r = TETRIS_STAR_RATIO
    pack = float(cluster.free) * q.procs[slots]
    if cluster.memory_pooled:
        pack = pack + (cluster.free_mem + q.mem[slots])
    sjf = 1.0 / np.maximum(q.estimate[slots], 1.0)
    return -(r * pack + (1.0 - r) * sjf)


HEURISTICS: dict[str, Heuristic] = {h.name: h for h in [
    # attrgetter: the key of every queued job, computed in C (no Python call per job)
    Heuristic("fcfs", "first come, first served (submit time)", static=attrgetter("submit")),
    Heuristic("lcfs", "last come, first served", static=lambda j: -j.submit),
    Heuristic("sjf", "shortest job first (by estimate)", static=attrgetter("estimate")),
    Heuristic("saf", "smallest area first (estimate x procs)",
              static=lambda j: j.estimate * j.procs),
    Heuristic("largest", "largest-first bin packing (most procs first)",
              static=lambda j: -(j.procs + j.mem * 1e-9), default_backfill="greedy"),
    Heuristic("f1", "F1: log10(estimate)*procs + 870*log10(submit) (Carastan-Santos 2017)",
              static=lambda j: math.log10(max(j.estimate, 1.0)) * j.procs
              + 870.0 * math.log10(max(j.submit, 1.0))),
    Heuristic("wfp3", "WFP3: -(wait/estimate)^3 * procs (Tang et al. 2009)", dynamic=_wfp3),
    Heuristic("unicef", "UNICEF: -wait / (log2(procs+1) * estimate) (Tang et al. 2009)",
              dynamic=_unicef),
    Heuristic("random", "random order, redrawn at every pass", dynamic=_random,
              default_backfill="greedy"),
    Heuristic("tetris", "Tetris alignment of demand with free resources (DeepRM)",
              dynamic=_tetris, default_backfill="greedy"),
    Heuristic("tetris_star", "Tetris* (sched-rl-gym): 0.5*(free*procs + free_mem + mem) "
              "+ 0.5/estimate, largest first, packing mixed with SJF",
              dynamic=_tetris_star, default_backfill="greedy"),
]}
