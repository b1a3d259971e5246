"""A Gymnasium vector env that runs several environments in each worker process.

``gymnasium.vector.AsyncVectorEnv`` gives every environment its own process,
so each step of each environment pays a pipe round trip. A scheduling step
costs about 0.1 ms, less than that round trip, so on a 2-core machine
AsyncVectorEnv is slower than one environment in one process.
:class:`ShardedVectorEnv` splits N environments over W workers (W = cores by
default): one message per worker per step carries the actions of all its
environments and brings back their results, so the cost of a round trip is
shared by N / W steps and the throughput grows with the cores.

It follows the :class:`gymnasium.vector.VectorEnv` contract (batched spaces,
the ``info`` layout of ``_add_info``, ``reset_mask`` and the three autoreset
modes, with the same per-environment semantics as ``SyncVectorEnv``).

    >>> from cosim.env import SchedulingEnv
    >>> make = lambda: SchedulingEnv("scenarios/lublin256.yaml", episode_jobs=256)
    >>> envs = ShardedVectorEnv([make] * 8, workers=2)           # doctest: +SKIP
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

__all__ = ["ShardedVectorEnv"]


class ShardedVectorEnv(VectorEnv):
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
        if not env_fns:
            raise ValueError("ShardedVectorEnv needs at least one environment factory")
        self.num_envs = len(env_fns)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        workers = workers or os.cpu_count() or 1
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
        self.closed = False

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
        for pipe, shard in zip(self._pipes, self._shards):
            pipe.send(("reset", [(seeds[i], options) if reset_mask[i] else None for i in shard]))
        infos: dict[str, Any] = {}
        obs_rows = [self._obs[i] for i in range(n)]   # envs not reset keep theirs
        for pipe, shard in zip(self._pipes, self._shards):
            for i, result in zip(shard, self._receive(pipe)):
                if result is not None:
                    obs_rows[i], info = result
                    infos = self._add_info(infos, info, i)
        self._obs = concatenate(self.single_observation_space, obs_rows, self._obs)
        return self._obs.copy(), infos

    def step(self, actions):
        """Step every environment with its action; one message per worker."""
        actions = np.asarray(actions)
        for pipe, shard in zip(self._pipes, self._shards):
            pipe.send(("step", actions[shard[0]:shard[-1] + 1]))
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=np.bool_)
        truncated = np.zeros(n, dtype=np.bool_)
        obs_rows = [None] * n
        infos: dict[str, Any] = {}
        for pipe, shard in zip(self._pipes, self._shards):
            for i, (obs, reward, term, trunc, info) in zip(shard, self._receive(pipe)):
                obs_rows[i] = obs
                rewards[i], terminated[i], truncated[i] = reward, term, trunc
                infos = self._add_info(infos, info, i)
        self._obs = concatenate(self.single_observation_space, obs_rows, self._obs)
        return self._obs.copy(), rewards, terminated, truncated, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method (or read an attribute) of every environment."""
        for pipe in self._pipes:
            pipe.send(("call", (name, args, kwargs)))
        out: list[Any] = []
        for pipe in self._pipes:
            out.extend(self._receive(pipe))
        return tuple(out)

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

    def _receive(self, pipe) -> list[Any]:
        try:
            status, payload = pipe.recv()
        except EOFError:
            raise RuntimeError("a ShardedVectorEnv worker died") from None
        if status == "error":
            raise RuntimeError(f"in a ShardedVectorEnv worker: {payload}")
        return payload


def _worker(conn, fns: CloudpickleWrapper, autoreset_mode: str) -> None:
    mode = AutoresetMode(autoreset_mode)
    try:
        envs = [fn() for fn in fns.fn]
    except Exception:   # report the failure where the user called us, then stop
        conn.send(("error", traceback.format_exc(limit=3)))
        conn.close()
        return
    pending_reset = [False] * len(envs)
    try:
        while True:
            cmd, data = conn.recv()
            try:
                if cmd == "step":
                    conn.send(("ok", [_step_one(env, a, i, mode, pending_reset)
                                      for i, (env, a) in enumerate(zip(envs, data))]))
                elif cmd == "reset":
                    out = []
                    for i, (env, args) in enumerate(zip(envs, data)):
                        if args is None:
                            out.append(None)
                            continue
                        seed, options = args
                        pending_reset[i] = False
                        out.append(env.reset(seed=seed, options=options or None))
                    conn.send(("ok", out))
                elif cmd == "call":
                    name, args, kwargs = data
                    out = []
                    for env in envs:
                        attr = getattr(env, name)
                        out.append(attr(*args, **kwargs) if callable(attr) else attr)
                    conn.send(("ok", out))
                elif cmd == "close":
                    break
            except Exception:
                conn.send(("error", traceback.format_exc(limit=3)))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        for env in envs:
            env.close()
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
