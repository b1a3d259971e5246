"""The availability profile of conservative backfilling (free units and memory over time)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

from cosim.job import Job

__all__ = ["Profile"]


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

    def earliest(self, procs: int, mem: float, duration: float,
                 after: float | None = None, own: float | None = None) -> float:
        """Earliest start (not before ``after``) where ``procs`` and ``mem`` stay free
        for ``duration``; ``inf`` if there is none.

        ``own``: the job already holds ``[own, own + duration)`` in this profile
        (taken with the same size); the answer is then the earliest start with
        that hold given back, at most ``own``, and the profile is not changed.
        """
        times, units, mems = self.times, self.units, self.mem
        n = len(times)
        k = 0
        if after is not None and after > times[0]:
            k = bisect_right(times, after) - 1
        else:
            after = times[0]
        if own is None:
            own_end = own = math.inf
        else:
            own_end = own + duration
        while k < n:
            tk = times[k]
            if tk >= own:
                return own
            extra = own <= tk < own_end
            if units[k] + (procs if extra else 0) >= procs and \
                    mems[k] + (mem if extra else 0.0) >= mem:
                t0 = tk if tk > after else after
                t_end = t0 + duration
                m = k + 1
                while m < n and times[m] < t_end:
                    tm = times[m]
                    extra = own <= tm < own_end
                    if units[m] + (procs if extra else 0) < procs or \
                            mems[m] + (mem if extra else 0.0) < mem:
                        break
                    m += 1
                else:
                    return t0
                k = m + 1
            else:
                k += 1
        return own

    def _split(self, t: float) -> int:
        """Index of the segment starting exactly at ``t`` (created if needed)."""
        times = self.times
        lo = bisect_left(times, t)
        if lo < len(times) and times[lo] == t:
            return lo
        times.insert(lo, t)
        self.units.insert(lo, self.units[lo - 1])
        self.mem.insert(lo, self.mem[lo - 1])
        return lo

    def take(self, t: float, duration: float, procs: int, mem: float) -> None:
        """Occupy ``procs`` and ``mem`` over ``[t, t + duration)``."""
        self._add(t, duration, -procs, -mem)

    def give_back(self, t: float, duration: float, procs: int, mem: float) -> None:
        """Undo :meth:`take` (the same arguments free the same interval)."""
        self._add(t, duration, procs, mem)

    def _add(self, t: float, duration: float, procs: int, mem: float) -> None:
        if t == math.inf:
            return
        a = self._split(t)
        b = self._split(t + duration) if duration > 0 else a
        units, mems = self.units, self.mem
        for k in range(a, b):
            units[k] += procs
            mems[k] += mem
