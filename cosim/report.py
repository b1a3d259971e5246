"""Plots and one HTML page for a results folder.

:func:`write_report` accepts either layout:

* a single run: ``jobs.parquet``, ``events.parquet`` (``decisions.parquet``,
  ``summary.json``) directly in the folder;
* a comparison: one subfolder per policy holding those files, and a
  ``comparison.json`` at the top (``{"schema": "comparison/1", "policies":
  [names], "summaries": {name: summary}}``; a ``{name: summary}`` mapping or a
  list of ``{"policy": name, "summary": {...}, "dir": sub}`` is accepted
  too). Without ``comparison.json`` every subfolder with a ``jobs.parquet``
  is a policy, in name order.

It writes PNGs (matplotlib, Agg backend, nothing displayed) and
``report.html`` next to them; the page references the images by relative
path and has no other dependency. Figures: utilization and queue length over
time; wait and bounded-slowdown CDFs per policy; wait and bounded slowdown by
job-size class; execution-mode shares; one Gantt chart per policy for runs of
at most ``gantt_max_jobs`` jobs.

Examples:
    >>> write_report("results/lublin_easy")  # doctest: +SKIP
    PosixPath('results/lublin_easy/report.html')
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosim import metrics, records
from cosim.errors import InputError

__all__ = ["write_report", "load_runs", "Run", "GANTT_MAX_JOBS", "HEADLINE", "metric_unit",
           "metric_label", "size_classes", "kiviat_scores"]

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
    ("wait_mean", "mean wait (s)", "{:,.0f}", "low"),
    ("wait_max", "max wait (s)", "{:,.0f}", "low"),
    ("slowdown_mean", "mean sld", "{:.2f}", "low"),
    ("bsld_mean", "mean bsld", "{:.2f}", "low"),
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
    if key.startswith(("utilization", "mode_")) or key.endswith("_frac"):
        return "fraction"
    if key.startswith(("bsld", "slowdown_mean")):
        return "ratio"
    if key == "fairness_jain":
        return "0-1"
    if key == "queue_len_mean" or key.startswith("jobs") or key in (
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


def _summary_metrics(doc: Any, where: str) -> dict[str, Any]:
    """The flat metrics of a summary document (``summary/1`` or a flat dict)."""
    if not isinstance(doc, dict):
        raise InputError(where, type(doc).__name__, "a JSON object of metrics")
    if "metrics" in doc:
        if not isinstance(doc["metrics"], dict):
            raise InputError(f"{where}:metrics", type(doc["metrics"]).__name__,
                             "a JSON object of metrics")
        return dict(doc["metrics"])
    return dict(doc)


def _load_run(folder: Path, name: str | None, summary: dict | None) -> Run:
    jobs = records.read_jobs(folder / "jobs.parquet")
    ev_path = folder / "events.parquet"
    events = records.read_events(ev_path) if ev_path.exists() else None
    meta = dict(jobs.meta)
    if (folder / "summary.json").exists():
        summary = _summary_metrics(records.read_json(folder / "summary.json"),
                                   str(folder / "summary.json"))
    if summary is None:
        if "cores" not in meta:
            raise InputError(str(folder / "jobs.parquet"), "no 'cores' in the run metadata",
                             "a summary.json or run metadata with cores")
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
            entries.append((str(name), str(name), _summary_metrics(s, f"{where}:{name}")))
    elif isinstance(pol, list):
        for i, p in enumerate(pol):
            if isinstance(p, str):
                s = sums.get(p)
                entries.append((p, p, None if s is None else _summary_metrics(s, where)))
            elif isinstance(p, dict) and isinstance(p.get("policy", p.get("name")), str):
                name = p.get("policy", p.get("name"))
                s = p.get("summary", sums.get(name))
                entries.append((name, str(p.get("dir", name)),
                                None if s is None else _summary_metrics(s, where)))
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


# ------------------------------------------------------------- figures ----

def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)  # never open a window, also on a desktop
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    # Fixed metadata keeps PNG bytes independent of the date and version.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    _pyplot().close(fig)


def _margins(fig, left: float = 0.8, right: float = 0.2, bottom: float = 0.6,
             top: float = 0.35, **space) -> None:
    """Fixed margins in inches: tight_layout costs ~0.4 s a figure for no gain here."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h,
                        top=1 - top / h, **space)


def _legend(ax, **kw) -> None:
    """A legend only when something is labelled (matplotlib warns otherwise)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _colors(n: int) -> list:
    cmap = _pyplot().get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def _plot_time(runs: list[Run], path: Path) -> bool:
    """Utilization as small multiples (one strip per policy), queue length below.

    Both are time-weighted averages over :data:`_SMOOTH_BINS` equal bins of
    the run: a step function with thousands of changes per policy drawn on
    top of six others is a solid block of colour, while a strip per policy
    shows where each one leaves the machine idle.
    """
    plt = _pyplot()
    series = []
    for run, color in zip(runs, _colors(len(runs)), strict=True):
        if run.events is None or run.events.num_rows == 0 or "cores" not in run.meta:
            continue
        ts = metrics.time_series(run.events, int(run.meta["cores"]), max_points=_SMOOTH_BINS)
        series.append((run, color, ts))
    n = max(1, len(series))
    fig = plt.figure(figsize=(9, 0.75 * n + 3.0))
    grid = fig.add_gridspec(n + 1, 1, height_ratios=[1] * n + [max(2.0, n * 0.45)], hspace=0.12)
    ax_q = fig.add_subplot(grid[n])
    for i, (run, color, ts) in enumerate(series):
        ax = fig.add_subplot(grid[i], sharex=ax_q)
        hours = ts["time"] / 3600.0
        ax.fill_between(hours, ts["utilization"], step="post", color=color, alpha=0.55, lw=0)
        ax.plot(hours, ts["utilization"], drawstyle="steps-post", color=color, lw=0.6)
        ax.set_ylim(0, 1.05)
        ax.set_yticks([0, 1])
        ax.tick_params(labelbottom=False, labelsize=7)
        mean = run.summary.get("utilization")
        label = run.name if mean is None else f"{run.name}  (useful {mean:.2f})"
        ax.text(0.005, 0.9, label, transform=ax.transAxes, fontsize=8, va="top",
                bbox={"facecolor": "white", "alpha": 0.7, "lw": 0, "pad": 1})
        if i == 0:
            ax.set_title("utilization (time average per bin), one strip per policy", fontsize=9)
        ax_q.plot(hours, ts["queue_len"], drawstyle="steps-post", color=color, lw=0.9,
                  label=run.name)
    ax_q.set_ylabel("queued jobs (jobs)")
    if series:   # one unit for every strip, written once beside them
        fig.text(0.012, 1 - (0.35 + 0.375 * n) / fig.get_size_inches()[1],
                 "utilization (fraction of cores)", rotation=90, va="center", fontsize=8)
    ax_q.set_xlabel("time (h)")
    # Right of the queue panel: inside it, names would cover the curves' peaks.
    _legend(ax_q, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    width = max([len(r.name) for r, _, _ in series] or [0])
    _margins(fig, left=0.7, top=0.35, right=min(3.0, 0.6 + 0.07 * width) if series else 0.2)
    _save(fig, path)
    return bool(series)


def _cdf_points(x: np.ndarray, k: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x)
    if len(x) > k:  # quantiles are enough for a line plot
        q = np.linspace(0, 1, k)
        return np.quantile(x, q), q
    return x, np.arange(1, len(x) + 1) / len(x)


def _plot_cdfs(runs: list[Run], per: list[dict], path: Path) -> None:
    plt = _pyplot()
    fig, (ax_w, ax_b) = plt.subplots(1, 2, figsize=(10, 4))
    for run, pj, color in zip(runs, per, _colors(len(runs)), strict=True):
        fin = pj["finished"]
        if not fin.any():
            continue
        x, y = _cdf_points(pj["wait"][fin])
        ax_w.plot(x, y, color=color, label=run.name, drawstyle="steps-post")
        x, y = _cdf_points(pj["bsld"][fin])
        ax_b.plot(x, y, color=color, label=run.name, drawstyle="steps-post")
    ax_w.set_xscale("symlog", linthresh=1.0)
    ax_w.set_xlabel("wait (s)")
    ax_b.set_xscale("log")
    ax_b.set_xlabel("bounded slowdown (ratio)")
    for ax in (ax_w, ax_b):
        ax.set_ylabel("fraction of finished jobs")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    # Below both panels, never over the curves (their right ends meet 1.0).
    handles, labels = ax_w.get_legend_handles_labels()
    rows = -(-len(labels) // 4) if labels else 0
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8,
                   frameon=False)
    fig.set_size_inches(10, 4 + 0.25 * rows)
    _margins(fig, wspace=0.25, bottom=0.6 + 0.25 * rows)
    _save(fig, path)


def _plot_by_size(runs: list[Run], per: list[dict], path: Path) -> None:
    """Boxes of wait and bsld per size class (:func:`size_classes` of the machine);
    classes no policy has a finished job in are left out, and said so."""
    plt = _pyplot()
    fig, (ax_w, ax_b) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    cores = max([int(r.meta.get("cores") or 0) for r in runs]
                + [int(np.max(r.jobs["procs"])) if r.jobs.num_rows else 1 for r in runs])
    classes = size_classes(cores)
    procs = [np.asarray(r.jobs["procs"], dtype=np.float64) for r in runs]
    used = [k for k, (_, lo, hi) in enumerate(classes)
            if any(((p >= lo) & (p <= hi) & pj["finished"]).any()
                   for p, pj in zip(procs, per, strict=True))]
    classes = [classes[k] for k in used] or classes[:1]
    nc, nr = len(classes), len(runs)
    width = 0.8 / nr
    for r, (run, pj, p, color) in enumerate(zip(runs, per, procs, _colors(nr), strict=True)):
        fin = pj["finished"]
        for ax, key in ((ax_w, "wait"), (ax_b, "bsld")):
            data, pos = [], []
            for k, (_, lo, hi) in enumerate(classes):
                vals = pj[key][fin & (p >= lo) & (p <= hi)]
                if len(vals):
                    data.append(vals)
                    pos.append(k - 0.4 + width * (r + 0.5))
            if not data:
                continue
            # Whiskers at the 5th/95th percentiles, no fliers: with thousands
            # of jobs the fliers would hide the boxes and slow the drawing.
            bp = ax.boxplot(data, positions=pos, widths=width * 0.85, whis=(5, 95),
                            showfliers=False, patch_artist=True, manage_ticks=False,
                            medianprops={"color": "black"})
            for box in bp["boxes"]:
                box.set_facecolor(color)
                box.set_alpha(0.6)
            ax.plot([], [], color=color, lw=6, alpha=0.6, label=run.name)
    ax_w.set_yscale("symlog", linthresh=1.0)
    ax_w.set_ylabel("wait (s)")
    ax_b.set_yscale("log")
    ax_b.set_ylabel("bounded slowdown (ratio)")
    ax_b.set_xticks(range(nc), [c[0] for c in classes])
    ax_b.set_xlabel(f"job size (cores, classes scaled to the {cores}-core machine)")
    ax_b.set_xlim(-0.5, nc - 0.5)
    handles, labels = ax_w.get_legend_handles_labels()
    if labels:
        ax_w.legend(handles, labels, fontsize=8, loc="lower left", bbox_to_anchor=(1.01, 0.0),
                    frameon=False)
    ax_w.set_title("by job size class (box: quartiles, whiskers: 5th-95th percentile)",
                   fontsize=9)
    right = 0.6 + 0.085 * max([len(lb) for lb in labels] or [0])
    _margins(fig, bottom=0.65, right=min(3.2, right), hspace=0.12)
    _save(fig, path)


def _plot_modes(runs: list[Run], path: Path) -> None:
    """Execution-mode shares as horizontal stacked bars: one row per policy, jobs
    on the left, core-hours on the right, so names never collide."""
    plt = _pyplot()
    n = len(runs)
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.45 * n + 1.3), sharey=True)
    rows = np.arange(n)[::-1]   # the first policy on top
    for ax, (key, title) in zip(axes, (("mode_jobs", "share of finished jobs"),
                                       ("mode_corehours", "share of their core-hours")),
                                strict=True):
        left = np.zeros(n)
        for mode in metrics.EXEC_MODES:
            share = np.array([r.summary.get(f"{key}_{mode}") or 0.0 for r in runs])
            ax.barh(rows, share, left=left, height=0.7, color=_MODE_COLORS[mode], label=mode)
            for y, x0, w in zip(rows, left, share, strict=True):
                if w >= 0.08:
                    ax.text(x0 + w / 2, y, f"{w:.0%}", ha="center", va="center", fontsize=7,
                            color="white")
            left += share
        ax.set_xlim(0, 1)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1], ["0", "25%", "50%", "75%", "100%"])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("share (%)", fontsize=8)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(rows, [r.name for r in runs])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=8, frameon=False)
    width = max(len(r.name) for r in runs) if runs else 8
    _margins(fig, left=min(3.5, 0.2 + 0.065 * width), top=0.6, bottom=0.55, wspace=0.12)
    _save(fig, path)


def _plot_gantt(run: Run, path: Path) -> None:
    plt = _pyplot()
    from matplotlib.collections import LineCollection

    j = run.jobs
    started = np.isfinite(j["start"])
    order = np.arange(j.num_rows)
    fig, ax = plt.subplots(figsize=(10, 0.4 + min(8.0, 0.02 * j.num_rows + 2)))
    lw = float(np.clip(300.0 / max(j.num_rows, 1), 0.5, 8.0))
    end = np.where(np.isfinite(j["end"]), j["end"], np.nanmax(
        np.concatenate([j["submit"], j["start"][started], j["end"][np.isfinite(j["end"])]])))
    # Grey line: queued (submit -> final start, or -> end of run if never started).
    wait_to = np.where(started, j["start"], end)
    segs = np.stack([np.column_stack([j["submit"], order]),
                     np.column_stack([wait_to, order])], axis=1) / [3600.0, 1.0]
    ax.add_collection(LineCollection(segs, colors="#cccccc", linewidths=lw))
    for mode, color in _MODE_COLORS.items():
        sel = started & (j["mode"] == mode)
        if not sel.any():
            continue
        segs = np.stack([np.column_stack([j["start"][sel], order[sel]]),
                         np.column_stack([end[sel], order[sel]])], axis=1) / [3600.0, 1.0]
        ax.add_collection(LineCollection(segs, colors=color, linewidths=lw,
                                         label=mode or "no mode"))
    # Outcomes a bar's colour does not tell: marked at the bar's end (or at
    # the final start for jobs that lost attempts before it).
    outcome = np.asarray(j["outcome"]).astype(str)
    killed = np.asarray(j["killed_seconds"], dtype=np.float64) > 0 \
        if "killed_seconds" in j else np.zeros(j.num_rows, bool)
    marks = (
        (outcome == "failed", end, "X", "#c44e52", "failed (dropped after a kill or failure)"),
        (outcome == "timeout", end, "|", "#8172b3", "killed at its walltime (timeout)"),
        (killed & started, j["start"], ">", "#000000", "restarted after a killed/lost attempt"),
        (outcome == "rejected", j["submit"], "s", "#937860", "rejected (never fits)"),
        (outcome == "unfinished", wait_to, "o", "#999999", "unfinished when the run stopped"),
    )
    ms = float(np.clip(1200.0 / max(j.num_rows, 1), 2.0, 7.0))
    for sel, at, marker, color, label in marks:
        if sel.any():
            ax.plot(np.asarray(at)[sel] / 3600.0, order[sel], linestyle="none", marker=marker,
                    color=color, ms=ms, mew=1.2, label=f"{label}: {int(sel.sum())}")
    ax.autoscale()
    ax.invert_yaxis()
    ax.set_xlabel("time (h)")
    ax.set_ylabel("job index (submit order)")
    ax.set_title(f"{run.name}: grey = queued, colour = running (by execution mode)",
                 fontsize=9)
    # Outside the axes, on the right: a legend inside would cover bars.
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False)
    _margins(fig, bottom=0.55, right=2.9 if labels else 0.2)
    _save(fig, path)


def _plot_kiviat(runs: list[Run], path: Path) -> bool:
    """A radar chart of :func:`kiviat_scores`: one polygon per policy, the outer
    ring is the best policy on each axis. False when no axis has a value."""
    scores = kiviat_scores([r.summary for r in runs])
    keys = list(scores)
    if len(keys) < 3:    # fewer than three axes draw no area
        return False
    plt = _pyplot()
    angles = np.linspace(0, 2 * np.pi, len(keys), endpoint=False)
    fig = plt.figure(figsize=(8.5, 5.4))
    ax = fig.add_axes((0.17, 0.1, 0.5, 0.76), projection="polar")
    for run, color, i in zip(runs, _colors(len(runs)), range(len(runs)), strict=True):
        vals = np.array([np.nan if scores[k][i] is None else scores[k][i] for k in keys])
        closed_a, closed_v = np.append(angles, angles[0]), np.append(vals, vals[0])
        ax.plot(closed_a, closed_v, color=color, lw=1.5, marker="o", ms=3, label=run.name)
        ax.fill(closed_a, np.nan_to_num(closed_v), color=color, alpha=0.08)
    ax.set_xticks(angles, [_LABELS.get(k, k) for k in keys], fontsize=8)
    ax.set_ylim(0, 1.0)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0], ["0.25", "0.5", "0.75", "1"], fontsize=7)
    ax.set_title("score = ratio to the best policy on each axis (1 = best)", fontsize=9,
                 pad=18)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.2, 1.05), frameon=False)
    _save(fig, path)
    return True


# ---------------------------------------------------------------- HTML ----

#: Metrics shown first in the table, in this order; the rest follow sorted.
_MAIN_KEYS = (
    "jobs_total", "jobs_finished", "jobs_completed", "jobs_timeout", "jobs_failed",
    "jobs_rejected", "jobs_unfinished", "wait_mean", "wait_median", "wait_p95", "wait_p99",
    "wait_max", "response_mean", "slowdown_mean", "bsld_mean", "bsld_max", "utilization",
    "utilization_busy", "utilization_up", "useful_core_seconds", "busy_core_seconds",
    "wasted_core_seconds", "waste_timeout_core_seconds", "waste_kill_core_seconds",
    "waste_failure_core_seconds", "fairness_jain", "fairness_users", "bsld_worst_user_mean",
    "worst_user", "queue_len_mean", "queued_load_mean",
    "makespan", "resource_holes_core_seconds", "resource_holes_frac",
)


def _fmt(v: Any) -> str:
    """A summary value as HTML text: numbers rounded, mappings and lists spelled
    out (``a: 1, b: 2``), empty ones as a dash; never a Python repr."""
    if v is None or (isinstance(v, (dict, list, tuple)) and not v):
        return "&ndash;"
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not np.isfinite(v):
            return "&ndash;"
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}" if abs(v) < 1 else f"{v:,.2f}".rstrip("0").rstrip(".")
        return f"{v:.3e}"
    if isinstance(v, dict):
        return ", ".join(f"{html.escape(str(k))}: {_fmt(x)}" for k, x in sorted(
            v.items(), key=lambda kv: str(kv[0])))
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return html.escape(str(v))


def _headline_html(runs: list[Run]) -> str:
    """The table ``cosim run`` prints, best value per column in bold with a star.

    Ties are all marked; a column with one policy or no direction has no mark.
    """
    cols = [c for c in HEADLINE if any(_number(r.summary.get(c[0])) is not None for r in runs)]
    best: dict[str, float] = {}
    for key, _, fmt, better in cols:
        vals = [_number(r.summary.get(key)) for r in runs]
        known = [fmt.format(v) for v in vals if v is not None]
        # Compared as printed, so two values that show alike are both best.
        if better and len(runs) > 1 and len(set(known)) > 1:
            shown = [float(x.replace(",", "")) for x in known]
            best[key] = min(shown) if better == "low" else max(shown)
    head = "".join(f'<th title="{html.escape(metrics.definition(k))}">{html.escape(h)}'
                   f'{" &darr;" if b == "low" else " &uarr;" if b == "high" else ""}</th>'
                   for k, h, _, b in cols)
    rows = []
    for r in runs:
        cells = []
        for key, _, fmt, _ in cols:
            v = _number(r.summary.get(key))
            if v is None:
                cells.append("<td>&ndash;</td>")
            elif key in best and float(fmt.format(v).replace(",", "")) == best[key]:
                cells.append(f'<td class="best">&#9733; {fmt.format(v)}</td>')
            else:
                cells.append(f"<td>{fmt.format(v)}</td>")
        rows.append(f"<tr><th>{html.escape(r.name)}</th>{''.join(cells)}</tr>")
    return (f'<table class="headline" id="headline">\n<tr><th>policy</th>{head}</tr>\n'
            + "\n".join(rows) + "\n</table>")


def _workload_notes(runs: list[Run]) -> list[str]:
    """What the workload's cleaning did and where the machine size came from,
    from the summaries (the same for every policy, so said once)."""
    s = runs[0].summary
    out = []
    src = runs[0].meta.get("workload")
    if src:
        out.append(f"Workload: {src}.")
    if s.get("machine_source"):
        out.append(f"Machine size ({runs[0].meta.get('cores', '?')} cores) from: "
                   f"{s['machine_source']}.")
    cleaning = s.get("workload_cleaning")
    if isinstance(cleaning, dict):
        done = {k: v for k, v in cleaning.items() if v}
        if done:
            out.append("Workload cleaning (jobs per rule, in the loaded file): "
                       + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(done.items()))
                       + ".")
    status = s.get("workload_status")
    if isinstance(status, dict) and status:
        out.append("Job statuses in the file: "
                   + ", ".join(f"{k}: {v}" for k, v in sorted(status.items())) + ".")
    return out


def _html(runs: list[Run], images: list[tuple[str, str]], notes: list[str],
          warnings: list[str] | None = None) -> str:
    keys = [k for k in _MAIN_KEYS if any(k in r.summary for r in runs)]
    rest = sorted({k for r in runs for k in r.summary} - set(keys))
    rows = []
    for k in keys + rest:
        cells = "".join(f"<td>{_fmt(r.summary.get(k))}</td>" for r in runs)
        meaning = html.escape(metrics.definition(k))
        unit = html.escape(metric_unit(k))
        rows.append(f"<tr><th>{html.escape(k)}</th><td class=\"unit\">{unit}</td>{cells}"
                    f"<td class=\"def\">{meaning}</td></tr>")
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in runs)
    figs = "\n".join(
        f'<figure><img src="{html.escape(src)}" alt="{html.escape(cap)}">'
        f"<figcaption>{html.escape(cap)}</figcaption></figure>" for src, cap in images)
    warn_html = ""
    if warnings:
        warn_html = ('<div class="warnings" id="warnings"><strong>Warnings</strong><ul>'
                     + "".join(f"<li>{html.escape(w)}</li>" for w in warnings) + "</ul></div>")
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes + _workload_notes(runs))
    title = "cosim report: " + ", ".join(r.name for r in runs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 1300px; }}
h1 {{ font-size: 1.4em; overflow-wrap: anywhere; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
tr th:first-child {{ text-align: left; font-weight: normal; font-family: monospace;
  overflow-wrap: break-word; max-width: 24em; }}
table.headline th {{ background: #f3f3f3; }}
td.best {{ font-weight: bold; background: #e3f1e3; }}
td.def {{ text-align: left; color: #555; font-size: 0.85em; min-width: 18em; }}
td.unit {{ text-align: left; color: #555; font-size: 0.85em; white-space: nowrap; }}
td {{ overflow-wrap: break-word; max-width: 22em; }}
table.headline td {{ white-space: nowrap; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
.warnings {{ border-left: 4px solid #dd8452; background: #fff6ee; padding: 0.3em 1em; }}
img {{ max-width: 100%; }}
figure {{ margin: 1em 0; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<h2 id="summary">Headline metrics</h2>
<div class="scroll">{_headline_html(runs)}</div>
<p>&darr; lower is better, &uarr; higher is better; &#9733; marks the best policy of a
column (ties all marked). util: useful core-seconds over cores &times; makespan;
busy also counts timed-out, killed and lost attempts; jain: Jain's fairness over
users' mean bsld.</p>
{warn_html}
<h2 id="notes">Notes</h2>
<ul>{note_html}</ul>
<h2 id="figures">Figures</h2>
{figs}
<h2 id="metrics">All metrics</h2>
<details id="all-metrics"><summary>Every key of <code>summary.json</code>, with its unit and
definition (full definitions: <code>docs/metrics.md</code>)</summary>
<div class="scroll">
<table>
<tr><th>metric</th><th>unit</th>{head}<th>meaning</th></tr>
{chr(10).join(rows)}
</table>
</div>
</details>
</body></html>
"""


def _slug(name: str, taken: set[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "run"
    base, i = slug, 2
    while slug in taken:
        slug, i = f"{base}_{i}", i + 1
    taken.add(slug)
    return slug


def write_report(results_dir: str | os.PathLike, *,
                 gantt_max_jobs: int = GANTT_MAX_JOBS,
                 warnings: list[str] | None = None) -> Path:
    """Write the PNG figures and ``report.html`` of a results folder.

    Args:
        results_dir: a single-run folder or a comparison folder (see the
            module docstring); figures and the page are written into it.
        gantt_max_jobs: draw a Gantt chart only for runs with at most this
            many jobs; larger runs are listed as skipped in the page.
        warnings: lines to show in a warnings box under the headline table
            (the workload warnings ``cosim run`` prints on stderr).

    Returns:
        The path of ``report.html``.

    Raises:
        InputError: the folder or a file in it is missing or malformed.
    """
    root = Path(results_dir)
    runs = load_runs(root)
    per = [metrics.job_metrics(r.jobs, tau=float(r.meta.get("tau", r.summary.get("tau") or 10.0)))
           for r in runs]
    images: list[tuple[str, str]] = []
    notes: list[str] = [
        "Averages, percentiles and maxima are over finished jobs (completed or "
        "timed out). Useful work counts completed attempts only: a timed-out job's "
        "last attempt is busy but wasted time, like killed and lost attempts."]
    for r in runs:
        unfinished = r.summary.get("jobs_unfinished") or 0
        if unfinished:
            notes.append(f"{r.name}: {unfinished} job(s) were still queued or running "
                         "when the run stopped; they are in no average.")

    def add(fname: str, caption: str, draw) -> None:
        # Write to a temp name then rename, like every other result file.
        tmp = root / f".{fname}.tmp.png"
        try:
            drawn = draw(tmp)
            if drawn is not False:
                os.replace(tmp, root / fname)
        finally:
            tmp.unlink(missing_ok=True)
        if drawn is False:
            why = "fewer than three metrics" if fname == "kiviat.png" else "no events table"
            notes.append(f"No {caption.split(':')[0][0].lower()}{caption.split(':')[0][1:]}: "
                         f"{why}.")
            return
        images.append((fname, caption))

    if len(runs) > 1:
        add("kiviat.png", "Kiviat chart of the headline metrics: on each axis a policy "
            "scores best/value (lower is better) or value/best (higher is better), so 1, "
            "the outer ring, is the best policy on that axis",
            lambda p: _plot_kiviat(runs, p))
    add("timeseries.png", "Utilization and queue length over time",
        lambda p: _plot_time(runs, p))
    add("wait_bsld_cdf.png", "Wait and bounded slowdown distributions (CDF)",
        lambda p: _plot_cdfs(runs, per, p))
    add("by_size_class.png", "Wait and bounded slowdown by job size class",
        lambda p: _plot_by_size(runs, per, p))
    add("modes.png", "Execution mode shares (by jobs and by core-hours)",
        lambda p: _plot_modes(runs, p))
    taken: set[str] = set()
    for r in runs:
        if r.jobs.num_rows > gantt_max_jobs:
            notes.append(f"{r.name}: no Gantt chart ({r.jobs.num_rows} jobs, more than "
                         f"{gantt_max_jobs}).")
            continue
        if r.jobs.num_rows == 0:
            continue
        add(f"gantt_{_slug(r.name, taken)}.png", f"Gantt chart: {r.name}",
            lambda p, r=r: _plot_gantt(r, p))
    # Figures of an earlier report that this one did not draw (another
    # policy's Gantt chart), and temporary files of a report that was killed.
    drawn = {name for name, _ in images}
    for stale in list(root.glob("gantt_*.png")) + list(root.glob(".*.tmp*")):
        if stale.name not in drawn and stale.is_file():
            stale.unlink(missing_ok=True)
    out = root / "report.html"
    text = _html(runs, images, notes, warnings)
    tmp = root / ".report.html.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
