"""What the scheduler does for a job that cannot start as the machine behaves.

With node failures on, a job can need more nodes than are up at once for a
very long time (a 256-wide job on 256 nodes that each fail every 28 h and
take 2 h to repair finds all of them up once in about 10^8 years). A
production scheduler does two things, and :class:`FaultGuard` does them:

* **Hold returning nodes for the waiting job.** While the head of the queue
  needs more units than the nodes up can give, nodes that come back are not
  handed to backfilling: they wait, idle, for the head (as Slurm's planned
  reservation of a top-priority job keeps the nodes it will use). They
  rejoin the pool when the head fits on the free and held units, when every
  node is back, or when the head changes.
* **Give up after a limit.** A job that has spent ``start_limit`` seconds in
  all as such a starved head, while failures alone kept it waiting (with
  the down nodes back, empty, it would fit now), is taken out: outcome
  ``rejected`` (never started) or ``failed`` (started before, lost to
  failures), reason saying why, end = now (see ``docs/metrics.md``,
  failures). Time it waits for running jobs does not count.

Cores freed by ending jobs are not held (no drain): on lublin256 with a node
mtbf of 1e6 s, draining for every starved wide head gave 6x the mean wait.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.decisions import SchedulerView
from cosim.job import Job
from cosim.kernel import now as clock

__all__ = ["FaultGuard", "RunBound"]


class FaultGuard(SchedulerHooks):
    """Holds returning nodes for a starved head job and gives it up after ``start_limit``.

    Args:
        start_limit: seconds a job may spend, summed, as the head of the queue
            needing more units than the nodes up (held ones included) can give,
            while it would fit with the down nodes back.
    """

    def __init__(self, start_limit: float):
        self.start_limit = float(start_limit)
        self.scheduler: Scheduler | None = None
        self._starved: dict[Job, float] = {}   # job -> seconds starved before the current spell
        self._spell: tuple[Job, float] | None = None   # (job, since) of the current spell
        self.given_up = 0

    @property
    def counting(self) -> Job | None:
        """The job whose start-limit clock runs now (failures alone keep it waiting)."""
        return self._spell[0] if self._spell is not None else None

    def attach(self, scheduler: Scheduler) -> None:
        """Remember the scheduler (called once)."""
        self.scheduler = scheduler

    def prepare(self, view: SchedulerView) -> Generator:
        """Before each pass: decide which job (if any) the returning nodes are held for."""
        self._update()
        yield from ()

    def job_done(self, job: Job) -> None:
        """Forget a job that left the queue for good (memory stays bounded)."""
        self._starved.pop(job, None)

    def _update(self) -> None:
        sched = self.scheduler
        cl = sched.cluster
        q = sched.queue
        now = float(clock(sched.env))
        target = None
        counting = None
        if q.count and cl.up_units + cl.held < cl.capacity:
            head = q.jobs[q.head()]
            if head.procs > cl.up_units + cl.held:
                target = head
                # The clock runs only while failures alone keep it waiting: with
                # the down nodes back (empty), it would fit now.
                if head.procs <= cl.free + cl.capacity - cl.up_units:
                    counting = head
        spell = self._spell
        if spell is not None and spell[0] is not counting:
            job, since = spell
            self._spell = None
            if job in self._starved:
                self._starved[job] += now - since
        if target is not cl.hold_for:
            if cl.hold_for is not None or cl.held:
                cl.release_held()
            cl.hold_for = target
        if counting is not None and self._spell is None:
            target = counting
            spent = self._starved.setdefault(target, 0.0)
            self._spell = (target, now)
            left = self.start_limit - spent
            timer = simpy.Timeout(sched.env, left if left > 0 else 0.0)
            timer.callbacks.append(lambda _e, job=target, since=now: self._expire(job, since))

    def _expire(self, job: Job, since: float) -> None:
        """The limit of ``job``'s starved spell that began at ``since`` is reached."""
        spell = self._spell
        if spell is None or spell[0] is not job or spell[1] != since:
            return   # the spell ended (the job started, or got enough nodes) earlier
        sched = self.scheduler
        self._spell = None
        sched.cluster.release_held()
        self.given_up += 1
        sched.give_up(job, f"not started: needed {job.procs} units while fewer were up "
                           f"for {self.start_limit:g} s (faults.start_limit)")


class RunBound(SchedulerHooks):
    """Ends a run with failures at a bound: a simulated time or a count of node failures.

    Failures can keep a run going without end (nodes that fail every minute
    and are never repaired, jobs requeued as fast as they start). At the
    first of ``horizon`` (s) or ``max_failures`` node failures the bound is
    reached: failures stop (``reached`` fires; the failure processes watch
    it), every queued job and every job submitted later is given up
    (reported as never started, reason naming the bound), and running jobs
    finish on the nodes that are up. The run then ends with every job
    accounted for, and :attr:`reached_by` says which bound it met.

    Args:
        horizon: the simulated time the run may last (see :func:`cosim.model.run_horizon`).
        max_failures: node failures the run may have (:data:`cosim.limits.NODE_FAILURES`).
    """

    def __init__(self, env: simpy.Environment, horizon: float, max_failures: int):
        self.horizon, self.max_failures = float(horizon), int(max_failures)
        self.reached = simpy.Event(env)
        self.reached_by: str | None = None
        self.reached_at: float | None = None
        self.scheduler: Scheduler | None = None

    def attach(self, scheduler: Scheduler) -> None:
        """Remember the scheduler and set the horizon's timer (called once)."""
        self.scheduler = scheduler
        timer = simpy.Timeout(scheduler.env, max(self.horizon - float(clock(scheduler.env)), 0.0))
        timer.callbacks.append(lambda _e: self._reach(
            f"the run's horizon of {self.horizon:,.0f} s of simulated time"))

    def prepare(self, view: SchedulerView) -> Generator:
        """Before each pass: at the failure bound, end; once ended, give up every queued job."""
        sched = self.scheduler
        if self.reached_by is None and sched.counters.node_failures >= self.max_failures:
            self._reach(f"{self.max_failures:,} node failures (COSIM_MAX_NODE_FAILURES)")
        elif self.reached_by is not None:
            self._give_up_queued()
        yield from ()

    def _reach(self, why: str) -> None:
        sched = self.scheduler
        if self.reached_by is not None or sched.finished.triggered:
            return
        self.reached_by, self.reached_at = why, float(clock(sched.env))
        self.reached.succeed()
        self._give_up_queued()
        sched.wake()

    def _give_up_queued(self) -> None:
        sched = self.scheduler
        for job in list(sched.queue.live_jobs()):
            sched.give_up(job, f"not started: the run reached its bound, {self.reached_by}")
