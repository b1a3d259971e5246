"""Pre-run runtime prediction: an XGBoost regressor on job input features.

RLSchert (seed 001, section 4.2) predicts a VASP job's run time before it
starts with extreme gradient boosting on the input parameters of its Table 1
and reports a MAPE of 39.8 % (29.9 % single-ionic, 67.3 % multi-ionic).
:class:`RuntimeRegressor` is that model as a scikit-learn estimator; the log
target and the non-negative output are added by composition with
:class:`sklearn.compose.TransformedTargetRegressor`, not inside the booster.

:class:`FeatureSpec` turns a jobs table (a ``pyarrow.Table`` or a mapping of
column name to array, in the layout ``predictors.dataset`` writes) into the
numeric matrix the models take. The feature names come from the dataset's
``dataset.json``, so nothing here hard-codes VASP parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from cosim.errors import InputError
from cosim.limits import read_json
from predictors.persist import Persistable, first_line

__all__ = [
    "FeatureSpec",
    "RuntimeRegressor",
    "UNKNOWN_CODE",
    "column",
    "data_hash",
    "log1p_target",
    "expm1_nonneg",
]

#: Code of an unknown or out-of-vocabulary categorical value; vocabulary
#: entry ``i`` gets code ``i + 1``.
UNKNOWN_CODE = 0


def log1p_target(y: np.ndarray) -> np.ndarray:
    """Forward target transform: ``log(1 + y)`` (run times are >= 0)."""
    return np.log1p(y)


def expm1_nonneg(z: np.ndarray) -> np.ndarray:
    """Inverse target transform: ``exp(z) - 1`` clipped at 0 (a run time is never negative).

    In float64: XGBoost answers in float32, and numpy's float32 ``expm1``
    differs by a float32 unit between CPU instruction sets.
    """
    return np.maximum(np.expm1(np.asarray(z, dtype=np.float64)), 0.0)


def column(jobs: Any, name: str, where: str = "jobs") -> np.ndarray:
    """One column of a jobs table as a numpy array.

    Args:
        jobs: a ``pyarrow.Table`` or a mapping of column name to array-like.
        name: the column.
        where: names the table in error messages (a file path, for example).

    Raises:
        InputError: the column is missing.
    """
    names = list(jobs.column_names) if hasattr(jobs, "column_names") else list(jobs)
    if name not in names:
        raise InputError(f"{where}: column {name!r}", "no such column",
                         f"one of the columns {sorted(names)}")
    col = jobs[name]
    if hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
        # pyarrow ChunkedArray: strings come back as an object array, float nulls as NaN
        return np.asarray(col.to_numpy())
    return np.asarray(col)


def data_hash(*arrays: np.ndarray) -> str:
    """SHA-256 over the bytes, shapes and dtypes of ``arrays``, to tie a model to its training data."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        if a.dtype == object:
            a = np.asarray([str(v) for v in a.ravel()], dtype=str)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class FeatureSpec:
    """Which job columns feed the pre-run models, and how categoricals are coded.

    Columns in order: ``extra`` (not already numeric), ``numeric``, then the
    categorical columns. Numeric values stay float64 with NaN for unknown
    (XGBoost learns a default direction for missing values). A categorical
    value becomes its position in the fixed vocabulary plus one; ``""``,
    missing and out-of-vocabulary values get :data:`UNKNOWN_CODE` (0), so a
    model trained on one vocabulary still reads data with new values.

    Attributes:
        numeric: numeric feature names (``dataset.json`` ``"features"``).
        categorical: name -> vocabulary (``dataset.json`` ``"categorical"``).
        extra: more numeric job columns known before the run (cores).

    Examples:
        >>> spec = FeatureSpec(numeric=("ENCUT",), categorical={"PREC": ("Normal", "Accurate")})
        >>> spec.names
        ('cores', 'ENCUT', 'PREC')
        >>> spec.matrix({"cores": [4, 8], "ENCUT": [400.0, float("nan")],
        ...              "PREC": ["Accurate", "Weird"]}).tolist()
        [[4.0, 400.0, 2.0], [8.0, nan, 0.0]]
    """

    numeric: tuple[str, ...]
    categorical: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    extra: tuple[str, ...] = ("cores",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "numeric", tuple(self.numeric))
        object.__setattr__(self, "extra", tuple(self.extra))
        object.__setattr__(self, "categorical",
                           {str(k): tuple(str(v) for v in vs) for k, vs in self.categorical.items()})

    @property
    def names(self) -> tuple[str, ...]:
        """Feature names, in matrix column order."""
        extra = tuple(e for e in self.extra if e not in self.numeric and e not in self.categorical)
        return extra + self.numeric + tuple(self.categorical)

    @property
    def categorical_columns(self) -> dict[int, int]:
        """Matrix column index -> number of codes (vocabulary size + 1 for unknown)."""
        names = self.names
        return {names.index(k): len(v) + 1 for k, v in self.categorical.items()}

    def matrix(self, jobs: Any, where: str = "jobs") -> np.ndarray:
        """The ``(n_jobs, n_features)`` float64 feature matrix of a jobs table.

        Raises:
            InputError: a column is missing or a numeric column is not numeric.
        """
        cols = []
        for name in self.names:
            raw = column(jobs, name, where)
            if name in self.categorical:
                cols.append(self._codes(raw, self.categorical[name]))
                continue
            try:
                cols.append(np.asarray(raw, dtype=np.float64))
            except (TypeError, ValueError):
                i = next((i for i, v in enumerate(raw) if not _is_number(v)), 0)
                raise InputError(f"{where}: column {name!r}",
                                 f"non-numeric value {str(raw[i])!r} in row {i}",
                                 "numbers (NaN for unknown)") from None
        if not cols:
            return np.zeros((0, 0))
        return np.column_stack(cols).astype(np.float64, copy=False)

    @staticmethod
    def _codes(raw: np.ndarray, vocab: tuple[str, ...]) -> np.ndarray:
        # map unique values once: a 20k-row column has a handful of distinct strings
        values = np.asarray(["" if v is None else str(v) for v in raw], dtype=object)
        if len(values) == 0:
            return np.zeros(0)
        uniq, inverse = np.unique(values.astype(str), return_inverse=True)
        index = {v: i + 1 for i, v in enumerate(vocab)}
        codes = np.asarray([index.get(u, UNKNOWN_CODE) for u in uniq], dtype=np.float64)
        return codes[inverse.ravel()]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (stored in model ``meta.json``).

        Categoricals are a list of ``[name, vocabulary]`` pairs: their order is
        the column order, which a JSON object does not promise to keep.
        """
        return {"numeric": list(self.numeric),
                "categorical": [[k, list(v)] for k, v in self.categorical.items()],
                "extra": list(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "feature spec") -> FeatureSpec:
        """Inverse of :meth:`to_dict`, or read ``dataset.json`` (``features`` + ``categorical``).

        Raises:
            InputError: the keys are missing or have the wrong type.
        """
        if not isinstance(d, Mapping):
            raise InputError(where, repr(d)[:80], "a JSON object of feature names")
        numeric = d.get("numeric", d.get("features"))
        categorical = d.get("categorical", {})
        extra = d.get("extra", ("cores",))
        if not isinstance(numeric, list | tuple) or not all(isinstance(x, str) for x in numeric):
            raise InputError(f"{where}: 'features'", repr(numeric)[:80], "a list of feature names")
        if isinstance(categorical, list) and all(
                isinstance(p, list | tuple) and len(p) == 2 for p in categorical):
            categorical = {str(k): v for k, v in categorical}
        if not isinstance(categorical, Mapping) or not all(
                isinstance(v, list | tuple) for v in categorical.values()):
            raise InputError(f"{where}: 'categorical'", repr(categorical)[:80],
                             "a mapping of name to vocabulary list")
        if not isinstance(extra, list | tuple):
            raise InputError(f"{where}: 'extra'", repr(extra)[:80], "a list of column names")
        return cls(numeric=tuple(numeric), categorical=categorical, extra=tuple(extra))

    def check_fits(self, model: Any, where: str) -> None:
        """Refuse a model fitted on another number of columns than this spec makes.

        Both come from one ``meta.json``; an edited one loaded fine and then
        failed on every batch (the server blamed the client).
        """
        fitted = getattr(model, "n_features_in_", None)
        if fitted is not None and int(fitted) != len(self.names):
            raise InputError(where, f"a feature_spec of {len(self.names)} columns for a model "
                             f"fitted on {int(fitted)}", "the feature_spec the model was "
                             "trained with (retrain it, or restore meta.json)")

    @classmethod
    def from_dataset(cls, data_dir: str | Path) -> FeatureSpec:
        """Read the feature names and vocabularies from ``DIR/dataset.json``.

        Raises:
            InputError: the file is missing or malformed.
        """
        path = Path(data_dir) / "dataset.json"
        meta = read_json(path, "a dataset folder written by 'python -m predictors generate' "
                               "or 'ingest'")
        if not isinstance(meta, dict):
            raise InputError(str(path), type(meta).__name__, "a JSON object")
        return cls.from_dict(meta, where=str(path))


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


class RuntimeRegressor(Persistable, RegressorMixin, BaseEstimator):
    """XGBoost run-time regressor on pre-run features, fitted on a log target.

    ``fit`` wraps an :class:`xgboost.XGBRegressor` (``tree_method="hist"``) in a
    :class:`~sklearn.compose.TransformedTargetRegressor` with ``log1p`` /
    ``expm1`` (clipped at 0), so the booster minimises error in log space,
    which matches relative-error metrics (MAPE) on run times that span four
    decades, and predictions are never negative.

    Args:
        n_estimators: boosting rounds.
        max_depth: tree depth.
        learning_rate: shrinkage.
        subsample: row fraction per tree.
        colsample_bytree: feature fraction per tree.
        min_child_weight: minimum hessian in a leaf.
        reg_lambda: L2 penalty on leaf weights.
        objective: XGBoost objective on the (log) target; ``"reg:absoluteerror"``
            fits the median, which suits MAPE.
        log_target: fit on ``log1p(y)`` (then ``y`` must be >= 0); False fits
            ``y`` itself and predictions are not clipped.
        n_jobs: XGBoost threads (keep small on shared machines).
        random_state: seed of the row and column subsampling.

    Attributes:
        model_: the fitted ``TransformedTargetRegressor`` (or ``XGBRegressor``
            when ``log_target`` is False).
        n_features_in_: number of features seen in ``fit``.
        feature_names_in_: column names, when ``fit`` got a table with names.
        training_hash_: SHA-256 of the training ``X`` and ``y``.

    ``save(path)`` / ``load(path)`` keep it as a folder with ``model.ubj``
    (XGBoost's own format; see :mod:`predictors.persist`).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(1, 10, size=(200, 2))
        >>> model = RuntimeRegressor(n_estimators=50).fit(X, 60 * X[:, 0])
        >>> bool(np.all(model.predict(X) >= 0))
        True
    """

    _payload_files = ("model.ubj",)
    _libraries = ("xgboost",)

    def __init__(self, n_estimators: int = 200, max_depth: int = 6, learning_rate: float = 0.1,
                 subsample: float = 0.8, colsample_bytree: float = 0.8,
                 min_child_weight: float = 1.0, reg_lambda: float = 1.0,
                 objective: str = "reg:squarederror", log_target: bool = True,
                 n_jobs: int = 1, random_state: int = 0):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        self.objective = objective
        self.log_target = log_target
        self.n_jobs = n_jobs
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _booster_params(self) -> dict[str, Any]:
        return dict(n_estimators=self.n_estimators, max_depth=self.max_depth,
                    learning_rate=self.learning_rate, subsample=self.subsample,
                    colsample_bytree=self.colsample_bytree,
                    min_child_weight=self.min_child_weight, reg_lambda=self.reg_lambda,
                    objective=self.objective, tree_method="hist", n_jobs=self.n_jobs,
                    random_state=self.random_state)

    def _compose(self, regressor: Any) -> Any:
        """Wrap ``regressor`` with the target transform this estimator's params ask for."""
        if not self.log_target:
            return regressor
        from sklearn.compose import TransformedTargetRegressor

        return TransformedTargetRegressor(regressor=regressor, func=log1p_target,
                                          inverse_func=expm1_nonneg, check_inverse=False)

    def fit(self, X: Any, y: Any) -> RuntimeRegressor:
        """Fit on features ``X`` (n_samples, n_features; NaN allowed) and run times ``y``.

        Returns:
            self.

        Raises:
            ValueError: ``X``/``y`` are malformed, or ``y`` is negative with ``log_target``.
        """
        from xgboost import XGBRegressor

        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True,
                             dtype=np.float64)
        if self.log_target and np.any(y < 0):
            raise ValueError(f"run-time targets must be >= 0 with log_target=True; "
                             f"got min {float(np.min(y))}")
        model = self._compose(XGBRegressor(**self._booster_params()))
        model.fit(X, y)
        self.model_ = model
        self.training_hash_ = data_hash(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted run times (seconds, >= 0 when ``log_target``) for ``X``.

        Rounded to float32 (:func:`predictors.progress.quantize`): the inverse
        target transform (``expm1``) differs in the last bits between CPU
        instruction sets, and a schedule ordered by these numbers must not.
        """
        from predictors.progress import quantize

        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return quantize(np.asarray(self.model_.predict(X), dtype=np.float64))

    def get_booster(self) -> Any:
        """The fitted ``xgboost.Booster`` (for saving in its own format)."""
        check_is_fitted(self, "model_")
        reg = self.model_.regressor_ if self.log_target else self.model_
        reg = getattr(reg, "estimator", reg)  # unwrap FrozenEstimator after load
        return reg.get_booster()

    @classmethod
    def from_booster(cls, booster_path: str | Path, params: Mapping[str, Any],
                     n_features: int, feature_names: Sequence[str] | None = None,
                     training_hash: str = "") -> RuntimeRegressor:
        """Rebuild a fitted regressor from a saved booster file (used by :meth:`load`).

        The booster goes in a :class:`~sklearn.frozen.FrozenEstimator`, so the
        target transform is recomposed with the public scikit-learn API (a no-op
        ``fit``) instead of setting private attributes.
        """
        from sklearn.frozen import FrozenEstimator
        from xgboost import XGBRegressor

        self = cls(**params)
        reg = XGBRegressor(**self._booster_params())
        reg.load_model(str(booster_path))
        model = self._compose(FrozenEstimator(reg))
        if self.log_target:
            # Only builds the target transformer; the frozen booster's fit does nothing.
            model.fit(np.zeros((1, n_features)), np.zeros(1))
        else:
            model = reg
        self.model_ = model
        self.n_features_in_ = int(n_features)
        if feature_names is not None:
            self.feature_names_in_ = np.asarray(list(feature_names), dtype=object)
        self.training_hash_ = training_hash
        return self

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        """Write ``model.ubj`` (``Booster.save_model``) for :meth:`save`."""
        check_is_fitted(self, "model_")
        self.get_booster().save_model(str(folder / "model.ubj"))
        return {"n_features": int(self.n_features_in_)}

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> RuntimeRegressor:
        """Rebuild from ``model.ubj`` (:meth:`from_booster`) for :meth:`load`."""
        from xgboost.core import XGBoostError

        f = folder / "model.ubj"
        try:
            return cls.from_booster(f, params, int(meta["n_features"]),
                                    meta.get("feature_names_in"),
                                    str(meta.get("training_hash", "")))
        except XGBoostError as exc:
            raise InputError(str(f), f"a file XGBoost cannot read ({first_line(exc)})",
                             "an XGBoost UBJ model") from None
