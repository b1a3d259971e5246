"""The shared part of the action models: the index map and the scheduler-side base.

:class:`AgentPolicy` posts each decision point as a SimPy event that the Gym
environment answers (:meth:`AgentPolicy.answer`), or, for a trained agent run
as a plain policy, asks an ``act(observation, mask)`` function in process
(:meth:`AgentPolicy.acting`). The models themselves are described in
:mod:`cosim.env.actions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import simpy

from cosim.decisions import Decision, SchedulerView, reserve, start
from cosim.job import Job, JobState, Mode
from cosim.policies.backfill import easy_admits, easy_backfill_list, easy_backfill_scan


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
        self._n = amap.n          # ActionMap's sizes are properties: read once
        self._m = amap.window
        self.request: simpy.Event | None = None
        self.action = -1
        self.last_kind = ""
        self.level = 1            # dras: the level being asked
        self.reserved: Job | None = None
        self.slots = None      # queue slots of the window's jobs, when the model keeps them
        self.backfill = "none"
        self._easy_state: tuple | None = None   # shadow, extra units and memory of the reservation
        self.legal = 0         # the legal prefix's length, where the mask is one
        self._act: Callable | None = None
        self._observe: Callable | None = None
        self._choose: Callable | None = None
        self._window_stale = False   # see _head_slots

    def acting(self, observe: Callable, act: Callable[[np.ndarray, np.ndarray], int], *,
               name: str = "agent", choose: Callable | None = None) -> AgentPolicy:
        """Answer in process: ``act(observe(view, self), mask)`` picks each action.

        A trained agent run this way (``rl:DIR`` in ``python -m cosim run``)
        makes exactly the choices it would make in the environment.

        ``choose(view, self)``, when given, is asked first: a shortcut that
        answers without the observation (a trained network fused with the
        encoder, :meth:`cosim.env.observations.KernelEncoder.head_projection`)
        and must return ``act``'s answer or None (then ``act`` is asked).
        """
        self._observe, self._act, self.name = observe, act, name
        self._choose = choose
        return self

    @property
    def yields_events(self) -> bool:
        """Whether a pass may wait on an event: only while the agent answers from outside.

        Acting in process (:meth:`acting`), every choice is made inside the
        pass, so the scheduler can run passes as callbacks, as it does for
        the heuristics (:class:`cosim.actors.scheduler.Scheduler`).
        """
        return self._act is None

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
                action = self._in_process(view)
            stop = yield from self.perform(action, view)
            if stop:
                return

    def _ask(self, view: SchedulerView) -> Iterator[simpy.Event]:
        """One choice, from the environment (a posted event) or in process (``act``), for
        models that ask in the middle of their own pass (``inspect``, ``backfill``)."""
        if self._act is None:
            request = self.request = view.env.event()
            self.on_post(request)
            yield request            # answered by :meth:`answer`
            return self.action
        return self._in_process(view)

    def _in_process(self, view: SchedulerView) -> int:
        """The in-process agent's legal action: the ``choose`` shortcut's, else ``act``'s."""
        choose = self._choose
        action = None if choose is None else choose(view, self)
        if action is None:
            self.window_now(view)
            action = self._act(self._observe(view, self), self.mask)
        action = self.validate(int(action))
        self.last_kind = self.kind_of(action)
        return action

    def answer(self, action: int) -> str:
        """Answer the pending request with ``action``; returns its kind (see :meth:`kind_of`)."""
        action = self.action = self.validate(int(action))
        self.last_kind = self.kind_of(action)
        request, self.request = self.request, None
        request.succeed(None)
        return self.last_kind

    def validate(self, action: int) -> int:
        """``action`` if legal, else Wait where the model has it, else the first legal action."""
        if 0 <= action < self._n and self.mask[action]:
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

    def _fill_head(self, view: SchedulerView, n: int) -> list[Job]:
        """Put the first ``n`` queued jobs (arrival order) in the window and return them.

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
        self._window_stale = False
        return jobs

    def _head_slots(self, view: SchedulerView, n: int) -> int:
        """:meth:`_fill_head` for acting in process with a ``choose`` shortcut: how many.

        On a long queue only :attr:`slots` is recorded and the window's list
        is filled when something reads it (:meth:`window_now`, before an
        observation is built): the shortcut and :meth:`_job_at` need only
        the slots, and a list of up to ``n`` jobs per decision is a cost.
        """
        q = view.queue
        if q.small():
            return len(self._fill_head(view, n))
        # q.slots()[:n] without np.flatnonzero's Python wrapper, the offset on n slots only
        slots = q.alive[q.lo:q.hi].nonzero()[0][:n]
        slots += q.lo
        self.slots = slots
        self._window_stale = True
        return len(slots)

    def window_now(self, view: SchedulerView) -> None:
        """Fill the window's list from :attr:`slots` if :meth:`_head_slots` left it stale
        (call before reading :attr:`window` in a ``choose`` shortcut)."""
        if self._window_stale:
            self._window_stale = False
            qjobs = view.queue.jobs
            jobs = [qjobs[s] for s in self.slots.tolist()]
            self.window[:] = jobs + [None] * (len(self.window) - len(jobs))

    def _job_at(self, action: int, view: SchedulerView) -> Job:
        """The window's job at ``action`` (also while the window's list is stale)."""
        if self._window_stale:
            return view.queue.jobs[int(self.slots[action])]
        return self.window[action]

    def _legal_prefix(self, k: int) -> None:
        """Mark the first ``k`` actions legal and every other one illegal (two
        slice writes instead of a Python list converted element by element)."""
        mask = self.mask
        mask[:k] = 1
        mask[k:] = 0
        self.legal = k

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
