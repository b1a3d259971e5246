"""Trained models ready to answer the simulation's prediction batches.

A :class:`ModelBundle` is the in-process prediction backend: it holds the
pre-run model (``runtime/``) and, when trained, the remaining-time model
(``remaining/``) of a models folder written by ``python -m predictors
train``, and answers the batches of :mod:`cosim.prediction_hub` with one
vectorized call each. The prediction service serves the same bundle over
HTTP.

A pre-run prediction depends only on the job's own inputs, so a simulation
that knows its whole workload can predict every job once, up front:
:meth:`ModelBundle.precomputed` returns such a backend
(:class:`PrecomputedBackend`), which gives the very numbers the bundle
would give one batch at a time, far faster.

:func:`ensure_models` trains a bundle on a generated VASP history the first
time a scenario needs one (:func:`predictors.training.train_model`) and
caches it under a hash of everything that decides the result, so a second
run skips training.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from predictors._version import __version__

__all__ = ["ModelBundle", "PrecomputedBackend", "ensure_models", "models_key"]


class ModelBundle:
    """Pre-run and remaining-time models with their feature spec.

    Args:
        runtime_model: a fitted :class:`predictors.runtime.RuntimeRegressor`.
        remaining_model: a fitted :class:`predictors.remaining.RemainingTimeRegressor` or None.
        spec: the :class:`predictors.runtime.FeatureSpec` both were trained on.
        version: a short id of the trained models (reported with every answer).
    """

    def __init__(self, runtime_model, remaining_model, spec, version: str):
        self.runtime_model = runtime_model
        self.remaining_model = remaining_model
        self.spec = spec
        self.version = version

    @classmethod
    def load(cls, models_dir: str | Path) -> ModelBundle:
        """Load ``MODELDIR/runtime`` (required) and ``MODELDIR/remaining`` (optional).

        Raises:
            InputError: a folder is missing or holds the wrong model.
        """
        from predictors.persist import load, read_meta
        from predictors.remaining import RemainingTimeRegressor
        from predictors.runtime import FeatureSpec, RuntimeRegressor

        root = Path(models_dir)
        runtime_dir = root / "runtime"
        runtime_model = load(runtime_dir, expected_class=RuntimeRegressor)
        meta = read_meta(runtime_dir)
        if not meta.get("feature_spec"):
            raise InputError(str(runtime_dir / "meta.json"), "no feature_spec",
                             "a model trained by 'python -m predictors train runtime'")
        spec = FeatureSpec.from_dict(meta["feature_spec"], where=str(runtime_dir / "meta.json"))
        spec.check_fits(runtime_model, str(runtime_dir / "meta.json"))
        remaining_model = None
        versions = [str(meta.get("training_hash", ""))[:12]]
        if (root / "remaining").is_dir():
            remaining_model = load(root / "remaining", expected_class=RemainingTimeRegressor)
            spec.check_fits(remaining_model, str(root / "remaining" / "meta.json"))
            versions.append(str(read_meta(root / "remaining").get("training_hash", ""))[:12])
        return cls(runtime_model, remaining_model, spec, "+".join(v for v in versions if v))

    @property
    def feature_names(self) -> list[str]:
        """Columns a batch must carry."""
        return list(self.spec.names)

    def runtime(self, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Pre-run run-time predictions (s) for a batch of jobs."""
        X = self.spec.matrix(batch, where="runtime batch")
        return self.runtime_model.predict(X), self.version

    def remaining(self, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Remaining-time predictions (s) for a batch of running jobs."""
        self._check_remaining()
        return self._remaining(self.spec.matrix(batch, where="remaining batch"), batch)

    def precomputed(self, columns: Mapping[str, Any]) -> PrecomputedBackend:
        """A backend that predicts the pre-run run time of every job of a workload now.

        Args:
            columns: the batch columns (``job_id`` and the features, as in a
                ``runtime`` batch) of every job the backend will be asked about.

        Raises:
            InputError: a feature column is missing or malformed.
        """
        return PrecomputedBackend(self, columns)

    def _check_remaining(self) -> None:
        if self.remaining_model is None:
            raise InputError("remaining batch", "no remaining-time model in this bundle",
                             "a models folder with remaining/")

    def _remaining(self, X: np.ndarray, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Remaining-time predictions for the jobs of ``batch``, whose feature rows are ``X``.

        The one code path of :meth:`remaining` and :class:`PrecomputedBackend`;
        the caller has checked that there is a remaining-time model.
        """
        from predictors.observation import Progress

        progress = Progress.from_arrays(batch["progress"])
        startup = batch.get("startup")
        pred = self.remaining_model.predict(
            X, progress, np.asarray(batch["elapsed"], dtype=np.float64),
            prerun=np.asarray(batch["prerun"], dtype=np.float64),
            scf_done=np.asarray(batch["scf_done"], dtype=np.int64),
            scf_lines=batch.get("scf_lines"),
            startup=None if startup is None else np.asarray(
                [np.nan if v is None else v for v in startup], dtype=np.float64))
        return pred, self.version


class PrecomputedBackend:
    """A bundle's backend whose pre-run predictions were made in one batch up front.

    Made by :meth:`ModelBundle.precomputed`. ``runtime(batch)`` looks each
    job's prediction up by ``job_id``; ``remaining(batch)`` runs the bundle's
    remaining-time model on the feature rows computed up front. Both give
    exactly what :meth:`ModelBundle.runtime` and :meth:`ModelBundle.remaining`
    give for the same jobs.

    Args:
        bundle: the models.
        columns: batch columns of every job (see :meth:`ModelBundle.precomputed`).

    Attributes:
        bundle: the models.
        version: the bundle's version, reported with every answer.
    """

    def __init__(self, bundle: ModelBundle, columns: Mapping[str, Any]):
        self.bundle = bundle
        self.version = bundle.version
        self._X = bundle.spec.matrix(columns, where="workload features")
        self._values = bundle.runtime_model.predict(self._X)
        self._row = {j: i for i, j in enumerate(columns["job_id"])}

    def _rows(self, batch: Mapping[str, Any]) -> list[int]:
        try:
            return [self._row[j] for j in batch["job_id"]]
        except KeyError as exc:
            raise InputError("job_id", repr(exc.args[0]),
                             "a job the predictions were precomputed for") from None

    def runtime(self, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Pre-run run-time predictions (s) for a batch of jobs, looked up by ``job_id``."""
        return self._values[self._rows(batch)], self.version

    def remaining(self, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Remaining-time predictions (s) for a batch of running jobs."""
        self.bundle._check_remaining()
        return self.bundle._remaining(self._X[self._rows(batch)], batch)

    @property
    def independent_rows(self) -> bool:
        """Whether each answer depends only on its own job's inputs, never on the batch.

        True for the boosted trees (row by row, in float32); the recurrent
        network's batched matrix products may round differently with the
        batch's size, so a caller must not ask it ahead.
        """
        model = self.bundle.remaining_model
        return model is not None and model.model == "gbm"

    def remaining_arrays(self, batch: dict[str, Any]) -> tuple[np.ndarray, str]:
        """Remaining-time predictions (s) from flat progress arrays, in process.

        ``batch`` has ``job_id`` and the numpy arrays of
        :meth:`predictors.remaining.RemainingTimeRegressor.predict_arrays`; the
        answer is what :meth:`remaining` gives for the same jobs and progress,
        without converting progress logs to lists and back.
        """
        self.bundle._check_remaining()
        X = self._X[self._rows(batch)]
        return self.bundle.remaining_model.predict_arrays(X, batch), self.version


def models_key(**inputs: Any) -> str:
    """A short hash of everything that decides a trained bundle."""
    payload = json.dumps({"inputs": inputs, "code": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def ensure_models(cache_dir: str | Path, *, jobs: int, seed: int, remaining: bool,
                  epochs: int | None = None, generator_params: dict[str, Any] | None = None,
                  echo=print) -> Path:
    """A trained models folder for this training setup, from the cache or trained now.

    Generates ``jobs`` VASP jobs with ``seed`` (a stream separate from any
    evaluation stream), trains the pre-run model and, if asked, the
    remaining-time model, and stores the folder atomically under
    ``cache_dir/<hash>``. ``echo`` hears what happens, naming the final
    folder (never the temporary one the models are trained in).
    """
    key = models_key(jobs=jobs, seed=seed, remaining=remaining, epochs=epochs,
                     params=generator_params or {})
    cache = Path(cache_dir)
    final = cache / key
    kinds = ("runtime", "remaining") if remaining else ("runtime",)

    def complete() -> bool:
        return all((final / kind / "meta.json").exists() for kind in kinds)

    if complete():
        if echo:
            echo(f"predictors: {final} (cached)")
        return final
    cache.mkdir(parents=True, exist_ok=True)
    # One trainer per folder: processes started together (a sweep, parallel tests)
    # wait for the first, then read what it stored.
    with _locked(cache / f".{key}.lock"):
        if complete():
            if echo:
                echo(f"predictors: {final} (cached)")
            return final
        _train_into(final, kinds, key, jobs=jobs, seed=seed, epochs=epochs,
                    generator_params=generator_params, echo=echo)
    return final


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive ``flock`` on ``path`` for the block (released if the process dies)."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _train_into(final: Path, kinds: tuple[str, ...], key: str, *, jobs: int, seed: int,
                epochs: int | None, generator_params: dict[str, Any] | None, echo) -> None:
    from predictors.dataset import generate_dataset
    from predictors.training import train_model

    work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
    try:
        t0 = time.perf_counter()
        if echo:
            echo(f"training predictors on {jobs} generated VASP jobs (cached in {final}) ...")
        data = generate_dataset(jobs, seed, work / "data", **(generator_params or {}))
        models = work / "models"
        for kind in kinds:
            trained = train_model(kind, data, models, seed=seed, epochs=epochs)
            if echo:
                echo(f"  {kind} model trained in {trained.seconds:.1f} s")
        if final.exists():       # a folder left without its meta.json files
            shutil.rmtree(final)
        os.replace(models, final)
        if echo:
            echo(f"predictors: {final} ({' and '.join(kinds)}, trained in "
                 f"{time.perf_counter() - t0:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
