"""The scheduler process: wakes on every change, asks its policy, applies decisions.

The scheduler owns the wait queue and the set of running jobs, keeps the
running jobs sorted by when it expects them to end (the availability
profile), validates every decision before applying it, and records what
happened and why. Which job runs when is the policy's business.

Whatever else wants to follow or assist the scheduler (users waiting for a
job to end, the prediction hub, the Gym environment's rewards) is a
:class:`SchedulerHooks` given to the scheduler; it sees jobs queued, started,
leaving the machine and done, and may prepare each decision point (the
prediction hub fetches its batch there).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from cosim.actors.corrections import corrected_end
from cosim.actors.nodes import Cluster, Killed, NodeFailure
from cosim.decisions import KILL, RESERVE, START, WAIT, Decision, Policy, SchedulerView
from cosim.job import Job, JobState, Mode, Outcome
from cosim.kernel import fire, timer
from cosim.kernel import now as clock
from cosim.queue import JobQueue
from cosim.records import Recorder

if TYPE_CHECKING:
    from cosim.actors.nodes import Node

__all__ = ["Scheduler", "SchedulerHooks", "SchedulerView", "SchedulerRules", "Counters"]

_EPS = 1e-9
_INF = math.inf
_NAN = math.nan
# Enum members as plain globals: the hot paths below compare states per job,
# and a global is several times faster to read than an enum class attribute.
_QUEUED, _RUNNING, _DONE = JobState.QUEUED, JobState.RUNNING, JobState.DONE
_READY, _RESERVED = Mode.READY, Mode.RESERVED
_COMPLETED, _TIMEOUT = Outcome.COMPLETED, Outcome.TIMEOUT


@dataclass(frozen=True)
class SchedulerRules:
    """Rules the scheduler applies whatever the policy.

    Attributes:
        correction: how a running job that passes its expected end is
            re-predicted (:mod:`cosim.actors.corrections`: ``overrun``,
            ``stepup``, ``double``, ``request``), capped at its request.
        overrun_min_extension: under ``overrun``, the scheduler expects such a
            job to run at least this many more seconds...
        overrun_fraction: ...or this fraction of its elapsed time, whichever is
            larger. Keeps reservations meaningful on traces whose jobs outlive
            their requests (walltime not enforced).
        requeue_on_failure: a job on a failed node goes back to the queue
            (True) or fails (False).
        max_attempts: a job that has started this many times and is lost
            again fails instead of being requeued.
    """

    correction: str = "overrun"
    overrun_min_extension: float = 60.0
    overrun_fraction: float = 0.2
    requeue_on_failure: bool = True
    max_attempts: int = 3


class SchedulerHooks:
    """What follows or assists a scheduler; override only what you need.

    The scheduler calls each overridden method at the moment it names, in
    the order the hooks were added. Hooks may read the scheduler (given to
    :meth:`attach`) and change it only through its public methods.

    Examples:
        >>> class CountStarts(SchedulerHooks):
        ...     def __init__(self):
        ...         self.starts = 0
        ...     def job_started(self, job):
        ...         self.starts += 1
    """

    def attach(self, scheduler: Scheduler) -> None:
        """Called once when the hook is added."""

    def job_queued(self, job: Job) -> None:
        """``job`` joined the queue (submitted, or requeued after a kill)."""

    def job_started(self, job: Job) -> None:
        """``job`` started an attempt."""

    def job_left(self, job: Job, completed: bool) -> None:
        """``job``'s attempt stopped running: ``completed`` normally, or not
        (walltime, kill, node failure). Called before the job's state changes."""

    def job_done(self, job: Job) -> None:
        """``job`` reached its final state (completed, timed out, failed, rejected)."""

    def prepare(self, view: SchedulerView) -> Generator:
        """A generator run at each decision point before the policy decides;
        it may yield SimPy events (simulated time stands still meanwhile)."""
        yield from ()


def _overrides(hook: SchedulerHooks, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(SchedulerHooks, name)


@dataclass
class Counters:
    """What the scheduler counts besides the job records."""

    passes: int = 0
    wakeups_skipped: int = 0
    decisions: int = 0
    refused: int = 0
    reservations_broken: int = 0
    reservations_withdrawn: int = 0
    kills: int = 0
    requeues: int = 0
    node_failures: int = 0
    jobs_lost_to_failures: int = 0
    overruns: int = 0
    refused_reasons: dict[str, int] = field(default_factory=dict)


class Scheduler:
    """The scheduler actor.

    Args:
        env: the simulation environment.
        cluster: the cluster it places jobs on.
        policy: what decides (see :mod:`cosim.decisions`). A policy may carry a
            ``static_key(job) -> float`` (its queue order, computed once per job).
        rules: rules applied whatever the policy.
        record: keep event and decision rows (for the Parquet outputs).
        hooks: :class:`SchedulerHooks` to add now (more with :meth:`add_hook`).
        expected_jobs: how many jobs will be submitted in all; :attr:`finished`
            fires when that many are done (-1: unknown, it never fires).

    Examples:
        >>> import simpy
        >>> from cosim.actors.nodes import Cluster
        >>> from cosim.policies import make_policy
        >>> env = simpy.Environment()
        >>> cluster = Cluster(env, nodes=4, cores_per_node=1)
        >>> sched = Scheduler(env, cluster, make_policy("fcfs+easy"))
        >>> job = Job(1, 0, 0.0, 10.0, 2, 10.0, 10.0)
        >>> sched.submit(job); env.run(); (job.start, job.end)
        (0.0, 10.0)
    """

    def __init__(self, env: simpy.Environment, cluster: Cluster, policy: Policy, *,
                 rules: SchedulerRules | None = None, record: bool = True,
                 hooks: tuple[SchedulerHooks, ...] = (), expected_jobs: int = -1):
        self.env = env
        self.cluster = cluster
        cluster.bind(self)
        self.policy = policy
        self.rules = rules or SchedulerRules()
        self.record = record
        self.queue = JobQueue()
        self.ends: list[tuple[float, int, Job]] = []   # running jobs by expected end
        self._end_key: dict[Job, tuple[float, int, Job]] = {}
        self._killing: set[Job] = set()     # kills applied, interrupts not yet processed
        self._corrected: dict[Job, tuple[int, int]] = {}   # job -> (attempt, corrections)
        self._seq = 0
        self.jobs: list[Job] = []          # every job ever submitted, in order
        self.counters = Counters()
        # Event and decision rows (fields of EventRow and DecisionRow), written
        # only through the log.
        self.log = Recorder()
        self.events: list[tuple] = self.log.events
        self.decisions: list[tuple] = self.log.decisions
        self.queued_area = 0.0
        self._last_idle_fit = -1
        self.done_count = 0
        self.expected_jobs = expected_jobs   # when done_count reaches it, `finished` fires
        self.finished = env.event()
        if expected_jobs == 0:
            self.finished.succeed()
        self.view = SchedulerView(env, self.queue, cluster, self.ends, self.jobs, expected_jobs)
        self._static_key = getattr(policy, "static_key", None)
        # A policy may say that a pass now would decide nothing (EASY when the
        # jobs that arrived or ended change nothing it can act on); then an
        # arrival or an expected end does not wake the scheduler.
        self._pass_idle = getattr(policy, "pass_is_idle", None)
        # Bound methods of the hooks that override each moment (none: nothing to call).
        self._on_queued: list = []
        self._on_started: list = []
        self._on_left: list = []
        self._on_done: list = []
        self._preparers: list = []
        for hook in hooks:
            self.add_hook(hook)
        self._wake = env.event()
        self._woken = False
        self._callbacks = False   # passes run as callbacks (see schedule)
        # The event rows' list, appended to directly on the paths taken once per
        # job (Recorder.event's row, without its call).
        self._event_row = self.log.events.append
        self._decision_row = self.log.decisions.append
        self.process = env.process(self.schedule())

    def add_hook(self, hook: SchedulerHooks) -> None:
        """Add a :class:`SchedulerHooks` (before the simulation runs)."""
        for name, calls in (("job_queued", self._on_queued), ("job_started", self._on_started),
                            ("job_left", self._on_left), ("job_done", self._on_done),
                            ("prepare", self._preparers)):
            if _overrides(hook, name):
                calls.append(getattr(hook, name))
        hook.attach(self)

    # -- the process ---------------------------------------------------------
    def schedule(self) -> Generator:
        """Process: sleep until something changes, then run one pass.

        A pass first lets the hooks prepare (predictions), then asks the
        policy. A policy that yields a SimPy event (an agent answering from
        outside) is waited for; simulated time does not move meanwhile.
        """
        view = self.view
        apply = self.apply
        env = self.env
        counters = self.counters
        preparers = self._preparers
        end_pass = self._end_pass
        if not preparers and getattr(self.policy, "yields_events", True) is False:
            # Nothing can make a pass wait: each pass runs as the callback of
            # its wake-up instead (a bare event where the wake event would be
            # in the event queue, without resuming a generator), and this
            # process ends.
            self._wake.callbacks.append(self._pass)   # the first one, made with the process
            self._callbacks = True
            return
        while True:
            yield self._wake
            self._wake = simpy.Event(env)
            self._woken = False
            for prepare in preparers:
                yield from prepare(view)
            counters.passes += 1
            for decision in self.policy.decide(view):
                if type(decision) is not Decision:
                    decision = yield decision    # an event the policy waits on
                    if decision is None:
                        continue
                apply(decision)
            end_pass()

    def _pass(self, _event: object) -> None:
        """One pass, run from its wake-up (see :meth:`schedule`)."""
        self._woken = False
        self.counters.passes += 1
        apply = self.apply
        for decision in self.policy.decide(self.view):
            if type(decision) is not Decision:
                raise TypeError(f"policy {self.policy.name!r} says it yields no events "
                                f"(yields_events = False) but yielded {decision!r}")
            apply(decision)
        self._end_pass()

    def wake(self) -> None:
        """Ask for a pass now (arrivals, ends, timers); several calls make one pass.

        Every call at one instant wakes the same pass, which runs once the
        events already due at this instant are processed. Arrivals and
        expected ends come through :meth:`_wake_unless_idle` instead, which
        may skip a pass the policy knows is idle.
        """
        if not self._woken:
            self._woken = True
            if self._callbacks:
                timer(self.env, 0, self._pass)   # due now, after the events already due
            else:
                fire(self.env, self._wake)

    def replan(self) -> None:
        """Ask for a full pass now: the policy rebuilds its plans from scratch.

        For changes outside the model that the scheduler cannot see (a power
        cap that rose, nodes that finished booting): the next pass has
        :attr:`SchedulerView.released` and :attr:`SchedulerView.surprise` set,
        so no policy takes an incremental shortcut (EASY's arrival-only pass,
        conservative backfilling's kept plan).
        """
        self.view.released = True
        self.view.surprise = True
        self.wake()

    def _end_pass(self) -> None:
        q = self.queue
        span = q.hi - q.lo
        if span > 96 and q.count * 2 < span:
            q.maintain()
        view = self.view
        view.released = False
        view.surprise = False
        if view.new_jobs:
            view.new_jobs = []   # a new list: a policy may keep the one it saw
        if not self.ends and q.count:
            self._check_stalled()
        if self.record:
            # _idle_fit inlined (once per pass)
            cl = self.cluster
            free = cl.free
            if free > 0 and q.count:
                fits = (q.smallest <= free) if cl.free_mem == _INF else \
                    q.any_fits(free, cl.free_mem)
                idle_fit = free if fits else 0
            else:
                idle_fit = 0
            # A pass row only matters where resource holes change: metrics read
            # idle_fit_cores as a step function over pass rows, and every other
            # column of a skipped row equals the row before it.
            if idle_fit != self._last_idle_fit:
                self._last_idle_fit = idle_fit
                self._event_row((clock(self.env), "pass", -1, -1, q.count, len(self.ends),
                                 cl.up_units - free, cl.up_units, self.queued_area, idle_fit))

    # -- applying decisions ----------------------------------------------------
    def apply(self, d: Decision) -> bool:
        """Validate and apply one decision; returns whether it was applied."""
        self.counters.decisions += 1
        action, job = d.action, d.job
        if action == START:
            if job.state != _QUEUED:
                return self._refuse(d, "job is not queued")
            cl = self.cluster
            if job.procs > cl.free or job.mem > cl.free_mem:
                return self._refuse(d, "does not fit now")
            self._start(job, d.mode, d.reason)
            return True
        now = self.env.now
        if action == RESERVE:
            if job.state != _QUEUED:
                return self._refuse(d, "job is not queued")
            t = d.time
            if t != t:   # a withdrawal: the job holds no promise any more
                if job.promised == job.promised:
                    job.promised = math.nan
                    self.counters.reservations_withdrawn += 1
                    if self.record:
                        self.log.reserve(now, job.id, d.reason, t)
                return True
            if job.promised == job.promised and t > job.promised + _EPS:
                self.counters.reservations_broken += 1
            if job.reservation != job.reservation:
                job.reservation = t
            if t != job.promised:
                job.promised = t
                if self.record:
                    self.log.reserve(now, job.id, d.reason, t)
            return True
        if action == KILL:
            if job.state != _RUNNING or job.process is None or not job.process.is_alive:
                return self._refuse(d, "job is not running")
            if job in self._killing:
                return self._refuse(d, "job is already being killed")
            self._killing.add(job)
            self.counters.kills += 1
            job.kills += 1
            job.process.interrupt(Killed(reason=d.reason, requeue=d.requeue))
            if self.record:
                self.log.kill(now, job.id, d.reason)
            return True
        if action == WAIT:
            if self.record:
                self.log.wait(now, d.reason)
            return True
        return self._refuse(d, f"unknown action {action!r}")

    def _refuse(self, d: Decision, why: str) -> bool:
        c = self.counters
        c.refused += 1
        c.refused_reasons[why] = c.refused_reasons.get(why, 0) + 1
        if self.record:
            self.log.refused(self.env.now, d.job.id if d.job is not None else -1,
                             d.action, d.mode, why)
        return False

    def _start(self, job: Job, mode: str, reason: str) -> None:
        now = float(clock(self.env))
        self.queue.remove(job)
        self.queued_area -= job.procs * job.estimate
        promised = job.promised
        if promised == promised:          # it held a reservation
            if now > promised + _EPS:
                self.counters.reservations_broken += 1
            if mode == _READY:
                mode = _RESERVED
        job.state = _RUNNING
        job.start = now
        job.expected_end = expected_end = now + job.estimate
        job.attempts += 1
        job.mode = mode
        job.reason = reason
        cluster = self.cluster
        job.alloc = cluster.allocate(job)
        self._seq += 1
        key = (expected_end, self._seq, job)
        self._end_key[job] = key
        insort(self.ends, key)
        for call in self._on_started:
            call(job)
        cluster.run_job(job)
        if self.record:   # Recorder.started, inlined: once per job
            self._decision_row((now, job.id, "start", mode, reason, _NAN))
            self._event_row((now, "start", job.id, -1, self.queue.count, len(self.ends),
                             cluster.up_units - cluster.free, cluster.up_units,
                             self.queued_area, 0))

    # -- what hooks may change ------------------------------------------------
    def set_queued_estimate(self, job: Job, estimate: float) -> None:
        """Change what the scheduler expects a queued job to run (predictions).

        The queue's columns, the queued area and the job's place in a static
        order (the policy's ``static_key``) follow; policies re-plan.
        """
        q = self.queue
        self.queued_area += job.procs * (estimate - job.estimate)
        job.estimate = estimate
        q.set_estimate(job)
        if self._static_key is not None:
            q.set_key(job, self._static_key(job))
        self.view.surprise = True

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
        self.wake()

    # -- notifications from users and nodes -----------------------------------
    def submit(self, job: Job) -> None:
        """A user hands in ``job`` now."""
        job.submit = float(clock(self.env))
        self.jobs.append(job)
        cl = self.cluster
        # could_ever_fit says why not; the size test alone decides most jobs
        why = cl.could_ever_fit(job.procs, job.mem) if (
            job.procs > cl.capacity or cl.memory_per_node > 0) else ""
        if why:
            job.state = _DONE
            job.outcome = Outcome.REJECTED
            job.reason = why
            job.end = math.nan
            if self.record:
                self._event("reject", job.id)
            self._done(job)
            return
        self._enqueue(job)
        if self.record:   # _event, inlined: once per job
            self._event_row((clock(self.env), "submit", job.id, -1, self.queue.count,
                             len(self.ends), cl.up_units - cl.free, cl.up_units,
                             self.queued_area, 0))

    def _enqueue(self, job: Job) -> None:
        job.state = _QUEUED
        job.enqueued_at = clock(self.env)
        static_key = self._static_key
        self.queue.add(job, static_key(job) if static_key is not None else 0.0)
        self.queued_area += job.procs * job.estimate
        self.view.new_jobs.append(job)
        for call in self._on_queued:
            call(job)
        if not self._woken:
            self._wake_unless_idle(job)

    def _wake_unless_idle(self, job: Job) -> None:
        """Wake for ``job``'s arrival or expected end, unless the pass is known to be idle.

        Skipped when ``job`` cannot change what fits (an arrival too large
        for what is free, or an end that leaves the smallest queued job still
        too large), no hook prepares passes, the pass row it would record is
        the one already recorded, and the policy's ``pass_is_idle(view)``
        says the pass would decide nothing. The view's flags carry on to the
        next pass, which sees every change since the last one that ran; the
        jobs in ``new_jobs`` count as seen (the policy just checked them).
        Any later change at this instant asks again. Called only while no
        pass is woken.
        """
        idle = self._pass_idle
        if idle is not None and not self._preparers:
            cl = self.cluster
            free = cl.free
            # Cheap tests first: most arrivals and ends fail one of them.
            if job.state is _QUEUED:
                quiet = job.procs > free or job.mem > cl.free_mem
                if quiet and self.record:   # _idle_fit, inlined: once per arrival
                    q = self.queue
                    if free > 0 and q.count:
                        fits = (q.smallest <= free) if cl.free_mem == _INF else \
                            q.any_fits(free, cl.free_mem)
                        quiet = (free if fits else 0) == self._last_idle_fit
                    else:
                        quiet = self._last_idle_fit == 0
            else:   # nothing queued fits in what is free: the pass row would say 0
                quiet = cl.free_mem == _INF and self.queue.smallest > free and \
                    (not self.record or self._last_idle_fit == 0)
            if quiet and idle(self.view):
                self.counters.wakeups_skipped += 1
                self.view.new_jobs = []
                return
        # wake(), inlined (its caller checked that no pass is woken yet)
        self._woken = True
        if self._callbacks:
            timer(self.env, 0, self._pass)
        else:
            fire(self.env, self._wake)

    def _idle_fit(self) -> int:
        """Free units if some queued job fits in them now, else 0 (the pass row's column)."""
        cl = self.cluster
        free = cl.free
        q = self.queue
        if free > 0 and q.count:
            fits = (q.smallest <= free) if cl.free_mem == _INF else \
                q.any_fits(free, cl.free_mem)
            return free if fits else 0
        return 0

    def _remove_running(self, job: Job, completed: bool) -> None:
        for call in self._on_left:
            call(job, completed)
        key = self._end_key.pop(job)
        ends = self.ends
        del ends[bisect_left(ends, key)]
        job.process = None
        self._killing.discard(job)
        self.view.released = True

    def job_ended(self, job: Job, outcome: str) -> None:
        """The job's attempt finished (completed, or killed at its walltime)."""
        # _remove_running, inlined: once per job
        for call in self._on_left:
            call(job, outcome == _COMPLETED)
        ends = self.ends
        del ends[bisect_left(ends, self._end_key.pop(job))]
        job.process = None
        if self._killing:
            self._killing.discard(job)
        self.view.released = True
        job.state = _DONE
        job.outcome = outcome
        job.end = end = float(clock(self.env))
        if end < job.expected_end - _EPS:
            self.view.surprise = True
        if self.record:   # _event, inlined: once per job
            cl = self.cluster
            self._event_row((clock(self.env), "timeout" if outcome == _TIMEOUT else "end", job.id,
                             -1, self.queue.count, len(self.ends), cl.up_units - cl.free,
                             cl.up_units, self.queued_area, 0))
        if not self._woken:
            self._wake_unless_idle(job)
        # _done, inlined: once per job
        self.done_count += 1
        if self.done_count == self.expected_jobs:
            self.finished.succeed()
        for call in self._on_done:
            call(job)

    def job_interrupted(self, job: Job, cause: object) -> None:
        """The job's attempt was interrupted (kill or node failure)."""
        now = self.env.now
        self._remove_running(job, False)
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
        self.wake()

    def job_overran(self, job: Job) -> None:
        """A running job passed its expected end: re-predict it (``rules.correction``)."""
        now = self.env.now
        rules = self.rules
        attempt, count = self._corrected.get(job, (job.attempts, 0))
        end, count = corrected_end(rules.correction, job, now,
                                   count if attempt == job.attempts else 0,
                                   min_extension=rules.overrun_min_extension,
                                   fraction=rules.overrun_fraction)
        self._corrected[job] = (job.attempts, count)
        self.set_expected_end(job, end)
        self.counters.overruns += 1
        if self.record:
            self._event("overrun", job.id)

    def node_changed(self, node: Node, *, up: bool) -> None:
        """A node went down or came back."""
        if not up:
            self.counters.node_failures += 1
        self.view.released = True
        self.view.surprise = True
        if self.record:
            self._event("node_up" if up else "node_down", -1, node.index)
        self.wake()

    def give_up(self, job: Job, reason: str) -> None:
        """Take a queued job out for good, now: it can never start as the run goes.

        Its outcome is ``rejected`` if it never started, else ``failed``; its
        end is now, so its time queued counts in the failure metrics.
        """
        if job.state != _QUEUED:
            return
        now = float(clock(self.env))
        self.queue.remove(job)
        self.queued_area -= job.procs * job.estimate
        job.promised = math.nan
        job.state = _DONE
        job.outcome = Outcome.REJECTED if job.attempts == 0 else Outcome.FAILED
        job.reason = reason
        job.end = now
        self.view.surprise = True
        if self.record:
            self._event("reject", job.id)
        self.wake()
        self._done(job)

    def _check_stalled(self) -> None:
        """Nothing runs, jobs wait and no event is left that could change that:
        give up every queued job, so :attr:`finished` fires and the run ends."""
        if self.ends or not self.queue.count or self.env._queue:
            return
        for job in self.queue.live_jobs():
            self.give_up(job, "stalled: nothing ran and no event was left to start it")

    def _done(self, job: Job) -> None:
        self.done_count += 1
        if self.done_count == self.expected_jobs:
            self.finished.succeed()
        for call in self._on_done:
            call(job)

    # -- records ------------------------------------------------------------
    def _event(self, kind: str, job_id: int, node: int = -1, idle_fit: int = 0) -> None:
        """Write one row of the events table (schema ``events/1``) with the state now."""
        cl = self.cluster
        self.log.event(clock(self.env), kind, job_id, node, self.queue.count,
                       len(self.ends), cl.up_units - cl.free, cl.up_units,
                       self.queued_area, idle_fit)
