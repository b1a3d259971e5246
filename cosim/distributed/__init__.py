"""Ray, the optional distributed engine: import it on demand, start or join a cluster.

Sweeps (:mod:`cosim.studies`) and Ray-backed vector environments
(:class:`cosim.vector.RayVectorEnv`) run on Ray. Ray is an optional extra
(``pip install -e ".[ray]"``); nothing imports it until one of them is
used, so ``import cosim`` stays light.

``address`` follows ``ray.init``: None (or ``"local"``) starts a private
local Ray for this process, sized by ``num_cpus``, even when a Ray head
already runs on the machine or a stale session file is left from one (join
that head with ``"auto"``); ``"auto"`` joins the cluster
started on this machine with ``ray start --head``; ``"HOST:PORT"`` joins a
remote head node. Code and input files must then be reachable on every
node (an installed ``hpc-cosim`` and a shared file system, or a Ray
runtime environment).

A private local Ray goes with the process that started it: on Linux a small
watchdog (:mod:`cosim.distributed.watchdog`) ends every process of that Ray when
the driver dies, even by kill -9, which Ray alone does not (its agents stay).

Examples:
    >>> session = ray_session(num_cpus=2)            # doctest: +SKIP
    >>> session.cpus, session.started                # doctest: +SKIP
    (2, True)
    >>> session.close()                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cosim.errors import InputError

__all__ = ["require_ray", "ray_session", "RaySession", "LOCAL"]

#: The ``address`` that starts a Ray inside this process (as None does).
LOCAL = "local"


def require_ray(what: str = "this command") -> Any:
    """Import and return the ``ray`` module, or raise a one-line :class:`InputError`."""
    try:
        import ray
    except ImportError:
        raise InputError("ray", "Ray is not installed",
                         f"Ray for {what} (pip install -e \".[ray]\")") from None
    return ray


@dataclass
class RaySession:
    """A connection to Ray that knows whether it started Ray itself.

    Attributes:
        ray: the ``ray`` module.
        started: this session initialized Ray (started a local Ray, or connected
            to a cluster); :meth:`close` undoes that.
        cpus: CPUs of the cluster (all nodes).
        address: what was asked for (None: a local Ray).
        watchdog: the watchdog of a private local Ray this session started
            (None otherwise, and off Linux); :meth:`close` lets it go.
    """

    ray: Any
    started: bool
    cpus: int
    address: str | None
    watchdog: _Watchdog | None = None

    def close(self) -> None:
        """Stop the local Ray (or disconnect) if this session started it; else nothing."""
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
            self.started = False
        if self.watchdog is not None:
            self.watchdog.release()
            self.watchdog = None


def ray_session(address: str | None = None, *, num_cpus: int | None = None,
                what: str = "this command", runtime_env: dict[str, Any] | None = None
                ) -> RaySession:
    """Connect to Ray: reuse an initialized Ray, else start a local one or join a cluster.

    Args:
        address: None or ``"local"`` (a local Ray in this process), ``"auto"`` or
            ``"HOST:PORT"`` (join a running cluster).
        num_cpus: CPUs of a local Ray (default: the machine's); ignored when joining.
        what: names the feature in the error when Ray is missing.
        runtime_env: Ray's runtime environment of this job (``env_vars``,
            ``working_dir``, ``py_modules``, ...) when this call initializes Ray.

    Raises:
        InputError: Ray is not installed, ``num_cpus`` is not positive, or no
            cluster answers at ``address``.
    """
    ray = require_ray(what)
    if num_cpus is not None and num_cpus < 1:
        raise InputError("--workers", str(num_cpus), "a positive number of CPUs")
    local = address in (None, "", LOCAL)
    started = False
    if not ray.is_initialized():
        if not local and address != "auto":
            _check_reachable(address)
        # Ray logs its start-up (and that it made an authentication token) at
        # INFO and WARNING level; keep the terminal for our progress and errors.
        kwargs: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False,
                                  "include_dashboard": False}
        if runtime_env:
            kwargs["runtime_env"] = runtime_env
        watchdog = None
        if local:
            # "local" makes Ray start a private instance. Without an address it
            # would join a head started on this machine (or follow a stale
            # session file left by one) and then refuse num_cpus.
            kwargs["address"] = LOCAL
            kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
            watchdog = _Watchdog.start()
        else:
            kwargs["address"] = address
        try:
            with _ctrl_c_deferred() as interrupted, _marked(watchdog):
                ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            if watchdog is not None:
                watchdog.release()
            if local:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError("--address", f"{address!r} ({first})",
                             "a running Ray cluster ('auto' or HOST:PORT of its head node)") from None
        started = True
        if watchdog is not None:
            watchdog.follow(ray)
        if interrupted:
            ray.shutdown()
            if watchdog is not None:
                watchdog.release()
            raise KeyboardInterrupt
    else:
        watchdog = None
    cpus = int(ray.cluster_resources().get("CPU", 0)) or 1
    return RaySession(ray=ray, started=started, cpus=cpus, address=None if local else address,
                      watchdog=watchdog)


class _Watchdog:
    """The driver's end of :mod:`cosim.distributed.watchdog`: a pipe only this process writes to.

    The watchdog reads the pipe; end-of-file (this process died, or
    :meth:`release`) makes it kill every process of that Ray: those marked
    with :attr:`token`, and those using its session folder (:meth:`follow`).
    """

    def __init__(self, token: str, pipe: int, proc: subprocess.Popen) -> None:
        self.token, self._pipe, self._proc = token, pipe, proc

    @classmethod
    def start(cls) -> _Watchdog | None:
        """Start the watchdog, or return None where it cannot work (no ``/proc``)."""
        if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"):
            return None
        token = f"{os.getpid()}-{uuid.uuid4().hex}"
        # Not inherited by what the driver execs later; a fork() child keeps the
        # write end, so the watchdog then waits for it too (it is the driver's).
        read, write = os.pipe()
        try:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")
            # Its own session: a Ctrl-C or hang-up of the terminal reaches the
            # driver, whose death the watchdog then sees, and not the watchdog.
            proc = subprocess.Popen([sys.executable, "-I", script, token, str(os.getpid())],
                                    stdin=read,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError:
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(token, write, proc)

    def follow(self, ray: Any) -> None:
        """Tell the watchdog the session folder of the Ray just started: its processes
        that set their title lose the environment mark, not their log files there."""
        try:
            folder = ray._private.worker._global_node.get_session_dir_path()
        except AttributeError:   # another Ray version: the environment mark alone
            return
        os.write(self._pipe, os.path.realpath(folder).encode() + b"\n")

    def release(self) -> None:
        """Close the pipe: the watchdog sweeps what is left of this Ray and exits."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            # Reap it (no zombie) if it ends soon; it ends on its own anyway.
            self._proc.wait(timeout=5)


@contextlib.contextmanager
def _marked(watchdog: _Watchdog | None) -> Iterator[None]:
    """Put the watchdog's mark in the environment that Ray's processes inherit."""
    if watchdog is None:
        yield
        return
    from cosim.distributed.watchdog import MARK

    saved = os.environ.get(MARK)
    os.environ[MARK] = watchdog.token
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(MARK, None)
        else:
            os.environ[MARK] = saved


def _check_reachable(address: str) -> None:
    """Fail fast on a HOST:PORT nobody listens on (Ray itself retries for minutes)."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise InputError("--address", repr(address), "auto or HOST:PORT of a Ray head node")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise InputError("--address", f"{address!r} ({exc.strerror or exc})",
                         "a running Ray cluster ('auto' or HOST:PORT of its head node)") from None


@contextlib.contextmanager
def _ctrl_c_deferred() -> Iterator[list[bool]]:
    """Hold Ctrl-C back while Ray starts (a start cut short crashes Ray's teardown);
    the caller sees ``[True]`` if it came, and stops Ray cleanly."""
    came: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    previous = signal.signal(signal.SIGINT, lambda *_: came.append(True))
    try:
        yield came
    finally:
        signal.signal(signal.SIGINT, previous)
