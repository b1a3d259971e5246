"""The ``dras`` action model (DRAS, seed 004, two levels); see :mod:`cosim.env.actions`."""

from __future__ import annotations

import math
from collections.abc import Iterator

from cosim.decisions import Decision, SchedulerView, start
from cosim.env.actions.base import AgentPolicy
from cosim.job import Job, Mode


class DrasActions(AgentPolicy):
    """``dras``: DRAS's two levels, ready/reserved choices, then backfill choices.

    Args:
        amap: ``W`` job slots, no Wait, no kill slots.
        on_post: see :class:`AgentPolicy`.
        guard_wait: starvation guard (s) for level 1, or None.
    """

    kind = "dras"
    _none_since: tuple | None = None   # (reservation state, free units) when nothing was admitted
    # (reserved job, (shadow, extra, extra_mem)) computed afresh by this pass's
    # automatic step, for the level-2 refresh right after it (nothing changes
    # in between: a renewed promise moves no resource); None otherwise.
    _shadow_now: tuple | None = None

    def automatic(self, view: SchedulerView) -> Iterator[Decision]:
        """Start the reserved job once it fits; otherwise keep its promise."""
        # _keep_reservation computes the shadow afresh without a kept state or
        # after resources were released, and with no backfilling of its own
        # (dras backfills by the agent) keeps it unchanged in _easy_state.
        fresh = self._easy_state is None or view.released
        self._shadow_now = None
        yield from self._keep_reservation(view)
        if fresh and self.reserved is not None and self._easy_state is not None \
                and self.backfill == "none":
            self._shadow_now = (self.reserved, self._easy_state)

    def refresh(self, view: SchedulerView) -> bool:
        """Level 1 without a reservation, else level 2's backfill candidates."""
        if self.reserved is None:
            self.level = 1
            jobs = self._fill_head(view, self.amap.window)
            k = len(jobs)
            if k and self._guarded(view, jobs[0]):
                k = 1    # the oldest job alone is legal: a prefix of one
        else:
            self.level = 2
            jobs = self._candidates(view)
            k = len(jobs)
            window = self.window
            window[:] = jobs + [None] * (len(window) - k)
        self._free, self._free_mem = view.cluster.free, view.cluster.free_mem
        self._legal_prefix(k)
        return bool(jobs)

    def _candidates(self, view: SchedulerView) -> list[Job]:
        """Queued jobs (arrival order) that fit now and EASY admits around the reservation."""
        q, cl = view.queue, view.cluster
        job = self.reserved
        free, free_mem = cl.free, cl.free_mem
        shared, self._shadow_now = self._shadow_now, None   # good for one refresh
        if not q.count or free <= 0 or q.min_procs() > free:
            return []
        if shared is not None and shared[0] is job:
            shadow, extra, extra_mem = shared[1]   # this pass's automatic step computed it
        else:
            shadow, extra, extra_mem = view.shadow(job.procs, job.mem)
        now = view.now
        state = (job, shadow, extra, extra_mem)
        if self._none_since is not None and self._none_since[0] == state \
                and free_mem == math.inf and not view.surprise:
            last_free = self._none_since[1]
            if not self._admits_since(view, last_free, now, shadow, extra):
                if free > last_free:
                    self._none_since = (state, free)
                return []
        out: list[Job] = []
        limit = self.amap.window
        qjobs = q.jobs
        for s in (range(q.lo, q.hi) if q.small() else q.fitting(free, free_mem).tolist()):
            j = qjobs[s]
            # easy_admits, inlined (a call per queued job otherwise)
            if (j is not None and j is not job and j.procs <= free and j.mem <= free_mem
                    and (now + j.estimate <= shadow
                         or (j.procs <= extra and j.mem <= extra_mem))):
                out.append(j)
                if len(out) == limit:
                    break
        # Nothing admitted: remember the reservation and what was free (memory
        # not modelled), so that the next refresh tests only what could change.
        self._none_since = (state, free) if not out and free_mem == math.inf else None
        return out

    @staticmethod
    def _admits_since(view: SchedulerView, last_free: int, now: float, shadow: float,
                      extra: int) -> bool:
        """Whether a job may be admitted now when none was at the last refresh,
        under the same reservation (job, shadow time and extra units), with
        ``last_free`` units free then, memory not modelled and no estimate
        changed.

        A job no larger than ``last_free`` fitted then and was refused by
        EASY's test, which time only makes stricter: it stays refused. Only
        jobs sized between ``last_free`` and what is free now, and the jobs
        queued since, are tested (the queue's groups by size).
        """
        q = view.queue
        free = view.cluster.free
        if free > last_free:
            for group in q.size_groups(last_free, free):
                for j in group:
                    if now + j.estimate <= shadow or j.procs <= extra:
                        return True
        for j in view.new_jobs:
            if j.procs <= free and j.queue_slot >= 0 and q.jobs[j.queue_slot] is j \
                    and (now + j.estimate <= shadow or j.procs <= extra):
                return True
        return False

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Level 1: start or reserve; level 2: backfill. The pass goes on."""
        job = self.window[action]
        if self.level == 2:
            self._easy_state = None     # the backfill takes units: renew (shadow, extra)
            yield start(job, Mode.BACKFILLED, "agent backfill")
        elif view.cluster.fits_now(job.procs, job.mem):
            yield start(job, Mode.READY, "agent")
        else:
            yield from self._reserve(job, view)
        return False

    def kind_of(self, action: int) -> str:
        """``select`` at level 1 (``reserve`` when the job does not fit), ``backfill`` at level 2."""
        if self.level == 2:
            return "backfill"
        job = self.window[action]
        return "select" if job.procs <= self._free and job.mem <= self._free_mem else "reserve"
