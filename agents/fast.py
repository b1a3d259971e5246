"""The actor's forward pass in numpy, for a trained agent acting one decision at a time.

A greedy agent in ``python -m cosim run --policy rl:DIR`` asks its network
for one decision after another (each start changes what the next one sees),
so nothing can be batched, and torch's fixed cost per call (module dispatch,
tensor wrapping, the critic it also runs, ``logsumexp`` for the masked
distribution) is most of the time a decision takes. :class:`NumpyActor`
holds the actor's weights as numpy arrays, converted once from the
checkpoint's state dict, and computes only the logits.

Decisions stay those of the torch network, ties included. numpy and torch
sum in different orders and use different ``tanh`` code, so their logits
differ in the last bits; :meth:`NumpyActor.greedy` answers only when its
best legal logit leads the second by more than a margin far above that
difference (:data:`MARGIN`, relative to the logits' scale), and otherwise
returns None so that the caller asks torch (the reference path). The
margin also covers the rounding of torch's ``logits - logsumexp`` shift,
which can turn a tiny lead into a tie that ``argmax`` breaks by index.

A ``select`` agent run in process (``rl:DIR``) goes one step further
(issue 20): its legal actions are the first rows of a head window, so the
encoder hands over those rows alone
(:meth:`cosim.env.observations.KernelEncoder.legal_rows`, fixed job
features kept per queue slot) and :meth:`NumpyActor.greedy_rows` scores them
with the biases folded into the weights (:meth:`agents.rl_policy.RLPolicy.chooser`);
near-ties still go to torch with the whole observation.

Set ``AGENTS_ACTING=torch`` in the environment to act through torch only.

Examples:
    >>> import numpy as np, torch
    >>> from agents.networks import KernelPolicy
    >>> net = KernelPolicy(4)
    >>> actor = NumpyActor.from_network({"kind": "kernel"}, net.state_dict())
    >>> obs = np.random.default_rng(0).random((5, 4), dtype=np.float32)
    >>> ref = net(torch.as_tensor(obs)[None])[0][0].detach().numpy()
    >>> bool(np.allclose(actor.logits(obs), ref, atol=1e-5))
    True
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["NumpyActor", "MARGIN", "acting_backend"]

#: Lead (relative to ``1 + |best logit|``) the best legal logit must have over
#: the second for numpy to answer alone. On the shipped checkpoint's whole
#: replay numpy's logits stayed within 1.3e-6 of torch's by that measure;
#: 1e-4 leaves a safety factor near 80 and sends 0.6 % of decisions to torch.
MARGIN = 1e-4

#: A pre-activation whose float32 ``tanh`` is exactly 1 (see ``NumpyActor._rows_net``).
_SATURATE = 64.0

#: leaky ReLU's slope (torch's default, which :class:`agents.networks.DrasPolicy` uses).
_LEAK = 0.01


def acting_backend() -> str:
    """``numpy`` (default) or ``torch``, from the ``AGENTS_ACTING`` environment variable."""
    value = os.environ.get("AGENTS_ACTING", "numpy").strip().lower() or "numpy"
    return "torch" if value == "torch" else "numpy"


def _dense(state: Mapping[str, Any], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    # float32 like the network; weight transposed so that x @ w + b is torch's Linear on rows.
    w = state[f"{prefix}.weight"].detach().cpu().numpy().astype(np.float32)
    b = state[f"{prefix}.bias"].detach().cpu().numpy().astype(np.float32)
    return np.ascontiguousarray(w.T), b


def _trunk(state: Mapping[str, Any], prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The Linear layers of an ``nn.Sequential`` of (Linear, activation) pairs, in order."""
    layers = []
    i = 0
    while f"{prefix}.{i}.weight" in state:
        layers.append(_dense(state, f"{prefix}.{i}"))
        i += 2
    return layers


class NumpyActor:
    """The policy half of an actor-critic network, evaluated in float32 numpy.

    float32 as torch computes: on the shipped checkpoint's replay its logits
    came within 1.3e-6 (relative to ``1 + |logit|``) of torch's, closer than
    a float64 evaluation (3.4e-6) and twice as fast (``tanh``). Build with
    :meth:`from_network`; kinds ``mlp``, ``kernel`` and ``dras`` (a ``cnn``
    keeps acting through torch).

    Args:
        kind: the network kind (:data:`agents.networks.NETWORK_KINDS`).
        layers: the hidden (weight ``(in, out)``, bias) pairs, in order.
        head: the policy head's (weight, bias).
        conv: ``dras`` only: the ``1 x cols`` convolution as (``(cols, channels)`` weight, bias).
    """

    def __init__(self, kind: str, layers: list[tuple[np.ndarray, np.ndarray]],
                 head: tuple[np.ndarray, np.ndarray], conv=None):
        self.kind = kind
        self.layers = layers
        self.head = head
        self.conv = conv
        self._tanh = kind in ("mlp", "kernel")
        self._rows = None   # greedy_rows' layers (see _rows_net)
        self._vector = None  # greedy_vector's layers (see _vector_net)

    @classmethod
    def from_network(cls, spec: Mapping[str, Any], state: Mapping[str, Any]) -> NumpyActor | None:
        """The numpy actor of a network ``spec`` and its ``state_dict``; None for a ``cnn``."""
        kind = spec.get("kind")
        if kind == "mlp":
            return cls(kind, _trunk(state, "actor"), _dense(state, "policy_head"))
        if kind == "kernel":
            w, b = _dense(state, "score_head")
            return cls(kind, _trunk(state, "scorer"), (np.ascontiguousarray(w[:, 0]), b))
        if kind == "dras":
            cw = state["conv.weight"].detach().cpu().numpy().astype(np.float32)   # (C, 1, 1, cols)
            cb = state["conv.bias"].detach().cpu().numpy().astype(np.float32)
            conv = (np.ascontiguousarray(cw[:, 0, 0, :].T), cb)                   # (cols, C)
            return cls(kind, _trunk(state, "body"), _dense(state, "policy_head"), conv)
        return None

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """The actor's logits (float32) for one unbatched observation.

        For a ``kernel`` network, ``obs`` may be any subset of the action rows
        (each row is scored alone): the logits of those rows.
        """
        x = np.asarray(obs, dtype=np.float32)
        if self.kind == "mlp":
            x = x.reshape(-1)
        elif self.kind == "dras":
            w, b = self.conv
            # (rows, C), flattened channel-major as torch's flatten of (C, rows, 1).
            x = _leaky_relu(x @ w + b).T.reshape(-1)
        for w, b in self.layers:
            x = x @ w
            x += b
            if self._tanh:
                np.tanh(x, out=x)
            else:
                x = _leaky_relu(x)
        w, b = self.head
        return x @ w + b

    def greedy(self, obs: np.ndarray, mask: np.ndarray | None) -> int | None:
        """The legal action of highest logit, or None when it is too close to call.

        None also for a mask with no legal action or a wrong length (torch
        then raises its error).
        """
        n = int(self.head[0].shape[-1]) if self.kind != "kernel" else len(obs)
        if mask is None:
            rows = None
        else:
            m = np.asarray(mask)
            if m.shape != (n,):
                return None
            rows = m.nonzero()[0]   # torch's mask: any nonzero is legal
            if len(rows) <= 1:
                # One legal action is the argmax whatever the logits (none: torch raises).
                return int(rows[0]) if len(rows) else None
        if self.kind == "kernel":
            # Each action row is scored alone: only the legal ones are computed,
            # with the folded biases where their first feature is 1 (job rows).
            sub = np.asarray(obs if rows is None else np.asarray(obs)[rows])
            if sub.ndim == 2 and (sub[:, 0] == 1.0).all():
                k = self.greedy_rows(sub)
                return k if k is None or rows is None else int(rows[k])
            z = self.logits(sub)
        else:
            z = self.logits(obs)
            if rows is not None:
                z = z[rows]
        k = _pick(z, 0.0)
        return k if k is None or rows is None else int(rows[k])

    def greedy_rows(self, rows: np.ndarray) -> int | None:
        """:meth:`greedy` of a ``kernel`` network over legal rows alone (no mask).

        ``rows`` are the observation's rows of legal job actions (float32,
        ``is_job`` = 1; see :meth:`cosim.env.observations.KernelEncoder.legal_rows`);
        the answer is an index into them, or None when too close to call.
        """
        if len(rows) == 1:
            return 0    # the argmax whatever the logit
        x = rows
        for w in self._rows_net():
            x = np.dot(x, w)            # np.dot: less overhead than the @ ufunc on small arrays
            if x.ndim == 2:
                np.tanh(x, out=x)
        return _pick(x, 0.0)

    def _rows_net(self) -> list[np.ndarray]:
        """The kernel layers for :meth:`greedy_rows`, biases folded into the weights.

        A legal row's ``is_job`` feature (column 0) is 1, so ``rows @ w + b``
        is ``rows @ w'`` with ``b`` added to ``w``'s row 0. Each hidden layer
        gets one more output whose only weight (on that 1) is large, so its
        ``tanh`` is exactly 1: the next layer's bias rides on it the same way.
        A broadcast bias addition costs a numpy call that loops row by row;
        the folded sums round differently in the last bits, which the
        margin covers.
        """
        if self._rows is None:
            head_w, head_b = self.head
            if not self.layers:         # a linear scorer: the bias on column 0
                w = head_w.copy()
                w[0] += head_b[0]
                self._rows = [w]
                return self._rows
            (w1, b1), *rest = self.layers
            n_in, n_out = w1.shape
            w = np.zeros((n_in, n_out + 1), dtype=np.float32)
            w[:, :n_out] = w1
            w[0, :n_out] += b1           # column 0 of a legal row is 1
            w[0, n_out] = _SATURATE
            ws = [w]
            # input: the previous layer and its 1 (last column)
            ws.extend(_fold_last(wl, bl) for wl, bl in rest)
            ws.append(np.append(head_w, head_b).astype(np.float32))   # the 1 meets the bias
            self._rows = ws
        return self._rows

    def greedy_vector(self, row: list[float], legal: list[int]) -> int | None:
        """:meth:`greedy` of an ``mlp`` network on one observation given as a list.

        ``row`` is the flat observation as Python floats (what
        :meth:`cosim.env.observations.CompactEncoder.row` builds, before its
        copy into an array) and ``legal`` the mask as a list. Same answer as
        :meth:`greedy`, None included: the biases ride on a 1 appended to the
        input (:meth:`_vector_net`) and the legal logits are compared in
        Python, which on a two- or few-action head costs less than numpy's
        masked argmax.
        """
        net = self._vector_net()
        x = np.array([*row, 1.0], dtype=np.float32)
        for w in net[:-1]:
            x = np.dot(x, w)
            np.tanh(x, out=x)
        return _pick_legal(np.dot(x, net[-1]).tolist(), legal)

    def _vector_net(self) -> list[np.ndarray]:
        """The ``mlp`` layers for :meth:`greedy_vector`, each bias folded into its weight.

        The input ends with a 1, so ``x @ w + b`` is ``x' @ w'`` with ``b``
        as ``w'``'s last row; each hidden layer gets one more output that
        saturates to exactly 1 (as in :meth:`_rows_net`) to carry the next
        bias. The margin covers the different rounding of the folded sums.
        """
        if self._vector is None:
            ws = [_fold_last(w, b) for w, b in self.layers]
            head_w, head_b = self.head
            ws.append(np.vstack([head_w, head_b[None, :]]).astype(np.float32))
            self._vector = ws
        return self._vector


def _fold_last(w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A hidden layer whose input ends with a 1: ``b`` as the last row, and one more
    output that only that 1 feeds, large enough that its ``tanh`` is exactly 1."""
    n_in, n_out = w.shape
    f = np.zeros((n_in + 1, n_out + 1), dtype=np.float32)
    f[:n_in, :n_out] = w
    f[n_in, :n_out] = b
    f[n_in, n_out] = _SATURATE
    return f


def _pick_legal(z: list[float], legal: list[int]) -> int | None:
    """:func:`_pick` over the legal entries of ``z`` (Python floats): the index of the
    largest if it leads the second legal one by more than the margin; the only legal
    index whatever its value; None for no legal index or a non-finite logit."""
    best = second = -math.inf
    k = None
    n = 0
    for i, v in enumerate(z):
        if legal[i]:
            n += 1
            if k is None or v > best:
                if k is not None:
                    second = best
                best, k = v, i
            elif v > second:
                second = v
    if n <= 1:
        return k
    if not math.isfinite(sum(z)):   # NaN compares false above: let torch answer
        return None
    if second == -math.inf or best - second > MARGIN * (1.0 + abs(best)):
        return k
    return None


def _pick(z: np.ndarray, offset: float) -> int | None:
    """The index of the largest of ``z + offset`` if it leads the second by more than
    the margin, else None (also for a non-finite best). ``z`` is overwritten."""
    k = int(z.argmax())
    top = float(z[k]) + offset
    if not math.isfinite(top):
        return None
    if len(z) == 1:
        return k
    z[k] = -np.inf
    second = float(z[z.argmax()]) + offset   # argmax: a C method, max() is a Python wrapper
    if second == -np.inf or top - second > MARGIN * (1.0 + abs(top)):
        return k
    return None


def _leaky_relu(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0.0, x, x * np.float32(_LEAK))
