"""A Gymnasium environment over the same SimPy model the heuristics run in.

The scheduler asks an :class:`AgentPolicy` at every decision point; the
policy posts the request as a SimPy event and the environment answers it
from :meth:`SchedulingEnv.step`, then runs the simulation until the next
request. Simulated time does not move while the agent thinks, and heuristics
and agents share one code path (the scheduler validates every decision).

Action space: one flat ``Discrete(M + 1 + K)`` with this index map (masks stay 1-D):

====================  ===============================================
index                 meaning
====================  ===============================================
``0 .. M-1``          start the job in window slot i (head slots first,
                      then tail slots; DBF split window, seed 000)
``M``                 Wait / Fwd: do nothing until the next arrival or end
``M+1 .. M+K``        kill running slot k and requeue it (RLSchert)
====================  ===============================================

DRAS's two-level mode (seed 004) will add ``reserve`` indices after these;
the window, mask and observation code take the index map from
:class:`ActionMap`, so adding a block needs no rewrite. The mask is
``int8`` (1 = legal), in ``info["action_mask"]`` and :meth:`action_masks`;
Wait is legal unless nothing runs and no job will arrive (then waiting
would stall the simulation and some start is always legal); an illegal
action is taken as Wait. With ``guard_wait`` set, a starvation guard bounds
waits: once the queue's first job has waited that long it holds an EASY
reservation, so the mask allows only it while it fits and otherwise only
window jobs that end before its shadow time or use only the extra cores.

Observations (all ``float32`` in ``[0, 1]``; times through
``log1p(t) / log1p(max_time)``, job counts through ``log1p(n) / log1p(queue_norm)``,
sizes divided by capacity):

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

Rewards (``reward=``; integral ones are normalized by ``time_scale`` seconds):

- ``slowdown``: minus the integral over time of sum over jobs in the system
  of 1/max(estimate, tau): the episode return is minus the sum of estimated
  slowdowns (online slowdown over all jobs, thesis 4.1 and 4.6.3).
- ``slowdown_window``: the same over queued jobs only.
- ``bsld``: sparse, minus each job's bounded slowdown when it ends.
- ``completion``: minus the integral of the number of jobs in the system
  (sum of completion times, RLSchert eq. 10).
- ``dbf``: seed 000 eq. 2, ``-w1(1 - util) - w2 L/Lmax - w3 W/Wmax`` with
  running maxima, on each Wait or illegal action; 0 for a placement.
- ``capability`` (DRAS eq. 1) on each placement:
  ``w1 wait_i/max_wait + w2 procs_i/N + w3 used/N``; ``capacity`` (DRAS eq.
  2) each step: ``sum over queued jobs of -1/wait_j, divided by their count``.

With ``smdp_gamma`` set, integral rewards between decisions are discounted
by elapsed simulated time, ``gamma ** (dt / time_scale)`` (thesis eq. 2.18),
and ``info["dt"]`` gives the time since the previous decision, so an agent
can discount per decision and use gamma = 1.

Episodes: ``episode_jobs`` consecutive jobs from a random offset of the
scenario's workload (DBF / RLScheduler), a DRAS jobset
(``episode_source="jobsets"``), the next workload of a curriculum
(``episode_source="curriculum"``; DRAS's three phases come from
:func:`cosim.workloads.windows.curriculum`), or any workload passed as
``reset(options={"jobs": workload})``. With ``episode_end="placed"`` (DBF) the
episode is truncated once that many jobs were started; with
``"completed"`` it terminates when every job has ended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import simpy
from gymnasium import spaces

from cosim.config import Scenario, load_scenario
from cosim.errors import ScenarioError
from cosim.job import Job, JobState, Mode
from cosim.model import build, load_workload
from cosim.policy import KILL, START, WAIT, Decision, kill, start

__all__ = ["SchedulingEnv", "AgentPolicy", "ActionMap", "OBSERVATIONS", "REWARDS", "ENV_ID"]

ENV_ID = "cosim/Scheduling-v0"
OBSERVATIONS = ("compact", "kernel", "image")
REWARDS = ("slowdown", "slowdown_window", "bsld", "completion", "dbf", "capability", "capacity")

_JOB_F = 6
_GLOBAL_F = 5
_RUN_F = 4
_KERNEL_F = 3 + _JOB_F + _GLOBAL_F   # type one-hot + 6 slot features + 5 globals
_EMPTY_SLOT = (0.0,) * _JOB_F


@dataclass(frozen=True)
class ActionMap:
    """Where each kind of action lives in the flat index space."""

    m_head: int
    m_tail: int
    kill_slots: int

    @property
    def window(self) -> int:
        """Window slots M = M_head + M_tail."""
        return self.m_head + self.m_tail

    @property
    def wait(self) -> int:
        """Index of Wait / Fwd."""
        return self.window

    @property
    def kill0(self) -> int:
        """Index of kill slot 0."""
        return self.window + 1

    @property
    def n(self) -> int:
        """Number of actions."""
        return self.window + 1 + self.kill_slots


class AgentPolicy:
    """The scheduler's side of the Gym boundary: posts decision points.

    It also keeps the current window and running slots, so the mask, the
    observation and the decoded action all refer to the same jobs.
    """

    name = "agent"
    external = True

    def __init__(self, amap: ActionMap, on_post, arrivals_pending=lambda: True,
                 guard_wait: float | None = None):
        self.amap = amap
        self.on_post = on_post
        self.arrivals_pending = arrivals_pending
        self.guard_wait = guard_wait
        self.guarded: Job | None = None
        #: guarded job -> shadow time when the guard first reserved for it
        self.promised: dict[Job, float] = {}
        self.window: list[Job | None] = [None] * amap.window
        self.kill_jobs: list[Job | None] = [None] * amap.kill_slots
        self.mask = np.zeros(amap.n, dtype=np.int8)

    def refresh(self, view) -> None:
        """Recompute the window, the running slots and the mask."""
        # Called at every scheduler pass: plain lists, one copy into the int8 mask.
        amap, q, cl = self.amap, view.queue, view.cluster
        n_window = amap.window
        window = self.window
        m = [0] * amap.n
        m[n_window] = 1   # Wait
        if q.count:
            m_head, m_tail = amap.m_head, amap.m_tail
            if q.small():
                jobs = q.live_jobs()
                head = jobs[:m_head]
                rest = len(jobs) - m_head
                tail = jobs[len(jobs) - min(rest, m_tail):] if m_tail and rest > 0 else []
            else:
                # Long queue: touch only the window's slots, not every queued job.
                slots = q.slots()
                n = len(slots)
                qjobs = q.jobs
                head = [qjobs[s] for s in slots[:m_head].tolist()]
                rest = n - m_head
                tail = ([qjobs[s] for s in slots[n - min(rest, m_tail):].tolist()]
                        if m_tail and rest > 0 else [])
            shown = head + [None] * (m_head - len(head)) + tail
            shown += [None] * (n_window - len(shown))
            free, free_mem = cl.free, cl.free_mem
            for i, job in enumerate(shown):
                window[i] = job
                if job is not None and job.procs <= free and job.mem <= free_mem:
                    m[i] = 1
            self._guard(view, head[0] if head else None, m)
        else:
            for i in range(n_window):
                window[i] = None
            self.guarded = None
        any_start = 1 in m[:n_window]
        ends = view.ends()
        if not ends and any_start and not self.arrivals_pending():
            # Nothing would ever wake the scheduler again: waiting would stall.
            m[n_window] = 0
        if amap.kill_slots:
            kill_jobs = self.kill_jobs
            # The running jobs expected to end last are the kill candidates.
            for k in range(amap.kill_slots):
                job = ends[-1 - k][2] if k < len(ends) else None
                kill_jobs[k] = job
                m[amap.kill0 + k] = job is not None
        if self.guarded is not None and m[0]:
            # The guarded job fits: it starts now, before anything else.
            m = [0] * amap.n
            m[0] = 1
        self.mask[:] = m
        self._wanted = any_start or 1 in m[n_window + 1:]

    def _guard(self, view, head: Job | None, m: list[int]) -> None:
        """Starvation guard: once the queue's first job has waited ``guard_wait``
        seconds it holds an EASY reservation (seed 003, ch. 2): only window jobs
        that end before its shadow time or use only the extra cores stay legal."""
        self.guarded = None
        if self.guard_wait is None or head is None or view.now - head.submit < self.guard_wait:
            return
        self.guarded = head
        if m[0]:
            return
        shadow, extra, extra_mem = view.shadow(head.procs, head.mem)
        self.promised.setdefault(head, shadow)
        end_by = shadow - view.now
        window = self.window
        for i in range(1, self.amap.window):
            job = window[i]
            if m[i] and not (job.estimate <= end_by
                             or (job.procs <= extra and job.mem <= extra_mem)):
                m[i] = 0

    def wants_decision(self, view) -> bool:
        """Ask the agent only when something other than Wait is legal (sparse transitions)."""
        self.refresh(view)
        return self._wanted

    def post(self, request: simpy.Event, view) -> None:
        """Hand the decision point to the environment."""
        self.on_post(request)

    def decode(self, action: int, view) -> Decision:
        """The decision an action index stands for (illegal -> wait)."""
        amap = self.amap
        if not (0 <= action < amap.n) or not self.mask[action]:
            if self.mask[amap.wait]:
                return Decision(WAIT, None, reason="illegal action")
            action = int(np.argmax(self.mask))   # waiting would stall: first legal start
        if action < amap.window:
            job = self.window[action]
            head = view.queue.first()
            mode = Mode.READY if job is head else Mode.BACKFILLED
            return start(job, mode, "agent")
        if action == amap.wait:
            return Decision(WAIT, None, reason="agent")
        return kill(self.kill_jobs[action - amap.kill0], "agent", requeue=True)


class _Integral:
    """Integral over time of a rate that changes when jobs come and go."""

    def __init__(self, weight, queued_only: bool, gamma: float | None, scale: float):
        self.weight = weight
        self.queued_only = queued_only
        self.rate = 0.0
        self.acc = 0.0
        self.last = 0.0
        self.t0 = 0.0
        self.gamma = gamma
        self.scale = scale

    def advance(self, now: float) -> None:
        if now > self.last and self.rate:
            if self.gamma is None:
                self.acc += self.rate * (now - self.last)
            else:
                # Exact integral of rate * gamma**((t - t0)/scale) over [last, now].
                k = -math.log(self.gamma) / self.scale
                self.acc += self.rate * (math.exp(-k * (self.last - self.t0))
                                         - math.exp(-k * (now - self.t0))) / k
        self.last = now

    def listener(self, env):
        def on_change(kind: str, job: Job) -> None:
            self.advance(env.now)
            w = self.weight(job)
            if kind == "queued":
                self.rate += w
            elif kind == "started" and self.queued_only:
                self.rate -= w
            elif kind == "left" and not self.queued_only:
                self.rate -= w
        return on_change

    def take(self, now: float) -> float:
        self.advance(now)
        value, self.acc, self.t0 = self.acc, 0.0, now
        return value


class SchedulingEnv(gym.Env):
    """Gymnasium environment: pick which queued job starts next (see the module docstring).

    Args:
        scenario: a scenario file or :class:`cosim.config.Scenario`.
        observation: ``compact``, ``kernel`` or ``image``.
        window: ``(M_head, M_tail)`` (DBF split window; M_tail = 0 is the classic head window).
        kill_slots: K running jobs the agent may kill (0 disables kills).
        reward: one of :data:`REWARDS`.
        episode_jobs: jobs per episode.
        episode_end: ``placed`` (truncate after that many starts) or ``completed``.
        episode_source: ``window`` (random offset), ``jobsets`` (DRAS phase 1) or
            ``curriculum`` (the workloads in ``curriculum``, in order, cycling).
        curriculum: episode workloads for ``episode_source="curriculum"``, for
            example from :func:`cosim.workloads.windows.curriculum` (DRAS's three
            phases), or that function's keyword arguments as a dict (for
            example ``{"sampled": 20, "periods": 20, "synthetic": 20}``; JSON,
            so it can live in a saved env config), applied to the scenario's
            workload with ``set_size=episode_jobs``.
        horizon: event-horizon length H of the compact observation.
        image_slots, image_slot_s: rows and slot length (s) of the image observation.
        time_scale: seconds that normalize integral rewards (and the SMDP discount).
        smdp_gamma: discount per ``time_scale`` seconds between decisions, or None.
        reward_weights: w1, w2, w3 for ``dbf`` and ``capability``.
        tau: bounded-slowdown bound (s).
        teacher: a heuristic policy name; ``info["teacher_action"]`` then holds
            the action it would take now.
        max_time: the time that maps to 1.0 in time features (default: from the workload).
        queue_norm: the job count that maps to 1.0 in the log-scaled queue, running
            and backlog counts. A constant, not the episode length, so an agent
            trained on short episodes sees the same scale on a whole trace.
        guard_wait: starvation guard (s): once the queue's first job has waited
            this long it holds an EASY reservation; the mask then allows only
            that job while it fits, else only jobs that do not delay it. None
            (default) leaves the agent free.
        workload: a prepared workload (skips loading the scenario's).

    Examples:
        >>> env = SchedulingEnv("scenarios/lublin256.yaml", episode_jobs=64)  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs, r, terminated, truncated, info = env.step(int(info["action_mask"].argmax()))  # doctest: +SKIP
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario: str | Path | Scenario, *, observation: str = "compact",
                 window: tuple[int, int] = (10, 0), kill_slots: int = 0, reward: str = "slowdown",
                 episode_jobs: int = 256, episode_end: str = "completed",
                 episode_source: str = "window", horizon: int = 8, image_slots: int = 20,
                 image_slot_s: float = 1800.0, time_scale: float = 3600.0,
                 smdp_gamma: float | None = None, reward_weights=(1 / 3, 1 / 3, 1 / 3),
                 tau: float = 10.0, teacher: str | None = None, max_time: float | None = None,
                 queue_norm: float = 4096.0, guard_wait: float | None = None, curriculum=None,
                 workload=None, base_dir: str | Path | None = None):
        if not isinstance(scenario, Scenario):
            base_dir = base_dir or Path(scenario).resolve().parent
            scenario = load_scenario(scenario)
        if observation not in OBSERVATIONS:
            raise ScenarioError("observation", repr(observation), f"one of {', '.join(OBSERVATIONS)}")
        if reward not in REWARDS:
            raise ScenarioError("reward", repr(reward), f"one of {', '.join(REWARDS)}")
        if episode_end not in ("placed", "completed"):
            raise ScenarioError("episode_end", repr(episode_end), "placed or completed")
        if episode_source not in ("window", "jobsets", "curriculum"):
            raise ScenarioError("episode_source", repr(episode_source),
                                "window, jobsets or curriculum")
        if (episode_source == "curriculum") != bool(curriculum):
            raise ScenarioError("curriculum", "given" if curriculum else "missing",
                                "a non-empty list of workloads exactly when "
                                "episode_source is 'curriculum'")
        self.curriculum: list = []
        self._episode = 0
        m_head, m_tail = (int(window[0]), int(window[1]))
        if m_head < 0 or m_tail < 0 or m_head + m_tail < 1:
            raise ScenarioError("window", repr(window), "(M_head, M_tail) with M_head + M_tail >= 1")
        self.scenario = scenario
        self.base_dir = base_dir
        self.workload = workload if workload is not None else load_workload(scenario, base_dir=base_dir)
        if episode_jobs < 1 or episode_jobs > len(self.workload):
            raise ScenarioError("episode_jobs", str(episode_jobs),
                                f"between 1 and the workload's {len(self.workload)} jobs")
        if isinstance(curriculum, dict):
            from cosim.workloads.windows import curriculum as dras_curriculum

            try:
                self.curriculum = dras_curriculum(self.workload, int(episode_jobs), **curriculum)
            except TypeError as exc:
                raise ScenarioError("curriculum", repr(curriculum),
                                    "keys among sampled, periods, synthetic, load_range, seed") from exc
        elif curriculum:
            self.curriculum = list(curriculum)
        self.amap = ActionMap(m_head, m_tail, int(kill_slots))
        self.observation_kind = observation
        self.reward_kind = reward
        self.episode_jobs = int(episode_jobs)
        self.episode_end = episode_end
        self.episode_source = episode_source
        self.horizon = int(horizon)
        self.image_slots = int(image_slots)
        self.image_slot_s = float(image_slot_s)
        self.time_scale = float(time_scale)
        self.smdp_gamma = smdp_gamma
        self.weights = tuple(float(w) for w in reward_weights)
        self.tau = float(tau)
        self.max_time = float(max_time or max(1e5, 2.0 * float(self.workload.req_time.max())))
        self._log_max_time = math.log1p(self.max_time)
        if not queue_norm >= 1:
            raise ScenarioError("queue_norm", repr(queue_norm), "a job count >= 1")
        self.queue_norm = float(queue_norm)
        if guard_wait is not None and (not guard_wait >= 0 or m_head < 1):
            raise ScenarioError("guard_wait", repr(guard_wait),
                                "seconds >= 0, with a head window (M_head >= 1)")
        self.guard_wait = None if guard_wait is None else float(guard_wait)
        self._log_queue_norm = math.log1p(self.queue_norm)
        self.teacher_name = teacher
        if teacher is not None:
            from agents.heuristics import make_policy

            make_policy(teacher, where="teacher")   # validate the name now
        c = scenario.cluster
        self._capacity = c.nodes if c.granularity == "node" else c.nodes * c.cores_per_node
        self._mem_capacity = c.memory_per_node * c.nodes
        self.action_space = spaces.Discrete(self.amap.n)
        if observation == "compact":
            d = self.amap.window * _JOB_F + _GLOBAL_F + self.horizon * 2 + self.amap.kill_slots * _RUN_F
            shape = (d,)
        elif observation == "kernel":
            shape = (self.amap.n, _KERNEL_F)
        else:
            shape = (2, self.image_slots, self.amap.window + 2)
        self.observation_space = spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)
        self._obs = np.zeros(shape, dtype=np.float32)
        self._sim = None
        self._request = None
        self._signal = None

    # -- Gymnasium API -----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode on a fresh window of jobs; returns ``(obs, info)``.

        ``options={"jobs": workload}`` plays that workload instead (any
        curriculum a trainer drives itself).
        """
        super().reset(seed=seed)
        rng = self.np_random
        jobs_given = (options or {}).get("jobs")
        if jobs_given is not None:
            jobs = jobs_given
        elif self.episode_source == "curriculum":
            jobs = self.curriculum[self._episode % len(self.curriculum)]
            self._episode += 1
        elif self.episode_source == "jobsets":
            from cosim.workloads.windows import jobsets

            jobs = jobsets(self.workload, 1, self.episode_jobs, seed=int(rng.integers(2**31)))[0]
        else:
            from cosim.workloads.windows import window

            start_at = int(rng.integers(0, len(self.workload) - self.episode_jobs + 1))
            jobs = window(self.workload, self.episode_jobs, start=start_at)
        self._sim_env = simpy.Environment()
        self._agent = AgentPolicy(self.amap, self._on_post, self._arrivals_pending,
                                  guard_wait=self.guard_wait)
        self._sim = build(self._sim_env, self.scenario, self._agent, workload=jobs)
        self._slot_cache: dict[Job, tuple] = {}
        sched = self._sim.scheduler
        self._integral = None
        gamma = self.smdp_gamma
        if self.reward_kind in ("slowdown", "slowdown_window", "completion"):
            tau = self.tau
            weight = ((lambda j: 1.0) if self.reward_kind == "completion"
                      else (lambda j: 1.0 / max(j.estimate, tau)))
            self._integral = _Integral(weight, self.reward_kind == "slowdown_window", gamma,
                                       self.time_scale)
            sched.listeners.append(self._integral.listener(self._sim_env))
        self._pending_sparse = 0.0
        if self.reward_kind == "bsld":
            sched.listeners.append(self._bsld_listener)
        self._lmax = 1.0
        self._wmax = 1.0
        self._placed = 0
        self._last_decision_t = 0.0
        self._sim.finished.callbacks.append(lambda _event: self._wake_env())
        self._run_to_next_decision()
        return self._observe(), self._info(0.0)

    def step(self, action):
        """Apply one action and run to the next decision point."""
        if self._request is None:
            raise RuntimeError("step() called after the episode ended; call reset()")
        sched = self._sim.scheduler
        action = int(action)
        decision = self._agent.decode(action, sched.view)
        reward = self._instant_reward(decision, action)
        if decision.action == START:
            self._placed += 1
        request, self._request = self._request, None
        request.succeed(decision)
        truncated = self.episode_end == "placed" and self._placed >= self.episode_jobs
        if not truncated:
            self._run_to_next_decision()
        now = float(self._sim_env.now)
        if self._integral is not None:
            reward -= self._integral.take(now) / self.time_scale
        if self._pending_sparse:
            reward += self._pending_sparse
            self._pending_sparse = 0.0
        terminated = self._request is None and not truncated
        dt = now - self._last_decision_t
        self._last_decision_t = now
        info = self._info(dt)
        if terminated or truncated:
            info["episode_metrics"] = self.episode_metrics()
        return self._observe(), float(reward), terminated, truncated, info

    @property
    def simulation(self):
        """The episode's :class:`cosim.model.Simulation` (scheduler, cluster, jobs), or None before reset."""
        return self._sim

    def action_masks(self) -> np.ndarray:
        """The current int8 action mask (sb3-contrib's MaskablePPO reads this)."""
        return self._agent.mask.copy()

    # -- the co-simulation handshake ----------------------------------------------------
    def _arrivals_pending(self) -> bool:
        users = self._sim.users
        return users.submitted < users.total
    def _on_post(self, request: simpy.Event) -> None:
        self._request = request
        self._wake_env()

    def _wake_env(self) -> None:
        if self._signal is not None and not self._signal.triggered:
            self._signal.succeed()

    def _run_to_next_decision(self) -> None:
        env = self._sim_env
        self._signal = env.event()
        if self._sim.finished.triggered and self._request is None:
            return
        env.run(until=self._signal)
        self._signal = None

    # -- rewards ------------------------------------------------------------------------
    def _bsld_listener(self, kind: str, job: Job) -> None:
        if kind == "left":
            now = self._sim_env.now
            run = now - job.start
            bsld = max(1.0, (now - job.submit) / max(self.tau, run))
            self._pending_sparse -= bsld

    def _instant_reward(self, decision: Decision, action: int) -> float:
        kind = self.reward_kind
        sched = self._sim.scheduler
        now = self._sim_env.now
        if kind == "dbf":
            if decision.action == START:
                return 0.0
            q = sched.queue
            cl = sched.cluster
            util = (cl.up_units - cl.free) / max(1, cl.up_units)
            length = q.count
            wait = float(np.sum(now - q.submit[q.slots()])) if q.count else 0.0
            self._lmax = max(self._lmax, length)
            self._wmax = max(self._wmax, wait)
            w1, w2, w3 = self.weights
            return -w1 * (1 - util) - w2 * length / self._lmax - w3 * wait / self._wmax
        if kind == "capability":
            cl = sched.cluster
            used = (cl.up_units - cl.free) / max(1, cl.capacity)
            w1, w2, w3 = self.weights
            if decision.action != START:
                return w3 * used
            q = sched.queue
            waits = now - q.submit[q.slots()]
            tmax = max(1.0, float(waits.max()))
            job = decision.job
            return (w1 * (now - job.submit) / tmax + w2 * job.procs / cl.capacity
                    + w3 * (used + job.procs / cl.capacity))
        if kind == "capacity":
            q = sched.queue
            if not q.count:
                return 0.0
            waits = np.maximum(now - q.submit[q.slots()], 1.0)
            return float(np.sum(-1.0 / waits) / q.count)
        return 0.0

    # -- observations ---------------------------------------------------------------------
    def _t(self, seconds: float) -> float:
        if seconds <= 0:
            return 0.0
        v = math.log1p(seconds) / self._log_max_time
        return v if v < 1.0 else 1.0

    def _globals(self) -> list[float]:
        sched = self._sim.scheduler
        cl = sched.cluster
        q = sched.queue
        cap = self._capacity
        free_mem = (cl.free_mem / self._mem_capacity) if self._mem_capacity and cl.memory_pooled else 1.0
        log_norm = self._log_queue_norm
        backlog = max(0, q.count - self.amap.window)
        return [cl.free / cap, min(1.0, max(0.0, free_mem)),
                min(1.0, math.log1p(q.count) / log_norm),
                min(1.0, math.log1p(len(sched.ends)) / log_norm),
                min(1.0, math.log1p(backlog) / log_norm)]

    def _slot_features(self, job: Job | None, fits: int, now: float) -> tuple:
        if job is None:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        mem = job.mem / self._mem_capacity if self._mem_capacity else 0.0
        return (1.0, float(fits), min(1.0, job.procs / self._capacity), min(1.0, mem),
                self._t(job.estimate), self._t(now - job.submit))

    def _run_features(self, job: Job | None, now: float) -> tuple:
        if job is None:
            return (0.0, 0.0, 0.0, 0.0)
        return (1.0, min(1.0, job.procs / self._capacity), self._t(now - job.start),
                self._t(job.expected_end - now))

    def _observe(self) -> np.ndarray:
        obs = self._obs
        if self._sim is None:
            obs[...] = 0.0
            return obs.copy()
        now = float(self._sim_env.now)
        agent = self._agent
        amap = self.amap
        mask = agent.mask
        kind = self.observation_kind
        if kind == "compact":
            obs[:] = self._compact_row(now)
        elif kind == "kernel":
            g = self._globals()
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
        else:
            self._observe_image(now)
        return obs.copy()

    def _compact_row(self, now: float) -> list[float]:
        # The hot path of every step: plain floats into one list, one copy into
        # the array (cheaper than numpy on 10-job windows). A job's size and
        # estimate features are cached until its estimate changes.
        agent = self._agent
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
        extend(self._globals())
        sched = self._sim.scheduler
        ends = sched.ends
        free = sched.cluster.free
        lmt = self._log_max_time
        n_ends = len(ends)
        for k in range(self.horizon):
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

    def _observe_image(self, now: float) -> None:
        obs = self._obs
        obs[...] = 0.0
        h, slot = self.image_slots, self.image_slot_s
        cap, mcap = self._capacity, self._mem_capacity
        sched = self._sim.scheduler
        for t_end, _, job in sched.ends:
            n = min(h, max(1, math.ceil((t_end - now) / slot)))
            obs[0, :n, 0] += job.procs / cap
            if mcap:
                obs[1, :n, 0] += job.mem / mcap
        for i, job in enumerate(self._agent.window):
            if job is None:
                continue
            n = min(h, max(1, math.ceil(job.estimate / slot)))
            obs[0, :n, 1 + i] = job.procs / cap
            if mcap:
                obs[1, :n, 1 + i] = job.mem / mcap
        backlog = max(0, sched.queue.count - self.amap.window)
        obs[:, :, -1] = min(1.0, backlog / max(1, self.amap.window * 4))
        np.clip(obs, 0.0, 1.0, out=obs)

    # -- info and metrics -------------------------------------------------------------------
    def _info(self, dt: float) -> dict[str, Any]:
        info: dict[str, Any] = {"action_mask": self._agent.mask.copy(), "dt": float(dt),
                                "time": float(self._sim_env.now), "placed": self._placed}
        if self.teacher_name is not None:
            info["teacher_action"] = self.teacher_action(self.teacher_name)
        return info

    def teacher_action(self, name: str) -> int:
        """The action heuristic ``name`` would take now.

        Its first start when that job is in the window and legal; otherwise (a
        split window hides part of the queue, or the starvation guard forbids
        it) the window job it ranks best among the legal ones, so the agent learns
        the teacher's order rather than to wait. Wait when the teacher starts
        nothing (it would wait for an event).
        """
        from agents.heuristics import make_policy

        if self._request is None:
            return self.amap.wait
        teacher = make_policy(name, rng=np.random.default_rng(0))
        view = self._sim.scheduler.view
        q = view.queue
        saved = (view.released, view.surprise, q.key_monotone)
        slots = q.slots()
        saved_keys = q.key[slots].copy()
        if teacher.static_key is not None:
            # The queue holds the agent's (empty) keys: give the teacher its own order.
            q.key[slots] = [teacher.static_key(q.jobs[s]) for s in slots.tolist()]
            q.key_monotone = False
        view.released = view.surprise = True   # a fresh policy must see the whole state
        try:
            # Only the first decision is usable: policies assume each one is
            # applied before they yield the next.
            for decision in teacher.decide(view):
                if decision.action == START:
                    window = self._agent.window
                    mask = self._agent.mask
                    for i, job in enumerate(window):
                        if job is decision.job and mask[i]:
                            return i
                    # The queue's key column now holds the teacher's keys.
                    legal = [(float(q.key[job.queue_slot]), i) for i, job in enumerate(window)
                             if job is not None and mask[i]]
                    return min(legal)[1] if legal else self.amap.wait
                if decision.action == KILL:
                    break
        finally:
            view.released, view.surprise, q.key_monotone = saved
            q.key[slots] = saved_keys
        return self.amap.wait

    def episode_metrics(self) -> dict[str, float]:
        """Mean bsld, mean and max wait, utilization and mean queue length over the jobs done so far.

        The mean queue length is the sum of waits over the span (Little's law:
        the time integral of the queue length is the time jobs spent queued),
        which equals METRICS.md's ``queue_len_mean`` once every job has ended.
        """
        jobs = [j for j in self._sim.scheduler.jobs if j.state == JobState.DONE
                and j.outcome in ("completed", "timeout")]
        if not jobs:
            return {"jobs": 0, "mean_bsld": float("nan"), "mean_wait": float("nan"),
                    "max_wait": float("nan"), "utilization": float("nan"),
                    "mean_queue": float("nan")}
        tau = self.tau
        waits = np.array([j.start - j.submit - j.killed_seconds for j in jobs])
        runs = np.array([j.end - j.start for j in jobs])
        resp = np.array([j.end - j.submit for j in jobs])
        bsld = np.maximum(1.0, resp / np.maximum(tau, runs))
        first = min(j.submit for j in self._sim.scheduler.jobs)
        last = max(j.end for j in jobs)
        work = float(np.sum(runs * np.array([j.procs for j in jobs])))
        span = max(last - first, 1e-9)
        return {"jobs": len(jobs), "mean_bsld": float(bsld.mean()), "mean_wait": float(waits.mean()),
                "max_wait": float(waits.max()), "utilization": work / (self._capacity * span),
                "mean_queue": float(waits.sum()) / span}


def _register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="cosim.env:SchedulingEnv",
                     disable_env_checker=True)


_register()
