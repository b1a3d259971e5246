"""Behaviour cloning from a heuristic teacher (pretraining for PPO / A2C).

RLSchert (seed 001, sections 3.5 and 4.4) pretrains its policy network by
imitation of rule-based teachers before PPO, so the agent starts from a
sensible policy instead of random exploration in a large action space. Here
the teacher acts in the environment (``SchedulingEnv(..., teacher=NAME)``
reports ``info["teacher_action"]``, the action heuristic NAME would take
now); the visited ``(observation, mask, teacher action)`` triples are then
fitted by cross-entropy *under the mask*, i.e. ``-log pi(a_teacher | s)`` of
the masked distribution, so probability mass is only moved among legal
actions.

:func:`warm_start` is the whole recipe (demonstrations, a fresh network
seeded like the learner's, cloning, agreement) that the agents CLI and
:mod:`agents.recipe` use before RL.

Examples:
    >>> demos = collect_demonstrations(lambda: SchedulingEnv(path, teacher="sjf"), 5000)  # doctest: +SKIP
    >>> net = make_network(env.observation_space, env.action_space)  # doctest: +SKIP
    >>> behaviour_cloning(net, demos, epochs=10)                     # doctest: +SKIP
    >>> agreement(net, demos)                                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.distributions import MaskedCategorical
from agents.networks import make_network
from cosim.errors import InputError

__all__ = ["Demonstrations", "collect_demonstrations", "behaviour_cloning", "agreement",
           "mimic_loss", "gradient_step", "WarmStart", "warm_start"]

Teacher = Callable[[np.ndarray, dict[str, Any]], int]


@dataclass
class Demonstrations:
    """Teacher decisions: ``obs (N, ...)``, ``masks (N, n_actions)`` int8, ``actions (N,)``.

    Attributes:
        episodes: episodes finished while collecting.
        skipped: teacher decisions left out because the action was illegal or missing.
    """

    obs: np.ndarray
    masks: np.ndarray
    actions: np.ndarray
    episodes: int = 0
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.actions)


def collect_demonstrations(env_fn: Callable[[], gym.Env], steps: int, *, seed: int = 0,
                           teacher: Teacher | None = None) -> Demonstrations:
    """Let the teacher act for ``steps`` decisions and record what it saw and did.

    Args:
        env_fn: environment factory.
        steps: decisions to take.
        seed: seeds the episode resets (one generator, a fresh seed per episode).
        teacher: ``(obs, info) -> action``; default ``info["teacher_action"]``.

    Returns:
        The legal teacher decisions (an illegal or missing teacher action is
        still executed when present, i.e. the env's fallback applies, but not recorded).

    Raises:
        InputError: ``steps`` < 1, or no teacher and the env gives no ``teacher_action``.
    """
    if steps < 1:
        raise InputError("steps", str(steps), "a positive number of decisions")
    rng = np.random.default_rng(seed)
    env = env_fn()
    n_actions = int(env.action_space.n)
    obs_rows, mask_rows, act_rows = [], [], []
    episodes = skipped = 0
    obs, info = env.reset(seed=int(rng.integers(2**31 - 1)))
    try:
        for _ in range(steps):
            mask = np.asarray(info.get("action_mask", np.ones(n_actions)), dtype=np.int8)
            if teacher is not None:
                action = int(teacher(obs, info))
            elif "teacher_action" in info:
                action = int(info["teacher_action"])
            else:
                raise InputError("teacher", "an environment without info['teacher_action']",
                                 "a teacher callable, or an env built with teacher=NAME")
            if 0 <= action < n_actions and mask[action]:
                obs_rows.append(np.asarray(obs, dtype=np.float32))
                mask_rows.append(mask)
                act_rows.append(action)
            else:
                skipped += 1
                if not 0 <= action < n_actions:
                    action = int(np.flatnonzero(mask)[-1])
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                episodes += 1
                obs, info = env.reset(seed=int(rng.integers(2**31 - 1)))
    finally:
        env.close()
    shape = env.observation_space.shape
    return Demonstrations(
        obs=np.stack(obs_rows) if obs_rows else np.zeros((0, *shape), np.float32),
        masks=np.stack(mask_rows) if mask_rows else np.zeros((0, n_actions), np.int8),
        actions=np.asarray(act_rows, dtype=np.int64), episodes=episodes, skipped=skipped)


def behaviour_cloning(net: nn.Module, demos: Demonstrations, *, epochs: int = 10,
                      lr: float = 3e-3, batch_size: int = 64, seed: int = 0,
                      balance: bool = False) -> list[float]:
    """Fit ``net``'s policy to the teacher by masked cross-entropy (in place).

    Only the policy output is trained; the value head is left for RL.

    Args:
        net: an actor-critic network from :mod:`agents.networks`.
        demos: teacher decisions.
        epochs: passes over the data.
        lr: Adam learning rate.
        batch_size: minibatch size.
        seed: seeds the minibatch order.
        balance: weight each decision by the inverse frequency of its action
            index, so rare choices (a kill among many keeps) are learned too.

    Returns:
        Mean loss per epoch.

    Raises:
        InputError: no demonstrations.
    """
    if len(demos) == 0:
        raise InputError("demonstrations", "0 teacher decisions", "at least one legal teacher action")
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(demos.obs)
    masks = torch.as_tensor(demos.masks).bool()
    actions = torch.as_tensor(demos.actions)
    weights = torch.ones(len(demos))
    if balance:
        counts = np.bincount(demos.actions)
        w = len(demos) / (np.count_nonzero(counts) * counts[demos.actions])
        weights = torch.as_tensor(w / w.mean(), dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        perm = rng.permutation(len(demos))
        losses = []
        for start in range(0, len(perm), batch_size):
            idx = torch.as_tensor(perm[start:start + batch_size])
            logits, _ = net(obs[idx])
            logp = MaskedCategorical(logits, masks[idx]).log_prob(actions[idx])
            loss = -(weights[idx] * logp).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        history.append(float(np.mean(losses)))
    return history


@torch.no_grad()
def agreement(net: nn.Module, demos: Demonstrations, batch_size: int = 4096) -> float:
    """Fraction of decisions where the greedy (masked) policy picks the teacher's action."""
    if len(demos) == 0:
        return float("nan")
    hits = 0
    for start in range(0, len(demos), batch_size):
        sl = slice(start, start + batch_size)
        logits, _ = net(torch.as_tensor(demos.obs[sl]))
        mode = MaskedCategorical(logits, torch.as_tensor(demos.masks[sl])).mode()
        hits += int((mode.numpy() == demos.actions[sl]).sum())
    return hits / len(demos)


def mimic_loss(dist: MaskedCategorical, teacher: torch.Tensor,
               masks: torch.Tensor) -> torch.Tensor | None:
    """The RLSchert imitation term (seed 001, eq. 11) of a batch, for the RL updates.

    Mean ``-log pi(a_teacher | s)`` over the steps whose teacher action is
    legal (``teacher`` is -1 where the env gave none); None when no step has one.
    """
    idx = teacher.clamp(min=0)
    valid = (teacher >= 0) & masks.gather(-1, idx.unsqueeze(-1)).squeeze(-1)
    if not bool(valid.any()):
        return None
    return -dist.log_prob(idx)[valid].mean()


def gradient_step(loss: torch.Tensor, dist: MaskedCategorical, teacher: torch.Tensor,
                  masks: torch.Tensor, mimic_coef: float, net: torch.nn.Module,
                  optimizer: torch.optim.Optimizer, max_grad_norm: float) -> torch.Tensor | None:
    """One update of the policy-gradient learners (PPO, A2C, PG): ``loss`` plus
    ``mimic_coef`` x :func:`mimic_loss` where the batch has teacher actions, its gradient
    clipped to ``max_grad_norm``, one optimizer step. Returns the imitation term (None
    without one)."""
    mimic = mimic_loss(dist, teacher, masks) if mimic_coef > 0 else None
    if mimic is not None:
        loss = loss + mimic_coef * mimic
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_grad_norm)
    optimizer.step()
    return mimic


@dataclass
class WarmStart:
    """A network cloned from a teacher, and how well it copies it.

    Attributes:
        net: the cloned network (train it further, or save ``net.state_dict()``).
        decisions: teacher decisions it was fitted to.
        agreement: fraction of those where its greedy policy picks the teacher's action.
        losses: mean cloning loss per epoch.
    """

    net: nn.Module
    decisions: int
    agreement: float
    losses: list[float]

    def describe(self, teacher: str | None = None) -> str:
        """One line for a log: ``behaviour cloning of T: N decisions, agreement A``."""
        who = f" of {teacher}" if teacher else ""
        return f"behaviour cloning{who}: {self.decisions} decisions, agreement {self.agreement:.3f}"


def warm_start(env_fn: Callable[[], gym.Env], args: Any, steps: int, *, epochs: int = 10,
               batch_size: int = 64, balance: bool = False,
               probe: gym.Env | None = None) -> WarmStart:
    """Behaviour-cloning warm start before RL (RLSchert, seed 001, section 4.4).

    Collects ``steps`` teacher decisions from ``env_fn``'s envs (episode seeds
    from ``args.seed``), builds the network the learner would build (the
    architecture of ``args.network``/``args.hidden``, initialised under
    ``torch.manual_seed(args.seed)`` without touching the global generator),
    and fits it with :func:`behaviour_cloning`.

    Args:
        env_fn: factory of envs that report ``info["teacher_action"]``.
        args: the learner's hyper-parameters (an :class:`agents.loop.Args`).
        steps: teacher decisions to collect.
        epochs, batch_size, balance: as :func:`behaviour_cloning`.
        probe: an env of the same spaces, to size the network (default: one from ``env_fn``).

    Returns:
        The cloned network and its agreement with the teacher on the demonstrations.
    """
    demos = collect_demonstrations(env_fn, steps, seed=args.seed)
    env = probe if probe is not None else env_fn()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = make_network(env.observation_space, env.action_space, args.network, args.hidden)
    finally:
        if probe is None:
            env.close()
    losses = behaviour_cloning(net, demos, epochs=epochs, batch_size=batch_size, seed=args.seed,
                               balance=balance)
    return WarmStart(net=net, decisions=len(demos), agreement=agreement(net, demos),
                     losses=losses)
