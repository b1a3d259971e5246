"""Ingesting real VASP run directories into the data set layout."""

from __future__ import annotations

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
    assert reasons[str(runs / "broken" / "bad_oszicar")].startswith(
        f"{runs / 'broken' / 'bad_oszicar' / 'OSZICAR'}:2: expected an OSZICAR line")
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


def test_nothing_found_writes_an_empty_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    report = ingest_runs(tmp_path / "empty", tmp_path / "out")
    assert report.n_found == 0 and report.ingested == [] and report.skipped == []
    assert load_dataset(tmp_path / "out").n_jobs == 0
