"""The Gymnasium environment class: the SimPy model, answered one decision at a time.

The scheduler's policy is an :class:`~cosim.env.actions.AgentPolicy` that
posts each decision point as a SimPy event; :meth:`SchedulingEnv.step`
answers it and runs the simulation until the next one. Simulated time does
not move while the agent thinks, and heuristics and agents share one code
path (the scheduler validates every decision). The parts live in their own
modules: actions and mask (:mod:`~cosim.env.actions`), observations
(:mod:`~cosim.env.observations`), rewards (:mod:`~cosim.env.rewards`),
episode sources (:mod:`~cosim.env.episodes`) and the teacher
(:mod:`~cosim.env.teacher`). The settings are an
:class:`~cosim.env.spec.EnvSpec`; the action model and the encoder are built
from it by :mod:`~cosim.env.acting`, as for a trained agent run as a policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import simpy
from gymnasium import spaces

from cosim import metrics, records
from cosim.actors.scheduler import SchedulerHooks
from cosim.config import Scenario, load_scenario, scenario_from_dict
from cosim.env.acting import acting_policy, action_model, encoder
from cosim.env.actions import AgentPolicy
from cosim.env.episodes import CurriculumEpisodes, make_episode_source
from cosim.env.rewards import RewardParams, make_reward
from cosim.env.spec import (
    BASED,
    EnvSpec,
    capacity_of,
    default_image_slot,
    default_max_time,
    default_node_rows,
)
from cosim.env.teacher import teacher_action
from cosim.errors import ScenarioError
from cosim.model import build
from cosim.policies import make_policy, parse_policy
from cosim.workloads.loading import load_workload

__all__ = ["SchedulingEnv", "DEFAULT_SCENARIO", "default_image_slot",
           "default_max_time", "default_node_rows"]

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
        spec: the settings, an :class:`~cosim.env.spec.EnvSpec` (or its
            :meth:`~cosim.env.spec.EnvSpec.to_dict`); None: from ``settings``.
        workload: a prepared workload (skips loading the scenario's).
        predictions: ``predictions(workload) -> PredictionHub``, called for each
            episode: the agent then sees pre-run predictions instead of user
            estimates, and running jobs' expected ends follow remaining-time
            predictions (the composition, e.g. ``cosim.compose.make_env``,
            builds it from ``predictors``).
        base_factory: ``actions="kill"``: ``base_factory(workload)`` gives each
            episode's scheduling policy (a trained ``rl:DIR`` base, built by the
            front); default: the spec's heuristic ``base_policy``.
        base_dir: the folder scenario paths are relative to.
        **settings: :class:`~cosim.env.spec.EnvSpec` fields by keyword
            (``gym.make(ENV_ID, actions="select")``), validated by the spec
            and applied over ``spec``; ``curriculum`` may also be a list of
            prepared workloads (live, never saved). The settings, each
            documented in full here:

            - ``actions``: the action model, ``start``, ``select``, ``dras``
              or ``kill`` (:mod:`cosim.env.actions`).
            - ``observation``: ``compact``, ``kernel``, ``image``, ``dras``
              or ``kill``; default per action model (``start``: compact,
              ``select``: kernel, ``dras``: dras).
            - ``window``: ``start``: ``(M_head, M_tail)`` (DBF split window;
              M_tail = 0 is the classic head window), default ``(10, 0)``;
              ``select``: N queued jobs to choose from, default 128;
              ``dras``: W, default 50.
            - ``kill_slots``: K running jobs the agent may kill (``start``; 4
              by default for ``kill``).
            - ``backfill``: ``select``: ``easy`` or ``none`` around the
              agent's reservation; ``backfill_order``: the static heuristic
              ordering backfill candidates; ``reserve``: ``easy`` (re-made
              at every decision point, like EASY's head) or ``sticky``
              (RLScheduler: held until it starts).
            - ``reward``: one of :data:`cosim.env.rewards.REWARDS`.
            - ``episode_jobs``: jobs per episode; ``episode_end``: ``placed``
              (truncate after that many starts) or ``completed``;
              ``episode_source``: ``window`` (random offset), ``jobsets``
              (DRAS phase 1) or ``curriculum``.
            - ``curriculum``: for ``episode_source="curriculum"``, the keyword
              arguments of :func:`cosim.workloads.windows.curriculum` as a
              dict (e.g. ``{"sampled": 20, "periods": 20, "synthetic": 20}``),
              applied to the scenario's workload with ``set_size=episode_jobs``.
            - ``horizon``: event-horizon length H of the compact observation.
            - ``image_slots``, ``image_slot_s``: rows and slot length (s) of
              the image observation; the default slot length lets the
              workload's longest request span 3/4 of the rows (DeepRM).
            - ``node_rows``: node rows R of the ``dras`` observation (default:
              the cluster's units, at most 256).
            - ``time_scale``: seconds that normalize integral rewards (and the
              SMDP discount); ``smdp_gamma``: discount per ``time_scale``
              seconds within each step (thesis eq. 2.18), or None.
            - ``reward_weights``: w1, w2, w3 for ``dbf`` and ``capability``.
            - ``tau``: bounded-slowdown bound (s) of the slowdown rewards and
              episode metrics; default the scenario's ``metrics.tau``.
            - ``teacher``: a heuristic policy name, or two (DRAS's level-1 and
              level-2 teachers, e.g. ``["fcfs", "wfp3"]``); ``info["teacher_action"]``
              then holds the action it would take now.
            - ``max_time``: the time that maps to 1.0 in time features
              (default: from the workload); ``queue_norm``: the job count
              that maps to 1.0 in the log-scaled counts (a constant, so short
              training episodes and a whole trace share one scale).
            - ``guard_wait``: starvation guard (s), or None (the agent is free).
            - ``max_skips``: ``inspect``: consecutive skips allowed (default 4).
            - ``base_policy``: ``kill`` and ``inspect``: the heuristic that schedules
              (default ``sjf+easy``), or ``rl:DIR`` with a ``base_factory``.

    Attributes:
        given_spec: the spec as given; env_spec: it resolved for this scenario
            and workload (:meth:`~cosim.env.spec.EnvSpec.resolved`).

    Examples:
        >>> env = SchedulingEnv(None, actions="select", episode_jobs=64)
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, int(info["action_mask"].sum()) >= 1
        ((128, 18), True)
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario: str | Path | Scenario | None = None,
                 spec: EnvSpec | Mapping[str, Any] | None = None, *,
                 workload=None, predictions: Callable | None = None,
                 base_factory: Callable | None = None, base_dir: str | Path | None = None,
                 **settings: Any):
        if scenario is None:
            scenario = scenario_from_dict(DEFAULT_SCENARIO, "the default scenario")
        elif not isinstance(scenario, Scenario):
            base_dir = base_dir or Path(scenario).resolve().parent
            scenario = load_scenario(scenario)
        curriculum = settings.get("curriculum")
        live_curriculum = None
        if isinstance(curriculum, list | tuple):   # prepared workloads: live, never saved
            live_curriculum = list(settings.pop("curriculum"))
        if spec is None or isinstance(spec, Mapping):
            spec = EnvSpec.from_dict({**(spec or {}), **settings})
        elif settings:
            spec = EnvSpec.from_dict({**spec.to_dict(), **settings})
        base = spec.base_policy
        if (spec.actions in BASED and base_factory is None and isinstance(base, str)
                and parse_policy(base, where="base_policy").kind == "agent"):
            raise ScenarioError("base_policy", repr(base), "a heuristic name here (a trained "
                                "rl:DIR base is loaded by cosim.compose.make_env)")
        self.scenario = scenario
        self.base_dir = base_dir
        self.workload = workload if workload is not None else load_workload(scenario, base_dir=base_dir)
        if spec.episode_jobs > len(self.workload):
            raise ScenarioError("episode_jobs", str(spec.episode_jobs),
                                f"between 1 and the workload's {len(self.workload)} jobs")
        self._episodes = make_episode_source(spec.episode_source, self.workload, spec.episode_jobs,
                                             live_curriculum or spec.curriculum,
                                             mixture=spec.mixture)
        #: The settings as given, and with every default resolved for this
        #: scenario and workload (``gym.Env.spec`` is Gymnasium's registration).
        self.given_spec = spec
        self.env_spec = r = spec.resolved(scenario, self.workload)
        self.actions = r.actions
        self.amap = r.action_map
        self.window = r.window
        self.backfill, self.backfill_order = r.backfill, r.backfill_order
        self.base_policy = r.base_policy
        self.base_factory = base_factory
        self.guard_wait = r.guard_wait
        self.observation_kind = r.observation
        self.reward_kind = r.reward
        self.episode_jobs = r.episode_jobs
        self.episode_end = r.episode_end
        self.episode_source = r.episode_source
        self.horizon = r.horizon
        self.image_slots = r.image_slots
        self.image_slot_s = r.image_slot_s
        self.time_scale = r.time_scale
        self.smdp_gamma = r.smdp_gamma
        self.weights = r.reward_weights
        self.tau = r.tau
        self.max_time = r.max_time
        self.queue_norm = r.queue_norm
        self.teacher_name = r.teacher
        self.node_rows = r.node_rows
        self.predictions = predictions
        self._capacity = capacity_of(scenario)
        self._reward_params = RewardParams(tau=self.tau, time_scale=self.time_scale,
                                           smdp_gamma=r.smdp_gamma, weights=self.weights,
                                           capacity=self._capacity)
        self._encoder = encoder(r, scenario)
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
        if self._agent.request is None and jobs is not options.get("jobs"):
            # A window that never asks the agent (the backfill model on a quiet
            # one) teaches nothing and cannot be stepped: play the source's next.
            self._quiet = getattr(self, "_quiet", 0) + 1
            if self._quiet <= _QUIET_REDRAWS:
                again = {k: v for k, v in options.items() if k != "episode"}
                return self.reset(options=again or None)
        self._quiet = 0
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
        return acting_policy(self.env_spec, self.scenario, self.workload, act, name=name,
                             base=base, hub=hub)

    def _new_model(self, on_post, workload=None) -> AgentPolicy:
        """A fresh action model (``kill``/``inspect``: with a fresh base policy for ``workload``)."""
        base = None
        if self.actions in BASED:
            base = (self.base_factory(workload) if self.base_factory is not None
                    else make_policy(self.base_policy))
        return action_model(self.env_spec, self.scenario, on_post=on_post, base=base)

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
        teacher = self.teacher_name
        if teacher is not None:   # one name, or one per level (DRAS: level 1, level 2)
            name = teacher if isinstance(teacher, str) else teacher[self.level - 1]
            info["teacher_action"] = self.teacher_action(name)
        return info

    def teacher_action(self, name: str) -> int:
        """The action heuristic ``name`` would take now (see :func:`cosim.env.teacher.teacher_action`)."""
        if self._agent is None or self._agent.request is None:
            return self.amap.wait
        return teacher_action(name, self._sim.scheduler.view, self._agent)

    def episode_metrics(self) -> dict[str, float]:
        """Mean bsld, mean and max wait, utilization and mean queue length so far.

        :func:`cosim.metrics.headline`'s keys and values, the names and
        definitions of ``summary.json`` (averages over finished jobs; the queue
        length is its time average over the span), with NaN for undefined.
        """
        sched = self._sim.scheduler
        jobs = records.jobs_table(sched.jobs, _EPISODE_COLUMNS)
        rows = sched.events
        named = [records.EventRow(*r) for r in rows]
        events = {"time": [r.time for r in named], "queue_len": [r.queue_len for r in named]}
        s = metrics.headline(jobs, events, cores=self._capacity, tau=self.tau)
        return {key: (v if key == "jobs_finished" else math.nan if v is None else float(v))
                for key, v in s.items()}


#: Windows drawn at most in a row, at a reset, when none asks the agent anything.
_QUIET_REDRAWS = 100

#: Job columns :func:`cosim.metrics.headline` reads.
_EPISODE_COLUMNS = ("submit", "start", "end", "run", "procs", "outcome", "killed_seconds",
                    "killed_core_seconds")


