"""The recurrent learner's pieces: step inputs, the pre-run encoder, the figure-2 network.

Used by :class:`predictors.remaining.RemainingTimeRegressor` with
``model="gru"``; torch is imported only inside the functions that need it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

_N_STEP = 7      # per-step inputs of the recurrent branch, see _step_features


def _step_features(values: np.ndarray, rows: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """Causal inputs of the given progress rows (raw, before standardisation).

    Args:
        values: flat progress values (:attr:`Progress.values`).
        rows: the rows to describe.
        row_start: for each of ``rows``, the first row of its job (for the step
            duration of a job's first step and the step index).

    Returns:
        ``(len(rows), _N_STEP)``; computing only the rows an RNN window needs
        keeps inference cheap for MD runs with thousands of steps.
    """
    v = values[rows]
    elapsed = v[:, 0]
    has_prev = rows > row_start
    prev = np.where(has_prev, values[np.maximum(rows - 1, 0), 0] if len(values) else 0.0, 0.0)
    dur = np.maximum(elapsed - prev, 0.0)
    de = np.nan_to_num(v[:, 1], nan=0.0, posinf=0.0, neginf=0.0)
    force = v[:, 2]
    known = np.isfinite(force) & (force > 0)
    return np.column_stack([
        np.log1p(dur),
        np.log1p(np.maximum(elapsed, 0.0)),
        np.sign(de) * np.log10(1.0 + np.abs(de) * 1e6),  # 1 micro-eV resolution, 12 decades
        np.where(known, np.log10(np.where(known, force, 1.0)), 0.0),
        known.astype(np.float64),
        np.log1p(np.nan_to_num(v[:, 3], nan=0.0).clip(min=0)),
        np.log1p(rows - row_start + 1),
    ])


class _StaticEncoder:
    """Pre-run feature matrix -> MLP input; statistics learned on the training matrix."""

    def __init__(self, n_features: int, categorical: Mapping[int, int]):
        self.cat = {int(k): int(v) for k, v in categorical.items()}
        self.num = [j for j in range(n_features) if j not in self.cat]
        self.n_out = 3 * len(self.num) + sum(self.cat.values())

    def stats(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Centre/scale of value and log magnitude, and the log offset, per numeric column."""
        Xn = X[:, self.num]
        absx = np.abs(Xn)
        with np.errstate(all="ignore"), _warnings_off():
            nz = np.where(absx > 0, absx, np.nan)
            med = np.nanmedian(nz, axis=0)
        shift = np.where(np.isfinite(med), med * 1e-3, 1.0)
        lx = self._log(Xn, shift)
        return {"shift": shift, "m1": _nanmean(Xn), "s1": _nanstd(Xn),
                "m2": _nanmean(lx), "s2": _nanstd(lx)}

    @staticmethod
    def _log(Xn: np.ndarray, shift: np.ndarray) -> np.ndarray:
        # log magnitude separates 1e-4 from 1e-8 (EDIFF) where the raw value cannot
        return np.log10(np.abs(Xn) + shift)

    def encode(self, X: np.ndarray, st: Mapping[str, np.ndarray]) -> np.ndarray:
        Xn = X[:, self.num]
        miss = ~np.isfinite(Xn)
        z1 = np.where(miss, 0.0, (Xn - st["m1"]) / st["s1"])
        z2 = np.where(miss, 0.0, (self._log(Xn, st["shift"]) - st["m2"]) / st["s2"])
        parts = [np.clip(z1, -10, 10), np.clip(z2, -10, 10), miss.astype(np.float64)]
        for j, size in self.cat.items():
            code = np.nan_to_num(X[:, j], nan=0.0).astype(np.int64)
            code = np.where((code >= 0) & (code < size), code, 0)
            parts.append(np.eye(size)[code])
        return np.concatenate(parts, axis=1) if parts else np.zeros((len(X), 0))


@contextlib.contextmanager
def _warnings_off() -> Iterator[None]:
    """Silence numpy's all-NaN-slice warnings for columns that are entirely unknown."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _nanmean(a: np.ndarray) -> np.ndarray:
    with _warnings_off():
        m = np.nanmean(np.where(np.isfinite(a), a, np.nan), axis=0)
    return np.nan_to_num(m, nan=0.0)


def _nanstd(a: np.ndarray) -> np.ndarray:
    with _warnings_off():
        s = np.nanstd(np.where(np.isfinite(a), a, np.nan), axis=0)
    s = np.nan_to_num(s, nan=1.0)
    return np.where(s > 1e-12, s, 1.0)


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run torch ops on ``n`` threads, restoring the previous setting afterwards."""
    import torch

    if n is None:
        yield
        return
    old = torch.get_num_threads()
    if old != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if old != n:
            torch.set_num_threads(old)


def _f32(a: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))



def _build_net(n_static: int, n_static_raw: int, n_summary: int, rnn: str, hidden_size: int,
               mlp_hidden: int, num_layers: int) -> Any:
    """The figure-2 network; normalisation statistics live in its buffers (one state_dict)."""
    import torch
    from torch import nn

    class RemainingNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.static_mlp = nn.Sequential(
                nn.Linear(n_static, mlp_hidden), nn.ReLU(),
                nn.Linear(mlp_hidden, mlp_hidden), nn.ReLU())
            rnn_cls = nn.GRU if rnn == "gru" else nn.LSTM
            self.rnn = rnn_cls(_N_STEP, hidden_size, num_layers=num_layers, batch_first=True)
            self.head = nn.Sequential(
                nn.Linear(mlp_hidden + hidden_size + 2 * n_summary, mlp_hidden), nn.ReLU(),
                nn.Linear(mlp_hidden, mlp_hidden), nn.ReLU(),
                nn.Linear(mlp_hidden, 1))
            n_num = n_static_raw
            for name, size in [("shift", n_num), ("m1", n_num), ("s1", n_num), ("m2", n_num),
                               ("s2", n_num), ("step_mean", _N_STEP), ("step_std", _N_STEP),
                               ("summary_mean", n_summary), ("summary_std", n_summary)]:
                # float64: statistics are applied in numpy before the network
                self.register_buffer(name, torch.zeros(size, dtype=torch.float64))

        def forward(self, static, steps, lengths, summary):
            s = self.static_mlp(static)
            h = torch.zeros(len(static), hidden_size, dtype=static.dtype)
            has = lengths > 0
            if bool(has.any()):
                packed = nn.utils.rnn.pack_padded_sequence(
                    steps[has], lengths[has].cpu(), batch_first=True, enforce_sorted=False)
                _, hn = self.rnn(packed)
                if isinstance(hn, tuple):  # LSTM returns (h, c)
                    hn = hn[0]
                h = h.index_put((has.nonzero().squeeze(1),), hn[-1])
            return self.head(torch.cat([s, h, summary], dim=1)).squeeze(1)

    return RemainingNet()
