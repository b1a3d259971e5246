"""The report's figures (matplotlib, Agg backend, nothing displayed), one PNG each.

See :mod:`cosim.report` for the list of figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cosim import metrics
from cosim.report.runs import (
    _LABELS,
    _MODE_COLORS,
    _SMOOTH_BINS,
    Run,
    kiviat_scores,
    naming_files,
    size_classes,
)


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
        with naming_files(run.path):
            ts = metrics.time_series(run.events, int(run.meta["cores"]),
                                     max_points=_SMOOTH_BINS)
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
    fig = kiviat_figure(runs)
    if fig is None:
        return False
    _save(fig, path)
    return True


def kiviat_figure(runs: list[Run]):
    """The Kiviat chart's figure (unsaved), or None with fewer than three axes."""
    scores = kiviat_scores([r.summary for r in runs])
    keys = list(scores)
    if len(keys) < 3:    # fewer than three axes draw no area
        return None
    plt = _pyplot()
    angles = np.linspace(0, 2 * np.pi, len(keys), endpoint=False)
    # The ring keeps its place and size in inches; the figure widens for the
    # legend's longest policy name (about 0.07 in a character at 8 pt), so
    # no name is cut at the right edge.
    longest = max(len(r.name) for r in runs)
    width = max(8.5, 7.0 + 0.07 * longest)
    fig = plt.figure(figsize=(width, 5.8))
    # Room above and below the ring for the axis names (drawn at radius 1.1).
    ax = fig.add_axes((1.45 / width, 0.08, 4.25 / width, 0.72), projection="polar")
    for run, color, i in zip(runs, _colors(len(runs)), range(len(runs)), strict=True):
        vals = np.array([np.nan if scores[k][i] is None else scores[k][i] for k in keys])
        closed_a, closed_v = np.append(angles, angles[0]), np.append(vals, vals[0])
        ax.plot(closed_a, closed_v, color=color, lw=1.5, marker="o", ms=3, label=run.name)
        ax.fill(closed_a, np.nan_to_num(closed_v), color=color, alpha=0.08)
    # The axis names are drawn by hand outside the ring, anchored on their
    # inner side: matplotlib centres tick labels on a circle just outside it,
    # so a long name at 3 or 9 o'clock ran into the ring and the polygons.
    ax.set_xticks(angles, [""] * len(keys))
    for key, angle in zip(keys, angles, strict=True):
        c, s = np.cos(angle), np.sin(angle)
        ax.text(angle, 1.1, _LABELS.get(key, key), fontsize=8,
                ha="left" if c > 0.2 else "right" if c < -0.2 else "center",
                va="bottom" if s > 0.2 else "top" if s < -0.2 else "center")
    ax.set_ylim(0, 1.0)
    # Scores read between the first two axes, where no polygon vertex sits.
    ax.set_rlabel_position(float(np.degrees(angles[1] / 2)))
    ax.set_yticks([0.25, 0.5, 0.75, 1.0], ["0.25", "0.5", "0.75", "1"], fontsize=7)
    # A figure title: an axes title sits just above the ring, on the top axis name.
    fig.suptitle("score = ratio to the best policy on each axis (1 = best)", fontsize=9,
                 x=3.57 / width, y=0.965)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.2, 1.05), frameon=False)
    return fig
