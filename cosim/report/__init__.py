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
path and has no other dependency. The page is titled by the scenario and
says its seed; it leads with the headline table (starvation beside the
means, a mark on a policy that starved a job for a week). Figures, page-wide:
a Kiviat chart as one small radar per policy; utilization and queue length
over time; wait and bounded-slowdown CDFs per policy; wait and bounded
slowdown by job-size class; execution-mode shares; then, folded, one Gantt
chart per policy for runs of at most ``gantt_max_jobs`` jobs (thumbnails
that open full size) and the table of every metric.

Examples:
    >>> write_report("results/lublin_easy")  # doctest: +SKIP
    PosixPath('results/lublin_easy/report.html')
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from cosim import limits, metrics, records
from cosim.errors import InputError
from cosim.report.figures import (
    _plot_by_size,
    _plot_cdfs,
    _plot_gantt,
    _plot_kiviat,
    _plot_modes,
    _plot_time,
)
from cosim.report.figures import _pyplot as _pyplot  # cosim.studies.report draws with it
from cosim.report.figures import _save as _save  # tests patch it in cosim.report.figures
from cosim.report.runs import (
    GANTT_MAX_JOBS,
    HEADLINE,
    Run,
    _number,
    kiviat_scores,
    load_runs,
    metric_label,
    metric_unit,
    naming_files,
    size_classes,
)
from cosim.report.runs import (
    KIVIAT_KEYS as KIVIAT_KEYS,
)

__all__ = ["write_report", "load_runs", "Run", "GANTT_MAX_JOBS", "HEADLINE", "metric_unit",
           "metric_label", "size_classes", "kiviat_scores"]


# ---------------------------------------------------------------- HTML ----

#: Metrics shown first in the table, in this order; the rest follow sorted.
_MAIN_KEYS = (
    "jobs_total", "jobs_finished", "jobs_completed", "jobs_timeout", "jobs_failed",
    "jobs_rejected", "jobs_unfinished", "wait_mean", "wait_median", "wait_p95", "wait_p99",
    "wait_max", "starved_1d", "starved_1w", "starved_1d_share", "starved_1w_share",
    "response_mean", "slowdown_mean", "bsld_mean", "bsld_max", "utilization",
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


def _share(summary: dict[str, Any], key: str, value: float) -> str:
    """`` (0.4%)`` after a nonzero starved-jobs count: its share of the jobs."""
    share = _number(summary.get(f"{key}_share")) if key.startswith("starved_") else None
    return f' <span class="share">({share:.1%})</span>' if share is not None and value else ""


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
                continue
            text = fmt.format(v) + _share(r.summary, key, v)
            if key in best and float(fmt.format(v).replace(",", "")) == best[key]:
                cells.append(f'<td class="best">&#9733; {text}</td>')
            elif key == "starved_1w" and v > 0:
                cells.append(f'<td class="starved">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        mark = (' <span class="starves" title="a job waited more than a week">starves</span>'
                if metrics.starves(r.summary) else "")
        rows.append(f"<tr><th>{html.escape(r.name)}{mark}</th>{''.join(cells)}</tr>")
    return (f'<table class="headline" id="headline">\n<tr><th>policy</th>{head}</tr>\n'
            + "\n".join(rows) + "\n</table>")


def _workload_notes(runs: list[Run]) -> list[str]:
    """What the workload's cleaning did and where the machine size came from,
    from the summaries (the same for every policy, so said once)."""
    s = runs[0].summary
    out = []
    src = runs[0].meta.get("workload")
    if isinstance(src, str) and src:
        # The generators' seeds are drawn from the scenario's seed (cosim.model.streams):
        # the page shows that one, in its heading, and not these.
        shown = re.sub(r"\(\)", "", re.sub(r"(, )?\bseed=\d+", "", src)).replace("(, ", "(")
        out.append(f"Workload: {shown}.")
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


def _heading(root: Path, runs: list[Run]) -> tuple[str, str]:
    """The page's title (the scenario's name) and the line under it: the
    scenario's description, its own seed, the policies, jobs and machine."""
    meta = runs[0].meta
    name = meta.get("scenario")
    if not isinstance(name, str) or not name:
        name = root.resolve().name or "results"
    parts = []
    description = _scenario_description(root)
    if description:
        parts.append(description.rstrip(".") + ".")
    seed = meta.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        parts.append(f"Seed {seed}.")
    policies = ", ".join(r.name for r in runs)
    parts.append(f"{len(runs)} {'policy' if len(runs) == 1 else 'policies'}: {policies}.")
    jobs = runs[0].summary.get("jobs_total")
    cores = meta.get("cores")
    if isinstance(jobs, int) and isinstance(cores, int):
        parts.append(f"{jobs:,} jobs on {cores:,} {'nodes' if _node_granular(root) else 'cores'}.")
    return f"cosim report: {name}", " ".join(parts)


def _scenario_file(root: Path) -> dict[str, Any]:
    """The resolved ``scenario.yaml`` a run saved beside its results, or {} when
    there is none (a folder written before runs saved it).

    Raises:
        InputError: the file is there but is not a YAML mapping (garbage, a
            list, not UTF-8, too large or too deep): a report would describe
            the run from it, so it is refused, naming the file.
    """
    import yaml

    path = root / "scenario.yaml"
    if not os.path.lexists(path):
        return {}
    expected = "the scenario.yaml a run saves (a YAML mapping of scenario keys)"
    data = limits.read_bytes(path, expected, limits.SCENARIO_BYTES)
    try:
        doc = limits.load_yaml(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"a byte that is not UTF-8 at offset {exc.start}",
                         expected) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise InputError(where, f"invalid YAML ({getattr(exc, 'problem', None) or exc})",
                         expected) from None
    if not isinstance(doc, dict):
        found = "an empty file" if doc is None else f"a YAML {type(doc).__name__}"
        raise InputError(str(path), found, expected)
    return doc


def _scenario_description(root: Path) -> str:
    d = _scenario_file(root).get("description")
    return d.strip() if isinstance(d, str) else ""


def _node_granular(root: Path) -> bool:
    cluster = _scenario_file(root).get("cluster")
    return isinstance(cluster, dict) and cluster.get("granularity") == "node"


def _html(runs: list[Run], images: list[tuple[str, str]], notes: list[str],
          warnings: list[str] | None = None, *, heading: tuple[str, str] = ("", ""),
          gantts: list[tuple[str, str]] | None = None) -> str:
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
    gantt_html = _gantt_html(gantts or [])
    warn_html = ""
    if warnings:
        warn_html = ('<div class="warnings" id="warnings"><strong>Warnings</strong><ul>'
                     + "".join(f"<li>{html.escape(w)}</li>" for w in warnings) + "</ul></div>")
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes + _workload_notes(runs))
    title, lede = heading
    title = title or "cosim report: " + ", ".join(r.name for r in runs)
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
td.starved {{ background: #fbe3e3; }}
span.starves {{ font-family: sans-serif; font-size: 0.8em; color: #fff; background: #c44e52;
  border-radius: 3px; padding: 0 4px; }}
span.share {{ color: #555; font-size: 0.85em; }}
td.def {{ text-align: left; color: #555; font-size: 0.85em; min-width: 18em; }}
td.unit {{ text-align: left; color: #555; font-size: 0.85em; white-space: nowrap; }}
td {{ overflow-wrap: break-word; max-width: 22em; }}
table.headline td {{ white-space: nowrap; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
.warnings {{ border-left: 4px solid #dd8452; background: #fff6ee; padding: 0.3em 1em; }}
img {{ max-width: 100%; height: auto; }}
figure {{ margin: 1em 0; }}
p.lede {{ color: #333; margin-top: -0.4em; }}
.gantts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
  gap: 0.6em; }}
.gantts figure {{ margin: 0; }}
.gantts img {{ width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="lede" id="lede">{html.escape(lede)}</p>
<h2 id="summary">Headline metrics</h2>
<div class="scroll">{_headline_html(runs)}</div>
<p>&darr; lower is better, &uarr; higher is better; &#9733; marks the best policy of a
column (ties all marked). util: useful core-seconds over cores &times; makespan;
busy also counts timed-out, killed and lost attempts; jain: Jain's fairness over
users' mean bsld; waited &gt;1d, &gt;1w: jobs queued more than a day, a week
(share of the jobs in brackets); <span class="starves">starves</span> marks a policy
under which a job waited more than a week.</p>
{warn_html}
<h2 id="notes">Notes</h2>
<ul>{note_html}</ul>
<h2 id="figures">Figures</h2>
{figs}
{gantt_html}
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


def _gantt_html(gantts: list[tuple[str, str]]) -> str:
    """The Gantt charts on demand: folded, as thumbnails that open the full chart."""
    if not gantts:
        return ""
    cells = "\n".join(
        f'<figure><a href="{html.escape(src)}"><img src="{html.escape(src)}" loading="lazy" '
        f'alt="Gantt chart: {html.escape(name)}"></a><figcaption>{html.escape(name)}'
        "</figcaption></figure>" for src, name in gantts)
    return (f'<details id="gantt-charts"{" open" if len(gantts) == 1 else ""}><summary>Gantt '
            f"charts, one per policy ({len(gantts)}): grey = queued, colour = running by "
            "execution mode; a chart opens full size</summary>\n"
            f'<div class="gantts">{cells}</div></details>')


def _slug(name: str, taken: set[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "run"
    base, i = slug, 2
    while slug in taken:
        slug, i = f"{base}_{i}", i + 1
    taken.add(slug)
    return slug


@contextmanager
def _writing(target: Path) -> Iterator[None]:
    """Name ``target`` when writing it fails: the error names the temporary file."""
    try:
        yield
    except OSError as exc:
        found = "a folder" if target.is_dir() else str(exc.strerror or exc)
        raise InputError(str(target), found, "a file path the report can write") from None


def _kept_warnings(root: Path, warnings: list[str] | None) -> list[str]:
    """``warnings``, saved beside the page; or, when None, those saved by an earlier report."""
    path = root / "warnings.json"
    if warnings is not None:
        with _writing(path):
            records.write_json_atomic(path, {"warnings": list(warnings)})
        return list(warnings)
    if not path.is_file():
        return []
    doc = records.read_json(path)
    kept = doc.get("warnings") if isinstance(doc, dict) else None
    if not isinstance(kept, list) or not all(isinstance(w, str) for w in kept):
        raise InputError(str(path), "no list of lines under 'warnings'",
                         '{"warnings": ["line", ...]} as a report writes it')
    return kept


def _never_started(runs: list[Run]) -> list[str]:
    """The line ``cosim run`` prints for each policy with jobs that never started."""
    lines = []
    for r in runs:
        never = r.summary.get("jobs_never_started") or 0
        if never:
            lines.append(f"{r.name}: {never} of {r.summary.get('jobs_total', '?')} jobs never "
                         f"started ({r.summary.get('jobs_given_up') or 0} given up in the "
                         "queue); reasons in jobs.parquet")
    return lines


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
            (the workload warnings ``cosim run`` prints on stderr). They are
            kept in ``warnings.json`` beside the page, so a later report of
            the folder (None here: ``python -m cosim report DIR``) shows them
            too. Jobs that never started are added from each run's summary.

    Returns:
        The path of ``report.html``.

    Raises:
        InputError: the folder or a file in it is missing or malformed.
    """
    root = Path(results_dir)
    runs = load_runs(root)
    # Read (and check) the saved scenario before any figure is written.
    heading = _heading(root, runs)
    warnings = _kept_warnings(root, warnings) + _never_started(runs)
    per = []
    for r in runs:
        with naming_files(r.path):
            per.append(metrics.job_metrics(
                r.jobs, tau=float(r.meta.get("tau", r.summary.get("tau") or 10.0))))
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
            with _writing(root / fname):
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
        add("kiviat.png", "Kiviat chart of the headline metrics, one radar per policy with "
            "the others in grey: on each axis a policy scores best/value (lower is better) "
            "or value/best (higher is better), so 1, the outer ring, is the best policy on "
            "that axis",
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
    gantts: list[tuple[str, str]] = []
    for r in runs:
        if r.jobs.num_rows > gantt_max_jobs:
            notes.append(f"{r.name}: no Gantt chart ({r.jobs.num_rows} jobs, more than "
                         f"{gantt_max_jobs}).")
            continue
        if r.jobs.num_rows == 0:
            continue
        fname = f"gantt_{_slug(r.name, taken)}.png"
        add(fname, f"Gantt chart: {r.name}", lambda p, r=r: _plot_gantt(r, p))
        gantts.append((images.pop()[0], r.name))    # shown folded, apart from the figures
    # Figures of an earlier report that this one did not draw (another
    # policy's Gantt chart), and temporary files of a report that was killed.
    drawn = {name for name, _ in images} | {name for name, _ in gantts}
    for stale in list(root.glob("gantt_*.png")) + list(root.glob(".*.tmp*")):
        if stale.name not in drawn and stale.is_file():
            stale.unlink(missing_ok=True)
    out = root / "report.html"
    text = _html(runs, images, notes, warnings, heading=heading, gantts=gantts)
    with _writing(out):  # removes its temporary file when it fails
        records.write_bytes_atomic(out, text)
    return out
