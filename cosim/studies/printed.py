"""The tables the docs print, made again: a study's table and its figures, the VASP run's.

``benchmarks/readme_tables.py`` writes the studies page's table
(``scenarios/study-lublin.yaml``) and the VASP table of the README and
``docs/guide/run.md``; ``tests/test_readme_tables.py`` runs the reduced study
(:data:`REDUCED`) and checks its figures against the recorded ones. Both go
through these functions, so the check is of the same code that prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["REDUCED", "study_file", "run_printed_study", "report_figures", "rows_and_notes",
           "without_speed", "page_vasp_table"]

#: The reduced study: the study file of the studies page, with fewer, shorter runs.
REDUCED = {"seeds": [1, 2, 3], "set": {"workload.jobs": 300}, "bootstrap": 999, "plots": False}


def study_file(study: Path, folder: Path, reduced: bool) -> Path:
    """The study file ``study``, or its reduced variant, written into ``folder``.

    The scenario path is made absolute so that the copy runs from anywhere.
    """
    doc = yaml.safe_load(study.read_text())
    doc["scenario"] = str((study.parent / doc["scenario"]).resolve())
    if reduced:
        doc["seeds"] = REDUCED["seeds"]
        doc["set"] = {**doc.get("set", {}), **REDUCED["set"]}
        doc["bootstrap"] = REDUCED["bootstrap"]
        doc["plots"] = REDUCED["plots"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / study.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_printed_study(study: Path, out: Path, *, reduced: bool, serial: bool = True,
                      quiet: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """Run the (reduced) study into ``out``; return its printed table and report rows."""
    from cosim.studies import run_study

    lines: list[str] = []
    path = study_file(study, out / "study", reduced)
    rc = run_study(path, out=out / "results", serial=serial, quiet=quiet, echo=lines.append)
    if rc != 0:
        raise SystemExit(f"error: the study had failed runs (exit {rc}): see {out}/results")
    # lines: the plan line, "N runs in T s", the table, "results: ..."; keep the table only
    table = next(m for m in lines if m.startswith(("setting ", "policy ")))
    rows = json.loads((out / "results" / "report.json").read_text())["rows"]
    return table, rows


def report_figures(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """``{"setting/policy/metric": {mean, low, high}}`` from the report's rows."""
    return {f"{r['setting']}/{r['policy']}/{r['metric']}":
            {k: round(float(r[k]), 9) for k in ("mean", "low", "high")} for r in rows}


def rows_and_notes(table: str) -> tuple[list[str], list[str]]:
    """The table's lines (header, dashes, one per policy) and the notes printed below them."""
    lines = table.splitlines()
    width = len(lines[1])
    rows = [line for line in lines if len(line) == width]
    return rows, lines[len(rows):]


def without_speed(table: str) -> list[str]:
    """The table's lines without the last column (speed, machine-dependent), notes kept."""
    rows, notes = rows_and_notes(table)
    last = len(rows[1].split()[-1]) + 2           # the dashes under the last header, and the gap
    return [line[:-last].rstrip() for line in rows] + notes


def page_vasp_table(text: str) -> str:
    """The ``cosim run scenarios/vasp.yaml`` table as a page (the README, the guide) prints it."""
    start = text.index("$ python -m cosim run scenarios/vasp.yaml\n")
    first = text.index("\n", start) + 1
    return text[first:text.index("\nresults: ", first)]
