"""The agent's side of the scheduler: the action index map, the window, the mask, the guard.

Action space: one flat ``Discrete(M + 1 + K)`` with this index map (masks stay 1-D):

====================  ===============================================
index                 meaning
====================  ===============================================
``0 .. M-1``          start the job in window slot i (head slots first,
                      then tail slots; DBF split window, seed 000)
``M``                 Wait / Fwd: do nothing until the next arrival or end
``M+1 .. M+K``        kill running slot k and requeue it (RLSchert)
====================  ===============================================

The mask is ``int8`` (1 = legal). Wait is legal unless nothing runs and no
job will arrive (then waiting would stall the simulation and some start is
always legal); an illegal action is taken as Wait. With ``guard_wait`` set, a
starvation guard bounds waits: once the queue's first job has waited that
long it holds an EASY reservation (a real one, which the scheduler records
and checks), so the mask allows only it while it fits and otherwise only
window jobs that EASY itself would backfill (:func:`cosim.policies.easy_admits`).

:class:`AgentPolicy` answers decision points from outside the simulation (the
Gym environment's ``step``); :class:`ActingPolicy` answers them in process
with any ``act(observation, mask) -> action`` function, so a trained agent
runs through the same window, mask and decoding as in training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import simpy

from cosim.job import Job, Mode
from cosim.policies.backfill import easy_admits
from cosim.policy import KILL, WAIT, Decision, SchedulerView, kill, reserve, start

__all__ = ["ActionMap", "AgentPolicy", "ActingPolicy"]


@dataclass(frozen=True)
class ActionMap:
    """Where each kind of action lives in the flat index space."""

    m_head: int
    m_tail: int
    kill_slots: int

    @property
    def window(self) -> int:
        """Window slots M = M_head + M_tail."""
        return self.m_head + self.m_tail

    @property
    def wait(self) -> int:
        """Index of Wait / Fwd."""
        return self.window

    @property
    def kill0(self) -> int:
        """Index of kill slot 0."""
        return self.window + 1

    @property
    def n(self) -> int:
        """Number of actions."""
        return self.window + 1 + self.kill_slots


class AgentPolicy:
    """A policy whose decisions come from outside: it posts each decision point as an event.

    It keeps the current window and running slots, so the mask, the
    observation and the decoded action all refer to the same jobs.

    Args:
        amap: the action index map.
        on_post: called with the request event when a decision is wanted.
        guard_wait: starvation guard (s), or None.
    """

    name = "agent"

    def __init__(self, amap: ActionMap, on_post: Callable[[simpy.Event], None] | None = None,
                 guard_wait: float | None = None):
        self.amap = amap
        self.on_post = on_post
        self.guard_wait = guard_wait
        self.guarded: Job | None = None
        self._shadow: float | None = None    # the guarded job's shadow time, if it waits
        self.window: list[Job | None] = [None] * amap.window
        self.kill_jobs: list[Job | None] = [None] * amap.kill_slots
        self.mask = np.zeros(amap.n, dtype=np.int8)
        self.request: simpy.Event | None = None
        self.last: Decision | None = None
        self._wanted = False

    # -- the scheduler's side ------------------------------------------------------
    def decide(self, view: SchedulerView) -> Iterator[Decision | simpy.Event]:
        """Post decision points until the agent waits or kills (see :mod:`cosim.policy`)."""
        while self.wants_decision(view):
            request = self.request = view.env.event()
            yield from self._guard_reservation(view)
            self.on_post(request)
            yield request            # the scheduler applies what :meth:`answer` sends
            last = self.last
            if last.action == WAIT or last.action == KILL:
                # A kill's cores come back when the interrupt is processed,
                # which wakes the scheduler again.
                return

    def answer(self, decision: Decision) -> None:
        """Answer the pending request with ``decision`` (from :meth:`decode`)."""
        self.last = decision
        request, self.request = self.request, None
        request.succeed(None if decision.action == WAIT else decision)

    # -- window, mask, guard -----------------------------------------------------------
    def refresh(self, view: SchedulerView) -> None:
        """Recompute the window, the running slots and the mask."""
        # Called at every scheduler pass: plain lists, one copy into the int8 mask.
        amap, q, cl = self.amap, view.queue, view.cluster
        n_window = amap.window
        window = self.window
        m = [0] * amap.n
        m[n_window] = 1   # Wait
        if q.count:
            m_head, m_tail = amap.m_head, amap.m_tail
            if q.small():
                jobs = q.live_jobs()
                head = jobs[:m_head]
                rest = len(jobs) - m_head
                tail = jobs[len(jobs) - min(rest, m_tail):] if m_tail and rest > 0 else []
            else:
                # Long queue: touch only the window's slots, not every queued job.
                slots = q.slots()
                n = len(slots)
                qjobs = q.jobs
                head = [qjobs[s] for s in slots[:m_head].tolist()]
                rest = n - m_head
                tail = ([qjobs[s] for s in slots[n - min(rest, m_tail):].tolist()]
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
        any_start = 1 in m[:n_window]
        ends = view.ends()
        if not ends and any_start and not view.arrivals_pending():
            # Nothing would ever wake the scheduler again: waiting would stall.
            m[n_window] = 0
        if amap.kill_slots:
            kill_jobs = self.kill_jobs
            # The running jobs expected to end last are the kill candidates.
            for k in range(amap.kill_slots):
                job = ends[-1 - k][2] if k < len(ends) else None
                kill_jobs[k] = job
                m[amap.kill0 + k] = job is not None
        if self.guarded is not None and m[0]:
            # The guarded job fits: it starts now, before anything else.
            m = [0] * amap.n
            m[0] = 1
        self.mask[:] = m
        self._wanted = any_start or 1 in m[n_window + 1:]

    def _guard(self, view: SchedulerView, head: Job | None, m: list[int]) -> None:
        """Starvation guard: once the queue's first job has waited ``guard_wait``
        seconds it holds an EASY reservation (seed 003, ch. 2): only window jobs
        EASY would backfill around it stay legal."""
        self.guarded = None
        self._shadow = None
        if self.guard_wait is None or head is None or view.now - head.submit < self.guard_wait:
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

    def _guard_reservation(self, view: SchedulerView) -> Iterator[Decision]:
        """Promise the guarded job its shadow time (the scheduler records changes only)."""
        job, shadow = self.guarded, self._shadow
        if job is not None and shadow is not None and shadow != job.promised:
            yield reserve(job, shadow, "starvation guard")

    def wants_decision(self, view: SchedulerView) -> bool:
        """Ask the agent only when something other than Wait is legal (sparse transitions)."""
        self.refresh(view)
        return self._wanted

    def decode(self, action: int, view: SchedulerView) -> Decision:
        """The decision an action index stands for (illegal -> wait)."""
        amap = self.amap
        if not (0 <= action < amap.n) or not self.mask[action]:
            if self.mask[amap.wait]:
                return Decision(WAIT, None, reason="illegal action")
            action = int(np.argmax(self.mask))   # waiting would stall: first legal start
        if action < amap.window:
            job = self.window[action]
            head = view.queue.first()
            mode = Mode.READY if job is head else Mode.BACKFILLED
            return start(job, mode, "agent")
        if action == amap.wait:
            return Decision(WAIT, None, reason="agent")
        return kill(self.kill_jobs[action - amap.kill0], "agent", requeue=True)


class ActingPolicy(AgentPolicy):
    """An :class:`AgentPolicy` answered in process by ``act(observation, mask) -> action``.

    A trained agent (``rl:DIR`` in ``python -m cosim run``) runs as this plain
    policy, through the same window, mask, observation and decoding as the
    Gym environment it was trained in. Build it with
    :meth:`cosim.env.SchedulingEnv.acting_policy`.

    Args:
        amap: the action index map.
        observe: ``observe(view, policy) -> observation`` (the env's encoder).
        act: the agent.
        guard_wait: starvation guard (s), or None.
        name: the policy's name in tables.
    """

    def __init__(self, amap: ActionMap, observe: Callable, act: Callable[[np.ndarray, np.ndarray], int],
                 *, guard_wait: float | None = None, name: str = "agent"):
        super().__init__(amap, None, guard_wait)
        self.observe = observe
        self.act = act
        self.name = name

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Ask ``act`` at each decision point until it waits or kills."""
        while self.wants_decision(view):
            yield from self._guard_reservation(view)
            decision = self.last = self.decode(int(self.act(self.observe(view, self), self.mask)),
                                               view)
            if decision.action == WAIT:
                return
            yield decision
            if decision.action == KILL:
                return
