"""Masked PPO for the scheduling environment, readable top to bottom.

Proximal Policy Optimization (Schulman et al. 2017) with invalid-action
masking (thesis, seed 003, section 2.5.3): the env's ``info["action_mask"]``
is stored with each transition and applied again in the update. Optionally
the RLSchert imitation term (seed 001, eq. 11), ``alpha_t * -log pi(a_teacher
| s)``, with ``alpha_t`` decaying linearly to 0 (seed 001, section 3.5:
large at first, zero at the end), from ``info["teacher_action"]``.

The file has four parts:

1. :class:`Args`, one documented field per hyper-parameter (defaults follow
   the thesis' table 5.2 and RLSchert's table 4 where they agree with common
   PPO practice).
2. :class:`EnvRunner`, which steps a Gymnasium vector env whose autoreset is
   *disabled*: finished episodes are reset by the runner with seeds drawn
   from the training generator. So the final observation of a truncated
   episode is exactly what ``step`` returned (never replaced by the reset
   observation, and no dependence on ``final_info``, which Gymnasium 1.x's
   next-step autoreset no longer sends), and a resumed run can rebuild every
   env mid-episode by replaying its actions since the seeded reset.
3. :func:`collect_rollout` and :func:`ppo_update`: the data and the loss.
4. :func:`train` (and :func:`run`, the loop shared with :mod:`agents.a2c`, :mod:`agents.pg`
   and :mod:`agents.dql` through :class:`Learner`):
   learning-rate decay, logging, checkpoints, exact resume.

Examples:
    >>> from agents.ppo import Args, train                       # doctest: +SKIP
    >>> result = train(lambda: MyMaskedEnv(), Args(total_steps=20_000))  # doctest: +SKIP
    >>> result.curve[-1]["mean_return"]                          # doctest: +SKIP
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from torch import nn

from agents.checkpoint import (
    capture_rng,
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from agents.distributions import MaskedCategorical
from agents.gae import compute_gae
from agents.networks import make_network, network_from_spec
from cosim.errors import InputError
from cosim.vector import RayVectorEnv, ShardedVectorEnv

__all__ = ["Args", "EnvRunner", "Rollout", "TrainResult", "Learner", "collect_rollout",
           "sample_policy", "ppo_update", "check_discounting", "train", "run", "CURVE_FIELDS",
           "METRIC_KEYS"]

#: Per-episode scheduling metrics read from ``info["episode_metrics"]``.
METRIC_KEYS = ("mean_bsld", "mean_wait", "utilization", "max_wait", "mean_queue")

#: Columns of the learning curve, one row per update.
CURVE_FIELDS = ("update", "global_step", "episodes", "mean_return", "mean_length",
                *METRIC_KEYS, "policy_loss", "value_loss", "entropy", "approx_kl",
                "clipfrac", "explained_variance", "mimic_loss", "mimic_coef",
                "teacher_agreement", "lr", "epochs", "fps", "elapsed_s", "epsilon",
                "q_mean", "episodes_started")


# ---------------------------------------------------------------------------------------
# 1. Hyper-parameters
# ---------------------------------------------------------------------------------------
@dataclass
class Args:
    """PPO hyper-parameters; :class:`agents.a2c.A2CArgs` changes some defaults."""

    seed: int = 1
    """Seed of everything: network init, action sampling, episode seeds, minibatches."""
    total_steps: int = 100_000
    """Agent decisions to train for, summed over environments."""
    num_envs: int = 1
    """Environments stepped together (one vector env)."""
    async_envs: bool = False
    """Step environments in worker processes (:class:`cosim.vector.ShardedVectorEnv`, one
    worker per core, several environments each) instead of in turn."""
    ray: str | None = None
    """Step environments in Ray actors (:class:`cosim.vector.RayVectorEnv`, one actor per
    CPU of the cluster): ``"local"`` starts a Ray in this process, ``"auto"`` or
    ``"HOST:PORT"`` joins a running cluster; None: no Ray."""
    num_steps: int = 128
    """Decisions per environment in one rollout (batch = num_envs * num_steps)."""
    lr: float = 3e-4
    """Initial learning rate."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the training."""
    optimizer: str = "adam"
    """``adam`` or ``rmsprop``."""
    gamma: float = 0.99
    """Discount per decision, or per ``time_scale`` seconds when ``smdp`` is set."""
    gae_lambda: float = 0.95
    """GAE lambda (1.0 gives n-step returns)."""
    smdp: bool = False
    """Discount by simulated time: ``gamma ** (info['dt'] / time_scale)`` (thesis eq. 2.18)."""
    time_scale: float = 3600.0
    """Seconds that one factor gamma stands for with ``smdp``."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Passes over each rollout."""
    clip_coef: float = 0.2
    """PPO ratio clipping epsilon."""
    clip_vloss: bool = True
    """Clip the value update around the old values too."""
    norm_adv: bool = True
    """Normalize advantages within each minibatch."""
    ent_coef: float = 0.01
    """Entropy bonus weight (entropy over legal actions only)."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = 0.02
    """Stop the epochs of an update when a minibatch's approximate KL exceeds 1.5 x this."""
    mimic_coef: float = 0.0
    """Initial weight alpha_t of the imitation term (RLSchert eq. 11; 0 disables it)."""
    mimic_decay: float = 1.0
    """Fraction of the training over which alpha_t decays linearly to 0."""
    network: str | None = None
    """``mlp``, ``kernel`` or ``cnn``; default from the observation shape."""
    hidden: tuple[int, ...] | None = None
    """Hidden layer sizes (network default when None)."""
    checkpoint_every_s: float = 300.0
    """Wall-clock seconds between checkpoints (one is always written at the end)."""
    checkpoint_every_updates: int | None = None
    """Also checkpoint every this many updates (deterministic; used by tests)."""
    time_budget_s: float | None = None
    """Stop after this much wall time; the LR and alpha_t then decay by elapsed time too."""
    torch_threads: int = 1
    """Threads torch may use (small networks run fastest on one; the machine is shared)."""

    def __post_init__(self) -> None:
        if self.hidden is not None:
            self.hidden = tuple(int(h) for h in self.hidden)

    @property
    def batch_size(self) -> int:
        """Transitions per update."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Updates the training makes (at least one)."""
        return max(1, self.total_steps // self.batch_size)

    def validate(self) -> None:
        """Raise :class:`InputError` for impossible settings."""
        positive = ("total_steps", "num_envs", "num_steps", "num_minibatches", "update_epochs",
                    "torch_threads")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"args.{name}", repr(value), "a positive integer")
        for name in ("lr", "gamma", "time_scale"):
            if not getattr(self, name) > 0:
                raise InputError(f"args.{name}", repr(getattr(self, name)), "a positive number")
        if not 0 <= self.gae_lambda <= 1:
            raise InputError("args.gae_lambda", repr(self.gae_lambda), "a number in [0, 1]")
        if self.gamma > 1:
            raise InputError("args.gamma", repr(self.gamma), "a number in (0, 1]")
        if self.optimizer not in ("adam", "rmsprop"):
            raise InputError("args.optimizer", repr(self.optimizer), "adam or rmsprop")
        if self.mimic_coef < 0 or not 0 < self.mimic_decay <= 1:
            raise InputError("args.mimic_coef/mimic_decay", f"{self.mimic_coef}/{self.mimic_decay}",
                             "mimic_coef >= 0 and 0 < mimic_decay <= 1")
        if self.batch_size < self.num_minibatches:
            raise InputError("args.num_minibatches", str(self.num_minibatches),
                             f"at most the batch size {self.batch_size}")

    def to_dict(self) -> dict[str, Any]:
        """Plain-value dict (JSON and ``weights_only`` safe)."""
        d = asdict(self)
        if d["hidden"] is not None:
            d["hidden"] = list(d["hidden"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        """Inverse of :meth:`to_dict` (unknown keys are an :class:`InputError`)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InputError("args", ", ".join(unknown), f"fields of {cls.__name__}")
        return cls(**d)


#: Fields that may differ between a run and its resumption (they do not change results).
_OPERATIONAL = {"checkpoint_every_s", "checkpoint_every_updates", "async_envs", "ray",
                "torch_threads", "time_budget_s"}


# ---------------------------------------------------------------------------------------
# 2. Environments
# ---------------------------------------------------------------------------------------
class _Replayed:
    """Env factory that rebuilds an env mid-episode: seeded reset, then the same actions."""

    def __init__(self, env_fn: Callable[[], gym.Env], seed: int, actions: Sequence[int],
                 episode: int | None = None):
        self.env_fn = env_fn
        self.seed = int(seed)
        self.actions = [int(a) for a in actions]
        self.episode = episode

    def __call__(self) -> gym.Env:
        env = self.env_fn()
        env.reset(seed=self.seed,
                  options=None if self.episode is None else {"episode": int(self.episode)})
        for a in self.actions:
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                raise RuntimeError("replaying an episode ended it early: the environment is "
                                   "not deterministic given its reset seed and actions")
        return env


class _EpisodeIndexed(gym.Wrapper):
    """Passes env ``index`` its own entry of ``options["episodes"]`` as ``options["episode"]``.

    A vector env hands every sub-env the same options; this is how the runner
    tells each env the index of the episode it starts (the curriculum position:
    a ``SchedulingEnv`` with ``episode_source="curriculum"`` plays workload
    ``index`` of its list; other envs ignore the option).
    """

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index

    def reset(self, *, seed=None, options=None):
        """Reset with this env's episode index."""
        if options and "episodes" in options:
            options = dict(options)
            options["episode"] = int(options.pop("episodes")[self.index])
        return self.env.reset(seed=seed, options=options)


class _IndexedFactory:
    """Picklable factory of :class:`_EpisodeIndexed` envs (worker processes build their own)."""

    def __init__(self, env_fn: Callable[[], gym.Env], index: int):
        self.env_fn, self.index = env_fn, index

    def __call__(self) -> gym.Env:
        return _EpisodeIndexed(self.env_fn(), self.index)


def _rows(info: dict[str, Any], key: str, n: int, default: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-env values of ``info[key]`` from a vector env, ``default`` where absent."""
    out = np.repeat(default[None], n, axis=0)
    present = np.zeros(n, dtype=bool)
    if key in info:
        present = np.asarray(info.get("_" + key, np.ones(n, dtype=bool)), dtype=bool)
        values = np.asarray(info[key])
        out[present] = values[present]
    return out, present


class EnvRunner:
    """Steps ``len(env_fns)`` environments with seeded manual resets.

    After each :meth:`step`, :attr:`obs`, :attr:`mask` and :attr:`teacher`
    describe the states the next actions answer (a finished env already shows
    its next episode); the returned dict holds the final observations of the
    episodes that just ended.

    Episodes are numbered in the order they start (envs in index order at
    each step): :attr:`next_episode` is the curriculum position, and each
    env's reset gets ``options={"episode": k}`` (see :class:`_EpisodeIndexed`),
    so a curriculum env plays its list in order across all envs, and a
    resumed run continues the list where it stopped.

    Args:
        env_fns: one factory per environment.
        rng: generator that draws every episode's reset seed.
        asynchronous: step in worker processes (``ShardedVectorEnv``, one per core).
        resume: a state from :meth:`state_dict` to continue from.
        ray: step in Ray actors (``RayVectorEnv``) on this Ray: ``"local"``,
            ``"auto"`` or ``"HOST:PORT"`` (see :attr:`Args.ray`).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], rng: np.random.Generator, *,
                 asynchronous: bool = False, resume: dict[str, Any] | None = None,
                 ray: str | None = None):
        self.num_envs = len(env_fns)
        self.rng = rng
        fns = list(env_fns)
        if resume is not None:
            seeds = np.asarray(resume["episode_seeds"]).tolist()
            actions = [np.asarray(a).tolist() for a in resume["episode_actions"]]
            if len(seeds) != self.num_envs:
                raise InputError("resume", f"{len(seeds)} environments",
                                 f"{self.num_envs} (the checkpoint's num_envs)")
            # Checkpoints from before episode numbering replay without an index.
            index = (np.asarray(resume["episode_index"]).tolist() if "episode_index" in resume
                     else [None] * self.num_envs)
            fns = [_Replayed(fn, s, a, k) for fn, s, a, k in zip(fns, seeds, actions, index)]
        fns = [_IndexedFactory(fn, i) for i, fn in enumerate(fns)]
        if ray is not None:
            self.envs = RayVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED,
                                     address=None if ray == "local" else ray)
        elif asynchronous:
            self.envs = ShardedVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
        else:
            self.envs = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.DISABLED)
        self.observation_space = self.envs.single_observation_space
        self.action_space = self.envs.single_action_space
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise InputError("environment.action_space", type(self.action_space).__name__,
                             "Discrete")
        self.n_actions = int(self.action_space.n)
        n = self.num_envs
        self.episode_return = np.zeros(n)
        self.episode_length = np.zeros(n, dtype=np.int64)
        if resume is None:
            self.episode_seeds = self.rng.integers(0, 2**31 - 1, size=n)
            self.episode_actions: list[list[int]] = [[] for _ in range(n)]
            self.episode_index = np.arange(n, dtype=np.int64)
            self.next_episode = n
            obs, info = self.envs.reset(seed=[int(s) for s in self.episode_seeds],
                                        options={"episodes": self.episode_index.copy()})
            self.obs = np.asarray(obs, dtype=np.float32)
            self.mask, _ = _rows(info, "action_mask", n, np.ones(self.n_actions, np.int8))
            self.teacher, _ = _rows(info, "teacher_action", n, np.array(-1))
        else:
            self.episode_seeds = np.asarray(resume["episode_seeds"], dtype=np.int64)
            self.episode_actions = [np.asarray(a).tolist() for a in resume["episode_actions"]]
            self.obs = np.asarray(resume["obs"], dtype=np.float32)
            self.mask = np.asarray(resume["mask"], dtype=np.int8)
            self.teacher = np.asarray(resume["teacher"], dtype=np.int64)
            self.episode_return = np.asarray(resume["episode_return"], dtype=np.float64)
            self.episode_length = np.asarray(resume["episode_length"], dtype=np.int64)
            self.episode_index = np.asarray(resume.get("episode_index", np.arange(n)),
                                            dtype=np.int64)
            self.next_episode = int(resume.get("next_episode", n))
        self.mask = self.mask.astype(np.int8)
        self.teacher = self.teacher.astype(np.int64)

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Step every env; reset the finished ones with fresh seeds.

        Returns:
            dict with ``reward``, ``terminated``, ``truncated``, ``dt`` (NaN when
            the env gives none), ``final_obs`` and ``final_mask`` (the
            observation and mask each env reached; for a finished env, before
            its reset) and ``episodes`` (a list of dicts: return, length,
            episode index and the env's ``episode_metrics``).
        """
        n = self.num_envs
        actions = np.asarray(actions, dtype=np.int64)
        obs, reward, terminated, truncated, info = self.envs.step(actions)
        obs = np.asarray(obs, dtype=np.float32)
        reward = np.asarray(reward, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        for i in range(n):
            self.episode_actions[i].append(int(actions[i]))
        self.episode_return += reward
        self.episode_length += 1
        dt, _ = _rows(info, "dt", n, np.array(np.nan))
        mask, _ = _rows(info, "action_mask", n, np.ones(self.n_actions, np.int8))
        teacher, _ = _rows(info, "teacher_action", n, np.array(-1))
        done = terminated | truncated
        episodes = []
        final_obs = obs.copy()
        final_mask = mask.astype(np.int8)
        if done.any():
            metrics = info.get("episode_metrics", {})
            present = np.asarray(info.get("_episode_metrics", np.zeros(n, bool)), dtype=bool)
            for i in np.flatnonzero(done):
                ep = {"return": float(self.episode_return[i]),
                      "length": int(self.episode_length[i]), "env": int(i),
                      "index": int(self.episode_index[i])}
                if present[i] and isinstance(metrics, dict):
                    for k, v in metrics.items():
                        if not k.startswith("_"):
                            ep[k] = float(np.asarray(v)[i])
                episodes.append(ep)
            seeds = self.rng.integers(0, 2**31 - 1, size=n)
            index = self.episode_index.copy()
            ended = np.flatnonzero(done)
            index[ended] = self.next_episode + np.arange(len(ended))
            self.next_episode += len(ended)
            new_obs, new_info = self.envs.reset(seed=[int(s) for s in seeds],
                                                options={"reset_mask": done, "episodes": index})
            obs = np.asarray(new_obs, dtype=np.float32)
            rmask, got = _rows(new_info, "action_mask", n, np.ones(self.n_actions, np.int8))
            mask[done] = np.where(got[done, None], rmask[done], 1)
            rteacher, _ = _rows(new_info, "teacher_action", n, np.array(-1))
            teacher[done] = rteacher[done]
            self.episode_index = index
            for i in ended:
                self.episode_seeds[i] = seeds[i]
                self.episode_actions[i] = []
                self.episode_return[i] = 0.0
                self.episode_length[i] = 0
        self.obs, self.mask, self.teacher = obs, mask.astype(np.int8), teacher.astype(np.int64)
        return {"reward": reward, "terminated": terminated, "truncated": truncated, "dt": dt,
                "final_obs": final_obs, "final_mask": final_mask, "episodes": episodes}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the envs where they are (plain values and tensors)."""
        return {"episode_seeds": torch.as_tensor(self.episode_seeds, dtype=torch.int64),
                "episode_actions": [torch.as_tensor(a, dtype=torch.int64)
                                    for a in self.episode_actions],
                "obs": torch.as_tensor(self.obs), "mask": torch.as_tensor(self.mask),
                "teacher": torch.as_tensor(self.teacher),
                "episode_return": torch.as_tensor(self.episode_return),
                "episode_length": torch.as_tensor(self.episode_length),
                "episode_index": torch.as_tensor(self.episode_index, dtype=torch.int64),
                "next_episode": int(self.next_episode)}

    def close(self) -> None:
        """Close the vector env (and its subprocesses)."""
        self.envs.close()


# ---------------------------------------------------------------------------------------
# 3. Rollouts and the PPO loss
# ---------------------------------------------------------------------------------------
@dataclass
class Rollout:
    """``T x N`` transitions, plus the advantages once :meth:`finish` ran."""

    obs: np.ndarray
    masks: np.ndarray
    teacher: np.ndarray
    actions: np.ndarray
    logprobs: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_values: np.ndarray
    dt: np.ndarray
    last_values: np.ndarray
    episodes: list[dict[str, Any]] = field(default_factory=list)
    final_obs: np.ndarray | None = None
    """Where an episode ended at row ``t``: the observation it reached (off-policy learners)."""
    final_masks: np.ndarray | None = None
    """Where an episode ended at row ``t``: the mask it reached."""
    next_obs: np.ndarray | None = None
    """``(N, ...)``: the observations after the last row (the next rollout's first)."""
    next_masks: np.ndarray | None = None
    """``(N, n_actions)``: their masks."""
    advantages: np.ndarray | None = None
    returns: np.ndarray | None = None

    def finish(self, args: Args) -> Rollout:
        """Compute advantages and returns (GAE, truncation bootstrapping, SMDP option)."""
        dt = None
        if args.smdp:
            if np.isnan(self.dt).any():
                raise InputError("args.smdp", "an environment without info['dt']",
                                 "an environment reporting the time between decisions")
            dt = self.dt
        self.advantages, self.returns = compute_gae(
            self.rewards, self.values, self.terminated, self.truncated, self.final_values,
            self.last_values, gamma=args.gamma, lam=args.gae_lambda, dt=dt,
            time_scale=args.time_scale)
        return self

    def flat(self) -> dict[str, torch.Tensor]:
        """The rollout as ``(T*N, ...)`` tensors for the update."""
        def f(a, dtype):
            return torch.as_tensor(a.reshape(-1, *a.shape[2:]), dtype=dtype)
        return {"obs": f(self.obs, torch.float32), "masks": f(self.masks, torch.bool),
                "teacher": f(self.teacher, torch.int64), "actions": f(self.actions, torch.int64),
                "logprobs": f(self.logprobs, torch.float32),
                "values": f(self.values, torch.float32),
                "advantages": f(self.advantages, torch.float32),
                "returns": f(self.returns, torch.float32)}


ActFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator],
                 tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def sample_policy(net: nn.Module, obs: torch.Tensor, mask: torch.Tensor,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """On-policy acting: ``(action, log-probability, value)`` drawn from the masked policy."""
    logits, value = net(obs)
    dist = MaskedCategorical(logits, mask)
    action = dist.sample(generator)
    return action, dist.log_prob(action), value


@torch.no_grad()
def collect_rollout(runner: EnvRunner, net: nn.Module, num_steps: int,
                    generator: torch.Generator, act: ActFn = sample_policy) -> Rollout:
    """Act ``num_steps`` times in every env with the current (stochastic) policy.

    ``act(net, obs, mask, generator) -> (action, logprob, value)`` chooses
    (default: sample the masked policy; DQL acts epsilon-greedily). The value
    of a truncated episode's final observation is computed here, with the
    same network that produced the other values, for bootstrapping.
    """
    n, shape = runner.num_envs, runner.obs.shape[1:]
    buf = {
        "obs": np.zeros((num_steps, n, *shape), np.float32),
        "masks": np.zeros((num_steps, n, runner.n_actions), np.int8),
        "teacher": np.zeros((num_steps, n), np.int64),
        "actions": np.zeros((num_steps, n), np.int64),
        "logprobs": np.zeros((num_steps, n), np.float32),
        "values": np.zeros((num_steps, n), np.float32),
        "rewards": np.zeros((num_steps, n), np.float64),
        "terminated": np.zeros((num_steps, n), bool),
        "truncated": np.zeros((num_steps, n), bool),
        "final_values": np.zeros((num_steps, n), np.float32),
        "dt": np.zeros((num_steps, n), np.float64),
        "final_obs": np.zeros((num_steps, n, *shape), np.float32),
        "final_masks": np.zeros((num_steps, n, runner.n_actions), np.int8),
    }
    episodes: list[dict[str, Any]] = []
    for t in range(num_steps):
        obs = torch.as_tensor(runner.obs)
        action, logprob, value = act(net, obs, torch.as_tensor(runner.mask), generator)
        buf["obs"][t] = runner.obs
        buf["masks"][t] = runner.mask
        buf["teacher"][t] = runner.teacher
        buf["actions"][t] = action.numpy()
        buf["logprobs"][t] = logprob.numpy()
        buf["values"][t] = value.numpy()
        out = runner.step(action.numpy())
        buf["rewards"][t] = out["reward"]
        buf["terminated"][t] = out["terminated"]
        buf["truncated"][t] = out["truncated"]
        buf["dt"][t] = out["dt"]
        ended = out["terminated"] | out["truncated"]
        if ended.any():
            buf["final_obs"][t, ended] = out["final_obs"][ended]
            buf["final_masks"][t, ended] = out["final_mask"][ended]
        boot = out["truncated"] & ~out["terminated"]
        if boot.any():
            _, final_value = net(torch.as_tensor(out["final_obs"][boot]))
            buf["final_values"][t, boot] = final_value.numpy()
        episodes.extend(out["episodes"])
    _, last_values = net(torch.as_tensor(runner.obs))
    return Rollout(**buf, last_values=last_values.numpy().astype(np.float64), episodes=episodes,
                   next_obs=runner.obs.copy(), next_masks=runner.mask.copy())


def _mimic_loss(dist: MaskedCategorical, teacher: torch.Tensor,
                masks: torch.Tensor) -> torch.Tensor | None:
    """Mean ``-log pi(a_teacher | s)`` over steps whose teacher action is legal."""
    idx = teacher.clamp(min=0)
    valid = (teacher >= 0) & masks.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    if not bool(valid.any()):
        return None
    return -dist.log_prob(idx)[valid].mean()


def ppo_update(net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout, args: Args,
               mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
    """Clipped-surrogate PPO epochs over one rollout; returns the loss statistics.

    Loss per minibatch (RLSchert eq. 11 with the usual signs):
    ``-min(r A, clip(r, 1-eps, 1+eps) A) + vf_coef * value_loss - ent_coef * entropy
    + alpha_t * -log pi(a_teacher | s)``.
    """
    b = rollout.flat()
    batch = b["actions"].shape[0]
    mb_size = max(1, batch // args.num_minibatches)
    stats: dict[str, list[float]] = {k: [] for k in ("policy_loss", "value_loss", "entropy",
                                                     "approx_kl", "clipfrac", "mimic_loss")}
    epochs = 0
    stop = False
    for _ in range(args.update_epochs):
        perm = rng.permutation(batch)
        for start in range(0, batch - mb_size + 1, mb_size):
            idx = torch.as_tensor(perm[start:start + mb_size])
            logits, value = net(b["obs"][idx])
            dist = MaskedCategorical(logits, b["masks"][idx])
            logratio = dist.log_prob(b["actions"][idx]) - b["logprobs"][idx]
            ratio = logratio.exp()
            with torch.no_grad():
                approx_kl = float(((ratio - 1) - logratio).mean())
                clipfrac = float(((ratio - 1.0).abs() > args.clip_coef).float().mean())
            if args.target_kl is not None and approx_kl > 1.5 * args.target_kl:
                stop = True
                break
            adv = b["advantages"][idx]
            if args.norm_adv and len(idx) > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg_loss = torch.max(-adv * ratio,
                                -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
            ret = b["returns"][idx]
            if args.clip_vloss:
                old_v = b["values"][idx]
                v_clipped = old_v + (value - old_v).clamp(-args.clip_coef, args.clip_coef)
                v_loss = 0.5 * torch.max((value - ret) ** 2, (v_clipped - ret) ** 2).mean()
            else:
                v_loss = 0.5 * ((value - ret) ** 2).mean()
            entropy = dist.entropy().mean()
            loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
            mimic = _mimic_loss(dist, b["teacher"][idx], b["masks"][idx]) if mimic_coef > 0 else None
            if mimic is not None:
                loss = loss + mimic_coef * mimic
                stats["mimic_loss"].append(mimic.item())
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
            optimizer.step()
            stats["policy_loss"].append(pg_loss.item())
            stats["value_loss"].append(v_loss.item())
            stats["entropy"].append(entropy.item())
            stats["approx_kl"].append(approx_kl)
            stats["clipfrac"].append(clipfrac)
        if stop:
            break
        epochs += 1
    out = {k: (float(np.mean(v)) if v else math.nan) for k, v in stats.items()}
    out["epochs"] = float(epochs)
    return out


# ---------------------------------------------------------------------------------------
# 4. The training loop (shared with A2C, PG and DQL)
# ---------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    """What :func:`train` returns."""

    net: nn.Module
    curve: list[dict[str, float]]
    global_step: int
    update: int
    checkpoint: Path | None
    finished: bool
    """False when stopped early (``stop_after_updates`` or the time budget)."""


UpdateFn = Callable[[nn.Module, torch.optim.Optimizer, Rollout, Args, float, np.random.Generator],
                    dict[str, float]]


class Learner:
    """An algorithm's part of :func:`run`: how it acts, how it learns, what it keeps.

    The loop (rollouts, learning-rate decay, curve, checkpoints, exact
    resume) is shared; a learner supplies the rest. The default is on-policy
    actor-critic: sample the masked policy, update with ``update_fn`` (PPO,
    A2C). :mod:`agents.pg` keeps its return baseline here, :mod:`agents.dql`
    its target network, replay buffer and epsilon, all saved in checkpoints
    through :meth:`state_dict` (tensors and plain values only).

    Args:
        update_fn: ``(net, optimizer, rollout, args, mimic_coef, rng) -> stats``.
    """

    def __init__(self, update_fn: UpdateFn | None = None):
        self.update_fn = update_fn

    def bind(self, net: nn.Module, args: Args) -> None:
        """Called once the network exists (before any checkpoint is restored)."""

    def act(self, net: nn.Module, obs: torch.Tensor, mask: torch.Tensor,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, log-probability, value)`` for a batch of observations."""
        return sample_policy(net, obs, mask, generator)

    def update(self, net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout,
               args: Args, mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
        """Learn from one rollout; returns statistics for the learning curve."""
        return self.update_fn(net, optimizer, rollout, args, mimic_coef, rng)

    def state_dict(self) -> dict[str, Any]:
        """What must survive a checkpoint besides the network and optimizer."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict`."""


def check_discounting(args: Args, env_config: dict[str, Any] | None) -> None:
    """Refuse a run that would discount rewards two different ways.

    The environment's ``smdp_gamma`` discounts each step's integral reward by
    simulated time within the step (thesis eq. 2.18: the option's reward).
    The consistent learner then discounts *between* decisions by the same
    rule, ``gamma ** (dt / time_scale)`` (``args.smdp``) with the same gamma
    and time scale. A per-decision gamma on top of the env's time discount,
    or two different time discounts, mixes two objectives.

    Raises:
        InputError: the env discounts by time and the learner does not discount
            the same way.
    """
    env_gamma = (env_config or {}).get("smdp_gamma")
    if env_gamma is None:
        return
    env_scale = float((env_config or {}).get("time_scale") or 3600.0)
    if not args.smdp:
        raise InputError("args.smdp", "false with the environment's smdp_gamma="
                         f"{env_gamma} (a per-decision gamma on top of a time discount: "
                         "discounting twice)",
                         "args.smdp=true (--smdp) with gamma and time_scale equal to the "
                         "env's, or no env smdp_gamma")
    if not math.isclose(args.gamma, float(env_gamma)) or not math.isclose(args.time_scale,
                                                                          env_scale):
        raise InputError("args.gamma/time_scale", f"{args.gamma}/{args.time_scale}",
                         f"the environment's smdp_gamma/time_scale {env_gamma}/{env_scale} "
                         "(two different time discounts)")


def _explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    var = float(np.var(returns))
    return math.nan if var == 0 else 1.0 - float(np.var(returns - values)) / var


def _episode_means(episodes: list[dict[str, Any]]) -> dict[str, float]:
    def mean(key):
        vals = [e[key] for e in episodes if key in e and np.isfinite(e[key])]
        return float(np.mean(vals)) if vals else math.nan
    row = {"episodes": float(len(episodes)), "mean_return": mean("return"),
           "mean_length": mean("length")}
    row.update({k: mean(k) for k in METRIC_KEYS})
    return row


def _teacher_agreement(rollout: Rollout) -> float:
    legal = (rollout.teacher >= 0) & (np.take_along_axis(
        rollout.masks, np.clip(rollout.teacher, 0, None)[..., None], -1)[..., 0] > 0)
    if not legal.any():
        return math.nan
    return float(np.mean(rollout.actions[legal] == rollout.teacher[legal]))


def _write_curve(path: Path, rows: list[dict[str, float]], append: bool) -> None:
    new = not append or not path.exists()
    with open(path, "w" if new else "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CURVE_FIELDS), extrasaction="ignore")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _make_optimizer(net: nn.Module, args: Args) -> torch.optim.Optimizer:
    if args.optimizer == "rmsprop":
        return torch.optim.RMSprop(net.parameters(), lr=args.lr, alpha=0.99, eps=1e-5)
    return torch.optim.Adam(net.parameters(), lr=args.lr, eps=1e-5)


def _check_same_args(saved: dict[str, Any], args: Args, where: str) -> None:
    now = args.to_dict()
    diff = [k for k in now if k not in _OPERATIONAL and saved.get(k) != now[k]]
    if diff:
        k = diff[0]
        raise InputError(f"{where}: args.{k}", repr(now[k]),
                         f"{saved.get(k)!r} as in the checkpoint being resumed "
                         f"(differing: {', '.join(diff)})")


def run(algo: str, update_fn: UpdateFn, env_fn: Callable[[], gym.Env] |
        Sequence[Callable[[], gym.Env]], args: Args, *, out_dir: str | Path | None = None,
        resume: bool = False, env_config: dict[str, Any] | None = None,
        init_state_dict: dict[str, Any] | None = None, progress: bool = False,
        stop_after_updates: int | None = None,
        log: Callable[[dict[str, float]], None] | None = None,
        on_start: Callable[[nn.Module], None] | None = None) -> TrainResult:
    """The training loop: rollouts, ``update_fn``, curve, checkpoints, resume.

    Args:
        algo: name stored in checkpoints (``ppo``, ``a2c``, ``pg``, ``dql``).
        update_fn: ``(net, optimizer, rollout, args, mimic_coef, rng) -> stats``, or a
            :class:`Learner` (acting, update and state kept between updates).
        env_fn: an environment factory (called ``num_envs`` times) or one per env.
            Resuming needs environments that are deterministic given their
            reset seed and actions.
        args: hyper-parameters.
        out_dir: where checkpoints and ``curve.csv`` go (None: nowhere).
        resume: continue from ``out_dir``'s latest checkpoint when there is one.
        env_config: JSON description of the environment, saved for
            :func:`agents.rl_policy.load_rl_policy`.
        init_state_dict: network weights to start from (e.g. behaviour cloning).
        progress: show a tqdm progress bar.
        stop_after_updates: stop (after checkpointing) once this many updates are done.
        log: called with every curve row.
        on_start: called once with the network before training (for callers
            that look at it between updates, e.g. to keep the best snapshot).
    """
    args.validate()
    check_discounting(args, env_config)
    learner = update_fn if isinstance(update_fn, Learner) else Learner(update_fn)
    torch.set_num_threads(args.torch_threads)
    env_fns = list(env_fn) if isinstance(env_fn, Sequence) else [env_fn] * args.num_envs
    if len(env_fns) != args.num_envs:
        raise InputError("env_fn", f"{len(env_fns)} factories", f"args.num_envs={args.num_envs}")
    out = Path(out_dir) if out_dir is not None else None
    state = meta = None
    if out is not None and latest_checkpoint(out) is not None:
        if not resume:
            raise InputError(str(out), "an existing training output",
                             "a new directory, or resume=True (--resume) to continue it")
        state, meta = load_checkpoint(out)
        if meta.get("algo") != algo:
            raise InputError(str(out), f"a {meta.get('algo')} checkpoint", f"a {algo} checkpoint")
        _check_same_args(meta["args"], args, str(out))

    seeds = np.random.SeedSequence(args.seed).spawn(2)
    rng = np.random.default_rng(seeds[0])                 # episode seeds, minibatches
    gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))  # action sampling
    runner = EnvRunner(env_fns, rng, asynchronous=args.async_envs, ray=args.ray,
                       resume=state["runner"] if state is not None else None)
    if state is not None:
        net = network_from_spec(meta["network"])
    else:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = make_network(runner.observation_space, runner.action_space, args.network,
                               args.hidden)
    if init_state_dict is not None and state is None:
        net.load_state_dict(init_state_dict)
    learner.bind(net, args)
    optimizer = _make_optimizer(net, args)
    if on_start is not None:
        on_start(net)
    curve: list[dict[str, float]] = []
    update, global_step = 0, 0
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng(state["rng"], rng, gen)
        learner.load_state_dict(state.get("learner", {}))
        update, global_step = int(state["update"]), int(state["global_step"])
        curve = [dict(r) for r in state["curve"]]
    meta_out = {"algo": algo, "args": args.to_dict(), "network": net.spec,
                "env": env_config, "versions": {"torch": torch.__version__,
                                                "gymnasium": gym.__version__,
                                                "numpy": np.__version__}}
    curve_path = out / "curve.csv" if out is not None else None
    if curve_path is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write_curve(curve_path, curve, append=False)

    def checkpoint() -> Path | None:
        if out is None:
            return None
        st = {"model": net.state_dict(), "optimizer": optimizer.state_dict(),
              "update": update, "global_step": global_step,
              "rng": capture_rng(rng, gen), "runner": runner.state_dict(), "curve": curve,
              "learner": learner.state_dict()}
        return save_checkpoint(out, st, {**meta_out, "update": update,
                                         "global_step": global_step})

    bar = None
    timed = args.time_budget_s is not None
    if progress:
        from cosim.cli import progress_bar as tqdm  # no \r frames in logs
        if timed:
            # A time-limited run ends on its budget: show wall time against it.
            done = min(curve[-1]["elapsed_s"], args.time_budget_s) if curve else 0.0
            bar = tqdm(total=round(args.time_budget_s), initial=round(done), unit="s",
                       desc=f"{algo} (time budget)")
        else:
            bar = tqdm(total=args.num_updates * args.batch_size, initial=global_step,
                       unit="step", desc=algo)
    # Wall time already spent before a resume counts toward the time budget.
    t_start = time.monotonic() - (curve[-1]["elapsed_s"] if curve else 0.0)
    last_ckpt_t = time.monotonic()
    last_ckpt_path = None
    stopped_early = False
    try:
        while update < args.num_updates:
            if stop_after_updates is not None and update >= stop_after_updates:
                stopped_early = True
                break
            elapsed = time.monotonic() - t_start
            if args.time_budget_s is not None and elapsed >= args.time_budget_s:
                stopped_early = True
                break
            frac = update / args.num_updates
            if args.time_budget_s is not None:
                frac = max(frac, elapsed / args.time_budget_s)
            lr = args.lr * (1.0 - frac) if args.anneal_lr else args.lr
            for group in optimizer.param_groups:
                group["lr"] = lr
            mimic_coef = args.mimic_coef * max(0.0, 1.0 - frac / args.mimic_decay)
            t0 = time.monotonic()
            rollout = collect_rollout(runner, net, args.num_steps, gen,
                                      learner.act).finish(args)
            stats = learner.update(net, optimizer, rollout, args, mimic_coef, rng)
            update += 1
            global_step += args.batch_size
            row = {"update": float(update), "global_step": float(global_step),
                   **_episode_means(rollout.episodes), **stats,
                   "explained_variance": _explained_variance(rollout.values.ravel(),
                                                             rollout.returns.ravel()),
                   "mimic_coef": mimic_coef, "teacher_agreement": _teacher_agreement(rollout),
                   "lr": lr, "fps": args.batch_size / max(1e-9, time.monotonic() - t0),
                   "elapsed_s": time.monotonic() - t_start,
                   "episodes_started": runner.next_episode}
            row = {k: float(row.get(k, math.nan)) for k in CURVE_FIELDS}
            curve.append(row)
            if curve_path is not None:
                _write_curve(curve_path, [row], append=True)
            if log is not None:
                log(row)
            if bar is not None:
                if timed:
                    bar.update(max(0, min(round(row["elapsed_s"]), bar.total) - bar.n))
                else:
                    bar.update(args.batch_size)
                post = {"steps": global_step} if timed else {}
                if not math.isnan(row["mean_return"]):
                    post["ret"] = f"{row['mean_return']:.3g}"
                bar.set_postfix(post)
            now = time.monotonic()
            due = now - last_ckpt_t >= args.checkpoint_every_s or (
                args.checkpoint_every_updates is not None
                and update % args.checkpoint_every_updates == 0)
            if due and update < args.num_updates:
                last_ckpt_path = checkpoint()
                last_ckpt_t = now
        last_ckpt_path = checkpoint() or last_ckpt_path
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    return TrainResult(net=net, curve=curve, global_step=global_step, update=update,
                       checkpoint=last_ckpt_path, finished=not stopped_early)


def train(env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
          args: Args | None = None, **kwargs) -> TrainResult:
    """Train a masked PPO agent; see :func:`run` for the keyword arguments.

    Args:
        env_fn: environment factory (or one per env) of a Gymnasium env with a
            ``Discrete`` action space, ``info["action_mask"]`` (optional, all
            legal otherwise), ``info["teacher_action"]`` for the mimic term and
            ``info["dt"]`` for SMDP discounting.
        args: hyper-parameters (defaults: :class:`Args`).
        **kwargs: ``out_dir``, ``resume``, ``env_config``, ``init_state_dict``,
            ``progress``, ``stop_after_updates``, ``log``.

    Returns:
        The trained network, its learning curve and where the last checkpoint went.
    """
    return run("ppo", ppo_update, env_fn, args or Args(), **kwargs)
