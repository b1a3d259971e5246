"""The prediction service: batched asynchronous calls to the run-time models.

The simulation asks for predictions one decision point at a time, as one
batch of JSON-able columns (:mod:`cosim.prediction_hub` describes them). A
:class:`PredictionService` answers such a batch with one awaitable call, so
the asyncio bridge (:mod:`cosim.bridge`) can use the models in the same
process (:class:`InProcessService`) or over HTTP (:class:`HttpService`,
talking to ``python -m predictors serve``, :mod:`predictors.server`) without
knowing which.

Every failure of a call is a :class:`ServiceError` (timeout, connection,
rejected batch, HTTP status, malformed answer), so a caller falls back by
catching one type. Both backends validate a batch with
:func:`predictors.batches.validate_batch` and reject the same batches with
the same message and field path (the batch checks are re-exported here).

Examples:
    >>> import asyncio  # doctest: +SKIP
    >>> async def main():  # doctest: +SKIP
    ...     async with make_service("http", url="http://127.0.0.1:8080") as svc:
    ...         answer = await svc.runtime(batch)
    ...         return answer.values, answer.model_version
"""

from __future__ import annotations

import abc
import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from predictors.batches import (
    DEFAULT_MAX_BATCH,
    KINDS,
    REMAINING_COLUMNS,
    BatchError,
    required_columns,
    validate_batch,
)

__all__ = [
    "Prediction",
    "PredictionService",
    "InProcessService",
    "HttpService",
    "make_service",
    "ServiceError",
    "ServiceTimeout",
    "ServiceUnavailable",
    "BatchRejected",
    "ModelNotLoaded",
    "ServiceHTTPError",
    "ServiceResponseError",
    "CircuitOpen",
    "CircuitBreaker",
    "fallback_line",
    "BatchError",
    "validate_batch",
    "required_columns",
    "describe_models",
    "dataset_batch",
    "encode_batch",
    "DEFAULT_MAX_BATCH",
    "KINDS",
    "REMAINING_COLUMNS",
]


# ----------------------------------------------------------------------------- results, errors


@dataclass(frozen=True)
class Prediction:
    """The answer to one batched call.

    Attributes:
        values: predicted seconds, one float64 per job of the batch, in batch order.
        model_version: id of the models that answered (``ModelBundle.version``).
        seconds: wall time the call took, as the caller saw it.
    """

    values: np.ndarray
    model_version: str
    seconds: float


class ServiceError(Exception):
    """A prediction call failed; the caller keeps its own estimates.

    Attributes:
        reason: a short fixed label for counting fallbacks (``"timeout"``,
            ``"unavailable"``, ``"rejected"``, ``"no model"``, ``"http 500"``,
            ``"bad response"``, ``"closed"``).
        status: the HTTP status, or None (in process, or no answer at all).
        field: key path of the bad part of the request (``"jobs.ENCUT"``), or None.
    """

    def __init__(self, message: str, *, reason: str = "error", status: int | None = None,
                 field: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.status = status
        self.field = field


class ServiceTimeout(ServiceError):
    """No answer within the call's time limit."""

    def __init__(self, message: str):
        super().__init__(message, reason="timeout")


class ServiceUnavailable(ServiceError):
    """The service cannot be reached, dropped the connection, or is overloaded (503)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message, reason="unavailable", status=status)


class BatchRejected(ServiceError):
    """The batch is malformed or the model refused it (HTTP 400 or 413); ``field`` says where."""

    def __init__(self, message: str, *, field: str | None, status: int | None = None):
        super().__init__(message, reason="rejected", status=status, field=field)


class ModelNotLoaded(ServiceError):
    """The call needs a model the service does not hold (no ``remaining/`` folder)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message, reason="no model", status=status)


class ServiceHTTPError(ServiceError):
    """Any other unsuccessful HTTP status (401 bad token, 404, 500 server fault)."""

    def __init__(self, message: str, *, status: int, field: str | None = None):
        super().__init__(message, reason=f"http {status}", status=status, field=field)


class ServiceResponseError(ServiceError):
    """The service answered 200 with something that is not a valid prediction."""

    def __init__(self, message: str):
        super().__init__(message, reason="bad response")


class CircuitOpen(ServiceUnavailable):
    """The client's circuit breaker is open: the call was not sent (see :class:`CircuitBreaker`)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.reason = "circuit open"


class CircuitBreaker:
    """Stops calling a service that keeps failing, so a hung server costs seconds, not the run.

    Closed (normal): calls go through; ``failures`` failed calls in a row
    (timeouts, lost connections, 503s, 5xx, answers that are not
    predictions) open it. Open: every call fails at once with
    :class:`CircuitOpen` for ``cooldown_s`` wall seconds, and the caller
    keeps its own estimates. Then one probe call is let through (half-open):
    an answer closes the breaker, a failure opens it for another cool-down.
    Any answer the server gave (a 400 included) counts as alive.

    Args:
        failures: failed calls in a row that open the breaker (>= 1).
        cooldown_s: wall seconds the breaker stays open before a probe.
        clock: monotonic clock in seconds (tests pass their own).
    """

    def __init__(self, failures: int = 3, cooldown_s: float = 30.0,
                 clock: Any = time.monotonic):
        if not (isinstance(failures, int) and not isinstance(failures, bool) and failures >= 1):
            raise InputError("breaker failures", repr(failures), "an integer >= 1")
        if not (isinstance(cooldown_s, int | float) and cooldown_s >= 0):
            raise InputError("breaker cooldown_s", repr(cooldown_s), "a number >= 0")
        self.failures = failures
        self.cooldown_s = float(cooldown_s)
        self._clock = clock
        self._in_a_row = 0
        self._open_until: float | None = None
        self._probing = False
        self.opened = 0        # how many times it opened
        self.refused = 0       # calls failed at once while open

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"`` (the next call is a probe)."""
        if self._open_until is None:
            return "closed"
        return "open" if self._clock() < self._open_until or self._probing else "half-open"

    def before_call(self) -> None:
        """Raise :class:`CircuitOpen` when the call must not be sent; else let it through."""
        if self._open_until is None:
            return
        if self._probing or self._clock() < self._open_until:
            self.refused += 1
            left = max(0.0, self._open_until - self._clock())
            raise CircuitOpen(f"{self._in_a_row} calls in a row failed; not calling the service "
                              f"for {left:.1f} s more (user estimates meanwhile)")
        self._probing = True   # half-open: this call is the one probe

    def success(self) -> None:
        """The service answered: close the breaker."""
        self._in_a_row = 0
        self._open_until = None
        self._probing = False

    def failure(self) -> None:
        """The call got no usable answer: count it, open the breaker at the limit."""
        self._in_a_row += 1
        if self._probing or self._in_a_row >= self.failures:
            if not self._probing:
                self.opened += 1
            self._probing = False
            self._open_until = self._clock() + self.cooldown_s


def fallback_line(label: str, metrics: Mapping[str, Any]) -> str | None:
    """One stderr line saying how many decision points fell back to user estimates.

    ``metrics`` holds ``prediction_fallbacks``, ``prediction_fallback_reasons``
    and ``prediction_batches`` (a run's summary metrics, or
    ``PredictionStats.as_dict()``); None when nothing fell back.

    Examples:
        >>> fallback_line("sjf+easy@rnn", {"prediction_fallbacks": 3, "prediction_batches": 10,
        ...               "prediction_fallback_reasons": {"timeout": 1, "circuit open": 2}})
        'warning: sjf+easy@rnn: 3 of 10 prediction batches used user estimates instead (circuit open 2, timeout 1)'
    """
    count = int(metrics.get("prediction_fallbacks") or 0)
    if count <= 0:
        return None
    reasons = metrics.get("prediction_fallback_reasons") or {}
    detail = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    total = metrics.get("prediction_batches")
    of = f" of {int(total)}" if isinstance(total, int) and total >= count else ""
    return (f"warning: {label}: {count}{of} prediction batches used user estimates instead"
            + (f" ({detail})" if detail else ""))


def describe_models(bundle: Any, max_batch: int = DEFAULT_MAX_BATCH) -> dict[str, Any]:
    """What a bundle serves: versions, loaded models, feature names and batch columns."""
    spec = bundle.spec
    names = bundle.feature_names

    def one(model: Any) -> dict[str, Any]:
        if model is None:
            return {"loaded": False}
        return {"loaded": True, "class": type(model).__name__,
                "version": str(getattr(model, "training_hash_", ""))[:12]}

    return {"model_version": bundle.version,
            "models": {"runtime": one(bundle.runtime_model),
                       "remaining": one(bundle.remaining_model)},
            "feature_names": names,
            "categorical": {k: list(v) for k, v in spec.categorical.items()},
            "columns": {k: required_columns(k, names) for k in KINDS},
            "max_batch": max_batch}


# ----------------------------------------------------------------------------- services


class PredictionService(abc.ABC):
    """Asynchronous, batched run-time predictions; use ``async with`` to close it.

    A whole decision point's batch is one call: ``runtime(batch)`` for queued
    jobs, ``remaining(batch)`` for running ones (columns in
    :mod:`cosim.prediction_hub`). Every failure raises :class:`ServiceError`.
    """

    @abc.abstractmethod
    async def _call(self, kind: str, batch: Mapping[str, Any]) -> Prediction:
        """The predictions of ``kind`` (``runtime`` or ``remaining``) for ``batch``."""

    async def runtime(self, batch: Mapping[str, Any]) -> Prediction:
        """Pre-run run-time predictions (s) for a batch of jobs (over HTTP ``POST /v1/runtime``)."""
        return await self._call("runtime", batch)

    async def remaining(self, batch: Mapping[str, Any]) -> Prediction:
        """Remaining-time predictions (s) for running jobs (over HTTP ``POST /v1/remaining``)."""
        return await self._call("remaining", batch)

    @abc.abstractmethod
    async def health(self) -> dict[str, Any]:
        """``{"status": "ok", "model_version": ...}`` when the service can answer."""

    @abc.abstractmethod
    async def models(self) -> dict[str, Any]:
        """Versions, loaded models and feature names (:func:`describe_models`)."""

    async def close(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release connections or threads; the service cannot be used afterwards."""

    async def __aenter__(self) -> PredictionService:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class InProcessService(PredictionService):
    """Answers batches with a loaded :class:`predictors.bundle.ModelBundle` in this process.

    By default the model runs in the event loop's own thread: a decision
    point's batch is one vectorized forward pass of a few milliseconds, the
    caller (the bridge) has nothing else to do meanwhile, and a hop to a
    worker thread adds about 0.5 ms per call, a third of a one-job call
    (``benchmarks/service.py``: 1.6 ms in the loop, 2.2 ms through a
    thread, for one job's pre-run prediction). ``offload=True`` runs validation and the
    model in one dedicated worker thread instead, which a server wants so
    that its loop keeps accepting connections; one thread also serializes the
    model calls, which neither XGBoost's nor torch's global thread settings
    promise to survive concurrently.

    Args:
        bundle: the loaded models.
        max_batch: most jobs per call.
        offload: run calls in a single worker thread (see above).
        validate: check batches with :func:`validate_batch` first (clear
            messages; about 1 ms per 1000 jobs).

    Examples:
        >>> service = InProcessService(ModelBundle.load("models/vasp"))  # doctest: +SKIP
        >>> (await service.runtime(batch)).values  # doctest: +SKIP
    """

    def __init__(self, bundle: Any, *, max_batch: int = DEFAULT_MAX_BATCH, offload: bool = False,
                 validate: bool = True):
        if not isinstance(max_batch, int) or max_batch < 1:
            raise InputError("max_batch", repr(max_batch), "a positive integer")
        self.bundle = bundle
        self.max_batch = max_batch
        self.offload = offload
        self.validate = validate
        self._categorical = tuple(bundle.spec.categorical)
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def predict(self, kind: str, batch: Mapping[str, Any]) -> tuple[np.ndarray, str]:
        """Synchronous call: validate, then one model call; returns ``(values, version)``.

        Raises:
            BatchRejected: the batch is malformed or the model refused it.
            ModelNotLoaded: ``remaining`` without a remaining-time model.
        """
        bundle = self.bundle
        if kind == "remaining" and bundle.remaining_model is None:
            raise ModelNotLoaded("no remaining-time model is loaded (the models folder has "
                                 "no remaining/)")
        if self.validate:
            try:
                n = validate_batch(batch, kind=kind, feature_names=bundle.feature_names,
                                   categorical=self._categorical, max_batch=self.max_batch)
            except BatchError as exc:
                raise BatchRejected(str(exc), field=exc.field) from exc
        else:
            n = len(batch["job_id"])
        if n == 0:
            return np.zeros(0), bundle.version
        try:
            values, version = getattr(bundle, kind)(batch)
        except (InputError, ValueError) as exc:
            # the model's own checks: a batch it cannot use is the caller's error
            field = getattr(exc, "where", "jobs")
            raise BatchRejected(f"the {kind} model rejected the batch: {exc}",
                                field="jobs" if " " in field else field) from exc
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if len(values) != n:
            raise ServiceError(f"the {kind} model returned {len(values)} values for {n} jobs",
                               reason="bad model")
        return values, version

    def _worker(self) -> ThreadPoolExecutor:
        # One thread: model calls are serialized (see the class docstring).
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="predict")
        return self._executor

    async def _call(self, kind: str, batch: Mapping[str, Any]) -> Prediction:
        if self._closed:
            raise ServiceError("the service is closed", reason="closed")
        t0 = time.perf_counter()
        if self.offload:
            loop = asyncio.get_running_loop()
            values, version = await loop.run_in_executor(self._worker(), self.predict, kind, batch)
        else:
            values, version = self.predict(kind, batch)
        return Prediction(values, version, time.perf_counter() - t0)

    async def health(self) -> dict[str, Any]:
        """Always ok while open: the models are in memory."""
        return {"status": "closed" if self._closed else "ok", "model_version": self.bundle.version}

    async def models(self) -> dict[str, Any]:
        """Versions, loaded models and feature names."""
        return describe_models(self.bundle, self.max_batch)

    async def close(self) -> None:
        """Stop the worker thread, if any."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _json_default(v: Any) -> Any:
    # numpy values from in-process callers; float64 is a float and never gets here
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple | set):
        return list(v)
    raise TypeError(f"cannot send a {type(v).__name__} in a batch")


def encode_batch(batch: Mapping[str, Any]) -> bytes:
    """The request body of a batch: ``{"jobs": batch}`` as UTF-8 JSON.

    Floats are written with Python's shortest round-trip repr, so the server
    parses back the very same doubles (predictions over HTTP are
    bit-identical to in-process ones). Non-finite numbers are written as
    ``NaN``/``Infinity``, which Python's ``json`` (the server's parser) reads.
    """
    return json.dumps({"jobs": batch}, default=_json_default, separators=(",", ":")).encode()


class HttpService(PredictionService):
    """Client of ``python -m predictors serve`` (:mod:`predictors.server`), on aiohttp.

    Args:
        url: the server's base URL (``http://127.0.0.1:8080``).
        timeout_s: wall seconds a call may take, connection included.
        token: bearer token, when the server was started with ``--token``.
        session: an ``aiohttp.ClientSession`` to share (not closed by
            :meth:`close`); by default one is opened on first use.
        breaker: the :class:`CircuitBreaker` guarding every call (default:
            open after 3 failures in a row, probe after 30 s); None for none.

    Raises (from every call):
        CircuitOpen (a ServiceUnavailable: the breaker refused the call at once),
        ServiceTimeout, ServiceUnavailable (no connection, or 503),
        BatchRejected (400/413), ModelNotLoaded (404 on a model endpoint),
        ServiceHTTPError (other statuses), ServiceResponseError.

    Examples:
        >>> async with HttpService("http://127.0.0.1:8080", timeout_s=2.0) as svc:  # doctest: +SKIP
        ...     answer = await svc.runtime(batch)
    """

    def __init__(self, url: str, *, timeout_s: float = 5.0, token: str | None = None,
                 session: Any = None, breaker: CircuitBreaker | None | str = "default"):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InputError("prediction_service.url", repr(url), "an http:// or https:// URL")
        if not (isinstance(timeout_s, int | float) and timeout_s > 0):
            raise InputError("prediction_service.timeout_s", repr(timeout_s), "a number > 0")
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = session
        self._own_session = session is None
        self._closed = False
        self.breaker = CircuitBreaker() if breaker == "default" else breaker

    def _get_session(self) -> Any:
        import aiohttp

        if self._closed:
            raise ServiceError("the service is closed", reason="closed")
        if self._session is None:
            # One session per service: connections are kept alive between decision points.
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self._session

    async def _request(self, method: str, path: str, body: bytes | None = None) -> Any:
        """One call through the circuit breaker (see :class:`CircuitBreaker`)."""
        breaker = self.breaker
        if breaker is None:
            return await self._send(method, path, body)
        breaker.before_call()
        try:
            data = await self._send(method, path, body)
        except (ServiceTimeout, ServiceUnavailable, ServiceResponseError):
            breaker.failure()
            raise
        except ServiceHTTPError as exc:
            # 5xx: the server is in trouble; 401/404...: it answers, so it is alive
            if exc.status >= 500:
                breaker.failure()
            else:
                breaker.success()
            raise
        except ServiceError:
            breaker.success()     # a 400/404 answer: the server is alive
            raise
        except asyncio.CancelledError:
            # the caller's own deadline (the bridge's) ran out first: no answer either
            breaker.failure()
            raise
        breaker.success()
        return data

    async def _send(self, method: str, path: str, body: bytes | None = None) -> Any:
        import aiohttp

        session = self._get_session()
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        url = self.url + path
        try:
            async with session.request(method, url, data=body, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                status = resp.status
                raw = await resp.read()
        except TimeoutError:
            raise ServiceTimeout(f"{method} {url}: no answer within {self.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise ServiceUnavailable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            data = None
        if status == 200:
            if not isinstance(data, dict):
                raise ServiceResponseError(f"{method} {url}: the answer is not a JSON object")
            return data
        message = data.get("error") if isinstance(data, dict) else None
        field = data.get("field") if isinstance(data, dict) else None
        message = f"{method} {url}: HTTP {status}: {message or raw[:200].decode(errors='replace')}"
        if status in (400, 413):
            raise BatchRejected(message, field=field, status=status)
        if status == 503:
            raise ServiceUnavailable(message, status=status)
        if status == 404 and path.startswith("/v1/") and field == "model":
            raise ModelNotLoaded(message, status=status)
        raise ServiceHTTPError(message, status=status, field=field)

    async def _call(self, kind: str, batch: Mapping[str, Any]) -> Prediction:
        t0 = time.perf_counter()
        try:
            body = encode_batch(batch)
        except (TypeError, ValueError) as exc:
            raise BatchRejected(f"the batch cannot be sent as JSON: {exc}", field="jobs") from exc
        data = await self._request("POST", f"/v1/{kind}", body)
        preds, version = data.get("predictions"), data.get("model_version")
        if not isinstance(preds, list) or not isinstance(version, str):
            raise ServiceResponseError(f"/v1/{kind}: expected 'predictions' (a list) and "
                                       f"'model_version' (a string), got keys {sorted(data)}")
        try:
            values = np.asarray(preds, dtype=np.float64)
        except (TypeError, ValueError):
            raise ServiceResponseError(f"/v1/{kind}: predictions are not all numbers") from None
        n = len(batch.get("job_id", ())) if isinstance(batch, Mapping) else -1
        if values.ndim != 1 or len(values) != n or data.get("n", n) != n:
            raise ServiceResponseError(f"/v1/{kind}: {len(preds)} predictions for {n} jobs")
        return Prediction(values, version, time.perf_counter() - t0)

    async def health(self) -> dict[str, Any]:
        """``GET /health``."""
        return await self._request("GET", "/health")

    async def models(self) -> dict[str, Any]:
        """``GET /models``."""
        return await self._request("GET", "/models")

    async def close(self) -> None:
        """Close the session this service opened."""
        self._closed = True
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None


def make_service(backend: str, *, models_dir: str | Path | None = None, bundle: Any = None,
                 url: str | None = None, timeout_s: float = 5.0,
                 token: str | None = None) -> PredictionService:
    """A prediction service by name, as a scenario's ``prediction_service`` section asks.

    Args:
        backend: ``"inprocess"`` (needs ``bundle`` or ``models_dir``) or
            ``"http"`` (needs ``url``).
        models_dir: a folder written by ``python -m predictors train``.
        bundle: an already loaded :class:`predictors.bundle.ModelBundle`.
        url: the server's base URL.
        timeout_s: per-call limit of the HTTP client.
        token: bearer token of the HTTP server.

    Raises:
        InputError: unknown backend or a missing argument (key path
            ``prediction_service.*``), or an unreadable models folder.
    """
    if backend == "inprocess":
        if bundle is None:
            if models_dir is None:
                raise InputError("prediction_service.models_dir", "nothing",
                                 "a models folder (or a loaded bundle) for the in-process backend")
            from predictors.bundle import ModelBundle

            bundle = ModelBundle.load(models_dir)
        return InProcessService(bundle)
    if backend == "http":
        if url is None:
            raise InputError("prediction_service.url", "nothing",
                             "the server URL for the http backend")
        return HttpService(url, timeout_s=timeout_s, token=token)
    raise InputError("prediction_service.backend", repr(backend), "'inprocess' or 'http'")


# ----------------------------------------------------------------------------- example batches


def dataset_batch(data_dir: str | Path, *, kind: str = "runtime", n: int | None = None,
                  fraction: float = 0.5, feature_names: Sequence[str] | None = None
                  ) -> dict[str, Any]:
    """A batch in the bridge's format built from a predictor data set, for tests and benchmarks.

    Takes the first ``n`` jobs (cycling through the set, with ``#k``
    suffixed ids, when ``n`` exceeds it). A remaining batch sees each job at
    ``fraction`` of its true run time: the progress rows finished by then,
    the SCF steps done in the ionic step under way, and ``req_time`` as its
    pre-run prediction.

    Args:
        data_dir: a folder written by :func:`predictors.dataset.generate_dataset`.
        kind: ``"runtime"`` or ``"remaining"``.
        n: number of jobs (default: all).
        fraction: elapsed share of the run time for remaining batches.
        feature_names: feature columns (default: the data set's).
    """
    from predictors.dataset import load_dataset
    from predictors.observation import PROGRESS_COLUMNS, Progress, scf_done_at
    from predictors.runtime import FeatureSpec

    if kind not in KINDS:
        raise InputError("kind", repr(kind), f"one of {list(KINDS)}")
    ds = load_dataset(data_dir)
    names = list(feature_names) if feature_names is not None else list(
        FeatureSpec.from_dict(ds.meta).names)
    total = ds.n_jobs
    n = total if n is None else int(n)
    rows = np.arange(n) % total
    cols = ds.job_columns()
    ids = [str(cols["job_id"][r]) if i < total else f"{cols['job_id'][r]}#{i // total}"
           for i, r in enumerate(rows)]
    batch: dict[str, Any] = {"job_id": ids, "user": cols["user"][rows].tolist(),
                             "req_time": cols["req_time"][rows].tolist()}
    for name in names:
        values = cols[name][rows]
        batch[name] = ([None if v != v else v for v in values.tolist()]   # NaN: unknown, null
                       if values.dtype.kind == "f" else values.tolist())
    if kind == "remaining":
        full = Progress.from_table(ds.progress, cols["job_id"])
        elapsed = cols["runtime"][rows] * fraction
        seen = full.take(rows).prefix(elapsed)
        k = len(PROGRESS_COLUMNS)
        batch["elapsed"] = elapsed.tolist()
        batch["scf_done"] = scf_done_at(full, elapsed, job=rows).tolist()
        batch["prerun"] = np.nan_to_num(cols["req_time"][rows], nan=3600.0).tolist()
        batch["progress"] = [seen.values[seen.offsets[i]:seen.offsets[i + 1]].reshape(-1, k).tolist()
                             for i in range(n)]
    return batch
