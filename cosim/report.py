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

__all__ = ["write_report", "load_runs", "Run", "GANTT_MAX_JOBS"]

#: Runs with more jobs than this get no Gantt chart (one bar per job stops
#: being readable and costs seconds to draw).
GANTT_MAX_JOBS = 3000
_SMOOTH_BINS = 300  # time-weighted bins of the utilization and queue plots
_MODE_COLORS = {"ready": "#4c72b0", "reserved": "#dd8452", "backfilled": "#55a868",
                "": "#999999"}


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
    ax_q.set_ylabel("queued jobs")
    ax_q.set_xlabel("time (h)")
    _legend(ax_q, loc="upper left", fontsize=7, ncol=min(4, n), frameon=False)
    _margins(fig, left=0.7, top=0.35)
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
    ax_b.set_xlabel("bounded slowdown")
    for ax in (ax_w, ax_b):
        ax.set_ylabel("fraction of finished jobs")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    _legend(ax_w, loc="lower right", fontsize=8)
    _margins(fig, wspace=0.25)
    _save(fig, path)


def _plot_by_size(runs: list[Run], per: list[dict], path: Path) -> None:
    plt = _pyplot()
    fig, (ax_w, ax_b) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    nc, nr = len(metrics.SIZE_CLASSES), len(runs)
    width = 0.8 / nr
    for r, (run, pj, color) in enumerate(zip(runs, per, _colors(nr), strict=True)):
        cls = metrics.size_class(run.jobs["procs"])
        fin = pj["finished"]
        for ax, key in ((ax_w, "wait"), (ax_b, "bsld")):
            data, pos = [], []
            for k in range(nc):
                vals = pj[key][fin & (cls == k)]
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
    ax_b.set_ylabel("bounded slowdown")
    ax_b.set_xticks(range(nc), [f"{c[0]} procs" for c in metrics.SIZE_CLASSES])
    ax_b.set_xlim(-0.5, nc - 0.5)
    _legend(ax_w, fontsize=8, loc="upper left")
    ax_w.set_title("by job size class (box: quartiles, whiskers: 5th-95th percentile)",
                   fontsize=9)
    _margins(fig, bottom=0.45, hspace=0.12)
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
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(rows, [r.name for r in runs])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=8, frameon=False)
    width = max(len(r.name) for r in runs) if runs else 8
    _margins(fig, left=min(3.5, 0.2 + 0.065 * width), top=0.6, bottom=0.35, wspace=0.12)
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
    ax.autoscale()
    ax.invert_yaxis()
    ax.set_xlabel("time (h)")
    ax.set_ylabel("job (submit order)")
    ax.set_title(f"{run.name}: grey = queued, colour = running (by execution mode)",
                 fontsize=9)
    _legend(ax, fontsize=8, loc="upper right")
    _margins(fig, bottom=0.55)
    _save(fig, path)


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
    if v is None:
        return "&ndash;"
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}" if abs(v) < 1 else f"{v:,.2f}".rstrip("0").rstrip(".")
        return f"{v:.3e}"
    return html.escape(str(v))


def _html(runs: list[Run], images: list[tuple[str, str]], notes: list[str]) -> str:
    keys = [k for k in _MAIN_KEYS if any(k in r.summary for r in runs)]
    rest = sorted({k for r in runs for k in r.summary} - set(keys))
    rows = []
    for k in keys + rest:
        cells = "".join(f"<td>{_fmt(r.summary.get(k))}</td>" for r in runs)
        meaning = html.escape(metrics.definition(k))
        rows.append(f"<tr><th>{html.escape(k)}</th>{cells}<td class=\"def\">{meaning}</td></tr>")
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in runs)
    figs = "\n".join(
        f'<figure><img src="{html.escape(src)}" alt="{html.escape(cap)}">'
        f"<figcaption>{html.escape(cap)}</figcaption></figure>" for src, cap in images)
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    title = "cosim report: " + ", ".join(r.name for r in runs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1100px; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
tr th:first-child {{ text-align: left; font-weight: normal; font-family: monospace; }}
td.def {{ text-align: left; color: #555; font-size: 0.85em; }}
img {{ max-width: 100%; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<h2>Notes</h2>
<ul>{note_html}</ul>
<h2>Metrics</h2>
<p>Each metric is defined in the last column; the full definitions are in
<code>docs/metrics.md</code> and the keys of <code>summary.json</code> in
<code>docs/schemas.md</code>, in the hpc-cosim sources.</p>
<table>
<tr><th>metric</th>{head}<th>meaning</th></tr>
{chr(10).join(rows)}
</table>
<h2>Figures</h2>
{figs}
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
                 gantt_max_jobs: int = GANTT_MAX_JOBS) -> Path:
    """Write the PNG figures and ``report.html`` of a results folder.

    Args:
        results_dir: a single-run folder or a comparison folder (see the
            module docstring); figures and the page are written into it.
        gantt_max_jobs: draw a Gantt chart only for runs with at most this
            many jobs; larger runs are listed as skipped in the page.

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
            notes.append(f"No {caption[0].lower()}{caption[1:]}: no events table.")
            return
        images.append((fname, caption))

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
    text = _html(runs, images, notes)
    tmp = root / ".report.html.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
