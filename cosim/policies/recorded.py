"""``recorded``: every job starts when the trace says it did (the "as recorded" row).

A replay of a cluster's own accounting (Slurm ``sacct``, or an SWF trace
with its wait field) knows when each job really started: ``submit + wait``.
This policy starts each job at that time, so a run puts what the production
scheduler did beside every simulated policy, measured by the same metrics on
the same machine.

Rules:

* A job is due at its recorded start (``submit + wait``); a job without a
  recorded wait (unknown, -1) is due at its submit.
* Due jobs start in the order of their recorded starts, each as soon as it
  fits. On the machine the trace ran on, with the run times it recorded,
  every job fits at its recorded time; when it does not (a smaller simulated
  machine, node failures, a job requeued), it starts later, never earlier,
  and :attr:`RecordedPolicy.late` counts those starts.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator

import numpy as np
import simpy

from cosim.decisions import Decision, SchedulerView, start
from cosim.errors import ScenarioError
from cosim.job import Job, Mode

__all__ = ["RecordedPolicy", "recorded_starts"]


def recorded_starts(workload) -> np.ndarray:
    """Per workload row, the recorded start ``submit + wait`` (``submit`` where unknown)."""
    wait = workload.features.get("wait")
    submit = np.asarray(workload.submit, dtype=np.float64)
    if wait is None:
        return submit.copy()
    wait = np.asarray(wait, dtype=np.float64)
    known = np.isfinite(wait) & (wait >= 0)
    return np.where(known, submit + np.where(known, wait, 0.0), submit)


def check_recorded_starts(workload) -> None:
    """Refuse a workload with no recorded starts (a generated one) for ``recorded``.

    Without the trace's wait field every job would be "due" at its submit:
    greedy first-fit under the name of the production schedule.

    Raises:
        ScenarioError: the workload has no ``wait`` feature.
    """
    if "wait" not in workload.features:
        raise ScenarioError("policy recorded", "a workload with no recorded starts ("
                            f"{workload.source or 'a generated one'})",
                            "a trace replay (workload.kind swf or slurm): recorded starts are "
                            "the trace's submit + wait")


class RecordedPolicy:
    """Starts every job at its recorded start time (see the module docstring).

    The model binds it to the scheduler and the workload before the run
    (:meth:`attach_model`): it keeps one timer per queued job that wakes the
    scheduler at the job's recorded start. Unbound (used outside
    :func:`cosim.model.build`), it starts queued jobs in queue order as they fit.

    Attributes:
        late: starts that came after the recorded time (the job did not fit then).
        unknown: jobs without a recorded wait (due at their submit).
    """

    name = "recorded"

    def __init__(self):
        self._starts: list[float] = []
        self._scheduler = None
        self._due: list[tuple[float, int, Job]] = []   # (recorded start, id, job), due now
        self.late = 0
        self.unknown = 0

    def attach_model(self, scheduler, workload) -> None:
        """Bind to ``scheduler`` (to wake it at recorded starts) and read ``workload``'s times."""
        check_recorded_starts(workload)
        self._scheduler = scheduler
        starts = recorded_starts(workload)
        wait = workload.features.get("wait")
        if wait is not None:
            wait = np.asarray(wait, dtype=np.float64)
            self.unknown = int(np.sum(~(np.isfinite(wait) & (wait >= 0))))
        else:
            self.unknown = len(starts)
        self._starts = starts.tolist()
        scheduler.add_hook(_Timers(self))

    def _recorded(self, job: Job) -> float:
        if 0 <= job.index < len(self._starts):
            return self._starts[job.index]
        return job.submit

    def decide(self, view: SchedulerView) -> Iterator[Decision]:
        """Start the due jobs that fit, in the order of their recorded starts."""
        if self._scheduler is None:
            # Not bound to a model (no trace times, no timers): every queued
            # job is due at once, in queue order.
            q, cl = view.queue, view.cluster
            for job in q.live_jobs():
                if cl.fits_now(job.procs, job.mem):
                    yield start(job, Mode.READY, "as recorded (no recorded start known)")
            return
        due = self._due
        if not due:
            return
        now = view.now
        cl = view.cluster
        blocked: list[tuple[float, int, Job]] = []
        while due:
            item = heapq.heappop(due)
            t, _, job = item
            if job.queue_slot < 0 or view.queue.jobs[job.queue_slot] is not job:
                continue   # started or gone since it became due
            if cl.fits_now(job.procs, job.mem):
                if now > t + 1e-9:
                    self.late += 1
                yield start(job, Mode.READY, "as recorded" if now <= t + 1e-9
                            else f"as recorded, late (recorded start {t:g})")
            else:
                blocked.append(item)
        for item in blocked:
            heapq.heappush(due, item)

    def _make_due(self, job: Job) -> None:
        t = self._recorded(job)
        heapq.heappush(self._due, (t, job.id, job))
        self._scheduler.wake()


class _Timers:
    """The policy's side of the scheduler: a timer per queued job to its recorded start.

    A scheduler hook by its methods (:class:`cosim.actors.scheduler.SchedulerHooks`;
    policies may not import the actors), the moments it does not need left empty.
    """

    def __init__(self, policy: RecordedPolicy):
        self.policy = policy

    def attach(self, scheduler) -> None:
        """Remember the scheduler."""
        self.scheduler = scheduler

    def job_queued(self, job: Job) -> None:
        """Make ``job`` due at its recorded start (now, if that has passed)."""
        policy = self.policy
        t = policy._recorded(job)
        env = self.scheduler.env
        if not (t > env.now) or math.isnan(t):
            policy._make_due(job)
            return
        simpy.Timeout(env, t - env.now).callbacks.append(lambda _e: policy._make_due(job))

    def job_started(self, job: Job) -> None:
        """Nothing to do."""

    def job_left(self, job: Job, completed: bool) -> None:
        """Nothing to do."""

    def job_done(self, job: Job) -> None:
        """Nothing to do."""

    def prepare(self, view) -> Iterator:
        """Nothing to prepare."""
        yield from ()
