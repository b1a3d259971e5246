"""A run-time model for the jobs of a real trace, fitted on its past.

:class:`TraceRuntimeRegressor` is an XGBoost regressor (scikit-learn
estimator API, like :class:`predictors.runtime.RuntimeRegressor`) on the
features of :mod:`predictors.trace_features`: the request, the trace's
categorical fields (the user, group, executable, queue, partition, account,
QOS, job name: XGBoost categoricals over the ids seen in training, any other
id unknown), the submit hour and weekday and the user's finished past. It
fits ``log(1 + run time)`` and answers in seconds, never more than the
request (the job is killed there).

A prediction that is too short costs a scheduler more than one too long (a
backfilled job that outlives its slot delays the reserved job), so the loss
can be XGBoost's quantile (pinball) loss, ``objective="reg:quantileerror"``
at ``quantile_alpha`` above 0.5: an under-prediction by ``d`` costs
``alpha x d``, an over-prediction ``(1 - alpha) x d`` (in log time).
:func:`fit_on_past` chooses the objective and alpha by measurement on the
latest part of the past (validation), then refits on the whole past.

Saved with :func:`predictors.persist.save` as ``model.ubj`` (XGBoost's own
format) and ``meta.json`` (class, parameters, feature names, the
vocabulary of each categorical, versions, training-data hash).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from cosim.errors import InputError
from predictors.history import UserHistoryRegressor
from predictors.persist import Persistable, first_line
from predictors.runtime import data_hash, expm1_nonneg, log1p_target
from predictors.trace_features import (
    CLOCK_FEATURES,
    HISTORY_FEATURES,
    REQUEST_FEATURES,
    walk_finished,
)

__all__ = ["TraceRuntimeRegressor", "trace_errors", "baselines", "fit_on_past",
           "CANDIDATES", "feature_names_of"]

#: The losses :func:`fit_on_past` tries, in order: squared error on log time, and
#: the pinball loss at the median and two quantiles above it; each job weighted by
#: the square root of its run time (between relative and absolute error).
CANDIDATES: tuple[dict[str, Any], ...] = (
    {"objective": "reg:squarederror", "weight_power": 0.5},
    {"objective": "reg:quantileerror", "quantile_alpha": 0.5, "weight_power": 0.5},
    {"objective": "reg:quantileerror", "quantile_alpha": 0.6, "weight_power": 0.5},
    {"objective": "reg:quantileerror", "quantile_alpha": 0.7, "weight_power": 0.5},
)


#: Batches of at least this many rows are predicted by XGBoost itself (its per-call
#: cost, about 0.4 ms and 4 ms with a base margin, is then small per row).
FOREST_ROWS = 256


def feature_names_of(columns: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model's features among ``columns`` and which of them are categorical.

    Request, categorical fields (``user`` and the trace fields, those present),
    clock and history, in that order.
    """
    from cosim.workloads.base import TRACE_FEATURES

    categorical = tuple(n for n in ("user", *TRACE_FEATURES) if n in columns)
    names = REQUEST_FEATURES + categorical + CLOCK_FEATURES + HISTORY_FEATURES
    return tuple(n for n in names if n in columns), categorical


class TraceRuntimeRegressor(Persistable, RegressorMixin, BaseEstimator):
    """XGBoost on a trace's pre-run features, log target, capped at the request.

    ``X`` is a 2-D array whose columns are ``feature_names`` (build it with
    :meth:`matrix` from named columns); ``categorical`` names the columns
    holding integer ids (-1 unknown). ``predict`` caps every answer at the
    ``req_time`` column.

    Args:
        feature_names: the columns of ``X``, in order (must include ``req_time``).
        categorical: the id columns among them.
        objective: ``"reg:squarederror"`` or ``"reg:quantileerror"`` (on log time).
        quantile_alpha: the quantile of ``reg:quantileerror``.
        n_estimators, max_depth, learning_rate, subsample, colsample_bytree,
        min_child_weight, reg_lambda: XGBoost's own.
        max_categories: ids kept per categorical column (the most frequent in
            training); the rest read as unknown.
        weight_power: each job weighs ``max(run time, 1 s) ** weight_power`` in
            the loss: 0 weighs all alike (relative error), 1 weighs the log
            error by the run time, towards the absolute error in seconds
            (which long jobs dominate, and which decides backfilling).
        base: where the trees start from: ``"last_two"`` (each job's own
            last-two history, capped at its request, else (or without those
            features) the request: the
            trees learn the log ratio to it, which piecewise-constant trees
            find far easier than the identity on four decades of run time) or
            ``"none"`` (one constant for all).
        n_jobs: XGBoost threads.
        random_state: seed of the subsampling.

    Attributes:
        model_: the fitted ``xgboost.XGBRegressor``.
        vocabularies_: column -> the ids seen in training (code = position).
        n_features_in_, feature_names_in_, training_hash_: as scikit-learn and
            :mod:`predictors.persist` expect.

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> cols = {"req_time": rng.uniform(100, 1000, 300), "user": rng.integers(0, 5, 300)}
        >>> y = cols["req_time"] * (0.2 + 0.15 * cols["user"])
        >>> m = TraceRuntimeRegressor(("req_time", "user"), ("user",), n_estimators=30)
        >>> X = m.matrix(cols)
        >>> p = m.fit(X, y).predict(X)
        >>> bool(np.all(p <= cols["req_time"] * (1 + 1e-6)))
        True
    """

    _payload_files = ("model.ubj",)
    _libraries = ("xgboost",)

    def __init__(self, feature_names: Sequence[str] = ("req_time",),
                 categorical: Sequence[str] = (), objective: str = "reg:quantileerror",
                 quantile_alpha: float = 0.7, n_estimators: int = 150, max_depth: int = 6,
                 learning_rate: float = 0.1, subsample: float = 0.8,
                 colsample_bytree: float = 0.8, min_child_weight: float = 5.0,
                 reg_lambda: float = 1.0, max_categories: int = 2000,
                 weight_power: float = 0.0, base: str = "last_two", n_jobs: int = 1,
                 random_state: int = 0):
        self.feature_names = feature_names
        self.categorical = categorical
        self.objective = objective
        self.quantile_alpha = quantile_alpha
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.max_categories = max_categories
        self.weight_power = weight_power
        self.base = base
        self.n_jobs = n_jobs
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def matrix(self, columns: Mapping[str, Any]) -> np.ndarray:
        """``X`` for this model from named columns (``feature_names``, in order)."""
        missing = [n for n in self.feature_names if n not in columns]
        if missing:
            raise InputError("trace features", f"no column(s) {', '.join(missing)}",
                             f"the columns {', '.join(self.feature_names)}")
        return np.column_stack([np.asarray(columns[n], dtype=np.float64)
                                for n in self.feature_names])

    def _booster(self) -> Any:
        from xgboost import XGBRegressor

        names = list(self.feature_names)
        extra = ({"quantile_alpha": float(self.quantile_alpha)}
                 if self.objective == "reg:quantileerror" else {})
        return XGBRegressor(
            n_estimators=self.n_estimators, max_depth=self.max_depth,
            learning_rate=self.learning_rate, subsample=self.subsample,
            colsample_bytree=self.colsample_bytree, min_child_weight=self.min_child_weight,
            reg_lambda=self.reg_lambda, objective=self.objective, tree_method="hist",
            enable_categorical=True, max_cat_to_onehot=1,
            feature_types=["c" if n in self.categorical else "q" for n in names],
            n_jobs=self.n_jobs, random_state=self.random_state, **extra)

    def _check(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != len(self.feature_names):
            raise ValueError(f"X has shape {X.shape}; expected (n, {len(self.feature_names)}) "
                             f"for the features {list(self.feature_names)}")
        if "req_time" not in self.feature_names:
            raise ValueError("feature_names must include req_time (predictions are capped there)")
        return X

    def _encode(self, X: np.ndarray) -> np.ndarray:
        """Ids of the categorical columns -> codes of the training vocabulary (else NaN)."""
        X = X.copy()
        for name, vocab in self.vocabularies_.items():
            k = list(self.feature_names).index(name)
            ids = X[:, k]
            pos = np.searchsorted(vocab, ids)
            pos = np.minimum(pos, max(len(vocab) - 1, 0))
            known = (len(vocab) > 0) & (vocab[pos] == ids) if len(vocab) else np.zeros(
                len(ids), dtype=bool)
            X[:, k] = np.where(known, pos, np.nan)
        return X

    def _margin(self, X: np.ndarray) -> np.ndarray | None:
        """log(1 + the base prediction) of each row, from its own features (or None)."""
        if self.base == "none":
            return None
        if self.base != "last_two":
            raise ValueError(f"base must be 'last_two' or 'none'; got {self.base!r}")
        names = list(self.feature_names)
        req = X[:, names.index("req_time")]
        if "last_run_1" not in names or "last_run_2" not in names:
            base = req
        else:   # the mean of the last two is finite exactly when both are
            mean = (X[:, names.index("last_run_1")] + X[:, names.index("last_run_2")]) / 2
            base = np.where(np.isfinite(mean), np.minimum(mean, req), req)
        # an unknown base (no request) starts from 1 s (np.nan_to_num is slow on tiny arrays)
        return log1p_target(np.maximum(np.where(np.isnan(base), 1.0, base), 0.0))

    def fit(self, X: Any, y: Any) -> TraceRuntimeRegressor:
        """Fit on ``X`` (columns ``feature_names``) and run times ``y`` (s, >= 0).

        Returns:
            self.
        """
        X = self._check(X)
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (len(X),) or not np.all(np.isfinite(y)) or np.any(y < 0):
            raise ValueError(f"y must be {len(X)} finite run times >= 0")
        self.vocabularies_ = {}
        for name in self.categorical:
            ids = X[:, list(self.feature_names).index(name)]
            values, counts = np.unique(ids[np.isfinite(ids) & (ids >= 0)], return_counts=True)
            top = np.sort(values[np.argsort(-counts, kind="stable")[: self.max_categories]])
            self.vocabularies_[name] = top
        model = self._booster()
        weight = np.maximum(y, 1.0) ** float(self.weight_power)
        model.fit(self._encode(X), log1p_target(y), sample_weight=weight / weight.mean(),
                  base_margin=self._margin(X))
        self.model_ = model
        self.forest_ = None
        self.n_features_in_ = X.shape[1]
        self.feature_names_in_ = np.asarray(list(self.feature_names), dtype=object)
        self.training_hash_ = data_hash(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted run times (s), in ``[0, req_time]``, float32-rounded like the others."""
        check_is_fitted(self, "model_")
        X = self._check(X)
        return self.predict_encoded(self._encode(X), X)

    def encode(self, X: Any) -> np.ndarray:
        """``X`` with its categorical ids as this model's codes (what the trees read)."""
        check_is_fitted(self, "model_")
        return self._encode(self._check(X))

    def predict_encoded(self, encoded: np.ndarray, X: np.ndarray) -> np.ndarray:
        """:meth:`predict` of rows already :meth:`encode`-d (``X``: the same rows as ids).

        Fewer than :data:`FOREST_ROWS` rows are evaluated by
        :class:`predictors.forest.CompiledForest` (built once per fit), not
        by a call into XGBoost: a simulation asks about a job or two at a
        time, where XGBoost's per-call cost dominates; larger batches by
        XGBoost. The two agree within 1e-5 in log time.
        """
        from predictors.progress import quantize

        base = self._margin(X)
        if len(encoded) >= FOREST_ROWS:
            margin = self.model_.get_booster().inplace_predict(encoded, base_margin=base)
        else:
            forest = getattr(self, "forest_", None)
            if forest is None:
                from predictors.forest import CompiledForest

                forest = self.forest_ = CompiledForest(self.model_.get_booster())
            margin = forest.margin(encoded, base)
        raw = expm1_nonneg(margin)
        req = X[:, self._req_column]
        capped = np.where(np.isfinite(req) & (req > 0), np.minimum(raw, req), raw)
        return quantize(capped)

    @property
    def _req_column(self) -> int:
        return list(self.feature_names).index("req_time")

    def predict_columns(self, columns: Mapping[str, Any]) -> np.ndarray:
        """:meth:`predict` on named columns (:meth:`matrix`)."""
        return self.predict(self.matrix(columns))

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        check_is_fitted(self, "model_")
        self.model_.get_booster().save_model(str(folder / "model.ubj"))
        return {"n_features": int(self.n_features_in_),
                "vocabularies": {k: [int(v) for v in vs] for k, vs in self.vocabularies_.items()}}

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> TraceRuntimeRegressor:
        from xgboost.core import XGBoostError

        params["feature_names"] = tuple(params["feature_names"])
        params["categorical"] = tuple(params["categorical"])
        self = cls(**params)
        model = self._booster()
        f = folder / "model.ubj"
        try:
            model.load_model(str(f))
        except XGBoostError as exc:
            raise InputError(str(f), f"a file XGBoost cannot read ({first_line(exc)})",
                             "an XGBoost UBJ model") from None
        self.model_ = model
        self.forest_ = None
        self.vocabularies_ = {str(k): np.asarray(v, dtype=np.float64)
                              for k, v in meta["vocabularies"].items()}
        self.n_features_in_ = int(meta["n_features"])
        self.feature_names_in_ = np.asarray(list(self.feature_names), dtype=object)
        self.training_hash_ = str(meta.get("training_hash", ""))
        return self


def trace_errors(y: Any, yhat: Any) -> dict[str, float | int | None]:
    """How far predictions ``yhat`` are from run times ``y`` (s).

    Returns:
        ``n``; ``mae`` (s); ``median_abs_log_ratio``, the median of
        ``|log(yhat / y)|`` with both floored at 1 s (a zero run time has a
        ratio); ``too_short``, the share with ``yhat < y`` (METRICS.md's
        underestimation rate, zero run times included). None when empty.
    """
    y = np.asarray(y, dtype=np.float64)
    yhat = np.asarray(yhat, dtype=np.float64)
    if not len(y):
        return {"n": 0, "mae": None, "median_abs_log_ratio": None, "too_short": None}
    ratio = np.abs(np.log(np.maximum(yhat, 1.0) / np.maximum(y, 1.0)))
    return {"n": int(len(y)), "mae": float(np.mean(np.abs(yhat - y))),
            "median_abs_log_ratio": float(np.median(ratio)),
            "too_short": float(np.mean(yhat < y))}


def baselines(columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The predictions a model must beat, for every job of a trace's columns.

    ``request``: the user's requested time. ``last_two``: Tsafrir's mean of
    the user's last two run times capped at the request, else the request
    (:class:`predictors.history.UserHistoryRegressor`, fed the jobs that had
    finished by each submit, as the model's history is). ``user_mean``: the
    mean of all the user's finished run times, capped at the request, else
    the request.

    Args:
        columns: ``user``, ``submit``, ``end``, ``runtime``, ``req_time``,
            ``finished_count`` and ``user_mean_run`` (:func:`trace_columns`).
    """
    req = np.asarray(columns["req_time"], dtype=np.float64)
    user = np.asarray(columns["user"], dtype=np.int64)
    run = np.asarray(columns["runtime"], dtype=np.float64)
    history = UserHistoryRegressor(n_last=2, min_history=2, cap_at_request=True)
    last_two = np.empty(len(req))

    def ask(i: int) -> None:
        last_two[i] = history.predict_one(user[i], req[i])

    walk_finished(np.asarray(columns["submit"], dtype=np.float64),
                  np.asarray(columns["end"], dtype=np.float64),
                  lambda j: history.observe(user[j], run[j]), ask)
    mean = np.asarray(columns["user_mean_run"], dtype=np.float64)
    user_mean = np.where(np.isfinite(mean), np.minimum(mean, req), req)
    return {"request": req.copy(), "last_two": last_two, "user_mean": user_mean}


def fit_on_past(columns: Mapping[str, Any], *, validation: float = 0.2,
                candidates: Sequence[Mapping[str, Any]] = CANDIDATES, n_jobs: int = 1,
                random_state: int = 0, **params: Any
                ) -> tuple[TraceRuntimeRegressor, dict[str, Any]]:
    """The trace model for a trace's past, its loss chosen on the latest part of it.

    Each candidate (:data:`CANDIDATES`) is fitted on the first
    ``1 - validation`` of the jobs (by submit) and scored on the rest
    (:func:`trace_errors`). The one chosen has the smallest mean absolute
    error among those with no more too-short predictions than the last-two
    history there; if none has, the one with the fewest. It is then refitted
    on every job.

    Args:
        columns: the past's :func:`~predictors.trace_features.trace_columns`.
        validation: the share of the latest jobs held out to choose on.
        candidates: constructor parameters to choose among.
        n_jobs, random_state, params: more constructor parameters for all.

    Returns:
        The model fitted on the whole past and the choice: ``chosen`` (its
        parameters), ``validation`` (each candidate's errors and those of the
        baselines there), ``n_fit`` and ``n_validation``.
    """
    names, categorical = feature_names_of(columns)
    submit = np.asarray(columns["submit"], dtype=np.float64)
    order = np.argsort(submit, kind="stable")
    n_val = int(round(len(order) * validation))
    if len(order) - n_val < 10 or n_val < 10:
        raise InputError("trace data set", f"{len(order)} jobs in the past",
                         "at least 20 jobs with a known run time to fit and choose on")
    fit_rows, val_rows = order[: len(order) - n_val], order[len(order) - n_val:]
    y = np.asarray(columns["runtime"], dtype=np.float64)
    base = TraceRuntimeRegressor(names, categorical, n_jobs=n_jobs, random_state=random_state,
                                 **params)
    X = base.matrix(columns)
    reference = {k: trace_errors(y[val_rows], v[val_rows]) for k, v in baselines(columns).items()}
    tried = []
    for cand in candidates:
        model = TraceRuntimeRegressor(**{**base.get_params(), **cand})
        model.fit(X[fit_rows], y[fit_rows])
        tried.append((dict(cand), trace_errors(y[val_rows], model.predict(X[val_rows]))))
    limit = reference["last_two"]["too_short"]
    safe = [t for t in tried if t[1]["too_short"] <= limit]
    chosen = (min(safe, key=lambda t: t[1]["mae"]) if safe
              else min(tried, key=lambda t: t[1]["too_short"]))[0]
    model = TraceRuntimeRegressor(**{**base.get_params(), **chosen}).fit(X, y)
    report = {"chosen": chosen, "n_fit": int(len(fit_rows)), "n_validation": int(n_val),
              "validation": {"candidates": [{"params": c, **e} for c, e in tried],
                             **reference}}
    return model, report
