"""Scheduling metrics from a run's jobs and events tables.

Every definition is written down once, in ``docs/metrics.md`` (and in one
line per key in :data:`METRIC_DEFINITIONS`, which the report shows); the
functions take the engine's tables as dicts of equal-length arrays (the
columns of :data:`cosim.records.JOBS_SCHEMA` and
:data:`cosim.records.EVENTS_SCHEMA`; a :class:`cosim.records.RecordTable`
read back from Parquet works too).

Rules shared by all metrics here:

* **Finished jobs** are those with outcome ``completed`` or ``timeout``: they
  ran and ended. Averages, maxima and percentiles of per-job metrics (wait,
  response, slowdown, bsld) are over finished jobs only, except ``wait_max``:
  the longest time queued also counts failed jobs and jobs given up in the
  queue (:func:`queued_time`; their mean is ``wait_mean_failed``). ``failed``,
  ``rejected`` and ``unfinished`` jobs are counted (``jobs_unfinished`` says
  how many were still queued or running when the run stopped,
  ``jobs_never_started`` how many never started) but enter no average.
* **Useful work** is the core-time of attempts that *completed*. A job
  killed at its walltime (``timeout``) finished but did not complete: its
  last attempt is busy time, wasted, like attempts that were killed or lost
  to a node failure. Busy = useful + waste; the waste is reported by cause.
* **Span** is first submit (over all jobs) to last end (over jobs that
  ended). Time averages (queue length, queued load, resource holes) are
  integrals over the span divided by its length.
* **Step functions** over time come from the events table: several rows can
  share a time, and the LAST row at each time holds the state from that time
  until the next distinct time. Before the first row the state is empty.
* A metric that is undefined (no finished job, zero-length span) is ``None``
  in :func:`summarize`, so the summary is strict JSON.

Size classes (by ``procs``, absolute, so one cluster's classes compare across
policies and traces; a node-granular cluster counts nodes):
``1`` (serial), ``2-8``, ``9-32``, ``33-128``, ``>128``.
Run-time classes (by the actual run of the final attempt):
``<10m``, ``10m-1h``, ``1h-4h``, ``>4h``, each interval closed below.

Examples:
    >>> jobs = {"submit": [0.0, 0.0], "start": [0.0, 10.0], "end": [10.0, 30.0],
    ...         "run": [10.0, 20.0], "procs": [2, 2], "outcome": ["completed"] * 2,
    ...         "mode": ["ready"] * 2, "killed_seconds": [0.0, 0.0],
    ...         "killed_core_seconds": [0.0, 0.0]}
    >>> s = summarize(jobs, None, cores=4)
    >>> s["wait_mean"], s["utilization"], s["bsld_mean"]
    (5.0, 0.5, 1.25)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.measures import (  # the public ones are re-exported: import them from here
    _check_events,
    _columns,
    _f,
    _failure_core_seconds,
    _mean,
    _strings,
    fairness,
    prediction_error,
    step_integral,
    time_series,
)

__all__ = [
    "bsld",
    "wait",
    "SIZE_CLASSES",
    "RUN_CLASSES",
    "EXEC_MODES",
    "size_class",
    "run_class",
    "job_metrics",
    "summarize",
    "headline",
    "STARVATION_THRESHOLDS",
    "starvation",
    "starves",
    "fairness",
    "METRIC_DEFINITIONS",
    "definition",
    "time_series",
    "step_integral",
    "prediction_error",
]

_INF = float("inf")
#: (label, key suffix, lowest procs, highest procs) of each job size class.
SIZE_CLASSES: tuple[tuple[str, str, float, float], ...] = (
    ("1", "1", 1, 1),
    ("2-8", "2_8", 2, 8),
    ("9-32", "9_32", 9, 32),
    ("33-128", "33_128", 33, 128),
    (">128", "gt128", 129, _INF),
)
#: (label, key suffix, lower bound s (closed), upper bound s (open)) of each run-time class.
RUN_CLASSES: tuple[tuple[str, str, float, float], ...] = (
    ("<10m", "lt10m", 0.0, 600.0),
    ("10m-1h", "10m_1h", 600.0, 3600.0),
    ("1h-4h", "1h_4h", 3600.0, 14400.0),
    (">4h", "gt4h", 14400.0, _INF),
)
#: Execution modes (DRAS, seed 004, table IV).
EXEC_MODES = ("ready", "reserved", "backfilled")

#: One line per key of :func:`summarize` (``<mode>`` and ``<class>`` stand for
#: the mode and class suffixes); ``docs/metrics.md`` says the same at length.
METRIC_DEFINITIONS: dict[str, str] = {
    "jobs_total": "jobs in the jobs table",
    "jobs_completed": "jobs whose final attempt ran to its end",
    "jobs_timeout": "jobs killed at their walltime: finished, not completed",
    "jobs_failed": "jobs dropped after a kill or node failure",
    "jobs_rejected": "jobs that could never fit the machine",
    "jobs_unfinished": "jobs still queued or running when the run stopped",
    "jobs_finished": "completed + timeout: the jobs every average is over",
    "wait_mean": "mean time queued (start - submit - time run in lost attempts), finished jobs",
    "wait_median": "median wait",
    "wait_p95": "95th percentile of wait (linear interpolation)",
    "wait_p99": "99th percentile of wait",
    "wait_max": "longest time queued (starvation), over finished, failed and given-up jobs",
    "starved_1d": "jobs queued more than a day (86,400 s), over finished, failed and given-up jobs",
    "starved_1w": "jobs queued more than a week (604,800 s), same jobs",
    "starved_1d_share": "starved_1d / jobs with a time queued (finished, failed, given up)",
    "starved_1w_share": "starved_1w / the same jobs",
    "wait_mean_failed": "mean time queued of failed and given-up jobs (end - submit - time run)",
    "jobs_never_started": "jobs that never started (rejected, given up or still queued)",
    "jobs_given_up": "jobs taken out of the queue unstarted (start limit under faults, stall)",
    "response_mean": "mean end - submit",
    "slowdown_mean": "mean response / run, finished jobs with run > 0",
    "slowdown_excluded": "finished jobs with run = 0, left out of slowdown_mean",
    "bsld_mean": "mean bounded slowdown max(1, response / max(tau, run))",
    "bsld_max": "largest bounded slowdown",
    "useful_core_seconds": "core-seconds of attempts that completed",
    "busy_core_seconds": "core-seconds of every attempt: useful + wasted",
    "wasted_core_seconds": "busy - useful: timed-out, killed and lost attempts",
    "waste_timeout_core_seconds": "core-seconds of final attempts killed at the walltime",
    "waste_kill_core_seconds": "core-seconds of attempts killed by the scheduler or an agent",
    "waste_failure_core_seconds": "core-seconds of attempts lost to node failures",
    "killed_seconds": "seconds run in killed or lost attempts (all jobs)",
    "span_start": "first submit",
    "span_end": "last end",
    "makespan": "span_end - span_start",
    "utilization": "useful core-seconds / (cores x makespan)",
    "utilization_busy": "busy core-seconds / (cores x makespan)",
    "utilization_up": "useful core-seconds / core-seconds of nodes that were up",
    "fairness_jain": "Jain's index over users' mean bsld of completed jobs (1 = all alike)",
    "fairness_users": "users with a completed job (the n of Jain's index)",
    "bsld_worst_user_mean": "largest per-user mean bsld of completed jobs",
    "worst_user": "the user with that mean bsld (-1: none)",
    "queue_len_mean": "time average of queued jobs over the span",
    "queued_load_mean": "time average of sum of procs x estimate over queued jobs",
    "resource_holes_core_seconds": "idle core-seconds while a queued job would have fit",
    "resource_holes_frac": "resource holes / (cores x makespan)",
    "mode_jobs_<mode>": "share of finished jobs started ready / reserved / backfilled",
    "mode_corehours_<mode>": "share of finished jobs' core-time by the mode of their start",
    "jobs_size_<class>": "finished jobs in a size class",
    "wait_mean_size_<class>": "their mean wait",
    "jobs_run_<class>": "finished jobs in a run-time class",
    "wait_mean_run_<class>": "their mean wait",
    "cores": "total cores (nodes on a node-granular cluster) for utilization",
    "tau": "bounded-slowdown bound (s)",
}


def definition(key: str) -> str:
    """The one-line definition of a summary key ("" for keys runs add, like counters)."""
    import re

    generic = re.sub(r"_(ready|reserved|backfilled)$", "_<mode>", key)
    generic = re.sub(r"_(size|run)_(1|2_8|9_32|33_128|gt128|lt10m|10m_1h|1h_4h|gt4h)$",
                     r"_\1_<class>", generic)
    return METRIC_DEFINITIONS.get(key) or METRIC_DEFINITIONS.get(generic, "")


_FINISHED = ("completed", "timeout")
_OUTCOMES = ("completed", "timeout", "failed", "rejected", "unfinished")
_JOB_COLUMNS = {
    "submit": np.float64, "start": np.float64, "end": np.float64, "run": np.float64,
    "procs": np.int64, "killed_seconds": np.float64, "killed_core_seconds": np.float64,
}


def _class_index(values: np.ndarray, classes, upper_closed: bool) -> np.ndarray:
    """Index into ``classes`` for each value, -1 if none applies."""
    idx = np.full(len(values), -1, dtype=np.int64)
    for k, (_, _, lo, hi) in enumerate(classes):
        inside = (values >= lo) & ((values <= hi) if upper_closed else (values < hi))
        idx[inside & (idx < 0)] = k
    return idx


def size_class(procs: Any) -> np.ndarray:
    """Index into :data:`SIZE_CLASSES` of each job size (``procs`` < 1 gives -1)."""
    return _class_index(np.asarray(procs, dtype=np.float64), SIZE_CLASSES, upper_closed=True)


def run_class(run: Any) -> np.ndarray:
    """Index into :data:`RUN_CLASSES` of each run time in seconds (NaN or < 0 gives -1)."""
    return _class_index(np.asarray(run, dtype=np.float64), RUN_CLASSES, upper_closed=False)



# ------------------------------------------------------------ per job ----

# The two per-job formulas every producer uses (summaries, the evaluation rows,
# the environment's rewards, the benchmarks): written here once so that no two
# figures a user compares can be computed two ways (tests/test_architecture.py
# looks for a second copy).

def bsld(response: Any, run: Any, tau: float) -> np.ndarray:
    """Bounded slowdown ``max(1, response / max(tau, run))``, element-wise.

    Args:
        response: ``end - submit`` of each job (s).
        run: the run time of its final attempt, ``end - start`` (s).
        tau: the bound (s, > 0): jobs shorter than it count as that long.

    Examples:
        >>> bsld([30.0, 5.0], [20.0, 1.0], 10.0).tolist()
        [1.5, 1.0]
    """
    return np.maximum(1.0, np.asarray(response, dtype=np.float64)
                      / np.maximum(tau, np.asarray(run, dtype=np.float64)))


def wait(start: Any, submit: Any, killed_seconds: Any) -> np.ndarray:
    """Time queued ``start - submit - killed_seconds``, element-wise.

    ``start`` is that of the final attempt; the seconds run in attempts that
    were killed or lost to a node failure (``killed_seconds``) were not
    spent waiting.

    Examples:
        >>> wait([100.0], [0.0], [30.0]).tolist()
        [70.0]
    """
    return (np.asarray(start, dtype=np.float64) - np.asarray(submit, dtype=np.float64)
            - np.asarray(killed_seconds, dtype=np.float64))

def job_metrics(jobs: Mapping[str, Any], *, tau: float = 10.0) -> dict[str, np.ndarray]:
    """Per-job wait, response, slowdown and bounded slowdown.

    Args:
        jobs: the jobs table (needs ``submit``, ``start``, ``end``, ``run``,
            ``procs``, ``outcome``, ``killed_seconds``).
        tau: bounded-slowdown bound in seconds (> 0).

    Returns:
        Arrays of one value per job: ``finished`` (bool: completed or
        timeout), ``wait`` (``start - submit - killed_seconds``), ``response``
        (``end - submit``), ``slowdown`` (``response / run``, NaN when run is
        0), ``bsld`` (``max(1, response / max(tau, run))``). Values are NaN
        for jobs that did not finish.
    """
    try:
        ok = not isinstance(tau, bool) and np.isfinite(float(tau)) and float(tau) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError("tau", repr(tau), "a positive number of seconds")
    tau = float(tau)
    c = _columns(jobs, {k: v for k, v in _JOB_COLUMNS.items() if k != "killed_core_seconds"},
                 "jobs")
    n = len(c["submit"])
    outcome = _strings(jobs, "outcome", "jobs", _OUTCOMES, n)
    finished = np.isin(outcome, _FINISHED)
    for col in ("start", "end", "run"):
        bad = finished & ~np.isfinite(c[col])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"jobs.{col}[{i}]", f"{c[col][i]} for a {outcome[i]} job",
                             "a finite time for a job that finished")
    nan = np.full(n, np.nan)
    waits = np.where(finished, wait(c["start"], c["submit"], c["killed_seconds"]), nan)
    response = np.where(finished, c["end"] - c["submit"], nan)
    run = np.where(finished, c["run"], nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        slowdown = np.where(finished & (run > 0), response / run, nan)
        bslds = np.where(finished, bsld(response, run, tau), nan)
    return {"finished": finished, "wait": waits, "response": response,
            "slowdown": slowdown, "bsld": bslds}


# ------------------------------------------------------------ summary ----

def queued_time(c: Mapping[str, np.ndarray], outcome: np.ndarray) -> np.ndarray:
    """Per job, the time it spent queued, summed over its stints in the queue.

    Finished jobs: ``start - submit - killed_seconds`` (their wait). Jobs that
    left the queue without finishing and have an end (failed: every attempt
    lost; rejected after waiting, i.e. given up): ``end - submit -
    killed_seconds``, all the time they were not running. NaN otherwise
    (rejected at submit, unfinished).
    """
    finished = np.isin(outcome, _FINISHED)
    left = np.isin(outcome, ("failed", "rejected")) & np.isfinite(c["end"])
    return np.where(finished, wait(c["start"], c["submit"], c["killed_seconds"]),
                    np.where(left, wait(c["end"], c["submit"], c["killed_seconds"]), np.nan))


#: (key suffix, seconds) of each starvation threshold: a job starved when its
#: time queued (:func:`queued_time`) exceeded it.
STARVATION_THRESHOLDS: tuple[tuple[str, float], ...] = (("1d", 86_400.0), ("1w", 604_800.0))


def starvation(queued: Any) -> dict[str, int | float | None]:
    """Counts and shares of jobs queued longer than a day and than a week.

    Args:
        queued: per job, its time queued in seconds (:func:`queued_time`);
            NaN entries (jobs with no time queued: rejected at submit,
            unfinished) are left out of counts and shares alike.

    Returns:
        ``starved_1d``, ``starved_1w`` (jobs whose time queued exceeded 86,400 s
        and 604,800 s) and ``starved_1d_share``, ``starved_1w_share`` (those
        counts over the jobs with a time queued; None when there are none).

    Examples:
        >>> starvation([10.0, 90_000.0, 700_000.0, float("nan")])["starved_1d"]
        2
    """
    q = np.asarray(queued, dtype=np.float64)
    q = q[np.isfinite(q)]
    out: dict[str, int | float | None] = {}
    for suffix, seconds in STARVATION_THRESHOLDS:
        count = int(np.sum(q > seconds))
        out[f"starved_{suffix}"] = count
        out[f"starved_{suffix}_share"] = count / len(q) if len(q) else None
    return out


def starves(summary: Mapping[str, Any]) -> bool:
    """Whether a run starved a job: some job waited more than a week (``starved_1w > 0``).

    The run table and the report mark such a policy.
    """
    v = summary.get("starved_1w")
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def _span(c: Mapping[str, np.ndarray]) -> tuple[float, float, float]:
    """First submit, last end and the span between them (0 when nothing ended)."""
    ended = np.isfinite(c["end"])
    if len(c["submit"]) and ended.any():
        t0, t1 = float(np.min(c["submit"])), float(np.max(c["end"][ended]))
    else:
        t0 = t1 = float("nan")
    span = t1 - t0 if np.isfinite(t1) else 0.0
    return t0, t1, span


def _areas(c: Mapping[str, np.ndarray], outcome: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-job core-seconds of the final attempt: of completed jobs, and of timed-out ones."""
    area = c["procs"] * np.where(np.isfinite(c["run"]), c["run"], 0.0)
    return np.where(outcome == "completed", area, 0.0), np.where(outcome == "timeout", area, 0.0)


def headline(jobs: Mapping[str, Any], events: Mapping[str, Any] | None = None, *, cores: int,
             tau: float = 10.0) -> dict[str, float | None]:
    """The few metrics a training loop reports per episode, by the same definitions.

    Cheaper than :func:`summarize` (no percentiles or classes); the values are
    equal to its keys of the same name.

    Args:
        jobs: the jobs table (``submit``, ``start``, ``end``, ``run``, ``procs``,
            ``outcome``, ``killed_seconds``, ``killed_core_seconds``).
        events: ``time`` and ``queue_len`` columns of the events table, or None.
        cores: total cores.
        tau: bounded-slowdown bound (s).

    Returns:
        ``jobs_finished``, ``wait_mean``, ``wait_max``, the keys of
        :func:`starvation`, ``bsld_mean``, ``utilization`` (useful),
        ``queue_len_mean`` (None when undefined).
    """
    per = job_metrics(jobs, tau=tau)
    fin = per["finished"]
    c = _columns(jobs, _JOB_COLUMNS, "jobs")
    outcome = np.asarray(jobs["outcome"]).astype(str)
    useful, _ = _areas(c, outcome)
    t0, t1, span = _span(c)
    waits = per["wait"][fin]
    queued = queued_time(c, outcome)
    queued = queued[np.isfinite(queued)]
    queue = None
    if events is not None and span > 0:
        t = np.asarray(events["time"], dtype=np.float64)
        queue = step_integral(t, np.asarray(events["queue_len"], dtype=np.float64), t0, t1) / span
    return {"jobs_finished": int(fin.sum()), "wait_mean": _mean(waits),
            "wait_max": _f(queued.max()) if len(queued) else None, **starvation(queued),
            "bsld_mean": _mean(per["bsld"][fin]),
            "utilization": _f(float(useful.sum()) / (cores * span)) if span > 0 else None,
            "queue_len_mean": queue}


# summarize() builds its dict in parts; each helper returns its keys in the
# order of METRICS.md so the flat dict keeps one key order.
def _time_average_metrics(events: Mapping[str, Any] | None, useful: float, cores: int,
                          t0: float, t1: float, span: float) -> dict[str, Any]:
    """The keys read from the events table (None without one or an empty span)."""
    out: dict[str, Any] = dict.fromkeys(("utilization_up", "queue_len_mean", "queued_load_mean",
                                         "resource_holes_core_seconds", "resource_holes_frac"))
    if events is not None and span > 0:
        ev = _check_events(events)
        t = ev["time"]
        if "up_cores" in ev:
            up = step_integral(t, ev["up_cores"], t0, t1)
            out["utilization_up"] = _f(useful / up) if up > 0 else None
        if "queue_len" in ev:
            out["queue_len_mean"] = step_integral(t, ev["queue_len"], t0, t1) / span
        if "queued_area" in ev:
            out["queued_load_mean"] = step_integral(t, ev["queued_area"], t0, t1) / span
        if "idle_fit_cores" in ev:
            passes = ev["kind"] == "pass"
            holes = step_integral(t[passes], ev["idle_fit_cores"][passes], t0, t1)
            out["resource_holes_core_seconds"] = holes
            out["resource_holes_frac"] = holes / (cores * span)
    return out


def _mode_and_class_metrics(per: Mapping[str, np.ndarray], c: Mapping[str, np.ndarray],
                            mode: np.ndarray, area: np.ndarray) -> dict[str, Any]:
    """Shares by execution mode and mean waits by size and run class.

    ``area`` is the core-time of the finished jobs' final attempts.
    """
    fin = per["finished"]
    out: dict[str, Any] = {}
    nfin = int(fin.sum())
    total_area = float(area.sum())
    for m in EXEC_MODES:
        sel = fin & (mode == m)
        out[f"mode_jobs_{m}"] = float(sel.sum()) / nfin if nfin else None
        out[f"mode_corehours_{m}"] = _f(area[sel].sum() / total_area) if total_area > 0 else None

    sclass = size_class(c["procs"])
    rclass = run_class(np.where(fin, c["run"], np.nan))
    for classes, idx, key in ((SIZE_CLASSES, sclass, "size"), (RUN_CLASSES, rclass, "run")):
        for k, (_, suffix, _, _) in enumerate(classes):
            sel = fin & (idx == k)
            out[f"jobs_{key}_{suffix}"] = int(sel.sum())
            out[f"wait_mean_{key}_{suffix}"] = _mean(per["wait"][sel])
    return out


def summarize(jobs: Mapping[str, Any], events: Mapping[str, Any] | None, *, cores: int,
              tau: float = 10.0) -> dict[str, Any]:
    """Every metric of ``METRICS.md`` for one run, as a flat JSON-able dict.

    Args:
        jobs: the jobs table (columns of ``jobs/1``; ``req_time``,
            ``estimate``, ``mem``, ``reason``, ``attempts`` and
            ``reservation`` are not needed; without ``user`` the fairness
            keys are None, without ``job_id`` so may be the split of waste
            between kills and failures).
        events: the events table (``events/1``), or None to skip the
            time-average metrics (they are then None).
        cores: nominal total cores of the machine (> 0).
        tau: bounded-slowdown bound in seconds (> 0).

    Returns:
        A flat dict; undefined values are None. Keys:

        * ``jobs_total``, ``jobs_completed``, ``jobs_timeout``,
          ``jobs_failed``, ``jobs_rejected``, ``jobs_unfinished``,
          ``jobs_finished`` (completed + timeout: the jobs every average is over);
        * ``wait_mean``, ``wait_median``, ``wait_p95``, ``wait_p99``
          (linear-interpolated percentiles), ``wait_max`` (over finished,
          failed and given-up jobs), ``starved_1d``, ``starved_1w``,
          ``starved_1d_share``, ``starved_1w_share`` (:func:`starvation`, over
          the same jobs), ``wait_mean_failed`` (failed and given-up
          jobs), ``jobs_never_started``, ``jobs_given_up``, ``response_mean``,
          ``slowdown_mean`` (over finished jobs with run > 0; jobs with run 0
          are counted in ``slowdown_excluded``), ``bsld_mean``, ``bsld_max``;
        * ``useful_core_seconds``: sum of ``procs * run`` over completed
          jobs; ``busy_core_seconds``: core-time of every attempt (useful +
          wasted); ``wasted_core_seconds`` = busy - useful, by cause:
          ``waste_timeout_core_seconds`` (final attempts of timed-out jobs),
          ``waste_kill_core_seconds`` (attempts killed by the scheduler or an
          agent) and ``waste_failure_core_seconds`` (attempts lost to node
          failures; None, like the kill share, when attempts were lost but
          there is no events table to tell the causes apart);
          ``killed_seconds``;
        * ``utilization`` = useful / (cores x span); ``utilization_busy`` =
          busy / (cores x span); ``utilization_up`` = useful / integral of
          ``up_cores`` over the span (differs under node failures);
        * ``span_start``, ``span_end``, ``makespan`` (= span length);
        * ``queue_len_mean``, ``queued_load_mean`` (time averages over the
          span of ``queue_len`` and ``queued_area`` from all event rows);
        * ``resource_holes_core_seconds``: integral over the span of
          ``idle_fit_cores`` read from ``pass`` rows only (RLSchert, seed 001,
          fig. 12), and ``resource_holes_frac`` = that / (cores x span);
        * ``fairness_jain``, ``fairness_users``, ``bsld_worst_user_mean``,
          ``worst_user``: see :func:`fairness` (needs a ``user`` column);
        * ``mode_jobs_<mode>`` and ``mode_corehours_<mode>`` for ready,
          reserved, backfilled: shares of finished jobs, and of their
          ``procs * run``, by execution mode (DRAS, seed 004, table IV);
        * ``wait_mean_size_<class>`` / ``jobs_size_<class>`` and
          ``wait_mean_run_<class>`` / ``jobs_run_<class>`` per class of
          :data:`SIZE_CLASSES` and :data:`RUN_CLASSES` (key suffixes);
        * ``cores``, ``tau``.

    Raises:
        InputError: a column is missing or malformed, an outcome or mode is
            unknown, a finished job lacks times, events are out of order,
            or cores/tau are not positive.
    """
    if isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or cores <= 0:
        raise InputError("cores", repr(cores), "a positive integer")
    cores = int(cores)
    per = job_metrics(jobs, tau=tau)
    c = _columns(jobs, _JOB_COLUMNS, "jobs")
    n = len(c["submit"])
    outcome = _strings(jobs, "outcome", "jobs", _OUTCOMES, n)
    mode = _strings(jobs, "mode", "jobs", (*EXEC_MODES, ""), n)
    fin = per["finished"]

    out: dict[str, Any] = {"jobs_total": n}
    for o in _OUTCOMES:
        out[f"jobs_{o}"] = int(np.sum(outcome == o))
    out["jobs_finished"] = int(fin.sum())

    waits = per["wait"][fin]
    out["wait_mean"] = _mean(waits)
    if len(waits):
        med, p95, p99 = np.percentile(waits, [50, 95, 99])
        out.update(wait_median=_f(med), wait_p95=_f(p95), wait_p99=_f(p99))
    else:
        out.update(wait_median=None, wait_p95=None, wait_p99=None)
    # Failures: jobs that waited and then left unfinished count in the
    # starvation figure and have their own mean (docs/metrics.md, failures).
    queued = queued_time(c, outcome)
    left = np.isfinite(queued) & ~fin
    out["wait_max"] = _f(np.nanmax(queued)) if np.isfinite(queued).any() else None
    out.update(starvation(queued))
    out["wait_mean_failed"] = _mean(queued[left])
    out["jobs_never_started"] = int(np.sum(~np.isfinite(c["start"])))
    out["jobs_given_up"] = int(np.sum((outcome == "rejected") & np.isfinite(c["end"])))
    out["response_mean"] = _mean(per["response"][fin])
    sld = per["slowdown"][fin]
    out["slowdown_mean"] = _mean(sld[np.isfinite(sld)])
    out["slowdown_excluded"] = int(np.sum(~np.isfinite(sld)))
    bslds = per["bsld"][fin]
    out["bsld_mean"] = _mean(bslds)
    out["bsld_max"] = _f(bslds.max()) if len(bslds) else None

    useful_area, timeout_area = _areas(c, outcome)
    t0, t1, span = _span(c)
    useful = float(useful_area.sum())
    waste_timeout = float(timeout_area.sum())
    killed = float(np.nansum(c["killed_core_seconds"]))
    failure = 0.0 if killed == 0 else (
        _failure_core_seconds(events, jobs, c["procs"]) if events is not None else None)
    out["useful_core_seconds"] = useful
    out["wasted_core_seconds"] = waste_timeout + killed
    out["busy_core_seconds"] = useful + waste_timeout + killed
    out["waste_timeout_core_seconds"] = waste_timeout
    out["waste_kill_core_seconds"] = None if failure is None else killed - failure
    out["waste_failure_core_seconds"] = failure
    out["killed_seconds"] = float(np.nansum(c["killed_seconds"]))
    out["span_start"], out["span_end"] = _f(t0), _f(t1)
    out["makespan"] = _f(span) if np.isfinite(t1) else None
    out["utilization"] = _f(useful / (cores * span)) if span > 0 else None
    out["utilization_busy"] = _f(out["busy_core_seconds"] / (cores * span)) if span > 0 else None
    if "user" in jobs:
        out.update(fairness(jobs["user"], per["bsld"], outcome == "completed"))
    else:
        out.update(fairness_jain=None, fairness_users=0, bsld_worst_user_mean=None,
                   worst_user=-1)

    out.update(_time_average_metrics(events, useful, cores, t0, t1, span))

    out.update(_mode_and_class_metrics(per, c, mode, useful_area + timeout_area))

    out["cores"] = cores
    out["tau"] = float(tau)
    return out
