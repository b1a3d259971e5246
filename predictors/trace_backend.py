"""The trace model inside a simulation: predictions from what has finished, refitted as it runs.

:class:`TraceModelBackend` answers the simulator's pre-run batches with a
:class:`~predictors.trace.TraceRuntimeRegressor`. It is causal by
construction: a job's features are its request, its trace fields, its submit
clock (:func:`~predictors.trace_features.static_columns`) and its user's
past among the jobs that had *finished in the simulation* when it was queued
(a :class:`~predictors.trace_features.TraceHistory` fed by ``observe``); the
model it is answered with was fit (``refit``) only on finished jobs, each
with the features it was queued with. Until the first fit (no past given,
or fewer than ``min_fit`` jobs finished) a job is predicted by its request.

The first fit chooses the loss (:func:`~predictors.trace.fit_on_past`, on the
latest part of what has finished); later refits keep that choice, so a refit
is one XGBoost fit on at most ``max_fit`` of the latest finished jobs. A run
refits many times, so its fits are lighter than a standalone model's
(:data:`IN_RUN_PARAMS`: 40 trees at a learning rate of 0.3, the 200 most
frequent ids of each categorical, on the latest 20,000 jobs at most).
Measured on SDSC-SP2 (fitted on the 20,000 jobs before its middle, judged on
the next 20 % of the trace): a mean absolute error of 3,091 s against
3,111 s for 150 trees at 0.1 on the same jobs and 3,239 s for 150 trees on
every earlier job, at about a quarter of their fitting time.

A job's prediction is its static features (encoded once per fit) and its
user's history, evaluated by :class:`predictors.forest.CompiledForest`
rather than by a call into XGBoost per decision point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cosim.config import TRACE_REFIT
from predictors.trace import TraceRuntimeRegressor, feature_names_of, fit_on_past
from predictors.trace_features import HISTORY_FEATURES, TraceHistory, static_columns

__all__ = ["TraceModelBackend", "IN_RUN_PARAMS"]

#: Constructor parameters of the fits made inside a run (the rest are the model's defaults).
IN_RUN_PARAMS: dict[str, Any] = {"n_estimators": 40, "learning_rate": 0.3,
                                 "max_categories": 200}


class TraceModelBackend:
    """Pre-run predictions of a trace's jobs by the trace model, refitted on what finished.

    Args:
        workload: the simulated jobs (:class:`cosim.workloads.base.Workload`).
        model: a model already fitted on the trace's past, or None.
        params: constructor parameters of the refits (default: chosen at the
            first fit; a given ``model``'s own).
        min_fit: finished jobs needed before the first fit.
        max_fit: the latest finished jobs a refit learns from, at most.
        n_jobs: XGBoost threads.
        past: ``user``, ``runtime`` and ``req_time`` of jobs that finished
            before the run began, in the order they ended (a window's past):
            the users' histories start from them.

    Attributes:
        fits: refits so far; ``fitted_on``: job ids the current model learnt from.
    """

    version = "trace-model"
    independent_rows = False
    #: how often a run refits it where ``predictor.refit`` says nothing
    default_refit = TRACE_REFIT

    def __init__(self, workload, model: TraceRuntimeRegressor | None = None, *,
                 params: Mapping[str, Any] | None = None, min_fit: int = 200,
                 max_fit: int = 20_000, n_jobs: int = 1,
                 past: Mapping[str, Any] | None = None):
        self.static = static_columns(workload)
        self.submit = np.asarray(workload.submit, dtype=np.float64)
        self.row_of = {int(j): i for i, j in enumerate(workload.job_id.tolist())}
        self.names, self.categorical = feature_names_of({**self.static, **dict.fromkeys(
            HISTORY_FEATURES)})
        self.model = model
        self.params = dict(params) if params is not None else (
            model.get_params() if model is not None else None)
        self.min_fit, self.max_fit, self.n_jobs = min_fit, max_fit, n_jobs
        self.history = TraceHistory()
        if past is not None:   # jobs that finished before the run began, in end order
            for user, run, req in zip(past["user"], past["runtime"], past["req_time"],
                                      strict=True):
                self.history.observe_finished(int(user), float(run), float(req))
        self._queued_with: dict[int, np.ndarray] = {}   # job_id -> history features
        self._done_ids: list[int] = []
        self._done_hist: list[np.ndarray] = []
        self._done_run: list[float] = []
        self._done_end: list[float] = []
        self.fits = 0
        self.fitted_on: set[int] = set()
        self._hist_cols = [self.names.index(n) for n in HISTORY_FEATURES]
        self._users = self.static["user"].tolist()
        self._static_X = self._static_codes = None

    # -- the simulator's calls ----------------------------------------------------------
    def runtime(self, batch: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        ids = [int(j) for j in batch["job_id"]]
        rows = [self.row_of[j] for j in ids]
        users = self._users
        hist = np.array([self.history.feature_list(users[r]) for r in rows],
                        dtype=np.float64).reshape(len(rows), len(HISTORY_FEATURES))
        for j, h in zip(ids, hist, strict=True):
            self._queued_with[j] = h
        if self.model is None:
            return np.asarray(self.static["req_time"][rows], dtype=np.float64), "request"
        if not rows:
            return np.empty(0), self.version
        if self._static_X is None:   # every job's static features, encoded once per fit
            X = self.model.matrix(self._columns(np.arange(len(self.submit)), np.full(
                (len(self.submit), len(HISTORY_FEATURES)), np.nan)))
            self._static_X, self._static_codes = X, self.model.encode(X)
        X, codes = self._static_X[rows], self._static_codes[rows]
        X[:, self._hist_cols] = hist
        codes[:, self._hist_cols] = hist
        return self.model.predict_encoded(codes, X), self.version

    def remaining(self, batch):
        raise NotImplementedError("the trace model predicts before a job runs, not while")

    def observe(self, batch: Mapping[str, Any]) -> None:
        for j, user, req, run, end in zip(batch["job_id"], batch["user"], batch["req_time"],
                                          batch["runtime"], batch["end"], strict=True):
            j = int(j)
            hist = self._queued_with.pop(j, None)
            if hist is not None:   # the features it was queued with (a requeue: the last)
                self._done_ids.append(j)
                self._done_hist.append(hist)
                self._done_run.append(float(run))
                self._done_end.append(float(end))
            self.history.observe_finished(int(user), float(run), float(req))

    def refit(self, now: float) -> bool:
        """Fit again on the latest finished jobs; False (nothing done) below ``min_fit``."""
        n = len(self._done_ids)
        if n < self.min_fit:
            return False
        keep = slice(max(0, n - self.max_fit), n)
        ids = self._done_ids[keep]
        rows = np.asarray([self.row_of[j] for j in ids], dtype=np.int64)
        cols = self._columns(rows, np.vstack(self._done_hist[keep]))
        y = np.asarray(self._done_run[keep], dtype=np.float64)
        if self.params is None:
            cols.update(runtime=y, submit=self.submit[rows],
                        end=np.asarray(self._done_end[keep], dtype=np.float64))
            model, _ = fit_on_past(cols, n_jobs=self.n_jobs, **IN_RUN_PARAMS)
            self.params = model.get_params()
        else:
            model = TraceRuntimeRegressor(**{**self.params, "feature_names": self.names,
                                             "categorical": self.categorical})
            model.fit(model.matrix(cols), y)
        self.model = model
        self._static_X = self._static_codes = None
        self.fits += 1
        self.fitted_on = set(ids)
        return True

    # -----------------------------------------------------------------------------------
    def _columns(self, rows: np.ndarray, hist: np.ndarray) -> dict[str, np.ndarray]:
        cols = {k: v[rows] for k, v in self.static.items()}
        cols.update({name: hist[:, k] for k, name in enumerate(HISTORY_FEATURES)})
        return cols
