"""OSZICAR grammar: golden counts on real files, writer/parser round trip, errors."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import InputError
from cosim.workloads.oszicar import (
    ElectronicStep,
    IonicStep,
    MdStep,
    OszicarRun,
    format_oszicar,
    fortran_e,
    parse_oszicar,
)

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
VASP_DIR = SHARED / "vasp"


def _index() -> list[dict]:
    if not (VASP_DIR / "index.json").is_file():
        return []
    return json.loads((VASP_DIR / "index.json").read_text())


@pytest.fixture(scope="module")
def index() -> list[dict]:
    entries = _index()
    if not entries:
        pytest.skip(f"shared VASP samples not found at {VASP_DIR}")
    return entries


# ----------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("i", range(9))
def test_real_files_reproduce_golden_counts(index, i):
    entry = index[i]
    run = parse_oszicar(VASP_DIR / entry["file"])
    assert run.n_ionic == entry["n_ionic"]
    assert run.n_electronic == entry["n_electronic"]
    assert run.n_electronic_completed_ionic == entry["n_electronic_completed_ionic"]
    assert len(run.trailing) == entry["trailing_electronic_after_last_F"]
    assert run.electronic_per_ionic == entry["electronic_per_ionic"]
    assert run.algos == entry["algos"]
    assert run.final_F == entry["final_F"]
    assert ("multi_ionic" if run.n_ionic > 1 else "single_ionic") == entry["kind"]


def test_index_covers_every_file(index):
    files = {p.name for p in VASP_DIR.glob("*.OSZICAR")}
    assert files == {e["file"] for e in index}
    assert len(index) == 9


def test_real_files_rewrite_identically(index):
    """format(parse(x)) is a fixed point, and SCF/ionic lines equal VASP's bytes."""
    for entry in index:
        path = VASP_DIR / entry["file"]
        run = parse_oszicar(path)
        text = format_oszicar(run)
        again = parse_oszicar(text)
        assert again == run
        assert format_oszicar(again) == text
        original = {ln for ln in path.read_text().splitlines() if ln.strip() and "rms" not in ln}
        written = {ln for ln in text.splitlines() if "rms" not in ln}
        assert written == original, entry["file"]


def test_known_values_of_custodian_relaxation(index):
    run = parse_oszicar(VASP_DIR / "materialsproject__custodian__tests__files__OSZICAR.OSZICAR")
    first = run.ionic[0]
    assert (first.n, first.free_energy, first.e0, first.denergy, first.mag) == (
        1, -526.36024, -526.36024, -526.360, (0.0,))
    e1 = first.electronic[0]
    assert e1 == ElectronicStep("DAV", 1, 4507.24605593, 4507.2, -17777.0, 16576, 160.0, None)
    assert first.electronic[4].rms_c == 0.851e1
    assert first.electronic[5].algo == "RMM"
    assert first.electronic[-1].rms_c is None  # the last SCF step has no rms(c)
    traj = run.trajectory()
    assert traj["step"].tolist() == list(range(1, 61))
    assert traj["denergy"][1] == 0.0710936


def test_positive_energies_and_trailing_lines(index):
    potim = parse_oszicar(VASP_DIR / "materialsproject__custodian__tests__files__potim__OSZICAR.OSZICAR")
    assert potim.final_F == 83.579657 and potim.ionic[-1].denergy == 367.992
    assert len(potim.trailing) == 7 and potim.trailing[0].n == 1
    nmr = parse_oszicar(VASP_DIR / "hackingmaterials__atomate__atomate__vasp__test_files__nmr_wf__cs__"
                        "outputs__OSZICAR.OSZICAR")
    assert {e.algo for e in nmr.trailing} == {"DAV", "RMM", "RLQ"}


def test_gzip_and_path_as_str(tmp_path, index):
    src = VASP_DIR / "hackingmaterials__atomate__atomate__vasp__test_files__Al__OSZICAR.OSZICAR"
    gz = tmp_path / "OSZICAR.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert parse_oszicar(str(gz)) == parse_oszicar(src)


# ----------------------------------------------------------------------------- numbers


def test_fortran_e_by_hand():
    assert fortran_e(-526.36024, 8, lead_zero=False) == "-.52636024E+03"
    assert fortran_e(46.57582, 8, lead_zero=False) == "0.46575820E+02"
    assert fortran_e(-0.33051, 5) == "-0.33051E+00"
    assert fortran_e(0.0, 6) == "0.000000E+00"
    assert fortran_e(0.99999, 3) == "0.100E+01"  # rounding carries into the exponent
    assert fortran_e(1.5e-120, 3) == "0.150E-119"
    assert fortran_e(math.nan, 3) == "*********"


def test_fortran_variants_parse():
    text = ("DAV:   1    -0.1D+01   -0.1E+01   -.1E+01   10   0.1234-100\n"
            "   1 F= -.10000000E+01 E0= ***********  d E =0.100000E+01\n")
    run = parse_oszicar(text)
    assert run.ionic[0].electronic[0].rms == pytest.approx(0.1234e-100)
    assert run.ionic[0].electronic[0].energy == -1.0
    assert math.isnan(run.ionic[0].e0)


def test_md_lines():
    text = ("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
            "     1 T=  301. E= -.18753474E+03 F= -.18795305E+03 E0= -.18795205E+03  EK= 0.41831E+00 "
            "SP= 0.00E+00 SK= 0.00E+00\n"
            "     2 T=  299. E= -.18753000E+03 F= -.18790000E+03 E0= -.18790000E+03  EK= 0.37000E+00 "
            "SP= 0.00E+00 SK= 0.00E+00  mag=     1.0000\n")
    run = parse_oszicar(text)
    assert run.is_md and run.n_ionic == 2
    s = run.ionic[0]
    assert s.md == MdStep(301.0, -187.53474, 0.41831, 0.0, 0.0) and s.denergy is None
    assert run.ionic[1].mag == (1.0,)
    traj = run.trajectory()
    assert traj["denergy"].tolist() == pytest.approx([-187.95305, -187.9 + 187.95305])
    assert traj["scf_steps"].tolist() == [1, 0]
    assert parse_oszicar(format_oszicar(run)) == run


def test_noncollinear_mag():
    run = parse_oszicar("   1 F= -.1E+01 E0= -.1E+01  d E =-.1E+01  mag=  0.1000  0.2000  1.5000\n")
    assert run.ionic[0].mag == (0.1, 0.2, 1.5)
    assert format_oszicar(run).rstrip().endswith("mag=     0.1000     0.2000     1.5000")


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("line, found", [
    ("hello world", "'hello world'"),
    ("DAV:   1    -0.1E+01   -0.1E+01", "2 numbers after 'DAV: 1'"),
    ("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   1x   0.1E+00", "DAV:   1"),
    ("   1 F= -.1E+01 E0= -.1E+01", "missing dE"),
    ("   1 F= abc E0= -.1E+01  d E =-.1E+01", "F= 'abc'"),
    ("   1 T= 300. F= -.1E+01 E0= -.1E+01", "missing E, EK"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, found):
    path = tmp_path / "OSZICAR"
    path.write_text("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n\n" + line + "\n")
    with pytest.raises(InputError) as err:
        parse_oszicar(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: expected ")
    assert found in message


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="OSZICAR: expected a readable OSZICAR file"):
        parse_oszicar(tmp_path / "OSZICAR")


def test_source_name_in_text_errors():
    with pytest.raises(InputError, match=r"^run7/OSZICAR:2: expected"):
        parse_oszicar("   1 F= -.1E+01 E0= -.1E+01  d E =-.1E+01\ngarbage\n", source="run7/OSZICAR")


# ----------------------------------------------------------------------------- round trip

_reals = st.floats(min_value=-1e5, max_value=1e5, allow_nan=False).filter(lambda x: abs(x) > 1e-30 or x == 0)
_pos = st.floats(min_value=1e-9, max_value=1e4, allow_nan=False)


@st.composite
def _electronic(draw, n):
    return ElectronicStep(draw(st.sampled_from(["DAV", "RMM", "CGA", "DMP", "SDA", "RLQ"])), n,
                          draw(_reals), draw(_reals), -draw(_pos), draw(st.integers(0, 10**7)),
                          draw(_pos), draw(st.none() | _pos))


@st.composite
def _runs(draw):
    md = draw(st.booleans())
    spin = draw(st.sampled_from([0, 1, 3]))
    ionic = []
    for i in range(draw(st.integers(0, 4))):
        elec = tuple(draw(_electronic(k + 1)) for k in range(draw(st.integers(0, 4))))
        mag = tuple(draw(st.floats(-50, 50)) for _ in range(spin))
        if md:
            m = MdStep(draw(st.floats(1, 5000)), draw(_reals), draw(_pos), draw(st.none() | _pos),
                       draw(st.none() | _pos))
            ionic.append(IonicStep(i + 1, draw(_reals), draw(_reals), None, mag, elec, m))
        else:
            ionic.append(IonicStep(i + 1, draw(_reals), draw(_reals), draw(_reals), mag, elec))
    trailing = tuple(draw(_electronic(k + 1)) for k in range(draw(st.integers(0, 3))))
    return OszicarRun(tuple(ionic), trailing)


def _close(a: float | None, b: float | None, digits: int) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=0.6 * 10.0 ** (1 - digits), abs_tol=1e-300)


@settings(max_examples=150, deadline=None)
@given(_runs())
def test_round_trip_within_printed_precision(run):
    text = format_oszicar(run)
    back = parse_oszicar(text)
    assert format_oszicar(back) == text  # idempotent once rounded
    assert back.n_ionic == run.n_ionic and back.electronic_per_ionic == run.electronic_per_ionic
    assert len(back.trailing) == len(run.trailing)
    for a, b in zip(run.ionic, back.ionic, strict=True):
        assert a.n == b.n and _close(a.free_energy, b.free_energy, 8) and _close(a.e0, b.e0, 8)
        assert _close(a.denergy, b.denergy, 6)
        assert len(a.mag) == len(b.mag) and all(abs(x - y) <= 5.1e-5 for x, y in zip(a.mag, b.mag, strict=True))
        if a.md is not None:
            assert abs(a.md.temperature - b.md.temperature) <= 0.5 + 1e-9
            assert _close(a.md.ek, b.md.ek, 5) and _close(a.md.sp, b.md.sp, 2)
    pairs = [(x, y) for a, b in zip(run.ionic, back.ionic, strict=True)
             for x, y in zip(a.electronic, b.electronic, strict=True)]
    for x, y in pairs + list(zip(run.trailing, back.trailing, strict=True)):
        assert (x.algo, x.n, x.ncg) == (y.algo, y.n, y.ncg)
        assert _close(x.energy, y.energy, 12) and _close(x.denergy, y.denergy, 5)
        assert _close(x.deps, y.deps, 5) and _close(x.rms, y.rms, 3) and _close(x.rms_c, y.rms_c, 3)
