"""REINFORCE with DRAS's average-return baseline (DRAS-PG), readable top to bottom.

DRAS (seed 004, section III-B, eq. 3) trains its policy network by plain
policy gradient: after every few scheduling instances, with the K actions
taken since the previous update,

    theta <- theta + alpha * sum_k grad log pi(a_k | s_k) * (sum_{k'=k..K} r_k' - b_k)

where the return is summed from step k to the end of the update (not to the
end of the episode) and the baseline ``b_k`` is "the cumulative reward from
step k onwards averaged over all past parameter updates": one running mean
per position k of the update. The optimizer is Adam with learning rate
0.001 (section IV-C). Here:

- an update every :attr:`PGArgs.num_steps` decisions per environment (DRAS
  updates every ten scheduling instances; an instance is one pass of the
  scheduler and holds one or more decisions: 1.17 on average on the
  Lublin-256 setting with the ``dras`` actions, so the default of 12
  decisions is about ten instances);
- the return stops at an episode's end inside the update, and ``gamma``
  (1.0 by default, as in eq. 3) or the SMDP discount ``gamma ** (dt /
  time_scale)`` may weight later rewards;
- ``b_k`` averages the returns at position k of every earlier update and
  every environment (0 before the first update); it is kept, with its count,
  in the checkpoint, so a resumed run continues with the same baseline;
- the entropy bonus and the RLSchert imitation term (:func:`agents.imitation.mimic_loss`) are
  available and off unless asked for (``ent_coef``, ``--teacher``).

Acting, the loop, checkpoints and exact resume are those of
:func:`agents.loop.run` (through :class:`agents.loop.Learner`). The network's
value head is not used.

Examples:
    >>> from agents.pg import PGArgs, train                      # doctest: +SKIP
    >>> result = train(lambda: MyMaskedEnv(), PGArgs(total_steps=20_000))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.distributions import MaskedCategorical
from agents.gae import step_discounts
from agents.imitation import gradient_step
from agents.loop import Args, Learner, TrainResult, run
from agents.rollout import Rollout

__all__ = ["PGArgs", "PGLearner", "update_returns", "train"]


@dataclass
class PGArgs(Args):
    """PG hyper-parameters: :class:`agents.loop.Args` with DRAS-PG defaults.

    ``num_steps`` is the number of decisions per environment between updates
    (the K of eq. 3). The PPO-only fields (``num_minibatches``,
    ``update_epochs``, ``clip_coef``, ``clip_vloss``, ``target_kl``,
    ``vf_coef``, ``gae_lambda``) are ignored.
    """

    num_envs: int = 1
    num_steps: int = 12
    lr: float = 1e-3
    anneal_lr: bool = False
    gamma: float = 1.0
    ent_coef: float = 0.0
    norm_adv: bool = False
    max_grad_norm: float = 1.0
    num_minibatches: int = 1
    update_epochs: int = 1
    target_kl: float | None = None


def update_returns(rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                   discounts: np.ndarray) -> np.ndarray:
    """Returns from each step to the end of the update (or of its episode, if sooner).

    ``G_k = r_k + g_k * G_{k+1}``, with ``G`` cut at an episode's end and 0
    after the last row (eq. 3 sums the update's own rewards, nothing after).

    Args:
        rewards, terminated, truncated: ``(T, N)`` arrays of one rollout.
        discounts: ``(T, N)`` factor ``g_k`` from step k to k+1 (1 in eq. 3).

    Examples:
        >>> import numpy as np
        >>> r = np.array([[1.0], [2.0], [3.0]])
        >>> z = np.zeros((3, 1), bool)
        >>> update_returns(r, z, np.array([[False], [True], [False]]), np.ones((3, 1))).ravel().tolist()
        [3.0, 2.0, 3.0]
    """
    done = np.asarray(terminated, bool) | np.asarray(truncated, bool)
    out = np.zeros_like(np.asarray(rewards, dtype=np.float64))
    running = np.zeros(out.shape[1:], dtype=np.float64)
    for t in range(out.shape[0] - 1, -1, -1):
        running = rewards[t] + discounts[t] * np.where(done[t], 0.0, running)
        out[t] = running
    return out


class PGLearner(Learner):
    """REINFORCE with the per-position average-return baseline (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.baseline_sum: np.ndarray | None = None   # sum of G_k over past updates and envs
        self.baseline_count = 0                       # returns summed per position

    def baseline(self, steps: int) -> np.ndarray:
        """``b_k`` for positions ``0 .. steps-1`` (0 before any update)."""
        if self.baseline_sum is None or self.baseline_count == 0:
            return np.zeros(steps)
        return self.baseline_sum[:steps] / self.baseline_count

    def update(self, net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout,
               args: Args, mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
        """One policy-gradient step on the rollout (eq. 3), then fold its returns into b."""
        dt = rollout.dt if args.smdp else None
        disc = step_discounts(args.gamma, dt, args.time_scale, rollout.rewards.shape)
        returns = update_returns(rollout.rewards, rollout.terminated, rollout.truncated, disc)
        steps, n = returns.shape
        adv = returns - self.baseline(steps)[:, None]
        b = rollout.flat()
        logits, _ = net(b["obs"])
        dist = MaskedCategorical(logits, b["masks"])
        logp = dist.log_prob(b["actions"])
        a = torch.as_tensor(adv.reshape(-1), dtype=torch.float32)
        if args.norm_adv and len(a) > 1:
            a = (a - a.mean()) / (a.std() + 1e-8)
        pg_loss = -(logp * a).mean()
        entropy = dist.entropy().mean()
        loss = pg_loss - args.ent_coef * entropy
        mimic = gradient_step(loss, dist, b["teacher"], b["masks"], mimic_coef, net, optimizer,
                              args.max_grad_norm)
        # The baseline of later updates: this update's returns join the average.
        if self.baseline_sum is None or len(self.baseline_sum) != steps:
            self.baseline_sum = np.zeros(steps)
        self.baseline_sum += returns.sum(axis=1)
        self.baseline_count += n
        with torch.no_grad():
            approx_kl = float((b["logprobs"] - logp).mean())
        return {"policy_loss": pg_loss.item(), "value_loss": math.nan, "entropy": entropy.item(),
                "approx_kl": approx_kl, "clipfrac": math.nan,
                "mimic_loss": mimic.item() if mimic is not None else math.nan, "epochs": 1.0}

    def state_dict(self) -> dict[str, Any]:
        """The baseline's sums and count."""
        total = self.baseline_sum if self.baseline_sum is not None else np.zeros(0)
        return {"baseline_sum": torch.as_tensor(total, dtype=torch.float64),
                "baseline_count": int(self.baseline_count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back the baseline."""
        if "baseline_sum" not in state:
            return
        total = np.asarray(state["baseline_sum"], dtype=np.float64)
        self.baseline_sum = total if total.size else None
        self.baseline_count = int(state["baseline_count"])


def train(env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
          args: PGArgs | None = None, **kwargs) -> TrainResult:
    """Train a DRAS-PG agent; keyword arguments as :func:`agents.loop.run`."""
    return run("pg", PGLearner(), env_fn, args or PGArgs(), **kwargs)
