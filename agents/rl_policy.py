"""A trained agent as a greedy policy: load a checkpoint, act on (observation, mask).

Used by ``python -m agents evaluate`` and, through the front
(:mod:`cosim.compose`), by ``python -m cosim run --policy rl:DIR``. The
checkpoint's ``meta.json`` records the environment the agent was trained in
(:attr:`RLPolicy.env_config`); :attr:`RLPolicy.env_kwargs` are the settings
that shape what the agent sees (:data:`cosim.env.acting.ACTING_KEYS`). This
module builds no environment and no predictions: the front does
(:func:`cosim.compose.make_env`, :func:`cosim.env.acting.acting_policy`).

Examples:
    >>> policy = load_rl_policy("runs/agents/lublin256-ppo-s1")     # doctest: +SKIP
    >>> env = cosim.compose.make_env(policy.env_config)              # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)                                # doctest: +SKIP
    >>> action = policy.act(obs, info["action_mask"])                # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.checkpoint import inference_threads, load_checkpoint
from agents.distributions import MaskedCategorical
from agents.fast import NumpyActor, acting_backend
from agents.networks import network_from_spec, policy_logits
from cosim.env.acting import acting_config
from cosim.env.observations import CompactEncoder
from cosim.errors import InputError

__all__ = ["RLPolicy", "load_rl_policy", "acting_policy_of"]

class RLPolicy:
    """A trained agent acting greedily: its most probable legal action, or for DQL its best Q.

    PPO, A2C and PG agents take the legal action of highest probability (the
    argmax of the masked logits); a DQL agent the legal action of highest
    Q-value (its network's outputs are Q-values).

    :meth:`act` computes the logits in numpy (:class:`agents.fast.NumpyActor`)
    when it was given one, and asks the torch network only for near-ties,
    so its decisions are the torch network's, ties included.

    Args:
        net: the actor-critic network.
        meta: the checkpoint's ``meta.json`` contents.
        fast: the numpy actor of the same weights, or None to act through torch only.

    Attributes:
        algo: ``ppo``, ``a2c``, ``pg`` or ``dql``.
        fallbacks: decisions :meth:`act` left to torch (too close to call in numpy).
        env_config: the saved environment description (may be None).
        update, global_step: training progress of the checkpoint.

    Examples:
        >>> policy = load_rl_policy("runs/agents/x")                  # doctest: +SKIP
        >>> policy.act(obs, mask)                                     # doctest: +SKIP
        3
    """

    def __init__(self, net: torch.nn.Module, meta: dict[str, Any],
                 fast: NumpyActor | None = None):
        self.net = net.eval()
        self.fast = fast
        self.fallbacks = 0
        self.meta = meta
        self.algo = meta.get("algo")
        self.env_config = meta.get("env")
        self.update = meta.get("update")
        self.global_step = meta.get("global_step")
        self._spec = meta["network"]
        self._shape = tuple(self._spec["obs_shape"])

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The env settings that shape what the agent sees and may do (:func:`acting_config`).

        Training-only settings (scenario, teacher, episodes, rewards, predictor) are left out.
        """
        return acting_config(self.env_config)

    def _check(self, obs: np.ndarray, batched: bool) -> None:
        shape = tuple(obs.shape[1:] if batched else obs.shape)
        want = tuple(self._spec["obs_shape"])
        if self._spec["kind"] == "kernel":
            ok = len(shape) == 2 and shape[1] == want[1]   # any number of action rows
        else:
            ok = shape == want or (self._spec["kind"] == "mlp" and math.prod(shape) == math.prod(want))
        if not ok:
            raise InputError("observation", f"shape {shape}",
                             f"shape {want} (what the {self._spec['kind']} network was trained on)")

    @torch.no_grad()
    def action_probabilities(self, obs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The policy's probabilities over actions for one observation (0 where masked).

        For DQL, a softmax of the Q-values (its greedy action is the most probable).
        """
        obs = np.asarray(obs, dtype=np.float32)
        self._check(obs, batched=False)
        logits = policy_logits(self.net, torch.as_tensor(obs)[None])
        m = None if mask is None else torch.as_tensor(np.asarray(mask))[None]
        return MaskedCategorical(logits, m).probs[0].numpy()

    @torch.no_grad()
    def act_batch(self, obs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """Greedy actions for a batch ``(B, ...)`` of observations and ``(B, n)`` masks."""
        obs = np.asarray(obs, dtype=np.float32)
        self._check(obs, batched=True)
        logits = policy_logits(self.net, torch.as_tensor(obs))    # no critic: half the cost
        m = None if masks is None else torch.as_tensor(np.asarray(masks))
        return MaskedCategorical(logits, m).mode().numpy()

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> int:
        """The greedy legal action for one observation and its ``int8`` mask."""
        if self.fast is not None:
            obs = np.asarray(obs)
            if obs.shape != self._shape:
                self._check(obs, batched=False)
            action = self.fast.greedy(obs, mask)
            if action is not None:
                return action
            self.fallbacks += 1
        return int(self.act_batch(np.asarray(obs)[None],
                                  None if mask is None else np.asarray(mask)[None])[0])

    def chooser(self, encoder, actions: str = "select") -> Callable | None:
        """A shortcut ``choose(view, agent)`` for acting in process, or None.

        The shortcut returns :meth:`act`'s answer, or None when its numpy
        path declines (a near-tie: then :meth:`act` answers, torch for the
        tie). Two kinds, used by :func:`cosim.env.acting.acting_policy`:

        - a ``kernel`` network under ``actions="select"`` beside an encoder
          that gives the legal rows alone
          (:meth:`cosim.env.observations.KernelEncoder.legal_rows`): the
          legal actions are a head window's first rows, scored without the
          rest of the observation (:meth:`NumpyActor.greedy_rows`);
        - an ``mlp`` network beside the ``compact`` encoder, any action
          model: the observation's list of floats goes to the network
          without the array and mask handling of :meth:`act`
          (:meth:`NumpyActor.greedy_vector`).
        """
        fast = self.fast
        if fast is None:
            return None
        if fast.kind == "mlp" and type(encoder) is CompactEncoder:
            if tuple(encoder.space.shape) != self._shape:
                return None     # act raises its shape error
            row, greedy_vector = encoder.row, fast.greedy_vector

            def choose_vector(view, agent) -> int | None:
                agent.window_now(view)
                return greedy_vector(row(view, agent), agent.mask.tolist())

            return choose_vector
        legal_rows = getattr(encoder, "legal_rows", None)
        if fast.kind != "kernel" or actions != "select" or legal_rows is None:
            return None
        if tuple(encoder.space.shape[1:]) != self._shape[1:]:
            return None     # act raises its shape error
        greedy_rows = fast.greedy_rows

        def choose(view, agent) -> int | None:
            rows = legal_rows(view, agent)
            return None if rows is None else greedy_rows(rows)

        return choose

    @torch.no_grad()
    def value(self, obs: np.ndarray, mask: np.ndarray | None = None) -> float:
        """The value of one observation: the critic's, or for DQL the best (legal) Q-value."""
        obs = np.asarray(obs, dtype=np.float32)
        self._check(obs, batched=False)
        logits, value = self.net(torch.as_tensor(obs)[None])
        if self.algo != "dql":
            return float(value[0])
        q = logits[0].numpy()
        legal = q if mask is None else q[np.asarray(mask) > 0]
        return float(legal.max())

    def play(self, env, jobs=None, seed: int = 0) -> dict[str, float]:
        """Play one greedy episode in ``env`` (on ``jobs`` when given); its episode metrics."""
        obs, info = env.reset(seed=seed, options=None if jobs is None else {"jobs": jobs})
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(self.act(obs, info["action_mask"]))
            done = term or trunc
        return info["episode_metrics"]


def load_rl_policy(path: str | Path, *, backend: str | None = None) -> RLPolicy:
    """Load the newest checkpoint of a training output (or a checkpoint directory).

    The weights are read with ``torch.load(..., weights_only=True)``.

    Args:
        path: a training output or checkpoint directory.
        backend: ``numpy`` (acting computes the actor's logits in numpy, torch
            only for near-ties; see :mod:`agents.fast`) or ``torch``; default
            from ``AGENTS_ACTING`` (:func:`agents.fast.acting_backend`), numpy.

    Raises:
        InputError: no checkpoint at ``path``, or one this version cannot read.
    """
    state, meta = load_checkpoint(path)
    inference_threads()
    net = network_from_spec(meta["network"])
    try:
        net.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise InputError(str(meta.get("_path", path)), "weights that do not fit the network spec",
                         "a checkpoint written by agents.ppo / agents.a2c") from exc
    return acting_policy_of(net, meta, backend=backend)


def acting_policy_of(net: torch.nn.Module, meta: dict[str, Any], *,
                     backend: str | None = None) -> RLPolicy:
    """The greedy :class:`RLPolicy` of a network as its weights are now (numpy acting by default).

    Every path that acts outside training builds its policy here, so that it
    acts through :mod:`agents.fast` unless ``backend="torch"`` (or
    ``AGENTS_ACTING=torch``) says otherwise. Later changes to ``net``'s
    weights are not seen by the numpy actor: build a new policy.

    Raises:
        InputError: ``backend`` is neither ``numpy`` nor ``torch``.
    """
    if backend is None:
        backend = acting_backend()
    if backend not in ("numpy", "torch"):
        raise InputError("backend", repr(backend), "numpy or torch")
    fast = NumpyActor.from_network(meta["network"], net.state_dict()) if backend == "numpy" else None
    return RLPolicy(net, meta, fast)
