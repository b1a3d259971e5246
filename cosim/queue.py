"""The wait queue: jobs in slots, with numpy columns for vectorized scans.

Backfilling asks "which queued jobs fit in these free cores and end before
this time?" on every scheduler pass. With thousands of queued jobs (RICC) a
Python loop over the queue would dominate the run, so the queue keeps its
jobs' sizes, estimates and priority keys in numpy columns indexed by slot and
answers such questions with one masked comparison. Slots are handed out in
arrival order and compacted when half of them are dead.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Iterator

import numpy as np

from cosim.job import Job

__all__ = ["JobQueue", "DEAD_PROCS"]

_SMALL = 48   # below this many slots, plain Python loops are faster than numpy
#: The size a dead slot holds in ``procs``: larger than any machine, so a size
#: test (``procs <= free``) is False for it without consulting ``alive``.
DEAD_PROCS = 2**62


class JobQueue:
    """Queued jobs with their attributes in columns.

    Attributes:
        jobs: job per slot (``None`` for dead slots).
        procs, mem, estimate, submit, key: numpy columns by slot; a dead slot
            in ``[lo, hi)`` holds :data:`DEAD_PROCS` in ``procs`` and ``inf`` in
            ``key`` (so that neither a fit test nor the key's argmin picks it).
        alive: whether the slot holds a queued job.
        lo, hi: slots ``[lo, hi)`` may be alive; all others are dead.
    """

    def __init__(self, capacity: int = 1024):
        self.jobs: list[Job | None] = []
        self.procs = np.zeros(capacity, dtype=np.int64)
        self.mem = np.zeros(capacity, dtype=np.float64)
        self.estimate = np.zeros(capacity, dtype=np.float64)
        self.submit = np.zeros(capacity, dtype=np.float64)
        self.key = np.zeros(capacity, dtype=np.float64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.lo = 0
        self.hi = 0
        self.count = 0
        self.version = 0   # bumped on every add/remove
        self.estimates_set = 0   # bumped by set_estimate: cached per-slot terms are stale
        # True while keys were added in non-decreasing order: then slot order
        # is priority order and the head is the first alive slot.
        self.key_monotone = True
        self._last_key = -np.inf
        # The distinct queued sizes, sorted, with the jobs of each size in slot
        # order (a dict as an ordered set): the smallest size, "any size in a
        # range" and "the jobs of sizes in a range" without a scan.
        self._sizes: list[int] = []
        #: The smallest queued size (0 when empty): :meth:`min_procs` as an attribute.
        self.smallest = 0
        self._by_size: dict[int, dict[Job, None]] = {}

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Job]:
        """Queued jobs in arrival (slot) order."""
        jobs = self.jobs
        for s in np.flatnonzero(self.alive[self.lo:self.hi]) + self.lo:
            yield jobs[s]

    def __contains__(self, job: Job) -> bool:
        return job.queue_slot >= 0 and self.jobs[job.queue_slot] is job

    def add(self, job: Job, key: float = 0.0) -> None:
        """Append ``job`` with priority ``key`` (smaller runs first)."""
        if self.hi == len(self.alive):
            self._grow()
        s = self.hi
        self.hi += 1
        self.jobs.append(job)
        self.procs[s] = job.procs
        self.mem[s] = job.mem
        self.estimate[s] = job.estimate
        self.submit[s] = job.submit
        self.key[s] = key
        if key < self._last_key:
            self.key_monotone = False
        self._last_key = key
        self.alive[s] = True
        procs = job.procs
        same = self._by_size.get(procs)
        if same is None:
            self._by_size[procs] = same = {}
            insort(self._sizes, procs)
            self.smallest = self._sizes[0]
        same[job] = None
        job.queue_slot = s
        self.count += 1
        self.version += 1

    def remove(self, job: Job) -> None:
        """Take ``job`` out of the queue."""
        s = job.queue_slot
        self.alive[s] = False
        self.procs[s] = DEAD_PROCS
        self.key[s] = np.inf
        self.jobs[s] = None
        procs = job.procs
        same = self._by_size[procs]
        del same[job]
        if not same:
            del self._by_size[procs]
            sizes = self._sizes
            del sizes[bisect_right(sizes, procs) - 1]
            self.smallest = sizes[0] if sizes else 0
        job.queue_slot = -1
        self.count -= 1
        self.version += 1
        if s == self.lo:
            # Skip the dead prefix so FCFS's head is found in O(1) amortized.
            hi, alive = self.hi, self.alive
            lo = s + 1
            while lo < hi and not alive[lo]:
                lo += 1
            self.lo = lo
        if self.count == 0:
            self._reset()

    def set_estimate(self, job: Job) -> None:
        """Refresh the column after a job's estimate changed."""
        self.estimate[job.queue_slot] = job.estimate
        self.version += 1
        self.estimates_set += 1

    def set_key(self, job: Job, key: float) -> None:
        """Change a queued job's priority key (its estimate changed)."""
        self.key[job.queue_slot] = key
        self.key_monotone = False

    def first(self) -> Job | None:
        """The queued job that arrived first."""
        return self.jobs[self.lo] if self.count else None

    def slots(self) -> np.ndarray:
        """Alive slots in arrival order."""
        return np.flatnonzero(self.alive[self.lo:self.hi]) + self.lo

    def head(self) -> int:
        """Slot of the alive job with the smallest key (earliest slot on ties), or -1."""
        if not self.count:
            return -1
        if self.key_monotone:
            return self.lo
        return self.argmin_key()

    def argmin_key(self) -> int:
        """Slot of the alive job with the smallest key (earliest slot on ties), or -1."""
        if not self.count:
            return -1
        # Dead slots hold an infinite key (see remove): no mask needed.
        return self.lo + int(self.key[self.lo:self.hi].argmin())

    def fitting(self, free: int, free_mem: float) -> np.ndarray:
        """Alive slots whose job fits ``free`` units and ``free_mem`` now."""
        lo, hi = self.lo, self.hi
        if hi - lo <= _SMALL:
            # numpy's call overhead loses to a short Python loop.
            jobs = self.jobs
            return np.array([s for s in range(lo, hi) if jobs[s] is not None
                             and jobs[s].procs <= free and jobs[s].mem <= free_mem],
                            dtype=np.int64)
        ok = self.alive[lo:hi] & (self.procs[lo:hi] <= free)
        if free_mem != np.inf:
            ok &= self.mem[lo:hi] <= free_mem
        return np.flatnonzero(ok) + lo

    def maintain(self) -> None:
        """Compact when most of the live range is dead (scans cost the whole range).

        Slots move, so only call this between passes, never while a policy
        holds slot numbers.
        """
        if self.hi - self.lo > 96 and self.count * 2 < self.hi - self.lo:
            self._compact()

    def small(self) -> bool:
        """Whether the live range is short enough that Python loops beat numpy."""
        return self.hi - self.lo <= _SMALL

    def live_jobs(self) -> list[Job]:
        """Queued jobs in slot order (a new list)."""
        return [j for j in self.jobs[self.lo:self.hi] if j is not None]

    def min_procs(self) -> int:
        """The smallest size among queued jobs (0 when empty)."""
        return self.smallest

    def any_size_between(self, above: int, upto: int) -> bool:
        """Whether some queued job has ``above < procs <= upto``."""
        sizes = self._sizes
        i = bisect_right(sizes, above)
        return i < len(sizes) and sizes[i] <= upto

    def size_groups(self, above: int, upto: int) -> list[dict[Job, None]]:
        """The queued jobs with ``above < procs <= upto``: one group per size
        (smallest first), each an ordered set of jobs in slot order (do not modify)."""
        sizes = self._sizes
        i = bisect_right(sizes, above)
        j = bisect_right(sizes, upto, i)
        return list(map(self._by_size.__getitem__, sizes[i:j]))

    def any_fits(self, free: int, free_mem: float) -> bool:
        """Whether some queued job fits ``free`` units and ``free_mem`` now."""
        if free_mem == np.inf:
            return self.count > 0 and self.min_procs() <= free
        lo, hi = self.lo, self.hi
        if hi - lo <= _SMALL:
            for j in self.jobs[lo:hi]:
                if j is not None and j.procs <= free and j.mem <= free_mem:
                    return True
            return False
        ok = self.alive[lo:hi] & (self.procs[lo:hi] <= free)
        if free_mem != np.inf:
            ok &= self.mem[lo:hi] <= free_mem
        return bool(ok.any())

    def _grow(self) -> None:
        live = self.count
        if live * 2 <= self.hi - self.lo and self.hi - self.lo > 64:
            self._compact()
            if self.hi < len(self.alive):
                return
        n = max(2 * len(self.alive), 1024)
        for name in ("procs", "mem", "estimate", "submit", "key", "alive"):
            old = getattr(self, name)
            new = np.zeros(n, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        slots = self.slots()
        n = len(slots)
        for name in ("procs", "mem", "estimate", "submit", "key"):
            col = getattr(self, name)
            col[:n] = col[slots]
        self.alive[:] = False
        self.alive[:n] = True
        jobs = [self.jobs[s] for s in slots]
        for i, job in enumerate(jobs):
            job.queue_slot = i
        self.jobs = jobs
        self.lo, self.hi = 0, n

    def _reset(self) -> None:
        self.alive[self.lo:self.hi] = False
        self.jobs = []
        self.lo = self.hi = 0
        self.key_monotone = True
        self._last_key = -np.inf
        self._sizes = []
        self.smallest = 0
        self._by_size = {}
