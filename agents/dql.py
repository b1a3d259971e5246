"""Deep Q-learning with action masks (DRAS-DQL), readable top to bottom.

DRAS (seed 004, section III-B, eq. 4) scores every job of its window with a
Q-value and picks the best one; it explores epsilon-greedily, epsilon
starting at 1.0 and decaying by a factor 0.995 (here: per update, floored at
``eps_min``), and learns from the one-step target ``r_k + max_a Q(s_{k+1},
a)``. Here the network's per-job outputs are the Q-values (the ``dras``
network's W outputs, or a ``kernel`` network's per-row scores, which is
DRAS-DQL's "same network for every job" design), and the usual machinery
that keeps Q-learning with a neural network stable is added:

- a replay buffer of the last ``buffer_size`` transitions, sampled uniformly
  in minibatches (``gradient_steps`` per update, after ``learning_starts``
  transitions);
- a target network, copied from the online one every ``target_every``
  updates, evaluates the target (with ``double_q``, the online network
  chooses the next action and the target network values it);
- the max over the next state runs over its *legal* actions only (the
  mask is stored with each transition); a terminal state is worth 0, a
  truncated episode is bootstrapped from its final observation;
- the discount is ``gamma`` per decision, or ``gamma ** (dt / time_scale)``
  with ``smdp`` (thesis eq. 2.18), stored per transition;
- Huber loss and gradient-norm clipping.

Acting, the loop, checkpoints and exact resume are :func:`agents.loop.run`'s
(through :class:`agents.loop.Learner`); the replay buffer, the target network
and the update count (hence epsilon) are saved in every checkpoint as plain
tensors, so a resumed run is the same as an uninterrupted one. The greedy
policy (``rl:DIR``) is the argmax of the Q-values over legal actions.

Examples:
    >>> from agents.dql import DQLArgs, train                    # doctest: +SKIP
    >>> result = train(lambda: MyMaskedEnv(), DQLArgs(total_steps=20_000))  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.distributions import MaskedCategorical
from agents.gae import step_discounts
from agents.loop import Learner, TrainArgs, TrainResult, run
from agents.rollout import Rollout
from cosim.errors import InputError

__all__ = ["DQLArgs", "DQLLearner", "ReplayBuffer", "masked_max", "train"]


@dataclass
class DQLArgs(TrainArgs):
    """DQL hyper-parameters: :class:`agents.loop.TrainArgs` (none of PPO's) with DQL's
    defaults, its replay buffer, exploration and target network.

    ``num_steps`` is the number of decisions per environment between
    updates. The imitation term is not used (``mimic_coef`` stays 0).
    """

    #: Not a setting: the lambda of the returns the learning curve's
    #: ``explained_variance`` compares the Q-values with (a diagnostic; DQL learns
    #: from its replay buffer, not from these returns).
    gae_lambda: ClassVar[float] = 0.95

    num_envs: int = 1
    num_steps: int = 8
    lr: float = 1e-3
    anneal_lr: bool = False
    max_grad_norm: float = 10.0
    eps_start: float = 1.0
    """Exploration probability at the start (DRAS: 1.0)."""
    eps_decay: float = 0.995
    """Factor applied to epsilon after every update (DRAS: 0.995)."""
    eps_min: float = 0.05
    """Floor of epsilon."""
    buffer_size: int = 10_000
    """Transitions the replay buffer keeps (oldest dropped first)."""
    minibatch_size: int = 64
    """Transitions per gradient step."""
    gradient_steps: int = 1
    """Gradient steps per update."""
    learning_starts: int = 256
    """Transitions collected before the first gradient step."""
    target_every: int = 50
    """Updates between copies of the online network into the target network."""
    double_q: bool = True
    """Double DQN target: the online network picks the next action, the target values it."""

    def validate(self) -> None:
        """Raise :class:`InputError` for impossible settings."""
        super().validate()
        for name in ("buffer_size", "minibatch_size", "gradient_steps", "target_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"args.{name}", repr(value), "a positive integer")
        if not isinstance(self.learning_starts, int) or self.learning_starts < 0:
            raise InputError("args.learning_starts", repr(self.learning_starts),
                             "an integer >= 0")
        if not 0 <= self.eps_min <= self.eps_start <= 1 or not 0 < self.eps_decay <= 1:
            raise InputError("args.eps_start/eps_decay/eps_min",
                             f"{self.eps_start}/{self.eps_decay}/{self.eps_min}",
                             "0 <= eps_min <= eps_start <= 1 and 0 < eps_decay <= 1")
        if self.mimic_coef:
            raise InputError("args.mimic_coef", repr(self.mimic_coef),
                             "0 for dql (the imitation term belongs to the policy learners; "
                             "--bc-steps still warm-starts the network)")


def masked_max(q: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(max, argmax)`` of ``q`` over legal actions per row; ``(0, 0)`` where none is legal.

    Examples:
        >>> import torch
        >>> masked_max(torch.tensor([[3.0, 1.0, 2.0], [1.0, 5.0, 0.0]]),
        ...            torch.tensor([[0, 1, 1], [0, 0, 0]]))
        (tensor([2., 0.]), tensor([2, 0]))
    """
    mask = mask.to(torch.bool)
    filled = torch.where(mask, q, torch.full_like(q, -math.inf))
    best, arg = filled.max(dim=-1)
    any_legal = mask.any(dim=-1)
    return torch.where(any_legal, best, torch.zeros_like(best)), torch.where(
        any_legal, arg, torch.zeros_like(arg))


class ReplayBuffer:
    """A ring of transitions in preallocated arrays (allocated at the first :meth:`add`).

    Each transition: ``obs``, ``mask``, ``action``, ``reward``, ``next_obs``,
    ``next_mask``, ``terminal`` (1.0 where the next state is terminal) and
    ``discount`` (the factor to the next state).

    Args:
        capacity: transitions kept; the oldest are overwritten.
    """

    FIELDS = ("obs", "mask", "action", "reward", "next_obs", "next_mask", "terminal", "discount")

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.data: dict[str, np.ndarray] | None = None
        self.pos = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _allocate(self, obs_shape: tuple[int, ...], n_actions: int) -> None:
        c = self.capacity
        self.data = {"obs": np.zeros((c, *obs_shape), np.float32),
                     "mask": np.zeros((c, n_actions), np.int8),
                     "action": np.zeros(c, np.int64), "reward": np.zeros(c, np.float32),
                     "next_obs": np.zeros((c, *obs_shape), np.float32),
                     "next_mask": np.zeros((c, n_actions), np.int8),
                     "terminal": np.zeros(c, np.float32), "discount": np.zeros(c, np.float32)}

    def add(self, **batch: np.ndarray) -> None:
        """Append a batch of transitions (arrays with one row per transition)."""
        if self.data is None:
            self._allocate(batch["obs"].shape[1:], batch["mask"].shape[1])
        n = len(batch["action"])
        idx = (self.pos + np.arange(n)) % self.capacity
        for name in self.FIELDS:
            self.data[name][idx] = batch[name]
        self.pos = int((self.pos + n) % self.capacity)
        self.size = int(min(self.capacity, self.size + n))

    def sample(self, rng: np.random.Generator, n: int) -> dict[str, torch.Tensor]:
        """``n`` transitions drawn uniformly with replacement, as tensors."""
        idx = rng.integers(0, self.size, size=n)
        return {name: torch.as_tensor(self.data[name][idx]) for name in self.FIELDS}

    def state_dict(self) -> dict[str, Any]:
        """The filled part, as tensors (``weights_only`` safe)."""
        state: dict[str, Any] = {"pos": self.pos, "size": self.size, "capacity": self.capacity}
        if self.data is not None:
            state.update({name: torch.as_tensor(arr[:self.size])
                          for name, arr in self.data.items()})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict` (same capacity)."""
        if int(state["capacity"]) != self.capacity:
            raise InputError("args.buffer_size", str(self.capacity),
                             f"{state['capacity']} as in the checkpoint being resumed")
        self.pos, self.size = int(state["pos"]), int(state["size"])
        if "obs" in state:
            obs = np.asarray(state["obs"])
            self._allocate(obs.shape[1:], np.asarray(state["mask"]).shape[1])
            for name in self.FIELDS:
                self.data[name][:self.size] = np.asarray(state[name])


class DQLLearner(Learner):
    """Epsilon-greedy acting, replay, target network (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.updates = 0
        self.replay: ReplayBuffer | None = None
        self.target: nn.Module | None = None
        self.args: DQLArgs | None = None

    @property
    def epsilon(self) -> float:
        """The exploration probability now: ``eps_start * eps_decay**updates``, floored."""
        a = self.args
        return max(a.eps_min, a.eps_start * a.eps_decay ** self.updates)

    def bind(self, net: nn.Module, args: DQLArgs) -> None:
        """Make the replay buffer and the target network (a copy of ``net``)."""
        self.args = args
        self.replay = ReplayBuffer(args.buffer_size)
        self.target = copy.deepcopy(net).eval()
        for p in self.target.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def act(self, net: nn.Module, obs: torch.Tensor, mask: torch.Tensor,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A uniformly random legal action with probability epsilon, else the best legal Q."""
        q, _ = net(obs)
        best_q, greedy = masked_max(q, mask)
        explore = torch.rand(len(greedy), generator=generator) < self.epsilon
        uniform = MaskedCategorical(torch.zeros_like(q), mask).sample(generator)
        action = torch.where(explore, uniform, greedy)
        return action, torch.zeros(len(action)), best_q

    def _store(self, rollout: Rollout, args: DQLArgs) -> None:
        """Put the rollout's transitions in the replay buffer, with their next states."""
        steps, n = rollout.actions.shape
        ended = rollout.terminated | rollout.truncated
        next_obs = np.empty_like(rollout.obs)
        next_mask = np.empty_like(rollout.masks)
        next_obs[:-1], next_mask[:-1] = rollout.obs[1:], rollout.masks[1:]
        next_obs[-1], next_mask[-1] = rollout.next_obs, rollout.next_masks
        next_obs[ended] = rollout.final_obs[ended]
        next_mask[ended] = rollout.final_masks[ended]
        dt = rollout.dt if args.smdp else None
        disc = step_discounts(args.gamma, dt, args.time_scale, rollout.rewards.shape)

        def flat(a):
            return a.reshape(steps * n, *a.shape[2:])
        self.replay.add(obs=flat(rollout.obs), mask=flat(rollout.masks),
                        action=flat(rollout.actions), reward=flat(rollout.rewards),
                        next_obs=flat(next_obs), next_mask=flat(next_mask),
                        terminal=flat(rollout.terminated.astype(np.float32)),
                        discount=flat(disc))

    def update(self, net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout,
               args: DQLArgs, mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
        """Store the rollout, take the gradient steps, decay epsilon, sync the target."""
        self._store(rollout, args)
        losses, qs = [], []
        if len(self.replay) >= max(1, args.learning_starts):
            for _ in range(args.gradient_steps):
                b = self.replay.sample(rng, args.minibatch_size)
                q_all, _ = net(b["obs"])
                q = q_all.gather(1, b["action"][:, None]).squeeze(1)
                with torch.no_grad():
                    q_next_target, _ = self.target(b["next_obs"])
                    if args.double_q:
                        q_next_online, _ = net(b["next_obs"])
                        _, pick = masked_max(q_next_online, b["next_mask"])
                        has = b["next_mask"].to(torch.bool).any(dim=1)
                        v_next = torch.where(has, q_next_target.gather(1, pick[:, None]).squeeze(1),
                                             torch.zeros(len(pick)))
                    else:
                        v_next, _ = masked_max(q_next_target, b["next_mask"])
                    y = b["reward"] + b["discount"] * (1.0 - b["terminal"]) * v_next
                loss = nn.functional.smooth_l1_loss(q, y)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)
                optimizer.step()
                losses.append(loss.item())
                qs.append(float(q.detach().mean()))
        epsilon = self.epsilon
        self.updates += 1
        if self.updates % args.target_every == 0:
            self.target.load_state_dict(net.state_dict())
        return {"policy_loss": math.nan, "q_mean": float(np.mean(qs)) if qs else math.nan,
                "value_loss": float(np.mean(losses)) if losses else math.nan,
                "entropy": math.nan, "approx_kl": math.nan, "clipfrac": math.nan,
                "mimic_loss": math.nan, "epochs": float(len(losses)), "epsilon": epsilon}

    def state_dict(self) -> dict[str, Any]:
        """Update count (epsilon), target network and replay buffer."""
        return {"updates": self.updates, "target": self.target.state_dict(),
                "replay": self.replay.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict`."""
        if not state:
            return
        self.updates = int(state["updates"])
        self.target.load_state_dict(state["target"])
        self.replay.load_state_dict(state["replay"])


def train(env_fn: Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
          args: DQLArgs | None = None, **kwargs) -> TrainResult:
    """Train a DRAS-DQL agent; keyword arguments as :func:`agents.loop.run`."""
    return run("dql", DQLLearner(), env_fn, args or DQLArgs(), **kwargs)
