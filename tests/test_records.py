"""Tests of cosim.records: schemas, atomic deterministic writes, checked reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cosim import records
from cosim.errors import InputError
from cosim.metrics import summarize
from cosim.records import (
    DECISIONS_SCHEMA,
    EVENTS_SCHEMA,
    JOBS_SCHEMA,
    read_decisions,
    read_events,
    read_jobs,
    read_json,
    write_json_atomic,
    write_run,
    write_table,
)

NAN = float("nan")
REPO = Path(__file__).resolve().parents[1]


def jobs_table(n: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 1000, n))
    wait = rng.uniform(0, 100, n)
    run = rng.uniform(1, 500, n)
    outcome = np.array(["completed", "timeout", "unfinished", "rejected"] * (n // 4 + 1))[:n]
    started = np.isin(outcome, ["completed", "timeout"])
    return {
        "job_id": np.arange(1, n + 1), "user": rng.integers(-1, 5, n),
        "submit": submit, "start": np.where(started, submit + wait, NAN),
        "end": np.where(started, submit + wait + run, NAN),
        "run": np.where(started, run, NAN), "req_time": run * 2, "estimate": run * 1.5,
        "procs": rng.integers(1, 64, n), "mem": np.zeros(n), "outcome": outcome.tolist(),
        "mode": np.where(started, "backfilled", "").tolist(),
        "reason": np.where(started, "ends before shadow time", "").tolist(),
        "attempts": started.astype(np.int32), "killed_seconds": np.zeros(n),
        "killed_core_seconds": np.zeros(n), "reservation": np.full(n, NAN),
    }


def events_table() -> dict:
    return {"time": [0.0, 0.0, 5.0], "kind": ["submit", "pass", "end"], "job_id": [1, -1, 1],
            "node": [-1, -1, 0], "queue_len": [1, 1, 0], "running": [0, 0, 0],
            "used_cores": [0, 0, 0], "up_cores": [8, 8, 8], "queued_area": [10.0, 10.0, 0.0],
            "idle_fit_cores": [0, 8, 0]}


def decisions_table() -> dict:
    return {"time": [0.0, 1.0], "job_id": [1, 2], "action": ["start", "reserve"],
            "mode": ["ready", ""], "reason": ["fits at head", "head job"],
            "reserved_time": [NAN, 50.0]}


META = {"cores": 8, "policy": "easy", "tau": 10.0, "seed": 3}


def test_schema_ids_and_types():
    assert JOBS_SCHEMA.metadata[b"cosim.schema"] == b"jobs/1"
    assert EVENTS_SCHEMA.metadata[b"cosim.schema"] == b"events/1"
    assert DECISIONS_SCHEMA.metadata[b"cosim.schema"] == b"decisions/1"
    assert JOBS_SCHEMA.field("attempts").type == pa.int32()
    assert JOBS_SCHEMA.field("outcome").type == pa.string()
    assert EVENTS_SCHEMA.names[:3] == ["time", "kind", "job_id"]
    assert JOBS_SCHEMA.field("submit").metadata[b"unit"] == b"s"


def test_roundtrip_jobs(tmp_path):
    cols = jobs_table(8)
    write_table(tmp_path / "jobs.parquet", cols, JOBS_SCHEMA, META)
    t = read_jobs(tmp_path / "jobs.parquet")
    assert t.schema_id == "jobs/1" and t.meta == META and t.num_rows == 8
    assert list(t) == JOBS_SCHEMA.names
    for name, want in cols.items():
        got = t[name]
        if isinstance(want, list):
            assert got.dtype == object and got.tolist() == want
        else:
            np.testing.assert_array_equal(got, want)  # NaN == NaN here
    assert t["attempts"].dtype == np.int32 and t["procs"].dtype == np.int64
    # the read table goes straight into the metrics
    assert summarize(t, None, cores=64)["jobs_total"] == 8


def test_roundtrip_events_and_decisions(tmp_path):
    write_table(tmp_path / "e.parquet", events_table(), EVENTS_SCHEMA, META)
    write_table(tmp_path / "d.parquet", decisions_table(), DECISIONS_SCHEMA, {})
    e, d = read_events(tmp_path / "e.parquet"), read_decisions(tmp_path / "d.parquet")
    assert e["kind"].tolist() == ["submit", "pass", "end"]
    assert e["idle_fit_cores"].tolist() == [0, 8, 0]
    assert d.meta == {} and d["reserved_time"][1] == 50.0 and np.isnan(d["reserved_time"][0])


def test_bytes_are_deterministic(tmp_path):
    cols = jobs_table(200, seed=7)
    a = write_table(tmp_path / "a" / "jobs.parquet", cols, JOBS_SCHEMA, META)
    b = write_table(tmp_path / "b" / "jobs.parquet", jobs_table(200, seed=7), JOBS_SCHEMA,
                    dict(reversed(META.items())))  # key order must not matter
    assert a.read_bytes() == b.read_bytes()
    write_table(a, cols, JOBS_SCHEMA, META)  # overwrite in place
    assert a.read_bytes() == b.read_bytes()
    assert b"cosim.run" in a.read_bytes()


def test_strings_are_dictionary_encoded(tmp_path):
    path = write_table(tmp_path / "jobs.parquet", jobs_table(100), JOBS_SCHEMA, META)
    rg = pq.ParquetFile(path).metadata.row_group(0)
    enc = {rg.column(i).path_in_schema: rg.column(i).encodings for i in range(rg.num_columns)}
    for name in ("outcome", "mode", "reason"):
        assert any("DICTIONARY" in e for e in enc[name]), (name, enc[name])
    assert not any("DICTIONARY" in e for e in enc["submit"])


def test_write_leaves_no_temp_files(tmp_path):
    write_table(tmp_path / "jobs.parquet", jobs_table(), JOBS_SCHEMA, META)
    write_json_atomic(tmp_path / "summary.json", {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.parquet", "summary.json"]
    assert (tmp_path / "jobs.parquet").stat().st_mode & 0o777 == 0o644


def test_write_bytes_atomic(tmp_path):
    p = records.write_bytes_atomic(tmp_path / "sub" / "scenario.yaml", "name: x\n")
    assert p.read_text() == "name: x\n"
    records.write_bytes_atomic(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01" and len(list(p.parent.iterdir())) == 1


def test_interrupted_write_keeps_old_file(tmp_path):
    path = write_json_atomic(tmp_path / "s.json", {"v": 1})

    def fail_halfway(f):
        f.write(b'{"v": ')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        records._write_atomic(path, fail_halfway)
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_write_missing_unknown_and_ragged_columns(tmp_path):
    cols = jobs_table()
    del cols["reservation"]
    with pytest.raises(InputError, match="^jobs: expected columns job_id, .*got no column.s. reservation$"):
        write_table(tmp_path / "j.parquet", cols, JOBS_SCHEMA)
    cols = jobs_table() | {"walltime": np.zeros(4)}
    with pytest.raises(InputError, match="got unknown column.s. walltime"):
        write_table(tmp_path / "j.parquet", cols, JOBS_SCHEMA)
    cols = jobs_table()
    cols["procs"] = cols["procs"][:3]
    with pytest.raises(InputError, match=r"^jobs.procs: expected 4 rows like column job_id, got 3 rows"):
        write_table(tmp_path / "j.parquet", cols, JOBS_SCHEMA)
    assert not list(tmp_path.iterdir())


def test_write_bad_values(tmp_path):
    cols = jobs_table()
    cols["procs"] = np.array([1.0, NAN, 2.0, 3.0])
    with pytest.raises(InputError, match=r"^jobs.procs: expected a column of int64, got values not convertible"):
        write_table(tmp_path / "j.parquet", cols, JOBS_SCHEMA)
    cols = jobs_table()
    cols["outcome"] = ["completed", None, "failed", "failed"]
    with pytest.raises(InputError, match=r"^jobs.outcome\[1\]: expected a string .*got a missing value"):
        write_table(tmp_path / "j.parquet", cols, JOBS_SCHEMA)


def test_read_missing_and_not_parquet(tmp_path):
    with pytest.raises(InputError, match=r"nope.parquet: expected a jobs Parquet file \(jobs/1\), got no such file"):
        read_jobs(tmp_path / "nope.parquet")
    bad = tmp_path / "jobs.parquet"
    bad.write_text("job_id,submit\n1,0\n")
    with pytest.raises(InputError, match=r"jobs.parquet: expected a jobs Parquet file .*got a file that is not Parquet"):
        read_jobs(bad)


def test_read_without_schema_id(tmp_path):
    path = tmp_path / "jobs.parquet"
    pq.write_table(pa.table({"job_id": [1]}), path)
    with pytest.raises(InputError, match=r"expected a jobs table with schema id 'jobs/1', got no cosim.schema entry"):
        read_jobs(path)


def test_read_wrong_kind_and_version(tmp_path):
    path = write_table(tmp_path / "events.parquet", events_table(), EVENTS_SCHEMA, META)
    with pytest.raises(InputError, match=r"expected a jobs table with schema id 'jobs/1', got schema id 'events/1'"):
        read_jobs(path)
    future = JOBS_SCHEMA.with_metadata({b"cosim.schema": b"jobs/2"})
    path = write_table(tmp_path / "jobs.parquet", jobs_table(), future, META)
    with pytest.raises(InputError, match=r"expected schema id 'jobs/1'; this cosim reads version 1 only, got schema id 'jobs/2' \(unsupported version\)"):
        read_jobs(path)


def test_json_strict_sorted_deterministic(tmp_path):
    obj = {"b": np.float64(NAN), "a": np.int64(3), "c": [np.inf, 1.5, (1, 2)],
           "d": np.arange(2), "p": tmp_path}
    path = write_json_atomic(tmp_path / "x.json", obj)
    text = path.read_text()
    assert json.loads(text) == {"a": 3, "b": None, "c": [None, 1.5, [1, 2]], "d": [0, 1],
                                "p": str(tmp_path)}
    assert text.index('"a"') < text.index('"b"') and text.endswith("}\n")
    assert write_json_atomic(tmp_path / "y.json", obj).read_bytes() == text.encode()
    with pytest.raises(TypeError, match="cannot store a set"):
        write_json_atomic(tmp_path / "z.json", {"s": {1}})


def test_read_json_errors(tmp_path):
    bad = tmp_path / "summary.json"
    bad.write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(InputError, match=r"summary.json:4: expected a JSON document, got invalid JSON"):
        read_json(bad)
    with pytest.raises(InputError, match="got no such file"):
        read_json(tmp_path / "missing.json")


def test_read_json_too_deep_or_too_long(tmp_path):
    # A fuzzer's comparison.json: the parser itself runs out of stack.
    bad = tmp_path / "comparison.json"
    bad.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"^\S*comparison.json: expected a JSON document nested "
                                         r"at most 64 levels \(raise it with COSIM_MAX_DEPTH=N\), got JSON nested too deeply$"):
        read_json(bad)
    # Parsed, but deep enough to break whatever walks it recursively.
    bad.write_text('{"sources": ' + "[" * 500 + "]" * 500 + "}")
    with pytest.raises(InputError, match="comparison.json: .*got JSON nested too deeply"):
        read_json(bad)
    bad.write_text("[" * 64 + "]" * 64)   # the limit itself is fine
    assert len(json.dumps(read_json(bad))) == 128
    bad.write_text('{"jobs_total": ' + "1" * 5000 + "}")
    with pytest.raises(InputError, match=r"comparison.json: expected a JSON document, "
                                         r"got invalid JSON \(Exceeds the limit"):
        read_json(bad)


def test_read_run_metadata_that_is_not_an_object(tmp_path):
    path = write_table(tmp_path / "jobs.parquet", jobs_table(), JOBS_SCHEMA, {"cores": 4})
    table = pq.read_table(path)
    for raw, found in ((b"[1, 2]", "an array"), (b'"abc"', "a string"), (b"7", "a number")):
        meta = {**table.schema.metadata, b"cosim.run": raw}
        pq.write_table(table.replace_schema_metadata(meta), path)
        with pytest.raises(InputError, match=rf"jobs.parquet: cosim.run: expected a JSON object "
                                             rf"of run metadata .*, got {found}$"):
            read_jobs(path)
    meta = {**table.schema.metadata, b"cosim.run": b"[" * 100_000}
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(InputError, match="jobs.parquet: expected canonical JSON run metadata"):
        read_jobs(path)


def test_write_run(tmp_path):
    jobs = jobs_table(8)
    paths = write_run(tmp_path / "run", jobs=jobs, events=events_table(),
                      decisions=decisions_table(), cores=64, policy="easy", meta={"seed": 1})
    assert sorted(paths) == ["decisions", "events", "jobs", "summary"]
    doc = read_json(paths["summary"])
    assert doc["schema"] == "summary/1" and doc["policy"] == "easy"
    assert doc["meta"] == {"cores": 64, "policy": "easy", "tau": 10.0, "seed": 1}
    want = json.loads(json.dumps(summarize(jobs, events_table(), cores=64)))
    assert doc["metrics"] == want
    assert read_decisions(paths["decisions"]).meta["seed"] == 1


def _doc_columns() -> dict[str, list[str]]:
    """Column names per table from the tables of docs/schemas.md."""
    text = (REPO / "docs" / "schemas.md").read_text()
    out: dict[str, list[str]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        m = re.match(r"`(\w+)\.parquet`", section)
        if m:
            out[m.group(1)] = re.findall(r"^\| `(\w+)` \|", section, flags=re.M)
    return out


def test_docs_match_schemas():
    docs = _doc_columns()
    for kind, schema in records.SCHEMAS.items():
        assert docs.get(kind) == schema.names, kind
    text = (REPO / "docs" / "schemas.md").read_text()
    for kind in records.SCHEMAS:
        assert f"`{kind}/1`" in text


def test_docs_list_every_summary_key():
    text = (REPO / "docs" / "schemas.md").read_text()
    documented = set(re.findall(r"`([a-z0-9_<>]+)`", text))
    for key in summarize(jobs_table(8), events_table(), cores=64):
        generic = re.sub(r"_(ready|reserved|backfilled)$", "_<mode>", key)
        generic = re.sub(r"_(size|run)_(1|2_8|9_32|33_128|gt128|lt10m|10m_1h|1h_4h|gt4h)$",
                         r"_\1_<class>", generic)
        assert key in documented or generic in documented, key


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True, width=64),
                          st.integers(-2**63, 2**63 - 1),
                          st.text(max_size=12)), max_size=30))
def test_roundtrip_property(tmp_path_factory, rows):
    d = tmp_path_factory.mktemp("rt")
    cols = {"time": [r[0] for r in rows], "job_id": [r[1] for r in rows],
            "action": [r[2] for r in rows], "mode": [r[2] for r in rows],
            "reason": [r[2] for r in rows], "reserved_time": [r[0] for r in rows]}
    p = write_table(d / "d.parquet", cols, DECISIONS_SCHEMA, {"n": len(rows)})
    t = read_decisions(p)
    np.testing.assert_array_equal(t["time"], np.array(cols["time"], dtype=float))
    assert t["job_id"].tolist() == cols["job_id"]
    assert t["reason"].tolist() == cols["reason"] and t.meta == {"n": len(rows)}
    q = write_table(d / "e.parquet", cols, DECISIONS_SCHEMA, {"n": len(rows)})
    assert p.read_bytes() == q.read_bytes()
