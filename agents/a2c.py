"""Synchronous n-step advantage actor-critic (A2C) with action masks.

A2cScheduler (seed 002, section 3) trains an actor and a critic from
multi-step returns: the critic minimizes the squared error to the n-step
return, the actor follows ``grad log pi(a|s) * A`` with ``A = G^(n) - V(s)``.
Here the n-step advantage is :func:`agents.gae.compute_gae` with
``lambda = 1`` over rollouts of ``num_steps`` decisions (bootstrapped from the
last value, and from the final observation's value at truncations), and one
gradient step is taken per rollout. Everything else (vector envs, masks,
mimic term, checkpoints, exact resume) is the loop of :mod:`agents.loop`.

Examples:
    >>> from agents.a2c import A2CArgs, train                    # doctest: +SKIP
    >>> result = train(lambda: MyMaskedEnv(), A2CArgs(total_steps=20_000))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.distributions import MaskedCategorical
from agents.imitation import gradient_step
from agents.loop import Args, TrainResult, run
from agents.rollout import Rollout

__all__ = ["A2CArgs", "a2c_update", "train"]


@dataclass
class A2CArgs(Args):
    """A2C hyper-parameters: :class:`agents.loop.Args` with A2C defaults.

    The PPO-only fields (``num_minibatches``, ``update_epochs``, ``clip_coef``,
    ``clip_vloss``, ``target_kl``) are ignored.
    """

    num_envs: int = 4
    num_steps: int = 5
    lr: float = 7e-4
    optimizer: str = "rmsprop"
    gae_lambda: float = 1.0
    norm_adv: bool = False
    num_minibatches: int = 1
    update_epochs: int = 1
    target_kl: float | None = None


def a2c_update(net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout, args: Args,
               mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
    """One actor-critic gradient step on the whole rollout; returns the loss statistics.

    Loss: ``-mean(log pi(a|s) A) + vf_coef * 0.5 * mean((G - V)^2) - ent_coef * entropy
    + alpha_t * -log pi(a_teacher | s)``.
    """
    b = rollout.flat()
    logits, value = net(b["obs"])
    dist = MaskedCategorical(logits, b["masks"])
    logp = dist.log_prob(b["actions"])
    adv = b["advantages"]
    if args.norm_adv and len(adv) > 1:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg_loss = -(logp * adv).mean()
    v_loss = 0.5 * ((value - b["returns"]) ** 2).mean()
    entropy = dist.entropy().mean()
    loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy
    mimic = gradient_step(loss, dist, b["teacher"], b["masks"], mimic_coef, net, optimizer,
                          args.max_grad_norm)
    with torch.no_grad():
        approx_kl = float((b["logprobs"] - logp).mean())
    return {"policy_loss": pg_loss.item(), "value_loss": v_loss.item(),
            "entropy": entropy.item(), "approx_kl": approx_kl, "clipfrac": math.nan,
            "mimic_loss": mimic.item() if mimic is not None else math.nan, "epochs": 1.0}


def train(env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
          args: A2CArgs | None = None, **kwargs) -> TrainResult:
    """Train an A2C agent; keyword arguments as :func:`agents.loop.run`."""
    return run("a2c", a2c_update, env_fn, args or A2CArgs(), **kwargs)
