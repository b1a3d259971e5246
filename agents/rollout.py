"""Stepping the training environments and collecting rollouts (shared by every learner).

:class:`EnvRunner` steps a Gymnasium vector env whose autoreset is
*disabled*: finished episodes are reset by the runner with seeds drawn from
the training generator. So the final observation of a truncated episode is
exactly what ``step`` returned (never replaced by the reset observation, and
no dependence on ``final_info``, which Gymnasium 1.x's next-step autoreset no
longer sends), and a resumed run can rebuild every env mid-episode by
replaying its actions since the seeded reset.

:func:`collect_rollout` acts ``num_steps`` times in every env and returns a
:class:`Rollout`, whose :meth:`Rollout.finish` computes advantages and
returns; the learners' updates (:mod:`agents.ppo`, :mod:`agents.a2c`,
:mod:`agents.pg`, :mod:`agents.dql`) read it, and :func:`agents.loop.run`
drives the whole.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from torch import nn

from agents.distributions import MaskedCategorical
from agents.gae import compute_gae
from cosim.errors import InputError
from cosim.vector import RayVectorEnv, ShardedVectorEnv

__all__ = ["EnvRunner", "Rollout", "ActFn", "sample_policy", "collect_rollout"]


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


def _indexed(env_fn: Callable[[], gym.Env], index: int) -> gym.Env:
    """Env ``index`` of a runner (bound with :func:`functools.partial`, so it pickles)."""
    return _EpisodeIndexed(env_fn(), index)


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
            ``"auto"`` or ``"HOST:PORT"`` (see :attr:`agents.loop.Args.ray`).
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
        fns = [functools.partial(_indexed, fn, i) for i, fn in enumerate(fns)]
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

    def finish(self, args: Any) -> Rollout:
        """Compute advantages and returns (GAE, truncation bootstrapping, SMDP option).

        ``args`` is the run's :class:`agents.loop.Args` (typed loosely: the loop imports
        this module, not the reverse)."""
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
