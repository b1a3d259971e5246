"""Readers of the files of one VASP run: INCAR, OUTCAR, POSCAR, KPOINTS, batch scripts.

Each reader takes one file (``.gz`` accepted where VASP users compress) and
returns what :mod:`predictors.ingest` puts in a data set row; what is read
from each file, and the defaults of absent tags, are listed in
:mod:`predictors.ingest`, which re-exports every public name. :func:`find_runs`
finds the run directories under the folders it is given.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim.errors import InputError

__all__ = ["OutcarInfo", "find_runs", "read_incar", "read_outcar", "read_poscar", "read_kpoints",
           "read_batch_script"]


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
    except (OSError, EOFError, zlib.error) as exc:   # EOFError, zlib.error: a cut .gz
        raise InputError(str(path), f"an unreadable file ({exc})", "a readable OUTCAR") from None
    except ValueError as exc:   # a number field that is not one (ZVAL = abc)
        raise InputError(str(path), f"a value that is not a number ({exc})",
                         "an OUTCAR written by VASP") from None
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
