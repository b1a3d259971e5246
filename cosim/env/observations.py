"""Observation encoders: what the agent sees at a decision point, chosen by name.

All observations are ``float32`` in ``[0, 1]``; times go through
``log1p(t) / log1p(max_time)``, job counts through
``log1p(n) / log1p(queue_norm)``, sizes are divided by capacity. The job
features show what the scheduler believes: a job's ``estimate`` is the user's
request, or the pre-run prediction when the environment attaches
predictions, and running jobs' expected ends follow remaining-time
predictions (RLSchert).

The cluster features ``G`` (7 values): ``[free units, free memory, queue
length (log), running jobs (log), backlog beyond the window (log), phase
(1 while DRAS's level 2 picks backfill jobs), time until the agent's
reserved job is promised to start]``.

- ``compact`` (thesis tables 4.1/4.2, fig. 4.5), shape ``(M*6 + 7 + H*2 + K*4,)``:
  per window slot ``[present, fits_now, procs, mem, estimate, wait]``; then
  ``G``; then the event horizon, for the next H expected completions ``[time
  until it, free units after it]`` (slots past the last completion repeat
  its state, as the thesis pads); then per kill slot ``[present, procs,
  elapsed, expected remaining]``.
- ``kernel``, shape ``(n_actions, 18)``: one row per action index:
  ``[is_job, is_wait, is_kill, present, fits_now, procs, log2 procs, mem,
  time_a, time_b, oldest]`` + ``G``, where for a job row ``time_a, time_b``
  are estimate and wait and ``oldest`` marks the queue's oldest job, for a
  kill row expected remaining and elapsed. A network that scores rows
  independently works for any window (128 jobs in ``select``) and transfers
  across window and cluster sizes.
- ``image`` (DeepRM / A2cScheduler), shape ``(2, H_img, M + 2)``: channel 0
  units, channel 1 memory; column 0 the cluster's use over the next H_img
  time slots (fraction of capacity, from expected ends), columns 1..M each
  window job's demand over its estimated duration, last column the backlog.
- ``dras`` (DRAS, seed 004, section III-A), shape ``(2*M + R, 2)``: per window
  job two rows ``[size, estimate]`` and ``[priority, queued time]`` (priority:
  1 for the queue's oldest job); then R node rows ``[available, estimated
  free time - now]``. On clusters of more than R units a row stands for a
  group of units (the k-th row: when the k-th R-quantile of units is free),
  so the shape does not depend on the machine.

Each encoder reads a :class:`cosim.decisions.SchedulerView` and the
:class:`~cosim.env.actions.AgentPolicy` that holds the window, so the Gym
environment and a trained agent run as a plain policy see exactly the same
numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from cosim.decisions import SchedulerView
from cosim.env.actions import ActionMap, AgentPolicy
from cosim.env.actions.backfill import BackfillEncoder
from cosim.job import Job

__all__ = ["ObservationConfig", "Encoder", "CompactEncoder", "KernelEncoder", "ImageEncoder",
           "DrasEncoder", "KillEncoder", "OBSERVATIONS", "KERNEL_FEATURES",
           "make_encoder"]

_JOB_F = 6
_GLOBAL_F = 7
_RUN_F = 4
#: Features of a kernel row.
KERNEL_FEATURES = 11 + _GLOBAL_F
_EMPTY_SLOT = (0.0,) * _JOB_F
_EMPTY_KERNEL = (0.0,) * 8
#: Head windows longer than this are encoded with numpy (cheaper per job than floats).
_NUMPY_ROWS = 24


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
        node_rows: node rows R of the ``dras`` observation.
    """

    amap: ActionMap
    capacity: int
    mem_capacity: float
    max_time: float
    queue_norm: float
    horizon: int = 8
    image_slots: int = 20
    image_slot_s: float = 1800.0
    node_rows: int = 256


class Encoder:
    """Base of the encoders: shared scales and the cluster features."""

    def __init__(self, cfg: ObservationConfig):
        self.cfg = cfg
        self.amap = cfg.amap
        self._capacity = cfg.capacity
        self._mem_capacity = cfg.mem_capacity
        self._log_max_time = math.log1p(cfg.max_time)
        self._log_queue_norm = math.log1p(cfg.queue_norm)
        self._counts = [min(1.0, math.log1p(n) / self._log_queue_norm) for n in range(1024)]
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

    def _count(self, n: int) -> float:
        """A job count's feature, ``min(1, log1p(n) / log1p(queue_norm))``."""
        counts = self._counts
        if n < len(counts):
            return counts[n]
        return min(1.0, math.log1p(n) / self._log_queue_norm)

    def _globals(self, view: SchedulerView, agent: AgentPolicy) -> list[float]:
        cl = view.cluster
        q = view.queue
        free_mem = (cl.free_mem / self._mem_capacity) if self._mem_capacity and cl.memory_pooled else 1.0
        count = q.count
        backlog = count - self.amap.window
        reserved = agent.reserved
        promise = self._t(reserved.promised - view.env.now) if reserved is not None else 0.0
        # Counts below 1024 from a table of the same expression (three per decision).
        counts = self._counts
        return [cl.free / self._capacity, min(1.0, max(0.0, free_mem)),
                counts[count] if count < 1024 else self._count(count),
                self._count(len(view.ends())),
                (counts[backlog] if backlog < 1024 else self._count(backlog)) if backlog > 0
                else 0.0,
                1.0 if agent.level == 2 else 0.0, promise]

    def _run_features(self, job: Job | None, now: float) -> tuple:
        if job is None:
            return (0.0, 0.0, 0.0, 0.0)
        return (1.0, min(1.0, job.procs / self._capacity), self._t(now - job.start),
                self._t(job.expected_end - now))


class CompactEncoder(Encoder):
    """``compact``: one flat vector (see the module docstring)."""

    def shape(self) -> tuple[int, ...]:
        """``(M*6 + 7 + H*2 + K*4,)``."""
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
        extend(self._globals(view, agent))
        ends = view.ends()
        free = view.cluster.free
        lmt = self._log_max_time
        horizon = self.cfg.horizon
        h = 0.0
        for t, _, job in ends[:horizon]:
            free += job.procs
            dt = t - now
            h = log1p(dt) / lmt if dt > 0 else 0.0
            if h > 1.0:
                h = 1.0
            f = free / cap
            extend((h, f if f < 1.0 else 1.0))
        if len(ends) < horizon:
            # Past the last completion the last state repeats (thesis, ch. 4).
            f = free / cap
            extend((h, f if f < 1.0 else 1.0) * (horizon - len(ends)))
        for job in agent.kill_jobs:
            extend(self._run_features(job, now))
        return row


class KernelEncoder(Encoder):
    """``kernel``: one feature row per action index (see the module docstring)."""

    def __init__(self, cfg: ObservationConfig):
        super().__init__(cfg)
        # The features that never change (is_job/is_wait/is_kill and the Wait
        # row), copied in at each step instead of being rebuilt.
        a = self.amap
        base = np.zeros(self.space.shape, dtype=np.float32)
        base[:a.window, 0] = 1.0
        if a.has_wait:
            base[a.wait, 1] = base[a.wait, 3] = base[a.wait, 4] = 1.0
        base[a.kill0:a.kill0 + a.kill_slots, 2] = 1.0
        self._base = base
        self._inv_log2_cap = 1.0 / math.log2(cfg.capacity + 1.0)
        self._cache: dict[Job, tuple] = {}
        self._reset_slots()

    def shape(self) -> tuple[int, ...]:
        """``(n_actions, 18)``."""
        return (self.amap.n, KERNEL_FEATURES)

    def reset(self) -> None:
        """Forget cached job features."""
        self._cache = {}
        self._reset_slots()

    def _reset_slots(self) -> None:
        # legal_rows' rows by queue slot: the queue's jobs list they belong to, slots done.
        self._slot_rows = np.zeros((0, KERNEL_FEATURES), dtype=np.float32)
        self._slot_jobs = None
        self._slot_filled = 0
        self._wait_now = -math.inf   # the wait column holds slots [.., _wait_upto] at _wait_now
        self._wait_upto = -1

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The per-action rows now."""
        # Plain floats per job (a numpy call costs more than a job's features
        # on the short queues of a decision), one conversion into the rows. A
        # job's size and estimate features are cached until its estimate changes.
        obs = self._base.copy()
        now = float(view.env.now)
        amap = self.amap
        cap = self._capacity
        mcap = self._mem_capacity
        inv_t = 1.0 / self._log_max_time
        inv_l2 = self._inv_log2_cap
        log1p = math.log1p
        cache = self._cache
        if len(cache) > 4096:   # whole-trace episodes: keep it bounded
            cache.clear()
        q = view.queue
        oldest = q.first()
        mask = agent.mask.tolist()
        rows: list[tuple] = []
        last = 0     # rows past the last present job stay as the template has them
        window = agent.window
        slots = agent.slots
        if slots is not None and agent.level == 1:
            # A head window (the first len(slots) queued jobs, then empty slots).
            if len(slots) > _NUMPY_ROWS:
                self._head_rows(obs, q, slots, agent.mask, now)
                window = ()
            else:
                window = window[:len(slots)]
        for i, job in enumerate(window):
            if job is None:
                rows.append(_EMPTY_KERNEL)
                continue
            last = i + 1
            est = job.estimate
            cached = cache.get(job)
            if cached is None or cached[0] != est:
                p = job.procs
                e = log1p(est) * inv_t if est > 0 else 0.0
                cached = cache[job] = (est, min(1.0, p / cap),
                                       min(1.0, math.log2(p + 1.0) * inv_l2),
                                       min(1.0, job.mem / mcap) if mcap else 0.0,
                                       e if e < 1.0 else 1.0)
            wait = now - job.submit
            w = log1p(wait) * inv_t if wait > 0 else 0.0
            rows.append((1.0, mask[i], cached[1], cached[2], cached[3], cached[4],
                         w if w < 1.0 else 1.0, 1.0 if job is oldest else 0.0))
        if last:
            del rows[last:]
            obs[:last, 3:11] = rows
        kill0 = amap.kill0
        for kk, job in enumerate(agent.kill_jobs):
            r = kill0 + kk
            if job is None:
                obs[r, 4] = mask[r]
                continue
            obs[r, 3:10] = (1.0, mask[r], min(1.0, job.procs / cap),
                            min(1.0, math.log2(job.procs + 1.0) / math.log2(cap + 1.0)), 0.0,
                            self._t(job.expected_end - now), self._t(now - job.start))
        obs[:, 11:] = self._globals(view, agent)
        return obs

    def _head_rows(self, obs: np.ndarray, q, slots, mask: np.ndarray, now: float) -> None:
        """Job rows of a long head window from the queue's columns (a fixed count of numpy calls)."""
        k = len(slots)
        slots = np.asarray(slots, dtype=np.int64)
        procs = q.procs[slots]
        x = np.empty((6, k))
        np.divide(procs, self._capacity, out=x[0])
        np.log2(procs + 1.0, out=x[1])
        x[1] *= self._inv_log2_cap
        if self._mem_capacity:
            np.divide(q.mem[slots], self._mem_capacity, out=x[2])
        else:
            x[2] = 0.0
        x[3] = q.estimate[slots]
        np.subtract(now, q.submit[slots], out=x[4])
        t = x[3:5]
        np.maximum(t, 0.0, out=t)
        np.log1p(t, out=t)
        t *= 1.0 / self._log_max_time
        np.minimum(x, 1.0, out=x)
        x[5] = 0.0
        x[5, 0] = 1.0      # the head window starts with the queue's oldest job
        rows = obs[:k]
        rows[:, 3] = 1.0
        rows[:, 4] = mask[:k]
        rows[:, 5:11] = x.T

    def legal_rows(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray | None:
        """The observation's rows of the legal actions, when they are a head window's first rows.

        For a ``select`` agent (its legal actions are the first ``k =
        agent.legal`` rows of a head window) this is ``encode(view,
        agent)[:k]`` -- the same float32 values -- without building the other
        rows: what a row network acting in process scores (``rl:DIR``). The
        features fixed while a job waits (size, log2 size, memory, estimate)
        are computed once per queue slot and kept until the queue renumbers
        its slots (a new ``jobs`` list) or estimates may have changed
        (:attr:`~cosim.decisions.SchedulerView.surprise`); the wait, the
        oldest-job flag and ``G`` at each call. None for any other window.
        """
        slots = agent.slots
        k = agent.legal
        if slots is None or agent.level != 1 or k < 1 or k > len(slots):
            return None
        q = view.queue
        if q.jobs is not self._slot_jobs:
            self._slot_jobs = q.jobs
            self._slot_filled = q.lo
            self._wait_upto = -1
        elif view.surprise:
            self._slot_filled = q.lo
        if q.hi > self._slot_filled:
            self._slot_features(q, self._slot_filled, q.hi)
        sl = slots[:k] if isinstance(slots, np.ndarray) else np.array(slots[:k], dtype=np.intp)
        # The wait column, kept per slot for the time it was computed at: the
        # window is a prefix of the queue, so at the same time (a decision
        # after a start) only slots past the last one computed are new.
        now = float(view.env.now)
        if now != self._wait_now:
            self._wait_now = now
            self._wait_upto = -1
        if sl[-1] > self._wait_upto:
            new = sl if self._wait_upto < 0 else sl[sl > self._wait_upto]
            self._slot_wait(q, new, now)
            self._wait_upto = int(sl[-1])
        rows = self._slot_rows.take(sl, axis=0)
        rows[0, 10] = 1.0       # a head window starts with the queue's oldest job
        rows[:, 11:] = self._globals(view, agent)
        return rows

    def _slot_wait(self, q, slots: np.ndarray, now: float) -> None:
        """The wait column of queue ``slots`` at ``now``, as _head_rows computes it.

        Without its clamp at 0: a queued job's submit time is stamped on
        arrival (:meth:`cosim.actors.scheduler.Scheduler.submit`), so its wait
        is never negative and the clamp changes nothing.
        """
        wait = q.submit.take(slots)
        np.subtract(now, wait, out=wait)
        np.log1p(wait, out=wait)
        wait *= 1.0 / self._log_max_time
        np.minimum(wait, 1.0, out=wait)
        self._slot_rows[slots, 9] = wait

    def _slot_features(self, q, lo: int, hi: int) -> None:
        """Rows of queue slots ``[lo, hi)`` as legal job rows, but for the wait, oldest and G
        (dead slots too, harmlessly: they are never asked for)."""
        have = len(self._slot_rows)
        if have < hi:
            grown = np.zeros((max(hi, 2 * have, 1024), KERNEL_FEATURES), dtype=np.float32)
            grown[:have] = self._slot_rows
            grown[have:, 0] = grown[have:, 3] = grown[have:, 4] = 1.0   # is_job, present, legal
            self._slot_rows = grown
        if hi - lo <= 4:
            # Usually one arrival: plain floats cost less than numpy calls (the
            # same values as encode's per-job path).
            rows = self._slot_rows
            cap, mcap = self._capacity, self._mem_capacity
            inv_t, inv_l2 = 1.0 / self._log_max_time, self._inv_log2_cap
            for s in range(lo, hi):
                p = float(q.procs[s])
                est = float(q.estimate[s])
                e = math.log1p(est) * inv_t if est > 0 else 0.0
                rows[s, 5:9] = (min(1.0, p / cap), min(1.0, math.log2(p + 1.0) * inv_l2),
                                min(1.0, float(q.mem[s]) / mcap) if mcap else 0.0,
                                e if e < 1.0 else 1.0)
            self._slot_filled = hi
            return
        # The same operations as _head_rows, column by column.
        procs = q.procs[lo:hi]
        x = np.empty((4, hi - lo))
        np.divide(procs, self._capacity, out=x[0])
        np.log2(procs + 1.0, out=x[1])
        x[1] *= self._inv_log2_cap
        if self._mem_capacity:
            np.divide(q.mem[lo:hi], self._mem_capacity, out=x[2])
        else:
            x[2] = 0.0
        t = x[3]
        np.maximum(q.estimate[lo:hi], 0.0, out=t)
        np.log1p(t, out=t)
        t *= 1.0 / self._log_max_time
        np.minimum(x, 1.0, out=x)
        rows = self._slot_rows[lo:hi]
        rows[:, 5:9] = x.T
        rows[:, 10] = 0.0
        self._slot_filled = hi


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


class DrasEncoder(Encoder):
    """``dras``: DRAS's job and node rows (see the module docstring)."""

    def shape(self) -> tuple[int, ...]:
        """``(2*M + R, 2)``."""
        return (2 * self.amap.window + self.cfg.node_rows, 2)

    def __init__(self, cfg: ObservationConfig):
        super().__init__(cfg)
        r, cap = cfg.node_rows, cfg.capacity
        # The k-th node row stands for the first ceil(k * cap / R) units; rows[a]
        # is how many rows are covered once ``a`` units are free (a lookup
        # instead of a search per step).
        need = np.ceil(np.arange(1, r + 1) * (cap / r))
        self._rows_free = np.searchsorted(need, np.arange(cap + 1), side="right").tolist()
        self._cache: dict[Job, tuple] = {}

    def reset(self) -> None:
        """Forget cached job features."""
        self._cache: dict[Job, tuple] = {}

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The job and node rows now."""
        # Plain floats, built once per step: windows are short in practice and
        # a numpy call costs more than a job's four features. A job's size and
        # estimate features are cached until its estimate changes.
        m = self.amap.window
        now = float(view.env.now)
        cap = self._capacity
        t = self._t
        cache = self._cache
        if len(cache) > 4096:   # whole-trace episodes: keep it bounded
            cache.clear()
        oldest = view.queue.first()
        # One flat list of the job rows' four features (a flat list converts
        # faster than a list of tuples).
        job_rows: list[float] = []
        extend = job_rows.extend
        last = 0     # job rows past the last present job stay zero
        window = agent.window
        if agent.slots is not None and agent.level == 1:
            # A head window (the first len(slots) queued jobs, then empty slots).
            window = window[:len(agent.slots)]
        log_max_time = self._log_max_time
        for i, job in enumerate(window):
            if job is None:
                extend((0.0, 0.0, 0.0, 0.0))
                continue
            last = i + 1
            est = job.estimate
            cached = cache.get(job)
            if cached is None or cached[0] != est:
                cached = cache[job] = (est, min(1.0, job.procs / cap), t(est))
            wait = now - job.submit     # self._t, inlined
            if wait <= 0:
                wait = 0.0
            else:
                wait = math.log1p(wait) / log_max_time
                if wait >= 1.0:
                    wait = 1.0
            extend((cached[1], cached[2], 1.0 if job is oldest else 0.0, wait))
        # Node rows: the rows whose units are free now, then for each expected
        # end (in order) the rows it completes, then rows never freed. Each
        # column as a flat list of values with their row counts.
        rows_free = self._rows_free
        r = self.cfg.node_rows
        free = view.cluster.free
        done = rows_free[min(free, cap)]
        col0 = [1.0]
        col1 = [0.0]
        counts = [done]
        avail = free
        for t_end, _, job in view.ends():
            if done >= r:
                break
            avail += job.procs
            upto = rows_free[min(avail, cap)]
            if upto > done:
                delta = t_end - now
                if delta > 0.0:
                    col0.append(0.0)
                    col1.append(min(1.0, math.log1p(delta) / log_max_time))
                else:
                    col0.append(1.0)
                    col1.append(0.0)
                counts.append(upto - done)
                done = upto
        col0.append(0.0)
        col1.append(1.0)
        counts.append(r - done)
        obs = np.empty(self.space.shape, dtype=np.float32)
        if last:
            obs[:2 * last].reshape(-1)[:] = job_rows[:4 * last]
        obs[2 * last:2 * m] = 0.0
        counts = np.array(counts)
        nodes = obs[2 * m:]
        nodes[:, 0] = np.array(col0).repeat(counts)
        nodes[:, 1] = np.array(col1).repeat(counts)
        return obs


class KillEncoder(Encoder):
    """``kill``: one row for Keep and one per kill candidate (RLSchert's kill decision).

    Shape ``(1 + K, 12)``. A candidate row: ``[is_keep, present, procs,
    elapsed, pre-run prediction, predicted run time (elapsed + remaining),
    remaining, log2 of predicted over pre-run (/ 8, clipped to [0, 1]),
    whether the kill rule would kill it, killed before, queued short jobs
    (log), queue length (log)]``; the Keep row has ``is_keep = present = 1``
    and the queue features. Times as everywhere (log-scaled by ``max_time``).
    """

    def shape(self) -> tuple[int, ...]:
        """``(1 + K, 12)``."""
        return (self.amap.n, 12)

    def encode(self, view: SchedulerView, agent: AgentPolicy) -> np.ndarray:
        """The keep row and the candidates' rows now."""
        obs = self._obs
        obs[...] = 0.0
        now = float(view.env.now)
        q = view.queue
        rule = getattr(agent, "rule", None)
        short = rule.short if rule is not None else 3000.0
        n_short = int(np.count_nonzero(q.estimate[q.slots()] < short)) if q.count else 0
        log_norm = self._log_queue_norm
        queue_feats = (min(1.0, math.log1p(n_short) / log_norm),
                       min(1.0, math.log1p(q.count) / log_norm))
        obs[0, 0] = obs[0, 1] = 1.0
        obs[0, 10:] = queue_feats
        says = agent.rule_says(view) if hasattr(agent, "rule_says") else []
        for k, (job, pred) in enumerate(zip(agent.kill_jobs, getattr(agent, "preds", []))):
            if job is None:
                continue
            r = 1 + k
            elapsed = now - job.start
            run_hat = pred.run_hat
            obs[r, 1] = 1.0
            obs[r, 2] = min(1.0, job.procs / self._capacity)
            obs[r, 3] = self._t(elapsed)
            obs[r, 4] = self._t(pred.prerun)
            obs[r, 5] = self._t(run_hat)
            obs[r, 6] = self._t(pred.remaining)
            ratio = run_hat / pred.prerun if pred.prerun > 0 else 1.0
            obs[r, 7] = min(1.0, max(0.0, math.log2(max(ratio, 1e-9)) / 8.0))
            obs[r, 8] = 1.0 if k < len(says) and says[k] else 0.0
            obs[r, 9] = 1.0 if job.attempts > 1 else 0.0
            obs[r, 10:] = queue_feats
        return obs.copy()


#: Encoders by the name the environment's ``observation=`` takes.
OBSERVATIONS: dict[str, type[Encoder]] = {
    "compact": CompactEncoder, "kernel": KernelEncoder, "image": ImageEncoder,
    "dras": DrasEncoder, "kill": KillEncoder, "backfill": BackfillEncoder}

#: The observation each action model uses unless told otherwise.
DEFAULT_OBSERVATIONS = {"start": "compact", "select": "kernel", "dras": "dras", "kill": "kill",
                        "backfill": "backfill"}


def make_encoder(name: str, cfg: ObservationConfig) -> Encoder:
    """The encoder called ``name`` (one of :data:`OBSERVATIONS`)."""
    return OBSERVATIONS[name](cfg)
