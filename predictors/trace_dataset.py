"""A real trace as a predictor data set: its past to fit on, its future to judge on.

``python -m predictors dataset --trace FILE --out DIR`` (:func:`write_trace_dataset`)
writes:

``jobs.parquet``, one row per job in submit order: ``job_id``, ``submit``,
    ``end`` (as the trace ran), ``runtime`` (the target, s), ``past`` (bool:
    among the first ``split`` of the jobs by submit), then every feature of
    :func:`predictors.trace_features.trace_columns` (request, categorical
    ids, clock, the user's finished history).

``dataset.json``: ``{"version": 1, "kind": "trace", "source", "trace_kind",
    "trace_sha256", "split", "n_jobs", "n_past", "features", "categorical",
    "epoch", "timezone"}``.

Both go to a temporary folder renamed into place, so a set on disk is whole.
``predictors train trace`` fits :func:`predictors.trace.fit_on_past` on the
past rows (``MODELDIR/trace/``); ``predictors evaluate`` on such a set
scores the model and the baselines on the future rows
(:func:`evaluate_trace`), overall and by run-time decile.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cosim.errors import InputError
from cosim.workloads.base import Workload, read_input
from predictors.trace import TraceRuntimeRegressor, baselines, feature_names_of, trace_errors
from predictors.trace_features import trace_columns

__all__ = ["TRACE_KINDS", "read_trace", "write_trace_dataset", "read_trace_dataset",
           "is_trace_dataset", "train_trace", "evaluate_trace", "format_trace_table",
           "PREDICTORS"]

#: Trace formats ``--kind`` takes.
TRACE_KINDS = ("swf", "slurm")
#: What the evaluation compares, in table order.
PREDICTORS = ("model", "request", "last_two", "user_mean")


def read_trace(path: str | Path, kind: str | None = None) -> Workload:
    """An SWF trace or sacct output (``kind``, else guessed: a ``|`` in the first line is sacct)."""
    if kind is None:
        head = read_input(path, "an SWF trace or sacct --parsable2 output")[:4096]
        first = next((ln for ln in head.splitlines() if ln.strip()), b"")
        kind = "slurm" if b"|" in first else "swf"
    if kind not in TRACE_KINDS:
        raise InputError("--kind", repr(kind), f"one of {', '.join(TRACE_KINDS)}")
    if kind == "swf":
        from cosim.workloads.swf import read_swf

        return read_swf(path)
    from cosim.workloads.slurm import read_sacct

    return read_sacct(path)


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_trace_dataset(workload: Workload, out: str | Path, *, split: float = 0.7,
                        trace_path: str | Path | None = None, trace_kind: str = "") -> Path:
    """Write a trace's jobs as a predictor data set in ``out`` (see the module docstring).

    Raises:
        InputError: ``split`` outside (0, 1), too few jobs for a past and a
            future, or ``out`` an existing file or non-empty folder that is not
            a trace data set.
    """
    if not 0 < split < 1:
        raise InputError("--split", repr(split), "a share of the jobs strictly between 0 and 1")
    n = len(workload)
    n_past = int(round(n * split))
    if n_past < 20 or n - n_past < 1:
        raise InputError(workload.source or "trace", f"{n} jobs ({n_past} in the past)",
                         "at least 20 jobs in the past and one in the future")
    out = Path(out)
    if out.exists() and not (out.is_dir() and (is_trace_dataset(out) or not any(out.iterdir()))):
        raise InputError(str(out), "an existing file or non-empty folder",
                         "a new folder, an empty one, or a trace data set to replace")
    cols = trace_columns(workload)
    cols["past"] = np.arange(n) < n_past      # the workload is in submit order
    names, categorical = feature_names_of(cols)
    meta = {"version": 1, "kind": "trace", "source": str(trace_path or workload.source),
            "trace_kind": trace_kind,
            "trace_sha256": _sha256(Path(trace_path)) if trace_path else "",
            "split": split, "n_jobs": n, "n_past": n_past, "features": list(names),
            "categorical": list(categorical), "epoch": workload.epoch,
            "timezone": workload.timezone}
    table = pa.table({k: pa.array(np.asarray(v)) for k, v in cols.items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        pq.write_table(table, tmp / "jobs.parquet", compression="zstd")
        (tmp / "dataset.json").write_text(json.dumps(meta, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def is_trace_dataset(folder: str | Path) -> bool:
    """True when ``folder/dataset.json`` says it is a trace data set."""
    try:
        return json.loads((Path(folder) / "dataset.json").read_text()).get("kind") == "trace"
    except (OSError, ValueError, AttributeError):
        return False


def read_trace_dataset(folder: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The columns and ``dataset.json`` of a trace data set.

    Raises:
        InputError: not a trace data set, or a column it names is missing.
    """
    folder = Path(folder)
    if not is_trace_dataset(folder):
        raise InputError(str(folder / "dataset.json"), "no trace data set there",
                         "a folder written by 'python -m predictors dataset --trace'")
    meta = json.loads((folder / "dataset.json").read_text())
    try:
        table = pq.read_table(folder / "jobs.parquet")
    except (OSError, pa.ArrowException) as exc:
        raise InputError(str(folder / "jobs.parquet"), f"an unreadable file ({exc})",
                         "the jobs.parquet 'predictors dataset' wrote") from None
    cols = {name: table.column(name).to_numpy() for name in table.column_names}
    need = ["submit", "end", "runtime", "past", "user", *meta.get("features", [])]
    missing = [n for n in need if n not in cols]
    if missing:
        raise InputError(str(folder / "jobs.parquet"), f"no column(s) {', '.join(missing)}",
                         "the columns dataset.json names")
    return cols, meta


def _rows(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in cols.items()}


def train_trace(data_dir: str | Path, models_dir: str | Path, *, seed: int = 0,
                threads: int = 1) -> str:
    """Fit the trace model on a data set's past; save it as ``MODELDIR/trace/``.

    Returns:
        The line the CLI prints (jobs, the loss chosen, where it went).
    """
    cols, meta = read_trace_dataset(data_dir)
    from predictors.trace import fit_on_past

    t0 = time.perf_counter()
    past = _rows(cols, cols["past"].astype(bool))
    model, report = fit_on_past(past, n_jobs=threads, random_state=seed)
    seconds = time.perf_counter() - t0
    folder = model.save(Path(models_dir) / "trace",
                        extra={"data": str(data_dir), "source": meta.get("source"),
                               "trace_sha256": meta.get("trace_sha256"),
                               "n_jobs": int(len(past["runtime"])), "selection": report,
                               "train_seconds": round(seconds, 3)})
    chosen = ", ".join(f"{k}={v}" for k, v in report["chosen"].items())
    return (f"trained trace on {len(past['runtime'])} past jobs in {seconds:.1f} s "
            f"({chosen}, chosen on the latest {report['n_validation']}) -> {folder}")


def evaluate_trace(data_dir: str | Path, models_dir: str | Path) -> dict[str, Any]:
    """Errors on the future of a trace data set: the model and the baselines.

    Returns:
        ``{"data", "models", "n_future", "overall": {predictor: errors},
        "deciles": [{"lo", "hi", predictor: errors, ...}, ...]}`` with the
        errors of :func:`predictors.trace.trace_errors`; deciles are of the
        future's actual run times.
    """
    from predictors.persist import load

    cols, _ = read_trace_dataset(data_dir)
    folder = Path(models_dir) / "trace"
    if not folder.is_dir():
        raise InputError(str(models_dir), "no trace/ model folder",
                         "a folder written by 'python -m predictors train trace'")
    model = load(folder, expected_class=TraceRuntimeRegressor)
    future = ~cols["past"].astype(bool)
    preds = {"model": model.predict_columns(_rows(cols, future))}
    preds.update({k: v[future] for k, v in baselines(cols).items()})
    y = cols["runtime"][future].astype(np.float64)
    result: dict[str, Any] = {"data": str(data_dir), "models": str(models_dir),
                              "n_future": int(future.sum()),
                              "overall": {k: trace_errors(y, preds[k]) for k in PREDICTORS},
                              "deciles": []}
    edges = np.quantile(y, np.linspace(0, 1, 11)) if len(y) else np.zeros(11)
    decile = np.clip(np.searchsorted(edges, y, side="right") - 1, 0, 9)
    for d in range(10):
        rows = decile == d
        result["deciles"].append({"lo": float(edges[d]), "hi": float(edges[d + 1]),
                                  **{k: trace_errors(y[rows], preds[k][rows])
                                     for k in PREDICTORS}})
    return result


def _cell(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_trace_table(result: dict[str, Any]) -> str:
    """The evaluation as plain text: overall, then by decile of the run time."""
    head = (f"{'predictor':<10} {'MAE s':>9} {'med |log|':>9} {'too short':>9}")
    lines = [f"future of {result['data']}: {result['n_future']} jobs", head]
    for k in PREDICTORS:
        e = result["overall"][k]
        lines.append(f"{k:<10} {_cell(e['mae'], '9.0f')} {_cell(e['median_abs_log_ratio'], '9.3f')}"
                     f" {_cell(e['too_short'], '9.3f')}")
    lines += ["", "by run-time decile: MAE s (too short)",
              f"{'run time s':<17} " + " ".join(f"{k:>16}" for k in PREDICTORS)]
    for row in result["deciles"]:
        cells = [f"{_cell(row[k]['mae'], '.0f')} ({_cell(row[k]['too_short'], '.2f')})"
                 for k in PREDICTORS]
        lines.append(f"{row['lo']:>7.0f}-{row['hi']:<9.0f} " + " ".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)
