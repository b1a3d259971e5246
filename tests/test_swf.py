"""Tests for the SWF reader and writer (cosim.workloads.swf)."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim.errors import InputError, WorkloadError
from cosim.workloads.base import Workload
from cosim.workloads.swf import CLEANING_RULES, read_swf, read_swf_header, write_swf

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


def job(jid, submit, run, alloc, req_procs=-1, req_time=-1, req_mem=-1, used_mem=-1, user=-1,
        prev=-1, think=-1):
    """One SWF line from the fields the reader uses (others -1 / status 1)."""
    f = [jid, submit, -1, run, alloc, -1, used_mem, req_procs, req_time, req_mem, 1, user, -1, -1,
         -1, -1, prev, think]
    return " ".join(str(x) for x in f)


def write(tmp_path: Path, text: str, name: str = "t.swf") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


HEADER = "; Version: 2\n; MaxProcs: 8\n; MaxNodes: 4\n; Queue: 1\n; Queue: 2 0\n;\n; just a comment\n"

# One job per rule; worked out by hand below.
JOBS = [
    job(1, 0, 100, 2, 2, 200, req_mem=1024, user=3),   # clean
    job(2, 5, -1, 2, 2, 200),                          # run unknown -> dropped
    job(3, 6, 0, 1, 1, 50),                            # run 0 -> kept (counted)
    job(4, 7, 10, -1, -1, 50),                         # no procs -> dropped
    job(5, 8, 10, 9, 9, 50),                           # 9 > 8 procs -> dropped
    job(6, 9, 30, -1, 4, 60, used_mem=2048),           # alloc unknown -> requested 4
    job(7, 10, 40, 1, 1, -1),                          # estimate missing -> 40
    job(8, 11, 0, 1, 1, 0),                            # estimate missing, run 0 -> 1 s
    job(9, 12, 500, 1, 1, 300, prev=1, think=20),      # run > request: kept, counted
]


@pytest.fixture
def trace(tmp_path):
    return write(tmp_path, HEADER + "\n".join(JOBS) + "\n")


def test_every_rule_counted_and_values_by_hand(trace):
    w = read_swf(trace)
    w.validate()
    assert list(w.cleaning) == list(CLEANING_RULES)
    assert w.cleaning == {
        "status_dropped": 0,
        "submit_unknown_dropped": 0,
        "run_unknown_dropped": 1,
        "run_zero_dropped": 0,
        "run_zero_kept": 2,
        "procs_unknown_dropped": 1,
        "procs_over_machine_dropped": 1,
        "procs_fallback": 1,
        "req_time_missing": 2,
        "run_exceeds_request": 1,
        "submit_out_of_order": 0,
    }
    assert w.job_id.tolist() == [1, 3, 6, 7, 8, 9]
    assert w.submit.tolist() == [0, 6, 9, 10, 11, 12]
    assert w.run.tolist() == [100, 0, 30, 40, 0, 500]
    assert w.procs.tolist() == [2, 1, 4, 1, 1, 1]
    assert w.req_time.tolist() == [200, 50, 60, 40, 1, 300]
    # 1024 KB/proc * 2 procs; job 6 falls back to used memory 2048 KB * 4 procs.
    assert w.mem.tolist() == [2048 / 1024**2, 0, 8192 / 1024**2, 0, 0, 0]
    assert w.user.tolist() == [3, -1, -1, -1, -1, -1]
    assert w.prev_job.tolist() == [-1, -1, -1, -1, -1, 1]
    assert w.think.tolist() == [-1, -1, -1, -1, -1, 20]
    assert (w.max_procs, w.max_nodes) == (8, 4)
    assert w.source == str(trace)


def test_status_choices_and_counts(tmp_path):
    """The Archive's cleaning choices: every job, or completed only (or any codes)."""
    lines = [job(1, 0, 10, 1), job(2, 1, 10, 1), job(3, 2, 10, 1), job(4, 3, 0, 1),
             job(5, 4, 10, 1)]
    status = ["1", "0", "5", "5", "-1"]
    text = "\n".join(" ".join(ln.split()[:10] + [st] + ln.split()[11:])
                     for ln, st in zip(lines, status, strict=True))
    p = write(tmp_path, "; MaxProcs: 4\n" + text + "\n")
    every = read_swf(p)
    assert len(every) == 5 and every.cleaning["status_dropped"] == 0
    assert every.status_counts == {1: 1, 0: 1, 5: 2, -1: 1}
    assert every.features["status"].tolist() == [1, 0, 5, 5, -1]
    done = read_swf(p, status="completed")
    assert done.job_id.tolist() == [1] and done.cleaning["status_dropped"] == 4
    assert done.status_counts == every.status_counts     # counted before filtering
    some = read_swf(p, status=[1, 5])
    assert some.job_id.tolist() == [1, 3, 4] and some.cleaning["status_dropped"] == 2
    assert read_swf(p, status=0).job_id.tolist() == [2]
    for bad in ("finished", [], [1, "x"], True):
        with pytest.raises(InputError, match=r"workload.params.status: expected all, completed"):
            read_swf(p, status=bad)
    # the status survives a write and a read
    out = write_swf(some, tmp_path / "o.swf")
    assert read_swf(out).features["status"].tolist() == [1, 5, 5]


def test_machine_source(tmp_path):
    body = job(1, 0, 10, 3) + "\n"
    assert read_swf(write(tmp_path, "; MaxProcs: 8\n" + body, "a.swf")).machine_source == \
        "header MaxProcs"
    assert read_swf(write(tmp_path, "; MaxNodes: 4\n" + body, "b.swf")).machine_source == \
        "header MaxNodes"
    w = read_swf(write(tmp_path, body, "c.swf"))
    assert (w.max_procs, w.machine_source) == (3, "largest job")
    assert read_swf(write(tmp_path, body, "d.swf"), max_procs=16).machine_source == ""


def test_drop_zero_run_and_requested_procs(trace):
    w = read_swf(trace, drop_zero_run=True, use_allocated=False)
    assert w.cleaning["run_zero_dropped"] == 2
    assert w.cleaning["run_zero_kept"] == 0
    assert w.job_id.tolist() == [1, 6, 7, 9]
    # requested procs are all > 0 here, so no fallback
    assert w.cleaning["procs_fallback"] == 0


def test_machine_size_precedence(tmp_path):
    lines = "\n".join([job(1, 0, 5, 2), job(2, 1, 5, 6), job(3, 2, 5, 12)]) + "\n"
    p = write(tmp_path, "; MaxProcs: 8\n; MaxNodes: 4\n" + lines, "a.swf")
    assert read_swf(p).max_procs == 8
    assert read_swf(p, max_procs=4).procs.tolist() == [2]
    assert read_swf(p, max_procs=4).cleaning["procs_over_machine_dropped"] == 2
    p = write(tmp_path, "; MaxNodes: 6\n" + lines, "b.swf")
    assert read_swf(p).max_procs == 6 and len(read_swf(p)) == 2
    p = write(tmp_path, lines, "c.swf")
    w = read_swf(p)
    assert w.max_procs == 12 and len(w) == 3 and w.max_nodes == 0


def test_header_fields(trace):
    h = read_swf_header(trace)
    assert (h.max_procs, h.max_nodes) == (8, 4)
    assert h.fields["Queue"] == "1\n2 0"
    assert h.fields["Version"] == "2"
    assert "just a comment" not in h.fields


def test_gzip_same_as_plain(trace, tmp_path):
    gz = tmp_path / "t.swf.gz"
    gz.write_bytes(gzip.compress(trace.read_bytes()))
    a, b = read_swf(trace), read_swf(gz)
    for name, col in a.columns().items():
        np.testing.assert_array_equal(col, getattr(b, name))
    assert a.cleaning == b.cleaning


def test_crlf_and_inline_comments(tmp_path):
    text = "; MaxProcs: 4\r\n" + job(1, 0, 5, 2) + " ; note\r\n" + job(2, 3, 5, 1) + "\r\n"
    p = tmp_path / "crlf.swf"
    p.write_bytes(text.encode())
    w = read_swf(p)
    assert w.job_id.tolist() == [1, 2] and w.max_procs == 4


def test_unsorted_submits_are_sorted_and_counted(tmp_path):
    p = write(tmp_path, "\n".join([job(1, 10, 5, 1), job(2, 3, 5, 1), job(3, 4, 5, 1)]) + "\n")
    w = read_swf(p)
    w.validate()
    assert w.job_id.tolist() == [2, 3, 1]
    assert w.cleaning["submit_out_of_order"] == 1


def test_out_of_order_submits_are_warned_about(tmp_path):
    from cosim.workloads.loading import workload_warnings
    p = write(tmp_path, "\n".join([job(1, 10, 5, 1), job(2, 3, 5, 1), job(3, 3, 5, 1)]) + "\n")
    w = read_swf(p)
    assert w.job_id.tolist() == [2, 3, 1]       # stable: 2 before 3, as in the file
    assert ("1 jobs submitted before the job above them in the file: replayed in submit "
            "order (a stable sort: equal submits keep file order)") in workload_warnings(w)


@pytest.mark.parametrize(("field", "value", "name"), [
    (5, "2.5", "alloc_procs"), (8, "0.5", "req_procs"),
    (12, "99999999999999999999999", "user"), (1, "1e19", "job_id"),
])
def test_counts_and_ids_must_be_whole_int64(tmp_path, field, value, name):
    fields = job(2, 1, 5, 1, 1).split()
    fields[field - 1] = value
    p = write(tmp_path, "; MaxProcs: 4\n" + job(1, 0, 5, 1) + "\n" + " ".join(fields) + "\n")
    with pytest.raises(WorkloadError) as e:
        read_swf(p)
    assert str(e.value) == (f"{p}:3: expected a whole number within int64 (a count or an id), "
                            f"got {float(value):g} in field {field} ({name})")


@pytest.mark.parametrize("value", ["0", "-8", "lots", "2.5"])
def test_a_stated_machine_size_must_be_a_whole_number_above_0(tmp_path, value):
    p = write(tmp_path, f"; MaxProcs: {value}\n" + job(1, 0, 5, 1) + "\n")
    for read in (read_swf, read_swf_header):
        with pytest.raises(WorkloadError) as e:
            read(p)
        assert str(e.value) == (f"{p}: header MaxProcs: expected a whole number of processors "
                                f"above 0 (or no such header line), got {value!r}")
    # MaxNodes too; and a size with a note after it is still read.
    with pytest.raises(WorkloadError, match="header MaxNodes"):
        read_swf(write(tmp_path, "; MaxNodes: none\n" + job(1, 0, 5, 1) + "\n"))
    assert read_swf(write(tmp_path, "; MaxProcs: 8 (batch)\n" + job(1, 0, 5, 1) + "\n")).max_procs == 8


def test_negative_submits_are_unknown_and_dropped_not_replayed_at_zero(tmp_path):
    # Replayed at time 0, job 2 (submitted at -50) would wait 50 s less than the
    # trace says and go ahead of job 1; SWF's times start at 0, so it is unknown.
    p = write(tmp_path, "\n".join([job(1, 0, 100, 4), job(2, -50, 100, 4), job(3, -1, 7, 1),
                                    job(4, 30, 100, 4)]) + "\n")
    w = read_swf(p)
    w.validate()
    assert w.job_id.tolist() == [1, 4] and w.submit.tolist() == [0, 30]
    assert w.cleaning["submit_unknown_dropped"] == 2
    assert w.cleaning["submit_out_of_order"] == 0
    from cosim.workloads.loading import workload_warnings
    assert workload_warnings(w)[0] == "2 of 4 jobs dropped: 2 with an unknown (negative) submit time"


def test_header_only_gives_empty_workload(tmp_path):
    w = read_swf(write(tmp_path, "; MaxProcs: 16\n"))
    w.validate()
    assert len(w) == 0 and w.max_procs == 16


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("1 0 -1 10 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1", "17 fields"),
        ("1 0 -1 10 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1 -1 5", "19 fields"),
        ("1 0 -1 ten 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1 -1", "'ten' in field 4 (run)"),
        ("1 0 -1 nan 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1 -1", "'nan' in field 4 (run)"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, found):
    p = write(tmp_path, "; MaxProcs: 4\n" + job(1, 0, 5, 1) + "\n\n" + line + "\n")
    with pytest.raises(WorkloadError) as e:
        read_swf(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:4: expected 18 numeric fields per job line, got ")
    assert found in msg


def test_missing_file_and_bad_argument(tmp_path):
    missing = tmp_path / "nope.swf"
    with pytest.raises(InputError, match=r"nope\.swf: expected an SWF trace .* got no such file"):
        read_swf(missing)
    with pytest.raises(InputError, match="max_procs: expected a positive integer"):
        read_swf(write(tmp_path, job(1, 0, 5, 1) + "\n"), max_procs=0)


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "bad.swf.gz"
    p.write_bytes(gzip.compress(b"1 2 3\n" * 100)[:30])
    with pytest.raises(WorkloadError, match="corrupt gzip"):
        read_swf(p)


def test_written_file_is_standard_swf(tmp_path):
    w = Workload.from_columns(submit=[0, 5.5], run=[10, 20], procs=[1, 4], req_time=[15, 30],
                              mem=[0, 2.0], max_procs=8)
    p = write_swf(w, tmp_path / "out.swf")
    lines = p.read_text().splitlines()
    assert "; MaxProcs: 8" in lines
    rows = [ln.split() for ln in lines if not ln.startswith(";")]
    assert all(len(r) == 18 for r in rows)
    assert rows[1][:10] == ["2", "5.5", "-1", "20", "4", "-1", "-1", "4", "30", "524288"]
    assert not list(tmp_path.glob("*.tmp"))


workloads = st.integers(0, 30).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "submit": st.lists(st.floats(0, 1e7, allow_nan=False), min_size=n, max_size=n),
            "run": st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n),
            "procs": st.lists(st.integers(1, 64), min_size=n, max_size=n),
            "req_time": st.lists(st.floats(1, 1e6, allow_nan=False), min_size=n, max_size=n),
            "mem": st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 512)), min_size=n, max_size=n),
            "user": st.lists(st.integers(-1, 500), min_size=n, max_size=n),
            "think": st.lists(st.one_of(st.just(-1.0), st.floats(0, 1e5)), min_size=n, max_size=n),
        }
    )
)


@settings(max_examples=40, deadline=None)
@given(cols=workloads, gz=st.booleans())
def test_round_trip(tmp_path_factory, cols, gz):
    w = Workload.from_columns(**cols, max_procs=64, max_nodes=8, source="gen")
    path = tmp_path_factory.mktemp("rt") / ("w.swf.gz" if gz else "w.swf")
    back = read_swf(write_swf(w, path))
    back.validate()
    for name in ("job_id", "submit", "run", "procs", "req_time", "user", "prev_job", "think"):
        np.testing.assert_array_equal(getattr(back, name), getattr(w, name), err_msg=name)
    np.testing.assert_allclose(back.mem, w.mem, rtol=1e-12)
    assert (back.max_procs, back.max_nodes) == (64, 8)
    assert back.cleaning["procs_over_machine_dropped"] == 0
    assert back.cleaning["run_exceeds_request"] == int((w.run > w.req_time).sum())


def _need(name: str) -> Path:
    p = TRACES / name
    if not p.exists():
        pytest.skip(f"shared trace {p} not present (needs ../shared/traces next to the repo)")
    return p


def test_lublin_256_trace():
    w = read_swf(_need("lublin_256.swf"))
    w.validate()
    assert len(w) == 10_000 and w.max_procs == 256
    assert w.cleaning["req_time_missing"] == 10_000  # no estimates in this trace
    assert sum(v for k, v in w.cleaning.items() if k.endswith("_dropped")) == 0
    np.testing.assert_array_equal(w.req_time, np.maximum(w.run, 1))


def test_ricc_trace_fast_and_counted():
    p = _need("RICC-2010-2.swf.gz")
    t0 = time.process_time()    # CPU time: load beside the test (xdist, a shared machine) does not count
    w = read_swf(p)
    elapsed = time.process_time() - t0
    w.validate()
    assert len(w) == 447_794
    assert (w.max_procs, w.max_nodes) == (8192, 1024)
    assert w.cleaning["run_zero_kept"] == 10
    assert w.cleaning["req_time_missing"] == 2
    assert w.cleaning["run_exceeds_request"] == 7092
    assert sum(v for k, v in w.cleaning.items() if k.endswith("_dropped")) == 0
    # first job: 80 procs, 1200000 KB per proc requested
    assert w.procs[0] == 80 and w.mem[0] == pytest.approx(1_200_000 * 80 / 1024**2)
    assert elapsed < 10, f"RICC parse took {elapsed:.1f} s"
