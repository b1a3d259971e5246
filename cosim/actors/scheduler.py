"""The scheduler process: wakes on every change, asks its policy, applies decisions.

The scheduler owns the wait queue and the set of running jobs, keeps the
running jobs sorted by when it expects them to end (the availability
profile), validates every decision before applying it, and records what
happened and why. Which job runs when is the policy's business.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from cosim.actors.nodes import Cluster, Killed, NodeFailure
from cosim.job import Job, JobState, Mode, Outcome
from cosim.policy import KILL, RESERVE, START, WAIT, Decision, Policy
from cosim.queue import JobQueue

if TYPE_CHECKING:
    from cosim.actors.nodes import Node

__all__ = ["Scheduler", "SchedulerView", "SchedulerRules", "Counters"]

_EPS = 1e-9


@dataclass(frozen=True)
class SchedulerRules:
    """Rules the scheduler applies whatever the policy.

    Attributes:
        overrun_min_extension: when a running job passes its expected end, the
            scheduler expects it to run at least this many more seconds...
        overrun_fraction: ...or this fraction of its elapsed time, whichever is
            larger. Keeps reservations meaningful on traces whose jobs outlive
            their requests (walltime not enforced).
        requeue_on_failure: a job on a failed node goes back to the queue
            (True) or fails (False).
        max_attempts: a job that has started this many times and is lost
            again fails instead of being requeued.
    """

    overrun_min_extension: float = 60.0
    overrun_fraction: float = 0.2
    requeue_on_failure: bool = True
    max_attempts: int = 3


@dataclass
class Counters:
    """What the scheduler counts besides the job records."""

    passes: int = 0
    decisions: int = 0
    refused: int = 0
    reservations_broken: int = 0
    kills: int = 0
    requeues: int = 0
    node_failures: int = 0
    jobs_lost_to_failures: int = 0
    overruns: int = 0
    refused_reasons: dict[str, int] = field(default_factory=dict)


class SchedulerView:
    """What a policy may read: now, the queue, running jobs, free resources.

    Policies must not change what they read; they return decisions.

    Attributes:
        queue: the :class:`cosim.queue.JobQueue` of waiting jobs.
        cluster: the :class:`cosim.actors.nodes.Cluster` (capacity, free units).
        released: resources were freed or expectations changed since the
            previous pass (a policy may skip work when this is False).
        surprise: something did not go as the scheduler expected since the
            previous pass (a job ended early or overran, a kill, a node
            change, an estimate update): plans must be rebuilt.
        new_jobs: jobs that joined the queue since the previous pass.
    """

    def __init__(self, sched: Scheduler):
        self._sched = sched
        self.env = sched.env
        self.queue = sched.queue
        self.cluster = sched.cluster
        self.released = True
        self.surprise = True
        self.new_jobs: list[Job] = []

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self.env.now

    @property
    def free(self) -> int:
        """Free units (cores, or nodes on a node-granular cluster)."""
        return self.cluster.free

    @property
    def free_mem(self) -> float:
        """Free memory (inf when memory is not modelled)."""
        return self.cluster.free_mem

    @property
    def running(self) -> list[Job]:
        """Running jobs ordered by expected end."""
        return [entry[2] for entry in self._sched.ends]

    def ends(self) -> list[tuple[float, int, Job]]:
        """``(expected_end, seq, job)`` of running jobs, sorted (do not modify)."""
        return self._sched.ends

    def shadow(self, procs: int, mem: float = 0.0) -> tuple[float, int, float]:
        """When a job of this size could start if running jobs end as expected.

        Returns:
            ``(shadow_time, extra_units, extra_mem)``: the earliest time enough
            units and memory are free, and what is left over at that time once
            the job is placed (every job expected to end by then counted).
            ``(inf, 0, 0)`` if that never happens (nodes down).
        """
        cl = self.cluster
        avail, avail_mem = cl.free, cl.free_mem
        now = self.env.now
        if procs <= avail and mem <= avail_mem:
            return now, avail - procs, avail_mem - mem
        ends = self._sched.ends
        n = len(ends)
        if avail_mem == math.inf or cl.node_granular:
            # Cores only (the common case): one pass over the sorted ends.
            need = procs - avail
            for i, (t, _, job) in enumerate(ends):
                need -= job.procs
                if need <= 0:
                    extra = -need
                    i += 1
                    while i < n and ends[i][0] == t:   # every job ending then counts
                        extra += ends[i][2].procs
                        i += 1
                    return (t if t > now else now), extra, avail_mem - mem
            return math.inf, 0, 0.0
        i = 0
        while i < n:
            t = ends[i][0]
            # Take every job expected to end at this same time.
            while i < n and ends[i][0] == t:
                job = ends[i][2]
                avail += job.procs
                avail_mem += job.mem
                i += 1
            if avail >= procs and avail_mem >= mem:
                return (t if t > now else now), avail - procs, avail_mem - mem
        return math.inf, 0, 0.0


class Scheduler:
    """The scheduler actor.

    Args:
        env: the simulation environment.
        cluster: the cluster it places jobs on.
        policy: what decides (see :mod:`cosim.policy`).
        rules: rules applied whatever the policy.
        record: keep event and decision rows (for the Parquet outputs).

    Examples:
        >>> import simpy
        >>> from cosim.actors.nodes import Cluster
        >>> from agents.heuristics import make_policy
        >>> env = simpy.Environment()
        >>> cluster = Cluster(env, nodes=4, cores_per_node=1)
        >>> sched = Scheduler(env, cluster, make_policy("fcfs+easy"))
        >>> job = Job(1, 0, 0.0, 10.0, 2, 10.0, 10.0)
        >>> sched.submit(job); env.run(); (job.start, job.end)
        (0.0, 10.0)
    """

    def __init__(self, env: simpy.Environment, cluster: Cluster, policy: Policy, *,
                 rules: SchedulerRules | None = None, record: bool = True):
        self.env = env
        self.cluster = cluster
        cluster.scheduler = self
        self.policy = policy
        self.rules = rules or SchedulerRules()
        self.record = record
        self.queue = JobQueue()
        self.ends: list[tuple[float, int, Job]] = []   # running jobs by expected end
        self._end_key: dict[Job, tuple[float, int, Job]] = {}
        self._seq = 0
        self.jobs: list[Job] = []          # every job ever submitted, in order
        self.counters = Counters()
        self.events: list[tuple] = []
        self.decisions: list[tuple] = []
        self.queued_area = 0.0
        self._last_idle_fit = -1
        self.on_job_done = None            # callback(job) when a job reaches DONE
        # Callbacks (kind, job) on queue/run changes: "queued", "started",
        # "left" (ended, killed or failed). Used by the Gym env's rewards.
        self.listeners: list = []
        self.done_count = 0
        self.expected_jobs = -1            # when done_count reaches it, `finished` fires
        self.finished = env.event()
        self.view = SchedulerView(self)
        self.predictions = None            # a cosim.prediction.PredictionHub, if any
        self._static_key = getattr(policy, "static_key", None)
        self._wake = env.event()
        self.process = env.process(self.schedule())

    # -- the process ---------------------------------------------------------
    def schedule(self) -> Generator:
        """Process: sleep until something changes, then run one pass.

        A policy with ``external = True`` (a learning agent behind the Gym
        environment) answers each decision point through an event: the
        scheduler posts a request with :meth:`AgentPolicy.post` and waits for
        the decision; simulated time does not move meanwhile.
        """
        external = getattr(self.policy, "external", False)
        while True:
            yield self._wake
            self._wake = self.env.event()
            if self.predictions is not None:
                # One batch of predictions per decision point, before deciding.
                yield from self.predictions.refresh(self.view)
            if external:
                yield from self._external_pass()
            else:
                self._pass()

    def _external_pass(self) -> Generator:
        self.counters.passes += 1
        agent = self.policy
        view = self.view
        while agent.wants_decision(view):
            request = self.env.event()
            agent.post(request, view)
            decision = yield request
            if decision is None or decision.action == WAIT:
                break
            self.apply(decision)
            if decision.action == KILL:
                break   # its cores come back when the interrupt is processed, then we are woken
        self._end_pass()

    def _poke(self) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def wake(self) -> None:
        """Ask for a pass now (timers, predictors); several calls make one pass."""
        self._poke()

    def _pass(self) -> None:
        self.counters.passes += 1
        apply = self.apply
        for decision in self.policy.decide(self.view):
            apply(decision)
        self._end_pass()

    def _end_pass(self) -> None:
        self.queue.maintain()
        view = self.view
        view.released = False
        view.surprise = False
        view.new_jobs = []
        if self.record:
            cl = self.cluster
            free = cl.free
            idle_fit = free if free > 0 and self.queue.count and self.queue.any_fits(
                free, cl.free_mem) else 0
            # A pass row only matters where resource holes change: metrics read
            # idle_fit_cores as a step function over pass rows, and every other
            # column of a skipped row equals the row before it.
            if idle_fit != self._last_idle_fit:
                self._last_idle_fit = idle_fit
                self._event("pass", -1, -1, idle_fit)

    # -- applying decisions ----------------------------------------------------
    def apply(self, d: Decision) -> bool:
        """Validate and apply one decision; returns whether it was applied."""
        self.counters.decisions += 1
        action, job = d.action, d.job
        now = self.env.now
        if action == START:
            if job.state != JobState.QUEUED:
                return self._refuse(d, "job is not queued")
            if not self.cluster.fits_now(job.procs, job.mem):
                return self._refuse(d, "does not fit now")
            self._start(job, d.mode, d.reason)
            return True
        if action == RESERVE:
            if job.state != JobState.QUEUED:
                return self._refuse(d, "job is not queued")
            t = d.time
            if job.promised == job.promised and t > job.promised + _EPS:
                self.counters.reservations_broken += 1
            if job.reservation != job.reservation:
                job.reservation = t
            if t != job.promised:
                job.promised = t
                if self.record:
                    self.decisions.append((now, job.id, RESERVE, "", d.reason, t))
            return True
        if action == KILL:
            if job.state != JobState.RUNNING or job.process is None or not job.process.is_alive:
                return self._refuse(d, "job is not running")
            self.counters.kills += 1
            job.process.interrupt(Killed(reason=d.reason, requeue=d.requeue))
            if self.record:
                self.decisions.append((now, job.id, KILL, "", d.reason, math.nan))
            return True
        if action == WAIT:
            if self.record:
                self.decisions.append((now, -1, WAIT, "", d.reason, math.nan))
            return True
        return self._refuse(d, f"unknown action {action!r}")

    def _refuse(self, d: Decision, why: str) -> bool:
        c = self.counters
        c.refused += 1
        c.refused_reasons[why] = c.refused_reasons.get(why, 0) + 1
        if self.record:
            self.decisions.append((self.env.now, d.job.id if d.job is not None else -1,
                                   d.action, d.mode, f"refused: {why}", math.nan))
        return False

    def _start(self, job: Job, mode: str, reason: str) -> None:
        env = self.env
        now = float(env.now)
        self.queue.remove(job)
        self.queued_area -= job.procs * job.estimate
        if job.promised == job.promised:          # it held a reservation
            if now > job.promised + _EPS:
                self.counters.reservations_broken += 1
            if mode == Mode.READY:
                mode = Mode.RESERVED
        job.state = JobState.RUNNING
        job.start = now
        job.expected_end = now + job.estimate
        job.attempts += 1
        job.mode = mode
        job.reason = reason
        job.alloc = self.cluster.allocate(job)
        self._seq += 1
        key = (job.expected_end, self._seq, job)
        self._end_key[job] = key
        insort(self.ends, key)
        job.process = env.process(self.cluster.run_job(job))
        for listener in self.listeners:
            listener("started", job)
        if self.record:
            self.decisions.append((now, job.id, START, mode, reason, math.nan))
            cl = self.cluster   # _event, inlined: this runs once per job
            self.events.append((now, "start", job.id, -1, self.queue.count, len(self.ends),
                                cl.up_units - cl.free, cl.up_units, self.queued_area, 0))

    # -- notifications from users and nodes -----------------------------------
    def submit(self, job: Job) -> None:
        """A user hands in ``job`` now."""
        job.submit = float(self.env.now)
        self.jobs.append(job)
        why = self.cluster.could_ever_fit(job.procs, job.mem)
        if why:
            job.state = JobState.DONE
            job.outcome = Outcome.REJECTED
            job.reason = why
            job.end = math.nan
            if self.record:
                self._event("reject", job.id)
            self._done(job)
            return
        self._enqueue(job)
        if self.record:
            cl = self.cluster
            self.events.append((job.submit, "submit", job.id, -1, self.queue.count,
                                len(self.ends), cl.up_units - cl.free, cl.up_units,
                                self.queued_area, 0))

    def _enqueue(self, job: Job) -> None:
        job.state = JobState.QUEUED
        job.enqueued_at = self.env.now
        key = self._static_key(job) if self._static_key is not None else 0.0
        self.queue.add(job, key)
        self.queued_area += job.procs * job.estimate
        self.view.new_jobs.append(job)
        for listener in self.listeners:
            listener("queued", job)
        self._poke()

    def _remove_running(self, job: Job) -> None:
        for listener in self.listeners:
            listener("left", job)
        key = self._end_key.pop(job)
        ends = self.ends
        del ends[bisect_left(ends, key)]
        job.process = None
        self.view.released = True

    def job_ended(self, job: Job, outcome: str) -> None:
        """The job's process finished (completed, or killed at its walltime)."""
        self._remove_running(job)
        job.state = JobState.DONE
        job.outcome = outcome
        job.end = float(self.env.now)
        if job.end < job.expected_end - _EPS:
            self.view.surprise = True
        if self.record:
            cl = self.cluster
            self.events.append((job.end, "timeout" if outcome == Outcome.TIMEOUT else "end",
                                job.id, -1, self.queue.count, len(self.ends),
                                cl.up_units - cl.free, cl.up_units, self.queued_area, 0))
        self._poke()
        self._done(job)

    def job_interrupted(self, job: Job, cause: object) -> None:
        """The job's process was interrupted (kill or node failure)."""
        now = self.env.now
        self._remove_running(job)
        self.view.surprise = True
        lost = now - job.start
        job.killed_seconds += lost
        job.killed_core_seconds += lost * job.procs
        c = self.counters
        node = -1
        if isinstance(cause, NodeFailure):
            c.jobs_lost_to_failures += 1
            requeue = self.rules.requeue_on_failure and job.attempts < self.rules.max_attempts
            node = cause.node
        else:
            requeue = bool(getattr(cause, "requeue", True))
        if self.record:
            self._event("kill", job.id, node)
        if requeue:
            c.requeues += 1
            job.promised = math.nan
            self._enqueue(job)
            if self.record:
                self._event("requeue", job.id)
        else:
            job.state = JobState.DONE
            job.outcome = Outcome.FAILED
            job.end = float(now)
            self._done(job)
        self._poke()

    def job_overran(self, job: Job) -> None:
        """A running job passed its expected end: expect it to run a while longer."""
        now = self.env.now
        rules = self.rules
        extension = max(rules.overrun_min_extension, rules.overrun_fraction * (now - job.start))
        self.set_expected_end(job, now + extension)
        self.counters.overruns += 1
        if self.record:
            self._event("overrun", job.id)

    def set_expected_end(self, job: Job, t: float) -> None:
        """Change when the scheduler expects a running job to end (predictions, overruns)."""
        key = self._end_key[job]
        ends = self.ends
        del ends[bisect_left(ends, key)]
        self._seq += 1
        key = (t, self._seq, job)
        self._end_key[job] = key
        insort(ends, key)
        job.expected_end = t
        self.view.released = True
        self.view.surprise = True
        self._poke()

    def node_changed(self, node: Node, *, up: bool) -> None:
        """A node went down or came back."""
        if not up:
            self.counters.node_failures += 1
        self.view.released = True
        self.view.surprise = True
        if self.record:
            self._event("node_up" if up else "node_down", -1, node.index)
        self._poke()

    def _done(self, job: Job) -> None:
        self.done_count += 1
        if self.done_count == self.expected_jobs:
            self.finished.succeed()
        if self.on_job_done is not None:
            self.on_job_done(job)

    # -- records ------------------------------------------------------------
    def _event(self, kind: str, job_id: int, node: int = -1, idle_fit: int = 0) -> None:
        cl = self.cluster
        self.events.append((self.env._now, kind, job_id, node, self.queue.count,
                            len(self.ends), cl.up_units - cl.free, cl.up_units,
                            self.queued_area, idle_fit))
