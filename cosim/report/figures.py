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

#: Width in inches of the page-wide figures: at 100 dpi they fill the page's
#: 1,300-pixel column at their own size (narrower ones left a third of it empty).
PAGE_WIDTH_IN = 12.5


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
    fig = plt.figure(figsize=(PAGE_WIDTH_IN, 0.75 * n + 3.0))
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
    fig, (ax_w, ax_b) = plt.subplots(1, 2, figsize=(PAGE_WIDTH_IN, 4))
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
    fig.set_size_inches(PAGE_WIDTH_IN, 4 + 0.25 * rows)
    _margins(fig, wspace=0.25, bottom=0.6 + 0.25 * rows)
    _save(fig, path)


def _plot_by_size(runs: list[Run], per: list[dict], path: Path) -> None:
    """Boxes of wait and bsld per size class (:func:`size_classes` of the machine);
    classes no policy has a finished job in are left out, and said so."""
    plt = _pyplot()
    fig, (ax_w, ax_b) = plt.subplots(2, 1, figsize=(PAGE_WIDTH_IN, 6.0), sharex=True)
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
    fig, axes = plt.subplots(1, 2, figsize=(PAGE_WIDTH_IN, 0.45 * n + 1.3), sharey=True)
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
    """Small multiples of :func:`kiviat_scores`, one radar per policy (the outer
    ring is the best policy on each axis). False when no axis has a value."""
    fig = kiviat_figure(runs)
    if fig is None:
        return False
    _save(fig, path)
    return True


#: Short axis names for the small radars (the full names are in the caption's table).
_KIVIAT_SHORT = {
    "wait_mean": "mean wait", "wait_max": "max wait", "bsld_mean": "mean bsld",
    "utilization": "utilization", "queue_len_mean": "mean queue", "fairness_jain": "Jain",
    "wasted_core_hours": "waste", "wait_p99": "p99 wait", "starved_1w": "waited >1w",
}
KIVIAT_COLUMNS = 4        # radars per row
_KIVIAT_CELL = (3.2, 2.8)  # inches of one radar's cell (width, height)


def kiviat_figure(runs: list[Run]):
    """The Kiviat chart's figure (unsaved), or None with fewer than three axes.

    One small radar per policy, :data:`KIVIAT_COLUMNS` to a row: the policy's
    own polygon filled in its colour, every other policy's as a thin grey
    outline behind it, so each shape reads on its own and against the rest
    (seven filled polygons on one ring are a blur).
    """
    scores = kiviat_scores([r.summary for r in runs])
    keys = list(scores)
    if len(keys) < 3:    # fewer than three axes draw no area
        return None
    plt = _pyplot()
    angles = np.linspace(0, 2 * np.pi, len(keys), endpoint=False)
    closed = np.append(angles, angles[0])
    shapes = []
    for i in range(len(runs)):
        vals = np.array([np.nan if scores[k][i] is None else scores[k][i] for k in keys])
        shapes.append(np.append(vals, vals[0]))
    cols = min(KIVIAT_COLUMNS, len(runs))
    rows = -(-len(runs) // cols)
    cw, ch = _KIVIAT_CELL
    top = 0.3 if cols > 2 else 0.45  # the figure title's band, inches (2 lines if narrow)
    fig = plt.figure(figsize=(cw * cols, ch * rows + top))
    width, height = fig.get_size_inches()
    ring = 1.75                      # the ring's diameter in inches: room around it for names
    for i, (run, color) in enumerate(zip(runs, _colors(len(runs)), strict=True)):
        r, c = divmod(i, cols)
        x0 = (c * cw + (cw - ring) / 2) / width
        y0 = (height - top - (r + 1) * ch + 0.52) / height
        ax = fig.add_axes((x0, y0, ring / width, ring / height), projection="polar")
        for j, other in enumerate(shapes):
            if j != i:
                ax.plot(closed, other, color="#b0b0b0", lw=0.7, zorder=1)
        ax.fill(closed, np.nan_to_num(shapes[i]), color=color, alpha=0.35, zorder=2)
        ax.plot(closed, shapes[i], color=color, lw=1.8, marker="o", ms=3, zorder=3)
        ax.set_xticks(angles, [""] * len(keys))
        # Names drawn by hand outside the ring, anchored on their inner side, so
        # a name at 3 or 9 o'clock never runs into the ring.
        for key, angle in zip(keys, angles, strict=True):
            co, si = np.cos(angle), np.sin(angle)
            ax.text(angle, 1.12, _KIVIAT_SHORT.get(key, _LABELS.get(key, key)), fontsize=7,
                    ha="left" if co > 0.2 else "right" if co < -0.2 else "center",
                    va="bottom" if si > 0.2 else "top" if si < -0.2 else "center")
        ax.set_ylim(0, 1.0)
        ax.set_yticks([0.5, 1.0], ["", ""])
        ax.tick_params(pad=0)
        ax.spines["polar"].set_linewidth(0.6)
        # The policy's name under its radar, in its colour; long names wrap.
        fig.text((c + 0.5) * cw / width, (height - top - (r + 1) * ch + 0.12) / height,
                 _wrapped(run.name, 34), ha="center", va="bottom", fontsize=8.5,
                 color=color, fontweight="bold")
    import textwrap

    title = ("One radar per policy: score = ratio to the best policy on each axis "
             "(outer ring = best); grey: the other policies")
    # about 0.075 in a character at 9 pt: two lines on a narrow figure
    fig.suptitle(textwrap.fill(title, int(width / 0.075)), fontsize=9, y=1 - 0.08 / height,
                 va="top")
    return fig


def _wrapped(name: str, width: int) -> str:
    """``name`` cut into lines of at most ``width`` characters (names have no spaces)."""
    return "\n".join(name[i:i + width] for i in range(0, len(name), width)) or " "
