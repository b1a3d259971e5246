"""User-history run-time prediction (EASY++ style).

Tsafrir, Etsion and Feitelson, "Backfilling using system-generated
predictions rather than user runtime estimates" (IEEE TPDS 2007), predict a
job's run time as the mean of the actual run times of the same user's two
most recent jobs, fall back to the user's requested time when the user has
no such history, and never predict more than the requested time (the job
would be killed there anyway). Users resubmit near-identical jobs from
project templates (``VASP.md``), which is what gives this cheap predictor
its edge over requested times.

:class:`UserHistoryRegressor` works online (``observe`` each finished job,
``predict_one`` for a new one) and offline (``fit`` / ``predict`` over a jobs
table walked in submit order, each prediction using only earlier jobs).
:class:`HistoryBackend` answers the simulator's prediction batches with it.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from cosim.errors import InputError
from cosim.limits import read_json
from predictors.persist import Persistable, first_line
from predictors.runtime import column, data_hash

__all__ = ["UserHistoryRegressor", "HistoryBackend", "history_backend"]


class UserHistoryRegressor(Persistable, BaseEstimator):
    """Mean of the user's last ``n_last`` run times, else the requested time.

    Fallback order for a prediction: the user's history (at least
    ``min_history`` known run times), then the requested time (finite, > 0),
    then the mean of every run time observed so far, then NaN. With
    ``cap_at_request`` a history prediction is capped at the requested time.

    Args:
        n_last: run times per user that are averaged (2 in EASY++).
        min_history: known run times a user needs before history is used.
        cap_at_request: never predict more than the requested time.
        reveal: in offline ``predict``, when an earlier job's run time becomes
            known: ``"submit"`` (as soon as it was submitted: every earlier job
            counts) or ``"end"`` (at ``submit + runtime``, ignoring its wait;
            closer to what an online scheduler knows).

    Attributes:
        history_: user -> the last ``n_last`` run times, oldest first.
        total_: sum of all observed run times.
        count_: number of observed run times.
        training_hash_: SHA-256 of the table ``fit`` saw.

    Examples:
        >>> h = UserHistoryRegressor()
        >>> h.predict_one("alice", req_time=3600.0)   # no history: the request
        3600.0
        >>> h.observe("alice", 100.0); h.observe("alice", 300.0); h.observe("alice", 500.0)
        >>> h.predict_one("alice", req_time=3600.0)   # mean of 300 and 500
        400.0
        >>> h.predict_one("alice", req_time=350.0)    # capped at the request
        350.0
    """

    _payload_files = ("history.json",)

    def __init__(self, n_last: int = 2, min_history: int = 2, cap_at_request: bool = True,
                 reveal: str = "submit"):
        self.n_last = n_last
        self.min_history = min_history
        self.cap_at_request = cap_at_request
        self.reveal = reveal

    def _check_params(self) -> None:
        if int(self.n_last) < 1:
            raise ValueError(f"n_last must be >= 1; got {self.n_last}")
        if not 1 <= int(self.min_history) <= int(self.n_last):
            raise ValueError(f"min_history must be in 1..n_last={self.n_last}; "
                             f"got {self.min_history}")
        if self.reveal not in ("submit", "end"):
            raise ValueError(f"reveal must be 'submit' or 'end'; got {self.reveal!r}")

    def _ensure_state(self) -> None:
        if not hasattr(self, "history_"):
            self._check_params()
            self.history_: dict[str, deque[float]] = {}
            self.total_ = 0.0
            self.count_ = 0

    # ------------------------------------------------------------------ online

    def observe(self, user: Any, runtime: float) -> None:
        """Record a finished job's actual run time (NaN or negative values are ignored)."""
        self._ensure_state()
        _observe(self.history_, self, str(user), float(runtime), int(self.n_last))

    def predict_one(self, user: Any, req_time: float = math.nan) -> float:
        """Predicted run time of a new job of ``user`` with requested time ``req_time``."""
        self._ensure_state()
        return _predict(self.history_.get(str(user)), float(req_time), self._global_mean(),
                        int(self.min_history), bool(self.cap_at_request))

    def _global_mean(self) -> float:
        return self.total_ / self.count_ if self.count_ else math.nan

    # ----------------------------------------------------------------- offline

    def fit(self, jobs: Any, y: Any = None) -> UserHistoryRegressor:
        """Learn the history from a jobs table (``user``, ``submit``, ``runtime``).

        Jobs are replayed in submit order, so ``history_`` ends with each
        user's most recent run times. ``y`` overrides the ``runtime`` column.

        Returns:
            self.
        """
        self._check_params()
        users, submit, runtime = self._columns(jobs, y, need_runtime=True)
        self.history_ = {}
        self.total_ = 0.0
        self.count_ = 0
        for i in np.argsort(submit, kind="stable"):
            _observe(self.history_, self, users[i], float(runtime[i]), int(self.n_last))
        self.training_hash_ = data_hash(users, submit, runtime)
        return self

    def predict(self, jobs: Any) -> np.ndarray:
        """Predictions for every job of a table, each from strictly earlier jobs only.

        The table needs ``user``, ``submit`` and ``req_time`` (NaN: unknown);
        if it has ``runtime``, the jobs it holds feed the history of later ones
        (see ``reveal``). The fitted state is not changed.

        Returns:
            ``(n_jobs,)`` predicted run times in the table's row order.
        """
        check_is_fitted(self, "history_")
        users, submit, runtime = self._columns(jobs, None, need_runtime=False)
        req = column(jobs, "req_time").astype(np.float64)
        hist = {u: deque(v, maxlen=int(self.n_last)) for u, v in self.history_.items()}
        state = _Totals(self.total_, self.count_)
        out = np.empty(len(users))
        pending: list[tuple[float, int]] = []  # (end time, row) of jobs not yet revealed
        for i in np.argsort(submit, kind="stable"):
            while pending and pending[0][0] <= submit[i]:
                _, j = heapq.heappop(pending)
                _observe(hist, state, users[j], float(runtime[j]), int(self.n_last))
            gm = state.total_ / state.count_ if state.count_ else math.nan
            out[i] = _predict(hist.get(users[i]), float(req[i]), gm, int(self.min_history),
                              bool(self.cap_at_request))
            if runtime is not None and np.isfinite(runtime[i]):
                if self.reveal == "submit":
                    # known to every later job in the replay, ties in submit time included
                    _observe(hist, state, users[i], float(runtime[i]), int(self.n_last))
                else:
                    end = submit[i] + max(float(runtime[i]), 0.0)
                    heapq.heappush(pending, (end, int(i)))
        return out

    @staticmethod
    def _columns(jobs: Any, y: Any, need_runtime: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        users = np.asarray([str(u) for u in column(jobs, "user")], dtype=object)
        submit = column(jobs, "submit").astype(np.float64)
        if y is not None:
            runtime = np.asarray(y, dtype=np.float64)
        elif need_runtime or _has_column(jobs, "runtime"):
            runtime = column(jobs, "runtime").astype(np.float64)
        else:
            runtime = None
        if runtime is not None and runtime.shape != users.shape:
            raise ValueError(f"runtime has shape {runtime.shape}, expected {users.shape}")
        return users, submit, runtime

    # ----------------------------------------------------------------- persist

    def state_dict(self) -> dict[str, Any]:
        """The fitted state as plain JSON-ready data (``history.json`` of a saved model)."""
        check_is_fitted(self, "history_")
        return {"history": {u: list(v) for u, v in self.history_.items()},
                "total": self.total_, "count": self.count_}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self._check_params()
        self.history_ = {str(u): deque((float(x) for x in v), maxlen=int(self.n_last))
                         for u, v in state["history"].items()}
        self.total_ = float(state["total"])
        self.count_ = int(state["count"])

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        """Write ``history.json`` (:meth:`state_dict`)."""
        (folder / "history.json").write_text(json.dumps(self.state_dict()))
        return {}

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> UserHistoryRegressor:
        """Rebuild from ``history.json``; an unreadable one is an ``InputError``."""
        f = folder / "history.json"
        state = read_json(f, "the history.json a save wrote")
        try:
            model = cls(**params)
            model.load_state_dict(state)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(str(f), f"unreadable history ({first_line(exc)})",
                             "the history.json a save wrote") from None
        return model


class HistoryBackend:
    """User-history run times as a prediction backend of the simulator (EASY++ online).

    The simulator asks ``runtime(batch)`` for newly queued jobs and calls
    ``observe(batch)`` for each job that completed normally (batch columns in
    :mod:`cosim.prediction_hub`), so each prediction uses only the run times of
    jobs that finished before it was asked for. Answers are the regressor's
    own values, NaN included (no history, no request, nothing observed yet):
    the simulator decides what replaces them.

    Args:
        regressor: the history to answer from and add to; by default an
            empty :class:`UserHistoryRegressor` with its default parameters.

    Attributes:
        regressor: the :class:`UserHistoryRegressor` in use.
        version: ``"history"``, reported with every answer.

    Examples:
        >>> backend = HistoryBackend()
        >>> backend.runtime({"job_id": [1], "user": ["alice"], "req_time": [3600.0]})
        (array([3600.]), 'history')
        >>> backend.observe({"job_id": [1, 2], "user": ["alice", "alice"],
        ...                  "req_time": [3600.0, 3600.0], "runtime": [100.0, 300.0]})
        >>> backend.runtime({"job_id": [3, 4], "user": ["alice", "alice"],
        ...                  "req_time": [3600.0, 150.0]})
        (array([200., 150.]), 'history')
    """

    version = "history"

    def __init__(self, regressor: UserHistoryRegressor | None = None):
        self.regressor = regressor if regressor is not None else UserHistoryRegressor()

    def runtime(self, batch: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """``regressor.predict_one(user, req_time)`` of each row, in order, and the version."""
        predict_one = self.regressor.predict_one
        values = [predict_one(user, req) for user, req in
                  zip(batch["user"], batch["req_time"], strict=True)]
        return np.asarray(values, dtype=np.float64), self.version

    def remaining(self, batch: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """Not available: a user history predicts no remaining time.

        Raises:
            InputError: always.
        """
        raise InputError("remaining batch", "a user-history backend",
                         "a remaining-time model (a models folder with remaining/)")

    def observe(self, batch: Mapping[str, Any]) -> None:
        """Record the actual run time of each job of ``batch`` (columns ``user``, ``runtime``)."""
        observe = self.regressor.observe
        for user, runtime in zip(batch["user"], batch["runtime"], strict=True):
            observe(user, runtime)


class _Totals:
    """Running sum and count of observed run times (mutable, shared with ``_observe``)."""

    def __init__(self, total: float, count: int):
        self.total_, self.count_ = total, count


def _has_column(jobs: Any, name: str) -> bool:
    names: Iterable[str] = jobs.column_names if hasattr(jobs, "column_names") else jobs
    return name in names


def _observe(hist: dict[str, deque[float]], totals: Any, user: str, runtime: float,
             n_last: int) -> None:
    if not np.isfinite(runtime) or runtime < 0:
        return
    q = hist.get(user)
    if q is None:
        q = hist[user] = deque(maxlen=n_last)
    q.append(runtime)
    totals.total_ += runtime
    totals.count_ += 1


def _predict(q: deque[float] | None, req: float, global_mean: float, min_history: int,
             cap: bool) -> float:
    has_req = np.isfinite(req) and req > 0
    if q is not None and len(q) >= min_history:
        pred = sum(q) / len(q)
        return min(pred, req) if cap and has_req else pred
    if has_req:
        return req
    return global_mean


def history_backend(workload=None) -> HistoryBackend:
    """A fresh :class:`HistoryBackend` for one run of ``workload`` (it needs nothing of it):
    the backend ``@history`` plans with, as the simulator's composition and the evaluation
    protocol's registry (:data:`cosim.policies.loaders.PREDICTION_BACKENDS`) make it."""
    return HistoryBackend()
