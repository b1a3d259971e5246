"""Training one predictor from a dataset folder into a models folder.

:func:`train_model` is what ``python -m predictors train KIND`` runs, and
what :func:`predictors.bundle.ensure_models` calls to train a bundle: it
reads a dataset folder (:func:`predictors.evaluate.read_data`), fits one
model kind and saves it as ``MODELDIR/KIND/`` (:func:`predictors.persist.save`,
with the dataset's feature spec). The same inputs give the same model files
byte for byte.

Examples:
    >>> result = train_model("runtime", "data/vasp20k", "models/vasp", seed=1)  # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    trained runtime on 20000 jobs in 4.2 s -> models/vasp/runtime
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosim.errors import InputError
from predictors.evaluate import EvalData, read_data
from predictors.history import UserHistoryRegressor
from predictors.persist import read_meta, save
from predictors.remaining import RemainingTimeRegressor
from predictors.runtime import FeatureSpec, RuntimeRegressor

__all__ = ["MODEL_KINDS", "TrainedModel", "train_model"]

#: The model kinds, each saved in ``MODELDIR/KIND/``.
MODEL_KINDS = ("runtime", "remaining", "history")


@dataclass(frozen=True)
class TrainedModel:
    """What :func:`train_model` wrote; ``str()`` is the line the CLI prints.

    Attributes:
        kind: the model kind.
        folder: the saved model folder (``MODELDIR/KIND``).
        n_jobs: jobs trained on.
        seconds: wall time of the fit (loading data and saving excluded).
    """

    kind: str
    folder: Path
    n_jobs: int
    seconds: float

    def __str__(self) -> str:
        return (f"trained {self.kind} on {self.n_jobs} jobs in {self.seconds:.1f} s "
                f"-> {self.folder}")


def train_model(kind: str, data_dir: str | Path, models_dir: str | Path, *, seed: int = 0,
                threads: int = 1, epochs: int | None = None, rnn: str = "gru",
                model: str = "gbm") -> TrainedModel:
    """Train one model kind on a dataset folder and save it as ``models_dir/kind/``.

    ``remaining`` reuses ``models_dir/runtime/`` as its pre-run model when
    that folder exists (it must have been trained on the same features);
    otherwise it trains its own.

    Args:
        kind: ``"runtime"``, ``"remaining"`` or ``"history"``.
        data_dir: a dataset folder (``generate``, ``ingest``).
        models_dir: the models folder (MODELDIR); ``kind/`` in it is replaced.
        seed: random seed of the model.
        threads: CPU threads for XGBoost / torch.
        epochs: remaining, ``model="gru"``: training epochs (None: the model's default).
        rnn: remaining, ``model="gru"``: ``"gru"`` or ``"lstm"``.
        model: remaining: ``"gbm"`` (boosted trees over progress features, the
            default) or ``"gru"`` (recurrent network); ``docs/predictors.md``.

    Returns:
        Where the model went, with the job count and training time.

    Raises:
        InputError: an unknown kind, an unreadable dataset, or a pre-run
            model on other features than the dataset's.
    """
    if kind not in MODEL_KINDS:
        raise InputError("kind", repr(kind), f"one of {', '.join(MODEL_KINDS)}")
    data_dir, models_dir = Path(data_dir), Path(models_dir)
    data = read_data(data_dir)
    t0 = time.perf_counter()
    if kind == "runtime":
        fitted: Any = RuntimeRegressor(n_jobs=threads, random_state=seed)
        fitted.fit(data.matrix(), data.runtime)
    elif kind == "remaining":
        fitted = _fit_remaining(data, models_dir / "runtime", seed=seed, threads=threads,
                                epochs=epochs, rnn=rnn, model=model)
    else:
        fitted = UserHistoryRegressor().fit(data.jobs)
    seconds = time.perf_counter() - t0
    n_jobs = len(data.runtime)
    folder = save(fitted, models_dir / kind, feature_spec=data.spec,
                  extra={"data": str(data_dir), "n_jobs": n_jobs,
                         "train_seconds": round(seconds, 3)})
    return TrainedModel(kind, folder, n_jobs, seconds)


def _fit_remaining(data: EvalData, prerun_dir: Path, *, seed: int, threads: int,
                   epochs: int | None, rnn: str, model: str) -> RemainingTimeRegressor:
    """The fitted remaining-time model, on the pre-run model of ``prerun_dir`` if there is one."""
    spec = data.spec
    runtime_model = None
    if prerun_dir.is_dir():
        runtime_model = RuntimeRegressor.load(prerun_dir)
        saved = read_meta(prerun_dir).get("feature_spec")
        if saved and FeatureSpec.from_dict(saved).names != spec.names:
            raise InputError(str(prerun_dir / "meta.json"),
                             f"a pre-run model on features {list(FeatureSpec.from_dict(saved).names)}",
                             f"the features of {data.path} ({list(spec.names)}); "
                             "retrain it with 'train runtime'")
    params: dict[str, Any] = dict(model=model, rnn=rnn, random_state=seed, num_threads=threads,
                                  runtime_model=runtime_model,
                                  categorical_columns=spec.categorical_columns,
                                  feature_names=list(spec.names))
    if epochs is not None:
        params["epochs"] = epochs
    if len(data.runtime) < 2:   # its validation split needs two runs (one ingested run has one)
        raise InputError(str(data.path), f"{len(data.runtime)} job with a known run time",
                         "at least 2 for a remaining-time model")
    fitted = RemainingTimeRegressor(**params)
    fitted.fit(data.matrix(), data.progress, data.runtime, startup=data.startup)
    return fitted
