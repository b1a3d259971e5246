"""Action models: what the agent decides at a decision point, and how it becomes decisions.

Every model uses one flat ``Discrete`` space with a documented index map
(masks stay 1-D, ``int8``, 1 = legal, never all zero) and is chosen by name
(``actions=`` in the environment, recorded in checkpoints):

``start`` (DBF split window, seed 000)
    ``0 .. M-1``: start the job in window slot i (``M_head`` slots from the
    head of the queue, oldest first, then ``M_tail`` from its tail, newest
    first: DBF's indices L, L-1, ...); ``M``: Fwd (wait for the next arrival or
    end); ``M+1 .. M+K``: kill running slot k and requeue it (RLSchert).
    A start is legal when the job fits now. As in DBF's schedule cycling the
    agent is asked at every decision point while jobs wait (each arrival and
    completion) and keeps placing jobs until it chooses Fwd; an illegal
    action is taken as Fwd. Nothing is reserved unless the starvation guard
    is on.

``select`` (RLScheduler, the Cunha thesis)
    ``0 .. N-1``: the job, among the first N queued (arrival order), to run
    next. If it fits, it starts and the agent chooses again; if not, it is
    reserved at its EASY shadow time and the scheduler backfills around the
    reservation with a named rule (``backfill="easy"``, candidates in
    ``backfill_order``, FCFS by default; or ``"none"``). The next decision
    comes at the next event: with ``reserve="easy"`` (default) the agent
    chooses again then, like EASY's head, and choosing another job that does
    not fit withdraws the previous reservation (a withdrawal, not a broken
    promise); with ``reserve="sticky"`` (RLScheduler) the reservation holds
    until the job starts and the agent is next asked then. Every present job
    is legal; an illegal index is taken as the first legal one.

``dras`` (DRAS, seed 004, two levels)
    ``0 .. W-1``. Level 1 scores the first W queued jobs (every present job
    legal): one that fits starts (mode ready) and level 1 repeats; one that
    does not is reserved at its shadow time and keeps the reservation until
    it starts (mode reserved); level 1 stops. Level 2 fills the same W slots
    with backfill candidates, the queued jobs EASY admits around the
    reservation (:func:`cosim.policies.easy_admits`), and the agent starts
    one (mode backfilled); candidates are recomputed and level 2 repeats
    until none remain. Level 2 has no stop action.

A kill (``start`` model) is legal only for a job that has run for some
time: a job cannot be killed in the instant it started (that loop would
freeze simulated time). With ``guard_wait`` set, a starvation guard bounds
waits in every model: once the queue's oldest job has waited that long, it
holds an EASY reservation (``start``: a real one, which the scheduler records
and checks; only window jobs EASY would backfill around it stay legal, and
it alone while it fits) or is the only legal choice (``select``, ``dras``
level 1).

:class:`AgentPolicy` is the scheduler-side base: it posts each decision point
as a SimPy event that the Gym environment answers (:meth:`AgentPolicy.answer`),
or, for a trained agent run as a plain policy, asks an ``act(observation,
mask)`` function in process (:meth:`AgentPolicy.acting`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import simpy

from cosim.errors import ScenarioError
from cosim.job import Job, JobState, Mode
from cosim.policies.backfill import easy_admits, easy_backfill_list, easy_backfill_scan
from cosim.policies.heuristics import HEURISTICS
from cosim.policy import Decision, SchedulerView, kill, release, reserve, start

__all__ = ["ActionMap", "AgentPolicy", "StartActions", "SelectActions", "DrasActions",
           "KillActions", "ACTION_MODELS", "make_action_model"]


@dataclass(frozen=True)
class ActionMap:
    """Where each kind of action lives in the flat index space.

    Attributes:
        m_head: job slots from the head of the queue (for ``select`` and
            ``dras``: all the job slots).
        m_tail: job slots from the tail of the queue (``start`` only).
        kill_slots: running jobs the agent may kill (``start`` only).
        has_wait: whether a Wait/Fwd index follows the job slots.
    """

    m_head: int
    m_tail: int
    kill_slots: int
    has_wait: bool = True

    @property
    def window(self) -> int:
        """Job slots M = M_head + M_tail."""
        return self.m_head + self.m_tail

    @property
    def wait(self) -> int:
        """Index of Wait / Fwd (-1 when the model has none)."""
        return self.window if self.has_wait else -1

    @property
    def kill0(self) -> int:
        """Index of kill slot 0."""
        return self.window + (1 if self.has_wait else 0)

    @property
    def n(self) -> int:
        """Number of actions."""
        return self.kill0 + self.kill_slots


class AgentPolicy:
    """A policy whose choices come from an agent; subclasses are the action models.

    The scheduler calls :meth:`decide` at each decision point. It runs the
    model's automatic decisions (:meth:`automatic`), then, while the model
    wants a choice (:meth:`refresh`), gets one action (from the environment
    through a posted event, or from ``act``) and turns it into decisions
    (:meth:`perform`). The window (:attr:`window`), the running slots
    (:attr:`kill_jobs`) and the mask (:attr:`mask`) always describe the
    choice being asked, so observations and actions refer to the same jobs.

    Args:
        amap: the action index map.
        on_post: called with the request event when a choice is wanted.
        guard_wait: starvation guard (s), or None.
    """

    name = "agent"
    kind = ""
    static_key = None    # the queue order the scheduler keeps (arrival order)

    def __init__(self, amap: ActionMap, on_post: Callable[[simpy.Event], None] | None = None,
                 guard_wait: float | None = None):
        self.amap = amap
        self.on_post = on_post
        self.guard_wait = guard_wait
        self.window: list[Job | None] = [None] * amap.window
        self.kill_jobs: list[Job | None] = [None] * amap.kill_slots
        self.mask = np.zeros(amap.n, dtype=np.int8)
        self.request: simpy.Event | None = None
        self.action = -1
        self.last_kind = ""
        self.level = 1            # dras: the level being asked
        self.reserved: Job | None = None
        self.slots = None      # queue slots of the window's jobs, when the model keeps them
        self.backfill = "none"
        self._easy_state: tuple | None = None   # shadow, extra units and memory of the reservation
        self._act: Callable | None = None
        self._observe: Callable | None = None

    def acting(self, observe: Callable, act: Callable[[np.ndarray, np.ndarray], int], *,
               name: str = "agent") -> AgentPolicy:
        """Answer in process: ``act(observe(view, self), mask)`` picks each action.

        A trained agent run this way (``rl:DIR`` in ``python -m cosim run``)
        makes exactly the choices it would make in the environment.
        """
        self._observe, self._act, self.name = observe, act, name
        return self

    # -- the scheduler's side ------------------------------------------------------
    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """Automatic decisions, then one agent choice after another (see the class docstring)."""
        yield from self.automatic(view)
        while self.refresh(view):
            yield from self.before_asking(view)
            if self._act is None:
                request = self.request = view.env.event()
                self.on_post(request)
                yield request            # answered by :meth:`answer`; nothing to apply
                action = self.action
            else:
                action = self.validate(int(self._act(self._observe(view, self), self.mask)))
                self.last_kind = self.kind_of(action)
            stop = yield from self.perform(action, view)
            if stop:
                return

    def answer(self, action: int) -> str:
        """Answer the pending request with ``action``; returns its kind (see :meth:`kind_of`)."""
        action = self.action = self.validate(int(action))
        self.last_kind = self.kind_of(action)
        request, self.request = self.request, None
        request.succeed(None)
        return self.last_kind

    def validate(self, action: int) -> int:
        """``action`` if legal, else Wait where the model has it, else the first legal action."""
        if 0 <= action < self.amap.n and self.mask[action]:
            return action
        if self.amap.has_wait and self.mask[self.amap.wait]:
            return self.amap.wait
        return int(np.argmax(self.mask))

    # -- what each model defines ---------------------------------------------------------
    def automatic(self, view: SchedulerView) -> Iterator[Decision]:
        """Decisions taken without asking at the start of a pass."""
        yield from ()

    def refresh(self, view: SchedulerView) -> bool:
        """Recompute window, running slots and mask; whether the agent is asked now."""
        raise NotImplementedError

    def before_asking(self, view: SchedulerView) -> Iterator[Decision]:
        """Decisions the state just refreshed calls for, before the agent is asked."""
        yield from ()

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """The decisions of a legal ``action``; returns True to end the pass."""
        raise NotImplementedError

    def kind_of(self, action: int) -> str:
        """``start``, ``wait``, ``kill``, ``select``, ``reserve`` or ``backfill``."""
        raise NotImplementedError

    # -- shared pieces -------------------------------------------------------------------
    def _guarded(self, view: SchedulerView, head: Job | None) -> bool:
        """Whether the queue's oldest job has waited past the guard."""
        return (self.guard_wait is not None and head is not None
                and view.now - head.submit >= self.guard_wait)

    def _fill_head(self, view: SchedulerView, m: list[int], n: int) -> list[Job]:
        """Put the first ``n`` queued jobs (arrival order) in the window; mark present ones legal.

        Also records their queue slots (:attr:`slots`) so encoders can read the
        queue's columns without touching the jobs.
        """
        q = view.queue
        if q.small():
            jobs = q.live_jobs()[:n]
            self.slots = [j.queue_slot for j in jobs]
        else:
            slots = q.slots()[:n]
            self.slots = slots
            qjobs = q.jobs
            jobs = [qjobs[s] for s in slots.tolist()]
        k = len(jobs)
        self.window[:] = jobs + [None] * (len(self.window) - k)
        m[:k] = [1] * k
        return jobs

    def _keep_reservation(self, view: SchedulerView) -> Iterator[Decision]:
        """Start the reserved job if it fits now; else renew its promise and backfill around it.

        Returns whether the reservation still holds. Like EASY's own pass, a
        pass after arrivals only (nothing freed, no expectation changed: the
        shadow time and the extra units are the previous pass's) checks just
        the new jobs; the earlier candidates were refused under the same shadow
        time, and time only makes the test stricter.
        """
        job = self.reserved
        if job is None:
            return False
        if job.state != JobState.QUEUED:
            self.reserved = None
            return False
        cl = view.cluster
        if cl.fits_now(job.procs, job.mem):
            self.reserved = None
            self._easy_state = None
            yield start(job, Mode.READY, "agent reservation reached")
            return False
        q = view.queue
        now = view.now
        state = self._easy_state
        if state is None or view.released:
            shadow, extra, extra_mem = view.shadow(job.procs, job.mem)
            if shadow != job.promised:
                yield reserve(job, shadow, "agent reservation")
            candidates = None
        else:
            shadow, extra, extra_mem = state
            candidates = [j for j in view.new_jobs if j in q]
            if not q.key_monotone and len(candidates) > 1:
                key = q.key
                candidates.sort(key=lambda j: key[j.queue_slot])
        if self.backfill == "easy" and cl.free > 0 and (candidates or
                                                        (candidates is None and q.min_procs() <= cl.free)):
            if candidates is None and not q.small():
                backfill = easy_backfill_scan(q, cl, now, shadow, extra, extra_mem)
            else:
                if candidates is None:
                    free, free_mem = cl.free, cl.free_mem
                    candidates = [j for j in q.live_jobs()
                                  if j is not job and j.procs <= free and j.mem <= free_mem
                                  and easy_admits(j, now, shadow, extra, extra_mem)]
                    if not q.key_monotone and len(candidates) > 1:
                        key = q.key
                        candidates.sort(key=lambda j: key[j.queue_slot])
                backfill = easy_backfill_list(candidates, cl, now, shadow, extra, extra_mem)
            extra, extra_mem = yield from backfill
        self._easy_state = (shadow, extra, extra_mem)
        return True

    def _reserve(self, job: Job, view: SchedulerView) -> Iterator[Decision]:
        """Reserve ``job`` at its shadow time (and backfill around it, for ``select``)."""
        self.reserved = job
        self._easy_state = None
        yield from self._keep_reservation(view)


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
        m = [0] * self.amap.n
        jobs = self._fill_head(view, m, self.amap.window)
        if jobs and self._guarded(view, jobs[0]):
            m = [0] * self.amap.n
            m[0] = 1
        self.mask[:] = m
        return bool(jobs)

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Start the chosen job (and ask again), or reserve it and backfill (and stop)."""
        job = self.window[action]
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
        m = [0] * self.amap.n
        if self.reserved is None:
            self.level = 1
            jobs = self._fill_head(view, m, self.amap.window)
            if jobs and self._guarded(view, jobs[0]):
                m = [0] * self.amap.n
                m[0] = 1
        else:
            self.level = 2
            jobs = self._candidates(view)
        self._free, self._free_mem = view.cluster.free, view.cluster.free_mem
        if self.level == 2:
            window = self.window
            for i in range(len(window)):
                job = jobs[i] if i < len(jobs) else None
                window[i] = job
                m[i] = job is not None
        self.mask[:] = m
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
            if (j is not None and j is not job and j.procs <= free and j.mem <= free_mem
                    and easy_admits(j, now, shadow, extra, extra_mem)):
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


class KillActions(AgentPolicy):
    """``kill``: a base policy schedules; at each prediction round the agent may kill a job.

    RLSchert's kill decision, learned: when the prediction hub has new
    remaining-time predictions for running jobs, the agent sees the K
    candidates whose predicted run time most exceeds their pre-run prediction
    and kills one of them (it is requeued and re-estimated) or keeps them
    all. After a kill it is asked again. The base policy (a heuristic, or a
    trained ``rl:DIR`` agent) makes every start.

    Index map: ``0``: keep; ``1 .. K``: kill candidate k-1. A candidate must
    have run for some time and not been killed before (``max_kills``).

    Args:
        amap: no job slots, Keep, ``K`` kill slots.
        base: the policy that schedules.
        hub: the :class:`cosim.prediction.PredictionHub` whose predictions the
            agent reads (given by :meth:`bind`).
        rule: the kill rule, the teacher the agent imitates first.
        on_post: see :class:`AgentPolicy`.
        max_kills: kills per job at most.
    """

    kind = "kill"

    def __init__(self, amap: ActionMap, base, hub=None, rule=None, on_post=None,
                 max_kills: int = 1):
        super().__init__(amap, on_post, None)
        self.base = base
        self.hub = hub
        self.rule = rule
        self.max_kills = max_kills
        self.static_key = getattr(base, "static_key", None)
        self.preds: list = [None] * amap.kill_slots   # JobPrediction of each candidate
        self._round = -1.0
        self._doomed: set[Job] = set()

    def bind(self, hub) -> KillActions:
        """Read predictions from ``hub`` (the run's prediction hub)."""
        self.hub = hub
        return self

    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """Kill decisions on a fresh prediction round, then the base policy's decisions."""
        now = view.now
        if self.hub is not None and now != self._round and self._fresh(now):
            self._round = now
            self._doomed = set()
            yield from super().decide(view)
        yield from self.base.decide(view)

    def _fresh(self, now: float) -> bool:
        return any(p.remaining_at == now for _, p in self.hub.running_predictions())

    def refresh(self, view: SchedulerView) -> bool:
        """The K running jobs predicted to overrun their pre-run prediction the most."""
        now = view.now
        cands = []
        for job, pred in self.hub.running_predictions():
            if (pred.remaining_at == now and now > job.start and job.process is not None
                    and job.attempts <= self.max_kills and pred.prerun > 0
                    and job not in self._doomed):
                cands.append((-(pred.run_hat / pred.prerun), job.id, job, pred))
        cands.sort(key=lambda c: (c[0], c[1]))
        m = [0] * self.amap.n
        m[0] = 1
        for k in range(self.amap.kill_slots):
            if k < len(cands):
                self.kill_jobs[k], self.preds[k] = cands[k][2], cands[k][3]
                m[1 + k] = 1
            else:
                self.kill_jobs[k], self.preds[k] = None, None
        self.mask[:] = m
        return bool(cands)

    def perform(self, action: int, view: SchedulerView) -> Iterator[Decision]:
        """Keep (end the round) or kill a candidate (and ask again)."""
        if action == 0:
            return True
        job = self.kill_jobs[action - 1]
        self._doomed.add(job)     # its interrupt is processed after this pass
        yield kill(job, "learned kill: run time badly underestimated", requeue=True)
        return False

    def kind_of(self, action: int) -> str:
        """``wait`` (keep) or ``kill``."""
        return "wait" if action == 0 else "kill"

    def rule_says(self, view: SchedulerView) -> list[bool]:
        """Per kill slot: whether the kill rule would kill that candidate now."""
        rule, now = self.rule, view.now
        out = []
        for job, pred in zip(self.kill_jobs, self.preds):
            if job is None or rule is None:
                out.append(False)
                continue
            short_waiting = True
            if rule.need_short_waiting:
                q = view.queue
                short_waiting = bool(q.count and np.any(q.estimate[q.slots()] < rule.short))
            out.append(bool(rule.should_kill(now - job.start, pred.prerun, pred.run_hat,
                                             job.attempts - 1, short_waiting)))
        return out

    def rule_action(self, view: SchedulerView) -> int:
        """The rule's choice: the first candidate it would kill, else keep."""
        for k, yes in enumerate(self.rule_says(view)):
            if yes:
                return 1 + k
        return 0


#: Action models by the name the environment's ``actions=`` takes.
ACTION_MODELS: dict[str, type[AgentPolicy]] = {
    "start": StartActions, "select": SelectActions, "dras": DrasActions, "kill": KillActions}

#: Default window per model: ``(M_head, M_tail)`` for start, N for select, W for dras.
DEFAULT_WINDOWS = {"start": (10, 0), "select": 128, "dras": 50, "kill": 0}


def make_action_model(name: str, window, kill_slots: int = 0, *, on_post=None,
                      guard_wait: float | None = None, backfill: str = "easy",
                      backfill_order: str = "fcfs", reserve: str = "easy", base=None,
                      rule=None) -> AgentPolicy:
    """The action model ``name`` (see the module docstring), validating its options.

    ``base`` (the scheduling policy) and ``rule`` (the teacher's kill rule)
    are for ``kill``.

    Raises:
        ScenarioError: an unknown model, a window or option the model cannot take.
    """
    if name not in ACTION_MODELS:
        raise ScenarioError("actions", repr(name), f"one of {', '.join(ACTION_MODELS)}")
    if name == "kill":
        if window not in (None, 0):
            raise ScenarioError("window", repr(window), "no window for actions='kill'")
        k = int(kill_slots) or 4
        if k < 1:
            raise ScenarioError("kill_slots", repr(kill_slots), "at least 1 for actions='kill'")
        if base is None:
            raise ScenarioError("base_policy", "nothing", "the policy that schedules under "
                                "actions='kill' (e.g. sjf+easy)")
        return KillActions(ActionMap(0, 0, k, has_wait=True), base, rule=rule, on_post=on_post,
                           max_kills=rule.max_kills if rule is not None and rule.max_kills else 1)
    if window is None:
        window = DEFAULT_WINDOWS[name]
    if name == "start":
        if isinstance(window, int) or len(window) != 2:
            raise ScenarioError("window", repr(window), "(M_head, M_tail) for actions='start'")
        m_head, m_tail = int(window[0]), int(window[1])
        if m_head < 0 or m_tail < 0 or m_head + m_tail < 1:
            raise ScenarioError("window", repr(window), "(M_head, M_tail) with M_head + M_tail >= 1")
        if guard_wait is not None and m_head < 1:
            raise ScenarioError("guard_wait", repr(guard_wait), "a head window (M_head >= 1)")
        return StartActions(ActionMap(m_head, m_tail, int(kill_slots)), on_post, guard_wait)
    if not isinstance(window, int):
        if len(window) == 2 and int(window[1]) == 0:
            window = int(window[0])
        else:
            raise ScenarioError("window", repr(window),
                                f"a number of job slots for actions={name!r}")
    if window < 1:
        raise ScenarioError("window", repr(window), "at least 1 job slot")
    if kill_slots:
        raise ScenarioError("kill_slots", repr(kill_slots), f"0 for actions={name!r} "
                            "(kill slots belong to the 'start' model)")
    amap = ActionMap(int(window), 0, 0, has_wait=False)
    if name == "select":
        if backfill not in ("easy", "none"):
            raise ScenarioError("backfill", repr(backfill), "easy or none")
        heuristic = HEURISTICS.get(backfill_order)
        if heuristic is None or heuristic.static is None:
            statics = [h.name for h in HEURISTICS.values() if h.static is not None]
            raise ScenarioError("backfill_order", repr(backfill_order),
                                f"a static order among {', '.join(statics)}")
        if reserve not in ("easy", "sticky"):
            raise ScenarioError("reserve", repr(reserve), "easy or sticky")
        return SelectActions(amap, on_post, guard_wait, backfill, backfill_order, reserve)
    return DrasActions(amap, on_post, guard_wait)
