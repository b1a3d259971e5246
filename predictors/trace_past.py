"""The trace model of a window's past: fitted on the jobs that had finished before it, cached.

A scenario that replays a trace from a later start (``workload.offset``, a
window) knows the trace's earlier jobs: those that had *finished* in the
trace by the window's first submit are what a site would have trained on.
:func:`past_of_window` picks them out of the whole trace (by trace end,
``submit + wait + run``, at or before that submit: causal as the in-run
refits are), :func:`past_model` fits the trace model on them
(:func:`~predictors.trace.fit_on_past`, the in-run fits' parameters, the
loss chosen there and kept by the refits) and keeps it under
``cache/trace-<key>`` (:func:`predictors.persist.save`: UBJ and meta.json),
where ``key`` hashes the trace file's bytes, the first job of the window and
the settings of the fit, so a second run with the same trace and window
reads the model back instead of fitting it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim.workloads.base import Workload
from predictors.trace_features import trace_columns, trace_end

__all__ = ["WindowPast", "past_of_window", "past_model", "past_key", "window_model"]

#: Bump when what a cached past model is fitted from or with changes meaning.
_CACHE_VERSION = 1
#: Fewest finished jobs worth fitting on (below: the run starts on requests).
MIN_PAST = 200


@dataclass
class WindowPast:
    """The trace's jobs that had finished before a window's first submit.

    Attributes:
        jobs: those jobs (the trace's rows, in the trace's order).
        start: the window's first submit on the trace's clock (s).
        first_job: the window's first job id.
    """

    jobs: Workload
    start: float
    first_job: int

    def finished_in_order(self) -> dict[str, np.ndarray]:
        """``user``, ``runtime``, ``req_time`` of those jobs in the order they ended."""
        order = np.argsort(trace_end(self.jobs), kind="stable")
        return {"user": self.jobs.user[order], "runtime": self.jobs.run[order],
                "req_time": self.jobs.req_time[order]}


def past_of_window(whole: Workload, window: Workload) -> WindowPast | None:
    """The past of ``window`` (a cut of ``whole``) in ``whole``; None if it starts the trace.

    Matched by job id: the window's first job is found in the whole trace and
    every job whose trace end is at or before that job's submit is its past.
    """
    if len(window) == 0:
        return None
    first = int(window.job_id[0])
    at = np.flatnonzero(whole.job_id == first)
    if len(at) == 0:
        return None
    start = float(whole.submit[at[0]])
    rows = np.flatnonzero(trace_end(whole) <= start)
    if len(rows) == 0:
        return None
    return WindowPast(whole.take(rows), start, first)


def past_key(trace_path: str | Path, first_job: int, settings: Mapping[str, Any]) -> str:
    """The cache key: the trace file's bytes, the window's first job and the fit's settings."""
    digest = hashlib.sha256()
    with open(trace_path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    digest.update(json.dumps({"first_job": int(first_job), "settings": settings,
                              "version": _CACHE_VERSION}, sort_keys=True,
                             default=str).encode())
    return digest.hexdigest()[:20]


def past_model(past: WindowPast, cache_dir: str | Path, key: str, *,
               params: Mapping[str, Any], echo: Callable[[str], None] | None = None):
    """The trace model fitted on ``past`` (from ``cache_dir/trace-<key>`` when there).

    Returns:
        The fitted :class:`~predictors.trace.TraceRuntimeRegressor`, or None
        when the past has fewer than :data:`MIN_PAST` jobs.
    """
    from predictors.persist import load, save
    from predictors.trace import TraceRuntimeRegressor, fit_on_past

    folder = Path(cache_dir) / f"trace-{key}"
    if (folder / "meta.json").exists():
        if echo is not None:
            echo(f"predictors: the trace model of the window's past, {folder} (cached)")
        return load(folder, TraceRuntimeRegressor)
    if len(past.jobs) < MIN_PAST:
        return None
    if echo is not None:
        echo(f"predictors: fitting the trace model on the {len(past.jobs):,} jobs finished "
             f"before the window (cached in {folder}) ...")
    model, report = fit_on_past(trace_columns(past.jobs), **params)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".trace-{key}.", dir=folder.parent))
    save(model, work / "model", extra={"past_jobs": len(past.jobs), "window_start": past.start,
                                      "first_job": past.first_job, "chosen": report["chosen"]})
    try:
        os.replace(work / "model", folder)
    except OSError:   # another run stored it first: theirs is the same fit
        pass
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return model


def window_model(scenario, whole: Workload, window: Workload,
                 echo: Callable[[str], None] | None = None):
    """``(model, past)`` ``@xgboost`` starts a run of ``window`` (a cut of the trace ``whole``)
    from: the trace model fitted on the jobs finished before it (cached by trace hash and
    first job in ``predictor.cache``) and those jobs' ``user``, ``runtime``, ``req_time`` in
    end order; ``(None, None)`` where the window starts the trace. One set-up for a run
    (``cosim.compose``) and the evaluation protocol's windows (``agents``)."""
    from predictors.trace_backend import IN_RUN_PARAMS

    past = past_of_window(whole, window)
    if past is None:
        return None, None
    wc = scenario.workload
    settings = {"fit": IN_RUN_PARAMS, "workload": wc.model_dump(exclude={"jobs", "offset"}),
                "cluster": scenario.cluster.model_dump()}
    key = past_key(whole.source, past.first_job, settings)
    model = past_model(past, scenario.predictor.cache, key, params=IN_RUN_PARAMS, echo=echo)
    return model, past.finished_in_order()
