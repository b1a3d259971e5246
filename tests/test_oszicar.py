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


# ----------------------------------------------------------------------------- every form VASP writes


def test_glued_fixed_width_fields():
    # ncg >= 100000 fills its I6 field and touches d eps; a negative rms(c)
    # touches rms. Both are read field by field.
    text = ("DAV:   1    -0.123456789012E+03   -0.12345E+03   -0.28335E-01101248   0.371E+01"
            "-0.973E+00\n"
            "RMM:   2    -0.123456789012E+03   -0.12345E+03   -0.28335E-01999999   0.371E+01\n"
            "   1 F= -.12345679E+03 E0= -.12345679E+03  d E =-.123457E+03\n")
    run = parse_oszicar(text, strict=True)
    a, b = run.ionic[0].electronic
    assert a == ElectronicStep("DAV", 1, -123.456789012, -123.45, -0.028335, 101248, 3.71, -0.973)
    assert (b.deps, b.ncg, b.rms, b.rms_c) == (-0.028335, 999999, 3.71, None)
    assert run.unreadable == ()


def test_writer_glues_like_vasp_and_reads_back():
    step = ElectronicStep("DAV", 3, -1.5, -0.25, -0.028335, 123456, 3.71, 0.5)
    text = format_oszicar(OszicarRun((), (step,)))
    assert "-0.28335E-01123456" in text   # the I6 field touches d eps, as in VASP
    assert parse_oszicar(text, strict=True).trailing == (step,)


@pytest.mark.parametrize("tag", ["DAV", "RMM", "CGA", "DMP", "SDA", "RLQ", "EDD", "CG"])
def test_every_algorithm_tag(tag):
    line = f"{tag:<3}:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
    run = parse_oszicar(line + "   1 F= -.1E+01 E0= -.1E+01  d E =-.1E+01\n", strict=True)
    assert run.algos == [tag] and run.electronic_per_ionic == [1]


def test_old_style_file_with_status_lines():
    # The layout of older VASP versions (and the VASP wiki's example): 'CG :'
    # tags, floats without a leading digit, 'd E = ' with a space, and status
    # lines between the steps, which are ignored without a warning.
    text = """\
 reading files
 WARNING: wrap around errors must be expected
 entering main loop
      N     E                dE          d eps    ncg  rms     rms(c)
CG :  1   -.12000000E+04   -.120E+04   -.810E+02  51  .25E+02
CG :  2   -.12100000E+04   -.100E+02   -.700E+01  77  .44E+01  .12E+00
   1 F= -.12100000E+04 E0= -.12090000E+04  d E = -.12100E+04
 trial: gam=  .00000 g(F)=   .120E+01 g(S)=   .000E+00 ort =  .000E+00
 charge predicted from atoms
 bond charge predicted
      N     E                dE          d eps    ncg  rms     rms(c)
CG :  1   -.12110000E+04   -.121E+04   -.910E+01  50  .91E+01
   2 F= -.12110000E+04 E0= -.12100000E+04  d E = -.10000E+01
"""
    run = parse_oszicar(text, strict=True)
    assert run.electronic_per_ionic == [2, 1] and run.algos == ["CG"]
    assert run.ionic[0].electronic[1].rms_c == 0.12
    assert run.ionic[1].denergy == -1.0 and run.final_F == -1211.0 and run.unreadable == ()


def test_md_lines_without_thermostat_and_with_unknown_keys():
    text = ("DMP:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
            "     1 T= 1873.0 E= -.13382154E+04 F= -.13401522E+04 E0= -.13397340E+04 "
            "EK= .19368E+01\n"
            "     2 T=  301. E= -.18753474E+03 F= -.18795305E+03 E0= -.18795205E+03  "
            "EK= 0.41831E+00 SP= 0.00E+00 SK= 0.00E+00 ES= 0.1E+00\n")
    run = parse_oszicar(text, strict=True)
    assert run.is_md and run.n_ionic == 2
    assert run.ionic[0].md == MdStep(1873.0, -1338.2154, 1.9368, None, None)
    assert run.ionic[1].md.sk == 0.0 and run.ionic[1].free_energy == -187.95305


def test_overflowed_fields_are_unknown_not_errors():
    run = parse_oszicar("DAV:1000    -0.1E+01   -0.1E+01   -0.1E+01 ******   0.1E+00\n"
                        "   1 F= -.1E+01 E0= ***********  d E =-.1E+01\n", strict=True)
    e = run.ionic[0].electronic[0]
    assert (e.n, e.ncg) == (1000, -1) and math.isnan(run.ionic[0].e0)


# ----------------------------------------------------------------------------- unreadable lines


_GOOD = ("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
         "DAV:   2    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
         "   1 F= -.1E+01 E0= -.1E+01  d E =-.1E+01\n")


def test_unreadable_lines_are_counted_not_fatal():
    text = (_GOOD + "something VASP never wrote\n"
            "DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   1x   0.1E+00\n"
            "DAV:   2    -0.2E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n"
            "   2 F= abc E0= -.2E+01  d E =-.1E+01\n")
    run = parse_oszicar(text, source="r/OSZICAR")
    assert [n for n, _ in run.unreadable] == [4, 5, 7]
    assert run.unreadable[0][1] == "something VASP never wrote"
    # The unreadable SCF line keeps its place (NaN values), so counts stay right;
    # the ionic line with an unreadable F= is still a step.
    assert run.electronic_per_ionic == [2, 2]
    assert math.isnan(run.ionic[1].electronic[0].energy) and run.ionic[1].electronic[0].ncg == -1
    assert math.isnan(run.ionic[1].free_energy) and run.ionic[1].e0 == -2.0


def test_a_file_that_is_mostly_unreadable_is_rejected():
    with pytest.raises(InputError, match=r"^x/OSZICAR:2: expected an OSZICAR line.*"
                                         r"\(3 of 5 data lines unreadable\)"):
        parse_oszicar(_GOOD[:-1].split("\n", 1)[0] + "\nno\nno\nno\n" + _GOOD.splitlines()[2]
                      + "\n", source="x/OSZICAR")


@pytest.mark.parametrize("line, found", [
    ("hello world", "'hello world'"),
    ("DAV:   1    -0.1E+01   -0.1E+01", "2 fields after 'DAV: 1'"),
    ("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   1x   0.1E+00", "DAV:   1"),
    ("   1 F= -.1E+01 E0= -.1E+01", "missing dE"),
    ("   1 F= abc E0= -.1E+01  d E =-.1E+01", "F= 'abc'"),
    ("   1 T= 300. F= -.1E+01 E0= -.1E+01", "missing E, EK"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, found):
    path = tmp_path / "OSZICAR"
    path.write_text("DAV:   1    -0.1E+01   -0.1E+01   -0.1E+01   10   0.1E+00\n\n" + line + "\n")
    with pytest.raises(InputError) as err:
        parse_oszicar(path, strict=True)
    message = str(err.value)
    assert message.startswith(f"{path}:3: expected ")
    assert found in message
    run = parse_oszicar(path)   # not strict: one readable line, one unreadable
    assert [n for n, _ in run.unreadable] == [3]


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="OSZICAR: expected a readable OSZICAR file"):
        parse_oszicar(tmp_path / "OSZICAR")


def test_source_name_in_text_errors():
    with pytest.raises(InputError, match=r"^run7/OSZICAR:2: expected"):
        parse_oszicar("   1 F= -.1E+01 E0= -.1E+01  d E =-.1E+01\ngarbage\n", source="run7/OSZICAR",
                      strict=True)


# ----------------------------------------------------------------------------- glued fields (property)

def _fortran_field(x: float, digits: int, width: int) -> str:
    """``x`` as VASP's Ew.d field: right-aligned in ``width``, asterisks when too wide."""
    text = fortran_e(x, digits)
    return text.rjust(width) if len(text) <= width else "*" * width


_mantissa = st.floats(min_value=0.1, max_value=0.999999, allow_nan=False)


@st.composite
def _scf_field_values(draw):
    def real():
        return draw(st.sampled_from([-1.0, 1.0])) * draw(_mantissa) * 10.0 ** draw(st.integers(-12, 12))
    rms_c = draw(st.none() | st.just(0.0).map(lambda _: real()))
    return (draw(st.integers(1, 9999)), real(), real(), real(), draw(st.integers(0, 999999)),
            abs(real()), rms_c, draw(st.sampled_from([10, 11, 12, 13])))


@settings(max_examples=300, deadline=None)
@given(_scf_field_values())
def test_glued_fixed_width_fields_read_back(values):
    """Lines built field by field in VASP's widths (rms(c) as narrow as E10.3, so a
    negative one touches rms; ncg up to six digits, touching d eps) read back."""
    n, e, de, deps, ncg, rms, rms_c, width_c = values
    line = (f"DAV:{n:4d}{_fortran_field(e, 12, 23)}{_fortran_field(de, 5, 15)}"
            f"{_fortran_field(deps, 5, 15)}{ncg:6d}{_fortran_field(rms, 3, 12)}")
    if rms_c is not None:
        line += _fortran_field(rms_c, 3, width_c)
    run = parse_oszicar(line + "\n", strict=True)
    (got,) = run.trailing
    assert (got.algo, got.n, got.ncg) == ("DAV", n, ncg)
    assert _close(got.energy, e, 12) and _close(got.denergy, de, 5) and _close(got.deps, deps, 5)
    assert _close(got.rms, rms, 3)
    if rms_c is None:
        assert got.rms_c is None
    else:
        assert _close(got.rms_c, rms_c, 3)


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
