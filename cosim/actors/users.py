"""Users: the processes that hand jobs to the scheduler.

Two modes:

- **replay**: every job is submitted at its workload submit time.
- **user-aware**: a job that depends on an earlier job of its user (SWF
  fields 17-18: preceding job, think time) is submitted a think time after
  that job *ended in this simulation*, so a faster scheduler brings the next
  job sooner, as in a real feedback loop (Zakay & Feitelson 2013; Cunha
  thesis, seed 003, ch. 2). Jobs without a dependency keep their trace time.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np
import simpy

from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.job import Job
from cosim.kernel import call_urgent, timer
from cosim.kernel import now as clock
from cosim.workloads.base import Workload

__all__ = ["Users"]


class Users(SchedulerHooks):
    """The population of users submitting one workload.

    Args:
        env: the simulation environment.
        scheduler: where jobs are submitted.
        workload: the jobs, sorted by submit time.
        estimate: the scheduler's expected run time for each row (array).
        user_aware: honour dependencies (see the module docstring).
        make_job: optional factory ``(row) -> Job`` (defaults to the columns).
    """

    def __init__(self, env: simpy.Environment, scheduler: Scheduler, workload: Workload, *,
                 estimate: np.ndarray | None = None, user_aware: bool = False,
                 make_job: Callable[[int], Job] | None = None):
        self.env = env
        self.scheduler = scheduler
        self.workload = workload
        self.estimate = workload.req_time if estimate is None else estimate
        self.user_aware = user_aware
        self._make_job = make_job or self._job_from_row
        self._own_jobs = make_job is None   # jobs from the columns (made inline when due)
        self._cols = None
        self.submitted = 0
        self.total = len(workload)
        self._dependents: dict[int, list[int]] = {}
        independent = np.ones(len(workload), dtype=bool)
        if user_aware:
            ids = {int(j): i for i, j in enumerate(workload.job_id)}
            for i in np.flatnonzero((workload.prev_job >= 0) & (workload.think >= 0)):
                parent = ids.get(int(workload.prev_job[i]))
                if parent is not None and parent < i:
                    self._dependents.setdefault(int(workload.job_id[parent]), []).append(int(i))
                    independent[i] = False
            scheduler.add_hook(self)   # to hear when a job others depend on is done
        self._rows = np.flatnonzero(independent)
        self.submit_jobs()

    def _columns(self) -> tuple[list, ...]:
        """The workload's columns as lists, made at the first submit (Python
        scalars once for all rows: per-row numpy indexing is slow; columns, not
        one tuple per row: 10,000 tuples would all be tracked by the garbage
        collector for the whole run)."""
        c = self._cols
        if c is None:
            w = self.workload
            c = self._cols = (w.job_id.tolist(), w.submit.tolist(), w.run.tolist(),
                              w.procs.tolist(), w.req_time.tolist(),
                              np.asarray(self.estimate, dtype=np.float64).tolist(),
                              w.mem.tolist(), w.user.tolist(), w.prev_job.tolist(),
                              w.think.tolist())
        return c

    def _job_from_row(self, i: int) -> Job:
        c = self._columns()
        return Job(c[0][i], i, c[1][i], c[2][i], c[3][i], c[4][i], c[5][i], c[6][i], c[7][i],
                   c[8][i], c[9][i])

    def submit_jobs(self) -> None:
        """Submit the independent jobs at their submit times (started by ``__init__``).

        A chain of timers with callbacks, not a process: one timer per
        distinct submit time, each submitting every job due then before the
        scheduler runs, then setting the next timer. The first batch goes in
        from an urgent event at the start, where a process would begin.
        """
        env = self.env
        times = self.workload.submit[self._rows].tolist()
        rows = self._rows.tolist()
        submit = self.scheduler.submit
        make = self._make_job
        n = len(rows)
        k = 0
        cols = None

        def due(_event) -> None:
            # The loop of the process this replaces: submit what is due, then
            # sleep until the next submit time (the same float arithmetic).
            nonlocal k, cols
            if cols is None and self._own_jobs:
                cols = self._columns()
            while k < n:
                t = times[k]
                if t > clock(env) and _event is None:
                    timer(env, t - clock(env), due)
                    return
                _event = None
                # Every job due at this instant goes in before the scheduler runs.
                first = k
                if cols is not None:   # _job_from_row, inlined: once per job
                    ids, sub, run, procs, req, est, mem, user, prev, think = cols
                    while k < n and times[k] <= t:
                        i = rows[k]
                        submit(Job(ids[i], i, sub[i], run[i], procs[i], req[i], est[i], mem[i],
                                   user[i], prev[i], think[i]))
                        k += 1
                else:
                    while k < n and times[k] <= t:
                        submit(make(rows[k]))
                        k += 1
                self.submitted += k - first

        call_urgent(env, lambda _e: due(None))

    def job_done(self, job: Job) -> None:
        """Submit the jobs that waited for ``job`` a think time from now."""
        rows = self._dependents.pop(job.id, None)
        if rows:
            for i in rows:
                self.env.process(self._submit_after(i, float(self.workload.think[i])))

    def _submit_after(self, i: int, delay: float) -> Generator:
        yield self.env.timeout(delay)
        self.submitted += 1
        self.scheduler.submit(self._make_job(i))
