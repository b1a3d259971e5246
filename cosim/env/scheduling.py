"""The Gymnasium environment class: the SimPy model, answered one decision at a time.

The scheduler's policy is an :class:`~cosim.env.actions.AgentPolicy` that
posts each decision point as a SimPy event; :meth:`SchedulingEnv.step`
answers it and runs the simulation until the next one. Simulated time does
not move while the agent thinks, and heuristics and agents share one code
path (the scheduler validates every decision). The parts live in their own
modules: actions and mask (:mod:`~cosim.env.actions`), observations
(:mod:`~cosim.env.observations`), rewards (:mod:`~cosim.env.rewards`),
episode sources (:mod:`~cosim.env.episodes`) and the teacher
(:mod:`~cosim.env.teacher`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import simpy
from gymnasium import spaces

from cosim import metrics, records
from cosim.actors.scheduler import SchedulerHooks
from cosim.config import Scenario, load_scenario, scenario_from_dict
from cosim.env.actions import AgentPolicy, make_action_model
from cosim.env.episodes import CurriculumEpisodes, make_episode_source
from cosim.env.observations import (
    DEFAULT_OBSERVATIONS,
    OBSERVATIONS,
    ObservationConfig,
    make_encoder,
)
from cosim.env.rewards import RENAMED, REWARDS, RewardParams, make_reward
from cosim.env.teacher import teacher_action
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.loading import load_workload

__all__ = ["SchedulingEnv", "ENV_ID", "DEFAULT_SCENARIO", "register", "default_image_slot",
           "default_max_time", "default_node_rows", "ENV_SET_BY_CALLER", "env_keywords"]

ENV_ID = "cosim/Scheduling-v0"


#: The scenario ``gym.make(ENV_ID)`` uses when given none: the DBF / RLScheduler
#: setting, 256 cores and Lublin-Feitelson jobs with exact estimates.
DEFAULT_SCENARIO = {
    "name": "lublin256-default", "seed": 1,
    "cluster": {"nodes": 256, "cores_per_node": 1},
    "workload": {"kind": "lublin", "jobs": 4096, "estimates": {"model": "exact"}},
}


class _StartCounter(SchedulerHooks):
    """Counts job starts (for ``episode_end="placed"``)."""

    def __init__(self):
        self.starts = 0

    def job_started(self, job) -> None:
        """One more start."""
        self.starts += 1


class SchedulingEnv(gym.Env):
    """Gymnasium environment: the agent schedules the SimPy model (see :mod:`cosim.env`).

    Args:
        scenario: a scenario file or :class:`cosim.config.Scenario`; None uses
            :data:`DEFAULT_SCENARIO` (256 cores, Lublin-Feitelson jobs).
        actions: the action model, ``start``, ``select`` or ``dras``
            (:mod:`cosim.env.actions`).
        observation: ``compact``, ``kernel``, ``image`` or ``dras``; default per
            action model (``start``: compact, ``select``: kernel, ``dras``: dras).
        window: ``start``: ``(M_head, M_tail)`` (DBF split window; M_tail = 0
            is the classic head window), default ``(10, 0)``; ``select``: N
            queued jobs to choose from, default 128; ``dras``: W, default 50.
        kill_slots: K running jobs the agent may kill (``start`` only).
        backfill: ``select``: ``easy`` or ``none`` around the agent's reservation.
        backfill_order: ``select``: the static heuristic ordering backfill candidates.
        reserve: ``select``: ``easy`` (the agent's choice is re-made at every
            decision point, like EASY's head) or ``sticky`` (RLScheduler: held
            until it starts).
        reward: one of :data:`cosim.env.rewards.REWARDS`.
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
            The default slot length is sized to the workload: its longest request
            spans 3/4 of the rows (DeepRM: jobs of up to 15 time units in a
            20-row image), so 1 s for the DeepRM jobs and hours for Lublin's.
        node_rows: node rows R of the ``dras`` observation (default: the
            cluster's units, at most 256).
        time_scale: seconds that normalize integral rewards (and the SMDP discount).
        smdp_gamma: discount per ``time_scale`` seconds of integral rewards within
            each step (thesis eq. 2.18), or None; the learner then discounts
            between decisions by the same rule (``agents train --smdp-gamma``).
        reward_weights: w1, w2, w3 for ``dbf`` and ``capability``.
        tau: bounded-slowdown bound (s) of the slowdown rewards and episode
            metrics; default the scenario's ``metrics.tau`` (1 in the DeepRM
            setting, so a job's weight is 1/T as in DeepRM's reward).
        teacher: a heuristic policy name; ``info["teacher_action"]`` then holds
            the action it would take now.
        max_time: the time that maps to 1.0 in time features (default: from the workload).
        queue_norm: the job count that maps to 1.0 in the log-scaled queue, running
            and backlog counts. A constant, not the episode length, so an agent
            trained on short episodes sees the same scale on a whole trace.
        guard_wait: starvation guard (s): once the queue's oldest job has waited
            this long it is protected (see :mod:`cosim.env.actions`). None
            (default) leaves the agent free.
        max_skips: ``inspect``: consecutive skips allowed (default 4).
        base_policy: ``kill`` and ``inspect``: the policy that schedules (a heuristic name, or a
            factory of fresh policies), default ``sjf+easy``.
        predictions: ``predictions(workload) -> PredictionHub``, called for each
            episode: the agent then sees pre-run predictions instead of user
            estimates, and running jobs' expected ends follow remaining-time
            predictions (the composition, e.g. ``cosim.compose.make_env``,
            builds it from ``predictors``).
        workload: a prepared workload (skips loading the scenario's).

    Examples:
        >>> env = SchedulingEnv(None, actions="select", episode_jobs=64)
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, int(info["action_mask"].sum()) >= 1
        ((128, 18), True)
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario: str | Path | Scenario | None = None, *, actions: str = "start",
                 observation: str | None = None, window=None, kill_slots: int = 0,
                 backfill: str = "easy", backfill_order: str = "fcfs", reserve: str = "easy",
                 reward: str = "slowdown",
                 episode_jobs: int = 256, episode_end: str = "completed",
                 episode_source: str = "window", horizon: int = 8, image_slots: int = 20,
                 image_slot_s: float | None = None, node_rows: int | None = None,
                 time_scale: float = 3600.0, smdp_gamma: float | None = None,
                 reward_weights=(1 / 3, 1 / 3, 1 / 3), tau: float | None = None,
                 teacher: str | None = None, max_time: float | None = None,
                 queue_norm: float = 4096.0, guard_wait: float | None = None, curriculum=None,
                 predictions: Callable | None = None, base_policy=None, workload=None,
                 base_dir: str | Path | None = None, max_skips: int | None = None):
        if scenario is None:
            scenario = scenario_from_dict(DEFAULT_SCENARIO, "the default scenario")
        elif not isinstance(scenario, Scenario):
            base_dir = base_dir or Path(scenario).resolve().parent
            scenario = load_scenario(scenario)
        observation = observation or DEFAULT_OBSERVATIONS.get(actions, "compact")
        if observation not in OBSERVATIONS:
            raise ScenarioError("observation", repr(observation), f"one of {', '.join(OBSERVATIONS)}")
        if reward in RENAMED:
            warnings.warn(f"reward {reward!r} is now called {RENAMED[reward]!r}",
                          DeprecationWarning, stacklevel=2)
            reward = RENAMED[reward]
        if reward not in REWARDS:
            raise ScenarioError("reward", repr(reward), f"one of {', '.join(REWARDS)}")
        if episode_end not in ("placed", "completed"):
            raise ScenarioError("episode_end", repr(episode_end), "placed or completed")
        if guard_wait is not None and not guard_wait >= 0:
            raise ScenarioError("guard_wait", repr(guard_wait), "seconds >= 0")
        self.guard_wait = None if guard_wait is None else float(guard_wait)
        self.actions = actions
        self.backfill, self.backfill_order = backfill, backfill_order
        self._model_args = dict(window=window, kill_slots=int(kill_slots),
                                guard_wait=self.guard_wait, backfill=backfill,
                                backfill_order=backfill_order, reserve=reserve, max_skips=max_skips)
        if actions in ("kill", "inspect"):
            self.base_policy = base_policy or "sjf+easy"
            if isinstance(self.base_policy, str):
                make_policy(self.base_policy, where="base_policy")   # validate the name now
        else:
            self.base_policy = None
        self.scenario = scenario
        # Validates the options (a callable base policy is only called per episode).
        self.amap = self._new_model(None, base=make_policy("fcfs") if self.base_policy else None).amap
        self.window = (self.amap.m_head, self.amap.m_tail) if actions == "start" else self.amap.window
        self.scenario = scenario
        self.base_dir = base_dir
        self.workload = workload if workload is not None else load_workload(scenario, base_dir=base_dir)
        if episode_jobs < 1 or episode_jobs > len(self.workload):
            raise ScenarioError("episode_jobs", str(episode_jobs),
                                f"between 1 and the workload's {len(self.workload)} jobs")
        self._episodes = make_episode_source(episode_source, self.workload, int(episode_jobs),
                                             curriculum)
        self.observation_kind = observation
        self.reward_kind = reward
        self.episode_jobs = int(episode_jobs)
        self.episode_end = episode_end
        self.episode_source = episode_source
        self.horizon = int(horizon)
        self.image_slots = int(image_slots)
        if self.horizon < 0 or self.image_slots < 1:
            raise ScenarioError("horizon/image_slots", f"{horizon}/{image_slots}",
                                "horizon >= 0 and image_slots >= 1")
        if image_slot_s is None:
            image_slot_s = default_image_slot(self.workload, self.image_slots)
        if not image_slot_s > 0:
            raise ScenarioError("image_slot_s", repr(image_slot_s), "seconds > 0")
        self.image_slot_s = float(image_slot_s)
        if not time_scale > 0:
            raise ScenarioError("time_scale", repr(time_scale), "seconds > 0")
        self.time_scale = float(time_scale)
        if smdp_gamma is not None and not 0 < smdp_gamma <= 1:
            raise ScenarioError("smdp_gamma", repr(smdp_gamma), "a discount in (0, 1]")
        self.smdp_gamma = smdp_gamma
        self.weights = tuple(float(w) for w in reward_weights)
        if len(self.weights) != 3:
            raise ScenarioError("reward_weights", repr(reward_weights), "three weights w1, w2, w3")
        self.tau = float(scenario.metrics.tau if tau is None else tau)
        if not self.tau > 0:
            raise ScenarioError("tau", repr(tau), "seconds > 0")
        self.max_time = float(max_time or default_max_time(self.workload))
        if not queue_norm >= 1:
            raise ScenarioError("queue_norm", repr(queue_norm), "a job count >= 1")
        self.queue_norm = float(queue_norm)
        self.teacher_name = teacher
        if teacher is not None and not (actions == "kill" and teacher == "rule"):
            make_policy(teacher, where="teacher")   # validate the name now
        self.predictions = predictions
        c = scenario.cluster
        self._capacity = c.nodes if c.granularity == "node" else c.nodes * c.cores_per_node
        self.node_rows = int(node_rows or default_node_rows(self._capacity))
        if self.node_rows < 1:
            raise ScenarioError("node_rows", repr(node_rows), "at least 1")
        self._reward_params = RewardParams(tau=self.tau, time_scale=self.time_scale,
                                           smdp_gamma=smdp_gamma, weights=self.weights,
                                           capacity=self._capacity)
        self._encoder = make_encoder(observation, ObservationConfig(
            amap=self.amap, capacity=self._capacity, mem_capacity=c.memory_per_node * c.nodes,
            max_time=self.max_time, queue_norm=self.queue_norm, horizon=self.horizon,
            image_slots=self.image_slots, image_slot_s=self.image_slot_s,
            node_rows=self.node_rows))
        self.action_space = spaces.Discrete(self.amap.n)
        self.observation_space = self._encoder.space
        self._sim = None
        self._agent: AgentPolicy | None = None
        self._signal = None

    @property
    def curriculum(self) -> list:
        """The curriculum's workloads (empty unless ``episode_source="curriculum"``)."""
        eps = self._episodes
        return eps.workloads if isinstance(eps, CurriculumEpisodes) else []

    @property
    def level(self) -> int:
        """The level being asked: 2 while the ``dras`` model picks backfill jobs, else 1."""
        return self._agent.level if self._agent is not None else 1

    @property
    def capacity(self) -> int:
        """Schedulable units of the machine (cores, or nodes on a node-granular cluster)."""
        return self._capacity

    @property
    def curriculum_position(self) -> int:
        """Episodes of the curriculum started so far (0 unless ``episode_source="curriculum"``)."""
        eps = self._episodes
        return eps.position if isinstance(eps, CurriculumEpisodes) else 0

    # -- Gymnasium API -----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode on a fresh window of jobs; returns ``(obs, info)``.

        ``options={"jobs": workload}`` plays that workload instead (any
        curriculum a trainer drives itself). ``options={"episode": k}`` says
        this is the trainer's k-th episode: with ``episode_source="curriculum"``
        it plays workload k of the curriculum (the trainer's position, saved in
        its checkpoints); other sources ignore it.
        """
        super().reset(seed=seed)
        options = options or {}
        jobs = options.get("jobs")
        if jobs is None:
            jobs = self._episodes.next(self.np_random, options.get("episode"))
        self._sim_env = simpy.Environment()
        self._agent = self._new_model(self._on_post, workload=jobs)
        self._reward = make_reward(self.reward_kind, self._reward_params)
        self._starts = _StartCounter()
        hooks = [self._reward, self._starts]
        self._hub = self.predictions(jobs) if self.predictions is not None else None
        if self._hub is not None:
            hooks.insert(0, self._hub)
        if self.actions == "kill":
            if self._hub is None:
                raise ScenarioError("predictions", "nothing", "remaining-time predictions for "
                                    "actions='kill' (e.g. --predictor rnn)")
            self._agent.bind(self._hub)
        self._sim = build(self._sim_env, self.scenario, self._agent, workload=jobs, hooks=hooks)
        self._encoder.reset()
        self._last_decision_t = 0.0
        self._sim.finished.callbacks.append(lambda _event: self._wake_env())
        self._run_to_next_decision()
        return self._observe(), self._info(0.0)

    def step(self, action):
        """Apply one action and run to the next decision point."""
        agent = self._agent
        if agent is None or agent.request is None:
            raise RuntimeError("step() called after the episode ended; call reset()")
        kind = agent.answer(int(action))
        reward = self._reward.on_action(kind)
        self._run_to_next_decision()
        truncated = self.episode_end == "placed" and self._starts.starts >= self.episode_jobs
        now = float(self._sim_env.now)
        reward += self._reward.collect(now)
        terminated = agent.request is None and not truncated
        dt = now - self._last_decision_t
        self._last_decision_t = now
        info = self._info(dt)
        info["action_kind"] = kind
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

    def acting_policy(self, act: Callable[[np.ndarray, np.ndarray], int], *,
                      name: str = "agent", base=None, hub=None) -> AgentPolicy:
        """A plain policy that answers decision points in process with ``act(obs, mask)``.

        It sees exactly what this environment's agent would (same action
        model, window, mask, guard and observation), so a trained agent runs
        in ``python -m cosim run`` like any heuristic. Each call gives a fresh
        policy for one simulation. For ``actions="kill"``, ``base`` is the
        policy that schedules (default: the env's ``base_policy``) and ``hub``
        the run's prediction hub.
        """
        encoder = make_encoder(self.observation_kind, self._encoder.cfg)
        encoder.reset()
        policy = self._new_model(None, base=base)
        if hub is not None:
            policy.bind(hub)
        return policy.acting(encoder.encode, act, name=name)

    def _new_model(self, on_post, base=None, workload=None) -> AgentPolicy:
        """A fresh action model (for ``kill``, with a fresh base policy and the scenario's rule)."""
        extra = {}
        if self.base_policy is not None:   # kill, inspect
            from cosim.prediction_hub import KillRule

            if base is None:
                base = self.base_policy
                base = make_policy(base) if isinstance(base, str) else base(workload)
            extra = {"base": base}
            if self.actions == "kill":
                extra["rule"] = KillRule.from_config(self.scenario.predictor.kill)
        return make_action_model(self.actions, on_post=on_post, **self._model_args, **extra)

    # -- the co-simulation handshake ----------------------------------------------------
    def _on_post(self, request: simpy.Event) -> None:
        self._wake_env()

    @property
    def predictions_hub(self):
        """The episode's prediction hub (None without ``predictions``)."""
        return self._hub

    def _wake_env(self) -> None:
        if self._signal is not None and not self._signal.triggered:
            self._signal.succeed()

    def _run_to_next_decision(self) -> None:
        env = self._sim_env
        self._signal = env.event()
        if self._sim.finished.triggered and self._agent.request is None:
            return
        env.run(until=self._signal)
        self._signal = None

    # -- observations, info, metrics -------------------------------------------------------
    def _observe(self) -> np.ndarray:
        if self._sim is None:
            return self._encoder.empty()
        return self._encoder.encode(self._sim.scheduler.view, self._agent)

    def _info(self, dt: float) -> dict[str, Any]:
        info: dict[str, Any] = {"action_mask": self._agent.mask.copy(), "dt": float(dt),
                                "time": float(self._sim_env.now), "placed": self._starts.starts}
        if self.teacher_name is not None:
            info["teacher_action"] = self.teacher_action(self.teacher_name)
        return info

    def teacher_action(self, name: str) -> int:
        """The action heuristic ``name`` would take now (see :func:`cosim.env.teacher.teacher_action`)."""
        if self._agent is None or self._agent.request is None:
            return self.amap.wait
        return teacher_action(name, self._sim.scheduler.view, self._agent)

    def episode_metrics(self) -> dict[str, float]:
        """Mean bsld, mean and max wait, utilization and mean queue length so far.

        By :func:`cosim.metrics.headline`, the definitions every report uses
        (averages over finished jobs; the queue length is its time average over
        the span).
        """
        sched = self._sim.scheduler
        jobs = records.jobs_table(sched.jobs, _EPISODE_COLUMNS)
        rows = sched.events
        named = [records.EventRow(*r) for r in rows]
        events = {"time": [r.time for r in named], "queue_len": [r.queue_len for r in named]}
        s = metrics.headline(jobs, events, cores=self._capacity, tau=self.tau)

        def f(key):
            v = s.get(key)
            return math.nan if v is None else float(v)
        return {"jobs": s["jobs_finished"], "mean_bsld": f("bsld_mean"),
                "mean_wait": f("wait_mean"), "max_wait": f("wait_max"),
                "utilization": f("utilization"), "mean_queue": f("queue_len_mean")}


#: Job columns :func:`cosim.metrics.headline` reads.
_EPISODE_COLUMNS = ("submit", "start", "end", "run", "procs", "outcome", "killed_seconds",
                    "killed_core_seconds")


def default_image_slot(workload, image_slots: int) -> float:
    """Image slot length (s) that lets the workload's longest request span 3/4 of the rows.

    DeepRM's image has 20 rows for jobs of up to 15 time units; keeping that
    proportion sizes the image to any workload (1 s for the DeepRM jobs, whose
    requests are 1-15 s, instead of a fixed half hour that put every job in the
    first row).
    """
    longest = float(workload.req_time.max()) if len(workload) else 1.0
    return max(longest / (0.75 * image_slots), 1e-9)


def register() -> None:
    """Register :data:`ENV_ID` with Gymnasium (done on ``import cosim.env``)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="cosim.env:SchedulingEnv",
                     disable_env_checker=True)


def default_max_time(workload) -> float:
    """The time (s) that maps to 1.0 in time features: twice the longest request, at least 1e5 s.

    Training pins it in the saved env config (:func:`cosim.compose.pin_scales`),
    so an agent sees the same scale on any other workload.
    """
    return max(1e5, 2.0 * float(workload.req_time.max()))


def default_node_rows(capacity: int) -> int:
    """Node rows of the ``dras`` observation: the machine's nodes (or cores), at most 256."""
    return min(capacity, 256)


#: ``SchedulingEnv`` keywords its caller supplies (live objects and paths): never
#: settings of a saved env config, a study's ``train.env`` or ``--env``.
ENV_SET_BY_CALLER = ("scenario", "workload", "predictions", "base_dir")


def env_keywords() -> list[str]:
    """The ``SchedulingEnv`` keywords a saved env config may set, in signature order."""
    import inspect

    return [n for n in inspect.signature(SchedulingEnv.__init__).parameters
            if n not in ("self", *ENV_SET_BY_CALLER)]
