"""The evaluation table of the run-time and remaining-time predictors.

Pre-run predictors (user estimate ``req_time``, user history, XGBoost) are
scored on every job, overall and for single / multi-ionic jobs. The in-run
model is scored at elapsed fractions 10 %, 20 %, ..., 90 % of each job
against the pre-run fallback ``max(runtime_hat - elapsed, floor)``, as in
RLSchert's Table 5 and figure 6 (seed 001).

Metrics follow ``METRICS.md`` through :func:`cosim.metrics.prediction_error`:
MAPE, accuracy (mean of min/max ratio) and underestimation rate. For the
remaining time two errors are reported, because the papers use both:

* ``total``: error of the implied run time, ``|elapsed + rem_hat - runtime| / runtime``
  (RLSchert's "MAPE of the runtime" at a given share of time steps, which
  falls as the job progresses);
* ``remaining``: error relative to the true remaining time,
  ``|rem_hat - rem| / rem`` (``METRICS.md`` with y = remaining), which grows
  near the end because the denominator shrinks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.metrics import prediction_error
from predictors.remaining import FRACTIONS, Progress, scf_done_at
from predictors.runtime import FeatureSpec, column

__all__ = ["EvalData", "read_data", "evaluate", "evaluate_dir", "format_table", "write_json"]

_JOB_COLUMNS = ("job_id", "user", "submit", "req_time", "runtime", "multi_ionic")


@dataclass
class EvalData:
    """A dataset folder read for training or evaluation.

    Attributes:
        jobs: ``jobs.parquet`` as a ``pyarrow.Table``.
        progress: per-job progress logs, in ``jobs`` row order.
        spec: feature spec from ``dataset.json``.
        path: the folder.
        n_dropped: jobs left out because their run time is unknown.
    """

    jobs: Any
    progress: Progress
    spec: FeatureSpec
    path: Path
    n_dropped: int = 0

    @property
    def runtime(self) -> np.ndarray:
        """Actual run times, seconds."""
        return column(self.jobs, "runtime", str(self.path / "jobs.parquet")).astype(np.float64)

    @property
    def multi(self) -> np.ndarray:
        """True for multi-ionic jobs."""
        return column(self.jobs, "multi_ionic", str(self.path / "jobs.parquet")).astype(bool)

    def take(self, rows: Any) -> EvalData:
        """The jobs at ``rows`` (an index array), e.g. a train/test split by submit time."""
        rows = np.asarray(rows, dtype=np.int64)
        return EvalData(self.jobs.take(rows), self.progress.take(rows), self.spec, self.path)

    def matrix(self, spec: FeatureSpec | None = None) -> np.ndarray:
        """Pre-run feature matrix (with ``spec``, e.g. a model's, instead of the dataset's)."""
        return (spec or self.spec).matrix(self.jobs, str(self.path / "jobs.parquet"))


def read_data(data_dir: str | Path) -> EvalData:
    """Read a dataset folder (:func:`predictors.dataset.load_dataset`) for training or evaluation.

    Jobs whose run time is unknown (NaN, as ingested runs may have) or not
    positive cannot be scored or learnt from and are left out
    (``EvalData.n_dropped``); progress rows without an elapsed time cannot be
    placed in time and are left out too.

    Raises:
        InputError: a file or column is missing or malformed, or no job has a
            known run time.
    """
    import pyarrow.compute as pc

    from predictors.dataset import load_dataset

    ds = load_dataset(data_dir)
    path = Path(data_dir)
    where = str(path / "jobs.parquet")
    spec = FeatureSpec.from_dict(ds.meta, where=str(path / "dataset.json"))
    jobs = ds.jobs
    for c in _JOB_COLUMNS:
        column(jobs, c, where)
    run = column(jobs, "runtime", where).astype(np.float64)
    known = np.isfinite(run) & (run > 0)
    if not known.any():
        raise InputError(f"{where}: column 'runtime'", f"no known run time in {len(run)} jobs",
                         "at least one job with a run time > 0")
    if not known.all():
        jobs = jobs.filter(known)
    progress = ds.progress
    has_time = pc.is_finite(progress["elapsed"])
    if progress.num_rows and not pc.all(has_time).as_py():
        progress = progress.filter(has_time)
    steps = Progress.from_table(progress, column(jobs, "job_id", where),
                                str(path / "progress.parquet"))
    return EvalData(jobs, steps, spec, path, n_dropped=int((~known).sum()))


def _errors(y: np.ndarray, yhat: np.ndarray, multi: np.ndarray) -> dict[str, Any]:
    """MAPE, accuracy and underestimation rate overall and by job type (NaN predictions skipped)."""
    out = {}
    for name, mask in (("overall", np.ones(len(y), bool)), ("single", ~multi), ("multi", multi)):
        ok = mask & np.isfinite(yhat)
        if not ok.any():
            out[name] = {"n": 0, "mape": None, "underestimation_rate": None, "accuracy": None}
            continue
        out[name] = prediction_error(y[ok], yhat[ok])
        out[name]["skipped"] = int((mask & ~np.isfinite(yhat)).sum())
    return out


def evaluate(data: EvalData, *, runtime_model: Any = None, remaining_model: Any = None,
             history_model: Any = None, runtime_spec: FeatureSpec | None = None,
             remaining_spec: FeatureSpec | None = None,
             fractions: tuple[float, ...] = FRACTIONS) -> dict[str, Any]:
    """The evaluation table of the given models on ``data``.

    Args:
        data: the held-out jobs (:func:`read_data`).
        runtime_model: fitted ``RuntimeRegressor`` (None: the remaining model's
            own pre-run model, if any).
        remaining_model: fitted ``RemainingTimeRegressor`` or None.
        history_model: fitted ``UserHistoryRegressor`` or None; it walks the
            jobs in submit order from its fitted state.
        runtime_spec, remaining_spec: the feature specs the models were trained
            with (default: the dataset's).
        fractions: elapsed fractions for the remaining-time table.

    Returns:
        ``{"n_jobs", "n_single", "n_multi", "runtime": {predictor: {"overall" |
        "single" | "multi": metrics}}, "remaining": {...}}``; the remaining
        part has ``fractions`` and, for ``"rnn_scf"`` (in-run model given the
        SCF progress of the step under way, reconstructed by
        :func:`~predictors.remaining.scf_done_at`), ``"rnn"`` (completed ionic
        steps only) and ``"prerun"`` (the fallback), ``"total"`` and
        ``"remaining"`` blocks of metrics per job type, per fraction
        (``by_fraction``) and over all fractions (``pooled``).
    """
    y, multi = data.runtime, data.multi
    out: dict[str, Any] = {"data": str(data.path), "n_jobs": len(y),
                           "n_dropped_unknown_runtime": data.n_dropped,
                           "n_single": int((~multi).sum()), "n_multi": int(multi.sum()),
                           "runtime": {}}
    req = column(data.jobs, "req_time").astype(np.float64)
    out["runtime"]["user_estimate"] = _errors(y, np.where(req > 0, req, np.nan), multi)
    if history_model is not None:
        out["runtime"]["user_history"] = _errors(y, history_model.predict(data.jobs), multi)
    if runtime_model is None and remaining_model is not None:
        runtime_model, runtime_spec = remaining_model.runtime_model_, remaining_spec
    if runtime_model is not None:
        X = data.matrix(runtime_spec)
        out["runtime"]["xgboost"] = _errors(y, runtime_model.predict(X), multi)
    if remaining_model is not None:
        out["remaining"] = _remaining_table(remaining_model, data.matrix(remaining_spec),
                                            data.progress, y, multi, fractions)
    return out


def _remaining_table(model: Any, X: np.ndarray, progress: Progress, y: np.ndarray,
                     multi: np.ndarray, fractions: tuple[float, ...]) -> dict[str, Any]:
    """Remaining-time errors of the in-run model (with and without SCF progress) and the fallback."""
    prerun = model.predict_runtime(X)
    floor = float(model.min_remaining)
    names = ("rnn_scf", "rnn", "prerun")
    per: dict[str, dict[str, dict[str, list]]] = {
        m: {kind: {"overall": [], "single": [], "multi": []} for kind in ("total", "remaining")}
        for m in names}
    pooled: dict[str, dict[str, list[np.ndarray]]] = {m: {"now": [], "hat": []} for m in names}
    for f in fractions:
        now = f * y
        hats = {"rnn_scf": model.predict(X, progress, now, prerun=prerun,
                                         scf_done=scf_done_at(progress, now)),
                "rnn": model.predict(X, progress, now, prerun=prerun),
                "prerun": np.maximum(prerun - now, floor)}
        for m, rem_hat in hats.items():
            blocks = {"total": _errors(y, now + rem_hat, multi),
                      "remaining": _errors(y - now, rem_hat, multi)}
            for kind, block in blocks.items():
                for part, metrics in block.items():
                    per[m][kind][part].append(metrics)
            pooled[m]["now"].append(now)
            pooled[m]["hat"].append(rem_hat)
    table: dict[str, Any] = {"fractions": list(fractions), "floor": floor,
                             "models": {"rnn_scf": "in-run model given completed ionic steps "
                                        "and the SCF steps of the step under way",
                                        "rnn": "in-run model given completed ionic steps only",
                                        "prerun": "max(pre-run prediction - elapsed, floor)"}}
    yy, mm = np.tile(y, len(fractions)), np.tile(multi, len(fractions))
    for m in names:
        now, hat = np.concatenate(pooled[m]["now"]), np.concatenate(pooled[m]["hat"])
        table[m] = {"pooled": {"total": _errors(yy, now + hat, mm),
                               "remaining": _errors(yy - now, hat, mm)},
                    "by_fraction": per[m]}
    return table


def evaluate_dir(data_dir: str | Path, models_dir: str | Path) -> dict[str, Any]:
    """Evaluate every model found in ``models_dir`` (``runtime/``, ``remaining/``, ``history/``).

    Raises:
        InputError: no model folder found, or a model cannot be loaded.
    """
    from predictors.history import UserHistoryRegressor
    from predictors.persist import load, read_meta
    from predictors.remaining import RemainingTimeRegressor
    from predictors.runtime import RuntimeRegressor

    models_dir = Path(models_dir)
    found = {name: models_dir / name for name in ("runtime", "remaining", "history")
             if (models_dir / name).is_dir()}
    if not found:
        raise InputError(str(models_dir), "no runtime/, remaining/ or history/ model folder",
                         "a folder written by 'python -m predictors train'")
    data = read_data(data_dir)
    kw: dict[str, Any] = {}
    classes = {"runtime": RuntimeRegressor, "remaining": RemainingTimeRegressor,
               "history": UserHistoryRegressor}
    for name, folder in found.items():
        kw[f"{name}_model"] = load(folder, expected_class=classes[name])
        if name != "history":
            spec = read_meta(folder).get("feature_spec")
            kw[f"{name}_spec"] = FeatureSpec.from_dict(spec, str(folder / "meta.json")) \
                if spec else None
    result = evaluate(data, **kw)
    result["models"] = str(models_dir)
    return result


def _pct(v: float | None) -> str:
    return "   -  " if v is None else f"{100 * v:6.1f}"


def format_table(result: Mapping[str, Any]) -> str:
    """The evaluation as a plain-text table (percentages)."""
    lines = [f"{result['n_jobs']} jobs ({result['n_single']} single-ionic, "
             f"{result['n_multi']} multi-ionic)", "",
             "Run time before the job starts (MAPE %, accuracy %, underestimated %)",
             f"{'predictor':<15}{'MAPE':>8}{'single':>8}{'multi':>8}{'acc':>8}{'under':>8}"]
    for name, r in result["runtime"].items():
        lines.append(f"{name:<15}{_pct(r['overall']['mape']):>8}{_pct(r['single']['mape']):>8}"
                     f"{_pct(r['multi']['mape']):>8}{_pct(r['overall']['accuracy']):>8}"
                     f"{_pct(r['overall']['underestimation_rate']):>8}")
    rem = result.get("remaining")
    if rem:
        lines += ["", "Remaining time by elapsed fraction: MAPE % of the implied run time "
                  "(elapsed + predicted remaining);",
                  "rnn+scf: in-run model with SCF progress, rnn: completed ionic steps only, "
                  "pre: pre-run fallback; rem: MAPE % of the remaining time",
                  f"{'elapsed':<9}{'rnn+scf':>9}{'single':>8}{'multi':>8}{'rnn':>8}"
                  f"{'pre':>8}{'multi':>8}{'rem scf':>9}{'rem pre':>9}"]

        def row(label: str, get) -> str:
            a, b, c = rem["rnn_scf"], rem["rnn"], rem["prerun"]
            return (f"{label:<9}{_pct(get(a, 'total', 'overall')):>9}"
                    f"{_pct(get(a, 'total', 'single')):>8}{_pct(get(a, 'total', 'multi')):>8}"
                    f"{_pct(get(b, 'total', 'overall')):>8}{_pct(get(c, 'total', 'overall')):>8}"
                    f"{_pct(get(c, 'total', 'multi')):>8}"
                    f"{_pct(get(a, 'remaining', 'overall')):>9}"
                    f"{_pct(get(c, 'remaining', 'overall')):>9}")

        for i, f in enumerate(rem["fractions"]):
            lines.append(row(f"{f:.0%}", lambda m, k, p, i=i: m["by_fraction"][k][p][i]["mape"]))
        lines.append(row("all", lambda m, k, p: m["pooled"][k][p]["mape"]))
    return "\n".join(lines)


def write_json(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write the result as JSON, atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)
    return path


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")
