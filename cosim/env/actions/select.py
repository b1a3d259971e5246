"""The ``select`` action model (RLScheduler); see :mod:`cosim.env.actions`."""

from __future__ import annotations

from collections.abc import Iterator

from cosim.decisions import Decision, SchedulerView, release, start
from cosim.env.actions.base import ActionMap, AgentPolicy
from cosim.job import JobState, Mode
from cosim.policies.backfill import easy_admits
from cosim.policies.heuristics import HEURISTICS


class SelectActions(AgentPolicy):
    """``select``: pick the job to run next; it starts or is reserved, the rest is backfilled.

    Args:
        amap: ``N`` job slots, no Wait, no kill slots.
        on_post: see :class:`AgentPolicy`.
        guard_wait: starvation guard (s), or None.
        backfill: ``easy`` (EASY around the reserved job) or ``none``.
        backfill_order: a static heuristic giving the backfill candidates' order.
        reserve: ``easy``: the agent chooses again at every decision point, and
            its choice is the reserved job the way EASY's head is (choosing
            another job that does not fit withdraws the previous reservation,
            without breaking it); ``sticky`` (RLScheduler): the reserved job
            keeps its reservation until it starts, and the agent is next asked
            then.
    """

    kind = "select"

    def __init__(self, amap: ActionMap, on_post=None, guard_wait: float | None = None,
                 backfill: str = "easy", backfill_order: str = "fcfs", reserve: str = "easy"):
        super().__init__(amap, on_post, guard_wait)
        self.backfill = backfill
        self.backfill_order = backfill_order
        self.reserve_mode = reserve
        self.static_key = HEURISTICS[backfill_order].static
        self._chosen = False     # easy: the agent chose this pass's reserved job

    def automatic(self, view: SchedulerView) -> Iterator[Decision]:
        """Sticky: keep the reserved job's promise and backfill around it. Easy: nothing yet."""
        self._chosen = False
        if self.reserve_mode == "sticky":
            yield from self._keep_reservation(view)
        elif self.reserved is not None and self.reserved.state != JobState.QUEUED:
            self.reserved = None

    def refresh(self, view: SchedulerView) -> bool:
        """The first N queued jobs, every one legal (the oldest alone past the guard)."""
        if self.reserved is not None and (self.reserve_mode == "sticky" or self._chosen):
            return False
        if self._choose is not None:
            # Acting in process with a shortcut: the window's list only if read.
            k = self._head_slots(view, self._m)
            head = view.queue.first()
        else:
            jobs = self._fill_head(view, self._m)
            k = len(jobs)
            head = jobs[0] if jobs else None
        # past the guard the oldest job alone is legal: a prefix of one
        legal = 1 if k and self._guarded(view, head) else k
        if legal != self.legal:     # only _legal_prefix writes this model's mask
            self._legal_prefix(legal)
        return k > 0

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Start the chosen job (and ask again), or reserve it and backfill (and stop)."""
        job = self._job_at(action, view)
        old = self.reserved
        if view.cluster.fits_now(job.procs, job.mem):
            if old is not None and old is not job and old.state == JobState.QUEUED:
                shadow, extra, extra_mem = view.shadow(old.procs, old.mem)
                if not easy_admits(job, view.now, shadow, extra, extra_mem):
                    # The agent puts this job first: the reserved one loses its
                    # promise (withdrawn, as EASY's head changes), not broken.
                    yield release(old, "agent chose another job")
                    self.reserved, self._easy_state = None, None
            elif old is job:
                self.reserved = None
            # A start takes free and extra units: the reservation's remembered
            # (shadow, extra) is stale, in this pass and in later ones.
            self._easy_state = None
            yield start(job, Mode.READY, "agent")
            return False
        if old is not None and old is not job and old.state == JobState.QUEUED:
            yield release(old, "agent chose another job")
        if old is not job:
            self._easy_state = None
        self._chosen = True
        self.reserved = job
        yield from self._keep_reservation(view)
        return True

    def kind_of(self, action: int) -> str:
        """``select``."""
        return "select"
