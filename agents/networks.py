"""Actor-critic networks for the three observation layouts of ``cosim.env``.

Every network maps a batch of observations to ``(logits, value)`` with
``logits`` of shape ``(B, n_actions)`` and ``value`` of shape ``(B,)``:

- :class:`MLPPolicy` for flat ``(D,)`` observations ("compact"): the thesis
  (seed 003, section 5.2) and RLSchert (seed 001, table 3, ``mlp64_64``) use
  two hidden layers of 64 units.
- :class:`KernelPolicy` for ``(n_actions, F)`` observations ("kernel"): one
  small MLP scores every action row independently (RLScheduler's kernel
  design as described in seed 003, chapter 3), so the same weights work for
  any window size; the value comes from the mean and max of per-row
  embeddings, which are also size-independent.
- :class:`CNNPolicy` for ``(C, H, W)`` observations ("image"): two 3x3
  convolutions of 16 and 32 filters followed by a flatten, no pooling (the
  configuration A2cScheduler found best, seed 002, section 4.3).
- :class:`DrasPolicy` for DRAS's ``(2W + R, 2)`` job and node rows ("dras"):
  a 1x2 convolution over each row, then two fully connected layers with
  leaky ReLU, one output per window job (DRAS, seed 004, section III-B),
  plus a value head for actor-critic learners.

:func:`make_network` picks one from the observation space and records a
plain-dict ``spec`` so a checkpoint can rebuild the same network with
:func:`network_from_spec`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from cosim import limits
from cosim.errors import InputError

__all__ = ["MLPPolicy", "KernelPolicy", "CNNPolicy", "DrasPolicy", "make_network",
           "network_from_spec", "policy_logits", "NETWORK_KINDS"]

NETWORK_KINDS = ("mlp", "kernel", "cnn", "dras")


def _init(layer: nn.Module, gain: float) -> nn.Module:
    # Orthogonal weights and zero biases: the usual PPO initialization; a
    # small gain on the policy head starts from a near-uniform policy.
    if isinstance(layer, nn.Linear | nn.Conv2d):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [_init(nn.Linear(a, b), math.sqrt(2.0)), nn.Tanh()]
    return nn.Sequential(*layers)


class MLPPolicy(nn.Module):
    """Actor-critic MLP for flat observations (separate actor and critic trunks).

    Args:
        obs_dim: observation length D.
        n_actions: number of actions.
        hidden: hidden layer sizes of each trunk.

    Examples:
        >>> import torch
        >>> net = MLPPolicy(5, 3)
        >>> logits, value = net(torch.zeros(2, 5))
        >>> tuple(logits.shape), tuple(value.shape)
        ((2, 3), (2,))
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        sizes = [int(obs_dim), *[int(h) for h in hidden]]
        self.actor = _mlp(sizes)
        self.critic = _mlp(sizes)
        self.policy_head = _init(nn.Linear(sizes[-1], n_actions), 0.01)
        self.value_head = _init(nn.Linear(sizes[-1], 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, n_actions), value (B,))``."""
        obs = obs.reshape(obs.shape[0], -1)
        return self.policy_head(self.actor(obs)), self.value_head(self.critic(obs)).squeeze(-1)


class KernelPolicy(nn.Module):
    """A shared MLP scores each action row; works for any number of rows.

    Args:
        n_features: features per action row F.
        hidden: hidden sizes of the row scorer and of the row encoder.

    Examples:
        >>> import torch
        >>> net = KernelPolicy(4)
        >>> net(torch.zeros(2, 7, 4))[0].shape, net(torch.zeros(2, 3, 4))[0].shape
        (torch.Size([2, 7]), torch.Size([2, 3]))
    """

    def __init__(self, n_features: int, hidden: tuple[int, ...] = (32, 16)):
        super().__init__()
        sizes = [int(n_features), *[int(h) for h in hidden]]
        self.scorer = _mlp(sizes)
        self.score_head = _init(nn.Linear(sizes[-1], 1), 0.01)
        self.encoder = _mlp(sizes)
        self.value_mlp = _mlp([2 * sizes[-1], sizes[-1]])
        self.value_head = _init(nn.Linear(sizes[-1], 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, rows), value (B,))`` for ``obs`` of shape ``(B, rows, F)``."""
        logits = self.score_head(self.scorer(obs)).squeeze(-1)
        emb = self.encoder(obs)
        pooled = torch.cat([emb.mean(dim=1), emb.amax(dim=1)], dim=-1)
        value = self.value_head(self.value_mlp(pooled)).squeeze(-1)
        return logits, value


class CNNPolicy(nn.Module):
    """Small CNN actor-critic for image observations ``(C, H, W)``.

    Args:
        obs_shape: ``(C, H, W)``.
        n_actions: number of actions.
        hidden: width of the fully connected layer after the flatten.

    Examples:
        >>> import torch
        >>> net = CNNPolicy((2, 10, 6), 5)
        >>> tuple(net(torch.zeros(3, 2, 10, 6))[0].shape)
        (3, 5)
    """

    def __init__(self, obs_shape: tuple[int, int, int], n_actions: int, hidden: int = 64):
        super().__init__()
        c, h, w = (int(s) for s in obs_shape)
        self.features = nn.Sequential(
            _init(nn.Conv2d(c, 16, 3, padding=1), math.sqrt(2.0)), nn.ReLU(),
            _init(nn.Conv2d(16, 32, 3, padding=1), math.sqrt(2.0)), nn.ReLU(),
            nn.Flatten(),
            _init(nn.Linear(32 * h * w, hidden), math.sqrt(2.0)), nn.ReLU(),
        )
        self.policy_head = _init(nn.Linear(hidden, n_actions), 0.01)
        self.value_head = _init(nn.Linear(hidden, 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, n_actions), value (B,))``."""
        z = self.features(obs)
        return self.policy_head(z), self.value_head(z).squeeze(-1)


class DrasPolicy(nn.Module):
    """DRAS's network: a 1x2 convolution per row, two leaky-ReLU layers, one score per job.

    Args:
        obs_shape: ``(2W + R, 2)``: two rows per window job, then R node rows.
        n_actions: W.
        hidden: widths of the two fully connected layers (DRAS does not give
            them; these are scaled to a 2-core machine).
        channels: filters of the 1x2 convolution.

    Examples:
        >>> import torch
        >>> net = DrasPolicy((2 * 5 + 16, 2), 5)
        >>> tuple(net(torch.zeros(3, 26, 2))[0].shape)
        (3, 5)
    """

    def __init__(self, obs_shape: tuple[int, int], n_actions: int,
                 hidden: tuple[int, ...] = (128, 64), channels: int = 4):
        super().__init__()
        rows, cols = (int(s) for s in obs_shape)
        self.conv = _init(nn.Conv2d(1, channels, (1, cols)), math.sqrt(2.0))
        sizes = [rows * channels, *[int(h) for h in hidden]]
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [_init(nn.Linear(a, b), math.sqrt(2.0)), nn.LeakyReLU()]
        self.body = nn.Sequential(*layers)
        self.policy_head = _init(nn.Linear(sizes[-1], n_actions), 0.01)
        self.value_head = _init(nn.Linear(sizes[-1], 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, W), value (B,))`` for ``obs`` of shape ``(B, 2W + R, 2)``."""
        z = nn.functional.leaky_relu(self.conv(obs.unsqueeze(1))).flatten(1)
        z = self.body(z)
        return self.policy_head(z), self.value_head(z).squeeze(-1)


def policy_logits(net: nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """``net(obs)[0]`` -- the same operations, the same values -- without the critic.

    For acting: a greedy policy needs only the logits, and the critic is
    about half of a kernel network's forward pass. Another module falls
    back to the full forward pass.
    """
    if isinstance(net, KernelPolicy):
        return net.score_head(net.scorer(obs)).squeeze(-1)
    if isinstance(net, MLPPolicy):
        return net.policy_head(net.actor(obs.reshape(obs.shape[0], -1)))
    if isinstance(net, CNNPolicy):
        return net.policy_head(net.features(obs))
    if isinstance(net, DrasPolicy):
        z = nn.functional.leaky_relu(net.conv(obs.unsqueeze(1))).flatten(1)
        return net.policy_head(net.body(z))
    return net(obs)[0]


def _default_kind(shape: tuple[int, ...], n_actions: int) -> str:
    if len(shape) == 2:
        return "kernel" if shape[0] == n_actions else "dras"
    return {1: "mlp", 3: "cnn"}.get(len(shape), "mlp")


def make_network(observation_space, action_space, kind: str | None = None,
                 hidden: tuple[int, ...] | None = None) -> nn.Module:
    """Build the actor-critic network that fits a Box observation space.

    Args:
        observation_space: a ``gymnasium.spaces.Box``.
        action_space: a ``gymnasium.spaces.Discrete``.
        kind: ``mlp``, ``kernel``, ``cnn`` or ``dras``; default from the
            observation (rank 1 -> mlp; rank 2 -> kernel when there is a row per
            action, else dras; rank 3 -> cnn).
        hidden: hidden sizes (for ``cnn`` the first entry is the dense width).

    Returns:
        The network, with a ``spec`` attribute (a plain dict) for
        :func:`network_from_spec`.

    Raises:
        InputError: unknown kind, or a kind that does not fit the observation shape.
    """
    shape = tuple(int(s) for s in observation_space.shape)
    n_actions = int(action_space.n)
    kind = kind or _default_kind(shape, n_actions)
    spec: dict[str, Any] = {"kind": kind, "obs_shape": list(shape), "n_actions": n_actions,
                            "hidden": list(hidden) if hidden is not None else None}
    return network_from_spec(spec)


def _check_size(kind: str, shape: tuple, n_actions: int, hidden) -> None:
    """Refuse a spec whose network passes :data:`cosim.limits.NETWORK_PARAMS`, before building it.

    Counted as the fully connected layers of the network's trunks (the
    actor and the critic each have one for ``mlp``; the CNN's dense layer
    reads 32 channels of the grid), an upper estimate of its parameters.
    """
    defaults = {"mlp": (64, 64), "kernel": (32, 16), "dras": (128, 64), "cnn": (64,)}
    widths = [int(h) for h in hidden] if hidden else list(defaults[kind])
    if kind == "cnn":
        widths = widths[:1]
    first = {"mlp": math.prod(shape), "kernel": shape[-1] if shape else 1,
             "dras": (shape[0] if shape else 1) * 4,
             "cnn": 32 * math.prod(shape[1:]) if len(shape) == 3 else 1}[kind]
    sizes = [int(first), *widths, max(int(n_actions), 1)]
    trunk = list(zip(sizes[:-1], sizes[1:], strict=True))
    limits.check_network(trunk * (2 if kind == "mlp" else 1), "network")


def network_from_spec(spec: dict[str, Any]) -> nn.Module:
    """Rebuild a network from the ``spec`` dict :func:`make_network` recorded.

    Raises:
        InputError: the spec names an unknown kind or a shape the kind cannot take.
    """
    kind = spec.get("kind")
    try:  # a hand-edited meta.json: sizes that are not whole numbers are one line
        shape = tuple(int(s) for s in spec["obs_shape"])
        n_actions = int(spec["n_actions"])
        hidden = spec.get("hidden")
        hidden = None if hidden is None else [int(h) for h in hidden]
    except (KeyError, TypeError, ValueError):
        raise InputError("network", f"obs_shape {spec.get('obs_shape')!r}, n_actions "
                         f"{spec.get('n_actions')!r}, hidden {spec.get('hidden')!r}",
                         "whole-number sizes") from None
    if kind not in NETWORK_KINDS:
        raise InputError("network", repr(kind), f"one of {', '.join(NETWORK_KINDS)}")
    _check_size(kind, shape, n_actions, hidden)
    if kind == "mlp":
        net: nn.Module = MLPPolicy(math.prod(shape), n_actions,
                                   tuple(hidden) if hidden else (64, 64))
    elif kind == "kernel":
        if len(shape) != 2 or shape[0] != n_actions:
            raise InputError("network", f"kernel for observation shape {shape}",
                             f"an observation of shape (n_actions={n_actions}, F)")
        net = KernelPolicy(shape[1], tuple(hidden) if hidden else (32, 16))
    elif kind == "dras":
        if len(shape) != 2:
            raise InputError("network", f"dras for observation shape {shape}",
                             "an observation of shape (2W + R, 2)")
        net = DrasPolicy(shape, n_actions, tuple(hidden) if hidden else (128, 64))
    else:
        if len(shape) != 3:
            raise InputError("network", f"cnn for observation shape {shape}",
                             "an observation of shape (C, H, W)")
        net = CNNPolicy(shape, n_actions, int(hidden[0]) if hidden else 64)
    net.spec = dict(spec)
    return net
