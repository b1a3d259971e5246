"""The ``start`` action model (DBF split window, seed 000); see :mod:`cosim.env.actions`."""

from __future__ import annotations

from collections.abc import Iterator

from cosim.decisions import Decision, SchedulerView, kill, reserve, start
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.job import Job, Mode
from cosim.policies.backfill import easy_admits


class StartActions(AgentPolicy):
    """``start``: place window jobs that fit now, Fwd to let time pass (DBF schedule cycling).

    Args:
        amap: window ``(M_head, M_tail)``, Wait, ``K`` kill slots.
        on_post: see :class:`AgentPolicy`.
        guard_wait: starvation guard (s), or None.
    """

    kind = "start"

    def __init__(self, amap: ActionMap, on_post=None, guard_wait: float | None = None):
        super().__init__(amap, on_post, guard_wait)
        self.guarded: Job | None = None
        self._shadow: float | None = None    # the guarded job's shadow time while it waits

    def before_asking(self, view: SchedulerView) -> Iterator[Decision]:
        """The guard's reservation, renewed when its shadow time changes."""
        job, shadow = self.guarded, self._shadow
        if job is not None and shadow is not None and shadow != job.promised:
            yield reserve(job, shadow, "starvation guard")

    def refresh(self, view: SchedulerView) -> bool:
        """Recompute the window, the running slots and the mask."""
        # Called at every choice: plain lists, one copy into the int8 mask.
        amap, q, cl = self.amap, view.queue, view.cluster
        n_window = amap.window
        window = self.window
        m = [0] * amap.n
        m[n_window] = 1   # Fwd
        if q.count:
            m_head, m_tail = amap.m_head, amap.m_tail
            if q.small():
                jobs = q.live_jobs()
                head = jobs[:m_head]
                rest = len(jobs) - m_head
                tail = jobs[len(jobs) - min(rest, m_tail):][::-1] if m_tail and rest > 0 else []
            else:
                # Long queue: touch only the window's slots, not every queued job.
                slots = q.slots()
                n = len(slots)
                qjobs = q.jobs
                head = [qjobs[s] for s in slots[:m_head].tolist()]
                rest = n - m_head
                tail = ([qjobs[s] for s in slots[n - min(rest, m_tail):][::-1].tolist()]
                        if m_tail and rest > 0 else [])
            shown = head + [None] * (m_head - len(head)) + tail
            shown += [None] * (n_window - len(shown))
            free, free_mem = cl.free, cl.free_mem
            for i, job in enumerate(shown):
                window[i] = job
                if job is not None and job.procs <= free and job.mem <= free_mem:
                    m[i] = 1
            self._guard(view, head[0] if head else None, m)
        else:
            for i in range(n_window):
                window[i] = None
            self.guarded = None
            self._shadow = None
        any_start = 1 in m[:n_window]
        ends = view.ends()
        if not ends and any_start and not view.arrivals_pending():
            # Nothing would ever wake the scheduler again: waiting would stall.
            m[n_window] = 0
        any_kill = False
        if amap.kill_slots:
            kill_jobs = self.kill_jobs
            now = view.now
            # The running jobs expected to end last are the kill candidates; a
            # job that started this instant cannot be killed yet.
            for k in range(amap.kill_slots):
                job = ends[-1 - k][2] if k < len(ends) else None
                kill_jobs[k] = job
                legal = job is not None and now > job.start
                m[amap.kill0 + k] = legal
                any_kill = any_kill or legal
        if self.guarded is not None and m[0]:
            # The guarded job fits: it starts now, before anything else.
            m = [0] * amap.n
            m[0] = 1
        self.mask[:] = m
        return q.count > 0 or any_kill

    def _guard(self, view: SchedulerView, head: Job | None, m: list[int]) -> None:
        self.guarded = None
        self._shadow = None
        if not self._guarded(view, head):
            return
        self.guarded = head
        if m[0]:
            return
        shadow, extra, extra_mem = view.shadow(head.procs, head.mem)
        self._shadow = shadow
        now = view.now
        window = self.window
        for i in range(1, self.amap.window):
            job = window[i]
            if m[i] and not easy_admits(job, now, shadow, extra, extra_mem):
                m[i] = 0

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Start (and keep asking), Fwd (end the pass) or kill (end the pass)."""
        amap = self.amap
        if action < amap.window:
            job = self.window[action]
            yield start(job, Mode.READY if job is view.queue.first() else Mode.BACKFILLED,
                        "agent")
            return False
        if action == amap.wait:
            return True
        # A kill's cores come back when the interrupt is processed, which wakes
        # the scheduler again.
        yield kill(self.kill_jobs[action - amap.kill0], "agent", requeue=True)
        return True

    def kind_of(self, action: int) -> str:
        """``start``, ``wait`` or ``kill``."""
        amap = self.amap
        if action < amap.window:
            return "start"
        return "wait" if action == amap.wait else "kill"
