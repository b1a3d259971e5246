"""A2C: the update on a hand-checkable batch, and learning the toy and the real task."""

from __future__ import annotations

import numpy as np
import torch
from test_ppo import PickEnv, greedy_return, pair_env, random_return

from agents.a2c import A2CArgs, a2c_update, train
from agents.networks import MLPPolicy
from agents.rollout import EnvRunner, collect_rollout

torch.set_num_threads(1)


def test_defaults_are_a2c_defaults():
    args = A2CArgs()
    assert (args.num_steps, args.optimizer, args.gae_lambda, args.update_epochs) == (5, "rmsprop", 1.0, 1)


def test_one_update_is_one_gradient_step_up_the_policy_gradient_objective():
    runner = EnvRunner([lambda: PickEnv()] * 2, np.random.default_rng(0))
    torch.manual_seed(0)
    net = MLPPolicy(12, 6)
    args = A2CArgs(num_envs=2, num_steps=16, ent_coef=0.0)
    roll = collect_rollout(runner, net, 16, torch.Generator().manual_seed(0)).finish(args)
    b = roll.flat()

    def objective():
        with torch.no_grad():
            logp = torch.log_softmax(net(b["obs"])[0], -1).gather(1, b["actions"][:, None])[:, 0]
        return float((logp * b["advantages"]).mean())

    critic_before = [p.clone() for p in net.critic.parameters()]
    j0 = objective()
    stats = a2c_update(net, torch.optim.SGD(net.parameters(), lr=1e-2), roll, args, 0.0,
                       np.random.default_rng(0))
    # Separate trunks: the actor moved up mean(log pi * A), the critic toward the returns.
    assert objective() > j0
    assert any(not torch.equal(a, p) for a, p in zip(critic_before, net.critic.parameters()))
    assert stats["epochs"] == 1.0 and np.isfinite(stats["value_loss"])


def test_a2c_solves_the_pick_task():
    args = A2CArgs(seed=1, total_steps=10_000, num_envs=4, num_steps=8, lr=3e-3, ent_coef=0.0)
    result = train(lambda: PickEnv(), args)
    assert greedy_return(result.net, PickEnv()) >= 7.5


def test_a2c_beats_random_in_the_real_env():
    args = A2CArgs(seed=1, total_steps=6000, num_envs=4, num_steps=8, lr=3e-3)
    result = train(pair_env, args)
    env = pair_env()
    # Random: about -14.9; shortest first: about -1.18.
    assert greedy_return(result.net, env) >= 0.25 * random_return(env)
