"""HTTP prediction server: ``python -m predictors serve --models DIR``.

An aiohttp application that answers the simulation's prediction batches
with the models of one models folder. JSON over HTTP/1.1:

``POST /v1/runtime`` and ``POST /v1/remaining``
    Request ``{"jobs": {column: [value per job], ...}}`` (the columns of
    :mod:`cosim.prediction_hub`; ``GET /models`` lists the required ones).
    Answer ``{"predictions": [seconds per job], "model_version": "...", "n": N}``.
``GET /health``
    ``{"status": "ok", "model_version": "...", "in_flight": k, "served": n, "uptime_s": s}``.
``GET /models``
    :func:`predictors.service.describe_models` plus the server limits.

Errors are JSON too, ``{"error": "message", "field": "jobs.ENCUT"}`` with
``field`` the key path of the bad part (``"body"`` for the body as a
whole, null when no field is to blame):

- 400: invalid JSON, wrong shape, a missing column, unequal lengths, a wrong
  type, too many jobs, a number no float can hold (an integer of 400
  digits), JSON nested deeper than the parser goes, a batch the model
  refuses, or a body that cannot be decompressed (bad ``Content-Encoding``
  data; the connection is closed after that answer);
- 401: a missing or wrong ``Authorization: Bearer TOKEN`` (every endpoint,
  when the server has a token);
- 404: unknown path, or ``/v1/remaining`` without a remaining-time model
  (``field`` is ``"model"``);
- 408: the body did not arrive within ``--body-timeout`` seconds (the
  connection is closed after the answer);
- 413: a body over ``--max-body-mb`` (checked on ``Content-Length`` before
  reading, and while reading);
- 503: more than ``--max-concurrency`` requests in progress for longer than
  the queue timeout (``Retry-After: 1``);
- 500: a bug, logged with its traceback on the server, a short message in
  the answer.

A client that gives up (closes the connection while its body is still
arriving or while its batch is being predicted) costs one ``client gone``
line in the log, never a traceback; a malformed request (bad request line or
headers), which aiohttp answers with a plain-text 400, costs one line too. A connection
without a complete request line and headers ``header_timeout_s`` after it
connected or got its last answer is closed.

Concurrency: a request's body is read first, outside the limit and within
``body_timeout_s``, so clients that send their body slowly (or never) cannot
hold the slots that answer the others; then at most ``max_concurrency``
prediction requests are parsed and answered at a time (an
:class:`asyncio.Semaphore`); the others wait for a slot, up to
``queue_timeout_s``, then get 503. Parsing, checks,
the model call and the answer's JSON run in one worker thread, so the event
loop stays free to accept connections and answer ``/health`` while a big
batch is being predicted, and model calls never overlap.

On SIGTERM or SIGINT the server stops listening, lets the requests in
progress finish (up to ``shutdown_timeout_s``), and exits with code 0. It
binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError

from cosim.errors import InputError
from predictors.batches import DEFAULT_MAX_BATCH, BatchError, parse_request
from predictors.service import BatchRejected, InProcessService, ModelNotLoaded, describe_models

__all__ = ["make_app", "start_server", "serve", "RunningServer", "ServerProcess",
           "DEFAULT_MAX_BODY_MB", "DEFAULT_MAX_CONCURRENCY", "DEFAULT_QUEUE_TIMEOUT_S",
           "DEFAULT_BODY_TIMEOUT_S", "DEFAULT_HEADER_TIMEOUT_S", "MAX_BODY_MB_LIMIT"]

logger = logging.getLogger("predictors.server")

#: Default body limit: a 10,000-job remaining-time batch is about 10 MB of JSON.
DEFAULT_MAX_BODY_MB = 64.0
#: Default number of prediction requests in progress at once.
DEFAULT_MAX_CONCURRENCY = 8
#: Default wait for a slot before answering 503.
DEFAULT_QUEUE_TIMEOUT_S = 5.0
#: Default time a client has to send its whole request body (a 64 MB body
#: takes well under a second over any link a prediction service runs on).
DEFAULT_BODY_TIMEOUT_S = 10.0
#: Default time a connection may sit without a complete request line and
#: headers (after connecting, or after its previous answer) before it is closed.
#: Longer than aiohttp's client pool keeps an idle connection (15 s), so the
#: server never closes a pooled connection the client is about to reuse.
DEFAULT_HEADER_TIMEOUT_S = 20.0
#: Largest allowed --max-body-mb: far above any real batch, and well inside int range.
MAX_BODY_MB_LIMIT = 1024.0


@dataclass
class _State:
    service: InProcessService
    token: str | None
    max_body_bytes: int
    max_concurrency: int
    queue_timeout_s: float
    slots: asyncio.Semaphore
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    started: float = field(default_factory=time.monotonic)
    in_flight: int = 0      # prediction requests holding a slot
    served: int = 0
    active: int = 0         # requests inside a handler, any endpoint
    stopping: bool = False
    idle: asyncio.Event = field(default_factory=asyncio.Event)


_STATE = web.AppKey("state", _State)


def _error(status: int, message: str, field: str | None = None,
           headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message, "field": field}, status=status, headers=headers)


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MB"


async def _send_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response`` now and close the connection.

    For a body that cannot be read to its end: aiohttp would otherwise keep
    reading the rest of it after the answer (its "lingering close"), for 10 s
    more, or, on a broken body, fail again there and log a second traceback.
    """
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()
    return response


class _ConnectionLog(logging.LoggerAdapter):
    """aiohttp's per-connection logger, minus the traceback for a malformed request.

    aiohttp answers a malformed request (bad request line, bad Content-Length,
    ...) with 400 itself and logs it with a full traceback at ERROR, so any
    client could flood the log; such a request is the client's fault, so one
    INFO line.
    """

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            lines = str(exc_info.message).splitlines() or [""]
            # args[0] is the client address in aiohttp's "Error handling request from %s"
            self.info("malformed HTTP request from %s answered 400: %s",
                      args[0] if args else "?", lines[0][:200])
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)


@web.middleware
async def _track(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Count requests in handlers; while stopping, close each connection after its answer."""
    state = request.app[_STATE]
    state.active += 1
    state.idle.clear()
    try:
        response = await handler(request)
        if state.stopping:
            response.force_close()
        return response
    finally:
        state.active -= 1
        if state.active == 0:
            state.idle.set()


@web.middleware
async def _errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Every failure becomes a JSON error; a bug is logged, never shown as a traceback."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[_STATE].max_body_bytes
        return _error(413, f"request body over the limit of {_mb(limit)} (--max-body-mb)", "body")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, f"{exc.reason}: {request.method} {request.path}",
                      headers={k: v for k, v in exc.headers.items() if k == "Allow"})
    except BatchError as exc:
        return _error(400, str(exc), exc.field)
    except BatchRejected as exc:
        return _error(400, str(exc), exc.field)
    except ModelNotLoaded as exc:
        return _error(404, str(exc), "model")
    except asyncio.CancelledError:
        raise
    except ConnectionError as exc:
        # The client gave up (closed the connection mid-request): nothing to
        # answer and nothing wrong with the server, so one line, no traceback.
        logger.info("client gone during %s %s (%s)", request.method, request.path,
                    type(exc).__name__)
        return web.Response(status=499)
    except Exception as exc:
        logger.exception("error answering %s %s", request.method, request.path)
        return _error(500, f"internal error ({type(exc).__name__}); see the server log")


@web.middleware
async def _auth(request: web.Request, handler: Callable) -> web.StreamResponse:
    """Bearer token on every endpoint, checked before the body is read."""
    token = request.app[_STATE].token
    if token is not None:
        given = request.headers.get("Authorization")
        if given is None:
            return _error(401, "missing bearer token (send 'Authorization: Bearer TOKEN')",
                          "headers.Authorization", {"WWW-Authenticate": "Bearer"})
        # aiohttp decodes header bytes as UTF-8 with surrogateescape: encode the
        # same way to compare the very bytes sent (any bytes, never an error)
        expected = f"Bearer {token}".encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected):
            return _error(401, "wrong bearer token", "headers.Authorization",
                          {"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return await handler(request)


def _answer(service: InProcessService, kind: str, body: bytes) -> bytes:
    """Parse, check, predict, and encode the answer (runs in the worker thread)."""
    jobs = parse_request(body)
    values, version = service.predict(kind, jobs)
    # float repr round-trips exactly, so clients get the very doubles the model produced
    return json.dumps({"predictions": values.tolist(), "model_version": version,
                       "n": len(values)}, separators=(",", ":")).encode()


def _predict_handler(kind: str) -> Callable:
    async def handle(request: web.Request) -> web.Response:
        state = request.app[_STATE]
        length = request.content_length
        if length is not None and length > state.max_body_bytes:
            raise web.HTTPRequestEntityTooLarge(max_size=state.max_body_bytes,
                                                actual_size=length)
        # The body is read before taking a slot: a client trickling its body
        # holds a connection, never one of the slots that answer the others.
        try:
            async with asyncio.timeout(state.body_timeout_s):
                body = await request.read()
        except TimeoutError:
            return await _send_and_close(request, _error(
                408, f"request body not received within {state.body_timeout_s:g} s "
                "(--body-timeout)", "body"))
        except web.RequestPayloadError as exc:
            # the body arrived but cannot be decoded: the client's fault, so 400
            if isinstance(exc.__cause__, ContentEncodingError):
                encoding = request.headers.get("Content-Encoding", "")[:40]
                message = f"request body could not be decompressed (Content-Encoding: {encoding})"
            else:
                cause = exc.__cause__ if isinstance(exc.__cause__, HttpProcessingError) else exc
                detail = str(getattr(cause, "message", cause)).splitlines() or [""]
                message = f"malformed request body ({detail[0][:200]})"
            return await _send_and_close(request, _error(400, message, "body"))
        try:
            async with asyncio.timeout(state.queue_timeout_s):
                await state.slots.acquire()
        except TimeoutError:
            return _error(503, f"server busy: {state.max_concurrency} requests in progress for "
                          f"{state.queue_timeout_s:g} s; retry later", None, {"Retry-After": "1"})
        state.in_flight += 1
        try:
            loop = asyncio.get_running_loop()
            executor = state.service._worker()
            payload = await loop.run_in_executor(executor, _answer, state.service, kind, body)
        finally:
            state.in_flight -= 1
            state.slots.release()
        state.served += 1
        return web.Response(body=payload, content_type="application/json")

    handle.__name__ = f"post_{kind}"
    handle.__doc__ = f"POST /v1/{kind}: predictions for a batch of jobs."
    return handle


async def _health(request: web.Request) -> web.Response:
    """GET /health."""
    state = request.app[_STATE]
    # 503 while stopping, so a balancer stops sending before the port closes for good
    return web.json_response({"status": "stopping" if state.stopping else "ok",
                              "model_version": state.service.bundle.version,
                              "in_flight": state.in_flight, "served": state.served,
                              "uptime_s": round(time.monotonic() - state.started, 3)},
                             status=503 if state.stopping else 200)


async def _models(request: web.Request) -> web.Response:
    """GET /models."""
    state = request.app[_STATE]
    info = describe_models(state.service.bundle, state.service.max_batch)
    info["limits"] = {"max_body_bytes": state.max_body_bytes,
                      "max_concurrency": state.max_concurrency,
                      "queue_timeout_s": state.queue_timeout_s,
                      "body_timeout_s": state.body_timeout_s,
                      "header_timeout_s": state.header_timeout_s}
    return web.json_response(info)


def make_app(bundle: Any, *, token: str | None = None,
             max_body_mb: float = DEFAULT_MAX_BODY_MB,
             max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
             queue_timeout_s: float = DEFAULT_QUEUE_TIMEOUT_S,
             max_batch: int = DEFAULT_MAX_BATCH,
             body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
             header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S) -> web.Application:
    """The aiohttp application serving ``bundle`` (see the module docstring for the contract).

    Args:
        bundle: a loaded :class:`predictors.bundle.ModelBundle`.
        token: bearer token required on every endpoint, or None.
        max_body_mb: largest request body (MiB, at most 1024); bigger ones get 413.
        max_concurrency: prediction requests in progress at once.
        queue_timeout_s: how long an excess request waits for a slot before 503.
        max_batch: most jobs per batch (more: 400).
        body_timeout_s: how long a client may take to send its body before 408.
        header_timeout_s: how long a connection may go without a complete request
            line and headers before it is closed (slow or silent clients).

    Raises:
        InputError: a limit is not positive, or ``max_body_mb`` is over 1024.
    """
    # bounded, so the byte count below is an int (1e308 MiB is an infinite float)
    if not (isinstance(max_body_mb, int | float) and 0 < max_body_mb <= MAX_BODY_MB_LIMIT):
        raise InputError("--max-body-mb", repr(max_body_mb),
                         f"a number > 0 and <= {MAX_BODY_MB_LIMIT:g}")
    if not (isinstance(max_concurrency, int) and max_concurrency >= 1):
        raise InputError("--max-concurrency", repr(max_concurrency), "an integer >= 1")
    if not (isinstance(queue_timeout_s, int | float) and queue_timeout_s > 0):
        raise InputError("--queue-timeout", repr(queue_timeout_s), "a number > 0")
    if not (isinstance(body_timeout_s, int | float) and 0 < body_timeout_s < float("inf")):
        raise InputError("--body-timeout", repr(body_timeout_s), "a finite number > 0")
    if not (isinstance(header_timeout_s, int | float) and 0 < header_timeout_s < float("inf")):
        raise InputError("header_timeout_s", repr(header_timeout_s), "a finite number > 0")
    if token is not None and not token:
        raise InputError("--token", "an empty string", "a non-empty token")
    max_body = max(1, int(max_body_mb * 2**20))
    # Our own limit check answers JSON; aiohttp's is the safety net while reading.
    app = web.Application(client_max_size=max_body, middlewares=[_track, _errors, _auth])
    service = InProcessService(bundle, max_batch=max_batch, offload=True)
    app[_STATE] = _State(service, token, max_body, max_concurrency, float(queue_timeout_s),
                         asyncio.Semaphore(max_concurrency), float(body_timeout_s),
                         float(header_timeout_s))
    app.router.add_post("/v1/runtime", _predict_handler("runtime"))
    app.router.add_post("/v1/remaining", _predict_handler("remaining"))
    app.router.add_get("/health", _health)
    app.router.add_get("/models", _models)

    async def close_service(app: web.Application) -> None:
        await app[_STATE].service.close()

    app.on_cleanup.append(close_service)
    return app


@dataclass
class RunningServer:
    """A started server: its URL, and :meth:`close` for a graceful stop."""

    runner: web.AppRunner
    host: str
    port: int
    shutdown_timeout_s: float = 30.0

    @property
    def url(self) -> str:
        """Base URL of the server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def state(self) -> _State:
        return self.runner.app[_STATE]

    async def close(self) -> None:
        """Stop listening, finish the requests in progress, release the models' thread.

        aiohttp's own shutdown stops reading from every connection at once,
        which would strand a request whose body is still arriving until the
        timeout. So the server first drains: it closes the listening socket,
        keeps reading and answering on open connections (closing each after
        its answer) until no request is left in a handler, and only then lets
        aiohttp close the idle connections.
        """
        state = self.state
        if not state.stopping:
            state.stopping = True
            for site in list(self.runner.sites):
                await site.stop()
            if state.active:
                try:
                    await asyncio.wait_for(state.idle.wait(), self.shutdown_timeout_s)
                except TimeoutError:
                    logger.warning("%d request(s) still running after %g s; cancelling them",
                                   state.active, self.shutdown_timeout_s)
        await self.runner.cleanup()


async def start_server(bundle: Any, *, host: str = "127.0.0.1", port: int = 0,
                       shutdown_timeout_s: float = 30.0, **options: Any) -> RunningServer:
    """Start serving ``bundle`` in the running event loop (``port=0``: any free port).

    Args:
        bundle: a loaded :class:`predictors.bundle.ModelBundle`.
        host: address to bind (loopback by default).
        port: TCP port, 0 for a free one (read it from the result).
        shutdown_timeout_s: how long :meth:`RunningServer.close` waits for requests in progress.
        **options: :func:`make_app` limits (``token``, ``max_body_mb``, ...).

    Raises:
        InputError: the address cannot be bound (in use, not local, no permission).
    """
    app = make_app(bundle, **options)
    # the drain in RunningServer.close does the waiting; aiohttp's own wait only
    # covers a request that slips in on an idle connection as it closes
    # keepalive_timeout: aiohttp closes a connection still waiting for a complete
    # request this long after connecting or after its last answer (a slowloris)
    runner = web.AppRunner(app, access_log=None, handle_signals=False,
                           shutdown_timeout=min(shutdown_timeout_s, 5.0),
                           keepalive_timeout=app[_STATE].header_timeout_s,
                           logger=_ConnectionLog(logging.getLogger("aiohttp.server"), {}))
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise InputError("--host/--port", f"{host}:{port} ({exc.strerror or exc})",
                         "an address this machine can listen on and a free port") from None
    bound = runner.addresses[0]
    return RunningServer(runner, host, int(bound[1]), shutdown_timeout_s)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(models_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8080,
          token: str | None = None, max_body_mb: float = DEFAULT_MAX_BODY_MB,
          max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
          queue_timeout_s: float = DEFAULT_QUEUE_TIMEOUT_S,
          body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
          header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
          shutdown_timeout_s: float = 30.0, echo: Callable[[str], Any] = print) -> int:
    """Load ``models_dir`` and serve it until SIGTERM or SIGINT; returns 0 after a clean stop.

    Prints ``serving on http://HOST:PORT`` (with the real port when
    ``port=0``) once the server accepts connections.

    Raises:
        InputError: the models folder cannot be loaded, a limit is invalid,
            or the address cannot be bound.
    """
    from predictors.bundle import ModelBundle

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    bundle = ModelBundle.load(models_dir)
    if not _is_loopback(host) and token is None:
        print(f"warning: serving on {host} without --token: anyone who can reach this "
              "address can use the models", file=sys.stderr)

    async def main() -> None:
        server = await start_server(bundle, host=host, port=port, token=token,
                                    max_body_mb=max_body_mb, max_concurrency=max_concurrency,
                                    queue_timeout_s=queue_timeout_s,
                                    body_timeout_s=body_timeout_s,
                                    header_timeout_s=header_timeout_s,
                                    shutdown_timeout_s=shutdown_timeout_s)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        echo(f"serving on {server.url}")
        sys.stdout.flush()
        try:
            await stop.wait()
        finally:
            state = server.state
            logger.info("stopping: finishing %d request(s) in progress", state.active)
            await server.close()
            logger.info("stopped after %d answered request(s)", state.served)

    asyncio.run(main())
    return 0


class ServerProcess:
    """``python -m predictors serve`` in a child process, for tests, benchmarks and scripts.

    Starts the server on a free loopback port and waits for its ``serving
    on`` line; :meth:`stop` sends SIGTERM and returns the exit code. Usable
    as a context manager (stops on exit).

    Args:
        models_dir: the models folder to serve.
        *args: more ``serve`` options (``"--token", "T"``, ``"--max-body-mb", "1"``).
        host: address to bind.
        startup_timeout_s: how long to wait for the ready line.

    Raises:
        RuntimeError: the server exited or stayed silent before it was ready
            (the message carries its stderr).

    Examples:
        >>> with ServerProcess("models/vasp", "--token", "T") as server:  # doctest: +SKIP
        ...     print(server.url)
    """

    def __init__(self, models_dir: str | Path, *args: str, host: str = "127.0.0.1",
                 startup_timeout_s: float = 60.0):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        cmd = [sys.executable, "-m", "predictors", "serve", "--models", str(models_dir),
               "--host", host, "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.url = ""
        deadline = time.monotonic() + startup_timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("serving on "):
                    self.url = line.split()[-1]
                    return
                if not line and self.proc.poll() is not None:
                    break
            elif self.proc.poll() is not None:
                break
        self.stop(timeout_s=5.0)
        raise RuntimeError(f"prediction server did not start: {self.stderr()[-2000:]}")

    def stderr(self) -> str:
        """What the server wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        """Send ``sig`` (a graceful stop by default) and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self._stderr.close()
