"""Regenerate the tables the README and the guide print, and the reduced figures that check them.

The guide's studies page (``docs/guide/studies.md``) shows the table of
``python -m cosim sweep scenarios/study-lublin.yaml``
(3 policies x 10 seeds x 2 settings of 2,000 Lublin jobs). It is seeded, so it
reproduces exactly on the same library releases; this script makes it again
instead of it being pasted by hand::

    python benchmarks/readme_tables.py                  # the full study (a few minutes), printed
    python benchmarks/readme_tables.py --serial --update
        # ... and written into docs/guide/studies.md and tests/readme_tables.json
    python benchmarks/readme_tables.py --record-reduced
        # the reduced study's figures into tests/readme_tables.json
    python benchmarks/readme_tables.py --vasp [RESULTS_DIR] [--update]
        # the table of ``python -m cosim run scenarios/vasp.yaml`` (a few minutes;
        # or from a finished results folder's comparison.json)

``tests/test_readme_tables.py`` runs the reduced study (the same file with 3
seeds of 300 jobs, 999 bootstrap resamples: a few seconds) and checks that it
gives the recorded figures (means and interval ends to 1e-9 relative), and
that the studies page holds the recorded full table. For the VASP table
(printed by the README and by ``docs/guide/run.md``), whose
``@rnn`` rows take minutes, ``tests/test_vasp_figures.py`` checks a reduced
run; here the test only checks that both pages print the recorded table.
``--vasp --update`` writes every column but the last (speed, which depends on
the machine and its load) into both pages and keeps each page's speed
column. A change that moves schedules
(a policy fix) fails the reduced check; re-record both with the commands above.

Results go under ``out/`` (ignored by git), never into the checkout's root.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from cosim.studies.printed import (
    REDUCED,
    page_vasp_table,
    report_figures,
    rows_and_notes,
    run_printed_study,
    without_speed,
)

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "scenarios" / "study-lublin.yaml"
FIGURES = ROOT / "tests" / "readme_tables.json"
README = ROOT / "README.md"
#: The pages that print the ``cosim run scenarios/vasp.yaml`` table.
VASP_PAGES = (README, ROOT / "docs" / "guide" / "run.md")
#: The page that prints the study table.
STUDY_PAGE = ROOT / "docs" / "guide" / "studies.md"

def vasp_table(results: Path | None, out: Path) -> str:
    """The comparison table of ``scenarios/vasp.yaml``: from ``results``' comparison.json
    when given, else by running the scenario into ``out``."""
    from cosim.compose.table import comparison_table

    if results is None:
        from cosim.compose import run_scenario
        from cosim.config import load_scenario

        scenario = load_scenario(ROOT / "scenarios" / "vasp.yaml")
        run_scenario(scenario, list(scenario.scheduler.policies), out / "vasp",
                     base_dir=ROOT / "scenarios", plots=False, echo=None)
        results = out / "vasp"
    doc = json.loads((results / "comparison.json").read_text())
    # in the run's order (the file's keys are sorted)
    return comparison_table({p["policy"]: doc["summaries"][p["policy"]] for p in doc["policies"]})


def update_readme_vasp(table: str) -> None:
    """Write ``table`` into every page that prints it, keeping each page's own speed column."""
    for page in VASP_PAGES:
        _update_vasp_page(page, table)


def _update_vasp_page(page: Path, table: str) -> None:
    text = page.read_text()
    old = page_vasp_table(text)
    (old_lines, _), (new_lines, notes) = rows_and_notes(old), rows_and_notes(table)
    if [r.split()[0] for r in old_lines[2:]] != [r.split()[0] for r in new_lines[2:]]:
        raise SystemExit(f"error: {page.name}'s VASP table has other policies; paste it by hand")
    width = len(old_lines[1].split()[-1])
    if len(new_lines[1].split()[-1]) != width:
        raise SystemExit("error: the speed column changed width; paste the table by hand")
    merged = [new[:len(new) - width] + old_line[len(old_line) - width:]
              for new, old_line in zip(new_lines, old_lines)]
    page.write_text(text.replace(old, "\n".join(merged + notes)))


def _load() -> dict[str, Any]:
    return json.loads(FIGURES.read_text()) if FIGURES.exists() else {}


def _save(doc: dict[str, Any]) -> None:
    FIGURES.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def update_readme(table: str) -> None:
    """Replace the study table in the studies page's ``cosim sweep`` block."""
    text = STUDY_PAGE.read_text()
    start = text.index("$ python -m cosim sweep scenarios/study-lublin.yaml")
    first = text.index("\nsetting ", start) + 1
    end = text.index("\nresults: ", first)
    STUDY_PAGE.write_text(text[:first] + table + text[end:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serial", action="store_true", help="run in this process, without Ray")
    ap.add_argument("--update", action="store_true",
                    help="write the full table into docs/guide/studies.md and "
                         "tests/readme_tables.json")
    ap.add_argument("--record-reduced", action="store_true",
                    help="run only the reduced study and record its figures")
    ap.add_argument("--out", type=Path, default=None,
                    help="results folder (default: a fresh one under out/readme-tables)")
    ap.add_argument("--vasp", nargs="?", const="", default=None, metavar="RESULTS_DIR",
                    help="the VASP table instead (from RESULTS_DIR's comparison.json if given)")
    args = ap.parse_args(argv)
    base = args.out or Path(tempfile.mkdtemp(prefix="run-", dir=_mk(ROOT / "out/readme-tables")))
    if args.vasp is not None:
        table = vasp_table(Path(args.vasp) if args.vasp else None, base)
        print(table)
        if args.update:
            update_readme_vasp(table)
            doc = _load()
            doc["vasp"] = {"scenario": "scenarios/vasp.yaml", "table_without_speed":
                           without_speed(table)}
            _save(doc)
            pages = ", ".join(str(page.relative_to(ROOT)) for page in VASP_PAGES)
            print(f"written: {pages}, {FIGURES.relative_to(ROOT)}", file=sys.stderr)
        return 0
    if args.record_reduced:
        table, rows = run_printed_study(STUDY, base, reduced=True)
        doc = _load()
        doc["reduced"] = {"study": STUDY.name, **{k: v for k, v in REDUCED.items()},
                          "figures": report_figures(rows), "table": table}
        _save(doc)
        print(table)
        return 0
    table, rows = run_printed_study(STUDY, base, reduced=False, serial=args.serial, quiet=False)
    print(table)
    if args.update:
        doc = _load()
        doc["full"] = {"study": STUDY.name, "figures": report_figures(rows), "table": table}
        _save(doc)
        update_readme(table)
        print(f"written: {STUDY_PAGE.relative_to(ROOT)}, {FIGURES.relative_to(ROOT)}",
              file=sys.stderr)
    return 0


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
