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
"""

from __future__ import annotations

import gzip
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.workloads.oszicar import parse_oszicar
from cosim.workloads.vasp import CATEGORICAL, FEATURES
from predictors.dataset import write_dataset

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

_SCRIPT_SUFFIXES = {".sh", ".slurm", ".sbatch", ".pbs", ".job", ".lsf"}


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


# ----------------------------------------------------------------------------- files


def _find(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _read_text(path: Path) -> str:
    try:
        raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as exc:
        raise InputError(str(path), f"an unreadable file ({exc.__class__.__name__}: {exc})",
                         "a readable file") from None
    return raw.decode("utf-8", errors="replace")


def find_runs(dirs: Iterable[str | Path] | str | Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Folders under ``dirs`` (recursively) holding an INCAR or an OSZICAR.

    Returns:
        The candidate run folders, sorted, and ``(dir, reason)`` for given
        folders that do not exist.
    """
    if isinstance(dirs, str | Path):
        dirs = [dirs]
    found: set[Path] = set()
    missing: list[tuple[str, str]] = []
    for root in map(Path, dirs):
        if not root.is_dir():
            missing.append((str(root), "no such directory"))
            continue
        for folder, _subdirs, files in os.walk(root):
            names = set(files)
            if names & {"INCAR", "OSZICAR", "OSZICAR.gz"}:
                found.add(Path(folder))
    return sorted(found), missing


def read_incar(path: str | Path) -> dict[str, tuple[str, int]]:
    """INCAR tags: upper-case name -> (value text, line number).

    Comments (``#``, ``!``) are dropped, ``;`` separates assignments, a
    trailing backslash continues a line; lines without ``=`` are ignored, as
    VASP does. The first assignment of a tag wins.

    Raises:
        InputError: the file cannot be read, or a tag name is not a tag.
    """
    path = Path(path)
    tags: dict[str, tuple[str, int]] = {}
    pending, start = "", 0
    for lineno, raw in enumerate(_read_text(path).splitlines(), start=1):
        line = re.split(r"[#!]", raw, maxsplit=1)[0]
        if not pending:
            start = lineno
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line, pending = pending + line, ""
        for part in line.split(";"):
            if "=" not in part:
                continue
            key, value = part.split("=", 1)
            key = key.strip().upper()
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
                raise InputError(f"{path}:{start}", repr(part.strip()), "'TAG = value'")
            tags.setdefault(key, (value.strip(), start))
    return tags


def _fortran_float(text: str) -> float:
    return float(text.replace("D", "E").replace("d", "e"))


class _Incar:
    """Typed access to INCAR tags with VASP defaults and file:line errors."""

    def __init__(self, path: Path, tags: dict[str, tuple[str, int]]):
        self.path, self.tags = path, tags

    def has(self, key: str) -> bool:
        return key in self.tags

    def text(self, key: str, default: str = "") -> str:
        return self.tags[key][0] if key in self.tags else default

    def number(self, key: str, default: float) -> float:
        if key not in self.tags:
            return default
        value, line = self.tags[key]
        try:
            return _fortran_float(value.split()[0])
        except (ValueError, IndexError):
            raise InputError(f"{self.path}:{line}", f"{key} = {value!r}", f"a number for {key}") from None

    def integer(self, key: str, default: int) -> int:
        x = self.number(key, default)
        if not math.isfinite(x) or x != int(x):
            value, line = self.tags[key]
            raise InputError(f"{self.path}:{line}", f"{key} = {value!r}", f"an integer for {key}")
        return int(x)

    def flag(self, key: str, default: bool) -> bool:
        if key not in self.tags:
            return default
        value, line = self.tags[key]
        v = value.strip().strip(".").upper()
        if v in ("T", "TRUE"):
            return True
        if v in ("F", "FALSE"):
            return False
        raise InputError(f"{self.path}:{line}", f"{key} = {value!r}", f"a logical for {key} (.TRUE./.FALSE.)")

    def choice(self, key: str, mapping: list[tuple[str, str]], default: str, other: str) -> str:
        """First mapping entry whose key is a prefix of the value (upper case)."""
        if key not in self.tags:
            return default
        v = self.tags[key][0].strip().strip(".").upper().replace("_", "")
        for prefix, name in mapping:
            if v.startswith(prefix):
                return name
        return other


# Order matters: longer words first, then VASP's one-letter abbreviations.
_ALGO = [("NONE", "Other"), ("NOTHING", "Other"), ("NORMAL", "Normal"), ("VERYFAST", "VeryFast"),
         ("FAST", "Fast"), ("CONJUGATE", "All"), ("CHI", "Other"), ("ALL", "All"), ("DAMPED", "Damped"),
         ("EXACT", "Other"), ("EIGENVAL", "Other"), ("SUBROT", "Other"),
         ("N", "Normal"), ("V", "VeryFast"), ("F", "Fast"), ("A", "All"), ("C", "All"), ("D", "Damped")]
_PREC = [("L", "Low"), ("M", "Medium"), ("N", "Normal"), ("A", "Accurate"), ("H", "High"), ("S", "Single")]
_LREAL = [("TRUE", "True"), ("FALSE", "False"), ("AUTO", "Auto"), ("ON", "On"), ("T", "True"),
          ("F", "False"), ("A", "Auto"), ("O", "On")]
_GGA = {"PE": "PE", "PS": "PS", "91": "91", "RP": "RP", "AM": "AM", "CA": "LDA", "PZ": "LDA"}


@dataclass
class OutcarInfo:
    """Values read from an OUTCAR (None / empty when absent)."""

    loop_real: list[float] = field(default_factory=list)
    max_force: list[float] = field(default_factory=list)
    elapsed: float | None = None
    nions: int | None = None
    nelect: float | None = None
    encut: float | None = None
    volume: float | None = None
    ions_per_type: list[int] = field(default_factory=list)
    zval: list[float] = field(default_factory=list)
    potcar: list[str] = field(default_factory=list)
    cores: int | None = None
    nodes: int | None = None


_RE_NUM = r"([-+]?\d+\.?\d*(?:[EeDd][-+]?\d+)?)"


def read_outcar(path: str | Path) -> OutcarInfo:
    """Read the few OUTCAR values ingestion needs, streaming line by line.

    A force block cut by the end of the file (a killed run) is dropped.

    Raises:
        InputError: the file cannot be read, or a force row or LOOP+ line is malformed.
    """
    path = Path(path)
    info = OutcarInfo()
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", errors="replace") as fh:
            # Force block state: None outside, -1 after the TOTAL-FORCE header, then
            # the number of rows read since the opening dashes.
            force_rows: int | None = None
            fmax = 0.0
            valenz = False
            for lineno, line in enumerate(fh, start=1):
                if force_rows is not None:
                    if line.lstrip().startswith("---"):
                        if force_rows < 0:
                            force_rows = 0
                        else:
                            info.max_force.append(math.sqrt(fmax))
                            force_rows = None
                        continue
                    if force_rows < 0:
                        continue
                    parts = line.split()
                    try:
                        fx, fy, fz = (float(v) for v in parts[3:6])
                    except ValueError:
                        raise InputError(f"{path}:{lineno}", repr(line.strip()[:80]),
                                         "a TOTAL-FORCE row 'x y z fx fy fz'") from None
                    fmax = max(fmax, fx * fx + fy * fy + fz * fz)
                    force_rows += 1
                    continue
                if "LOOP+" in line:
                    m = re.search(r"real time\s*" + _RE_NUM, line)
                    if not m:
                        raise InputError(f"{path}:{lineno}", repr(line.strip()[:80]),
                                         "'LOOP+: cpu time T: real time T'")
                    info.loop_real.append(float(m.group(1)))
                elif "TOTAL-FORCE" in line:
                    force_rows, fmax = -1, 0.0
                elif "Elapsed time (sec)" in line:
                    m = re.search(r":\s*" + _RE_NUM, line)
                    if m:
                        info.elapsed = float(m.group(1))
                elif info.nions is None and "NIONS" in line:
                    m = re.search(r"NIONS\s*=\s*(\d+)", line)
                    info.nions = int(m.group(1)) if m else None
                elif info.nelect is None and "NELECT" in line:
                    m = re.search(r"NELECT\s*=\s*" + _RE_NUM, line)
                    info.nelect = float(m.group(1)) if m else None
                elif info.encut is None and re.match(r"\s*ENCUT\s*=", line):
                    m = re.search(r"ENCUT\s*=\s*" + _RE_NUM, line)
                    info.encut = float(m.group(1)) if m else None
                elif info.volume is None and "volume of cell" in line:
                    m = re.search(r"volume of cell\s*:\s*" + _RE_NUM, line)
                    info.volume = float(m.group(1)) if m else None
                elif not info.ions_per_type and "ions per type" in line:
                    info.ions_per_type = [int(v) for v in line.split("=", 1)[1].split()]
                elif "Ionic Valenz" in line:
                    valenz = True
                elif valenz and "ZVAL" in line:
                    info.zval = [float(v) for v in line.split("=", 1)[1].split()]
                    valenz = False
                elif line.lstrip().startswith("POTCAR:") and len(info.potcar) < 64:
                    info.potcar.append(line.split(":", 1)[1].strip())
                elif info.cores is None and "running" in line:
                    m = re.search(r"running on\s+(\d+)\s+total cores", line)
                    if m:
                        info.cores = int(m.group(1))
                    m = re.search(r"running\s+(\d+)\s+mpi-ranks(?:,\s*with\s+(\d+)\s+threads/rank)?"
                                  r"(?:,\s*on\s+(\d+)\s+nodes)?", line)
                    if m:
                        info.cores = int(m.group(1)) * int(m.group(2) or 1)
                        info.nodes = int(m.group(3)) if m.group(3) else None
    except OSError as exc:
        raise InputError(str(path), f"an unreadable file ({exc})", "a readable OUTCAR") from None
    return info


def read_poscar(path: str | Path) -> tuple[int, int, float]:
    """Atoms, element types and cell volume (A^3) of a POSCAR/CONTCAR (VASP 4 or 5).

    Raises:
        InputError: the header is malformed (file:line named).
    """
    path = Path(path)
    lines = _read_text(path).splitlines()

    def floats(i: int, n: int, what: str) -> list[float]:
        try:
            vals = [_fortran_float(v) for v in lines[i].split()[:n]]
        except (ValueError, IndexError):
            vals = []
        if len(vals) != n:
            found = repr(lines[i].strip()[:60]) if i < len(lines) else "end of file"
            raise InputError(f"{path}:{i + 1}", found, what)
        return vals

    scale_line = lines[1].split() if len(lines) > 1 else []
    scale = floats(1, 3 if len(scale_line) >= 3 and _all_numbers(scale_line[:3]) else 1,
                   "a scaling factor")
    lattice = np.array([floats(i, 3, "a lattice vector 'ax ay az'") for i in (2, 3, 4)])
    if len(scale) == 3:
        lattice = lattice * np.asarray(scale)[None, :]
        volume = abs(float(np.linalg.det(lattice)))
    else:
        det = abs(float(np.linalg.det(lattice)))
        volume = -scale[0] if scale[0] < 0 else det * scale[0] ** 3
    row = 5
    if len(lines) > row and not _all_numbers(lines[row].split()):
        row += 1  # VASP 5: element symbols, then counts
    try:
        counts = [int(v) for v in lines[row].split() if not v.startswith(("!", "#"))]
    except (ValueError, IndexError):
        found = repr(lines[row].strip()[:60]) if row < len(lines) else "end of file"
        raise InputError(f"{path}:{row + 1}", found, "the atom counts per element") from None
    if not counts or min(counts) < 0:
        raise InputError(f"{path}:{row + 1}", repr(lines[row].strip()[:60]), "positive atom counts")
    return sum(counts), len(counts), volume


def _all_numbers(tokens: list[str]) -> bool:
    try:
        [_fortran_float(t) for t in tokens]
    except ValueError:
        return False
    return bool(tokens)


def read_kpoints(path: str | Path) -> str:
    """The k-point method of a KPOINTS file (a :data:`CATEGORICAL` ``KPointMethod`` value).

    Raises:
        InputError: the count or mode line is malformed.
    """
    path = Path(path)
    lines = _read_text(path).splitlines()
    try:
        count = int(lines[1].split()[0])
    except (ValueError, IndexError):
        found = repr(lines[1].strip()[:60]) if len(lines) > 1 else "end of file"
        raise InputError(f"{path}:2", found, "the number of k-points (0 for automatic)") from None
    if len(lines) < 3 or not lines[2].strip():
        raise InputError(f"{path}:3", "end of file", "a mode line (Gamma, Monkhorst-Pack, Auto, Line-mode, ...)")
    mode = lines[2].strip()[0].upper()
    if count < 0:
        raise InputError(f"{path}:2", str(count), "a non-negative number of k-points")
    if count == 0:
        return {"G": "Gamma", "M": "Monkhorst-Pack", "A": "Auto"}.get(mode, "Explicit")
    return "Line-mode" if mode == "L" else "Explicit"


def _seconds(text: str) -> float | None:
    """Slurm/PBS/LSF walltime ('90', 'MM:SS', 'HH:MM:SS', 'D-HH[:MM[:SS]]') in seconds."""
    text = text.strip()
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        if not d.isdigit():
            return None
        days = int(d)
        parts = text.split(":")
        units = [3600, 60, 1][: len(parts)]
    else:
        parts = text.split(":")
        units = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}.get(len(parts), [])
    if not units or not all(p.isdigit() for p in parts):
        return None
    return float(days * 86400 + sum(int(p) * u for p, u in zip(parts, units, strict=True)))


def read_batch_script(path: str | Path) -> dict[str, float]:
    """Walltime (``req_time``), cores and nodes from ``#SBATCH``/``#PBS``/``#BSUB`` lines.

    Unknown or unparsable directives are ignored: a batch script is a hint.
    """
    out: dict[str, float] = {}
    tasks = per_node = None
    for line in _read_text(Path(path)).splitlines():
        s = line.strip()
        if s.startswith("#SBATCH"):
            for key, value in re.findall(r"(--?[\w-]+)[=\s]+(\S+)", s[7:]):
                if key in ("--time", "-t") and (sec := _seconds(value)) is not None:
                    out["req_time"] = sec
                elif key in ("--ntasks", "-n") and value.isdigit():
                    tasks = int(value)
                elif key in ("--nodes", "-N") and value.split("-")[0].isdigit():
                    out["nodes"] = float(value.split("-")[0])
                elif key == "--ntasks-per-node" and value.isdigit():
                    per_node = int(value)
        elif s.startswith("#PBS"):
            m = re.search(r"walltime=([\d:]+)", s)
            if m and (sec := _seconds(m.group(1))) is not None:
                out["req_time"] = sec
            m = re.search(r"(?:nodes|select)=(\d+)(?::ppn=(\d+))?(?::ncpus=(\d+))?", s)
            if m:
                out["nodes"] = float(m.group(1))
                ppn = m.group(2) or m.group(3)
                if ppn:
                    tasks = int(m.group(1)) * int(ppn)
        elif s.startswith("#BSUB"):
            m = re.search(r"-W\s+([\d:]+)", s)
            if m:
                parts = m.group(1).split(":")
                if all(p.isdigit() for p in parts) and len(parts) <= 2:
                    out["req_time"] = float(int(parts[0]) * 3600 + int(parts[1]) * 60) if len(parts) == 2 \
                        else float(int(parts[0]) * 60)
            m = re.search(r"-n\s+(\d+)", s)
            if m:
                tasks = int(m.group(1))
    if tasks is None and per_node is not None and "nodes" in out:
        tasks = int(out["nodes"]) * per_node
    if tasks is not None:
        out["cores"] = float(tasks)
    return out


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

