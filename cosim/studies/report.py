"""A study's outputs: ``study.parquet`` (one row per run), ``report.json``, ``report.html`` and plots.

Figures use the run report's matplotlib set-up (:mod:`cosim.report`).
"""

from __future__ import annotations

import html
import io
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from cosim import records
from cosim.report import _pyplot, metric_label
from cosim.studies.plan import _slug
from cosim.studies.schema import FIXED_COLUMNS, STATUS_COLUMNS, StudyPlan
from cosim.studies.stats import _num

__all__ = ["study_rows", "write_study_table", "write_study_report"]

# -----------------------------------------------------------------------------------
# The table of runs
# -----------------------------------------------------------------------------------
def study_rows(plan: StudyPlan, done: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per run of the plan (missing runs count as failed).

    Scalar summary values become columns; a summary value that is a mapping
    of scalars (``workload_cleaning``) becomes ``key.subkey`` columns.
    """
    out_root = plan.out.resolve()
    rows = []
    for spec in plan.runs:
        doc = done.get(spec.out_dir) or {"status": "error", "error": "not run"}
        row: dict[str, Any] = {"setting": spec.setting, "policy": spec.policy, "seed": spec.seed}
        for key in plan.keys:
            row[key] = spec.values.get(key)
        row.update(status=doc.get("status"), error=doc.get("error") or "",
                   run_seconds=doc.get("seconds"),
                   dir=str(Path(spec.out_dir).relative_to(out_root)))
        for key, value in (doc.get("summary") or {}).items():
            name = key if key not in row else f"summary.{key}"
            if isinstance(value, dict):
                for sub, v in value.items():
                    if v is None or isinstance(v, bool | int | float | str):
                        row[f"{name}.{sub}"] = v
            elif value is None or isinstance(value, bool | int | float | str):
                row[name] = value
        rows.append(row)
    return rows


def _column(values: list[Any]):
    """A pyarrow array of one column: int, float, bool or string (mixed: the YAML text)."""
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) \
            and len(present) == len(values):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.array([math.nan if v is None else float(v) for v in values], type=pa.float64())
    if all(v is None or isinstance(v, str) for v in values):
        return pa.array(values, type=pa.string())
    return pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v))
                     for v in values], type=pa.string())


def write_study_table(path: str | os.PathLike, plan: StudyPlan,
                      rows: list[dict[str, Any]]) -> Path:
    """Write ``study.parquet`` (schema ``study/1``), atomically.

    Columns: ``setting``, ``policy``, ``seed``, one per override key path,
    ``status``, ``error``, ``run_seconds``, ``dir`` (relative to the results
    folder), then every summary metric in name order. A failed run has
    nulls (NaN) for its metrics.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    head = [*FIXED_COLUMNS, *plan.keys, *STATUS_COLUMNS]
    metric_names = sorted({k for r in rows for k in r} - set(head))
    names = head + metric_names
    arrays = [_column([r.get(n) for r in rows]) for n in names]
    meta = {"cosim.schema": "study/1", "cosim.study": json.dumps(
        {"name": plan.name, "scenario": plan.study.scenario, "kind": plan.kind,
         "keys": plan.keys, "seeds": plan.seeds})}
    table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(meta)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return records.write_bytes_atomic(path, buf.getvalue())


def _fmt(v: float) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if a >= 0.001 or v == 0 else f"{v:.2e}"


def _ci_text(mean: float, lo: float, hi: float) -> str:
    if math.isfinite(lo):
        return f"{_fmt(mean)} [{_fmt(lo)}, {_fmt(hi)}]"
    return _fmt(mean)


def _stats_table(plan: StudyPlan, stats: list[dict[str, Any]]) -> str:
    """The terminal table: per setting, one row per policy, mean [interval] per metric."""
    pct = f"{plan.study.confidence * 100:g}%"
    blocks = []
    for label, values in plan.settings:
        rows = [s for s in stats if s["setting"] == label]
        header = ["policy", "runs"] + [f"{m} ({pct} CI)" for m in plan.metrics]
        table = []
        for policy in plan.policies:
            cells = {s["metric"]: s for s in rows if s["policy"] == policy}
            first = next(iter(cells.values()))
            table.append([policy, f"{first['ok']}/{first['runs']}"]
                         + [_ci_text(cells[m]["mean"], cells[m]["low"], cells[m]["high"])
                            for m in plan.metrics])
        widths = [max(len(r[i]) for r in [header] + table) for i in range(len(header))]
        lines = []
        if len(plan.settings) > 1 or values:
            lines.append(f"setting {label}")
        lines.append("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                               for i, (h, w) in enumerate(zip(header, widths))))
        lines.append("  ".join("-" * w for w in widths))
        for r in table:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# -----------------------------------------------------------------------------------
# The report: tables and plots across seeds
# -----------------------------------------------------------------------------------
def _plot_metric(plan: StudyPlan, rows: list[dict[str, Any]], stats: list[dict[str, Any]],
                 metric: str, path: Path) -> None:
    """One panel per setting: each seed's value (a dot, seeds joined across policies),
    and the mean with its interval."""
    plt = _pyplot()
    settings = [label for label, _ in plan.settings]
    policies = plan.policies
    ncols = min(3, len(settings))
    nrows = math.ceil(len(settings) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False,
                             sharey=True)
    x = np.arange(len(policies))
    for k, label in enumerate(settings):
        ax = axes[k // ncols][k % ncols]
        for seed in plan.seeds:
            ys = [next((_num(r.get(metric)) for r in rows if r["setting"] == label
                        and r["policy"] == p and r["seed"] == seed and r["status"] == "ok"),
                       math.nan) for p in policies]
            ax.plot(x, ys, color="#bbbbbb", lw=0.8, marker="o", ms=3, zorder=1)
        for i, p in enumerate(policies):
            s = next(s for s in stats if s["setting"] == label and s["policy"] == p
                     and s["metric"] == metric)
            if math.isfinite(s["low"]):
                ax.errorbar([i], [s["mean"]], yerr=[[s["mean"] - s["low"]], [s["high"] - s["mean"]]],
                            fmt="D", color="#c44e52", capsize=4, zorder=3)
            elif math.isfinite(s["mean"]):
                ax.plot([i], [s["mean"]], "D", color="#c44e52", zorder=3)
        ax.set_xticks(x, policies, rotation=20, ha="right", fontsize=8)
        if len(settings) > 1:
            ax.set_title(label, fontsize=9)
        if k % ncols == 0:
            ax.set_ylabel(metric_label(metric))
        ax.grid(axis="y", alpha=0.3)
    for k in range(len(settings), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle(f"{metric_label(metric)}: seeds (grey, joined by seed) and mean with "
                 f"{plan.study.confidence * 100:g}% CI (red)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def _plot_curves(plan: StudyPlan, rows: list[dict[str, Any]], path: Path) -> bool:
    """Training studies: mean return against steps per setting, mean over seeds and range."""
    import csv

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for k, (label, _) in enumerate(plan.settings):
        curves = []
        for r in rows:
            f = plan.out / r["dir"] / "curve.csv"
            if r["setting"] != label or r["status"] != "ok" or not f.is_file():
                continue
            with open(f, newline="", encoding="utf-8") as fh:
                pts = [(float(row["global_step"]), float(row["mean_return"] or "nan"))
                       for row in csv.DictReader(fh)]
            if pts:
                curves.append(np.array(pts))
        if not curves:
            continue
        n = min(len(c) for c in curves)
        steps = curves[0][:n, 0]
        ys = np.stack([c[:n, 1] for c in curves])
        color = plt.get_cmap("tab10")(k % 10)
        with warnings.catch_warnings():   # updates where no episode ended yet: NaN, not drawn
            warnings.simplefilter("ignore", RuntimeWarning)
            ax.plot(steps, np.nanmean(ys, axis=0), color=color,
                    label=f"{label} ({len(curves)} seeds)")
            ax.fill_between(steps, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), color=color,
                            alpha=0.2)
        drawn = True
    if drawn:
        ax.set_xlabel("steps")
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return drawn


def write_study_report(out_dir: str | os.PathLike, plan: StudyPlan, rows: list[dict[str, Any]],
                       stats: list[dict[str, Any]]) -> Path:
    """Write ``report.html`` and its PNGs: per-setting tables of means with intervals,
    paired differences to the first policy, failed runs, and the plots across seeds."""
    out = Path(out_dir)
    images = []

    def add(fname: str, caption: str, draw) -> None:
        tmp = out / f".{fname}.tmp.png"
        try:
            if draw(tmp) is not False:
                os.replace(tmp, out / fname)
                images.append((fname, caption))
        finally:
            tmp.unlink(missing_ok=True)

    for metric in plan.metrics:
        add(f"metric_{_slug(metric)}.png", f"{metric} across seeds",
            lambda p, m=metric: _plot_metric(plan, rows, stats, m, p))
    if plan.kind == "train":
        add("learning_curves.png", "Learning curves: mean over seeds, band from min to max",
            lambda p: _plot_curves(plan, rows, p))
    pct = f"{plan.study.confidence * 100:g}%"
    parts = [f"<h1>study {html.escape(plan.name)}</h1>"]
    if plan.study.description:
        parts.append(f"<p>{html.escape(plan.study.description)}</p>")
    failed = [r for r in rows if r["status"] != "ok"]
    parts.append(f"<p>Scenario <code>{html.escape(plan.study.scenario)}</code>; "
                 f"{len(rows)} runs ({len(rows) - len(failed)} ok, {len(failed)} failed); "
                 f"seeds {html.escape(', '.join(map(str, plan.seeds)))}. Means over seeds with "
                 f"{pct} BCa bootstrap confidence intervals ({plan.study.bootstrap} resamples); "
                 f"&Delta; is the difference to {html.escape(plan.policies[0])} on the same "
                 "seeds, with its interval. One row per run: <code>study.parquet</code>.</p>")
    if plan.study.set:
        parts.append("<p>For every run: " + html.escape(", ".join(
            f"{k} = {v}" for k, v in plan.study.set.items())) + "</p>")
    for label, values in plan.settings:
        if values:
            parts.append(f"<h2>setting {html.escape(label)}</h2><p>" + html.escape(", ".join(
                f"{k} = {v}" for k, v in values.items())) + "</p>")
        head = "".join(f"<th>{html.escape(m)}</th><th>&Delta; {html.escape(m)}</th>"
                       for m in plan.metrics)
        body = []
        for policy in plan.policies:
            cells = {s["metric"]: s for s in stats if s["setting"] == label and s["policy"] == policy}
            first = next(iter(cells.values()))
            tds = ""
            for m in plan.metrics:
                s = cells[m]
                diff = (_ci_text(s["diff_mean"], s["diff_low"], s["diff_high"])
                        if "diff_mean" in s else "&ndash;")
                tds += f"<td>{_ci_text(s['mean'], s['low'], s['high'])}</td><td>{diff}</td>"
            body.append(f"<tr><th>{html.escape(policy)}</th><td>{first['ok']}/{first['runs']}"
                        f"</td>{tds}</tr>")
        parts.append(f"<table><tr><th>policy</th><th>runs ok</th>{head}</tr>"
                     + "".join(body) + "</table>")
    if failed:
        items = "".join(f"<li><code>{html.escape(r['dir'])}</code>: {html.escape(r['error'])}</li>"
                        for r in failed)
        parts.append(f"<h2>Failed runs</h2><ul>{items}</ul>")
    parts.append("<h2>Figures</h2>" + "".join(
        f'<figure><img src="{html.escape(src)}" alt="{html.escape(cap)}">'
        f"<figcaption>{html.escape(cap)}</figcaption></figure>" for src, cap in images))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>study {html.escape(plan.name)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1200px; }}
table {{ border-collapse: collapse; font-size: 0.9em; margin-bottom: 1em; }}
th, td {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
tr th:first-child {{ text-align: left; font-family: monospace; }}
img {{ max-width: 100%; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style></head>
<body>
{chr(10).join(parts)}
</body></html>
"""
    return records.write_bytes_atomic(out / "report.html", page)
