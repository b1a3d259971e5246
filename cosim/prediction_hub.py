"""Predictions inside the simulation: what the scheduler believes about run times.

At every decision point the :class:`PredictionHub` collects, in one batch,
every prediction the scheduler needs: a pre-run run-time prediction for each
newly queued job, and a remaining-time prediction for each running job whose
progress log advanced since it was last predicted. It hands the batch to a
backend, applies the answers (a queued job's ``estimate``, a running job's
expected end, which moves the availability profile). It predicts; it never
decides: RLSchert's rule-based kill (seed 001, section "Scheduler") is a
policy wrapper, :class:`cosim.policies.kill.KillRulePolicy`, that reads the
hub's latest progress check (:attr:`PredictionHub.checks`,
:attr:`PredictionHub.checked`).

The hub is a :class:`cosim.actors.scheduler.SchedulerHooks`: it prepares
each decision point and follows jobs; it changes the scheduler only through
its public methods (``set_queued_estimate``, ``set_expected_end``, ``apply``).

Backends (:class:`PredictionBackend`) are handed in by whoever composes the
run (``cosim.compose``): models called in process, a user-history learner, or
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
``job_id``, ``user``, ``req_time``, ``runtime`` and ``end`` (the simulated time) of each
job that completes. A backend that also has ``refit(now)`` (returning False where it declines) is fit
again on what it observed so far every ``refit_every_seconds`` of simulated time or every
``refit_every_jobs`` completions (``predictor.refit``): it only ever learns from jobs
that had finished.

Two optional columns of a remaining batch carry the SCF view of the step
under way when the workload's progress source has it (generated VASP jobs
do): ``scf_lines`` (per job, the ``dE`` of the SCF lines written so far in
the step under way) and ``startup`` (per job, seconds from its start to its
first SCF line; null until that line is out). Backends that do not know
them ignore them.

**In process** a backend may also answer ``remaining_arrays(batch)``
(:class:`predictors.bundle.PrecomputedBackend` does): the same remaining
batch as numpy arrays over the workload's flat progress rows (``job_id``,
``values``, ``starts``, ``k``, ``elapsed``, ``scf_done``, ``trace``,
``trace_starts``, ``trace_len``, ``startup``, ``prerun``), which skips
converting logs to lists and back. A backend whose answers depend only on
their own row (``independent_rows``) is also asked ahead: a job's first
call covers the progress checks to come as well (8, then 16, 32, ... of
them), so one call serves several checks; an answer is used only for the
elapsed time and pre-run input it was computed for, so the schedule is the
one of a call per check (``tests/test_prediction_arrays.py``). The VASP
scenario's ``@rnn`` rows make about 770 calls each instead of 2,700.

A backend that fails (an exception, or a timeout in the bridge) is not
fatal: the scheduler keeps the user estimates for that decision point and
counts the fallback.

**Reading predictions.** The hub keeps, per job, its latest
:class:`JobPrediction`: the pre-run prediction the scheduler queued it with
(re-estimated when it is requeued) and the latest remaining-time prediction
of its current run. :meth:`PredictionHub.prediction` and
:meth:`PredictionHub.running_predictions` are the public way to read them,
for example for a learned kill decision that sees the same numbers as the
rule (:meth:`cosim.policies.kill.KillRule.says`).

**A job that outlives its prediction** is re-predicted by the scheduler's
named correction (``scheduler.correction``: EASY++'s step-up ladder,
doubling, the request, or the overrun rule), capped at its request, which
stays its kill time: :mod:`cosim.actors.corrections`.

**Requeued jobs** (killed, or lost to a node failure) are
re-estimated when they join the queue again: with the in-run model, from
everything their interrupted run showed (its progress log at the
interruption, cut as a running job's would be: the remaining-time
prediction plus the time it had run, since a rerun repeats the work), else
with a fresh pre-run prediction. They never keep the estimate of their
previous attempt.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from cosim.actors.scheduler import Scheduler, SchedulerHooks
from cosim.errors import ScenarioError
from cosim.job import Job, JobState
from cosim.workloads.progress_arrays import FlatProgress

__all__ = ["PredictionBackend", "PredictionBatch", "PredictionHub",
           "JobPrediction", "PredictionStats", "feature_columns", "check_history_inputs",
           "scenario_hub"]


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


@dataclass
class JobPrediction:
    """What the hub last predicted for one job (read it with :meth:`PredictionHub.prediction`).

    Attributes:
        prerun: the run time the job was queued with: the pre-run prediction,
            or after a requeue its re-estimate (RLSchert's ``len_param``), s.
        prerun_at: simulated time of that prediction.
        attempt: the run it applies to (1 for the first run, 2 after one requeue).
        remaining: the latest remaining-time prediction of that run (s), NaN
            until the first one.
        remaining_at: simulated time of that prediction (NaN until then).
        elapsed: how long the run had been going then (s, NaN until then).
        model_prerun: the pre-run model's own answer, which the remaining-time
            model takes as an input (it stays the same across requeues).
    """

    prerun: float
    prerun_at: float
    attempt: int
    remaining: float = math.nan
    remaining_at: float = math.nan
    elapsed: float = math.nan
    model_prerun: float = math.nan

    @property
    def run_hat(self) -> float:
        """Predicted run time of the current run: elapsed + remaining (NaN before any)."""
        return self.elapsed + self.remaining

    def as_dict(self) -> dict[str, float]:
        """The fields and ``run_hat`` as a plain dict."""
        return {"prerun": self.prerun, "prerun_at": self.prerun_at, "attempt": self.attempt,
                "remaining": self.remaining, "remaining_at": self.remaining_at,
                "elapsed": self.elapsed, "run_hat": self.run_hat,
                "model_prerun": self.model_prerun}


@dataclass
class PredictionStats:
    """Counters reported in ``summary.json``."""

    batches: int = 0
    runtime_predictions: int = 0
    remaining_predictions: int = 0
    fallbacks: int = 0
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    versions: set[str] = field(default_factory=set)
    service_seconds: float = 0.0
    refits: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"prediction_batches": self.batches,
                "runtime_predictions": self.runtime_predictions,
                "remaining_predictions": self.remaining_predictions,
                "prediction_fallbacks": self.fallbacks,
                "prediction_fallback_reasons": dict(self.fallback_reasons),
                "model_versions": sorted(self.versions),
                "prediction_service_seconds": self.service_seconds,
                "model_refits": self.refits}


@dataclass
class PredictionBatch:
    """What one decision point needs (see the module docstring).

    ``requeued_runtime`` / ``requeued_remaining`` are requeued jobs
    re-estimated in this batch (their rows are the first of the ``runtime`` /
    ``remaining`` columns); ``requeued_elapsed`` is how long each of the latter
    had run.
    """

    now: float
    runtime_jobs: list[Job]
    remaining_jobs: list[Job]
    runtime: dict[str, Any] | None
    remaining: dict[str, Any] | None
    requeued_runtime: list[Job] = field(default_factory=list)
    requeued_remaining: list[Job] = field(default_factory=list)
    requeued_elapsed: list[float] = field(default_factory=list)


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
        feature_names: feature columns sent to the backend.
        refit_every_seconds, refit_every_jobs: call the backend's ``refit(now)``
            every so many simulated seconds or completed jobs (at most one of
            the two; neither: never).

    Attributes:
        checks: progress checks whose answers were applied so far.
        checked: the running jobs re-predicted at the latest of them, in the
            order they were asked about (what the kill rule reads).
    """

    def __init__(self, workload, backend: PredictionBackend | None, *,
                 remaining: bool = False, interval: float = 300.0, min_remaining: float = 30.0,
                 feature_names: list[str] | None = None,
                 refit_every_seconds: float | None = None, refit_every_jobs: int | None = None):
        self.workload = workload
        self.backend = backend
        self.use_remaining = remaining and workload.progress is not None
        self.interval = interval
        self.min_remaining = min_remaining
        self.stats = PredictionStats()
        feats = workload.features
        names = feature_names if feature_names is not None else [
            k for k in feats if k != "progress_index"]
        self._features = {k: feats[k] for k in names if k in feats}
        self._progress_index = feats.get("progress_index")
        self._pred: dict[Job, JobPrediction] = {}    # latest predictions per job
        self._seen: dict[Job, tuple[int, int]] = {}   # progress last predicted from
        self._requeued: dict[Job, float] = {}         # requeued, to re-estimate: time it ran
        self._rows: dict[Job, list[list[float]]] = {}  # JSON-able log rows converted so far
        self._tick = False
        self.checks = 0
        self.checked: list[Job] = []
        self._last_tick = math.nan
        self._observe = getattr(backend, "observe", None)
        self._refit = getattr(backend, "refit", None)
        self.refit_every_seconds = refit_every_seconds
        self.refit_every_jobs = refit_every_jobs
        self._completed = 0
        self.scheduler: Scheduler | None = None
        # In process, remaining-time batches go as flat arrays (no per-job lists)
        # and, where every answer depends only on its own row, ahead of time.
        self._flat = None
        self._ahead = False
        if self.use_remaining and hasattr(backend, "remaining_arrays"):
            self._flat = FlatProgress.of(workload.progress)
            self._ahead = self._flat is not None and bool(
                getattr(backend, "independent_rows", False))
        self._answers: dict[Job, dict[float, tuple[float, float]]] = {}  # elapsed -> (prerun, s)
        self._asked_until: dict[Job, tuple[float, int]] = {}  # last tick asked, ticks asked

    # -- reading predictions ------------------------------------------------------------
    def prediction(self, job: Job) -> JobPrediction | None:
        """The latest predictions for ``job`` (None before its first pre-run prediction).

        ``prerun`` is what the job was queued with in its current attempt;
        ``remaining``, ``elapsed`` and ``run_hat`` are from the latest progress
        check of its current run (NaN before the first one).
        """
        return self._pred.get(job)

    def running_predictions(self) -> list[tuple[Job, JobPrediction]]:
        """Every running job with its latest predictions, by expected end (soonest first).

        The view a learned kill decision needs: the same per-job numbers the
        rule reads (:meth:`cosim.policies.kill.KillRule.says`: ``prediction.elapsed``,
        ``len_param = prediction.prerun``, ``prediction.run_hat``).
        """
        out = []
        for _, _, job in self.scheduler.ends:
            pred = self._pred.get(job)
            if pred is not None:
                out.append((job, pred))
        return out

    # -- the scheduler's side ------------------------------------------------------
    def attach(self, scheduler: Scheduler) -> None:
        """Start following ``scheduler`` (and its progress timer, for remaining time)."""
        self.scheduler = scheduler
        self.env = scheduler.env
        if self.use_remaining:
            self.env.process(self.check_progress())
        if self._refit is not None and self.refit_every_seconds:
            self.env.process(self._refit_timer())

    def job_queued(self, job: Job) -> None:
        """A requeued job (it ran before) is re-estimated at the next decision point."""
        if job.attempts >= 1:
            self._requeued[job] = float(self.env.now - job.start)
            self._seen.pop(job, None)

    def job_left(self, job: Job, completed: bool) -> None:
        """A completed run teaches an online backend (user history) something."""
        if completed:
            self._rows.pop(job, None)
            self._answers.pop(job, None)
            self._asked_until.pop(job, None)
        if completed and self._observe is not None:
            now = float(self.env.now)
            self._observe({"job_id": [job.id], "user": [job.user], "req_time": [job.req_time],
                           "runtime": [now - job.start], "end": [now]})
            if self._refit is not None and self.refit_every_jobs:
                self._completed += 1
                if self._completed % self.refit_every_jobs == 0:
                    self._refit_now()

    def _refit_now(self) -> None:
        # a backend may decline (too little to learn from yet) by returning False
        if self._refit(float(self.env.now)) is not False:
            self.stats.refits += 1

    def _refit_timer(self) -> Generator:
        """Process: refit the backend every ``refit_every_seconds`` (it wakes no one)."""
        while True:
            yield self.env.timeout(self.refit_every_seconds)
            self._refit_now()

    def check_progress(self) -> Generator:
        """Process: wake the scheduler every ``interval`` while jobs run."""
        env = self.env
        sched = self.scheduler
        while True:
            yield env.timeout(self.interval)
            self._last_tick = env.now
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
            elif batch.remaining_jobs or batch.requeued_remaining:
                remaining, version = self._remaining_in_process(batch)
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

    # -- in process: flat arrays, asked ahead ---------------------------------------
    def _prerun_input(self, job: Job) -> float:
        """The pre-run prediction the remaining-time model reads for ``job``."""
        pred = self._pred.get(job)
        return pred.model_prerun if pred is not None and math.isfinite(
            pred.model_prerun) else job.estimate

    def _remaining_in_process(self, batch: PredictionBatch) -> tuple[list[float], str]:
        """Answer a remaining batch from flat arrays, with answers asked ahead where allowed.

        Without asking ahead this is one backend call with the batch's jobs.
        With it (a backend whose answers depend only on their own row), a job
        missing from the answers already known is asked for now and for the
        progress checks to come (the times the timer will wake at), so one
        call serves many checks; an answer is used only for the very elapsed
        time and pre-run input it was computed for, so the values are exactly
        those of one call per check.
        """
        now = batch.now
        jobs = batch.requeued_remaining + batch.remaining_jobs
        elapsed = list(batch.requeued_elapsed) + [now - j.start for j in batch.remaining_jobs]
        prerun = [self._prerun_input(j) for j in jobs]
        if not self._ahead:
            return self._call_arrays(jobs, elapsed, prerun)
        known = self._answers
        ask_jobs: list[Job] = []
        ask_el: list[float] = []
        ask_pre: list[float] = []
        for job, e, pre in zip(jobs, elapsed, prerun, strict=True):
            hit = known.get(job, {}).get(e)
            if hit is None or hit[0] != pre:
                ask_jobs.append(job)
                ask_el.append(e)
                ask_pre.append(pre)
        if ask_jobs:
            self._ask_ahead(ask_jobs, ask_el, ask_pre, batch.remaining_jobs)
        version = getattr(self.backend, "version", "")
        return [known[j][e][1] for j, e in zip(jobs, elapsed, strict=True)], version

    def _ask_ahead(self, jobs: list[Job], elapsed: list[float], prerun: list[float],
                   running: list[Job]) -> None:
        """One backend call: the missing answers, and answers for the checks to come.

        A running job is asked ahead for twice as many checks as the last
        time (8, 16, 32, ...), so a short job wastes little and a long one
        needs few calls; every running job whose answers run out within two
        checks is topped up in the same call. Checks at which a job's
        progress will not have moved are skipped (the hub does not ask then).
        """
        tick = self._last_tick
        step = self.interval
        ahead_jobs = dict.fromkeys(running) if math.isfinite(tick) else {}
        if math.isfinite(tick) and self.scheduler is not None:
            for _, _, job in self.scheduler.ends:
                until = self._asked_until.get(job)
                if until is None or until[0] <= tick + 2 * step:
                    ahead_jobs[job] = None
        rows_j, rows_e, rows_p = list(jobs), list(elapsed), list(prerun)
        for job in ahead_jobs:
            if job.state != JobState.RUNNING:
                continue
            until, count = self._asked_until.get(job, (tick, 4))
            count = min(2 * count, 256)
            # the timer's own sums (t += step, in order), so the times match its wake-ups
            times = np.full(count + 1, step)
            times[0] = max(until, tick)
            times = np.add.accumulate(times)[1:]
            self._asked_until[job] = (float(times[-1]), count)
            pre = self._prerun_input(job)
            for e in self._flat.moves(int(self._progress_index[job.index]), times - job.start):
                rows_j.append(job)
                rows_e.append(e)
                rows_p.append(pre)
        values, _ = self._call_arrays(rows_j, rows_e, rows_p)
        for job, e, pre, v in zip(rows_j, rows_e, rows_p, values, strict=True):
            self._answers.setdefault(job, {})[e] = (pre, v)

    def _call_arrays(self, jobs: list[Job], elapsed: list[float], prerun: list[float]
                     ) -> tuple[list[float], str]:
        pidx = self._progress_index
        batch = self._flat.batch([int(pidx[j.index]) for j in jobs], elapsed)
        batch["job_id"] = self.workload.job_id[[j.index for j in jobs]].tolist()
        batch["prerun"] = np.asarray(prerun, dtype=np.float64)
        values, version = self.backend.remaining_arrays(batch)
        return np.asarray(values, dtype=float).tolist(), version

    # -- collecting ------------------------------------------------------------------
    def _columns(self, jobs: list[Job]) -> dict[str, Any]:
        return feature_columns(self.workload, [j.index for j in jobs], list(self._features))

    def _progress_columns(self, jobs: list[Job], elapsed: list[float]) -> dict[str, Any]:
        """The remaining-batch columns of ``jobs`` seen ``elapsed`` seconds into their run."""
        progress = self.workload.progress
        pidx = self._progress_index
        trace = getattr(progress, "scf_trace", None)
        startup_at = getattr(progress, "startup_at", None)
        cols = self._columns(jobs)
        logs, scf, prerun, lines, startup = [], [], [], [], []
        for job, e in zip(jobs, elapsed, strict=True):
            i = int(pidx[job.index])
            logs.append(self._log_rows(job, i, e))
            scf.append(progress.progress_at(i, e)[1])
            pred = self._pred.get(job)
            prerun.append(pred.model_prerun if pred is not None and math.isfinite(
                pred.model_prerun) else job.estimate)
            if trace is not None:
                lines.append(trace(i, e).tolist())
            if startup_at is not None:
                su = startup_at(i, e)
                startup.append(su if math.isfinite(su) else None)
        cols.update(elapsed=list(elapsed), scf_done=scf, prerun=prerun, progress=logs)
        if trace is not None:
            cols["scf_lines"] = lines
        if startup_at is not None:
            cols["startup"] = startup
        return cols

    def _log_rows(self, job: Job, i: int, elapsed: float) -> list[list[float]]:
        """The finished ionic steps of ``job`` by ``elapsed`` as JSON-able rows.

        A log only grows while a job runs, so the rows converted at earlier
        checks are kept and only new ones are converted (an MD run has
        thousands); the batch gets a copy of the list.
        """
        log = self.workload.progress.progress_log(i, elapsed)
        n = len(log["elapsed"])
        rows = self._rows.get(job)
        if rows is None or len(rows) > n:
            rows = self._rows[job] = []
        if len(rows) < n:
            k = len(rows)
            rows.extend(np.column_stack([log["elapsed"][k:], log["denergy"][k:],
                                         log["max_force"][k:], log["scf_steps"][k:]]).tolist())
        return rows[:n] if len(rows) > n else list(rows)

    def collect(self, view) -> PredictionBatch | None:
        """The predictions this decision point needs, or None."""
        now = float(self.env.now)
        # requeued jobs: from what their last run showed, else a fresh pre-run prediction
        req_rt: list[Job] = []
        req_rem: list[Job] = []
        req_el: list[float] = []
        for job, ran in list(self._requeued.items()):
            if job.state != JobState.QUEUED:
                continue
            del self._requeued[job]
            if self.backend is None:
                continue
            if self.use_remaining and self._has_progress(job, ran):
                req_rem.append(job)
                req_el.append(ran)
            else:
                req_rt.append(job)
        new = [j for j in view.new_jobs if j.state == JobState.QUEUED and j not in self._pred]
        runtime_jobs: list[Job] = []
        if new:
            if self.backend is not None:
                runtime_jobs = new
            else:
                for job in new:
                    self._pred[job] = JobPrediction(job.estimate, now, job.attempts + 1)
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
        if not (runtime_jobs or remaining_jobs or req_rt or req_rem):
            return None
        rt_all = req_rt + runtime_jobs
        runtime = self._columns(rt_all) if rt_all else None
        rem_all = req_rem + remaining_jobs
        remaining = self._progress_columns(
            rem_all, req_el + [now - j.start for j in remaining_jobs]) \
            if rem_all and self._flat is None else None
        return PredictionBatch(now, runtime_jobs, remaining_jobs, runtime, remaining,
                               req_rt, req_rem, req_el)

    def _has_progress(self, job: Job, ran: float) -> bool:
        mark = self.workload.progress.progress_at(int(self._progress_index[job.index]), ran)
        return mark[0] > 0 or mark[1] > 0

    # -- applying ----------------------------------------------------------------------
    def apply(self, batch: PredictionBatch, runtime, remaining) -> None:
        """Use the answers (None: the call failed, keep user estimates)."""
        sched = self.scheduler
        now = batch.now
        rt_jobs = batch.requeued_runtime + batch.runtime_jobs
        if rt_jobs:
            if runtime is None or len(runtime) != len(rt_jobs):
                if runtime is not None:
                    self._fallback("wrong answer length")
                for job in rt_jobs:
                    self._record_prerun(job, job.estimate, now, math.nan)
            else:
                self.stats.runtime_predictions += len(runtime)
                for job, value in zip(rt_jobs, np.asarray(runtime, dtype=float).tolist()):
                    if not math.isfinite(value):
                        self._record_prerun(job, job.estimate, now, math.nan)
                        continue
                    value = max(1.0, value)
                    self._record_prerun(job, value, now, value)
        rem_jobs = batch.requeued_remaining + batch.remaining_jobs
        if not rem_jobs:
            return
        if remaining is None or len(remaining) != len(rem_jobs):
            if remaining is not None:
                self._fallback("wrong answer length")
            for job in batch.requeued_remaining:   # keep a known estimate: the pre-run one
                pred = self._pred.get(job)
                self._record_prerun(job, pred.prerun if pred else job.estimate, now,
                                    pred.model_prerun if pred else math.nan)
            return
        self.stats.remaining_predictions += len(remaining)
        values = np.asarray(remaining, dtype=float).tolist()
        n_req = len(batch.requeued_remaining)
        for job, ran, value in zip(batch.requeued_remaining, batch.requeued_elapsed,
                                   values[:n_req], strict=True):
            pred = self._pred.get(job)
            model_prerun = pred.model_prerun if pred else math.nan
            if math.isfinite(value):
                # a rerun repeats the work: what the interrupted run was expected to take
                self._record_prerun(job, ran + max(self.min_remaining, value), now, model_prerun)
            else:
                self._record_prerun(job, pred.prerun if pred else job.estimate, now, model_prerun)
        checked = []
        for job, value in zip(batch.remaining_jobs, values[n_req:], strict=True):
            if job.state != JobState.RUNNING or not math.isfinite(value):
                continue
            rem = max(self.min_remaining, value)
            elapsed = now - job.start
            sched.set_expected_end(job, now + rem)
            pred = self._pred.get(job)
            if pred is None:
                pred = self._pred[job] = JobPrediction(job.estimate, now, job.attempts)
            pred.remaining, pred.remaining_at, pred.elapsed = rem, now, elapsed
            checked.append(job)
        self.checked = checked
        self.checks += 1

    def _record_prerun(self, job: Job, value: float, now: float, model_prerun: float) -> None:
        """Queue ``job`` with ``value`` and start its prediction record for the next run."""
        old = self._pred.get(job)
        if not math.isfinite(model_prerun) and old is not None:
            model_prerun = old.model_prerun
        self._pred[job] = JobPrediction(value, now, job.attempts + 1, model_prerun=model_prerun)
        if job.state == JobState.QUEUED and value != job.estimate:
            self.scheduler.set_queued_estimate(job, value)


def scenario_hub(predictor: str, scenario, workload, backend, *,
                 feature_names: list[str] | None = None, refit=None) -> PredictionHub:
    """The hub of ``@PREDICTOR`` with the scenario's ``predictor`` settings (``refit``: a
    :class:`cosim.config.RefitConfig`, or None: never), ``@history`` refused where it cannot
    work (:func:`check_history_inputs`): the one construction for a run (:mod:`cosim.compose`)
    and the evaluation protocol's windows (:mod:`cosim.evaluation`)."""
    check_history_inputs(predictor, scenario, workload)
    pc = scenario.predictor
    return PredictionHub(workload, backend, remaining=predictor == "rnn",
                         interval=pc.update_interval, min_remaining=pc.min_remaining,
                         feature_names=feature_names or [],
                         refit_every_seconds=refit.every_seconds if refit else None,
                         refit_every_jobs=refit.every_jobs if refit else None)


def check_history_inputs(predictor: str | None, scenario, workload) -> None:
    """Refuse ``@history`` where it cannot work as EASY++ means it.

    The last-two history is per user and capped at the request: on a
    workload without user ids (every user -1) all jobs would share one
    history, and without requested times (SWF field 9 missing, replaced by
    the run time) the cap would be each job's own run time. Either is
    refused unless ``predictor.allow_shared_history`` /
    ``predictor.allow_missing_requests`` says to run anyway.

    Raises:
        ScenarioError: one line naming the workload, what it lacks and the way out.
    """
    if predictor != "history" or len(workload) == 0:
        return
    kind = scenario.workload.kind
    name = Path(workload.source).name if kind in ("swf", "slurm") and workload.source \
        else f"the {kind} workload"
    pc = scenario.predictor
    if not pc.allow_shared_history and bool((workload.user < 0).all()):
        raise ScenarioError(name, "none (every job's user is -1: @history would share one "
                            "history among all jobs)", "user ids for @history",
                            "use @estimate, or --set predictor.allow_shared_history=true")
    missing = workload.features.get("req_time_missing")
    if not pc.allow_missing_requests and scenario.workload.estimates.model == "trace" \
            and missing is not None and bool(missing.all()):
        raise ScenarioError(name, "none (every request is missing: @history would be capped "
                            "at each job's own run time)", "requested times for @history",
                            "use @estimate, or --set predictor.allow_missing_requests=true")
