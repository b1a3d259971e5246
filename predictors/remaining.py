"""In-run remaining-time prediction: an RNN over the progress log plus an MLP over inputs.

RLSchert (seed 001, section 3.2 and figure 2) encodes the running features
of a job (energy change and force per ionic step) with a recurrent network,
encodes the input parameters with a fully connected network, and combines
both to predict the remaining run time; it reports 10.3 % MAPE (4.9 %
single-ionic, 25.4 % multi-ionic), falling to 3.55 % / 17.9 % near the end
of jobs. :class:`RemainingTimeRegressor` is that model in PyTorch:

* sequence branch: a GRU (or LSTM) over the last ``window`` completed ionic
  steps, each described by step duration, elapsed time, energy change, log
  max force, SCF step count and step index (standardised);
* static branch: an MLP over the pre-run features (numeric columns as
  standardised value and log magnitude, categoricals one-hot);
* summary features of the whole prefix (steps so far, time since the last
  step, first and last force, the pre-run prediction) so a long run keeps
  its history when the window only shows the recent steps;
* head: an MLP over the three, predicting ``log1p(remaining)`` as a
  correction to the pre-run baseline ``log1p(max(runtime_hat - elapsed,
  floor))``.

Training uses prefixes of every job: cut points at 10 %, 20 %, ..., 90 % of
its run time plus ``random_cuts`` uniform ones (RLSchert section 4.2 splits
the running features into ten parts the same way). A job with no completed
ionic step yet, and no known SCF progress, falls back to the pre-run model
(``no_progress="prerun"``).

Optionally the caller passes the SCF steps finished in the ionic step under
way (``scf_done``): the only in-run signal of a single-point job, which
completes its one ionic step at the very end. Training reconstructs it from
the logs (:func:`scf_done_at`) and hides it in ``scf_dropout`` of the
samples, so the model serves callers with and without it.

Progress arrays have the columns of :data:`PROGRESS_COLUMNS`, one row per
completed ionic step in order, as in ``progress.parquet``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from cosim.errors import InputError
from predictors.persist import Persistable, first_line
from predictors.runtime import RuntimeRegressor, column, data_hash

__all__ = ["PROGRESS_COLUMNS", "Progress", "RemainingTimeRegressor", "FRACTIONS", "scf_done_at"]

#: Columns of a progress array, one row per completed ionic step.
PROGRESS_COLUMNS: tuple[str, ...] = ("elapsed", "denergy", "max_force", "scf_steps")

#: Elapsed fractions of the run at which training and evaluation cut jobs.
FRACTIONS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)

_N_STEP = 7      # per-step inputs, see _step_features
_N_SUMMARY = 14  # per-sample summary inputs, see _summary_features


@dataclass
class Progress:
    """Ragged progress logs of many jobs: all rows concatenated, plus offsets.

    Rows ``offsets[i]:offsets[i+1]`` of ``values`` are job ``i``'s completed
    ionic steps, with columns :data:`PROGRESS_COLUMNS` and ``elapsed``
    non-decreasing. Keeping one flat array makes cutting 20k logs at an
    elapsed time, and gathering the last steps of 10k running jobs, a few
    vectorized numpy operations.

    Examples:
        >>> p = Progress.from_arrays([np.zeros((0, 4)), [[10.0, -0.1, 0.5, 20], [15.0, -0.01, 0.2, 6]]])
        >>> p.lengths().tolist(), p[1][:, 0].tolist()
        ([0, 2], [10.0, 15.0])
        >>> p.prefix(np.array([5.0, 12.0])).lengths().tolist()
        [0, 1]
    """

    values: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64).reshape(-1, len(PROGRESS_COLUMNS))
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0 \
                or self.offsets[-1] != len(self.values) or np.any(np.diff(self.offsets) < 0):
            raise ValueError(f"offsets must rise from 0 to {len(self.values)}; got {self.offsets}")

    @classmethod
    def from_arrays(cls, seqs: Sequence[Any]) -> Progress:
        """Build from one ``(k_i, 4)`` array-like per job (``k_i`` may be 0)."""
        arrs = [np.asarray(s, dtype=np.float64).reshape(-1, len(PROGRESS_COLUMNS)) for s in seqs]
        lengths = np.fromiter((len(a) for a in arrs), dtype=np.int64, count=len(arrs))
        values = np.concatenate(arrs) if arrs else np.zeros((0, len(PROGRESS_COLUMNS)))
        return cls(values, np.concatenate([[0], np.cumsum(lengths)]))

    @classmethod
    def empty(cls, n_jobs: int) -> Progress:
        """``n_jobs`` jobs without any completed step."""
        return cls(np.zeros((0, len(PROGRESS_COLUMNS))), np.zeros(n_jobs + 1, dtype=np.int64))

    @classmethod
    def from_table(cls, progress: Any, job_ids: Any, where: str = "progress") -> Progress:
        """Group a ``progress.parquet`` table by job, in the order of ``job_ids``.

        Rows of jobs not in ``job_ids`` are ignored; rows are ordered by
        ``step`` within a job.

        Raises:
            InputError: a column is missing.
        """
        ids = np.asarray(job_ids).astype(str)
        pid = column(progress, "job_id", where).astype(str)
        step = column(progress, "step", where).astype(np.int64)
        vals = np.column_stack([column(progress, c, where).astype(np.float64)
                                for c in PROGRESS_COLUMNS]) if len(pid) else \
            np.zeros((0, len(PROGRESS_COLUMNS)))
        order_ids = np.argsort(ids, kind="stable")
        pos = np.searchsorted(ids[order_ids], pid)
        pos = np.minimum(pos, max(len(ids) - 1, 0))
        known = (len(ids) > 0) & (ids[order_ids][pos] == pid) if len(ids) else \
            np.zeros(len(pid), dtype=bool)
        job_index = order_ids[pos][known]
        vals, step = vals[known], step[known]
        order = np.lexsort((step, job_index))
        counts = np.bincount(job_index, minlength=len(ids))
        return cls(vals[order], np.concatenate([[0], np.cumsum(counts)]))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """Completed steps per job."""
        return np.diff(self.offsets)

    def job_index(self) -> np.ndarray:
        """For every row, the index of its job."""
        return np.repeat(np.arange(len(self)), self.lengths())

    def take(self, index: Any) -> Progress:
        """The jobs at ``index`` (an integer array), in that order."""
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths()[index]
        starts = self.offsets[:-1][index]
        rows = _segment_rows(starts, lengths)
        return Progress(self.values[rows], np.concatenate([[0], np.cumsum(lengths)]))

    def prefix(self, elapsed: Any) -> Progress:
        """Only the steps each job had completed ``elapsed[i]`` seconds after its start."""
        elapsed = np.asarray(elapsed, dtype=np.float64)
        keep = self.values[:, 0] <= np.repeat(elapsed, self.lengths())
        counts = np.bincount(self.job_index()[keep], minlength=len(self))
        return Progress(self.values[keep], np.concatenate([[0], np.cumsum(counts)]))


def _segment_rows(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(starts[i], starts[i] + lengths[i])`` without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    seg_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - seg_start, lengths) + np.arange(total)


def scf_done_at(progress: Progress, elapsed: Any, job: Any = None) -> np.ndarray:
    """SCF steps finished in the ionic step under way, from complete progress logs.

    SCF steps are taken as evenly spaced within their ionic step, the first
    ionic step starting at elapsed 0 (the logs do not record the start-up
    time). While no ionic step is under way (all finished, final I/O) the
    count is 0. A simulator that knows the true SCF progress of a running
    job (``cosim.workloads.vasp.VaspJobs.progress_at``) should pass that
    instead; this is how training and evaluation reconstruct it.

    Args:
        progress: the complete logs (every ionic step of each job).
        elapsed: seconds since the job started, one per sample.
        job: the job of each sample (default: sample ``i`` is job ``i``).

    Examples:
        >>> p = Progress.from_arrays([[[100.0, -1.0, 0.5, 20], [130.0, -0.1, 0.2, 6]]])
        >>> scf_done_at(p, [0.0, 50.0, 99.0, 115.0, 200.0], job=[0, 0, 0, 0, 0]).tolist()
        [0, 10, 19, 3, 0]
    """
    elapsed = np.asarray(elapsed, dtype=np.float64)
    job = np.arange(len(progress)) if job is None else np.asarray(job, dtype=np.int64)
    k = RemainingTimeRegressor._steps_done(progress, job, elapsed)
    starts = progress.offsets[:-1][job]
    running = k < progress.lengths()[job]
    v = progress.values if len(progress.values) else np.zeros((1, len(PROGRESS_COLUMNS)))
    nxt = np.where(running, starts + k, 0)
    t0 = np.where(k > 0, v[np.maximum(starts + k - 1, 0), 0], 0.0)
    t1 = v[nxt, 0]
    n = np.nan_to_num(v[nxt, 3], nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(t1 > t0, (elapsed - t0) / (t1 - t0), 0.0)
    done = np.floor(np.clip(frac, 0.0, 1.0) * n)
    return np.where(running, np.clip(done, 0, np.maximum(n - 1, 0)), 0).astype(np.int64)


def _as_progress(progress: Progress | Sequence[Any]) -> Progress:
    return progress if isinstance(progress, Progress) else Progress.from_arrays(progress)


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


def _summary_features(values: np.ndarray, starts: np.ndarray, k: np.ndarray,
                      elapsed: np.ndarray, prerun: np.ndarray, floor: float,
                      scf: np.ndarray) -> np.ndarray:
    """Inputs describing a whole prefix, shape ``(n_samples, _N_SUMMARY)``.

    Sample ``i`` is the ``k[i]`` rows of ``values`` from ``starts[i]``, seen
    ``elapsed[i]`` seconds after the job started; ``prerun`` is the pre-run
    run-time prediction; ``scf`` the SCF steps finished in the ionic step under
    way (< 0: unknown). Column 9 is the pre-run baseline the network corrects.
    """
    has = k > 0
    v = values if len(values) else np.zeros((1, len(PROGRESS_COLUMNS)))
    first = np.where(has, starts, 0)
    last = np.where(has, starts + k - 1, 0)
    t_last = np.where(has, v[last, 0], 0.0)
    t_first = np.where(has, v[first, 0], 0.0)
    f_last, f_first = v[last, 2], v[first, 2]
    fknown = has & np.isfinite(f_last) & np.isfinite(f_first) & (f_last > 0) & (f_first > 0)
    ratio = np.log10(np.where(fknown, f_last, 1.0) / np.where(fknown, f_first, 1.0))
    now = np.maximum(elapsed, t_last)
    pre = np.maximum(prerun, 0.0)
    return np.column_stack([
        np.log1p(k),
        np.log1p(t_last),
        np.log1p(now - t_last),
        np.log1p(now),
        has.astype(np.float64),
        np.log1p(t_last / np.maximum(k, 1)),
        ratio,
        np.log1p(pre),
        np.log1p(now) - np.log1p(pre),
        np.log1p(np.maximum(pre - now, floor)),
        np.log1p(t_first),
        # the step under way: SCF steps done and the time each took so far
        (scf >= 0).astype(np.float64),
        np.log1p(np.maximum(scf, 0)),
        np.where(scf > 0, np.log1p((now - t_last) / np.maximum(scf, 1)), 0.0),
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


def _build_net(n_static: int, n_static_raw: int, rnn: str, hidden_size: int,
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
                nn.Linear(mlp_hidden + hidden_size + _N_SUMMARY, mlp_hidden), nn.ReLU(),
                nn.Linear(mlp_hidden, 1))
            # last layer starts at zero: an untrained net predicts the pre-run baseline
            nn.init.zeros_(self.head[-1].weight)
            nn.init.zeros_(self.head[-1].bias)
            n_num = n_static_raw
            for name, size in [("shift", n_num), ("m1", n_num), ("s1", n_num), ("m2", n_num),
                               ("s2", n_num), ("step_mean", _N_STEP), ("step_std", _N_STEP),
                               ("summary_mean", _N_SUMMARY), ("summary_std", _N_SUMMARY)]:
                # float64: statistics are applied in numpy before the float32 network
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
            out = self.head(torch.cat([s, h, summary], dim=1)).squeeze(1)
            return out

    return RemainingNet()


class RemainingTimeRegressor(Persistable, BaseEstimator):
    """Remaining run time of running jobs from their progress log and pre-run features.

    A scikit-learn estimator in its parameter handling (``get_params``,
    ``clone``, fitted attributes ending in ``_``) but not a plain regressor:
    ``fit``/``predict`` take progress logs and elapsed times besides ``X``, so
    it has no ``score(X, y)``.

    Inputs are a pre-run feature matrix ``X`` (rows as
    :meth:`predictors.runtime.FeatureSpec.matrix` builds them), the progress
    so far (a :class:`Progress` or one ``(k_i, 4)`` array per job with
    columns :data:`PROGRESS_COLUMNS`) and the elapsed time of each job.

    Args:
        rnn: ``"gru"`` or ``"lstm"``.
        hidden_size: RNN state size.
        num_layers: stacked RNN layers.
        mlp_hidden: width of the static MLP and of the head.
        window: last completed steps the RNN reads (older ones enter through
            the summary features), which bounds inference cost for MD runs
            with thousands of steps.
        epochs: passes over the training prefixes.
        batch_size: prefixes per gradient step.
        lr: Adam learning rate (cosine-decayed to 5 % over training).
        weight_decay: Adam L2 penalty.
        random_cuts: uniform cut points per job, on top of :data:`FRACTIONS`.
        scf_dropout: share of training prefixes whose SCF progress is hidden,
            so predictions stay calibrated when a caller passes no ``scf_done``.
        no_progress: ``"prerun"``: a job without a completed ionic step (and
            without known SCF progress) gets
            ``max(runtime_hat - elapsed, min_remaining)`` from the pre-run
            model; ``"network"``: the network also answers those (trained on
            such prefixes too).
        min_remaining: floor of every prediction, seconds.
        runtime_model: a :class:`~predictors.runtime.RuntimeRegressor`, fitted
            or not; None trains a default one. Its out-of-fold predictions on
            the training jobs are an input of the network (stacking).
        stack_folds: folds for those out-of-fold predictions (0: in-sample).
        categorical_columns: column index -> number of codes, for one-hot
            encoding (``FeatureSpec.categorical_columns``); other columns are numeric.
        num_threads: torch threads during ``fit`` and ``predict`` (None: leave as is).
        random_state: seed of weights, cut points and batch order.

    Attributes:
        runtime_model_: the fitted pre-run model.
        net_: the fitted ``torch.nn.Module`` (normalisation in its buffers).
        n_features_in_: number of pre-run features.
        training_hash_: SHA-256 of the training inputs.
        loss_curve_: mean training loss per epoch.

    ``save(path)`` / ``load(path)`` keep it as a folder with ``state_dict.pt``
    (tensors only) and the pre-run model in ``runtime/`` (see
    :mod:`predictors.persist`).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(1, 2, size=(40, 1))
        >>> logs = [np.column_stack([np.arange(1, 6) * 60 * x, np.full(5, -0.1),
        ...                          np.full(5, 0.5), np.full(5, 6)]) for x in X[:, 0]]
        >>> runtime = 300 * X[:, 0] + 10
        >>> m = RemainingTimeRegressor(epochs=2, runtime_model=RuntimeRegressor(n_estimators=10))
        >>> m = m.fit(X, logs, runtime)
        >>> rem = m.predict(X[:2], [logs[0][:2], logs[1][:0]], elapsed=[130.0, 10.0])
        >>> rem.shape, bool(np.all(rem >= 1.0))
        ((2,), True)
    """

    _payload_files = ("state_dict.pt",)
    _libraries = ("torch", "xgboost")

    def __init__(self, rnn: str = "gru", hidden_size: int = 32, num_layers: int = 1,
                 mlp_hidden: int = 64, window: int = 16, epochs: int = 12,
                 batch_size: int = 512, lr: float = 3e-3, weight_decay: float = 1e-5,
                 random_cuts: int = 3, scf_dropout: float = 0.3, no_progress: str = "prerun",
                 min_remaining: float = 1.0,
                 runtime_model: RuntimeRegressor | None = None, stack_folds: int = 3,
                 categorical_columns: Mapping[int, int] | None = None,
                 num_threads: int | None = 1, random_state: int = 0):
        self.rnn = rnn
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.mlp_hidden = mlp_hidden
        self.window = window
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.random_cuts = random_cuts
        self.scf_dropout = scf_dropout
        self.no_progress = no_progress
        self.min_remaining = min_remaining
        self.runtime_model = runtime_model
        self.stack_folds = stack_folds
        self.categorical_columns = categorical_columns
        self.num_threads = num_threads
        self.random_state = random_state

    # ------------------------------------------------------------------ checks

    def _check_params(self) -> None:
        if self.rnn not in ("gru", "lstm"):
            raise ValueError(f"rnn must be 'gru' or 'lstm'; got {self.rnn!r}")
        if not 0.0 <= self.scf_dropout <= 1.0:
            raise ValueError(f"scf_dropout must be in [0, 1]; got {self.scf_dropout}")
        if self.no_progress not in ("prerun", "network"):
            raise ValueError(f"no_progress must be 'prerun' or 'network'; got {self.no_progress!r}")
        for name in ("hidden_size", "num_layers", "mlp_hidden", "window", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.epochs < 0 or self.random_cuts < 0 or self.stack_folds < 0 \
                or self.stack_folds == 1:
            raise ValueError("epochs and random_cuts must be >= 0, stack_folds 0 or >= 2")

    @staticmethod
    def _check_inputs(X: Any, progress: Any, elapsed: Any | None, n_features: int | None
                      ) -> tuple[np.ndarray, Progress, np.ndarray | None]:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_jobs, n_features); got shape {X.shape}")
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"X has {X.shape[1]} features, but the model was fitted with "
                             f"{n_features}")
        p = _as_progress(progress)
        if len(p) != len(X):
            raise ValueError(f"progress has {len(p)} jobs, X has {len(X)} rows")
        if np.any(~np.isfinite(p.values[:, 0])) or np.any(p.values[:, 0] < 0):
            raise ValueError("progress 'elapsed' must be finite and >= 0")
        if elapsed is not None:
            elapsed = np.broadcast_to(np.asarray(elapsed, dtype=np.float64), (len(X),))
            if np.any(~np.isfinite(elapsed)) or np.any(elapsed < 0):
                raise ValueError("elapsed must be finite and >= 0")
        return X, p, elapsed

    # --------------------------------------------------------------------- fit

    def fit(self, X: Any, progress: Progress | Sequence[Any], runtime: Any
            ) -> RemainingTimeRegressor:
        """Fit on complete jobs: features, full progress logs and actual run times.

        Args:
            X: ``(n_jobs, n_features)`` pre-run features (NaN allowed).
            progress: every completed ionic step of each job.
            runtime: actual run time of each job, seconds (> 0).

        Returns:
            self.
        """
        import torch

        self._check_params()
        X, p, _ = self._check_inputs(X, progress, None, None)
        y = np.asarray(runtime, dtype=np.float64).ravel()
        if y.shape != (len(X),) or np.any(~np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("runtime must be one finite value > 0 per job")
        if len(X) < 2:
            raise ValueError(f"need at least 2 jobs to fit; got {len(X)}")
        rng = np.random.default_rng(self.random_state)

        self.runtime_model_, prerun = self._fit_prerun(X, y)

        # training prefixes: fixed fractions plus random cut points of every job
        fr = np.concatenate([np.tile(FRACTIONS, (len(X), 1)),
                             rng.uniform(0.0, 1.0, (len(X), self.random_cuts))], axis=1)
        job = np.repeat(np.arange(len(X)), fr.shape[1])
        now = fr.ravel() * y[job]
        k = self._steps_done(p, job, now)
        # SCF progress of the step under way, hidden in a share of the samples so the
        # model also serves callers that only know completed ionic steps
        scf = scf_done_at(p, now, job)
        scf = np.where(rng.random(len(job)) < self.scf_dropout, -1, scf)
        if self.no_progress == "prerun":
            keep = (k > 0) | (scf > 0)
            job, now, k, scf = job[keep], now[keep], k[keep], scf[keep]
        target = np.log1p(np.maximum(y[job] - now, 0.0))

        enc = _StaticEncoder(X.shape[1], self.categorical_columns or {})
        st = enc.stats(X)
        step_raw = _step_features(p.values, np.arange(len(p.values)),
                                  np.repeat(p.offsets[:-1], p.lengths()))
        summ = _summary_features(p.values, p.offsets[:-1][job], k, now, prerun[job],
                                 self.min_remaining, scf)
        self._encoder = enc
        self.n_features_in_ = X.shape[1]
        self.training_hash_ = data_hash(X, p.values, p.offsets, y)
        self.loss_curve_: list[float] = []

        with _torch_threads(self.num_threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.random_state)
            net = _build_net(enc.n_out, len(enc.num), self.rnn, self.hidden_size,
                             self.mlp_hidden, self.num_layers)
            self._set_buffers(net, st, step_raw, summ)
            self.net_ = net
            if len(job) == 0 or self.epochs == 0:
                net.eval()
                return self
            static = _f32(enc.encode(X, st))
            steps = _f32((step_raw - net.step_mean.numpy()) / net.step_std.numpy())
            summ_t = _f32((summ - net.summary_mean.numpy()) / net.summary_std.numpy())
            base = _f32(summ[:, 9])
            tgt = _f32(target)
            job_t, k_t = torch.from_numpy(job), torch.from_numpy(k)
            starts_t = torch.from_numpy(p.offsets[:-1])
            opt = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            n_batches = math.ceil(len(job) / self.batch_size)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=max(1, self.epochs * n_batches), eta_min=self.lr * 0.05)
            gen = torch.Generator().manual_seed(self.random_state)
            net.train()
            for _ in range(self.epochs):
                perm = torch.randperm(len(job), generator=gen)
                total = 0.0
                for b in range(n_batches):
                    idx = perm[b * self.batch_size:(b + 1) * self.batch_size]
                    j, kk = job_t[idx], k_t[idx]
                    window, lengths = self._gather(steps, starts_t[j], kk)
                    pred = base[idx] + net(static[j], window, lengths, summ_t[idx])
                    # L1-like in log space: a relative error of the remaining time
                    loss = torch.nn.functional.smooth_l1_loss(pred, tgt[idx], beta=0.1)
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                    opt.step()
                    sched.step()
                    total += float(loss.detach()) * len(idx)
                self.loss_curve_.append(total / len(job))
            net.eval()
        return self

    def _fit_prerun(self, X: np.ndarray, y: np.ndarray) -> tuple[RuntimeRegressor, np.ndarray]:
        """The fitted pre-run model and its out-of-fold predictions on the training jobs."""
        given = self.runtime_model
        template = given if given is not None else RuntimeRegressor(
            random_state=self.random_state)
        try:
            check_is_fitted(template, "model_")
            model = template
        except NotFittedError:  # train a copy, never mutate the caller's object
            model = clone(template).fit(X, y)
        if self.stack_folds == 0 or len(X) < 2 * self.stack_folds:
            return model, model.predict(X)
        # Out-of-fold predictions: in-sample boosting predictions are too good,
        # and the network would learn to trust them more than it should.
        rng = np.random.default_rng(self.random_state + 1)
        fold = rng.permutation(len(X)) % self.stack_folds
        oof = np.empty(len(X))
        for f in range(self.stack_folds):
            test = fold == f
            oof[test] = clone(template).fit(X[~test], y[~test]).predict(X[test])
        return model, oof

    @staticmethod
    def _steps_done(p: Progress, job: np.ndarray, now: np.ndarray) -> np.ndarray:
        """Completed steps of job ``job[i]`` at time ``now[i]`` (binary search in its log)."""
        elapsed = p.values[:, 0]
        lo, hi = p.offsets[:-1][job], p.offsets[1:][job]
        # vectorised bisection: at most log2(longest log) rounds
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) // 2
            ok = np.zeros(len(job), dtype=bool)
            ok[active] = elapsed[mid[active]] <= now[active]
            lo = np.where(active & ok, mid + 1, lo)
            hi = np.where(active & ~ok, mid, hi)
        return lo - p.offsets[:-1][job]

    @staticmethod
    def _set_buffers(net: Any, st: Mapping[str, np.ndarray], step_raw: np.ndarray,
                     summ: np.ndarray) -> None:
        import torch

        for key, val in st.items():
            getattr(net, key).copy_(torch.from_numpy(np.asarray(val, dtype=np.float64)))
        net.step_mean.copy_(torch.from_numpy(_nanmean(step_raw) if len(step_raw)
                                             else np.zeros(_N_STEP)))
        net.step_std.copy_(torch.from_numpy(_nanstd(step_raw) if len(step_raw)
                                            else np.ones(_N_STEP)))
        net.summary_mean.copy_(torch.from_numpy(_nanmean(summ) if len(summ)
                                                else np.zeros(_N_SUMMARY)))
        net.summary_std.copy_(torch.from_numpy(_nanstd(summ) if len(summ)
                                               else np.ones(_N_SUMMARY)))

    def _gather(self, steps: Any, starts: Any, k: Any) -> tuple[Any, Any]:
        """Right-padded windows of the last ``window`` steps before ``k`` for each sample."""
        import torch

        L = self.window
        lengths = torch.clamp(k, max=L)
        first = starts + k - lengths
        pos = torch.arange(L)
        idx = first[:, None] + pos[None, :]
        valid = pos[None, :] < lengths[:, None]
        idx = torch.where(valid, idx, torch.zeros_like(idx))
        if len(steps) == 0:
            return torch.zeros(len(k), L, _N_STEP, dtype=torch.float32), lengths
        window = steps[idx] * valid[..., None]
        return window, lengths

    # ----------------------------------------------------------------- predict

    def predict(self, X: Any, progress: Progress | Sequence[Any], elapsed: Any,
                prerun: Any | None = None, scf_done: Any | None = None) -> np.ndarray:
        """Remaining seconds of running jobs, batched.

        Args:
            X: ``(n_jobs, n_features)`` pre-run features.
            progress: the steps each job has completed so far (a :class:`Progress`
                or one ``(k_i, 4)`` array per job); steps later than
                ``elapsed`` are ignored.
            elapsed: seconds since each job started (scalar or ``(n_jobs,)``).
            prerun: the pre-run model's run-time predictions for these jobs, if
                the caller cached them at submit time (they do not change while
                a job runs); None computes them, which is most of the cost of
                a call for 10k jobs.
            scf_done: SCF (electronic) steps finished in the ionic step under way,
                per job (< 0 or None: unknown). This is what tells a running
                single-point job apart: it has no completed ionic step until
                its very end. See :func:`scf_done_at`.

        Returns:
            ``(n_jobs,)`` predicted remaining seconds, each >= ``min_remaining``.
        """
        import torch

        check_is_fitted(self, "net_")
        X, p, now = self._check_inputs(X, progress, elapsed, self.n_features_in_)
        assert now is not None
        k = p.lengths()
        last = p.values[np.maximum(p.offsets[1:] - 1, 0), 0] if len(p.values) else now
        if np.any((k > 0) & (last > now)):  # the caller passed steps from the future
            p = p.prefix(now)
            k = p.lengths()
        if prerun is None:
            prerun = self.runtime_model_.predict(X)
        else:
            prerun = np.broadcast_to(np.asarray(prerun, dtype=np.float64), (len(X),))
        floor = self.min_remaining
        out = np.maximum(prerun - now, floor)
        scf = np.full(len(X), -1, dtype=np.int64) if scf_done is None else \
            np.broadcast_to(np.asarray(scf_done, dtype=np.int64), (len(X),))
        use = (k > 0) | (scf > 0) if self.no_progress == "prerun" else np.ones(len(X), bool)
        if not use.any() or not self.loss_curve_:
            return out
        net, enc = self.net_, self._encoder
        sel = np.flatnonzero(use)
        summ = _summary_features(p.values, p.offsets[:-1][sel], k[sel], now[sel], prerun[sel],
                                 floor, scf[sel])
        st = {key: getattr(net, key).numpy() for key in ("shift", "m1", "s1", "m2", "s2")}
        with _torch_threads(self.num_threads), torch.inference_mode():
            static = _f32(enc.encode(X[sel], st))
            # only the rows inside each job's RNN window are featurised
            starts = p.offsets[:-1][sel]
            wl = np.minimum(k[sel], self.window)
            rows = _segment_rows(starts + k[sel] - wl, wl)
            raw = _step_features(p.values, rows, np.repeat(starts, wl))
            steps = _f32((raw - net.step_mean.numpy()) / net.step_std.numpy())
            summ_t = _f32((summ - net.summary_mean.numpy()) / net.summary_std.numpy())
            window, lengths = self._gather(steps, torch.from_numpy(np.cumsum(wl) - wl),
                                           torch.from_numpy(wl))
            z = summ[:, 9] + net(static, window, lengths, summ_t).numpy().astype(np.float64)
            rem = np.expm1(z)
        out[sel] = np.maximum(rem, floor)
        return out

    def predict_runtime(self, X: Any) -> np.ndarray:
        """The pre-run model's run-time prediction (seconds) for ``X``."""
        check_is_fitted(self, "runtime_model_")
        return self.runtime_model_.predict(X)

    # ------------------------------------------------------------------ persist

    def _arch(self) -> dict[str, Any]:
        """What :meth:`_read_payload` needs to rebuild the network."""
        return {"n_features": int(self.n_features_in_),
                "categorical_columns": {str(k): int(v) for k, v in self._encoder.cat.items()},
                "trained": bool(self.loss_curve_)}

    def _restore(self, arch: Mapping[str, Any], state: Mapping[str, Any],
                 runtime_model: RuntimeRegressor, training_hash: str) -> None:
        """Rebuild the fitted state from :meth:`_arch` output and a state_dict."""
        cat = {int(k): int(v) for k, v in arch["categorical_columns"].items()}
        enc = _StaticEncoder(int(arch["n_features"]), cat)
        net = _build_net(enc.n_out, len(enc.num), self.rnn, self.hidden_size, self.mlp_hidden,
                         self.num_layers)
        net.load_state_dict(state, strict=True)
        net.eval()
        self._encoder = enc
        self.net_ = net
        self.runtime_model_ = runtime_model
        self.n_features_in_ = int(arch["n_features"])
        self.training_hash_ = training_hash
        self.loss_curve_ = [math.nan] if arch.get("trained", True) else []

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        """Write ``state_dict.pt`` and the pre-run model in ``runtime/``."""
        import torch

        check_is_fitted(self, "net_")
        # tensors only: torch.save of a plain dict of tensors is loadable with weights_only=True
        state = {k: v.detach().cpu().contiguous() for k, v in self.net_.state_dict().items()}
        torch.save(state, folder / "state_dict.pt")
        (folder / "runtime").mkdir()
        self.runtime_model_._write_folder(folder / "runtime", feature_spec)
        return {"arch": self._arch(), "n_features": int(self.n_features_in_)}

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> RemainingTimeRegressor:
        """Rebuild from ``state_dict.pt`` (read with ``weights_only=True``) and ``runtime/``."""
        import pickle

        import torch

        f = folder / "state_dict.pt"
        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as exc:
            raise InputError(str(f), f"a file torch cannot read safely ({first_line(exc)})",
                             "a state_dict of tensors") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                                  for v in state.values()):
            raise InputError(str(f), type(state).__name__, "a state_dict of tensors")
        runtime_model = RuntimeRegressor.load(folder / "runtime")
        params["runtime_model"] = None
        if params.get("categorical_columns") is not None:
            params["categorical_columns"] = {int(k): int(v)
                                             for k, v in params["categorical_columns"].items()}
        model = cls(**params)
        try:
            model._restore(meta["arch"], state, runtime_model, str(meta.get("training_hash", "")))
        except RuntimeError as exc:  # load_state_dict: missing keys or wrong shapes
            raise InputError(str(f), f"tensors that do not fit the saved architecture "
                             f"({first_line(exc)})", "the state_dict saved with this meta.json"
                             ) from None
        return model
