"""Queue policies: a heuristic order combined with a backfilling variant.

- ``none``: start jobs in priority order while the head fits.
- ``greedy``: start every job that fits now, in priority order.
- ``easy``: textbook EASY (Lifka 1995; Mu'alem & Feitelson 2001): the head
  job gets a reservation at its shadow time; a later job may start now if it
  fits and either ends by the shadow time OR uses only the extra cores (those
  still free at the shadow time once the head is placed). Not the stricter
  "ends before the shadow time" variant.
- ``conservative``: every queued job holds a reservation in an availability
  profile; a job may start early only where it delays no reservation.
  Reservations persist between passes and are compressed (moved earlier, in
  the order of their promised times, never later) when a job ends early.

EASY's backfill scan is vectorized over the queue columns, and an arrival
that changes nothing else is checked alone (the earlier candidates were
already refused under the same shadow time, and time only makes the test
stricter), which is what keeps long queues (RICC) cheap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

import numpy as np

from cosim.job import Job, Mode
from cosim.policy import Decision, SchedulerView, reserve, start

__all__ = ["QueuePolicy", "Profile", "BACKFILLS", "easy_admits", "easy_backfill_list",
           "easy_backfill_scan"]

#: Backfilling variants by name, with the line ``python -m cosim policies`` shows.
BACKFILLS: dict[str, str] = {
    "none": "start jobs in priority order; stop at the first that does not fit",
    "greedy": "start every job that fits now, in priority order (no reservation)",
    "easy": "EASY: reserve for the head job; backfill jobs that end before its shadow "
            "time or use only the extra cores",
    "conservative": "every queued job holds a reservation; nobody may delay any of them",
}


def easy_admits(job: Job, now: float, shadow: float, extra: int, extra_mem: float) -> bool:
    """EASY's test: may ``job`` (which fits now) start ahead of the reserved head?

    Yes if it ends by the head's ``shadow`` time, or uses only the ``extra``
    units (and memory) still free at that time once the head is placed.
    """
    return now + job.estimate <= shadow or (job.procs <= extra and job.mem <= extra_mem)


class Profile:
    """Free capacity over time as a step function, for conservative backfilling.

    ``times[k]`` is when segment k begins; ``units[k]`` and ``mem[k]`` are what
    is free from then until ``times[k+1]`` (the last segment lasts forever).
    """

    __slots__ = ("times", "units", "mem")

    def __init__(self, now: float, free: int, free_mem: float,
                 ends: list[tuple[float, int, Job]], node_granular: bool):
        times, units, mem = [now], [free], [free_mem]
        for t, _, job in ends:
            if t < now:
                t = now
            if t == times[-1]:
                units[-1] += job.procs
                if not node_granular:
                    mem[-1] += job.mem
            else:
                times.append(t)
                units.append(units[-1] + job.procs)
                mem.append(mem[-1] + (0.0 if node_granular else job.mem))
        self.times, self.units, self.mem = times, units, mem

    def advance(self, now: float) -> None:
        """Forget the past: the profile starts at ``now``."""
        times = self.times
        k = 0
        while k + 1 < len(times) and times[k + 1] <= now:
            k += 1
        if k:
            del self.times[:k], self.units[:k], self.mem[:k]
        self.times[0] = now

    def earliest(self, procs: int, mem: float, duration: float) -> float:
        """Earliest start where ``procs`` and ``mem`` stay free for ``duration``."""
        times, units, mems = self.times, self.units, self.mem
        n = len(times)
        k = 0
        while k < n:
            if units[k] >= procs and mems[k] >= mem:
                t_end = times[k] + duration
                m = k + 1
                while m < n and times[m] < t_end:
                    if units[m] < procs or mems[m] < mem:
                        break
                    m += 1
                else:
                    return times[k]
                k = m + 1
            else:
                k += 1
        return math.inf

    def _split(self, t: float) -> int:
        """Index of the segment starting exactly at ``t`` (created if needed)."""
        times = self.times
        lo, hi = 0, len(times)
        while lo < hi:
            mid = (lo + hi) // 2
            if times[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(times) and times[lo] == t:
            return lo
        times.insert(lo, t)
        self.units.insert(lo, self.units[lo - 1])
        self.mem.insert(lo, self.mem[lo - 1])
        return lo

    def take(self, t: float, duration: float, procs: int, mem: float) -> None:
        """Occupy ``procs`` and ``mem`` over ``[t, t + duration)``."""
        if t == math.inf:
            return
        a = self._split(t)
        b = self._split(t + duration) if duration > 0 else a
        units, mems = self.units, self.mem
        for k in range(a, b):
            units[k] -= procs
            mems[k] -= mem


def easy_backfill_list(candidates, cl, now: float, shadow: float, extra: int, extra_mem: float):
    """EASY backfilling from a short list of candidates in priority order.

    A generator of start decisions (each applied before the next is made);
    returns the extra units and memory left at the shadow time.
    """
    for job in candidates:
        if not cl.fits_now(job.procs, job.mem):
            continue
        if now + job.estimate <= shadow:
            yield start(job, Mode.BACKFILLED, "ends before shadow time")
        elif job.procs <= extra and job.mem <= extra_mem:
            extra -= job.procs
            extra_mem -= job.mem
            yield start(job, Mode.BACKFILLED, "uses extra cores")
        else:
            continue
        if cl.free == 0:
            break
    return extra, extra_mem

def easy_backfill_scan(q, cl, now: float, shadow: float, extra: int, extra_mem: float):
    """EASY backfilling over a long queue in key order: each start is found by one masked scan.

    A generator of start decisions; returns the extra units and memory left.

    The scan works on contiguous slices of the queue columns (no gathers),
    so a pass that finds nothing costs a handful of numpy calls.
    """
    lo, hi = q.lo, q.hi
    with_mem = cl.free_mem != np.inf
    while lo < hi:
        procs, est = q.procs[lo:hi], q.estimate[lo:hi]
        short = now + est <= shadow
        ok = (short | (procs <= extra)) if not with_mem else (
            short | ((procs <= extra) & (q.mem[lo:hi] <= extra_mem)))
        ok &= procs <= cl.free
        ok &= q.alive[lo:hi]
        if with_mem:
            ok &= q.mem[lo:hi] <= cl.free_mem
        if q.key_monotone:
            i = int(ok.argmax())
            if not ok[i]:
                break
        else:
            idx = np.flatnonzero(ok)
            if not len(idx):
                break
            i = int(idx[q.key[lo:hi][idx].argmin()])
        job = q.jobs[lo + i]
        if short[i]:
            yield start(job, Mode.BACKFILLED, "ends before shadow time")
        else:
            extra -= job.procs
            extra_mem -= job.mem
            yield start(job, Mode.BACKFILLED, "uses extra cores")
        if cl.free == 0:
            break
        if q.key_monotone:
            # Jobs before it were refused and stay refused: resume after it.
            lo += i + 1
    return extra, extra_mem


class QueuePolicy:
    """A heuristic order with a backfilling variant (see the module docstring).

    Args:
        heuristic: a :class:`cosim.policies.heuristics.Heuristic`.
        backfill: ``none``, ``greedy``, ``easy`` or ``conservative``.
        rng: random stream (used by the ``random`` heuristic).

    Examples:
        >>> from cosim.policies import make_policy
        >>> make_policy("sjf+easy").name
        'sjf+easy'
    """

    def __init__(self, heuristic, backfill: str, rng: np.random.Generator | None = None):
        self.heuristic = heuristic
        self.backfill = backfill
        self.name = f"{heuristic.name}+{backfill}"
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.static_key = heuristic.static
        self._dynamic = heuristic.dynamic
        self._decide = {"none": self._strict, "greedy": self._greedy, "easy": self._easy,
                        "conservative": self._conservative}[backfill]
        # EASY memory of the previous pass, for arrival-only passes.
        self._easy_head: Job | None = None
        self._easy_state = (math.inf, 0, 0.0)
        # Conservative: the persistent plan.
        self._profile: Profile | None = None
        self._planned: list[tuple[float, int, Job]] = []
        self._plan_seq = 0
        self._replan = True

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Decisions for this pass (a generator: each is applied before the next)."""
        if view.surprise:
            self._replan = True   # remembered even when the queue is empty now
        if not view.queue.count:
            return iter(())
        if self._dynamic is not None:
            q = view.queue
            slots = q.slots()
            q.key[slots] = self._dynamic(q, slots, view.now, view.cluster, self.rng)
            q.key_monotone = False
        return self._decide(view)

    # -- no backfilling and greedy -----------------------------------------------
    def _strict(self, view: SchedulerView) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        while q.count:
            job = q.jobs[q.head()]
            if not cl.fits_now(job.procs, job.mem):
                return
            yield start(job, Mode.READY, "fits at head")

    def _ordered(self, q, slots: np.ndarray) -> np.ndarray:
        if q.key_monotone:
            return slots
        return slots[np.argsort(q.key[slots], kind="stable")]

    def _greedy(self, view: SchedulerView) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        if self.heuristic.name == "tetris":
            # The alignment score depends on what is free: re-score after each start.
            while q.count and cl.free > 0:
                slots = q.fitting(cl.free, cl.free_mem)
                if not len(slots):
                    return
                keys = self._dynamic(q, slots, view.now, cl, self.rng)
                job = q.jobs[slots[int(np.argmin(keys))]]
                mode = Mode.READY if job is q.jobs[q.head()] else Mode.BACKFILLED
                yield start(job, mode, "best alignment")
            return
        head_waiting = False
        for s in self._ordered(q, q.slots()):
            job = q.jobs[s]
            if cl.fits_now(job.procs, job.mem):
                yield start(job, Mode.BACKFILLED if head_waiting else Mode.READY, "fits now")
                if cl.free == 0:
                    return
            else:
                head_waiting = True

    # -- EASY ------------------------------------------------------------------------
    def _easy(self, view: SchedulerView) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        now = view.now
        # Arrival-only pass: nothing was freed, the head is unchanged, so the
        # shadow time and extra cores are those of the previous pass and only
        # the new jobs need checking.
        head = self._easy_head
        incremental = (not view.released and head is not None and head in q
                       and self._dynamic is None)
        if incremental:
            hkey = q.key[head.queue_slot]
            for job in view.new_jobs:
                if job in q and q.key[job.queue_slot] < hkey:
                    incremental = False
                    break
        if incremental:
            shadow, extra, extra_mem = self._easy_state
            candidates = [job for job in view.new_jobs if job in q]
            if self.static_key is not None and len(candidates) > 1:
                candidates.sort(key=lambda j: q.key[j.queue_slot])
        else:
            while True:
                if not q.count:
                    self._easy_head = None
                    return
                head = q.jobs[q.head()]
                if not cl.fits_now(head.procs, head.mem):
                    break
                yield start(head, Mode.READY, "fits at head")
            shadow, extra, extra_mem = view.shadow(head.procs, head.mem)
            self._easy_head = head
            if head.promised != shadow:   # the scheduler keeps promises; tell it only changes
                yield reserve(head, shadow, "EASY head reservation")
            candidates = None
        if cl.free > 0 and (candidates is not None or q.min_procs() <= cl.free):
            if candidates is None and not q.small():
                backfill = easy_backfill_scan(q, cl, now, shadow, extra, extra_mem)
            else:
                if candidates is None:
                    free, free_mem = cl.free, cl.free_mem
                    candidates = [
                        j for j in q.live_jobs()
                        if j.procs <= free and j.mem <= free_mem and j is not head
                        and easy_admits(j, now, shadow, extra, extra_mem)]
                    if not q.key_monotone and len(candidates) > 1:
                        key = q.key
                        candidates.sort(key=lambda j: key[j.queue_slot])
                backfill = easy_backfill_list(candidates, cl, now, shadow, extra, extra_mem)
            extra, extra_mem = yield from backfill
        self._easy_state = (shadow, extra, extra_mem)

    # -- conservative ---------------------------------------------------------------
    def _conservative(self, view: SchedulerView) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        now = view.now
        order = self._ordered(q, q.slots())
        if self._replan:
            self._replan = False
            # Rebuild: running jobs as now expected, then the promised jobs in
            # the order of their promises (none moves later unless running
            # jobs overran), then jobs without a promise in priority order.
            profile = Profile(now, cl.free, cl.free_mem, view.ends(), cl.node_granular)
            promised = sorted((q.jobs[s] for s in order if q.jobs[s].promised == q.jobs[s].promised),
                              key=lambda j: j.promised)
            fresh = [q.jobs[s] for s in order if q.jobs[s].promised != q.jobs[s].promised]
            self._planned = []
            to_place = promised + fresh
        else:
            profile = self._profile
            profile.advance(now)
            to_place = [job for job in view.new_jobs if job in q]
            if self.static_key is not None and len(to_place) > 1:
                to_place.sort(key=lambda j: q.key[j.queue_slot])
        self._profile = profile
        planned = self._planned
        for job in to_place:
            t = profile.earliest(job.procs, job.mem, job.estimate)
            profile.take(t, job.estimate, job.procs, job.mem)
            self._plan_seq += 1
            heapq.heappush(planned, (t, self._plan_seq, job))
            if t > now:
                yield reserve(job, t, "conservative reservation")
        # Start what is planned for now, in priority order.
        due = set()
        while planned and planned[0][0] <= now:
            due.add(heapq.heappop(planned)[2])
        if not due:
            return
        waiting_before = False
        for s in order:
            job = q.jobs[s]
            if job is None:
                continue
            if job in due:
                if cl.fits_now(job.procs, job.mem):
                    yield start(job, Mode.BACKFILLED if waiting_before else Mode.READY,
                                "planned start (delays no reservation)")
                    continue
                # Cannot happen with a consistent plan; rebuild at the next pass.
                self._replan = True
            waiting_before = True
