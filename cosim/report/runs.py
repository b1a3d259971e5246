"""What a report reads: the runs of a results folder, and the metrics' names, units and scores.

See :mod:`cosim.report` for the layouts :func:`load_runs` accepts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim import metrics, records
from cosim.errors import InputError

#: Runs with more jobs than this get no Gantt chart (one bar per job stops
#: being readable and costs seconds to draw).
GANTT_MAX_JOBS = 3000
_SMOOTH_BINS = 300  # time-weighted bins of the utilization and queue plots
_MODE_COLORS = {"ready": "#4c72b0", "reserved": "#dd8452", "backfilled": "#55a868",
                "": "#999999"}


#: The headline table (the one ``cosim run`` prints): (summary key, header,
#: format, which way is better: "low", "high", or None when neither is).
#: ``busy`` counts wasted attempts too and ``sim jobs/s`` is simulator speed,
#: so neither gets a "best" mark.
HEADLINE: tuple[tuple[str, str, str, str | None], ...] = (
    ("jobs_finished", "jobs", "{:.0f}", None),
    ("bsld_mean", "mean bsld", "{:.2f}", "low"),
    ("wait_mean", "mean wait (s)", "{:,.0f}", "low"),
    ("wait_p99", "p99 wait (s)", "{:,.0f}", "low"),
    ("wait_max", "max wait (s)", "{:,.0f}", "low"),
    ("starved_1d", "waited >1d", "{:,.0f}", "low"),
    ("starved_1w", "waited >1w", "{:,.0f}", "low"),
    ("slowdown_mean", "mean sld", "{:.2f}", "low"),
    ("response_mean", "mean resp (s)", "{:,.0f}", "low"),
    ("utilization", "util", "{:.3f}", "high"),
    ("utilization_busy", "busy", "{:.3f}", None),
    ("queue_len_mean", "mean queue (jobs)", "{:.1f}", "low"),
    ("wasted_core_hours", "wasted (core-h)", "{:,.1f}", "low"),
    ("fairness_jain", "jain", "{:.3f}", "high"),
    ("bsld_worst_user_mean", "worst user bsld", "{:.1f}", "low"),
    ("jobs_per_second", "sim jobs/s", "{:,.0f}", None),
)

#: Axes of the Kiviat chart: headline metrics with a direction, one per idea.
KIVIAT_KEYS = ("wait_mean", "wait_max", "bsld_mean", "utilization", "queue_len_mean",
               "fairness_jain", "wasted_core_hours")

#: Readable names of the common summary keys (axis labels, study plots).
_LABELS = {
    "wait_mean": "mean wait", "wait_median": "median wait", "wait_p95": "95th pct wait",
    "wait_p99": "99th pct wait", "wait_max": "max wait", "response_mean": "mean response",
    "slowdown_mean": "mean slowdown", "bsld_mean": "mean bounded slowdown",
    "bsld_max": "max bounded slowdown", "utilization": "utilization (useful)",
    "utilization_busy": "utilization (busy)", "utilization_up": "utilization of up nodes",
    "queue_len_mean": "mean queue length", "queued_load_mean": "mean queued load",
    "fairness_jain": "Jain fairness", "bsld_worst_user_mean": "worst user's mean bsld",
    "wasted_core_hours": "wasted core-hours", "makespan": "makespan",
    "jobs_per_second": "simulator speed", "resource_holes_frac": "resource holes",
    "starved_1d": "jobs waiting > 1 day", "starved_1w": "jobs waiting > 1 week",
    "starved_1d_share": "share waiting > 1 day", "starved_1w_share": "share waiting > 1 week",
}


def metric_unit(key: str) -> str:
    """The unit of a summary key ("" for counts of things named in the key).

    >>> metric_unit("wait_mean"), metric_unit("utilization"), metric_unit("bsld_mean")
    ('s', 'fraction', 'ratio')
    """
    if key.endswith("core_seconds"):
        return "core-s"
    if key.endswith("core_hours"):
        return "core-h"
    if key == "jobs_per_second":
        return "jobs/s (wall)"
    if key == "wall_seconds":
        return "s (wall)"
    if key.startswith(("wait", "response", "makespan", "span_")) or key in (
            "killed_seconds", "tau"):
        return "s"
    if key.startswith(("utilization", "mode_")) or key.endswith(("_frac", "_share")):
        return "fraction"
    if key.startswith(("bsld", "slowdown_mean")):
        return "ratio"
    if key == "fairness_jain":
        return "0-1"
    if key == "queue_len_mean" or key.startswith(("jobs", "starved_")) or key in (
            "slowdown_excluded", "fairness_users"):
        return "jobs"
    if key == "queued_load_mean":
        return "core-s"
    if key == "cores":
        return "cores"
    return ""


def metric_label(key: str) -> str:
    """An axis label for a summary key: a readable name and its unit.

    Study plots and this report label axes with it.

    >>> metric_label("wait_mean"), metric_label("bsld_mean"), metric_label("kills")
    ('mean wait (s)', 'mean bounded slowdown (ratio)', 'kills')
    """
    name = _LABELS.get(key, key.replace("_", " "))
    unit = metric_unit(key)
    return f"{name} ({unit})" if unit else name


def size_classes(cores: int) -> list[tuple[str, int, int]]:
    """Job-size classes scaled to a machine of ``cores``: (label, lowest, highest).

    Serial jobs, then up to 1/64, 1/16, 1/4 of the machine and the rest, so a
    192-core or a 20-core machine gets classes it can fill (the fixed classes
    of :data:`cosim.metrics.SIZE_CLASSES` are for 256 cores). Bounds that
    coincide on a small machine are merged.

    >>> size_classes(256)
    [('1', 1, 1), ('2-4', 2, 4), ('5-16', 5, 16), ('17-64', 17, 64), ('65-256', 65, 256)]
    >>> size_classes(20)
    [('1', 1, 1), ('2-5', 2, 5), ('6-20', 6, 20)]
    """
    cores = max(1, int(cores))
    tops = sorted({1, *(max(1, round(cores / d)) for d in (64, 16, 4)), cores})
    out, lo = [], 1
    for hi in tops:
        if hi < lo:
            continue
        out.append((str(lo) if lo == hi else f"{lo}-{hi}", lo, hi))
        lo = hi + 1
    return out


def kiviat_scores(summaries: list[dict[str, Any]],
                  keys: tuple[str, ...] = KIVIAT_KEYS) -> dict[str, list[float | None]]:
    """Each policy's score in [0, 1] on each Kiviat axis, 1 = the best policy.

    Lower-is-better metrics score ``best / value``, higher-is-better ones
    ``value / best`` (a ratio to the best policy, so 0.5 means half as good);
    a metric at 0 where the best is 0 scores 1, any other value then 0.
    None where a policy has no value. Keys no policy has are left out.

    >>> kiviat_scores([{"wait_mean": 10.0}, {"wait_mean": 40.0}])
    {'wait_mean': [1.0, 0.25]}
    """
    better = {k: b for k, _, _, b in HEADLINE}
    out: dict[str, list[float | None]] = {}
    for key in keys:
        vals = [_number(s.get(key)) for s in summaries]
        known = [v for v in vals if v is not None]
        if not known:
            continue
        if better.get(key) == "high":
            best = max(known)
            out[key] = [None if v is None else (1.0 if best <= 0 else max(0.0, v / best))
                        for v in vals]
        else:
            best = min(known)
            out[key] = [None if v is None else (1.0 if v <= best or v <= 0 else
                                                max(0.0, best / v)) for v in vals]
    return out


def _number(v: Any) -> float | None:
    """A finite float, or None (missing, null, text, NaN)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if np.isfinite(v) else None


@dataclass
class Run:
    """One policy's results as loaded for the report.

    Attributes:
        name: policy name (column header in the report).
        path: its folder.
        jobs: jobs table.
        events: events table, or None if the folder has none.
        summary: flat metrics dict (from ``summary.json`` or computed).
        meta: run metadata (cores, policy, tau, ...).
    """

    name: str
    path: Path
    jobs: records.RecordTable
    events: records.RecordTable | None
    summary: dict[str, Any]
    meta: dict[str, Any]


#: Summary keys the report computes with (tables, Kiviat, plots, notes): each
#: must be a number, or null for undefined (shown as missing, as cosim writes
#: NaN). Other keys (sources, workload_cleaning, ...) are only displayed.
_NUMERIC_KEYS = frozenset(
    {k for k, *_ in HEADLINE} | set(KIVIAT_KEYS)
    | {"utilization", "jobs_total", "jobs_unfinished", "jobs_never_started", "jobs_given_up",
       "starved_1d_share", "starved_1w_share"}
    | {f"mode_{by}_{m}" for by in ("jobs", "corehours") for m in metrics.EXEC_MODES})


def _check_positive(value: Any, where: str, *, integer: bool) -> None:
    """Raise unless ``value`` is a positive integer (cores) or positive number (tau)."""
    if integer:
        ok = isinstance(value, int) and 0 < value < 2**63
    else:  # the bound also keeps float() from overflowing on a huge integer
        ok = isinstance(value, (int, float)) and 0 < value <= sys.float_info.max
    if isinstance(value, bool) or not ok:
        raise InputError(where, repr(value)[:60],
                         "a positive integer" if integer else "a positive number of seconds")


def _check_metrics(values: dict[str, Any], where: str, at: str) -> None:
    """Check the values the report computes with, in file ``where`` at key path ``at``."""
    def path(key: str) -> str:
        return f"{where}: {at}.{key}" if at else f"{where}: {key}"

    for key in sorted(_NUMERIC_KEYS & values.keys()):
        v = values[key]
        # float() of an integer past the float range overflows; NaN/inf are missing.
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or isinstance(v, int) and abs(v) > sys.float_info.max):
            raise InputError(path(key), repr(v)[:60], "a number or null")
    for key in ("cores", "tau"):
        if values.get(key) is not None:
            _check_positive(values[key], path(key), integer=key == "cores")


def _summary_metrics(doc: Any, where: str, key: str = "") -> dict[str, Any]:
    """The flat metrics of a summary document (``summary/1`` or a flat dict).

    ``where`` names the file and ``key`` the document's key path in it ("" at the top).
    """
    at = f"{where}: {key}" if key else where
    if not isinstance(doc, dict):
        raise InputError(at, type(doc).__name__, "a JSON object of metrics")
    if "metrics" in doc:
        key = f"{key}.metrics" if key else "metrics"
        doc = doc["metrics"]
        if not isinstance(doc, dict):
            raise InputError(f"{where}: {key}", type(doc).__name__,
                             "a JSON object of metrics")
    _check_metrics(doc, where, key)
    return dict(doc)


@contextmanager
def naming_files(folder: Path) -> Iterator[None]:
    """Prefix the file to the table errors of :mod:`cosim.metrics` ("events.time[1]")."""
    try:
        yield
    except InputError as exc:
        table = exc.where.split(".")[0].split("[")[0]
        path = folder / f"{table}.parquet" if table in records.SCHEMAS else folder
        raise InputError(f"{path}: {exc.where}", exc.found, exc.expected,
                         exc.hint) from None


def _load_run(folder: Path, name: str | None, summary: dict | None) -> Run:
    jobs = records.read_jobs(folder / "jobs.parquet")
    ev_path = folder / "events.parquet"
    events = records.read_events(ev_path) if ev_path.exists() else None
    meta = dict(jobs.meta)
    for key in ("cores", "tau"):
        if key in meta:
            _check_positive(meta[key], f"{folder / 'jobs.parquet'}: cosim.run.{key}",
                            integer=key == "cores")
    if (folder / "summary.json").exists():
        summary = _summary_metrics(records.read_json(folder / "summary.json"),
                                   str(folder / "summary.json"))
    if summary is None:
        if "cores" not in meta:
            raise InputError(str(folder / "jobs.parquet"), "no 'cores' in the run metadata",
                             "a summary.json or run metadata with cores")
        with naming_files(folder):
            summary = metrics.summarize(jobs, events, cores=int(meta["cores"]),
                                        tau=float(meta.get("tau", 10.0)))
    if "cores" not in meta and summary.get("cores"):
        meta["cores"] = int(summary["cores"])
    name = name or str(meta.get("policy") or folder.resolve().name)
    return Run(name=name, path=folder, jobs=jobs, events=events, summary=summary, meta=meta)


def _comparison_entries(doc: Any, where: str) -> list[tuple[str, str, dict | None]]:
    """(name, subfolder, summary or None) for each policy of ``comparison.json``."""
    if not isinstance(doc, dict) or "policies" not in doc:
        raise InputError(where, "no 'policies' key",
                         '{"policies": [names], "summaries": {name: summary}}')
    pol, sums = doc["policies"], doc.get("summaries") or {}
    if not isinstance(sums, dict):
        raise InputError(f"{where}:summaries", type(sums).__name__, "an object name -> summary")
    entries = []
    if isinstance(pol, dict):
        for name, s in pol.items():
            entries.append((str(name), str(name),
                            _summary_metrics(s, where, f"policies.{name}")))
    elif isinstance(pol, list):
        for i, p in enumerate(pol):
            if isinstance(p, str):
                s = sums.get(p)
                entries.append((p, p, None if s is None else
                                _summary_metrics(s, where, f"summaries.{p}")))
            elif isinstance(p, dict) and isinstance(p.get("policy", p.get("name")), str):
                name = p.get("policy", p.get("name"))
                key = f"policies[{i}].summary" if "summary" in p else f"summaries.{name}"
                s = p.get("summary", sums.get(name))
                sub = p.get("dir", name)
                # a subfolder of the results, by name: never a path out of them
                if not isinstance(sub, str) or Path(sub).name != sub or sub in ("", ".", ".."):
                    raise InputError(f"{where}:policies[{i}].dir", repr(sub)[:60],
                                     "the name of a policy subfolder of the results folder")
                entries.append((name, sub,
                                None if s is None else _summary_metrics(s, where, key)))
            else:
                raise InputError(f"{where}:policies[{i}]", repr(p)[:60],
                                 "a policy name or {\"policy\": name, ...}")
    else:
        raise InputError(f"{where}:policies", type(pol).__name__, "a list of policy names")
    if not entries:
        raise InputError(f"{where}:policies", "an empty list", "at least one policy")
    return entries


def load_runs(results_dir: str | os.PathLike) -> list[Run]:
    """Load every run of a results folder (single-run or comparison layout).

    Raises:
        InputError: the folder does not exist or holds no run, or a file in
            it is malformed.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise InputError(str(root), "no such folder", "a results folder")
    if (root / "jobs.parquet").exists():
        return [_load_run(root, None, None)]
    if (root / "comparison.json").exists():
        where = str(root / "comparison.json")
        runs = []
        for name, sub, summary in _comparison_entries(records.read_json(where), where):
            folder = root / sub
            if not (folder / "jobs.parquet").exists():
                raise InputError(f"{where}:{name}", f"no {folder / 'jobs.parquet'}",
                                 "a policy subfolder with jobs.parquet")
            runs.append(_load_run(folder, name, summary))
        return runs
    subs = sorted(p for p in root.iterdir() if (p / "jobs.parquet").exists())
    if not subs:
        raise InputError(str(root), "no jobs.parquet, comparison.json or run subfolders",
                         "a results folder written by a cosim run")
    return [_load_run(p, p.name, None) for p in subs]
