"""Pre-run features of a trace's jobs, causal by construction.

A job of a real trace (SWF or sacct, :class:`cosim.workloads.base.Workload`)
is described by what a scheduler knows when it is submitted:

* its request: ``req_time``, ``procs``, ``mem``;
* its trace fields: ``user`` and :data:`cosim.workloads.base.TRACE_FEATURES`
  (integer ids, categorical; -1 unknown);
* when it came: ``submit_hour`` (0-23, fractional) and ``submit_weekday``
  (0 Monday .. 6 Sunday) on the site's clock (``Workload.epoch`` and
  ``Workload.timezone``; NaN when the trace does not say when it started);
* its user's recent past, among the jobs that had *finished* when it was
  submitted (:data:`HISTORY_FEATURES`): the last three run times, most
  recent first, their mean ratio to their requests, how many of the
  user's jobs had finished and the mean run time of them all (Tsafrir, Etsion and Feitelson, IEEE TPDS 2007,
  and Gaussier et al., SC 2015, find the user's last run times the best
  single hint).

:class:`TraceHistory` holds that past and grows one finished job at a time
(``observe_finished``), so a simulation asks it for features as jobs arrive;
:func:`history_features` walks a whole trace in submit order with the same
class, letting a job in only once its end (``submit + wait + run`` in the
trace) is at or before the submit time asked about. Nothing here reads a
job's own run time, or that of a job still running.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from cosim.workloads.base import TRACE_FEATURES, Workload

__all__ = ["HISTORY_FEATURES", "REQUEST_FEATURES", "CLOCK_FEATURES", "TraceHistory",
           "history_features", "walk_finished", "clock_features", "trace_end",
           "static_columns", "trace_columns", "categorical_fields"]

#: The user's past among finished jobs, in feature order (NaN when there is none).
HISTORY_FEATURES: tuple[str, ...] = ("last_run_1", "last_run_2", "last_run_3",
                                     "last_ratio_mean", "finished_count", "user_mean_run")
#: What the job asks for.
REQUEST_FEATURES: tuple[str, ...] = ("req_time", "procs", "mem")
#: When it was submitted, on the site's clock.
CLOCK_FEATURES: tuple[str, ...] = ("submit_hour", "submit_weekday")

_N_LAST = 3


class TraceHistory:
    """Each user's finished jobs so far: what :data:`HISTORY_FEATURES` are made of.

    Feed it every job when it finishes (``observe_finished``) and ask it for
    the features of a job being submitted (``features``); it never sees a job
    that is still running, so what it answers is causal by construction.

    Examples:
        >>> h = TraceHistory()
        >>> h.observe_finished(7, run=100.0, req_time=200.0)
        >>> h.observe_finished(7, run=300.0, req_time=300.0)
        >>> h.features(7).tolist()
        [300.0, 100.0, nan, 0.75, 2.0, 200.0]
        >>> h.features(8).tolist()
        [nan, nan, nan, nan, 0.0, nan]
    """

    def __init__(self) -> None:
        self._runs: dict[int, deque[float]] = {}
        self._ratios: dict[int, deque[float]] = {}
        self._count: dict[int, int] = {}
        self._total: dict[int, float] = {}

    def observe_finished(self, user: int, run: float, req_time: float) -> None:
        """Record a job of ``user`` that has finished after ``run`` seconds (of ``req_time``)."""
        if not math.isfinite(run) or run < 0:
            return
        user = int(user)
        runs = self._runs.get(user)
        if runs is None:
            runs = self._runs[user] = deque(maxlen=_N_LAST)
            self._ratios[user] = deque(maxlen=_N_LAST)
        runs.append(float(run))
        self._ratios[user].append(run / req_time if req_time > 0 else math.nan)
        self._count[user] = self._count.get(user, 0) + 1
        self._total[user] = self._total.get(user, 0.0) + float(run)

    def features(self, user: int) -> np.ndarray:
        """:data:`HISTORY_FEATURES` of a job of ``user`` submitted now (float64, NaN: none)."""
        return np.asarray(self.feature_list(user), dtype=np.float64)

    def feature_list(self, user: int) -> list[float]:
        """:meth:`features` as a list (what a simulation asks for, a job at a time)."""
        user = int(user)
        runs = self._runs.get(user)
        if not runs:
            return [math.nan, math.nan, math.nan, math.nan, float(self._count.get(user, 0)),
                    math.nan]
        last = list(runs)[::-1] + [math.nan] * (_N_LAST - len(runs))
        ratios = [r for r in self._ratios[user] if math.isfinite(r)]
        count = float(self._count[user])
        return [*last, sum(ratios) / len(ratios) if ratios else math.nan, count,
                self._total[user] / count]

    def last_runs(self, user: int) -> list[float]:
        """The user's last (up to three) finished run times, oldest first."""
        return list(self._runs.get(int(user), ()))


def trace_end(workload: Workload) -> np.ndarray:
    """When each job ended in the trace: ``submit + wait + run`` (an unknown wait counts 0)."""
    wait = workload.features.get("wait")
    wait = np.zeros(len(workload)) if wait is None else np.maximum(
        np.asarray(wait, dtype=np.float64), 0.0)
    return workload.submit + wait + workload.run


def history_features(user: Any, submit: Any, end: Any, run: Any, req_time: Any) -> np.ndarray:
    """The ``(n, len(HISTORY_FEATURES))`` history of every job of a trace.

    Job ``i``'s row uses exactly the jobs ``j`` with ``end[j] <= submit[i]``
    (finished by then, ties included), fed to one :class:`TraceHistory` in
    order of their end; its own ``run`` and those of jobs ending later are
    never read.

    Args:
        user, submit, end, run, req_time: one value per job, any order.
    """
    user = np.asarray(user, dtype=np.int64)
    submit = np.asarray(submit, dtype=np.float64)
    end = np.asarray(end, dtype=np.float64)
    run = np.asarray(run, dtype=np.float64)
    req = np.asarray(req_time, dtype=np.float64)
    out = np.empty((len(user), len(HISTORY_FEATURES)))
    history = TraceHistory()

    def ask(i: int) -> None:
        out[i] = history.features(user[i])

    walk_finished(submit, end, lambda j: history.observe_finished(user[j], run[j], req[j]), ask)
    return out


def walk_finished(submit: np.ndarray, end: np.ndarray, finished: Callable[[int], None],
                  submitted: Callable[[int], None]) -> None:
    """Replay a trace's knowledge: ``submitted(i)`` for every job in submit order, each
    after ``finished(j)`` for every job ``j`` with ``end[j] <= submit[i]``, in end order."""
    n = len(submit)
    by_end = np.argsort(end, kind="stable").tolist()
    k = 0
    for i in np.argsort(submit, kind="stable").tolist():
        while k < n and end[by_end[k]] <= submit[i]:
            finished(by_end[k])
            k += 1
        submitted(i)


def clock_features(submit: Any, epoch: float | None, timezone: str = "") -> np.ndarray:
    """``(n, 2)``: the submit hour (fractional) and weekday (0 Monday) on the site's clock.

    Args:
        submit: seconds since ``epoch``.
        epoch: Unix time of submit 0, or None (then every value is NaN).
        timezone: IANA name (``"US/Pacific"``); "" or unknown: UTC.
    """
    submit = np.asarray(submit, dtype=np.float64)
    if epoch is None:
        return np.full((len(submit), 2), math.nan)
    t = submit + float(epoch)
    t = t + _utc_offsets(t, timezone)
    days = np.floor(t / 86400.0)
    hour = (t - days * 86400.0) / 3600.0
    weekday = np.mod(days + 3, 7)   # 1970-01-01 was a Thursday
    return np.column_stack([hour, weekday])


def _utc_offsets(t: np.ndarray, timezone: str) -> np.ndarray:
    """The zone's UTC offset (s) at each Unix time, looked up once per hour of the span."""
    if not timezone or len(t) == 0:
        return np.zeros(len(t))
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return np.zeros(len(t))
    hours = np.floor(t / 3600.0).astype(np.int64)
    first = int(hours.min())
    table = np.array([datetime.fromtimestamp(h * 3600, UTC).astimezone(zone).utcoffset()
                      .total_seconds() for h in range(first, int(hours.max()) + 1)])
    return table[hours - first]


def categorical_fields(workload: Workload) -> tuple[str, ...]:
    """``user`` and the trace fields the workload has, in :data:`TRACE_FEATURES` order."""
    return ("user",) + tuple(name for name in TRACE_FEATURES if name in workload.features)


def static_columns(workload: Workload) -> dict[str, np.ndarray]:
    """The features a job has from its submission on, whatever else has finished.

    Returns:
        name -> one value per job (the workload's row order):
        :data:`REQUEST_FEATURES` (float64), the categorical fields
        (:func:`categorical_fields`, int64) and :data:`CLOCK_FEATURES`. A
        simulation adds :data:`HISTORY_FEATURES` from its own
        :class:`TraceHistory`, fed as its jobs finish.
    """
    cols: dict[str, np.ndarray] = {
        "req_time": workload.req_time, "procs": workload.procs.astype(np.float64),
        "mem": workload.mem}
    for name in categorical_fields(workload):
        values = workload.user if name == "user" else workload.features[name]
        cols[name] = np.asarray(values, dtype=np.int64)
    clock = clock_features(workload.submit, workload.epoch, workload.timezone)
    cols.update({name: clock[:, k] for k, name in enumerate(CLOCK_FEATURES)})
    return cols


def trace_columns(workload: Workload) -> dict[str, np.ndarray]:
    """Every pre-run feature of every job as the trace ran, with the target and the end.

    Returns:
        ``job_id``, ``submit``, ``end`` (:func:`trace_end`), ``runtime`` (the
        target), the :func:`static_columns` and :data:`HISTORY_FEATURES` from
        the jobs that had finished in the trace by each submit.
    """
    end = trace_end(workload)
    cols: dict[str, np.ndarray] = {"job_id": workload.job_id, "submit": workload.submit,
                                   "end": end, "runtime": workload.run}
    cols.update(static_columns(workload))
    hist = history_features(workload.user, workload.submit, end, workload.run, workload.req_time)
    cols.update({name: hist[:, k] for k, name in enumerate(HISTORY_FEATURES)})
    return cols

