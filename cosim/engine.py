"""The one engine for many simulations: a function mapped over tasks, here, in worker
processes, or on Ray.

Every command that runs many simulations goes through :class:`Engine`: the
evaluation protocol's windows (:class:`cosim.evaluation.Evaluator`) on local
worker processes, a study's runs (:mod:`cosim.studies`) in this process or on
Ray. What it guarantees, whichever way it runs:

- **Workers end with the process that started them**, even one killed by
  SIGKILL: each local worker watches its parent (:func:`_watch_parent`) and
  exits when it is gone, where a worker blocked on the pool's queue would
  otherwise wait for work forever (an interrupted tune left four 130 MB
  workers running for minutes). A private local Ray is ended by
  :mod:`cosim.distributed`'s watchdog.
- **Bounded workers**: :func:`check_processes` refuses more than
  :data:`PROCESSES_PER_CPU` per CPU, in one line, before any worker starts.
- **Deterministic order**: :meth:`Engine.map` returns results in the order of
  its tasks, however many workers ran them; :meth:`Engine.stream` yields them as
  they finish, each beside its task, for callers that record each result on its own.
- **Errors as one line**: a worker that dies (memory, a signal) is an
  :class:`EngineError` (a :class:`cosim.errors.CosimError`, printed as one line
  by the CLIs) from :meth:`Engine.map`, and a :class:`Lost` result beside its
  task from :meth:`Engine.stream`, never a traceback.

A task function takes ``(state, task)``: ``state`` is what every task shares
(shipped once to each worker, not with every task), and the function must be
defined at module level so that workers can import it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from cosim.errors import CosimError, InputError

__all__ = ["Engine", "EngineError", "Lost", "run_each", "default_processes", "max_processes",
           "check_processes", "one_line", "PROCESSES_PER_CPU", "PARENT_POLL_S"]

#: Worker processes at most this many per CPU: more only share the CPUs (and each worker
#: holds its copy of the shared state), while 100,000 would exhaust memory before any work.
PROCESSES_PER_CPU = 4

#: Seconds between a worker's checks that the process that started it is alive.
PARENT_POLL_S = 0.5


class EngineError(CosimError):
    """A worker process died before it returned its result (memory, a signal)."""


@dataclass(frozen=True)
class Lost:
    """What :meth:`Engine.stream` yields for a task whose worker died: the reason in one line."""

    error: str


def default_processes() -> int:
    """Worker processes to use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def max_processes() -> int:
    """The most worker processes: :data:`PROCESSES_PER_CPU` per CPU of the machine."""
    return PROCESSES_PER_CPU * (os.cpu_count() or 1)


def check_processes(value: int | None, where: str = "--processes") -> int | None:
    """``value`` if it is a number of workers the engine runs (None: the default).

    Raises:
        InputError: below 1, or above :func:`max_processes`.
    """
    if value is None:
        return None
    if value < 1:
        raise InputError(where, repr(value), "at least 1 (or leave it out: every CPU available)")
    if value > max_processes():
        raise InputError(where, repr(value),
                         f"at most {max_processes()} ({PROCESSES_PER_CPU} per CPU; each worker "
                         "holds the windows and a simulation)")
    return value


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``: an error as the engine reports it."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# -- local workers -----------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def _parent_alive(parent: int, first_ppid: int) -> bool:
    if os.getppid() != first_ppid:   # orphaned: adopted by init or a subreaper
        return False
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _watch_parent(parent: int, first_ppid: int) -> None:
    while _parent_alive(parent, first_ppid):
        time.sleep(PARENT_POLL_S)
    os._exit(1)   # the parent is gone (kill -9 runs no cleanup): end, as it cannot


def _init_worker(parent: int, state: Any) -> None:
    threading.Thread(target=_watch_parent, args=(parent, os.getppid()), daemon=True,
                     name="watch-parent").start()
    _STATE["state"] = state


def _call(job: tuple[Callable[[Any, Any], Any], Any]) -> Any:
    fn, task = job
    return fn(_STATE["state"], task)


class Engine:
    """Maps a task function over tasks: in this process, in worker processes, or on Ray.

    Args:
        state: what every task shares, given to the task function first (shipped to
            each worker once).
        processes: local worker processes; 1 runs every task in this process.
        ray: a :class:`cosim.distributed.RaySession`: each task one Ray task
            (:meth:`stream` only), ``workers`` at once.
        workers: Ray tasks at once (default: the session's CPUs).

    Use as a context manager (or call :meth:`close`) to end the workers.
    """

    def __init__(self, state: Any = None, processes: int = 1, *, ray: Any = None,
                 workers: int | None = None):
        self.state = state
        self.processes = max(1, int(processes))
        self.ray = ray
        self.workers = workers or (ray.cpus if ray is not None else self.processes)
        self._pool: ProcessPoolExecutor | None = None
        if ray is None and self.processes > 1:
            self._pool = ProcessPoolExecutor(self.processes, initializer=_init_worker,
                                             initargs=(os.getpid(), state))

    def map(self, fn: Callable[[Any, Any], Any], tasks: Iterable[Any]) -> list[Any]:
        """``fn(state, task)`` of each task, in the order of ``tasks``.

        Raises:
            EngineError: a worker process died.
        """
        tasks = list(tasks)
        if self.ray is not None:
            return [self._lost_raises(result) for _, result in
                    sorted(self._indexed_stream(fn, tasks), key=lambda pair: pair[0])]
        if self._pool is None:
            return [fn(self.state, task) for task in tasks]
        chunk = max(1, len(tasks) // (4 * self.processes))
        try:
            return list(self._pool.map(_call, [(fn, t) for t in tasks], chunksize=chunk))
        except BrokenProcessPool as exc:
            self.close()
            raise EngineError(f"a worker process died ({one_line(exc)}); "
                              "fewer --processes need less memory") from None

    @staticmethod
    def _lost_raises(result: Any) -> Any:
        if isinstance(result, Lost):
            raise EngineError(f"a Ray worker died ({result.error})")
        return result

    def stream(self, fn: Callable[[Any, Any], Any], tasks: Sequence[Any], *,
               before: Callable[[Any], None] | None = None,
               running: Callable[[int], None] | None = None) -> Iterator[tuple[Any, Any]]:
        """``(task, fn(state, task))`` as each task finishes; a task whose worker died
        gives :class:`Lost`.

        Args:
            before: called with each task just before it is handed out (a run's
                folder made ready), in the order of ``tasks``.
            running: told how many tasks run now, whenever that changes.
        """
        for k, result in self._indexed_stream(fn, list(tasks), before, running):
            yield tasks[k], result

    def _indexed_stream(self, fn, tasks, before=None, running=None
                        ) -> Iterator[tuple[int, Any]]:
        say = running or (lambda _n: None)
        if self.ray is not None:
            yield from self._on_ray(fn, tasks, before, say)
            return
        yield from enumerate(self._local(fn, tasks, before, say))
        say(0)

    def _local(self, fn, tasks, before, say) -> Iterator[Any]:
        if self._pool is None:
            for task in tasks:
                if before is not None:
                    before(task)
                say(1)
                yield fn(self.state, task)
            return
        for task in tasks:
            if before is not None:
                before(task)
        say(min(self.processes, len(tasks)))
        try:
            yield from self._pool.map(_call, [(fn, t) for t in tasks])
        except BrokenProcessPool as exc:
            self.close()
            raise EngineError(f"a worker process died ({one_line(exc)})") from None

    def _on_ray(self, fn, tasks, before, say) -> Iterator[tuple[int, Any]]:
        """Each task one Ray task; ``workers`` run at once and as many wait in Ray's queue,
        so that a worker finds its next task there while this process records the last."""
        ray = self.ray.ray
        remote = ray.remote(num_cpus=1, max_retries=1)(fn)
        todo = list(reversed(range(len(tasks))))
        inflight: dict[Any, int] = {}
        try:
            while todo or inflight:
                while todo and len(inflight) < 2 * self.workers:
                    k = todo.pop()
                    if before is not None:
                        before(tasks[k])
                    inflight[remote.remote(self.state, tasks[k])] = k
                say(min(self.workers, len(inflight)))
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    k = inflight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as exc:   # the worker died (memory, a signal)
                        result = Lost(one_line(exc))
                    say(min(self.workers, len(inflight)))
                    yield k, result
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """End the worker processes (a Ray session is its owner's to close)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _apply(fn: Callable[[Any], Any], task: Any) -> Any:
    return fn(task)


def run_each(fn: Callable[[Any], Any], tasks: Iterable[Any], processes: int = 1) -> list[Any]:
    """``fn(task)`` of each task, in their order, on ``processes`` workers of an
    :class:`Engine` (1: in this process); ``fn`` defined at module level."""
    with Engine(fn, processes) as engine:
        return engine.map(_apply, tasks)
