"""Predictions inside the simulation: what the scheduler believes about run times.

At every decision point the :class:`PredictionHub` collects, in one batch,
every prediction the scheduler needs: a pre-run run-time prediction for each
newly queued job, and a remaining-time prediction for each running job whose
progress log advanced since it was last predicted. It hands the batch to a
backend, applies the answers (a queued job's ``estimate``, a running job's
expected end, which moves the availability profile), and may then apply
RLSchert's rule-based kill (seed 001, section "Scheduler").

The hub is a :class:`cosim.actors.scheduler.SchedulerHooks`: it prepares
each decision point and follows jobs; it changes the scheduler only through
its public methods (``set_queued_estimate``, ``set_expected_end``, ``apply``).

Backends (:class:`PredictionBackend`) are handed in by whoever composes the
run (``cosim.runner``): models called in process, a user-history learner, or
a prediction service in process or over HTTP behind the asyncio bridge
(``cosim.bridge``). They answer two batched calls on JSON-able column dicts:

- ``runtime(batch) -> (seconds, version)``: batch columns ``job_id``,
  ``user``, ``req_time``, ``cores`` and one list per feature.
- ``remaining(batch) -> (seconds, version)``: the same plus ``elapsed``,
  ``scf_done`` (SCF steps finished in the ionic step under way),
  ``prerun`` (the job's pre-run prediction) and ``progress`` (per job, its
  completed ionic steps as rows ``[elapsed, denergy, max_force, scf_steps]``).

A call may instead return a generator, which runs inside the scheduler's
process and may yield SimPy events before returning the answer (the bridge
does this to wait for an asyncio service). A backend that learns online
(user history) also has ``observe(batch)``, called with the columns
``job_id``, ``user``, ``req_time`` and ``runtime`` of each job that completes.

A backend that fails (an exception, or a timeout in the bridge) is not
fatal: the scheduler keeps the user estimates for that decision point and
counts the fallback.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.job import Job, JobState
from cosim.policy import kill

__all__ = ["PredictionBackend", "PredictionBatch", "PredictionHub", "KillRule", "PredictionStats",
           "feature_columns"]


def feature_columns(workload, rows: list[int], names: list[str]) -> dict[str, Any]:
    """The batch columns of workload ``rows``: ids, user, request, cores and features
    (an unknown feature value, NaN in the workload, is None)."""
    idx = np.asarray(rows, dtype=np.int64)
    cols: dict[str, Any] = {
        "job_id": workload.job_id[idx].tolist(), "user": workload.user[idx].tolist(),
        "req_time": workload.req_time[idx].tolist(), "cores": workload.procs[idx].tolist()}
    for name in names:
        if name in workload.features and name != "progress_index":
            values = workload.features[name][idx]
            col = values.tolist()
            if values.dtype.kind == "f" and np.isnan(values).any():
                # null is a batch's "unknown" (services refuse NaN)
                col = [None if v != v else v for v in col]
            cols[name] = col
    return cols


Answer = tuple[np.ndarray, str]


class PredictionBackend(Protocol):
    """Where predictions come from (see the module docstring for the batch columns)."""

    def runtime(self, batch: dict[str, Any]) -> Answer | Generator:
        """Pre-run run-time predictions (s) and the model version."""
        ...

    def remaining(self, batch: dict[str, Any]) -> Answer | Generator:
        """Remaining-time predictions (s) for running jobs and the model version."""
        ...


@dataclass(frozen=True)
class KillRule:
    """RLSchert's rule-based kill, in seconds instead of its time units.

    A running job is killed and requeued when it has run less than its
    pre-run prediction, that prediction called it short (< ``short``), the
    in-run prediction of its total run time calls it long (> ``long``), the
    two differ by more than ``error``, it has not been killed before, and a
    short job waits in the queue to use its cores.
    """

    short: float = 1800.0
    long: float = 7200.0
    error: float = 600.0


@dataclass
class PredictionStats:
    """Counters reported in ``summary.json``."""

    batches: int = 0
    runtime_predictions: int = 0
    remaining_predictions: int = 0
    fallbacks: int = 0
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    rule_kills: int = 0
    versions: set[str] = field(default_factory=set)
    service_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"prediction_batches": self.batches,
                "runtime_predictions": self.runtime_predictions,
                "remaining_predictions": self.remaining_predictions,
                "prediction_fallbacks": self.fallbacks,
                "prediction_fallback_reasons": dict(self.fallback_reasons),
                "rule_kills": self.rule_kills,
                "model_versions": sorted(self.versions),
                "prediction_service_seconds": self.service_seconds}


@dataclass
class PredictionBatch:
    """What one decision point needs (see the module docstring)."""

    now: float
    runtime_jobs: list[Job]
    remaining_jobs: list[Job]
    runtime: dict[str, Any] | None
    remaining: dict[str, Any] | None


class PredictionHub(SchedulerHooks):
    """Collects, requests and applies predictions for one scheduler.

    Give it to the scheduler as a hook (``build(..., hooks=[hub])``).

    Args:
        workload: the workload (features and, for remaining time, ``progress``).
        backend: a :class:`PredictionBackend` for pre-run (and remaining-time)
            predictions, or None to keep the requested times.
        remaining: ask the backend for running jobs' remaining time.
        interval: seconds between progress checks while jobs run (a timer
            process wakes the scheduler; progress is not an event).
        min_remaining: floor of a remaining-time prediction (s).
        kill_rule: a :class:`KillRule`, or None.
        feature_names: feature columns sent to the backend.
    """

    def __init__(self, workload, backend: PredictionBackend | None, *,
                 remaining: bool = False, interval: float = 300.0, min_remaining: float = 30.0,
                 kill_rule: KillRule | None = None, feature_names: list[str] | None = None):
        self.workload = workload
        self.backend = backend
        self.use_remaining = remaining and workload.progress is not None
        self.interval = interval
        self.min_remaining = min_remaining
        self.kill_rule = kill_rule
        self.stats = PredictionStats()
        feats = workload.features
        names = feature_names if feature_names is not None else [
            k for k in feats if k != "progress_index"]
        self._features = {k: feats[k] for k in names if k in feats}
        self._progress_index = feats.get("progress_index")
        self._prerun: dict[Job, float] = {}        # pre-run prediction per job
        self._seen: dict[Job, tuple[int, int]] = {}   # progress last predicted from
        self._tick = False
        self._observe = getattr(backend, "observe", None)
        self.scheduler: Scheduler | None = None

    # -- the scheduler's side ------------------------------------------------------
    def attach(self, scheduler: Scheduler) -> None:
        """Start following ``scheduler`` (and its progress timer, for remaining time)."""
        self.scheduler = scheduler
        self.env = scheduler.env
        if self.use_remaining:
            self.env.process(self.check_progress())

    def job_left(self, job: Job, completed: bool) -> None:
        """A completed run teaches an online backend (user history) something."""
        if completed and self._observe is not None:
            self._observe({"job_id": [job.id], "user": [job.user], "req_time": [job.req_time],
                           "runtime": [self.env.now - job.start]})

    def check_progress(self) -> Generator:
        """Process: wake the scheduler every ``interval`` while jobs run."""
        env = self.env
        sched = self.scheduler
        while True:
            yield env.timeout(self.interval)
            if sched.ends:
                self._tick = True
                sched.wake()

    def prepare(self, view) -> Generator:
        """Run at each decision point before the policy: fetch and apply one batch.

        Yields only when the backend waits for something (the bridge); in
        process it returns at once.
        """
        batch = self.collect(view)
        if batch is None:
            return
        self.stats.batches += 1
        runtime = remaining = None
        version = ""
        try:
            if batch.runtime is not None:
                runtime, version = yield from self._ask("runtime", batch.runtime)
            if batch.remaining is not None:
                remaining, version = yield from self._ask("remaining", batch.remaining)
        except Exception as exc:   # a failing service must not stop the simulation
            self._fallback(str(getattr(exc, "reason", "") or type(exc).__name__))
            runtime = remaining = None
        if version:
            self.stats.versions.add(version)
        self.apply(batch, runtime, remaining)

    def _ask(self, kind: str, batch: dict) -> Generator:
        answer = getattr(self.backend, kind)(batch)
        if isinstance(answer, Generator):
            answer = yield from answer
        return answer

    def _fallback(self, reason: str) -> None:
        s = self.stats
        s.fallbacks += 1
        s.fallback_reasons[reason] = s.fallback_reasons.get(reason, 0) + 1

    # -- collecting ------------------------------------------------------------------
    def _columns(self, jobs: list[Job]) -> dict[str, Any]:
        return feature_columns(self.workload, [j.index for j in jobs], list(self._features))

    def collect(self, view) -> PredictionBatch | None:
        """The predictions this decision point needs, or None."""
        now = float(self.env.now)
        new = [j for j in view.new_jobs if j.state == JobState.QUEUED and j not in self._prerun]
        runtime_jobs: list[Job] = []
        if new:
            if self.backend is not None:
                runtime_jobs = new
            else:
                for job in new:
                    self._prerun[job] = job.estimate
        remaining_jobs: list[Job] = []
        if self.use_remaining and self._tick:
            # Running jobs are re-predicted together at each progress check:
            # one batch per interval, each job only if its log has grown.
            self._tick = False
            progress = self.workload.progress
            pidx = self._progress_index
            for _, _, job in view.ends():
                mark = progress.progress_at(int(pidx[job.index]), now - job.start)
                if self._seen.get(job) != mark and (mark[0] > 0 or mark[1] > 0):
                    self._seen[job] = mark
                    remaining_jobs.append(job)
        if not runtime_jobs and not remaining_jobs:
            return None
        runtime = self._columns(runtime_jobs) if runtime_jobs else None
        remaining = None
        if remaining_jobs:
            remaining = self._columns(remaining_jobs)
            progress = self.workload.progress
            pidx = self._progress_index
            logs, elapsed, scf, prerun = [], [], [], []
            for job in remaining_jobs:
                e = now - job.start
                log = progress.progress_log(int(pidx[job.index]), e)
                logs.append(np.column_stack([log["elapsed"], log["denergy"], log["max_force"],
                                             log["scf_steps"]]).tolist())
                elapsed.append(e)
                scf.append(self._seen[job][1])
                prerun.append(self._prerun.get(job, job.estimate))
            remaining.update(elapsed=elapsed, scf_done=scf, prerun=prerun, progress=logs)
        return PredictionBatch(now, runtime_jobs, remaining_jobs, runtime, remaining)

    # -- applying ----------------------------------------------------------------------
    def apply(self, batch: PredictionBatch, runtime, remaining) -> None:
        """Use the answers (None: the call failed, keep user estimates)."""
        sched = self.scheduler
        if batch.runtime_jobs:
            if runtime is None or len(runtime) != len(batch.runtime_jobs):
                if runtime is not None:
                    self._fallback("wrong answer length")
                for job in batch.runtime_jobs:
                    self._prerun[job] = job.estimate
            else:
                self.stats.runtime_predictions += len(runtime)
                for job, value in zip(batch.runtime_jobs, np.asarray(runtime, dtype=float).tolist()):
                    value = max(1.0, value) if math.isfinite(value) else job.estimate
                    self._prerun[job] = value
                    if job.state == JobState.QUEUED:
                        sched.set_queued_estimate(job, value)
        if batch.remaining_jobs:
            if remaining is None or len(remaining) != len(batch.remaining_jobs):
                if remaining is not None:
                    self._fallback("wrong answer length")
                return
            self.stats.remaining_predictions += len(remaining)
            now = batch.now
            victims = []
            for job, value in zip(batch.remaining_jobs, np.asarray(remaining, dtype=float).tolist()):
                if job.state != JobState.RUNNING or not math.isfinite(value):
                    continue
                rem = max(self.min_remaining, value)
                sched.set_expected_end(job, now + rem)
                if self.kill_rule is not None and self._worth_killing(job, now, rem):
                    victims.append((job, now - job.start + rem))
            for job, total in victims:
                self._kill(job, total)

    def _worth_killing(self, job: Job, now: float, remaining: float) -> bool:
        rule = self.kill_rule
        prerun = self._prerun.get(job, job.estimate)
        elapsed = now - job.start
        total = elapsed + remaining
        if job.attempts > 1 or elapsed >= prerun or prerun >= rule.short or total <= rule.long:
            return False
        if abs(total - prerun) <= rule.error:
            return False
        q = self.scheduler.queue
        return bool(q.count and np.any(q.estimate[q.slots()] < rule.short))

    def _kill(self, job: Job, total: float) -> None:
        if self.scheduler.apply(kill(job, "kill rule: run time badly underestimated",
                                     requeue=True)):
            self.stats.rule_kills += 1
            # When it comes back it is known to be long.
            self._prerun[job] = total
            job.estimate = total
