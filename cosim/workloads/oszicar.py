"""One OSZICAR grammar, read and written by the same code.

VASP writes its progress to ``OSZICAR``: one line per electronic (SCF) step,
one line per finished ionic step, and column headers in between::

           N       E                     dE             d eps       ncg     rms          rms(c)
    DAV:   1    -0.330514990643E+00   -0.33051E+00   -0.82213E+02 48640   0.136E+02
    RMM:   6    -0.374459065060E+01   -0.56275E-08   -0.50587E-08 22913   0.142E-03
       1 F= -.37445907E+01 E0= -.37445905E+01  d E =-.400647E-06  mag=     0.0006

Molecular dynamics writes ``N T= E= F= E0= EK= SP= SK=`` instead of the
``F= E0= d E =`` line. Electronic lines may follow the last ionic line (for
example the linear-response ``RLQ:`` steps of an NMR run, or the unfinished
step of a running or killed job); they are kept as :attr:`OszicarRun.trailing`.

Grammar (one line each, blank lines ignored):

- header: ``N  E  dE  d eps  ncg  rms  [rms(c)]`` (or ``ort``);
- electronic: ``TAG: n E dE deps ncg rms [rms(c)]`` where ``TAG`` is the
  algorithm, two to four letters padded to four characters (VASP writes
  DAV, RMM, CGA, DMP, SDA, RLQ, and ``CG :`` in older versions; any tag of
  that shape is read, so a newer VASP does not break ingestion); ``rms(c)``
  is absent in the non-self-consistent steps and in the last step of each
  ionic step. The fields are fixed-width Fortran (A4, I4, E23.12, E15.5,
  E15.5, I6, E12.3, rms(c) E13.3 or narrower), so two of them touch when a
  value fills its field: ``-0.28335E-01101248`` is d eps then ncg = 101248,
  ``0.371E+01-0.973E+00`` is rms then a negative rms(c). Such lines are read
  field by field;
- ionic: ``n F= .. E0= .. d E = .. [mag= m1 [m2 m3]]``;
- MD: ``n T= .. E= .. F= .. E0= .. EK= .. [SP= .. SK= ..] [mag= ..]``;
  a ``KEY=`` this module does not know is skipped;
- status lines VASP writes between them (``trial: gam= ...``, ``charge
  predicted from atoms``, ``bond charge predicted``): ignored.

Numbers are Fortran floats: ``-.52636024E+03`` (no digit before the point),
``0.46575820E+02``, ``1.0D-03``, ``0.1234-100`` (three-digit exponent without
the letter) and ``*****`` (field overflow, read as NaN) are all accepted.

A line that fits none of these, or whose values cannot be read, is counted
in :attr:`OszicarRun.unreadable` and skipped; a file is rejected only when
it has more unreadable lines than readable ones (see :func:`parse_oszicar`).
:func:`format_oszicar` writes the column layout VASP uses, so a generated
file parses with the same :func:`parse_oszicar` that reads real ones.
"""

from __future__ import annotations

import gzip
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim.errors import InputError

__all__ = [
    "ALGORITHMS",
    "ElectronicStep",
    "IonicStep",
    "MdStep",
    "OszicarRun",
    "fortran_e",
    "parse_oszicar",
    "format_oszicar",
]

#: Electronic-step tags VASP writes: Davidson, RMM-DIIS, conjugate gradient
#: (ALGO=All; ``CG`` in older versions), damped (ALGO=Damped), steepest
#: descent, linear response. The parser reads any two-to-four-letter tag.
ALGORITHMS: tuple[str, ...] = ("DAV", "RMM", "CGA", "CG", "DMP", "SDA", "RLQ")

HEADER = "       N       E                     dE             d eps       ncg     rms          rms(c)"


@dataclass(frozen=True)
class ElectronicStep:
    """One SCF line.

    Attributes:
        algo: three-letter tag (``"DAV"``, ``"RMM"``, ...).
        n: step number within its ionic step (from 1).
        energy: free energy E after this step (eV).
        denergy: change of E since the previous step (eV).
        deps: change of the band-structure energy (eV).
        ncg: number of Hamiltonian evaluations.
        rms: norm of the residual vector.
        rms_c: charge-density residual, ``None`` when the column is absent.
    """

    algo: str
    n: int
    energy: float
    denergy: float
    deps: float
    ncg: int
    rms: float
    rms_c: float | None = None


@dataclass(frozen=True)
class MdStep:
    """The extra values of an MD ionic line (``T= E= ... EK= SP= SK=``).

    Attributes:
        temperature: instantaneous temperature (K).
        total_energy: ``E=``, free energy plus kinetic and thermostat terms (eV).
        ek: kinetic energy of the ions (eV).
        sp: thermostat potential energy (eV), ``None`` when absent.
        sk: thermostat kinetic energy (eV), ``None`` when absent.
    """

    temperature: float
    total_energy: float
    ek: float
    sp: float | None = None
    sk: float | None = None


@dataclass(frozen=True)
class IonicStep:
    """One finished ionic step and the SCF lines that led to it.

    Attributes:
        n: ionic step number as printed (from 1).
        free_energy: ``F=``, free energy TOTEN (eV).
        e0: ``E0=``, energy extrapolated to zero smearing (eV).
        denergy: ``d E =`` (eV); ``None`` on MD lines, which have none.
        mag: ``mag=`` components (one, or three when non-collinear); empty
            when absent (ISPIN=1).
        electronic: the SCF lines of this step, in order.
        md: MD values when the line is an MD line, else ``None``.
    """

    n: int
    free_energy: float
    e0: float
    denergy: float | None
    mag: tuple[float, ...] = ()
    electronic: tuple[ElectronicStep, ...] = ()
    md: MdStep | None = None


@dataclass(frozen=True)
class OszicarRun:
    """A parsed (or generated) OSZICAR: ionic steps plus trailing SCF lines.

    Attributes:
        ionic: finished ionic steps in file order.
        trailing: electronic lines after the last ionic line.
        source: file name the run was read from ("" for text or generated runs).
        unreadable: ``(line number, text)`` of each line that could not be
            read (empty for generated runs and sound files).

    Examples:
        >>> run = parse_oszicar('''DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00
        ...    1 F= -.10000000E+01 E0= -.10000000E+01  d E =-.100000E+01
        ... ''')
        >>> run.n_ionic, run.n_electronic, run.final_F
        (1, 1, -1.0)
    """

    ionic: tuple[IonicStep, ...] = ()
    trailing: tuple[ElectronicStep, ...] = ()
    source: str = field(default="", compare=False)
    unreadable: tuple[tuple[int, str], ...] = field(default=(), compare=False)

    @property
    def n_ionic(self) -> int:
        """Number of finished ionic steps."""
        return len(self.ionic)

    @property
    def electronic_per_ionic(self) -> list[int]:
        """SCF lines of each finished ionic step."""
        return [len(s.electronic) for s in self.ionic]

    @property
    def n_electronic_completed_ionic(self) -> int:
        """SCF lines belonging to finished ionic steps."""
        return sum(self.electronic_per_ionic)

    @property
    def n_electronic(self) -> int:
        """All SCF lines, trailing ones included."""
        return self.n_electronic_completed_ionic + len(self.trailing)

    @property
    def algos(self) -> list[str]:
        """Sorted distinct SCF algorithm tags seen anywhere in the file."""
        tags = {e.algo for s in self.ionic for e in s.electronic}
        tags.update(e.algo for e in self.trailing)
        return sorted(tags)

    @property
    def final_F(self) -> float:  # noqa: N802 - the name VASP users know
        """``F=`` of the last finished ionic step (NaN when there is none)."""
        return self.ionic[-1].free_energy if self.ionic else math.nan

    @property
    def is_md(self) -> bool:
        """True when the ionic lines are MD lines."""
        return any(s.md is not None for s in self.ionic)

    def trajectory(self) -> dict[str, np.ndarray]:
        """The ionic-step table the predictors use.

        Returns:
            ``step`` (int32, from 1), ``energy`` (F), ``denergy`` (``d E``; on
            MD lines, which print none, ``F_i - F_{i-1}`` with ``F_0 = 0`` as
            VASP does for a first relaxation step), ``e0`` and ``scf_steps``
            (int32), one row per finished ionic step.
        """
        energy = np.array([s.free_energy for s in self.ionic], dtype=np.float64)
        diff = np.diff(energy, prepend=0.0)
        denergy = np.array(
            [diff[i] if s.denergy is None else s.denergy for i, s in enumerate(self.ionic)],
            dtype=np.float64,
        )
        return {
            "step": np.arange(1, self.n_ionic + 1, dtype=np.int32),
            "energy": energy,
            "denergy": denergy,
            "e0": np.array([s.e0 for s in self.ionic], dtype=np.float64),
            "scf_steps": np.array(self.electronic_per_ionic, dtype=np.int32),
        }


# ----------------------------------------------------------------------------- numbers

# A Fortran real: optional sign, digits with an optional point (".52" is valid),
# optional exponent with E/D or a bare signed exponent ("0.1234-100").
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[EeDd][+-]?\d+|[+-]\d{3})?")
_BARE_EXP_RE = re.compile(r"(\d)([+-]\d{3})$")


def _to_float(token: str) -> float:
    """Read one Fortran real; raise ValueError when it is not one."""
    if token and set(token) == {"*"}:
        return math.nan  # Fortran prints asterisks when a value overflows its field
    if not _FLOAT_RE.fullmatch(token):
        raise ValueError(token)
    token = token.replace("D", "E").replace("d", "E")
    if "E" not in token and "e" not in token:
        token = _BARE_EXP_RE.sub(r"\1E\2", token)
    return float(token)


def fortran_e(x: float, digits: int, *, lead_zero: bool = True) -> str:
    """Format ``x`` as a Fortran ``E`` field with ``digits`` significant digits.

    The mantissa is in [0.1, 1): ``fortran_e(-526.36024, 8, lead_zero=False)``
    gives ``"-.52636024E+03"`` as VASP prints F on ionic lines, and
    ``fortran_e(46.5758, 8)`` gives ``"0.46575800E+02"``.

    Args:
        x: the value (NaN and infinities are written as asterisks).
        digits: significant digits after the point.
        lead_zero: write ``-0.5`` rather than ``-.5`` for negative values.
    """
    if not math.isfinite(x):
        return "*" * (digits + 6)
    if x == 0:
        return "0." + "0" * digits + "E+00"
    # Python rounds correctly in d.dddE+xx form; shift the point one place left.
    mant, exp = f"{abs(x):.{digits - 1}E}".split("E")
    exp10 = int(exp) + 1
    body = "." + mant.replace(".", "")
    sign = "-" if x < 0 else ""
    lead = "0" if (x > 0 or lead_zero) else ""
    e = f"E{'+' if exp10 >= 0 else '-'}{abs(exp10):02d}"
    return f"{sign}{lead}{body}{e}"


# ----------------------------------------------------------------------------- parsing

# An electronic line: a tag of two to four letters (``DAV:``, ``CG :``) and the
# step number; the step number may touch the colon (``DAV:1000``).
_ELEC_RE = re.compile(r"^\s*([A-Za-z]{2,4})\s?:\s*(\d+)(.*?)\s*$")
_IONIC_RE = re.compile(r"^\s*(\d+)\s+(?=F\s*=|T\s*=)(.*?)\s*$")
_HEADER_RE = re.compile(r"^\s*N\s+E\s+dE\b")
# Known keys first (``d E`` has a space), then any other ``KEY=`` (ignored).
_KEY_RE = re.compile(r"(d\s*E|[A-Za-z][A-Za-z0-9_()]*)\s*=")
_RELAX_KEYS = {"F", "E0", "dE"}
_MD_KEYS = {"T", "E", "F", "E0", "EK"}
_KNOWN_KEYS = _RELAX_KEYS | _MD_KEYS | {"SP", "SK", "mag"}
# Status lines VASP writes between the data lines (the VASP wiki's OSZICAR page
# shows them): read and ignored, never a warning.
_NOTE_RE = re.compile(
    r"^\s*(?:trial(?:-energy)?\b|(?:bond )?charge (?:predicted|from)\b|curvature:|"
    r"search vector\b|reading files|entering main loop|WARNING\b|opt step\b|step:|"
    r"wavefunctions? (?:predicted|extrapolated)|(?:linear|quadratic) (?:response|interpolation))",
    re.IGNORECASE)
# A Fortran E field as VASP prints it (mantissa with a point, and a two-digit
# exponent after the letter or a bare three-digit one): fixed width means two
# fields may touch, so the electronic line is also read field by field.
_FE = r"[+-]?(?:\d+\.\d*|\.\d+)(?:[EeDd][+-]?\d\d|[+-]\d{3})|\*+"
_GLUED_RE = re.compile(rf"\s*({_FE})\s*({_FE})\s*({_FE})\s*(\d+|\*+)\s*({_FE})\s*({_FE})?\s*")
_EXPECTED_LINE = (
    "an OSZICAR line: a header (N E dE ...), an electronic step (DAV:/RMM:/CG :/... n E dE "
    "deps ncg rms [rms(c)]), an ionic step (n F= .. E0= .. d E = .. [mag= ..]) or an MD "
    "step (n T= .. E= .. F= .. E0= .. EK= .. [SP= .. SK= ..])"
)
_NAN = math.nan


class _Unreadable(ValueError):
    """A line of a known kind whose values cannot be read (found, expected)."""

    def __init__(self, found: str, expected: str):
        super().__init__(found)
        self.found, self.expected = found, expected


def _int_field(token: str) -> int:
    if token and set(token) == {"*"}:
        return -1   # an overflowing I6 field: unknown
    return int(token)


def _parse_electronic(body: str, algo: str, n: int, line: str) -> ElectronicStep:
    tokens = body.split()
    if len(tokens) in (5, 6):
        try:
            values = [_to_float(t) for t in tokens]
            ncg = _int_field(tokens[3])
        except ValueError:
            pass
        else:
            return ElectronicStep(algo, n, values[0], values[1], values[2], ncg, values[4],
                                  values[5] if len(values) == 6 else None)
    # Fixed-width fields that touch: ncg >= 100000 runs into d eps
    # ("-0.28335E-01101248"), a negative rms(c) into rms ("0.371E+01-0.973E+00").
    m = _GLUED_RE.fullmatch(body)
    if m:
        e, de, deps, ncg, rms, rms_c = m.groups()
        return ElectronicStep(algo, n, _to_float(e), _to_float(de), _to_float(deps),
                              _int_field(ncg), _to_float(rms),
                              None if rms_c is None else _to_float(rms_c))
    raise _Unreadable(f"{len(tokens)} fields after '{algo}: {n}' in {line.strip()!r}",
                      "5 or 6 values after the step number (E dE deps ncg rms [rms(c)]): "
                      "Fortran reals and an integer ncg")


def _parse_ionic(n: int, body: str, line: str, electronic: tuple[ElectronicStep, ...]
                 ) -> tuple[IonicStep, _Unreadable | None]:
    """The ionic step of a line, and what could not be read in it (None: all of it).

    A line with the step number and ``F=``/``T=`` is an ionic step even when a
    value is unreadable or missing: the step is kept (so SCF lines stay with
    their step) and the unknown values are NaN.
    """
    matches = list(_KEY_RE.finditer(body))
    values: dict[str, list[float]] = {}
    problem: _Unreadable | None = None
    for i, m in enumerate(matches):
        key = re.sub(r"\s+", "", m.group(1))
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        text = body[m.end():end]
        if key not in _KNOWN_KEYS:
            continue   # a key a newer VASP added: not needed here
        try:
            vals = [_to_float(t) for t in text.split()]
        except ValueError as exc:
            problem = problem or _Unreadable(f"{key}= {exc.args[0]!r} in {line.strip()!r}",
                                             f"a Fortran real after {key}=")
            vals = [_NAN]
        if not vals or (key != "mag" and len(vals) != 1) or len(vals) > 3 or key in values:
            problem = problem or _Unreadable(f"{key}= {text.strip()!r} in {line.strip()!r}",
                                             f"one Fortran real after {key}=")
            vals = vals[:1] or [_NAN]
        values.setdefault(key, vals)
    keys = set(values) - {"mag"}
    one = {k: v[0] for k, v in values.items() if k != "mag"}
    mag = tuple(values.get("mag", ()))
    md = "T" in keys
    missing = sorted((_MD_KEYS if md else _RELAX_KEYS) - keys)
    if missing and problem is None:
        problem = _Unreadable(f"{line.strip()!r} (missing {', '.join(missing)})", _EXPECTED_LINE)
    if md:
        step = IonicStep(n, one.get("F", _NAN), one.get("E0", _NAN), None, mag, electronic,
                         MdStep(one["T"], one.get("E", _NAN), one.get("EK", _NAN),
                                one.get("SP"), one.get("SK")))
    else:
        step = IonicStep(n, one.get("F", _NAN), one.get("E0", _NAN), one.get("dE", _NAN),
                         mag, electronic)
    return step, problem


def parse_oszicar(text_or_path: str | Path, *, source: str | None = None,
                  strict: bool = False) -> OszicarRun:
    """Read an OSZICAR.

    Every line is a header, an electronic step, an ionic (or MD) step, one of
    the status lines VASP writes between them (``trial: gam= ...``,
    ``charge predicted from atoms``; ignored), or blank. A line that is none
    of these, or whose values cannot be read, is *unreadable*: by default it
    is listed in :attr:`OszicarRun.unreadable` and reading goes on (an
    electronic or ionic line keeps its place with NaN values, so SCF counts
    per ionic step stay right). The file is rejected only when its structure
    is not sound: more unreadable lines than readable ones.

    Args:
        text_or_path: a :class:`~pathlib.Path`, or a ``str`` that is either the
            file content (it contains a newline, or is empty) or a path.
            Paths ending in ``.gz`` are decompressed.
        source: name used in messages (default: the path, or ``"<text>"``).
        strict: raise at the first unreadable line instead.

    Returns:
        The run: finished ionic steps with their SCF lines, trailing SCF
        lines, and the unreadable lines.

    Raises:
        InputError: a file that cannot be read; with ``strict``, the first
            unreadable line; otherwise a file with more unreadable lines than
            readable ones. The message names ``file:line``.
    """
    if isinstance(text_or_path, Path) or (text_or_path and "\n" not in text_or_path):
        path = Path(text_or_path)
        name = source or str(path)
        try:
            raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
            text = raw.decode("utf-8", errors="replace")
        except (OSError, EOFError) as exc:
            raise InputError(name, f"an unreadable file ({exc.__class__.__name__}: {exc})",
                             "a readable OSZICAR file") from None
    else:
        text, name = text_or_path, source or "<text>"

    ionic: list[IonicStep] = []
    pending: list[ElectronicStep] = []
    unreadable: list[tuple[int, str]] = []
    first_error: InputError | None = None
    readable = 0

    def bad(lineno: int, line: str, found: str, expected: str) -> None:
        nonlocal first_error
        error = InputError(f"{name}:{lineno}", found, expected)
        if strict:
            raise error
        first_error = first_error or error
        unreadable.append((lineno, line.strip()[:200]))

    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or _HEADER_RE.match(line) or _NOTE_RE.match(line):
            continue
        m = _ELEC_RE.match(line)
        if m:
            algo, n = m.group(1).upper(), int(m.group(2))
            try:
                pending.append(_parse_electronic(m.group(3), algo, n, line))
                readable += 1
            except _Unreadable as exc:
                pending.append(ElectronicStep(algo, n, _NAN, _NAN, _NAN, -1, _NAN, None))
                bad(lineno, line, exc.found, exc.expected)
            continue
        m = _IONIC_RE.match(line)
        if m:
            step, problem = _parse_ionic(int(m.group(1)), m.group(2), line, tuple(pending))
            ionic.append(step)
            pending = []
            if problem is None:
                readable += 1
            else:
                bad(lineno, line, problem.found, problem.expected)
            continue
        bad(lineno, line, repr(line.strip()[:80]), _EXPECTED_LINE)
    if first_error is not None and len(unreadable) > readable:
        raise InputError(first_error.where, f"{first_error.found} ({len(unreadable)} of "
                         f"{len(unreadable) + readable} data lines unreadable)",
                         first_error.expected)
    return OszicarRun(tuple(ionic), tuple(pending), source=name, unreadable=tuple(unreadable))


# ----------------------------------------------------------------------------- writing


def _format_electronic(e: ElectronicStep) -> str:
    # Column widths follow VASP: A4, I4, E23.12, E15.5, E15.5, I6, E12.3, E13.3;
    # like VASP's, an ncg of 100000 or more touches d eps (the parser splits them).
    line = (f"{e.algo:<3}:{e.n:4d}{fortran_e(e.energy, 12):>23}{fortran_e(e.denergy, 5):>15}"
            f"{fortran_e(e.deps, 5):>15}{e.ncg:6d}{fortran_e(e.rms, 3):>12}")
    if e.rms_c is not None:
        line += f"{fortran_e(e.rms_c, 3):>13}"
    return line


def _format_mag(mag: tuple[float, ...]) -> str:
    return ("  mag=" + "".join(f"{m:11.4f}" for m in mag)) if mag else ""


def _format_ionic(s: IonicStep) -> str:
    if s.md is not None:
        md = s.md
        line = (f"{s.n:6d} T={md.temperature:5.0f}. E= {fortran_e(md.total_energy, 8, lead_zero=False)}"
                f" F= {fortran_e(s.free_energy, 8, lead_zero=False)}"
                f" E0= {fortran_e(s.e0, 8, lead_zero=False)}  EK= {fortran_e(md.ek, 5)}")
        if md.sp is not None:
            line += f" SP= {fortran_e(md.sp, 2)}"
        if md.sk is not None:
            line += f" SK= {fortran_e(md.sk, 2)}"
        return line + _format_mag(s.mag)
    de = s.denergy if s.denergy is not None else math.nan
    return (f"{s.n:4d} F= {fortran_e(s.free_energy, 8, lead_zero=False):>14}"
            f" E0= {fortran_e(s.e0, 8, lead_zero=False):>14}"
            f"  d E ={fortran_e(de, 6, lead_zero=False)}{_format_mag(s.mag)}")


def format_oszicar(run: OszicarRun) -> str:
    """Write ``run`` in the OSZICAR grammar that :func:`parse_oszicar` reads.

    A header line precedes the SCF lines of every ionic step (and the trailing
    ones), as VASP does. Values are rounded to the printed precision: E of SCF
    lines to 12 significant digits, F and E0 to 8, ``d E`` to 6, dE and deps to
    5, rms to 3, mag to 4 decimals, T to 1 K.

    Args:
        run: the run to write.

    Returns:
        The file content, ending with a newline (empty for an empty run).
    """
    lines: list[str] = []
    for s in run.ionic:
        if s.electronic:
            lines.append(HEADER)
            lines.extend(_format_electronic(e) for e in s.electronic)
        lines.append(_format_ionic(s))
    if run.trailing:
        lines.append(HEADER)
        lines.extend(_format_electronic(e) for e in run.trailing)
    return "\n".join(lines) + "\n" if lines else ""
