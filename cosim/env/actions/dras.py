"""The ``dras`` action model (DRAS, seed 004, two levels); see :mod:`cosim.env.actions`."""

from __future__ import annotations

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

    def automatic(self, view: SchedulerView) -> Iterator[Decision]:
        """Start the reserved job once it fits; otherwise keep its promise."""
        yield from self._keep_reservation(view)

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
        if not q.count or free <= 0 or q.min_procs() > free:
            return []
        shadow, extra, extra_mem = view.shadow(job.procs, job.mem)
        now = view.now
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
        return out

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
