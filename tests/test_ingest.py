"""Ingesting real VASP run directories into the data set layout."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cosim.errors import InputError
from predictors.dataset import JOBS_SCHEMA, PROGRESS_SCHEMA, generate_dataset, load_dataset
from predictors.ingest import (
    ingest_runs,
    read_batch_script,
    read_incar,
    read_kpoints,
    read_outcar,
    read_poscar,
)

VASP_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "vasp"
SI = "hackingmaterials__atomate__atomate__vasp__test_files__Si_structure_optimization__outputs__OSZICAR.OSZICAR"

# A hand-written OUTCAR for the 3-step Si relaxation: forces, LOOP+ times and
# the total elapsed time are chosen so the expected values are easy to check.
OUTCAR = """\
 running on    8 total cores
   POTCAR:    PAW_PBE Si 05Jan2001
   number of dos      NEDOS =    301   number of ions     NIONS =      2
   NELECT =       8.0000    total number of electrons
   ENCUT  =  520.0 eV  38.22 Ry    6.18 a0
   ions per type =               2
  Ionic Valenz
  ZVAL   =   4.00
  volume of cell :       40.89
 POSITION                                       TOTAL-FORCE (eV/Angst)
 -----------------------------------------------------------------------------------
      0.00000      0.00000      0.00000         0.300000      0.400000      0.000000
      1.35000      1.35000      1.35000        -0.300000     -0.400000      0.000000
 -----------------------------------------------------------------------------------
      LOOP+:  cpu time   10.0000: real time   10.5000
 POSITION                                       TOTAL-FORCE (eV/Angst)
 -----------------------------------------------------------------------------------
      0.00000      0.00000      0.00000         0.100000      0.000000      0.000000
      1.35000      1.35000      1.35000        -0.100000      0.000000      0.000000
 -----------------------------------------------------------------------------------
      LOOP+:  cpu time   11.0000: real time   12.0000
 POSITION                                       TOTAL-FORCE (eV/Angst)
 -----------------------------------------------------------------------------------
      0.00000      0.00000      0.00000         0.010000      0.020000      0.020000
      1.35000      1.35000      1.35000        -0.010000     -0.020000     -0.020000
 -----------------------------------------------------------------------------------
      LOOP+:  cpu time    7.0000: real time    7.5000
                            Elapsed time (sec):       50.000
"""

POSCAR = """\
SiO test
   5.43
     0.0 0.5 0.5
     0.5 0.0 0.5
     0.5 0.5 0.0
   Si O
   2 4
Direct
"""


@pytest.fixture(scope="module")
def index() -> list[dict]:
    if not (VASP_DIR / "index.json").is_file():
        pytest.skip(f"shared VASP samples not found at {VASP_DIR}")
    return json.loads((VASP_DIR / "index.json").read_text())


def _incar(tags: dict[str, str]) -> str:
    return "SYSTEM = test run  # comment\n" + "\n".join(f"{k} = {v}" for k, v in tags.items()) + "\n"


@pytest.fixture(scope="module")
def runs(index, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    for i, entry in enumerate(index):
        d = root / "project" / f"run{i}"
        d.mkdir(parents=True)
        (d / "INCAR").write_text(_incar(entry["incar"]))
        shutil.copy(VASP_DIR / entry["file"], d / "OSZICAR")
        if entry["file"] == SI:
            (d / "OUTCAR").write_text(OUTCAR)
            (d / "POSCAR").write_text(POSCAR)
            (d / "KPOINTS").write_text("Automatic\n0\nGamma\n4 4 4\n")
            (d / "job.sh").write_text("#!/bin/bash\n#SBATCH --time=02:00:00\n#SBATCH --ntasks=16\n"
                                      "#SBATCH --nodes=2\nmpirun vasp_std\n")
    bad = root / "broken" / "bad_oszicar"
    bad.mkdir(parents=True)
    (bad / "INCAR").write_text("ENCUT = 400\n")
    (bad / "OSZICAR").write_text("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
                                 "this is not an OSZICAR line\n")
    lone = root / "broken" / "no_oszicar"
    lone.mkdir()
    (lone / "INCAR").write_text("ENCUT = 400\n")
    badincar = root / "broken" / "bad_incar"
    badincar.mkdir()
    (badincar / "INCAR").write_text("PREC = Accurate\nENCUT = lots\n")
    shutil.copy(VASP_DIR / index[0]["file"], badincar / "OSZICAR")
    badposcar = root / "broken" / "bad_poscar"
    badposcar.mkdir()
    (badposcar / "INCAR").write_text("NSW = 0\n")
    shutil.copy(VASP_DIR / index[-1]["file"], badposcar / "OSZICAR")
    (badposcar / "POSCAR").write_text("title\n1.0\n1 0 0\n0 1\n")
    return root


@pytest.fixture(scope="module")
def ingested(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "ds"
    report = ingest_runs([runs, runs / "does-not-exist"], out)
    return report, load_dataset(out)


def test_report_lists_bad_runs_and_keeps_going(ingested, runs, index):
    report, ds = ingested
    assert report.n_found == len(index) + 4
    assert report.n_ingested == len(index) + 1 == ds.n_jobs  # bad_poscar is ingested with a warning
    reasons = dict(report.skipped)
    assert reasons[str(runs / "does-not-exist")] == "no such directory"
    # one SCF line and one unreadable line: a sound-enough file without any ionic step
    assert reasons[str(runs / "broken" / "bad_oszicar")] == (
        f"{runs / 'broken' / 'bad_oszicar' / 'OSZICAR'}: expected at least one ionic line "
        "'N F= ...', got no finished ionic step (1 SCF lines; 1 unreadable line(s), first "
        "line 2: 'this is not an OSZICAR line')")
    assert reasons[str(runs / "broken" / "no_oszicar")] == (
        f"{runs / 'broken' / 'no_oszicar' / 'OSZICAR'}: expected an OSZICAR beside the INCAR, got a missing file")
    assert reasons[str(runs / "broken" / "bad_incar")] == (
        f"{runs / 'broken' / 'bad_incar' / 'INCAR'}:2: expected a number for ENCUT, got ENCUT = 'lots'")
    assert len(report.skipped) == 4
    warned = dict(report.warnings)
    assert warned[str(runs / "broken" / "bad_poscar")].startswith(
        f"{runs / 'broken' / 'bad_poscar' / 'POSCAR'}:4: expected a lattice vector")
    assert "ingested 10 of 13 VASP runs" in str(report)


def test_same_layout_as_generated(ingested, tmp_path):
    _, ds = ingested
    gen = generate_dataset(5, 1, tmp_path / "gen")
    assert pq.read_schema(gen / "jobs.parquet").remove_metadata() == JOBS_SCHEMA
    assert ds.jobs.schema.remove_metadata() == JOBS_SCHEMA
    assert ds.progress.schema.remove_metadata() == PROGRESS_SCHEMA
    assert ds.meta["version"] == 1 and ds.meta["seed"] is None
    assert ds.meta["source"].startswith("ingest:")


def test_trajectories_match_golden_counts(ingested, index):
    _, ds = ingested
    jobs = ds.job_columns()
    prog = ds.progress_columns()
    off = ds.progress_offsets()
    row = {jid: i for i, jid in enumerate(jobs["job_id"])}
    for i, entry in enumerate(index):
        j = row[f"run{i}"]
        sl = slice(off[j], off[j + 1])
        assert off[j + 1] - off[j] == entry["n_ionic"]
        assert prog["scf_steps"][sl].tolist() == entry["electronic_per_ionic"]
        assert prog["step"][sl].tolist() == list(range(1, entry["n_ionic"] + 1))
        assert prog["energy"][sl][-1] == entry["final_F"]
        assert bool(jobs["multi_ionic"][j]) == (entry["kind"] == "multi_ionic")


def test_incar_values_and_defaults(ingested, index):
    _, ds = ingested
    jobs = ds.job_columns()
    row = {jid: i for i, jid in enumerate(jobs["job_id"])}
    for i, entry in enumerate(index):
        j, tags = row[f"run{i}"], entry["incar"]
        assert jobs["ENCUT"][j] == float(tags["ENCUT"])
        assert jobs["EDIFF"][j] == float(tags["EDIFF"])
        assert jobs["NELM"][j] == float(tags.get("NELM", 60))
        assert jobs["NELMIN"][j] == float(tags.get("NELMIN", 2))
        assert jobs["ISPIN"][j] == float(tags["ISPIN"])
        assert jobs["EDIFFG"][j] == pytest.approx(float(tags.get("EDIFFG", 10 * float(tags["EDIFF"]))))
        assert jobs["ALGO"][j] == tags["ALGO"]
        assert jobs["PREC"][j] == tags.get("PREC", "Normal")
        assert jobs["LREAL"][j] == "Auto"
        nsw, ibrion = int(tags["NSW"]), int(tags["IBRION"])
        assert jobs["kind"][j] == ("single_point" if nsw == 0 or ibrion == -1 else "relaxation")
        assert jobs["ISYM"][j] == float(tags.get("ISYM", 2))
        assert jobs["ICHARG"][j] == float(tags.get("ICHARG", 2))
        assert jobs["ISTART"][j] == float(tags.get("ISTART", 0))


def test_outcar_poscar_kpoints_and_script(ingested, index):
    _, ds = ingested
    jobs = ds.job_columns()
    prog = ds.progress_columns()
    off = ds.progress_offsets()
    i = next(k for k, e in enumerate(index) if e["file"] == SI)
    j = list(jobs["job_id"]).index(f"run{i}")
    sl = slice(off[j], off[j + 1])
    np.testing.assert_allclose(prog["max_force"][sl], [0.5, 0.1, 0.03])
    # LOOP+ 10.5 + 12 + 7.5 = 30 s of 50 s: 20 s of start-up before the first step.
    np.testing.assert_allclose(prog["elapsed"][sl], [30.5, 42.5, 50.0])
    assert jobs["runtime"][j] == 50.0
    assert jobs["cores"][j] == 8  # OUTCAR wins over the script's 16 tasks
    assert jobs["numExhosts"][j] == 2.0 and jobs["req_time"][j] == 7200.0
    assert jobs["AtomNumber"][j] == 6.0 and jobs["ElementTypeNumber"][j] == 2.0  # POSCAR wins
    assert jobs["SystemVolume"][j] == pytest.approx(5.43 ** 3 / 4)
    assert jobs["NELECT"][j] == 8.0 and jobs["ElecNumber"][j] == 8.0
    assert jobs["KPointMethod"][j] == "Gamma" and jobs["GGA"][j] == "PE"
    others = [k for k in range(ds.n_jobs) if k != j]
    assert all(math.isnan(jobs["runtime"][k]) for k in others)
    assert np.isnan(np.delete(prog["elapsed"], np.arange(off[j], off[j + 1]))).all()
    assert all(jobs["cores"][k] == 0 and jobs["KPointMethod"][k] == "KSPACING" for k in others)
    assert set(jobs["ExhostsGroup"]) == {""} and np.isnan(jobs["submit"]).all()


def test_read_incar_syntax(tmp_path):
    p = tmp_path / "INCAR"
    p.write_text("Title line without tag\nencut = 400 ; ISMEAR = -5 ! comment\nMAGMOM = 2*0.6 \\\n 1*5\n"
                 "ENCUT = 500\n")
    tags = read_incar(p)
    assert tags == {"ENCUT": ("400", 2), "ISMEAR": ("-5", 2), "MAGMOM": ("2*0.6   1*5", 3)}
    p.write_text("ENCUT = 400\nEN CUT = 3\n")
    with pytest.raises(InputError, match=r"INCAR:2: expected 'TAG = value', got 'EN CUT = 3'"):
        read_incar(p)


def test_read_small_files(tmp_path):
    k = tmp_path / "KPOINTS"
    for text, method in [("a\n0\nMonkhorst-Pack\n4 4 4\n", "Monkhorst-Pack"), ("a\n0\nAuto\n20\n", "Auto"),
                         ("a\n40\nLine-mode\nreciprocal\n", "Line-mode"), ("a\n2\nReciprocal\n0 0 0 1\n", "Explicit")]:
        k.write_text(text)
        assert read_kpoints(k) == method
    k.write_text("a\nmany\n")
    with pytest.raises(InputError, match=r"KPOINTS:2: expected the number of k-points"):
        read_kpoints(k)
    p = tmp_path / "POSCAR"
    p.write_text("vasp4 style\n-100.0\n1 0 0\n0 1 0\n0 0 1\n3 1\nDirect\n")
    assert read_poscar(p) == (4, 2, 100.0)
    s = tmp_path / "job.pbs"
    s.write_text("#PBS -l nodes=2:ppn=24\n#PBS -l walltime=12:00:00\n")
    assert read_batch_script(s) == {"nodes": 2.0, "cores": 48.0, "req_time": 43200.0}
    s.write_text("#SBATCH -t 1-12:00 -N 3\n#SBATCH --ntasks-per-node=32\n")
    assert read_batch_script(s) == {"req_time": 129600.0, "nodes": 3.0, "cores": 96.0}
    o = tmp_path / "OUTCAR"
    o.write_text(" running    4 mpi-ranks, with    2 threads/rank, on    1 nodes\n"
                 " LOOP+:  cpu time     20.63: real time     20.74\n")
    info = read_outcar(o)
    assert (info.cores, info.nodes, info.loop_real, info.elapsed) == (8, 1, [20.74], None)
    o.write_text(" POSITION   TOTAL-FORCE (eV/Angst)\n ----\n  0 0 0 0.1 x 0.2\n")
    with pytest.raises(InputError, match=r"OUTCAR:3: expected a TOTAL-FORCE row"):
        read_outcar(o)


def test_duplicate_run_names_get_unique_ids(index, tmp_path):
    for group in ("a", "b"):
        d = tmp_path / "src" / group / "relax"
        d.mkdir(parents=True)
        (d / "INCAR").write_text(_incar(index[0]["incar"]))
        shutil.copy(VASP_DIR / index[0]["file"], d / "OSZICAR")
    report = ingest_runs(tmp_path / "src", tmp_path / "out")
    assert report.ingested == ["relax", str(tmp_path / "src" / "b" / "relax")]
    assert load_dataset(tmp_path / "out").n_jobs == 2


def test_nothing_found_writes_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    report = ingest_runs(tmp_path / "empty", tmp_path / "out")
    assert report.n_found == 0 and report.ingested == [] and report.skipped == []
    assert not report.written and not (tmp_path / "out").exists()
    assert "ingested 0 of 0 VASP runs (nothing written to" in str(report)


def test_nothing_readable_leaves_an_existing_dataset_alone(tmp_path):
    generate_dataset(3, 1, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    bad = tmp_path / "src" / "run"
    bad.mkdir(parents=True)
    (bad / "INCAR").write_text("ENCUT = 400\n")
    report = ingest_runs(tmp_path / "src", tmp_path / "out")
    assert report.n_found == 1 and report.n_ingested == 0 and not report.written
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


# Synthetic runs, one per OSZICAR form VASP writes, with the values a reader must get.
_FORMS = {
    # ncg of 100000 and more touches d eps; a negative rms(c) touches rms
    "glued": ("IBRION = 2\nNSW = 5\n",
              "       N       E                     dE             d eps       ncg     rms          rms(c)\n"
              "DAV:   1    -0.123456789012E+03   -0.12345E+03   -0.28335E-01101248   0.371E+01\n"
              "DAV:   2    -0.123556789012E+03   -0.10000E+00   -0.28335E-02 99999   0.371E+00"
              "-0.973E+00\n"
              "   1 F= -.12355679E+03 E0= -.12355679E+03  d E =-.123557E+03\n"
              "RMM:   1    -0.123656789012E+03   -0.10000E+00   -0.28335E-02100000   0.371E-01\n"
              "   2 F= -.12365679E+03 E0= -.12365679E+03  d E =-.100000E+00\n",
              [2, 1], -123.65679),
    # conjugate gradient (ALGO=All), damped and steepest-descent tags
    "algorithms": ("ALGO = All\nNSW = 3\nIBRION = 1\n",
                   "CGA:   1    -0.1E+02   -0.1E+02   -0.1E+01   10   0.1E+00\n"
                   "DMP:   2    -0.2E+02   -0.1E+02   -0.1E+01   10   0.1E+00\n"
                   "   1 F= -.20000000E+02 E0= -.20000000E+02  d E =-.200000E+02\n"
                   "SDA:   1    -0.3E+02   -0.1E+02   -0.1E+01   10   0.1E+00\n"
                   "CG :   2    -0.3E+02   -0.1E-02   -0.1E+01   10   0.1E+00\n"
                   "EDD:   3    -0.3E+02   -0.1E-03   -0.1E+01   10   0.1E+00\n"
                   "   2 F= -.30000000E+02 E0= -.30000000E+02  d E =-.100000E+02\n",
                   [2, 3], -30.0),
    # molecular dynamics: T= E= F= E0= EK= SP= SK= lines, no d E
    "md": ("IBRION = 0\nNSW = 400\nPOTIM = 1.0\nTEBEG = 300\n",
           "RMM:   1    -0.1E+03   -0.1E+01   -0.1E+01   10   0.1E-03\n"
           "     1 T=   301. E= -.98753474E+02 F= -.99953050E+02 E0= -.99952050E+02  "
           "EK= 0.11983E+01 SP= 0.00E+00 SK= 0.00E+00\n"
           "RMM:   1    -0.1E+03   -0.1E+01   -0.1E+01   10   0.1E-03\n"
           "RMM:   2    -0.1E+03   -0.1E-02   -0.1E+01   10   0.1E-04\n"
           "     2 T=   299. E= -.98750000E+02 F= -.99900000E+02 E0= -.99900000E+02  "
           "EK= 0.11500E+01 SP= 0.00E+00 SK= 0.00E+00\n",
           [1, 2], -99.9),
}


@pytest.mark.parametrize("form", sorted(_FORMS))
def test_every_oszicar_form_ingests(tmp_path, form):
    incar, oszicar, scf, final_f = _FORMS[form]
    run = tmp_path / "src" / form
    run.mkdir(parents=True)
    (run / "INCAR").write_text(incar)
    (run / "OSZICAR").write_text(oszicar)
    report = ingest_runs(tmp_path / "src", tmp_path / "out")
    assert report.n_ingested == 1 and report.skipped == [] and report.warnings == []
    ds = load_dataset(tmp_path / "out")
    prog = ds.progress_columns()
    assert prog["scf_steps"].tolist() == scf
    assert prog["energy"][-1] == final_f
    if form == "md":
        assert ds.job_columns()["kind"][0] == "md"
        # MD lines print no d E: it is F_i - F_(i-1), as for a first relaxation step
        assert prog["denergy"].tolist() == pytest.approx([-99.95305, -99.9 + 99.95305])


def test_an_unreadable_line_is_a_counted_warning_not_a_rejected_run(tmp_path, index):
    run = tmp_path / "src" / "odd"
    run.mkdir(parents=True)
    (run / "INCAR").write_text(_incar(index[0]["incar"]))
    lines = (VASP_DIR / index[0]["file"]).read_text().splitlines()
    lines.insert(5, "  some line a future VASP prints")
    lines.insert(40, "DAV:  99  what")
    (run / "OSZICAR").write_text("\n".join(lines) + "\n")
    report = ingest_runs(tmp_path / "src", tmp_path / "out")
    assert report.n_ingested == 1 and report.unreadable_lines == 2
    (where, message), = report.warnings
    assert message == (f"{run / 'OSZICAR'}: 2 unreadable line(s) skipped (first: line 6: "
                       "'some line a future VASP prints')")
    assert "2 unreadable OSZICAR line(s) skipped" in str(report)
    ds = load_dataset(tmp_path / "out")
    assert ds.meta["unreadable_oszicar_lines"] == 2
    # the unreadable SCF line still counts as a step of the ionic step it is in
    step = sum("F=" in line for line in lines[:40])
    assert ds.progress_columns()["scf_steps"].tolist() == \
        [n + (i == step) for i, n in enumerate(index[0]["electronic_per_ionic"])]


def test_one_run_a_parser_chokes_on_never_stops_the_batch(index, tmp_path):
    # Each of these raised (ValueError, EOFError, OverflowError at the write) and
    # the whole batch wrote nothing.
    cases = {"zval": ("OUTCAR", b" Ionic Valenz\n  ZVAL   =  abc\n"),
             "cut_gz": ("OUTCAR.gz", gzip.compress(OUTCAR.encode())[:40]),
             "cores": ("OUTCAR", b" running on  99999999999999999999999 total cores\n")}
    for name, (file, payload) in {"good": (None, b""), **cases}.items():
        d = tmp_path / "src" / name
        d.mkdir(parents=True)
        (d / "INCAR").write_text(_incar(index[0]["incar"]))
        shutil.copy(VASP_DIR / index[0]["file"], d / "OSZICAR")
        if file:
            (d / file).write_bytes(payload)
    report = ingest_runs(tmp_path / "src", tmp_path / "out")
    # a bad OUTCAR is a warning (the run is ingested without it); a core count no
    # machine has leaves the run out
    assert report.ingested == ["cut_gz", "good", "zval"]
    assert [m.split(": expected ")[1] for _, m in report.skipped] == [
        "a core count below 2**31, got 99999999999999999999999 cores (OUTCAR or the batch "
        "script)"]
    warned = " ".join(w for _, w in report.warnings)
    assert "a value that is not a number" in warned and "an unreadable file" in warned
    assert load_dataset(tmp_path / "out").n_jobs == 3
