"""Measures over a run's tables that :mod:`cosim.metrics` builds its summary from.

The column checks shared by every metric (one :class:`~cosim.errors.InputError`
line per bad column), step functions over the events table and their
integrals, Jain's fairness over users, the share of waste lost to node
failures, machine state over time for plots, and the error of run-time
predictions. The definitions and rules are those of :mod:`cosim.metrics`
(which re-exports the public names here: import them from there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cosim.errors import InputError

__all__ = ["step_integral", "fairness", "time_series", "prediction_error"]


_EVENT_COLUMNS = {
    "time": np.float64, "kind": object, "queue_len": np.float64, "used_cores": np.float64,
    "up_cores": np.float64, "queued_area": np.float64, "idle_fit_cores": np.float64,
    "running": np.float64,
}


# ------------------------------------------------------------- helpers ----

def _columns(table: Mapping[str, Any], spec: Mapping[str, Any], name: str,
             required: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Columns of ``table`` named in ``spec`` as numpy arrays of equal length."""
    out: dict[str, np.ndarray] = {}
    for col, dtype in spec.items():
        if col not in table:
            if required is not None and col not in required:
                continue
            raise InputError(name, f"no column {col!r}",
                             f"a table with columns {', '.join(spec)}")
        try:
            arr = np.asarray(table[col], dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{name}.{col}", f"values not convertible ({exc})",
                             f"numbers of type {np.dtype(dtype).name}") from None
        if arr.ndim != 1:
            raise InputError(f"{name}.{col}", f"an array of shape {arr.shape}",
                             "a 1-D column")
        out[col] = arr
    lengths = {c: len(a) for c, a in out.items()}
    if len(set(lengths.values())) > 1:
        first = next(iter(lengths))
        bad = next(c for c in lengths if lengths[c] != lengths[first])
        raise InputError(f"{name}.{bad}", f"{lengths[bad]} rows",
                         f"{lengths[first]} rows like column {first}")
    return out


def _strings(table: Mapping[str, Any], col: str, name: str, allowed: tuple[str, ...],
             n: int) -> np.ndarray:
    if col not in table:
        raise InputError(name, f"no column {col!r}", f"a column {col!r} of strings")
    arr = np.asarray(table[col]).astype(str)
    if arr.shape != (n,):
        raise InputError(f"{name}.{col}", f"{arr.shape[0] if arr.ndim else 0} rows",
                         f"{n} rows")
    bad = ~np.isin(arr, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}.{col}[{i}]", repr(str(arr[i])),
                         "one of " + ", ".join(repr(a) for a in allowed))
    return arr


def _f(x: float) -> float | None:
    """A Python float, or None when undefined (NaN/inf) so JSON stays strict."""
    x = float(x)
    return x if np.isfinite(x) else None


def _mean(x: np.ndarray) -> float | None:
    return _f(np.mean(x)) if len(x) else None



def _knots(time: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Distinct times and the values of the LAST row at each of them."""
    if len(time) == 0:
        return (time, *values)
    last = np.ones(len(time), dtype=bool)
    last[:-1] = time[1:] != time[:-1]
    return (time[last], *(v[last] for v in values))


def step_integral(time: Any, value: Any, t0: float, t1: float) -> float:
    """Integral over ``[t0, t1]`` of a right-continuous step function.

    Args:
        time: non-decreasing change times; when several share a time the
            last one's value holds from that time on.
        value: value after each change.
        t0, t1: integration bounds (``t1 >= t0``); the function is 0 before
            the first change.

    Returns:
        The integral (value x seconds).
    """
    t, v = _knots(np.asarray(time, dtype=np.float64), np.asarray(value, dtype=np.float64))
    if len(t) == 0 or t1 <= t0:
        return 0.0
    # Segment k is [t[k], t[k+1]); clipping both ends to [t0, t1] keeps the
    # boundaries monotone, so lengths outside the window become exactly 0.
    edges = np.clip(np.append(t, t1), t0, t1)
    return float(np.sum(v * np.diff(edges)))


def _check_events(events: Mapping[str, Any]) -> dict[str, np.ndarray]:
    ev = _columns(events, _EVENT_COLUMNS, "events",
                  required=("time", "kind"))
    t = ev["time"]
    if not np.all(np.isfinite(t)):
        i = int(np.flatnonzero(~np.isfinite(t))[0])
        raise InputError(f"events.time[{i}]", repr(float(t[i])), "a finite time")
    if len(t) > 1 and np.any(np.diff(t) < 0):
        i = int(np.flatnonzero(np.diff(t) < 0)[0]) + 1
        raise InputError(f"events.time[{i}]", f"{t[i]} after {t[i - 1]}",
                         "rows in non-decreasing time order")
    ev["kind"] = np.asarray(ev["kind"]).astype(str)
    return ev



# ---------------------------------------------------------- per user ----

def fairness(user: Any, bsld: Any, completed: Any) -> dict[str, Any]:
    """Jain's fairness index over users' mean bounded slowdowns.

    For each user ``u`` with a completed job, ``x_u`` is the mean bsld of u's
    completed jobs; ``J = (sum x_u)^2 / (n * sum x_u^2)`` over the ``n``
    such users (Jain, Chiu and Hawe 1984): 1 when every user is served
    alike, down to 1/n when one user takes all the slowdown. Jobs of unknown
    users (id < 0) are left out.

    Args:
        user: user id per job.
        bsld: bounded slowdown per job (NaN where undefined).
        completed: whether each job completed.

    Returns:
        ``fairness_jain``, ``fairness_users`` (n), ``bsld_worst_user_mean``
        (the largest ``x_u``) and ``worst_user`` (its id; -1 when none);
        None when no user qualifies.
    """
    user = np.asarray(user, dtype=np.int64)
    bsld = np.asarray(bsld, dtype=np.float64)
    sel = np.asarray(completed, dtype=bool) & (user >= 0) & np.isfinite(bsld)
    if not sel.any():
        return {"fairness_jain": None, "fairness_users": 0, "bsld_worst_user_mean": None,
                "worst_user": -1}
    users, inverse = np.unique(user[sel], return_inverse=True)
    x = np.bincount(inverse, weights=bsld[sel]) / np.bincount(inverse)
    worst = int(np.argmax(x))
    return {"fairness_jain": _f(x.sum() ** 2 / (len(x) * np.sum(x * x))),
            "fairness_users": len(x), "bsld_worst_user_mean": _f(x[worst]),
            "worst_user": int(users[worst])}


def _failure_core_seconds(events: Mapping[str, Any], jobs: Mapping[str, Any],
                          procs: np.ndarray) -> float | None:
    """Core-seconds of attempts lost to node failures (``kill`` rows naming a node).

    None when the tables cannot tell (no ``job_id`` or ``node`` column).
    """
    if "node" not in events or "job_id" not in events or "job_id" not in jobs:
        return None
    kind = np.asarray(events["kind"]).astype(str)
    node = np.asarray(events["node"], dtype=np.int64)
    lost = (kind == "kill") & (node >= 0)
    if not lost.any():
        return 0.0
    # Each lost attempt began at its job's latest "start" row before the kill.
    rows = np.flatnonzero(lost | (kind == "start"))
    time = np.asarray(events["time"], dtype=np.float64)
    job = np.asarray(events["job_id"], dtype=np.int64)
    size = dict(zip(np.asarray(jobs["job_id"], dtype=np.int64).tolist(), procs.tolist()))
    started: dict[int, float] = {}
    total = 0.0
    for r in rows.tolist():
        j = int(job[r])
        if kind[r] == "start":
            started[j] = float(time[r])
        elif j in started and j in size:
            total += (float(time[r]) - started.pop(j)) * size[j]
        else:
            return None
    return total



# -------------------------------------------------------- time series ----

def time_series(events: Mapping[str, Any], cores: int, *,
                max_points: int | None = None) -> dict[str, np.ndarray]:
    """Machine state over time as step functions, for plots.

    Args:
        events: the events table (``events/1``).
        cores: nominal total cores (utilization = ``used_cores / cores``).
        max_points: when the run has more distinct event times than this,
            return time-weighted averages over ``max_points`` equal bins
            between the first and last event instead (keeps plots of long
            runs fast without dropping short spikes' area).

    Returns:
        ``time`` (start of each step or bin) and, aligned with it,
        ``utilization``, ``used_cores``, ``queue_len``, ``running``,
        ``up_cores``, ``queued_area``: the value from that time until the
        next (draw with ``drawstyle="steps-post"``).
    """
    if isinstance(cores, bool) or not isinstance(cores, (int, np.integer)) or cores <= 0:
        raise InputError("cores", repr(cores), "a positive integer")
    ev = _check_events(events)
    names = [k for k in ("used_cores", "queue_len", "running", "up_cores", "queued_area")
             if k in ev]
    t, *vals = _knots(ev["time"], *(ev[k] for k in names))
    series = dict(zip(names, vals, strict=True))
    if max_points is not None and len(t) > max_points >= 1 and t[-1] > t[0]:
        edges = np.linspace(t[0], t[-1], max_points + 1)
        width = np.diff(edges)
        for k, v in series.items():
            # Cumulative integral at the knots, then linearly interpolated at
            # the bin edges (exact: the integral of a step function is
            # piecewise linear between knots).
            cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
            series[k] = np.diff(np.interp(edges, t, cum)) / width
        t = edges[:-1]
    out = {"time": t}
    if "used_cores" in series:
        out["utilization"] = series["used_cores"] / cores
    out.update(series)
    return out


# --------------------------------------------------- prediction error ----

def prediction_error(y: Any, yhat: Any, *, progress: Any = None) -> dict[str, Any]:
    """Error of run-time (or remaining-time) predictions.

    Args:
        y: true values (seconds, > 0).
        yhat: predictions, same length.
        progress: optional fraction of the job done when each prediction was
            made (0..1); adds the MAPE per progress decile (RLSchert, seed 001).

    Returns:
        ``n``; ``mape`` = mean(|y - yhat| / y); ``underestimation_rate`` =
        share with yhat < y; ``accuracy`` = mean(min(y, yhat') / max(y, yhat'))
        with yhat' = max(yhat, 0) (1 is perfect); with ``progress``, also
        ``mape_progress_0`` .. ``mape_progress_9`` (decile d covers
        [d/10, (d+1)/10), progress 1 falls in decile 9; None if empty).
    """
    y = np.asarray(y, dtype=np.float64)
    yhat = np.asarray(yhat, dtype=np.float64)
    if y.ndim != 1 or yhat.shape != y.shape:
        raise InputError("yhat", f"shape {yhat.shape}", f"shape {y.shape} like y")
    for name, arr in (("y", y), ("yhat", yhat)):
        if not np.all(np.isfinite(arr)):
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise InputError(f"{name}[{i}]", repr(float(arr[i])), "a finite number")
    if np.any(y <= 0):
        i = int(np.flatnonzero(y <= 0)[0])
        raise InputError(f"y[{i}]", repr(float(y[i])), "a positive true value")
    ape = np.abs(y - yhat) / y
    clipped = np.maximum(yhat, 0.0)
    out: dict[str, Any] = {
        "n": len(y),
        "mape": _mean(ape),
        "underestimation_rate": _mean((yhat < y).astype(np.float64)),
        "accuracy": _mean(np.minimum(y, clipped) / np.maximum(y, clipped)),
    }
    if progress is not None:
        p = np.asarray(progress, dtype=np.float64)
        if p.shape != y.shape:
            raise InputError("progress", f"shape {p.shape}", f"shape {y.shape} like y")
        bad = ~((p >= 0) & (p <= 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"progress[{i}]", repr(float(p[i])), "a fraction in [0, 1]")
        decile = np.minimum((p * 10).astype(np.int64), 9)
        for d in range(10):
            out[f"mape_progress_{d}"] = _mean(ape[decile == d])
    return out
