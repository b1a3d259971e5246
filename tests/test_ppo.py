"""Masked PPO: the runner's resets and bootstrapping, the update, learning small tasks.

The toy environments defined here are also imported by the other agent tests.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.loop import Args
from agents.networks import MLPPolicy
from agents.ppo import ppo_update, train
from agents.rollout import EnvRunner, Rollout, collect_rollout
from cosim.errors import InputError

torch.set_num_threads(1)


class PickEnv(gym.Env):
    """Pick the one right slot among a random set of legal ones.

    Actions ``0 .. n-2`` are slots, ``n-1`` is "wait" (always legal). Each step
    one slot is the target (always legal); every other slot is legal with
    probability 1/2. Reward 1 for the target, 0 otherwise. Episodes are
    truncated after ``horizon`` steps. ``info["teacher_action"]`` is the target.

    Observation ``compact``: ``[one-hot target (n), mask (n)]``; ``kernel``:
    rows ``[is_target, legal, is_wait]`` per action.
    """

    metadata = {"render_modes": []}

    def __init__(self, n_actions: int = 6, horizon: int = 8, observation: str = "compact"):
        self.n = n_actions
        self.horizon = horizon
        self.kind = observation
        shape = (2 * n_actions,) if observation == "compact" else (n_actions, 3)
        self.observation_space = spaces.Box(0.0, 1.0, shape=shape, dtype=np.float32)
        self.action_space = spaces.Discrete(n_actions)

    def _draw(self):
        rng = self.np_random
        self.target = int(rng.integers(0, self.n - 1))
        self.mask = (rng.random(self.n) < 0.5).astype(np.int8)
        self.mask[self.target] = 1
        self.mask[-1] = 1

    def _obs(self):
        if self.kind == "compact":
            obs = np.zeros(2 * self.n, np.float32)
            obs[self.target] = 1.0
            obs[self.n:] = self.mask
        else:
            obs = np.zeros((self.n, 3), np.float32)
            obs[self.target, 0] = 1.0
            obs[:, 1] = self.mask
            obs[-1, 2] = 1.0
        return obs

    def _info(self):
        return {"action_mask": self.mask.copy(), "teacher_action": self.target, "dt": 1.0}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self._draw()
        return self._obs(), self._info()

    def step(self, action):
        reward = 1.0 if int(action) == self.target else 0.0
        self.t += 1
        self._draw()
        truncated = self.t >= self.horizon
        info = self._info()
        if truncated:
            info["episode_metrics"] = {"bsld_mean": 1.0, "wait_mean": 0.0,
                                       "utilization": reward, "wait_max": 0.0}
        return self._obs(), reward, False, truncated, info

    def action_masks(self):
        return self.mask.copy()


class CountEnv(gym.Env):
    """Observation = steps taken so far (a scalar); reward 1 per step.

    Ends after ``length`` steps: truncated, or terminated when ``terminate``.
    The mask allows only action 0.
    """

    def __init__(self, length: int = 3, terminate: bool = False):
        self.length = length
        self.terminate = terminate
        self.observation_space = spaces.Box(0.0, 100.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {"action_mask": np.array([1, 0], np.int8)}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        return (np.array([float(self.t)], np.float32), 1.0, end and self.terminate,
                end and not self.terminate, {"action_mask": np.array([1, 0], np.int8),
                                             "dt": 10.0 * self.t})


class IdentityValue(torch.nn.Module):
    """A 'network' whose value is the observation itself and whose logits are 0."""

    def forward(self, obs):
        return torch.zeros(obs.shape[0], 2), obs[:, 0].clone()


def greedy_return(net, env, episodes=20, seed=100):
    total = 0.0
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        done = False
        while not done:
            with torch.no_grad():
                logits, _ = net(torch.as_tensor(obs)[None])
            logits[0, info["action_mask"] == 0] = -math.inf
            obs, r, term, trunc, info = env.step(int(logits.argmax()))
            total += r
            done = term or trunc
    return total / episodes


def test_runner_keeps_the_final_observation_of_a_truncated_episode():
    runner = EnvRunner([lambda: CountEnv(3)] * 2, np.random.default_rng(0))
    roll = collect_rollout(runner, IdentityValue(), 4, torch.Generator().manual_seed(0))
    # Obs were 0,1,2 then reset to 0: values are the observations.
    assert roll.values[:, 0].tolist() == [0.0, 1.0, 2.0, 0.0]
    assert roll.truncated[:, 0].tolist() == [False, False, True, False]
    # The final observation (3), not the reset one (0), gave the bootstrap value.
    assert roll.final_values[2].tolist() == [3.0, 3.0]
    assert roll.last_values.tolist() == [1.0, 1.0]
    assert [e["length"] for e in roll.episodes] == [3, 3]
    assert [e["return"] for e in roll.episodes] == [3.0, 3.0]
    roll.finish(Args(gamma=0.5, gae_lambda=1.0))
    # Returns: t=2: 1 + 0.5*3 = 2.5; t=1: 1 + 0.5*2.5 = 2.25; t=0: 2.125; t=3: 1 + 0.5*1.
    assert roll.returns[:, 0].tolist() == [2.125, 2.25, 2.5, 1.5]


def test_terminated_episode_is_not_bootstrapped_and_smdp_discount_uses_dt():
    runner = EnvRunner([lambda: CountEnv(2, terminate=True)], np.random.default_rng(0))
    roll = collect_rollout(runner, IdentityValue(), 2, torch.Generator().manual_seed(0))
    assert roll.terminated[:, 0].tolist() == [False, True]
    assert roll.dt[:, 0].tolist() == [10.0, 20.0]
    roll.finish(Args(gamma=0.5, gae_lambda=1.0, smdp=True, time_scale=10.0))
    # t=1 terminal: 1; t=0: 1 + 0.5**(10/10) * 1 = 1.5.
    assert roll.returns[:, 0].tolist() == [1.5, 1.0]


def test_runner_seeds_every_episode_from_its_generator():
    def episodes(seed):
        runner = EnvRunner([lambda: PickEnv()] * 2, np.random.default_rng(seed))
        roll = collect_rollout(runner, MLPPolicy(12, 6), 20, torch.Generator().manual_seed(1))
        return roll.obs.tobytes(), roll.masks.tobytes()
    assert episodes(3) == episodes(3)
    assert episodes(3) != episodes(4)


def test_ppo_update_changes_the_policy_only_on_legal_actions_and_respects_kl_stop():
    runner = EnvRunner([lambda: PickEnv()] * 2, np.random.default_rng(0))
    torch.manual_seed(0)
    net = MLPPolicy(12, 6)
    args = Args(num_steps=16, num_minibatches=2, update_epochs=50, target_kl=0.001, lr=1e-2)
    roll = collect_rollout(runner, net, 16, torch.Generator().manual_seed(0)).finish(args)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    stats = ppo_update(net, opt, roll, args, 0.0, np.random.default_rng(0))
    assert stats["epochs"] < 50            # stopped early on KL
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        assert np.isfinite(stats[key])


def test_mimic_term_alone_teaches_the_teacher():
    runner = EnvRunner([lambda: PickEnv()] * 4, np.random.default_rng(0))
    torch.manual_seed(0)
    net = MLPPolicy(12, 6)
    # No reward signal (coefficients off), only the imitation term.
    args = Args(num_steps=32, ent_coef=0.0, vf_coef=0.0, target_kl=None, lr=3e-3, clip_coef=1e9)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(0)
    for _ in range(15):
        roll = collect_rollout(runner, net, 32, gen).finish(args)
        roll.advantages[:] = 0.0
        stats = ppo_update(net, opt, roll, args, 1.0, np.random.default_rng(0))
    assert stats["mimic_loss"] < 0.2
    assert greedy_return(net, PickEnv()) >= 7.5


@pytest.mark.parametrize("observation", ["compact", "kernel"])
def test_ppo_solves_the_pick_task(observation):
    args = Args(seed=3, total_steps=6144, num_envs=4, num_steps=64, lr=3e-3, update_epochs=4,
                ent_coef=0.0)
    result = train(lambda: PickEnv(observation=observation), args)
    env = PickEnv(observation=observation)
    assert result.update == 24 and result.global_step == 6144
    # Random legal choice scores about 2 of 8; the right slot every time scores 8.
    assert greedy_return(result.net, env) >= 7.5
    assert result.curve[-1]["mean_return"] >= 6.5
    assert result.curve[0]["mean_return"] < 4.5


def test_learning_curve_rows_and_lr_decay():
    args = Args(total_steps=256, num_envs=2, num_steps=32, lr=1e-3)
    rows = []
    result = train(lambda: PickEnv(), args, log=rows.append)
    assert len(result.curve) == 4 and rows == result.curve
    assert [r["lr"] for r in result.curve] == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert [r["global_step"] for r in result.curve] == [64, 128, 192, 256]
    assert all(r["episodes"] == 8 for r in result.curve)      # 64 steps / 8 per episode
    assert result.curve[0]["utilization"] in (0.0, 1.0) or 0 <= result.curve[0]["utilization"] <= 1
    assert 0 <= result.curve[0]["teacher_agreement"] <= 1


def test_worker_processes_train_exactly_like_in_process_envs():
    # async_envs steps 3 pair envs in 2 ShardedVectorEnv workers: same seeds,
    # same per-env semantics, so the same learning curve bit for bit.
    curves = []
    for async_envs in (False, True):
        args = Args(seed=5, total_steps=192, num_envs=3, num_steps=32, async_envs=async_envs)
        result = train(pair_env, args)
        curves.append([{k: v for k, v in row.items() if k not in ("fps", "elapsed_s")}
                       for row in result.curve])
    assert len(curves[0]) == 2 and curves[0] == curves[1]


def test_ray_actors_train_exactly_like_in_process_envs(ray_cluster):
    # Args.ray steps the same 3 envs in 2 Ray actors (RayVectorEnv) of the
    # test run's local Ray: the same learning curve bit for bit.
    curves = []
    for ray in (None, "local"):
        args = Args(seed=5, total_steps=192, num_envs=3, num_steps=32, ray=ray)
        result = train(pair_env, args)
        curves.append([{k: v for k, v in row.items() if k not in ("fps", "elapsed_s")}
                       for row in result.curve])
    assert len(curves[0]) == 2 and curves[0] == curves[1]
    assert ray_cluster.ray.is_initialized()      # the run used the test's Ray and left it up


def test_bad_args_are_input_errors():
    with pytest.raises(InputError, match="args.num_envs: expected a positive integer, got 0"):
        train(lambda: PickEnv(), Args(num_envs=0))
    with pytest.raises(InputError, match="args.optimizer: expected adam or rmsprop"):
        Args(optimizer="sgd").validate()


def test_smdp_without_dt_is_a_clear_error():
    class NoDt(PickEnv):
        def _info(self):
            return {"action_mask": self.mask.copy()}
    with pytest.raises(InputError, match="args.smdp"):
        train(lambda: NoDt(), Args(total_steps=16, num_steps=16, num_minibatches=1, smdp=True))


def test_rollout_flat_shapes():
    runner = EnvRunner([lambda: PickEnv(observation="kernel")] * 3, np.random.default_rng(0))
    from agents.networks import KernelPolicy
    roll = collect_rollout(runner, KernelPolicy(3), 5, torch.Generator().manual_seed(0))
    assert isinstance(roll, Rollout)
    roll.finish(Args())
    flat = roll.flat()
    assert flat["obs"].shape == (15, 6, 3) and flat["masks"].shape == (15, 6)
    assert flat["masks"].dtype == torch.bool
    # Sampled actions are always legal.
    assert bool(flat["masks"].gather(1, flat["actions"][:, None]).all())


# -- the real environment ----------------------------------------------------------------
def pair_workload(n_batches: int = 100, seed: int = 0):
    """Every 2000 s: a 5 s full-machine job, then 1 s later a 10 s and a 500 s one (random order).

    When the pair can start, the obviously right choice is the 10 s job
    first (shortest job first minimizes the summed completion times).
    """
    from cosim.workloads.base import Workload

    rng = np.random.default_rng(seed)
    submit, run = [], []
    for k in range(n_batches):
        pair = [10.0, 500.0] if rng.random() < 0.5 else [500.0, 10.0]
        submit += [2000.0 * k, 2000.0 * k + 1, 2000.0 * k + 1]
        run += [5.0, *pair]
    return Workload.from_columns(submit=submit, run=run, procs=[8] * len(run))


def pair_env(observation: str = "kernel", teacher: str | None = "sjf", **kwargs):
    """The scheduling env on an 8-core machine with :func:`pair_workload`."""
    from cosim.config import scenario_from_dict
    from cosim.env import SchedulingEnv

    scenario = scenario_from_dict({"cluster": {"nodes": 8},
                                   "workload": {"kind": "swf", "path": "unused"}})
    kw = dict(observation=observation, window=(4, 0), episode_jobs=24, reward="completion",
              teacher=teacher)
    kw.update(kwargs)
    return SchedulingEnv(scenario, workload=pair_workload(), **kw)


def random_return(env, episodes=20, seed=100, teacher=False):
    """Mean return of uniformly random legal actions (or of the env's teacher)."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            action = info["teacher_action"] if teacher else int(rng.choice(legal))
            obs, r, term, trunc, info = env.step(action)
            total += r
            done = term or trunc
    return total / episodes


def test_ppo_learns_shortest_first_in_the_real_env():
    from agents.imitation import agreement, collect_demonstrations

    args = Args(seed=1, total_steps=3072, num_envs=4, num_steps=32, lr=3e-3)
    result = train(pair_env, args)
    held_out = collect_demonstrations(pair_env, 400, seed=7)
    assert agreement(result.net, held_out) >= 0.95
    env = pair_env()
    # Random: about -14.9; shortest first (the teacher): about -1.18.
    assert greedy_return(result.net, env) >= random_return(env, teacher=True) - 0.05
    assert random_return(env) < -10
