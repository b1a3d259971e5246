"""In-run remaining-time prediction from a running job's progress and its inputs.

RLSchert (seed 001, section 3.2 and figure 2) predicts the remaining run
time of a running VASP job from its input parameters and its "running
features" (energy change and force per time step), and reports 10.3 % MAPE
of the run time (4.9 % single-ionic, 25.4 % multi-ionic), falling with the
share of the run that has passed. :class:`RemainingTimeRegressor` does the
same with one of two learners behind one scikit-learn-style estimator:

* ``model="gbm"`` (default): gradient-boosted trees (XGBoost) over the
  pre-run features and the progress features of
  :mod:`predictors.progress` (pace per SCF step and per ionic step, the SCF
  convergence of the step under way, force and energy decay extrapolated to
  EDIFFG, steps left to NSW, and the remaining time these imply);
* ``model="gru"``: RLSchert's figure-2 network, a GRU (or LSTM) over the last
  ``window`` finished ionic steps, an MLP over the pre-run features, and the
  same progress features as a third input of the head.

Both predict ``log(total / elapsed)`` of a job cut at a random point of its
run, trained with an absolute (L1) loss: a relative error of the implied
run time, which is what RLSchert's MAPE scores. ``docs/predictors.md`` says
why the boosted trees are the default (measured, per elapsed decile).

Training cuts every job at ``cuts`` uniformly random points of its run, the
distribution a scheduler sees when it looks at running jobs at regular
intervals, and reconstructs what was visible at each cut: the finished ionic
steps, the SCF lines of the step under way (:attr:`Progress.lines`) and the
start-up time once the first SCF line is out. A share ``scf_dropout`` of the
cuts hides the SCF view, so the model also serves callers that only know
finished ionic steps.

Progress arrays have the columns of :data:`PROGRESS_COLUMNS`, one row per
completed ionic step in order, as in ``progress.parquet``.

The progress arrays and cuts live in :mod:`predictors.observation`, the
recurrent network's pieces in :mod:`predictors.remaining_net`; this module
re-exports the public names (``Progress``, ``observe``, ``scf_done_at``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from cosim import limits
from cosim.errors import InputError
from predictors.observation import (
    FRACTIONS,
    PROGRESS_COLUMNS,
    Observation,
    Progress,
    _as_progress,
    _ragged,
    _steps_done,
    observe,
    scf_done_at,
)
from predictors.persist import Persistable, first_line
from predictors.progress import (
    FEATURE_NAMES,
    ProgressInputs,
    physics_from_matrix,
    progress_features,
    quantize,
    segment_rows,
)
from predictors.remaining_net import (
    _N_STEP,
    _build_net,
    _f32,
    _nanmean,
    _nanstd,
    _StaticEncoder,
    _step_features,
    _torch_threads,
)
from predictors.runtime import RuntimeRegressor, data_hash

__all__ = ["PROGRESS_COLUMNS", "Progress", "RemainingTimeRegressor", "FRACTIONS", "scf_done_at",
           "Observation", "observe"]

_MAX_LOG_RATIO = 12.0  # cap of log(total / elapsed) for cuts a few ms after the start


class RemainingTimeRegressor(Persistable, BaseEstimator):
    """Remaining run time of running jobs from their progress and pre-run features.

    A scikit-learn estimator in its parameter handling (``get_params``,
    ``clone``, fitted attributes ending in ``_``) but not a plain regressor:
    ``fit``/``predict`` take progress logs and elapsed times besides ``X``, so
    it has no ``score(X, y)``.

    Inputs are a pre-run feature matrix ``X`` (rows as
    :meth:`predictors.runtime.FeatureSpec.matrix` builds them), the progress
    so far (a :class:`Progress` or one ``(k_i, 4)`` array per job with
    columns :data:`PROGRESS_COLUMNS`), the elapsed time of each job and, when
    the caller sees them, the SCF view of the step under way: SCF lines done,
    their ``dE`` and the start-up time.

    Args:
        model: ``"gbm"`` (boosted trees over progress features) or ``"gru"``
            (a recurrent network over the last ionic steps plus the same
            features); see the module docstring.
        n_estimators, max_depth, learning_rate, subsample, colsample_bytree,
            min_child_weight: the boosted trees (``model="gbm"``).
        rnn: ``"gru"`` or ``"lstm"`` (``model="gru"``).
        hidden_size: RNN state size.
        num_layers: stacked RNN layers.
        mlp_hidden: width of the static MLP and of the head.
        window: last completed steps the RNN reads.
        epochs: passes over the training cuts (``model="gru"``).
        batch_size: cuts per gradient step.
        lr: Adam learning rate (cosine-decayed to 5 % over training).
        weight_decay: Adam L2 penalty.
        cuts: uniformly random cut points per training job.
        scf_dropout: share of training cuts whose SCF view is hidden.
        min_remaining: floor of every prediction, seconds.
        runtime_model: a :class:`~predictors.runtime.RuntimeRegressor`, fitted
            or not; None trains a default one. Its out-of-fold predictions on
            the training jobs are an input (stacking).
        stack_folds: folds for those out-of-fold predictions (0: in-sample).
        categorical_columns: column index -> number of codes, for one-hot
            encoding in the network (``FeatureSpec.categorical_columns``).
        feature_names: names of the columns of ``X`` (``FeatureSpec.names``),
            so the progress features find ``NSW``, ``EDIFFG``, ``EDIFF``, ...
            (:data:`predictors.progress.PHYSICS_COLUMNS`); None: no such
            projections.
        num_threads: threads during ``fit`` and ``predict`` (XGBoost and torch).
        random_state: seed of cut points, trees and weights.

    Attributes:
        runtime_model_: the fitted pre-run model.
        booster_: the fitted ``xgboost.Booster`` (``model="gbm"``).
        net_: the fitted ``torch.nn.Module`` (``model="gru"``).
        n_features_in_: number of pre-run features.
        training_hash_: SHA-256 of the training inputs.
        loss_curve_: training loss (mean absolute error of log(total / elapsed))
            per epoch or per boosting round.

    ``save(path)`` / ``load(path)`` keep it as a folder with ``remaining.ubj``
    (XGBoost's own format) or ``state_dict.pt`` (tensors only), and the pre-run
    model in ``runtime/`` (see :mod:`predictors.persist`).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(1, 2, size=(40, 1))
        >>> logs = [np.column_stack([np.arange(1, 6) * 60 * x, np.full(5, -0.1),
        ...                          np.full(5, 0.5), np.full(5, 6)]) for x in X[:, 0]]
        >>> runtime = 300 * X[:, 0] + 10
        >>> m = RemainingTimeRegressor(n_estimators=20, runtime_model=RuntimeRegressor(n_estimators=10))
        >>> m = m.fit(X, logs, runtime)
        >>> rem = m.predict(X[:2], [logs[0][:2], logs[1][:0]], elapsed=[130.0, 10.0])
        >>> rem.shape, bool(np.all(rem >= 1.0))
        ((2,), True)
    """

    _libraries = ("xgboost", "torch")

    def __init__(self, model: str = "gbm", n_estimators: int = 50, max_depth: int = 8,
                 learning_rate: float = 0.25, subsample: float = 0.8,
                 colsample_bytree: float = 0.8, min_child_weight: float = 20.0,
                 rnn: str = "gru", hidden_size: int = 32, num_layers: int = 1,
                 mlp_hidden: int = 64, window: int = 16, epochs: int = 12,
                 batch_size: int = 512, lr: float = 3e-3, weight_decay: float = 1e-5,
                 cuts: int = 12, scf_dropout: float = 0.15, min_remaining: float = 1.0,
                 runtime_model: RuntimeRegressor | None = None, stack_folds: int = 3,
                 categorical_columns: Mapping[int, int] | None = None,
                 feature_names: Sequence[str] | None = None,
                 num_threads: int | None = 1, random_state: int = 0):
        self.model = model
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.rnn = rnn
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.mlp_hidden = mlp_hidden
        self.window = window
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.cuts = cuts
        self.scf_dropout = scf_dropout
        self.min_remaining = min_remaining
        self.runtime_model = runtime_model
        self.stack_folds = stack_folds
        self.categorical_columns = categorical_columns
        self.feature_names = feature_names
        self.num_threads = num_threads
        self.random_state = random_state

    @property
    def _payload_files(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("remaining.ubj",) if self.model == "gbm" else ("state_dict.pt",)

    # ------------------------------------------------------------------ checks

    def _check_params(self) -> None:
        if self.model not in ("gbm", "gru"):
            raise ValueError(f"model must be 'gbm' or 'gru'; got {self.model!r}")
        if self.rnn not in ("gru", "lstm"):
            raise ValueError(f"rnn must be 'gru' or 'lstm'; got {self.rnn!r}")
        if not 0.0 <= self.scf_dropout <= 1.0:
            raise ValueError(f"scf_dropout must be in [0, 1]; got {self.scf_dropout}")
        for name in ("hidden_size", "num_layers", "mlp_hidden", "window", "batch_size",
                     "n_estimators", "max_depth", "cuts"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1; got {getattr(self, name)}")
        if self.epochs < 0 or self.stack_folds < 0 or self.stack_folds == 1:
            raise ValueError("epochs must be >= 0, stack_folds 0 or >= 2")

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

    # ------------------------------------------------------------ the design

    def _physics(self, X: np.ndarray) -> dict[str, np.ndarray]:
        return physics_from_matrix(X, self.feature_names)

    def _design(self, X: np.ndarray, inputs: ProgressInputs) -> np.ndarray:
        """Rows ``[X, progress features]`` for the boosted trees, in float32 as XGBoost reads them."""
        return np.concatenate([X.astype(np.float32), progress_features(inputs)], axis=1)

    def _inputs_at(self, X: np.ndarray, p: Progress, obs: Observation,
                   prerun: np.ndarray) -> ProgressInputs:
        """Progress inputs of cuts of complete logs (training and evaluation)."""
        phys = self._physics(X)
        job = obs.job
        return ProgressInputs(
            values=p.values, starts=p.offsets[:-1][job], k=obs.k, now=obs.elapsed,
            scf=obs.scf_done, trace=p.lines if p.lines is not None else np.zeros(0),
            trace_starts=obs.lines_start, trace_len=obs.lines_len, prerun=prerun[job],
            physics={c: a[job] for c, a in phys.items()}, startup=obs.startup)

    # --------------------------------------------------------------------- fit

    def fit(self, X: Any, progress: Progress | Sequence[Any], runtime: Any,
            startup: Any = None) -> RemainingTimeRegressor:
        """Fit on complete jobs: features, full progress logs and actual run times.

        Args:
            X: ``(n_jobs, n_features)`` pre-run features (NaN allowed).
            progress: every completed ionic step of each job; with
                :attr:`Progress.lines`, the SCF lines of every step too.
            runtime: actual run time of each job, seconds (> 0).
            startup: seconds before each job's first SCF line (None or NaN:
                unknown; SCF steps of the first ionic step are then taken to
                start at 0).

        Returns:
            self.
        """
        self._check_params()
        X, p, _ = self._check_inputs(X, progress, None, None)
        y = np.asarray(runtime, dtype=np.float64).ravel()
        if y.shape != (len(X),) or np.any(~np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("runtime must be one finite value > 0 per job")
        if len(X) < 2:
            raise ValueError(f"need at least 2 jobs to fit; got {len(X)}")
        if startup is not None:
            startup = np.asarray(startup, dtype=np.float64).ravel()
            if startup.shape != (len(X),):
                raise ValueError(f"startup has {startup.size} values, X has {len(X)} rows")
        rng = np.random.default_rng(self.random_state)
        self.runtime_model_, prerun = self._fit_prerun(X, y)

        # training cuts: uniformly random points of every job's run
        job = np.repeat(np.arange(len(X)), self.cuts)
        now = rng.uniform(0.0, 1.0, len(job)) * y[job]
        seen = rng.random(len(job)) >= self.scf_dropout
        obs = observe(p, now, job, startup, scf=seen)
        inputs = self._inputs_at(X, p, obs, prerun)
        target = quantize(np.minimum(np.log(y[job] / np.maximum(obs.elapsed, 1.0)),
                                     _MAX_LOG_RATIO))
        self.n_features_in_ = X.shape[1]
        self.training_hash_ = data_hash(X, p.values, p.offsets, y)
        if self.model == "gbm":
            self._fit_gbm(self._design(X[job], inputs), target)
        else:
            self._fit_gru(X, p, job, inputs, target)
        return self

    def _booster_params(self) -> dict[str, Any]:
        return {"objective": "reg:absoluteerror", "max_depth": int(self.max_depth),
                "eta": float(self.learning_rate), "subsample": float(self.subsample),
                "colsample_bytree": float(self.colsample_bytree),
                "min_child_weight": float(self.min_child_weight), "tree_method": "hist",
                "max_bin": 256, "nthread": int(self.num_threads or 1),
                "seed": int(self.random_state), "eval_metric": "mae"}

    def _fit_gbm(self, D: np.ndarray, target: np.ndarray) -> None:
        import xgboost as xgb

        dm = xgb.DMatrix(D, label=target, nthread=int(self.num_threads or 1))
        hist: dict[str, Any] = {}
        self.booster_ = xgb.train(self._booster_params(), dm, int(self.n_estimators),
                                  evals=[(dm, "train")], evals_result=hist, verbose_eval=False)
        self.loss_curve_ = [float(v) for v in hist["train"]["mae"]]

    def _fit_gru(self, X: np.ndarray, p: Progress, job: np.ndarray, inputs: ProgressInputs,
                 target: np.ndarray) -> None:
        import torch

        enc = _StaticEncoder(X.shape[1], self.categorical_columns or {})
        st = enc.stats(X)
        step_raw = _step_features(p.values, np.arange(len(p.values)),
                                  np.repeat(p.offsets[:-1], p.lengths()))
        summ = progress_features(inputs).astype(np.float64)
        self._encoder = enc
        self.loss_curve_ = []
        with _torch_threads(self.num_threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.random_state)
            net = _build_net(enc.n_out, len(enc.num), summ.shape[1], self.rnn, self.hidden_size,
                             self.mlp_hidden, self.num_layers)
            self._set_buffers(net, st, step_raw, summ)
            self.net_ = net
            if self.epochs == 0:
                net.eval()
                return
            static = _f32(enc.encode(X, st))
            steps = _f32((step_raw - net.step_mean.numpy()) / net.step_std.numpy())
            summ_t = _f32(self._summary(net, summ))
            tgt = _f32(target)
            job_t, k_t = torch.from_numpy(job), torch.from_numpy(inputs.k.astype(np.int64))
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
                    pred = net(static[j], window, lengths, summ_t[idx])
                    loss = torch.nn.functional.l1_loss(pred, tgt[idx])
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                    opt.step()
                    sched.step()
                    total += float(loss.detach()) * len(idx)
                self.loss_curve_.append(total / len(job))
            net.eval()

    @staticmethod
    def _summary(net: Any, summ: np.ndarray) -> np.ndarray:
        """Standardised progress features with NaN as 0, plus one 'unknown' flag per column."""
        miss = ~np.isfinite(summ)
        z = (summ - net.summary_mean.numpy()) / net.summary_std.numpy()
        return np.concatenate([np.clip(np.where(miss, 0.0, z), -10, 10), miss], axis=1)

    def _fit_prerun(self, X: np.ndarray, y: np.ndarray) -> tuple[RuntimeRegressor, np.ndarray]:
        """The fitted pre-run model and its out-of-fold predictions on the training jobs."""
        given = self.runtime_model
        template = given if given is not None else RuntimeRegressor(
            n_jobs=int(self.num_threads or 1), random_state=self.random_state)
        try:
            check_is_fitted(template, "model_")
            model = template
        except NotFittedError:  # train a copy, never mutate the caller's object
            model = clone(template).fit(X, y)
        if self.stack_folds == 0 or len(X) < 2 * self.stack_folds:
            return model, model.predict(X)
        # Out-of-fold predictions: in-sample boosting predictions are too good,
        # and the model would learn to trust them more than it should.
        rng = np.random.default_rng(self.random_state + 1)
        fold = rng.permutation(len(X)) % self.stack_folds
        oof = np.empty(len(X))
        for f in range(self.stack_folds):
            test = fold == f
            oof[test] = clone(template).fit(X[~test], y[~test]).predict(X[test])
        return model, oof

    # the bisection lives with the progress arrays; kept here under its old name
    _steps_done = staticmethod(_steps_done)

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
        net.summary_mean.copy_(torch.from_numpy(_nanmean(summ)))
        net.summary_std.copy_(torch.from_numpy(_nanstd(summ)))

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
                prerun: Any | None = None, scf_done: Any | None = None,
                scf_lines: Sequence[Any] | None = None, startup: Any | None = None
                ) -> np.ndarray:
        """Remaining seconds of running jobs, batched.

        Args:
            X: ``(n_jobs, n_features)`` pre-run features.
            progress: the ionic steps each job has completed so far (a
                :class:`Progress` or one ``(k_i, 4)`` array per job); steps
                later than ``elapsed`` are ignored.
            elapsed: seconds since each job started (scalar or ``(n_jobs,)``).
            prerun: the pre-run model's predictions for these jobs, if the
                caller cached them at submit time (they do not change while a
                job runs); None computes them.
            scf_done: SCF lines finished in the ionic step under way, per job
                (< 0 or None: not seen). The only in-run signal of a
                single-point job, which finishes its one ionic step at the end.
            scf_lines: per job, the ``dE`` of those SCF lines (a list of
                numbers, empty or None when not seen): how close the SCF is
                to converging.
            startup: per job, seconds from its start to its first SCF line
                (NaN or None: not known yet).

        Returns:
            ``(n_jobs,)`` predicted remaining seconds, each >= ``min_remaining``.
        """
        check_is_fitted(self, "loss_curve_")
        X, p, now = self._check_inputs(X, progress, elapsed, self.n_features_in_)
        assert now is not None
        n = len(X)
        k = p.lengths()
        last = p.values[np.maximum(p.offsets[1:] - 1, 0), 0] if len(p.values) else now
        if np.any((k > 0) & (last > now)):  # the caller passed steps from the future
            p = p.prefix(now)
            k = p.lengths()
        prerun = self.runtime_model_.predict(X) if prerun is None else \
            np.broadcast_to(np.asarray(prerun, dtype=np.float64), (n,)).copy()
        scf = np.full(n, -1, dtype=np.int64) if scf_done is None else \
            np.broadcast_to(np.asarray(scf_done, dtype=np.int64), (n,))
        trace, toff = _ragged(scf_lines, n, "scf_lines")
        su = np.full(n, np.nan) if startup is None else \
            np.broadcast_to(np.asarray(startup, dtype=np.float64), (n,))
        inputs = ProgressInputs(values=p.values, starts=p.offsets[:-1], k=k, now=now, scf=scf,
                                trace=trace, trace_starts=toff[:-1], trace_len=np.diff(toff),
                                prerun=prerun, physics=self._physics(X), startup=su)
        return self._predict_inputs(X, p, np.arange(n), inputs)

    def predict_at(self, X: Any, progress: Progress, elapsed: Any, prerun: Any | None = None,
                   startup: Any | None = None, scf: bool = True) -> np.ndarray:
        """Remaining seconds of jobs cut at ``elapsed``, from their complete logs.

        What :meth:`predict` answers for the same jobs given what each showed at
        ``elapsed`` (:func:`observe`); evaluation and benchmarks use it.

        Args:
            X: pre-run features of the jobs.
            progress: their complete logs (with SCF lines when known).
            elapsed: per job, the cut.
            prerun: cached pre-run predictions (None computes them).
            startup: per job, seconds before its first SCF line.
            scf: False hides the SCF view (ionic steps only).
        """
        check_is_fitted(self, "loss_curve_")
        X, p, now = self._check_inputs(X, progress, elapsed, self.n_features_in_)
        prerun = self.runtime_model_.predict(X) if prerun is None else \
            np.asarray(prerun, dtype=np.float64)
        obs = observe(p, now, None, startup, scf=scf)
        return self._predict_inputs(X, p, obs.job, self._inputs_at(X, p, obs, prerun))

    def predict_arrays(self, X: Any, batch: Mapping[str, Any]) -> np.ndarray:
        """Remaining seconds of running jobs whose progress is given as flat arrays.

        What :meth:`predict` answers for the same jobs, without building a
        :class:`Progress` of per-job copies: ``batch["values"]`` holds the
        progress rows of many jobs (a whole workload's, shared by every
        call), and each job points into it. Every row of the answer depends
        only on its own job's inputs, so rows of one batch may be asked in
        another (a caller may ask ahead for the times it will need).

        Args:
            X: ``(n_jobs, n_features)`` pre-run features.
            batch: numpy arrays ``values`` (flat rows :data:`PROGRESS_COLUMNS`),
                ``starts`` and ``k`` (each job's rows are ``starts .. starts + k``),
                ``elapsed``, ``scf_done`` (< 0: not seen), ``trace`` (flat SCF
                ``dE``), ``trace_starts`` and ``trace_len``, ``startup`` (NaN:
                not known yet) and ``prerun``, one entry per job.
        """
        check_is_fitted(self, "loss_curve_")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be (n_jobs, {self.n_features_in_}); got shape {X.shape}")
        n = len(X)
        values = np.asarray(batch["values"], dtype=np.float64).reshape(-1, len(PROGRESS_COLUMNS))
        inputs = ProgressInputs(
            values=values, starts=np.asarray(batch["starts"], dtype=np.int64),
            k=np.asarray(batch["k"], dtype=np.int64),
            now=np.asarray(batch["elapsed"], dtype=np.float64),
            scf=np.asarray(batch["scf_done"], dtype=np.int64),
            trace=np.asarray(batch["trace"], dtype=np.float64),
            trace_starts=np.asarray(batch["trace_starts"], dtype=np.int64),
            trace_len=np.asarray(batch["trace_len"], dtype=np.int64),
            prerun=np.asarray(batch["prerun"], dtype=np.float64).copy(),
            physics=self._physics(X), startup=np.asarray(batch["startup"], dtype=np.float64))
        for name in ("starts", "k", "now", "scf", "trace_starts", "trace_len", "prerun",
                     "startup"):
            if len(getattr(inputs, name)) != n:
                raise ValueError(f"{name} has {len(getattr(inputs, name))} entries, X has {n} rows")
        # the network gathers its step rows from the flat values by starts and k
        p = Progress(values, np.array([0, len(values)]))
        return self._predict_inputs(X, p, np.arange(n), inputs)

    def _predict_inputs(self, X: np.ndarray, p: Progress, job: np.ndarray,
                        inputs: ProgressInputs) -> np.ndarray:
        now = np.asarray(inputs.now, dtype=np.float64)
        if self.model == "gbm":
            D = self._design(X[job], inputs)
            z = self.booster_.inplace_predict(D)
        else:
            z = self._net_predict(X[job], p, inputs)
        # the model predicts log(total / max(elapsed, 1 s)) >= 0
        total = np.maximum(now, 1.0) * np.exp(np.clip(np.asarray(z, dtype=np.float64), 0.0,
                                                      _MAX_LOG_RATIO))
        rem = total - now
        # float32: last-bit differences between machines stay out of schedules
        return quantize(np.maximum(rem, self.min_remaining))

    def _net_predict(self, X: np.ndarray, p: Progress, inputs: ProgressInputs) -> np.ndarray:
        import torch

        net, enc = self.net_, self._encoder
        k = np.asarray(inputs.k, dtype=np.int64)
        starts = np.asarray(inputs.starts, dtype=np.int64)
        summ = progress_features(inputs).astype(np.float64)
        st = {key: getattr(net, key).numpy() for key in ("shift", "m1", "s1", "m2", "s2")}
        with _torch_threads(self.num_threads), torch.inference_mode():
            static = _f32(enc.encode(X, st))
            wl = np.minimum(k, self.window)
            rows = segment_rows(starts + k - wl, wl)
            raw = _step_features(p.values, rows, np.repeat(starts, wl))
            steps = _f32((raw - net.step_mean.numpy()) / net.step_std.numpy())
            window, lengths = self._gather(steps, torch.from_numpy(np.cumsum(wl) - wl),
                                           torch.from_numpy(wl))
            out = net(static, window, lengths, _f32(self._summary(net, summ)))
        return out.numpy().astype(np.float64)

    def predict_runtime(self, X: Any) -> np.ndarray:
        """The pre-run model's run-time prediction (seconds) for ``X``."""
        check_is_fitted(self, "runtime_model_")
        return self.runtime_model_.predict(X)

    # ------------------------------------------------------------------ persist

    def _arch(self) -> dict[str, Any]:
        """What :meth:`_read_payload` needs to rebuild the fitted model."""
        arch: dict[str, Any] = {"n_features": int(self.n_features_in_),
                                "n_progress_features": len(FEATURE_NAMES),
                                "progress_features": list(FEATURE_NAMES),
                                "loss_curve": [float(v) for v in self.loss_curve_]}
        if self.model == "gru":
            arch["categorical_columns"] = {str(k): int(v) for k, v in self._encoder.cat.items()}
        return arch

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        """Write ``remaining.ubj`` or ``state_dict.pt``, and the pre-run model in ``runtime/``."""
        check_is_fitted(self, "loss_curve_")
        if self.model == "gbm":
            self.booster_.save_model(str(folder / "remaining.ubj"))
        else:
            import torch

            # tensors only: a plain dict of tensors is loadable with weights_only=True
            state = {k: v.detach().cpu().contiguous() for k, v in self.net_.state_dict().items()}
            torch.save(state, folder / "state_dict.pt")
        (folder / "runtime").mkdir()
        self.runtime_model_._write_folder(folder / "runtime", feature_spec)
        return {"arch": self._arch(), "n_features": int(self.n_features_in_)}

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> RemainingTimeRegressor:
        """Rebuild from ``remaining.ubj`` or ``state_dict.pt`` (``weights_only=True``) and ``runtime/``."""
        runtime_model = RuntimeRegressor.load(folder / "runtime")
        params["runtime_model"] = None
        if params.get("categorical_columns") is not None:
            params["categorical_columns"] = {int(k): int(v)
                                             for k, v in params["categorical_columns"].items()}
        model = cls(**params)
        arch = meta["arch"]
        if list(arch.get("progress_features", [])) != list(FEATURE_NAMES):
            raise InputError(str(folder / "meta.json"), "a model on other progress features",
                             "a model trained by this version (retrain it)")
        model.runtime_model_ = runtime_model
        model.n_features_in_ = int(arch["n_features"])
        model.training_hash_ = str(meta.get("training_hash", ""))
        model.loss_curve_ = [float(v) for v in arch["loss_curve"]]
        if model.model == "gbm":
            model._read_booster(folder / "remaining.ubj")
        else:
            model._read_net(folder / "state_dict.pt", arch)
        return model

    def _read_booster(self, f: Path) -> None:
        import xgboost as xgb
        from xgboost.core import XGBoostError

        try:
            booster = xgb.Booster(params={"nthread": int(self.num_threads or 1)})
            booster.load_model(str(f))
        except XGBoostError as exc:
            raise InputError(str(f), f"a file XGBoost cannot read ({first_line(exc)})",
                             "an XGBoost UBJ model") from None
        self.booster_ = booster

    def _check_net_size(self, enc: _StaticEncoder, n_progress: int, where: Path) -> None:
        """Refuse a saved architecture past :data:`cosim.limits.NETWORK_PARAMS` before building it.

        An RNN layer has ``gates`` fully connected maps of its input and its
        state (3 for a GRU, 4 for an LSTM); the static MLP and the head are
        ``mlp_hidden`` wide.
        """
        h, m, n = int(self.hidden_size), int(self.mlp_hidden), int(self.num_layers)
        gates = 3 if self.rnn == "gru" else 4
        if n < 1:
            raise InputError(f"{where}: num_layers", str(n), "at least 1 RNN layer")
        first = [(n_progress + h, h)] * gates
        # Layers past the first are all alike: counted once, times their number, so
        # 10**6 layers cost one multiplication, not a list of 10**6 entries.
        rest = [((2 * h + 1) * (n - 1) - 1, h)] * gates if n > 1 else []
        mlp = [(max(enc.n_out, 1), m), (m + h, m), (m, 1)]
        limits.check_network(first + rest + mlp, f"{where}: the network it describes")

    def _read_net(self, f: Path, arch: Mapping[str, Any]) -> None:
        import pickle

        import torch

        try:
            state = torch.load(f, map_location="cpu", weights_only=True)
        except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as exc:
            raise InputError(str(f), f"a file torch cannot read safely ({first_line(exc)})",
                             "a state_dict of tensors") from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                                  for v in state.values()):
            raise InputError(str(f), type(state).__name__, "a state_dict of tensors")
        cat = {int(k): int(v) for k, v in arch["categorical_columns"].items()}
        enc = _StaticEncoder(int(arch["n_features"]), cat)
        self._check_net_size(enc, int(arch["n_progress_features"]), f.parent / "meta.json")
        net = _build_net(enc.n_out, len(enc.num), int(arch["n_progress_features"]), self.rnn,
                         self.hidden_size, self.mlp_hidden, self.num_layers)
        try:
            net.load_state_dict(state, strict=True)
        except RuntimeError as exc:  # missing keys or wrong shapes
            raise InputError(str(f), f"tensors that do not fit the saved architecture "
                             f"({first_line(exc)})", "the state_dict saved with this meta.json"
                             ) from None
        net.eval()
        self._encoder = enc
        self.net_ = net
