"""The printed study and VASP tables are made by a script, and a reduced run reproduces.

``benchmarks/readme_tables.py`` runs ``scenarios/study-lublin.yaml`` (through
:mod:`cosim.studies.printed`, as this test does) and writes
its table into the studies page of the guide (``docs/guide/studies.md``) and
``tests/readme_tables.json``; the VASP table is printed by the README and by
``docs/guide/run.md``. The full study
takes minutes, so the test runs a reduced one (the same study file with 3
seeds of 300 jobs, 999 bootstrap resamples) and checks its figures against
the recorded ones. Tolerance: 1e-9 relative (the runs are seeded and the
bootstrap too, so the figures are exact; the slack only absorbs the last bit
of a float's printed form). A deliberate change of schedules re-records::

    python benchmarks/readme_tables.py --record-reduced
    python benchmarks/readme_tables.py --serial --update
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cosim.studies.printed import page_vasp_table, report_figures, run_printed_study, without_speed

ROOT = Path(__file__).resolve().parents[1]
RECORDED = json.loads((ROOT / "tests" / "readme_tables.json").read_text())
REL = 1e-9
#: The study the studies page prints, and that page.
STUDY = ROOT / "scenarios" / "study-lublin.yaml"
STUDY_PAGE = ROOT / "docs" / "guide" / "studies.md"


def _close(got: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return abs(got - want) <= REL * max(abs(want), 1.0)


@pytest.fixture(scope="module")
def reduced(tmp_path_factory):
    return run_printed_study(STUDY, tmp_path_factory.mktemp("readme-tables"), reduced=True)


def test_reduced_study_reproduces_its_recorded_figures(reduced):
    table, rows = reduced
    got = report_figures(rows)
    want = RECORDED["reduced"]["figures"]
    assert set(got) == set(want)
    for key, cell in want.items():
        for end in ("mean", "low", "high"):
            assert _close(got[key][end], cell[end]), \
                f"{key} {end}: {got[key][end]} vs recorded {cell[end]} (tolerance {REL:g} rel)"
    assert table == RECORDED["reduced"]["table"]


def test_the_reduced_study_is_the_printed_study_made_smaller():
    # the same policies, settings and metrics as the full table, only fewer runs
    want = {k.split("/", 1)[1] for k in RECORDED["reduced"]["figures"]}
    full = {k.split("/", 1)[1] for k in RECORDED["full"]["figures"]}
    assert want == full


def test_studies_page_prints_the_recorded_full_table():
    page = STUDY_PAGE
    table = RECORDED["full"]["table"]
    assert table in page.read_text(), f"{page.name}'s study table differs from " \
        "tests/readme_tables.json (python benchmarks/readme_tables.py --serial --update)"
    # the figures the prose quotes come from the same table
    cell = RECORDED["full"]["figures"]["model=tsafrir/f1+conservative/bsld_mean"]
    assert f"{cell['mean']:.1f}" in table


@pytest.mark.parametrize("page", ["README.md", "docs/guide/run.md"])
def test_pages_print_the_recorded_vasp_table(page):
    # every column but the speed, as benchmarks/readme_tables.py --vasp recorded it
    # (tests/test_vasp_figures.py checks that a reduced run still gives these rows)
    table = page_vasp_table((ROOT / page).read_text())
    assert without_speed(table) == RECORDED["vasp"]["table_without_speed"]
