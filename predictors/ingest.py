"""Ingest real VASP run directories into the predictor data set layout.

A *run directory* holds an ``INCAR`` and an ``OSZICAR`` (``.gz`` accepted for
every file but INCAR). :func:`ingest_runs` searches each given folder
recursively, reads every run it finds and writes ``jobs.parquet``,
``progress.parquet`` and ``dataset.json`` exactly as
:func:`predictors.dataset.generate_dataset` does, so models trained on
synthetic jobs read a centre's own runs and vice versa.

What is read, and from where:

* ``INCAR``: the Table-1 tags (absent tags take VASP's defaults: NSW 0,
  IBRION -1 or 0, NELM 60, NELMIN 2, EDIFF 1e-4, EDIFFG 10 EDIFF, ISPIN 1,
  ISMEAR 1, SIGMA 0.2, LREAL False, ALGO Normal, PREC Normal, ISTART 0,
  ICHARG 2 (0 on restart), ISYM 2); the job kind comes from IBRION/NSW.
* ``OSZICAR`` (:func:`cosim.workloads.oszicar.parse_oszicar`): one progress row
  per finished ionic step (F, d E, SCF steps). Every form VASP writes is read
  (any algorithm tag, fixed-width fields that touch, MD lines); a line that
  still cannot be read is skipped and counted as a warning
  (:attr:`IngestReport.unreadable_lines`), and only a file with more
  unreadable lines than readable ones rejects its run.
* ``OUTCAR`` (optional): ``LOOP+`` real times give the elapsed time at the end
  of each ionic step; ``Elapsed time (sec)`` is the run time (the target), and
  the time outside the ionic loops is counted as start-up, so the last step
  ends at the run time; ``TOTAL-FORCE`` blocks give the maximum force; also
  NIONS, NELECT, ENCUT, cell volume, ions per type, ZVAL, POTCAR family, and
  the cores (``running on N total cores`` or ``N mpi-ranks, with T
  threads/rank, on H nodes``).
* ``POSCAR`` and ``KPOINTS`` (optional): atoms, element types, volume, and
  the k-point method; without KPOINTS, VASP uses KSPACING.
* A batch script in the folder (optional; ``*.sh``, ``*.slurm``, ``*.sbatch``,
  ``*.pbs``, ``*.job``): ``#SBATCH``/``#PBS``/``#BSUB`` walltime, tasks and
  nodes give ``req_time``, ``cores`` and ``numExhosts``.

A run whose INCAR or OSZICAR is missing or malformed, or whose OSZICAR has no
finished ionic step, is skipped and listed in :attr:`IngestReport.skipped`
with the reason; malformed optional files and unreadable OSZICAR lines are
listed in :attr:`IngestReport.warnings` and their values left unknown. One
bad run never stops the batch. When no run can be read, nothing is written
(an existing data set in the folder is left as it was). ``user`` is the owner of the run directory; ``submit`` is
unknown (NaN); ``ExhostsGroup`` is unknown (``""``).

The readers of single files live in :mod:`predictors.vasp_files` (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.workloads.oszicar import parse_oszicar
from cosim.workloads.vasp import CATEGORICAL, FEATURES
from predictors.dataset import write_dataset
from predictors.vasp_files import (
    _ALGO,
    _GGA,
    _LREAL,
    _PREC,
    OutcarInfo,
    _find,
    _Incar,
    find_runs,
    read_batch_script,
    read_incar,
    read_kpoints,
    read_outcar,
    read_poscar,
)

#: File names of batch scripts looked for in a run folder.
_SCRIPT_SUFFIXES = {".sh", ".slurm", ".sbatch", ".pbs", ".job", ".lsf"}

__all__ = [
    "IngestReport",
    "OutcarInfo",
    "find_runs",
    "read_incar",
    "read_outcar",
    "read_poscar",
    "read_kpoints",
    "read_batch_script",
    "ingest_run",
    "ingest_runs",
]


@dataclass
class IngestReport:
    """What :func:`ingest_runs` did.

    Attributes:
        out_dir: the data set folder written.
        n_found: run directories found.
        ingested: job ids written, in order.
        skipped: ``(run_dir, reason)`` for each run left out.
        warnings: ``(run_dir, message)`` for optional files that could not be used
            and OSZICAR lines that could not be read.
        unreadable_lines: OSZICAR lines skipped as unreadable, over all runs ingested.
        written: whether the data set was written (False when no run was read).
    """

    out_dir: Path
    n_found: int = 0
    ingested: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    unreadable_lines: int = 0
    written: bool = False

    @property
    def n_ingested(self) -> int:
        """Runs written to the data set."""
        return len(self.ingested)

    def __str__(self) -> str:
        where = f"into {self.out_dir}" if self.written else f"(nothing written to {self.out_dir})"
        lines = [f"ingested {self.n_ingested} of {self.n_found} VASP runs {where}"]
        if self.unreadable_lines:
            lines.append(f"{self.unreadable_lines} unreadable OSZICAR line(s) skipped "
                         "(see the warnings)")
        lines += [f"skipped {d}: {m}" for d, m in self.skipped]
        lines += [f"warning {d}: {m}" for d, m in self.warnings]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- one run


def _owner(folder: Path) -> str:
    try:
        import pwd

        return pwd.getpwuid(folder.stat().st_uid).pw_name
    except (ImportError, KeyError, OSError):
        return ""


def _functional(incar: _Incar, outcar: OutcarInfo | None) -> str:
    if incar.flag("LHFCALC", False):
        return "HYBRID"
    if incar.text("METAGGA", "").strip().upper() not in ("", "NONE", "--"):
        return "METAGGA"
    if incar.has("GGA"):
        return _GGA.get(incar.text("GGA").strip().upper()[:2], "Other")
    for pot in (outcar.potcar if outcar else []):
        word = pot.split()[0].upper() if pot.split() else ""
        if word.startswith("PAW_PBE"):
            return "PE"
        if word.startswith("PAW_GGA"):
            return "91"
        if word == "PAW":
            return "LDA"
    return ""


def _unreadable_note(unreadable: tuple[tuple[int, str], ...]) -> str:
    if not unreadable:
        return ""
    lineno, text = unreadable[0]
    return f"; {len(unreadable)} unreadable line(s), first line {lineno}: {text[:60]!r}"


def ingest_run(folder: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str]]:
    """Read one run directory.

    Returns:
        The job row (every jobs column but ``job_id``), the progress columns
        (but ``job_id``), and warnings about optional files and unreadable
        OSZICAR lines.

    Raises:
        InputError: INCAR or OSZICAR missing or malformed, or no finished ionic step.
    """
    job, progress, warnings, _ = _read_run(folder)
    return job, progress, warnings


def _read_run(folder: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str], int]:
    """:func:`ingest_run` plus the number of unreadable OSZICAR lines skipped."""
    folder = Path(folder)
    warnings: list[str] = []
    incar_path = _find(folder, "INCAR")
    if incar_path is None:
        raise InputError(str(folder / "INCAR"), "a missing file", "an INCAR beside the OSZICAR")
    osz_path = _find(folder, "OSZICAR")
    if osz_path is None:
        raise InputError(str(folder / "OSZICAR"), "a missing file", "an OSZICAR beside the INCAR")
    incar = _Incar(incar_path, read_incar(incar_path))
    run = parse_oszicar(osz_path)
    if run.n_ionic == 0:
        raise InputError(str(osz_path), f"no finished ionic step ({len(run.trailing)} SCF lines"
                         f"{_unreadable_note(run.unreadable)})",
                         "at least one ionic line 'N F= ...'")
    if run.unreadable:
        lineno, text = run.unreadable[0]
        warnings.append(f"{osz_path}: {len(run.unreadable)} unreadable line(s) skipped "
                        f"(first: line {lineno}: {text[:80]!r})")

    outcar = poscar = kmethod = None
    script: dict[str, float] = {}
    if (p := _find(folder, "OUTCAR")) is not None:
        try:
            outcar = read_outcar(p)
        except InputError as exc:
            warnings.append(str(exc))
    if (p := _find(folder, "POSCAR")) is not None:
        try:
            poscar = read_poscar(p)
        except InputError as exc:
            warnings.append(str(exc))
    if (p := _find(folder, "KPOINTS")) is not None:
        try:
            kmethod = read_kpoints(p)
        except InputError as exc:
            warnings.append(str(exc))
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix in _SCRIPT_SUFFIXES and p.stat().st_size < 1_000_000:
            script.update(read_batch_script(p))

    nan = math.nan
    nsw = incar.integer("NSW", 0)
    ibrion = incar.integer("IBRION", -1 if nsw <= 0 else 0)
    ediff = incar.number("EDIFF", 1e-4)
    istart = incar.integer("ISTART", 0)
    lhf = incar.flag("LHFCALC", False)
    atoms = ntypes = volume = nan
    if poscar is not None:
        atoms, ntypes, volume = float(poscar[0]), float(poscar[1]), poscar[2]
    if outcar is not None:
        if math.isnan(atoms) and outcar.nions:
            atoms = float(outcar.nions)
        if math.isnan(ntypes) and outcar.ions_per_type:
            ntypes = float(len(outcar.ions_per_type))
        if math.isnan(volume) and outcar.volume:
            volume = outcar.volume
    elec = nan
    if outcar is not None and outcar.zval and len(outcar.zval) == len(outcar.ions_per_type):
        elec = float(np.dot(outcar.zval, outcar.ions_per_type))
    nelect = incar.number("NELECT", outcar.nelect if outcar and outcar.nelect else elec)
    if math.isnan(elec):
        elec = outcar.nelect if outcar and outcar.nelect else nelect
    cores = outcar.cores if outcar and outcar.cores else int(script.get("cores", 0))
    if cores >= 2**31:   # no machine has that many; int64 would overflow a batch away
        raise InputError(str(folder), f"{cores} cores (OUTCAR or the batch script)",
                         "a core count below 2**31")
    hosts = float(outcar.nodes) if outcar and outcar.nodes else script.get("nodes", nan)

    features: dict[str, Any] = {
        "NELECT": nelect, "NSW": float(nsw), "SystemVolume": volume, "AtomNumber": atoms,
        "ElecNumber": elec, "NELM": float(incar.integer("NELM", 60)), "ElementTypeNumber": ntypes,
        "ENCUT": incar.number("ENCUT", outcar.encut if outcar and outcar.encut else nan),
        "EDIFFG": incar.number("EDIFFG", 10 * ediff), "EDIFF": ediff, "numExhosts": hosts,
        "cores": float(cores), "NELMIN": float(incar.integer("NELMIN", 2)),
        "ISPIN": float(incar.integer("ISPIN", 1)), "SIGMA": incar.number("SIGMA", 0.2),
        "ICHARG": float(incar.integer("ICHARG", 2 if istart == 0 else 0)),
        "ISYM": float(incar.integer("ISYM", 3 if lhf else 2)), "ISMEAR": float(incar.integer("ISMEAR", 1)),
        "IBRION": float(ibrion), "ISTART": float(istart),
    }
    kpoint = kmethod or ("KSPACING" if incar.has("KSPACING") or _find(folder, "KPOINTS") is None else "")
    categorical = {
        "ALGO": incar.choice("ALGO", _ALGO, "Normal", "Other"),
        "PREC": incar.choice("PREC", _PREC, "Normal", ""),
        "GGA": _functional(incar, outcar),
        "LREAL": incar.choice("LREAL", _LREAL, "False", ""),
        "KPointMethod": kpoint,
        "ExhostsGroup": "",
    }
    if incar.has("LREAL") and not categorical["LREAL"]:
        value, line = incar.tags["LREAL"]
        raise InputError(f"{incar_path}:{line}", f"LREAL = {value!r}", "LREAL = .FALSE./.TRUE./Auto/On")
    assert set(features) == set(FEATURES) and set(categorical) == set(CATEGORICAL)

    if nsw <= 0 or ibrion == -1:
        kind = "single_point"
    elif ibrion == 0:
        kind = "md"
    elif ibrion in (5, 6, 7, 8):
        kind = "phonon"
    else:
        kind = "relaxation"

    traj = run.trajectory()
    n = run.n_ionic
    elapsed = np.full(n, nan)
    max_force = np.full(n, nan)
    runtime = nan
    if outcar is not None:
        loops = outcar.loop_real
        if outcar.elapsed is not None:
            runtime = outcar.elapsed
        if len(loops) >= n:
            ends = np.cumsum(loops[:n])
            # Time outside the ionic loops (start-up, final I/O) counts as start-up.
            startup = max(0.0, outcar.elapsed - float(np.sum(loops))) if outcar.elapsed else 0.0
            elapsed = startup + ends
            if outcar.elapsed is None:
                warnings.append(f"{folder / 'OUTCAR'}: no 'Elapsed time', elapsed excludes start-up")
        elif loops or n:
            warnings.append(f"{folder / 'OUTCAR'}: {len(loops)} LOOP+ lines for {n} ionic steps; "
                            "elapsed unknown")
        if len(outcar.max_force) >= n:
            max_force = np.asarray(outcar.max_force[:n], dtype=np.float64)
        elif outcar.max_force:
            warnings.append(f"{folder / 'OUTCAR'}: {len(outcar.max_force)} force blocks for {n} "
                            "ionic steps; max_force unknown")

    job = {
        "user": _owner(folder), "kind": kind, "multi_ionic": n > 1, "submit": nan,
        "req_time": script.get("req_time", nan), "runtime": runtime, "cores": int(cores),
        **{k: v for k, v in features.items() if k != "cores"}, **categorical,
    }
    progress = {
        "step": traj["step"], "elapsed": elapsed, "energy": traj["energy"],
        "denergy": traj["denergy"], "max_force": max_force, "scf_steps": traj["scf_steps"],
    }
    return job, progress, warnings, len(run.unreadable)


# ----------------------------------------------------------------------------- batch


def ingest_runs(dirs: Iterable[str | Path] | str | Path, out_dir: str | Path) -> IngestReport:
    """Find VASP runs under ``dirs``, read them and write a data set to ``out_dir``.

    Args:
        dirs: folders to search recursively (a single path is accepted).
        out_dir: data set folder (created; existing files replaced). Nothing
            is written when no run could be read.

    Returns:
        The report: runs found, job ids written, runs skipped, warnings and
        whether anything was written. Bad runs are reported, never raised.
    """
    roots = [dirs] if isinstance(dirs, str | Path) else list(dirs)
    runs, missing = find_runs(roots)
    report = IngestReport(Path(out_dir), n_found=len(runs), skipped=list(missing))
    rows: list[dict[str, Any]] = []
    progress: list[dict[str, np.ndarray]] = []
    seen: dict[str, int] = {}
    for folder in runs:
        try:
            job, prog, warns, n_unreadable = _read_run(folder)
        except InputError as exc:
            report.skipped.append((str(folder), str(exc)))
            continue
        report.warnings.extend((str(folder), w) for w in warns)
        report.unreadable_lines += n_unreadable
        job_id = folder.name or str(folder)
        if job_id in seen:  # two runs with one name: use the full path, which is unique
            job_id = str(folder)
        seen[job_id] = 1
        job["job_id"] = job_id
        rows.append(job)
        progress.append(prog | {"job_id": np.full(len(prog["step"]), job_id, dtype=object)})
        report.ingested.append(job_id)

    if not rows:
        return report
    jobs_cols = {k: [r[k] for r in rows] for k in rows[0]}
    prog_cols = {k: np.concatenate([p[k] for p in progress])
                 for k in ("job_id", "step", "elapsed", "energy", "denergy", "max_force", "scf_steps")}
    write_dataset(jobs_cols, prog_cols, out_dir,
                  source="ingest:" + ",".join(str(Path(r)) for r in roots), seed=None,
                  extra={"skipped": len(report.skipped),
                         "unreadable_oszicar_lines": report.unreadable_lines})
    report.written = True
    return report

