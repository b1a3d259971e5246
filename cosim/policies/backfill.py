"""Queue policies: a heuristic order combined with a backfilling variant.

- ``none``: start jobs in priority order while the head fits.
- ``greedy``: start every job that fits now, in priority order.
- ``easy``: textbook EASY (Lifka 1995; Mu'alem & Feitelson 2001): the head
  job gets a reservation at its shadow time; a later job may start now if it
  fits and either ends by the shadow time OR uses only the extra cores (those
  still free at the shadow time once the head is placed). Not the stricter
  "ends before the shadow time" variant. When the order puts another job
  before the head that holds the reservation (a dynamic order, or a static
  one such as SJF on an arrival) and that job waits, or starts where EASY
  would not admit it around the reservation, the old head's promise is withdrawn
  (``reservations_withdrawn``), as the ``select`` agent's identical choice
  withdraws it; only a promise still held and not kept counts as broken.
- relaxed EASY (``QueuePolicy(..., "easy", slack=s)``, Ward, Mahood and West,
  JSSPP 2002): the head is promised its shadow time plus ``s`` times its own
  estimate, and a job may backfill if it ends by that promise or uses the
  extra cores. The promise is kept (it only moves earlier while the job is
  head), so the head's bounded slowdown grows by at most ``s`` with exact
  estimates, and short jobs get through bursts behind a wide head. ``s = 0``
  is textbook EASY. Tuned policies search it (``python -m agents tune``).
- drain-aware EASY (``QueuePolicy(..., "easy", drain=(D, G))``): a head whose
  shadow time is more than ``D`` times its own estimate away gets no
  reservation, and every job that fits may start, until it has waited ``G``
  seconds; a head that already holds a promise keeps it. A narrow, short head
  behind a busy machine then does not hold the whole queue for days.
- ``conservative``: every queued job holds a reservation in an availability
  profile; a job may start early only where it delays no reservation.
  Reservations persist between passes. When something does not go as
  planned (a job ends early, an estimate changes) the plan is compressed in
  the heuristic's priority order: each job in turn gives back its
  reservation and takes the earliest start the others leave it, so no
  promise ever moves later and higher-priority jobs get first pick of the
  room that opened (Mu'alem & Feitelson 2001 compress in arrival order, which
  is ``fcfs+conservative``). A promise moves later only when running jobs
  overrun their expected ends.

EASY's backfill scan is vectorized over the queue columns, and an arrival
that changes nothing else is checked alone (the earlier candidates were
already refused under the same shadow time, and time only makes the test
stricter), which is what keeps long queues (RICC) cheap.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from operator import attrgetter

import numpy as np

from cosim.decisions import START, Decision, SchedulerView, release, reserve, start
from cosim.job import Job, Mode
from cosim.kernel import now as clock
from cosim.policies.easy import easy_admits, easy_backfill_list, easy_backfill_scan
from cosim.policies.profile import Profile

_READY, _BACKFILLED = Mode.READY, Mode.BACKFILLED
#: Above this many backfill candidates EASY rescans the queue after each start
#: instead of testing the candidates one by one (see :func:`easy_backfill_scan`).
_FEW_CANDIDATES = 32
#: Above this many jobs sized between the last pass's free units and now, a
#: pass whose reservation stands scans the queue instead (numpy beats a Python
#: test per job there).
_MANY_SINCE = 64
#: Bound on conservative compression sweeps (each moves some job earlier;
#: in practice the plan settles in two or three).
_MAX_SWEEPS = 1000
_NAN = math.nan


# ``_new(Decision, (START, job, mode, reason, NAN, True))`` builds a start decision
# without the NamedTuple constructor's Python frame (the hot path of EASY).
_new = tuple.__new__
_slot = attrgetter("queue_slot")

__all__ = ["QueuePolicy", "Profile", "BACKFILLS", "easy_admits", "easy_backfill_list",
           "easy_backfill_scan"]

#: Backfilling variants by name, with the line ``python -m cosim policies`` shows.
BACKFILLS: dict[str, str] = {
    "none": "start jobs in priority order; stop at the first that does not fit",
    "greedy": "start every job that fits now, in priority order (no reservation)",
    "easy": "EASY: reserve for the head job; backfill jobs that end before its shadow "
            "time or use only the extra cores",
    "conservative": "every queued job holds a reservation nobody may delay; reservations are "
                    "compressed in priority order (no promise moves later)",
}


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

    #: Whether an EASY pass whose head and reservation still stand tests only
    #: the jobs that could have changed (see ``_easy_candidates_since``); the
    #: tests turn it off to compare with full scans.
    narrow_passes = True
    #: Whether an EASY pass after arrivals alone checks only the new jobs (in
    #: queue order); a policy that backfills in another order turns it off.
    arrival_passes = True
    #: The scheduler may run this policy's passes as plain callbacks: it never
    #: yields a SimPy event to wait on (a subclass that does sets it True).
    yields_events = False

    def __init__(self, heuristic, backfill: str, rng: np.random.Generator | None = None,
                 slack: float = 0.0, drain: tuple[float, float] = (0.0, 0.0)):
        self.heuristic = heuristic
        self.backfill = backfill
        self.name = f"{heuristic.name}+{backfill}"
        if not (slack >= 0.0 and math.isfinite(slack)) or (slack and backfill != "easy"):
            raise ValueError(f"slack: {slack!r}; expected a finite number >= 0, and only with "
                             "easy backfilling")
        # Relaxed EASY (Ward, Mahood and West, JSSPP 2002): the head is promised
        # its shadow time plus ``slack`` times its own estimate, and backfilling
        # may use that room; see _relaxed.
        self.slack = float(slack)
        self.drain = (float(drain[0]), float(drain[1]))    # (D, G), see _drained; 0: off
        if not all(x >= 0.0 and math.isfinite(x) for x in self.drain) or (
                self.drain[0] and backfill != "easy"):
            raise ValueError(f"drain: {drain!r}; expected (factor, grace seconds), finite, "
                             ">= 0, and only with easy backfilling")
        if self.slack or self.drain[0]:
            self.narrow_passes = False
        if self.drain[0]:       # the grace runs out between passes: no stale pass state
            self.arrival_passes = False
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.static_key = heuristic.static
        self._dynamic = heuristic.dynamic
        self._decide = {"none": self._strict, "greedy": self._greedy, "easy": self._easy,
                        "conservative": self._conservative}[backfill]
        # EASY memory of the previous pass, for arrival-only passes.
        self._is_easy = (backfill == "easy" and self._dynamic is None and not self.slack
                         and not self.drain[0])
        self._easy_head: Job | None = None
        self._easy_state = (math.inf, 0, 0.0)
        # Free units when the last EASY pass ended with every queued job
        # checked (-1: unknown). A queued job no larger than this was refused
        # then and stays refused while the reservation holds (see _easy_quiet).
        self._easy_free = -1
        # Conservative: the persistent plan.
        self._profile: Profile | None = None
        self._planned: list[tuple[float, int, Job]] = []
        self._plan_seq = 0
        self._replan = True

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Decisions for this pass (a generator: each is applied before the next)."""
        if view.surprise:
            self._replan = True   # remembered even when the queue is empty now
        q = view.queue
        if not q.count:
            return ()
        if not view.released and self.arrival_is_idle(view):   # cheap test first
            return ()
        if self._dynamic is not None:
            slots = q.slots()
            q.key[slots] = self._dynamic(q, slots, view.now, view.cluster, self.rng)
            q.key_monotone = False
        return self._decide(view)

    def pass_is_idle(self, view: SchedulerView) -> bool:
        """Whether a pass now would decide nothing (EASY only; the scheduler then
        skips it).

        True when nothing unexpected happened since the last pass, the head
        still does not fit, its reservation (shadow time and extra units) is
        unchanged, no queued job grew able to fit, and no job queued since
        then fits and passes EASY's test. The scheduler then forgets
        ``view.new_jobs``: they stay refused while the reservation holds, and
        a queued job that grows able to fit is found by its size.
        """
        if not self._is_easy or view.surprise:
            return False
        # arrival_is_idle, inlined (once per arrival or end that could wake a pass)
        head = self._easy_head
        if head is not None and not view.released and view.queue.key_monotone \
                and view.cluster.free == 0 and head.queue_slot >= 0 \
                and view.queue.jobs[head.queue_slot] is head:
            return True
        return self._easy_quiet(view)

    def _easy_quiet(self, view: SchedulerView) -> bool:
        """Whether EASY's last pass still stands: a pass now would start nothing
        and keep the reservation.

        It stands (1) when only arrivals happened (nothing was freed: the
        arrival-only pass would test just the new jobs against the reservation
        kept), or (2) when besides them only jobs ended as expected (no
        surprise), the head still does not fit, a fresh shadow computation
        gives the reservation kept, and no queued job has a size between the
        free units at the end of the last pass and now. A job no larger than
        those free units was refused then; time only makes EASY's test
        stricter and the extra units are unchanged, so it stays refused.
        Either way, no new job may fit and pass EASY's test.
        """
        head = self._easy_head
        q = view.queue
        if head is None or self._dynamic is not None or head.queue_slot < 0 \
                or q.jobs[head.queue_slot] is not head:
            return False
        state = self._easy_state
        cl = view.cluster
        free = cl.free
        released = view.released
        if released:
            # The cheap tests first.
            last = self._easy_free
            if last < 0 or cl.free_mem != math.inf or head.procs <= free \
                    or head.promised != state[0] \
                    or (free > last and q.any_size_between(last, free)):
                return False
        new = view.new_jobs
        if new:
            jobs = q.jobs
            shadow, extra, extra_mem = state
            free_mem = cl.free_mem
            now = clock(view.env)
            hkey = None if q.key_monotone else q.key[head.queue_slot]
            for job in new:
                s = job.queue_slot
                if s < 0 or jobs[s] is not job:
                    continue
                if hkey is not None and q.key[s] < hkey:
                    return False   # a new head
                if job.procs <= free and job.mem <= free_mem and \
                        easy_admits(job, now, shadow, extra, extra_mem):
                    return False
        return not released or view.shadow(head.procs, head.mem) == state

    def arrival_is_idle(self, view: SchedulerView) -> bool:
        """Whether a pass now would decide nothing: EASY, only arrivals since the
        last pass, behind an unchanged head (a static order added in order), and
        no free unit to start or backfill anything on."""
        head = self._easy_head
        q = view.queue
        return (head is not None and self._is_easy and not view.released and q.key_monotone
                and view.cluster.free == 0 and head.queue_slot >= 0
                and q.jobs[head.queue_slot] is head)

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
        now = clock(view.env)
        # Arrival-only pass: nothing was freed, the head is unchanged, so the
        # shadow time and extra cores are those of the previous pass and only
        # the new jobs need checking.
        head = self._easy_head
        incremental = (not view.released and head is not None and head.queue_slot >= 0
                       and q.jobs[head.queue_slot] is head   # head in q
                       and self._dynamic is None and self.arrival_passes)
        if incremental and not q.key_monotone:
            hkey = q.key[head.queue_slot]
            for job in view.new_jobs:
                if job in q and q.key[job.queue_slot] < hkey:
                    incremental = False
                    break
        # Whether every queued job will have been checked at the end of this
        # pass (see pass_is_idle; unknown meanwhile, or if a caller ends the
        # pass early).
        checked_all = not incremental or (not view.surprise and self._easy_free >= 0)
        last_free = self._easy_free
        self._easy_free = -1
        if incremental:
            shadow, extra, extra_mem = self._easy_state
            candidates = [job for job in view.new_jobs if job in q]
            if self.static_key is not None and len(candidates) > 1:
                candidates.sort(key=lambda j: q.key[j.queue_slot])
        else:
            prev = head    # the previous head: it may hold a promise another job now comes before
            while True:
                if not q.count:
                    self._easy_head = None
                    return
                head = q.jobs[q.lo if q.key_monotone else q.head()]   # q.head(), inlined
                if prev is not None and head is not prev and prev.promised == prev.promised:
                    yield from self._give_way(view, prev, head)
                if head.procs > cl.free or head.mem > cl.free_mem:
                    break
                yield _new(Decision, (START, head, _READY, "fits at head", _NAN, True))
            shadow, extra, extra_mem = view.shadow(head.procs, head.mem)
            if self.slack:
                shadow = self._relaxed(head, shadow)
            self._easy_head = head
            if self.drain[0] and self._drained(head, shadow, now):
                shadow = extra = extra_mem = math.inf     # every job that fits may start
            elif head.promised != shadow:   # the scheduler keeps promises; tell it only changes
                yield reserve(head, shadow, "EASY head reservation")
            candidates = None
            if head is prev and last_free >= 0 and not view.surprise and self.narrow_passes \
                    and cl.free_mem == math.inf \
                    and (shadow, extra, extra_mem) == self._easy_state:
                candidates = self._easy_candidates_since(view, last_free, now, shadow, extra)
        if cl.free > 0 and (candidates is not None or q.smallest <= cl.free):
            if candidates is None:
                if q.small():
                    candidates = self._easy_candidates_list(q, cl, now, shadow, extra,
                                                            extra_mem, head)
                else:
                    candidates = self._easy_candidates_long(q, cl, now, shadow, extra,
                                                            extra_mem)
                    if candidates is None:   # many: rescan after each start instead
                        extra, extra_mem = yield from easy_backfill_scan(
                            q, cl, now, shadow, extra, extra_mem)
                        candidates = ()
            # Backfill in priority order. What is free and what is extra only
            # shrink as jobs start, so a candidate refused now stays refused.
            for job in candidates:
                if job.procs > cl.free or job.mem > cl.free_mem:
                    continue
                if now + job.estimate <= shadow:
                    yield _new(Decision, (START, job, _BACKFILLED, "ends before shadow time", _NAN, True))
                elif job.procs <= extra and job.mem <= extra_mem:
                    extra -= job.procs
                    extra_mem -= job.mem
                    yield _new(Decision, (START, job, _BACKFILLED, "uses extra cores", _NAN, True))
                else:
                    continue
                if cl.free == 0:
                    break
        self._easy_state = (shadow, extra, extra_mem)
        if checked_all:
            self._easy_free = cl.free

    def _relaxed(self, head: Job, shadow: float) -> float:
        """Relaxed EASY's promise to the head: its shadow time plus ``slack`` times
        its estimate, never later than a promise it already holds.

        Backfilling then admits jobs that end by this time (or use the extra
        units, counted at the true shadow time). Each such job ends by the
        promise and the extra units stay extra, so the head starts by its
        promise: the promise is kept, and it only moves earlier while the same
        job is head. Its bounded slowdown grows by at most ``slack`` (exact
        estimates).
        """
        bound = shadow + self.slack * head.estimate
        held = head.promised
        if held == held and shadow <= held < bound:
            return held
        return bound

    def _drained(self, head: Job, shadow: float, now: float) -> bool:
        """Drain-aware EASY (``drain = (D, G)``): a head whose shadow time is more
        than D times its estimate away gets no reservation until it has waited G
        seconds. On RICC an 8,000-core, 10-minute head reserved two days ahead held
        2,433 queued 32-core jobs for those two days. A head already holding a
        promise keeps it, so every promise made is still kept."""
        factor, grace = self.drain
        return (head.promised != head.promised and shadow - now > factor * head.estimate
                and now - head.submit < grace)

    @staticmethod
    def _give_way(view: SchedulerView, prev: Job, head: Job) -> Iterator[Decision]:
        """The order put ``head`` before ``prev``, which holds a promise: withdraw it
        when ``head`` is to wait (it takes the reservation) or would start and
        delay ``prev`` past its shadow time -- exactly when the ``select``
        agent's identical choice withdraws its reservation."""
        if prev not in view.queue:
            return                         # no longer queued: nothing to give up
        if view.cluster.fits_now(head.procs, head.mem):
            shadow, extra, extra_mem = view.shadow(prev.procs, prev.mem)
            if easy_admits(head, clock(view.env), shadow, extra, extra_mem):
                return
        yield release(prev, "EASY head changed")

    @staticmethod
    def _easy_candidates_since(view: SchedulerView, last_free: int, now: float, shadow: float,
                               extra: int) -> list[Job] | None:
        """EASY's backfill candidates in priority order when the last pass still
        stands but for what was freed since, or None when a scan of the queue
        is cheaper.

        Called when the head and its reservation (shadow time and extra
        units) are unchanged, nothing surprising happened, memory is not
        modelled, and the last pass ended with ``last_free`` units free and
        every queued job checked. A job no larger than ``last_free`` was
        refused then (it fitted all through that pass); the extra units are
        the same and time only makes EASY's test stricter, so it stays
        refused. Only the jobs sized between ``last_free`` and what is free
        now, and the jobs queued since, are left: the queue's groups by size
        give them without a scan. The list is a superset of what starts (the
        caller applies the exact test as units are taken; the head, which
        does not fit, is skipped there).
        """
        q = view.queue
        free = view.cluster.free
        jobs: list[Job] = []
        if free > last_free:
            groups = q.size_groups(last_free, free)
            if len(groups) == 1:
                group = groups[0]
                if len(group) > _MANY_SINCE:
                    return None
                jobs = [j for j in group if now + j.estimate <= shadow or j.procs <= extra]
            elif groups:
                if sum(map(len, groups)) > _MANY_SINCE:
                    return None
                jobs = [j for group in groups for j in group
                        if now + j.estimate <= shadow or j.procs <= extra]
                if len(jobs) > 1:
                    jobs.sort(key=_slot)
        jobs_at = q.jobs
        more = [j for j in view.new_jobs
                if j.procs <= last_free and j.queue_slot >= 0 and jobs_at[j.queue_slot] is j
                ] if view.new_jobs else None
        if more:
            jobs.extend(more)
            jobs.sort(key=_slot)
        if not q.key_monotone and len(jobs) > 1:
            key = q.key
            jobs.sort(key=lambda j: key[j.queue_slot])   # stable: ties in slot order
        return jobs

    @staticmethod
    def _easy_candidates_list(q, cl, now, shadow, extra, extra_mem, head) -> list[Job]:
        """EASY's backfill candidates in priority order, from a short queue."""
        free, free_mem = cl.free, cl.free_mem
        candidates = [j for j in q.live_jobs()
                      if j.procs <= free and j.mem <= free_mem and j is not head
                      and easy_admits(j, now, shadow, extra, extra_mem)]
        if not q.key_monotone and len(candidates) > 1:
            key = q.key
            candidates.sort(key=lambda j: key[j.queue_slot])
        return candidates

    @staticmethod
    def _easy_mask(q, cl, now, shadow, extra, extra_mem, sel):
        """Which of the queue slots ``sel`` (a slice or an array of slots) EASY
        may backfill now: a superset of the exact test (a hair of slack on the
        shadow time), which the caller then applies job by job."""
        procs = q.procs[sel]   # dead slots hold a size no machine has: never selected
        free = cl.free
        limit = (shadow - now) + (1e-9 * (shadow + now + 1.0) if now >= 0.0   # shadow >= now
                                  else 1e-9 * (abs(shadow) + abs(now) + 1.0))
        if cl.free_mem == np.inf:
            small = extra if extra < free else free
            if small < free:
                # a job may take ``free`` units if it ends in time, else ``small``
                return procs <= np.where(q.estimate[sel] <= limit, free, small)
            return procs <= free
        mem = q.mem[sel]
        ok = q.estimate[sel] <= limit
        ok |= (procs <= extra) & (mem <= extra_mem)
        ok &= procs <= free
        ok &= mem <= cl.free_mem
        return ok

    def _easy_candidates_long(self, q, cl, now, shadow, extra, extra_mem) -> list[Job] | None:
        """EASY's backfill candidates over a long queue, in priority order, or None
        when there are many.

        One masked scan finds them. When they are few (the usual case: little
        is free) the backfill loop tests each with the exact rule. When they
        are many (a long queue on a machine with room to spare, as on RICC)
        the caller rescans the queue after each start instead
        (:func:`easy_backfill_scan`), a few numpy calls per start rather than
        a Python test per candidate.
        """
        lo = q.lo
        rows = self._easy_mask(q, cl, now, shadow, extra, extra_mem, slice(lo, q.hi)).nonzero()[0]
        if len(rows) > _FEW_CANDIDATES:
            return None
        if not q.key_monotone and len(rows) > 1:
            rows = rows[np.argsort(q.key[rows + lo], kind="stable")]
        jobs = q.jobs
        # The jobs now: starting the first queued job moves q.lo.
        return [jobs[s] for s in (rows + lo).tolist()]

    # -- conservative ---------------------------------------------------------------
    def _conservative(self, view: SchedulerView) -> Iterator[Decision]:
        q, cl = view.queue, view.cluster
        now = view.now
        order = self._ordered(q, q.slots())
        if self._replan:
            self._replan = False
            profile = Profile(now, cl.free, cl.free_mem, view.ends(), cl.node_granular)
            jobs = [q.jobs[s] for s in order]
            plan = self._plan(profile, jobs, now)
            self._planned = [(t, i, job) for i, (job, t) in enumerate(plan.items())]
            heapq.heapify(self._planned)
            self._plan_seq = len(plan)
            placed = jobs
        else:
            profile = self._profile
            profile.advance(now)
            placed = [job for job in view.new_jobs if job in q]
            if len(placed) > 1:
                placed.sort(key=lambda j: q.key[j.queue_slot])
            plan = {}
            for job in placed:
                t = profile.earliest(job.procs, job.mem, job.estimate)
                profile.take(t, job.estimate, job.procs, job.mem)
                plan[job] = t
                self._plan_seq += 1
                heapq.heappush(self._planned, (t, self._plan_seq, job))
        self._profile = profile
        for job in placed:
            t = plan[job]
            if t > now and t != job.promised:
                yield reserve(job, t, "conservative reservation")
        # Start what is planned for now, in priority order.
        planned = self._planned
        due = set()
        while planned and planned[0][0] <= now:
            due.add(heapq.heappop(planned)[2])
        if not due:
            return
        waiting_before = False
        left = len(due)
        try:
            for s in order:
                job = q.jobs[s]
                if job is None:
                    continue
                if job in due:
                    if cl.fits_now(job.procs, job.mem):
                        yield start(job, Mode.BACKFILLED if waiting_before else Mode.READY,
                                    "planned start (delays no reservation)")
                        left -= 1
                        continue
                    # Cannot happen with a consistent plan; rebuild at the next pass.
                    self._replan = True
                waiting_before = True
        finally:
            # A caller that ends the pass early (a wrapper vetoing a start, as a
            # power cap does) leaves due jobs unstarted, and they are no longer
            # in the plan: rebuild it at the next pass so they are not forgotten.
            if left:
                self._replan = True

    @staticmethod
    def _plan(profile: Profile, jobs: list[Job], now: float) -> dict[Job, float]:
        """Priority-ordered conservative plan: every queued job's start time.

        ``jobs`` are the queued jobs in priority order; ``profile`` holds the
        running jobs as now expected and receives the plan.

        1. Every promise is kept as a hold: each promised job is placed at its
           promised start, in the order of the promises (or, where running
           jobs overran and it no longer fits there, at the earliest start
           after it: the only way a promise moves later).
        2. Then, in priority order, each job gives back its hold and takes the
           earliest start the others leave it. Its old place is among the
           candidates, so no job moves later; the heuristic decides who gets
           first pick of the room that early ends or new arrivals' gaps open.
           Jobs without a promise (new arrivals) are placed the same way,
           around every hold, so they delay nobody.
        """
        hold: dict[Job, float] = {}
        freed = math.inf   # the earliest room a move in the last sweep gave back
        promised = [j for j in jobs if j.promised == j.promised]
        promised.sort(key=lambda j: j.promised)   # stable: ties keep priority order
        for job in promised:
            t = profile.earliest(job.procs, job.mem, job.estimate,
                                 after=job.promised if job.promised > now else now)
            profile.take(t, job.estimate, job.procs, job.mem)
            hold[job] = t
        plan: dict[Job, float] = {}
        inf = math.inf
        for job in jobs:
            old = hold.get(job, inf)
            if old == inf:
                t = profile.earliest(job.procs, job.mem, job.estimate)
                profile.take(t, job.estimate, job.procs, job.mem)
            else:
                t = profile.earliest(job.procs, job.mem, job.estimate, own=old)
                if t < old:
                    profile.give_back(old, job.estimate, job.procs, job.mem)
                    profile.take(t, job.estimate, job.procs, job.mem)
                    if old < freed:
                        freed = old
            plan[job] = t
        # 3. Repeat until no job can move earlier: a job that moved may have
        #    opened room for one of higher priority. In the fixed point every
        #    future start is a moment when something ends, so the scheduler is
        #    awake then (there is no timer to wake it at an arbitrary time).
        #    Only room freed before a job's start can move it, so each sweep
        #    skips the jobs that start no later than the earliest room freed.
        for _ in range(_MAX_SWEEPS):
            if freed == inf:
                break
            threshold, freed = freed, inf
            for job in jobs:
                old = plan[job]
                if old <= threshold:
                    continue
                t = profile.earliest(job.procs, job.mem, job.estimate, own=old)
                if t < old:
                    profile.give_back(old, job.estimate, job.procs, job.mem)
                    profile.take(t, job.estimate, job.procs, job.mem)
                    plan[job] = t
                    if old < freed:
                        freed = old
        return plan
