"""A Gymnasium vector env that runs several environments in each worker process.

``gymnasium.vector.AsyncVectorEnv`` gives every environment its own process,
so each step of each environment pays a pipe round trip. A scheduling step
costs about 0.1 ms, less than that round trip, so on a 2-core machine
AsyncVectorEnv is slower than one environment in one process.
:class:`ShardedVectorEnv` splits N environments over W workers (W = cores by
default): one message per worker per step carries the actions of all its
environments and brings back their results, so the cost of a round trip is
shared by N / W steps.

Whether that pays is a matter of free cores: on a 2-core machine shared with
other work (load average 7-10, issue 20; ``benchmarks/env_steps.py``, all
seven action/observation pairs) one environment in process made 2.0-10.3k
random-action decisions/s, ShardedVectorEnv 2 workers x 8 envs 1.5-3.5k and
AsyncVectorEnv 2 x 1 0.6-2.4k: the workers lost in every pair, least where a
step is dearest (dras+kernel 1.6k against 2.0k). Worker processes only pay
where they get cores of their own and a step costs more than its round trip;
training therefore steps its environments in process unless ``--async``
(``python -m agents train``) asks for workers.

:class:`RayVectorEnv` does the same with Ray actors as workers, so the
environments can live on the nodes of a Ray cluster (one actor per shard,
one remote call per actor per step); on one machine the pipes of
:class:`ShardedVectorEnv` are faster, because a Ray call costs about a
millisecond.

Both follow the :class:`gymnasium.vector.VectorEnv` contract (batched spaces,
the ``info`` layout of ``_add_info``, ``reset_mask`` and the three autoreset
modes, with the same per-environment semantics as ``SyncVectorEnv``), and
share everything but the transport: the environments of one worker and what
they do with a message are one :class:`_Shard`, in a process or in an actor.

    >>> from cosim.env import SchedulingEnv
    >>> make = lambda: SchedulingEnv("scenarios/lublin256.yaml", episode_jobs=256)
    >>> envs = ShardedVectorEnv([make] * 8, workers=2)           # doctest: +SKIP
    >>> envs = RayVectorEnv([make] * 8, address="auto")          # doctest: +SKIP
    >>> obs, info = envs.reset(seed=0)                           # doctest: +SKIP
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import CloudpickleWrapper, batch_space, concatenate, create_empty_array

__all__ = ["ShardedVectorEnv", "RayVectorEnv"]


class _ShardedVectorEnv(VectorEnv):
    """``len(env_fns)`` environments in shards, one message per shard per step.

    Subclasses start the shards (:meth:`_start`) and carry the messages
    (:meth:`_exchange`); everything else (spaces, seeds, ``reset_mask``,
    batching of observations and infos) is here.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], workers: int,
                 autoreset_mode: AutoresetMode | str):
        if not env_fns:
            raise ValueError(f"{type(self).__name__} needs at least one environment factory")
        self.num_envs = len(env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        if workers < 1:
            raise ValueError(f"workers: expected at least 1, got {workers}")
        self.num_workers = min(int(workers), self.num_envs)
        # Spaces from one throw-away instance, as AsyncVectorEnv does.
        probe = env_fns[0]()
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.metadata = {**getattr(probe, "metadata", {}), "autoreset_mode": self.autoreset_mode}
        self.spec = probe.spec
        probe.close()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._obs = create_empty_array(self.single_observation_space, self.num_envs, fn=np.zeros)
        self._shards = [list(s) for s in np.array_split(np.arange(self.num_envs), self.num_workers)]
        self.closed = False

    def _exchange(self, messages: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Send one ``(command, data)`` to each shard; their ``(status, payload)`` answers."""
        raise NotImplementedError

    def _ask(self, messages: list[tuple[str, Any]]) -> list[Any]:
        answers = self._exchange(messages)
        # Every shard has answered before an error is raised, so none is left behind.
        for status, payload in answers:
            if status == "error":
                raise RuntimeError(f"in a {type(self).__name__} worker: {payload}")
        return [payload for _, payload in answers]

    # -- the VectorEnv API ------------------------------------------------------------
    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None):
        """Reset every environment, or those in ``options["reset_mask"]``."""
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"seed: expected {n} seeds (num_envs), got {len(seeds)}")
        options = dict(options or {})
        reset_mask = options.pop("reset_mask", None)
        if reset_mask is None:
            reset_mask = np.ones(n, dtype=np.bool_)
        elif (not isinstance(reset_mask, np.ndarray) or reset_mask.shape != (n,)
              or reset_mask.dtype != np.bool_ or not reset_mask.any()):
            raise ValueError(f"options['reset_mask']: expected a bool array of shape ({n},) "
                             "with at least one True")
        answers = self._ask([("reset", [(seeds[i], options) if reset_mask[i] else None
                                         for i in shard]) for shard in self._shards])
        infos: dict[str, Any] = {}
        obs_rows = [self._obs[i] for i in range(n)]   # envs not reset keep theirs
        for shard, results in zip(self._shards, answers):
            for i, result in zip(shard, results):
                if result is not None:
                    obs_rows[i], info = result
                    infos = self._add_info(infos, info, i)
        self._obs = concatenate(self.single_observation_space, obs_rows, self._obs)
        return self._obs.copy(), infos

    def step(self, actions):
        """Step every environment with its action; one message per worker."""
        actions = np.asarray(actions)
        answers = self._ask([("step", actions[shard[0]:shard[-1] + 1]) for shard in self._shards])
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        obs_rows = [None] * n
        infos: dict[str, Any] = {}
        for shard, results in zip(self._shards, answers):
            for i, (obs, reward, term, trunc, info) in zip(shard, results):
                obs_rows[i] = obs
                rewards[i], terminated[i], truncated[i] = reward, term, trunc
                infos = self._add_info(infos, info, i)
        self._obs = concatenate(self.single_observation_space, obs_rows, self._obs)
        return self._obs.copy(), rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method (or read an attribute) of every environment."""
        out: list[Any] = []
        for results in self._ask([("call", (name, args, kwargs))] * len(self._shards)):
            out.extend(results)
        return tuple(out)


class ShardedVectorEnv(_ShardedVectorEnv):
    """``len(env_fns)`` environments stepped in ``workers`` processes, several per process.

    Args:
        env_fns: one factory per environment (picklable with cloudpickle).
        workers: worker processes (default: the number of cores, at most one per env).
        autoreset_mode: as in Gymnasium (``NEXT_STEP``, ``SAME_STEP`` or ``DISABLED``).
        context: multiprocessing start method (default: the platform's).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, workers: int | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 context: str | None = None):
        super().__init__(env_fns, workers or os.cpu_count() or 1, autoreset_mode)
        ctx = mp.get_context(context)
        self._pipes, self._procs = [], []
        for shard in self._shards:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, daemon=True, name="cosim-vector-worker",
                               args=(child, CloudpickleWrapper([env_fns[i] for i in shard]),
                                     self.autoreset_mode.value))
            proc.start()
            child.close()
            self._pipes.append(parent)
            self._procs.append(proc)

    def _exchange(self, messages: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        for pipe, message in zip(self._pipes, messages):
            try:
                pipe.send(message)
            except (BrokenPipeError, OSError):
                pass   # a worker that stopped left its reason in the pipe, or EOF
        answers = []
        for pipe in self._pipes:
            try:
                answers.append(pipe.recv())
            except EOFError:
                answers.append(("error", "the worker process died"))
        return answers

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the workers."""
        for pipe in self._pipes:
            try:
                pipe.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        for pipe in self._pipes:
            pipe.close()


class RayVectorEnv(_ShardedVectorEnv):
    """``len(env_fns)`` environments stepped in ``workers`` Ray actors, several per actor.

    The same results as :class:`ShardedVectorEnv` and ``SyncVectorEnv`` for
    the same seeds and actions; the actors may sit on any node of a Ray
    cluster (they are spread over the nodes).

    Args:
        env_fns: one factory per environment (serialized with Ray's cloudpickle).
        workers: actors (default: the cluster's CPUs, at most one per env).
        autoreset_mode: as in Gymnasium (``NEXT_STEP``, ``SAME_STEP`` or ``DISABLED``).
        address: Ray to use when none is initialized yet: None (a local Ray in
            this process, stopped by :meth:`close`), ``"auto"`` or
            ``"HOST:PORT"`` (see :func:`cosim.distributed.ray_session`).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, workers: int | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 address: str | None = None):
        from cosim.distributed import ray_session

        self._session = ray_session(address, what="RayVectorEnv")
        try:
            super().__init__(env_fns, workers or self._session.cpus, autoreset_mode)
            ray = self._session.ray
            # Fractions of a CPU when asked for more actors than the cluster has CPUs,
            # so that every actor is placed (they take turns, as processes would).
            cpus = min(1.0, self._session.cpus / self.num_workers)
            actor = ray.remote(num_cpus=cpus, max_restarts=0,
                               scheduling_strategy="SPREAD")(_ShardActor)
            self._actors = [actor.remote([env_fns[i] for i in shard], self.autoreset_mode.value)
                            for shard in self._shards]
        except BaseException:
            self._session.close()
            raise

    def _exchange(self, messages: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        ray = self._session.ray
        refs = [a.handle.remote(*m) for a, m in zip(self._actors, messages)]
        answers = []
        for ref in refs:
            try:
                answers.append(ray.get(ref))
            except ray.exceptions.RayError as exc:
                answers.append(("error", f"the actor failed ({type(exc).__name__}: "
                                         f"{str(exc).strip().splitlines()[0] if str(exc) else ''})"))
        return answers

    def close_extras(self, **kwargs: Any) -> None:
        """Close the environments, stop the actors (and a local Ray this env started)."""
        ray = self._session.ray
        try:
            ray.get([a.handle.remote("close", None) for a in self._actors], timeout=10)
        except Exception:   # an actor that is gone has nothing left to close
            pass
        for a in self._actors:
            ray.kill(a)
        self._session.close()


class _Shard:
    """The environments of one worker and what each message does to them."""

    def __init__(self, fns: Sequence[Callable[[], gym.Env]], autoreset_mode: str):
        self.mode = AutoresetMode(autoreset_mode)
        self.envs = [fn() for fn in fns]
        self.pending_reset = [False] * len(self.envs)

    def handle(self, cmd: str, data: Any) -> list[Any]:
        """Run one command (``step``, ``reset``, ``call``) on every environment."""
        envs, mode, pending = self.envs, self.mode, self.pending_reset
        if cmd == "step":
            return [_step_one(env, a, i, mode, pending) for i, (env, a) in enumerate(zip(envs, data))]
        if cmd == "reset":
            out = []
            for i, (env, args) in enumerate(zip(envs, data)):
                if args is None:
                    out.append(None)
                    continue
                seed, options = args
                pending[i] = False
                out.append(env.reset(seed=seed, options=options or None))
            return out
        if cmd == "call":
            name, args, kwargs = data
            out = []
            for env in envs:
                attr = getattr(env, name)
                out.append(attr(*args, **kwargs) if callable(attr) else attr)
            return out
        raise ValueError(f"unknown command {cmd!r}")

    def close(self) -> None:
        """Close every environment."""
        for env in self.envs:
            env.close()


class _ShardActor:
    """A :class:`_Shard` as a Ray actor, answering with the pipe workers' protocol."""

    def __init__(self, fns: Sequence[Callable[[], gym.Env]], autoreset_mode: str):
        self.shard, self.error = None, None
        try:
            self.shard = _Shard(fns, autoreset_mode)
        except Exception:   # reported at the first call, where the user called us
            self.error = traceback.format_exc(limit=3)

    def handle(self, cmd: str, data: Any) -> tuple[str, Any]:
        """``("ok", results)`` or ``("error", traceback)``, as a pipe worker sends them."""
        if self.error is not None:
            return "error", self.error
        if cmd == "close":
            self.shard.close()
            return "ok", None
        try:
            return "ok", self.shard.handle(cmd, data)
        except Exception:
            return "error", traceback.format_exc(limit=3)


def _worker(conn, fns: CloudpickleWrapper, autoreset_mode: str) -> None:
    try:
        shard = _Shard(fns.fn, autoreset_mode)
    except Exception:   # report the failure where the user called us, then stop
        conn.send(("error", traceback.format_exc(limit=3)))
        conn.close()
        return
    try:
        while True:
            cmd, data = conn.recv()
            if cmd == "close":
                break
            try:
                conn.send(("ok", shard.handle(cmd, data)))
            except Exception:
                conn.send(("error", traceback.format_exc(limit=3)))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        shard.close()
        conn.close()


def _step_one(env: gym.Env, action, i: int, mode: AutoresetMode, pending_reset: list[bool]):
    # The same per-environment semantics as gymnasium's SyncVectorEnv.step.
    if mode == AutoresetMode.NEXT_STEP and pending_reset[i]:
        obs, info = env.reset()
        reward, term, trunc = 0.0, False, False
    else:
        if mode == AutoresetMode.DISABLED and pending_reset[i]:
            raise RuntimeError(f"environment {i} stepped after its episode ended; reset it "
                               "first (autoreset is disabled)")
        obs, reward, term, trunc, info = env.step(action)
        if mode == AutoresetMode.SAME_STEP and (term or trunc):
            final = {"final_obs": obs, "final_info": info}
            obs, info = env.reset()
            info = {**final, **info}
    pending_reset[i] = bool(term or trunc) and mode != AutoresetMode.SAME_STEP
    return obs, float(reward), bool(term), bool(trunc), info
