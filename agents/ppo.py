"""Masked PPO for the scheduling environment: the update (the loop is :mod:`agents.loop`).

Proximal Policy Optimization (Schulman et al. 2017) with invalid-action
masking (thesis, seed 003, section 2.5.3): the env's ``info["action_mask"]``
is stored with each transition and applied again in the update. Optionally
the RLSchert imitation term (seed 001, eq. 11), ``alpha_t * -log pi(a_teacher
| s)``, with ``alpha_t`` decaying linearly to 0 (seed 001, section 3.5:
large at first, zero at the end), from ``info["teacher_action"]``
(:func:`agents.imitation.mimic_loss`).

PPO's hyper-parameters are :class:`agents.loop.Args` (its defaults are
PPO's; the other learners subclass it), re-exported here as ``Args``.

Examples:
    >>> from agents.ppo import Args, train                       # doctest: +SKIP
    >>> result = train(lambda: MyMaskedEnv(), Args(total_steps=20_000))  # doctest: +SKIP
    >>> result.curve[-1]["mean_return"]                          # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.distributions import MaskedCategorical
from agents.imitation import gradient_step
from agents.loop import Args, TrainResult, run
from agents.rollout import Rollout

__all__ = ["Args", "ppo_update", "train"]


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
            mimic = gradient_step(loss, dist, b["teacher"][idx], b["masks"][idx], mimic_coef,
                                  net, optimizer, args.max_grad_norm)
            if mimic is not None:
                stats["mimic_loss"].append(mimic.item())
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


def train(env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
          args: Args | None = None, **kwargs) -> TrainResult:
    """Train a masked PPO agent; see :func:`agents.loop.run` for the keyword arguments.

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
