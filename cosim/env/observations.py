"""Observation encoders: what the agent sees at a decision point, chosen by name.

All observations are ``float32`` in ``[0, 1]``; times go through
``log1p(t) / log1p(max_time)``, job counts through
``log1p(n) / log1p(queue_norm)``, sizes are divided by capacity.

- ``compact`` (thesis tables 4.1/4.2, fig. 4.5), shape ``(M*6 + 5 + H*2 + K*4,)``:
  per window slot ``[present, fits_now, procs, mem, estimate, wait]``; then
  ``[free cores, free memory, queue length (log), running jobs (log), backlog
  beyond the window (log)]``; then the event horizon, for the next H
  expected completions ``[time until it, free cores after it]``; then per
  kill slot ``[present, procs, elapsed, expected remaining]``.
- ``kernel``, shape ``(M + 1 + K, 14)``: one row per action index:
  ``[is_select, is_wait, is_kill, present, fits_now, procs, mem, time_a,
  time_b]`` + the 5 cluster features, where for a select row ``time_a,
  time_b`` are estimate and wait, for a kill row expected remaining and
  elapsed. A network that scores rows independently transfers across window
  and cluster sizes.
- ``image`` (DeepRM / A2cScheduler), shape ``(2, H_img, M + 2)``: channel 0
  cores, channel 1 memory; column 0 the cluster's use over the next H_img
  time slots (fraction of capacity, from expected ends), columns 1..M each
  window job's demand over its estimated duration, last column the backlog.

Each encoder reads a :class:`cosim.policy.SchedulerView` and the
:class:`~cosim.env.actions.AgentPolicy` that holds the window, so the Gym
environment and an in-process :class:`~cosim.env.actions.ActingPolicy` see
exactly the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from cosim.env.actions import ActionMap, AgentPolicy
from cosim.job import Job
from cosim.policy import SchedulerView

__all__ = ["ObservationConfig", "Encoder", "CompactEncoder", "KernelEncoder", "ImageEncoder",
           "OBSERVATIONS", "make_encoder"]

_JOB_F = 6
_GLOBAL_F = 5
_RUN_F = 4
_KERNEL_F = 3 + _JOB_F + _GLOBAL_F   # type one-hot + 6 slot features + 5 globals
_EMPTY_SLOT = (0.0,) * _JOB_F


@dataclass(frozen=True)
class ObservationConfig:
    """What every encoder needs to know about the machine and the scales.

    Attributes:
        amap: the action index map (window and kill slots).
        capacity: schedulable units (cores, or nodes).
        mem_capacity: total memory (0: not modelled).
        max_time: the time that maps to 1.0.
        queue_norm: the job count that maps to 1.0.
        horizon: event-horizon length H (compact).
        image_slots, image_slot_s: rows and slot length (s) of the image.
    """

    amap: ActionMap
    capacity: int
    mem_capacity: float
    max_time: float
    queue_norm: float
    horizon: int = 8
    image_slots: int = 20
    image_slot_s: float = 1800.0


class Encoder:
    """Base of the encoders: shared scales and the cluster features."""

    def __init__(self, cfg: ObservationConfig):
        self.cfg = cfg
        self.amap = cfg.amap
        self._capacity = cfg.capacity
        self._mem_capacity = cfg.mem_capacity
        self._log_max_time = math.log1p(cfg.max_time)
        self._log_queue_norm = math.log1p(cfg.queue_norm)
        self.space = spaces.Box(0.0, 1.0, shape=self.shape(), dtype=np.float32)
        self._obs = np.zeros(self.space.shape, dtype=np.float32)

    def shape(self) -> tuple[int, ...]:
        """The observation's shape."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget per-episode caches."""

    def empty(self) -> np.ndarray:
        """An all-zero observation (before an episode starts)."""
        return np.zeros(self.space.shape, dtype=np.float32)

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The observation now (a new array)."""
        raise NotImplementedError

    def _t(self, seconds: float) -> float:
        if seconds <= 0:
            return 0.0
        v = math.log1p(seconds) / self._log_max_time
        return v if v < 1.0 else 1.0

    def _globals(self, view: SchedulerView) -> list[float]:
        cl = view.cluster
        q = view.queue
        cap = self._capacity
        free_mem = (cl.free_mem / self._mem_capacity) if self._mem_capacity and cl.memory_pooled else 1.0
        log_norm = self._log_queue_norm
        backlog = max(0, q.count - self.amap.window)
        return [cl.free / cap, min(1.0, max(0.0, free_mem)),
                min(1.0, math.log1p(q.count) / log_norm),
                min(1.0, math.log1p(len(view.ends())) / log_norm),
                min(1.0, math.log1p(backlog) / log_norm)]

    def _slot_features(self, job: Job | None, fits: int, now: float) -> tuple:
        if job is None:
            return _EMPTY_SLOT
        mem = job.mem / self._mem_capacity if self._mem_capacity else 0.0
        return (1.0, float(fits), min(1.0, job.procs / self._capacity), min(1.0, mem),
                self._t(job.estimate), self._t(now - job.submit))

    def _run_features(self, job: Job | None, now: float) -> tuple:
        if job is None:
            return (0.0, 0.0, 0.0, 0.0)
        return (1.0, min(1.0, job.procs / self._capacity), self._t(now - job.start),
                self._t(job.expected_end - now))


class CompactEncoder(Encoder):
    """``compact``: one flat vector (see the module docstring)."""

    def shape(self) -> tuple[int, ...]:
        """``(M*6 + 5 + H*2 + K*4,)``."""
        a = self.amap
        return (a.window * _JOB_F + _GLOBAL_F + self.cfg.horizon * 2 + a.kill_slots * _RUN_F,)

    def reset(self) -> None:
        """Forget cached job features."""
        self._slot_cache: dict[Job, tuple] = {}

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The compact vector now."""
        obs = self._obs
        obs[:] = self.row(view, agent)
        return obs.copy()

    def row(self, view: SchedulerView, agent: AgentPolicy) -> list[float]:
        """The observation as a list of floats."""
        # The hot path of every step: plain floats into one list, one copy into
        # the array (cheaper than numpy on 10-job windows). A job's size and
        # estimate features are cached until its estimate changes.
        now = float(view.env.now)
        mask = agent.mask.tolist()
        cap = self._capacity
        mcap = self._mem_capacity
        inv = 1.0 / self._log_max_time
        log1p = math.log1p
        cache = self._slot_cache
        if len(cache) > 4096:   # whole-trace episodes: keep it bounded
            cache.clear()
        row: list[float] = []
        extend = row.extend
        for i, job in enumerate(agent.window):
            if job is None:
                extend(_EMPTY_SLOT)
                continue
            est = job.estimate
            cached = cache.get(job)
            if cached is None or cached[0] != est:
                cached = (est, min(1.0, job.procs / cap),
                          min(1.0, job.mem / mcap) if mcap else 0.0,
                          min(1.0, log1p(est) * inv) if est > 0 else 0.0)
                cache[job] = cached
            wait = now - job.submit
            w = log1p(wait) * inv if wait > 0 else 0.0
            extend((1.0, float(mask[i]), cached[1], cached[2], cached[3], w if w < 1.0 else 1.0))
        extend(self._globals(view))
        ends = view.ends()
        free = view.cluster.free
        lmt = self._log_max_time
        n_ends = len(ends)
        for k in range(self.cfg.horizon):
            if k < n_ends:
                t, _, job = ends[k]
                free += job.procs
                dt = t - now
                h = log1p(dt) / lmt if dt > 0 else 0.0
                f = free / cap
                extend((h if h < 1.0 else 1.0, f if f < 1.0 else 1.0))
            else:
                f = free / cap
                extend((0.0, f if f < 1.0 else 1.0))
        for job in agent.kill_jobs:
            extend(self._run_features(job, now))
        return row


class KernelEncoder(Encoder):
    """``kernel``: one feature row per action index (see the module docstring)."""

    def shape(self) -> tuple[int, ...]:
        """``(M + 1 + K, 14)``."""
        return (self.amap.n, _KERNEL_F)

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The per-action rows now."""
        obs = self._obs
        now = float(view.env.now)
        amap = self.amap
        mask = agent.mask
        g = self._globals(view)
        obs[...] = 0.0
        for i, job in enumerate(agent.window):
            obs[i, 0] = 1.0
            obs[i, 3:9] = self._slot_features(job, mask[i], now)
            obs[i, 9:] = g
        obs[amap.wait, 1] = 1.0
        obs[amap.wait, 3] = 1.0
        obs[amap.wait, 4] = 1.0
        obs[amap.wait, 9:] = g
        for k, job in enumerate(agent.kill_jobs):
            r = amap.kill0 + k
            obs[r, 2] = 1.0
            f = self._run_features(job, now)
            obs[r, 3] = f[0]
            obs[r, 4] = f[0]
            obs[r, 5] = f[1]
            obs[r, 7] = f[3]
            obs[r, 8] = f[2]
            obs[r, 9:] = g
        return obs.copy()


class ImageEncoder(Encoder):
    """``image``: DeepRM's resource image (see the module docstring)."""

    def shape(self) -> tuple[int, ...]:
        """``(2, H_img, M + 2)``."""
        return (2, self.cfg.image_slots, self.amap.window + 2)

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The image now."""
        obs = self._obs
        now = float(view.env.now)
        obs[...] = 0.0
        h, slot = self.cfg.image_slots, self.cfg.image_slot_s
        cap, mcap = self._capacity, self._mem_capacity
        for t_end, _, job in view.ends():
            n = min(h, max(1, math.ceil((t_end - now) / slot)))
            obs[0, :n, 0] += job.procs / cap
            if mcap:
                obs[1, :n, 0] += job.mem / mcap
        for i, job in enumerate(agent.window):
            if job is None:
                continue
            n = min(h, max(1, math.ceil(job.estimate / slot)))
            obs[0, :n, 1 + i] = job.procs / cap
            if mcap:
                obs[1, :n, 1 + i] = job.mem / mcap
        backlog = max(0, view.queue.count - self.amap.window)
        obs[:, :, -1] = min(1.0, backlog / max(1, self.amap.window * 4))
        np.clip(obs, 0.0, 1.0, out=obs)
        return obs.copy()


#: Encoders by the name the environment's ``observation=`` takes.
OBSERVATIONS: dict[str, type[Encoder]] = {
    "compact": CompactEncoder, "kernel": KernelEncoder, "image": ImageEncoder}


def make_encoder(name: str, cfg: ObservationConfig) -> Encoder:
    """The encoder called ``name`` (one of :data:`OBSERVATIONS`)."""
    return OBSERVATIONS[name](cfg)
