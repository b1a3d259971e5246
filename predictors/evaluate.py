"""The evaluation table of the run-time and remaining-time predictors, with baselines.

Pre-run predictors (user estimate ``req_time``, user history, XGBoost) are
scored on every job, overall and for single / multi-ionic jobs. The in-run
model is scored at elapsed fractions 10 %, 20 %, ..., 90 % of each job (as in
RLSchert's Table 5 and figure 6, seed 001) on the MAPE of the run time it
implies, ``|elapsed + predicted remaining - run time| / run time``, against
four baselines that need no in-run model:

* ``zero``: remaining = 0 (the job ends now); its MAPE is exactly
  ``1 - fraction``, so it is hard to beat late in a job;
* ``estimate``: the user's request minus the elapsed time, clipped at 0;
* ``prerun``: the pre-run prediction minus the elapsed time, clipped at 0;
* ``extrapolation``: ``elapsed x expected ionic steps / steps done`` minus the
  elapsed time, where the expected steps are known (MD: NSW; relaxations:
  the force or energy decay extrapolated to EDIFFG, at most NSW; IBRION=5
  phonons: 1 + 6 N; :func:`predictors.progress.expected_ionic_steps`) and a
  step is done; elsewhere (single points, the first ionic step) it is the
  ``prerun`` baseline.

The in-run model appears twice: ``model`` sees what the simulation shows it
(finished ionic steps, the SCF lines of the step under way, the start-up
time once the first SCF line is out), ``model_ionic`` finished ionic steps
only.

**Unit.** Every error in the result (JSON and table) is a percentage
(``"unit": "percent"``): MAPE, accuracy (mean of min/max ratio) and the
share of underestimates, from :func:`cosim.metrics.prediction_error`
(``METRICS.md``) times 100. ``remaining_error`` also gives the MAPE relative
to the true remaining time, ``|rem_hat - rem| / rem``, which grows near the
end because the denominator shrinks.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.metrics import prediction_error
from predictors.observation import FRACTIONS, Progress, observe
from predictors.progress import (
    FEATURE_NAMES,
    ProgressInputs,
    expected_ionic_steps,
    physics_from_matrix,
    progress_features,
)
from predictors.runtime import FeatureSpec, column

__all__ = ["EvalData", "read_data", "evaluate", "evaluate_dir", "format_table", "write_json",
           "BASELINES", "UNIT"]

#: The baselines of the remaining-time table (see the module docstring).
BASELINES: dict[str, str] = {
    "zero": "remaining = 0",
    "estimate": "max(user request - elapsed, 0)",
    "prerun": "max(pre-run prediction - elapsed, 0)",
    "extrapolation": "elapsed x expected ionic steps / steps done - elapsed (pre-run elsewhere)",
}

#: Unit of every error in the evaluation result.
UNIT = "percent"

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

    @property
    def startup(self) -> np.ndarray:
        """Seconds before each job's first SCF line (NaN when unknown)."""
        names = self.jobs.column_names
        if "startup" not in names:
            return np.full(self.jobs.num_rows, np.nan)
        return column(self.jobs, "startup").astype(np.float64)

    @property
    def kind(self) -> np.ndarray:
        """Job kind (``single_point``, ``relaxation``, ``md``, ``phonon``, or as ingested)."""
        return column(self.jobs, "kind").astype(str)

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


def _pct(metrics: dict[str, Any]) -> dict[str, Any]:
    """:func:`prediction_error` output with its fractions as percentages."""
    return {k: (100.0 * v if k in ("mape", "underestimation_rate", "accuracy") and v is not None
                else v) for k, v in metrics.items()}


def _errors(y: np.ndarray, yhat: np.ndarray, multi: np.ndarray) -> dict[str, Any]:
    """MAPE, accuracy and underestimation rate (percent) overall and by job type (NaN skipped)."""
    out = {}
    for name, mask in (("overall", np.ones(len(y), bool)), ("single", ~multi), ("multi", multi)):
        ok = mask & np.isfinite(yhat)
        if not ok.any():
            out[name] = {"n": 0, "mape": None, "underestimation_rate": None, "accuracy": None}
            continue
        out[name] = _pct(prediction_error(y[ok], yhat[ok]))
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
        ``{"unit": "percent", "n_jobs", "n_single", "n_multi", "runtime":
        {predictor: {"overall" | "single" | "multi": metrics}}, "remaining":
        {...}}``. The remaining part (see :func:`_remaining_table`) has, for
        the in-run model and each baseline, the MAPE of the implied run time
        per fraction (``by_fraction``), pooled over the fractions
        (``pooled``), pooled per job kind (``by_kind``), and the MAPE
        relative to the remaining time (``remaining_error``).
    """
    y, multi = data.runtime, data.multi
    out: dict[str, Any] = {"unit": UNIT, "data": str(data.path), "n_jobs": len(y),
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
        out["remaining"] = _remaining_table(remaining_model, data, data.matrix(remaining_spec),
                                            (remaining_spec or data.spec).names, fractions)
    return out


def _remaining_table(model: Any, data: EvalData, X: np.ndarray, names: Any,
                     fractions: tuple[float, ...]) -> dict[str, Any]:
    """MAPE (percent) of the implied run time, per fraction, of the in-run model and the baselines."""
    y, multi, kind, progress = data.runtime, data.multi, data.kind, data.progress
    startup = data.startup
    prerun = model.predict_runtime(X)
    req = column(data.jobs, "req_time").astype(np.float64)
    req = np.where(req > 0, req, np.nan)
    phys = physics_from_matrix(X, list(names))
    names_all = ("model", "model_ionic", *BASELINES)
    implied: dict[str, list[np.ndarray]] = {m: [] for m in names_all}
    for f in fractions:
        now = f * y
        obs = observe(progress, now, None, startup)
        inputs = ProgressInputs(
            values=progress.values, starts=progress.offsets[:-1], k=obs.k, now=now,
            scf=obs.scf_done, trace=progress.lines if progress.lines is not None else np.zeros(0),
            trace_starts=obs.lines_start, trace_len=obs.lines_len, prerun=prerun, physics=phys,
            startup=obs.startup)
        steps_left = progress_features(inputs)[:, FEATURE_NAMES.index("steps_left")].astype(
            np.float64)
        expected = expected_ionic_steps(phys, obs.k, steps_left)
        with np.errstate(divide="ignore", invalid="ignore"):
            extrap = np.where((obs.k >= 1) & np.isfinite(expected), now * expected / obs.k, np.nan)
        pre_total = np.maximum(prerun, now)
        hats = {
            "model": now + model.predict_at(X, progress, now, prerun=prerun, startup=startup),
            "model_ionic": now + model.predict_at(X, progress, now, prerun=prerun,
                                                  startup=startup, scf=False),
            "zero": now,
            "estimate": np.where(np.isfinite(req), np.maximum(req, now), np.nan),
            "prerun": pre_total,
            "extrapolation": np.where(np.isfinite(extrap), np.maximum(extrap, now), pre_total),
        }
        for m, total in hats.items():
            implied[m].append(total)
    table: dict[str, Any] = {
        "unit": UNIT, "fractions": list(fractions), "floor": float(model.min_remaining),
        "predictors": {"model": "in-run model: finished ionic steps, SCF lines of the step "
                                "under way, start-up time",
                       "model_ionic": "in-run model given finished ionic steps only",
                       **BASELINES},
        "by_fraction": {}, "pooled": {}, "by_kind": {}, "remaining_error": {}}
    nf = len(fractions)
    yy, mm, kk = np.tile(y, nf), np.tile(multi, nf), np.tile(kind, nf)
    now_all = np.concatenate([f * y for f in fractions])
    for m in names_all:
        per = [_errors(y, t, multi) for t in implied[m]]
        table["by_fraction"][m] = {part: [r[part]["mape"] for r in per]
                                   for part in ("overall", "single", "multi")}
        total = np.concatenate(implied[m])
        pooled = _errors(yy, total, mm)
        table["pooled"][m] = {part: pooled[part]["mape"] for part in ("overall", "single", "multi")}
        table["pooled"][m]["n"] = pooled["overall"]["n"]
        ok = np.isfinite(total)
        table["by_kind"][m] = {
            str(k): 100.0 * float(np.mean(np.abs(total[ok & (kk == k)] - yy[ok & (kk == k)])
                                          / yy[ok & (kk == k)]))
            for k in np.unique(kind) if (ok & (kk == k)).any()}
        rem_true = yy - now_all
        table["remaining_error"][m] = _errors(rem_true, total - now_all, mm)["overall"]["mape"]
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
            if spec:
                kw[f"{name}_spec"].check_fits(kw[f"{name}_model"], str(folder / "meta.json"))
    result = evaluate(data, **kw)
    result["models"] = str(models_dir)
    return result


def _p(v: float | None, width: int = 8) -> str:
    return f"{'-':>{width}}" if v is None else f"{v:{width}.1f}"


def format_table(result: Mapping[str, Any]) -> str:
    """The evaluation as a plain-text table; every error is a percentage."""
    lines = [f"{result['n_jobs']} jobs ({result['n_single']} single-ionic, "
             f"{result['n_multi']} multi-ionic); all errors in percent", "",
             "Run time before the job starts: MAPE, accuracy, share underestimated",
             f"{'predictor':<15}{'MAPE':>8}{'single':>8}{'multi':>8}{'acc':>8}{'under':>8}"]
    for name, r in result["runtime"].items():
        lines.append(f"{name:<15}{_p(r['overall']['mape'])}{_p(r['single']['mape'])}"
                     f"{_p(r['multi']['mape'])}{_p(r['overall']['accuracy'])}"
                     f"{_p(r['overall']['underestimation_rate'])}")
    rem = result.get("remaining")
    if rem:
        cols = [("model", "overall", "model"), ("model", "single", "single"),
                ("model", "multi", "multi"), ("model_ionic", "overall", "ionic"),
                ("zero", "overall", "rem=0"), ("estimate", "overall", "request"),
                ("prerun", "overall", "pre-run"), ("extrapolation", "overall", "extrap")]
        lines += ["", "Remaining time by elapsed fraction: MAPE of the implied run time "
                  "(elapsed + predicted remaining)",
                  "model: in-run model (ionic steps, SCF lines, start-up); ionic: ionic steps "
                  "only; baselines: rem=0,",
                  "request - elapsed, pre-run - elapsed, progress extrapolation (pre-run where "
                  "it has no steps)",
                  f"{'elapsed':<9}" + "".join(f"{c[2]:>8}" for c in cols)]
        bf = rem["by_fraction"]
        for i, f in enumerate(rem["fractions"]):
            lines.append(f"{f:<9.0%}" + "".join(_p(bf[m][part][i]) for m, part, _ in cols))
        lines.append(f"{'all':<9}" + "".join(_p(rem["pooled"][m][part]) for m, part, _ in cols))
        kinds = sorted(rem["by_kind"]["model"])
        lines += ["", "Pooled over the fractions, by job kind",
                  f"{'kind':<15}" + "".join(f"{c[2]:>8}" for c in cols if c[1] == "overall")]
        for k in kinds:
            lines.append(f"{k:<15}" + "".join(_p(rem["by_kind"][m].get(k))
                                              for m, part, _ in cols if part == "overall"))
    return "\n".join(lines)


def check_output_file(path: str | Path) -> Path:
    """Refuse, before any work, an output path that cannot become a file.

    Raises:
        InputError: ``path`` is a folder, or one of its parents is a file.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), "a folder", "a file path for the JSON result")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(str(path), f"a path under the file {parent}",
                                 "a file path for the JSON result")
            # permissions alone do not say it (root, read-only or pseudo file
            # systems): make and remove a file where the result's folder starts
            try:
                tempfile.TemporaryFile(dir=parent).close()
            except OSError as exc:
                raise InputError(str(path), f"a folder this user cannot write in ({parent}: "
                                 f"{exc.strerror or exc})", "a file path for the JSON result") \
                    from None
            break
    return path


def write_json(result: Mapping[str, Any], path: str | Path) -> Path:
    """Write the result as JSON, atomically (temporary file, then rename).

    Raises:
        InputError: ``path`` cannot be written (a folder, a parent that is a
            file, no permission); no temporary file is left behind.
    """
    path = check_output_file(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(str(path), f"a path that cannot be written ({exc.strerror or exc})",
                         "a writable file path for the JSON result") from None
    return path


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")
