"""Predictor data set layout: generate, write atomically, load and validate."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cosim.errors import InputError
from cosim.workloads.vasp import CATEGORICAL, FEATURES, generate_vasp
from predictors.dataset import (
    DATASET_VERSION,
    JOBS_SCHEMA,
    PROGRESS_SCHEMA,
    generate_dataset,
    load_dataset,
    write_dataset,
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "data"
    assert generate_dataset(150, 7, out) == out
    return out


def test_files_and_metadata(generated):
    assert sorted(p.name for p in generated.iterdir()) == ["dataset.json", "jobs.parquet", "progress.parquet"]
    meta = json.loads((generated / "dataset.json").read_text())
    assert meta["version"] == DATASET_VERSION == 1
    assert meta["features"] == list(FEATURES)
    assert meta["categorical"] == {k: list(v) for k, v in CATEGORICAL.items()}
    assert meta["n_jobs"] == 150 and meta["seed"] == 7
    assert meta["source"] == "cosim.workloads.vasp.generate_vasp"
    assert meta["params"]["runtime_cap"] == 60000.0


def test_schemas_are_exact(generated):
    jobs = pq.read_table(generated / "jobs.parquet")
    progress = pq.read_table(generated / "progress.parquet")
    assert jobs.schema.remove_metadata() == JOBS_SCHEMA
    assert progress.schema.remove_metadata() == PROGRESS_SCHEMA
    assert JOBS_SCHEMA.names[:8] == ["job_id", "user", "kind", "multi_ionic", "submit", "req_time",
                                     "runtime", "cores"]
    assert JOBS_SCHEMA.field("cores").type == pa.int64()  # once, though it is a Table-1 feature too
    assert JOBS_SCHEMA.names.count("cores") == 1
    assert set(JOBS_SCHEMA.names) == {*JOBS_SCHEMA.names[:8], *FEATURES, *CATEGORICAL, "startup"}


def test_content_matches_the_generator(generated):
    ds = load_dataset(generated)
    vj = generate_vasp(150, seed=7)
    w = vj.workload
    cols = ds.job_columns()
    assert cols["job_id"][:3].tolist() == ["vasp-000001", "vasp-000002", "vasp-000003"]
    np.testing.assert_array_equal(cols["runtime"], w.run)
    np.testing.assert_array_equal(cols["submit"], w.submit)
    np.testing.assert_array_equal(cols["cores"], w.procs)
    np.testing.assert_array_equal(cols["req_time"], w.req_time)
    assert cols["user"][0] == f"user-{w.user[0]:03d}"
    for name in FEATURES:
        np.testing.assert_array_equal(cols[name], w.features[name])
    for name in CATEGORICAL:
        assert cols[name].tolist() == w.features[name].tolist()
    assert cols["kind"].tolist() == w.features["kind"].tolist()
    assert ds.progress.num_rows == len(vj.elapsed) == ds.meta["n_progress_rows"]
    off = ds.progress_offsets()
    np.testing.assert_array_equal(off, vj.offsets)
    prog = ds.progress_columns()
    for j in (0, 1, 149):
        log = vj.progress_log(j)
        sl = slice(off[j], off[j + 1])
        assert set(prog["job_id"][sl]) == {cols["job_id"][j]}
        np.testing.assert_array_equal(prog["step"][sl], log["step"])
        for key in ("elapsed", "energy", "denergy", "max_force", "scf_steps"):
            np.testing.assert_array_equal(prog[key][sl], log[key])
        # the SCF lines of each step: as many as its SCF steps, the generator's dE
        for r in range(off[j], off[j + 1]):
            lo, hi = vj.scf_offsets[r], vj.scf_offsets[r + 1]
            assert len(prog["scf_de"][r]) == prog["scf_steps"][r] == hi - lo
            np.testing.assert_array_equal(prog["scf_de"][r], vj.scf_de[lo:hi])
    np.testing.assert_array_equal(cols["startup"], vj.render["startup"])


def test_files_without_the_later_columns_still_load(generated, tmp_path):
    # startup and scf_de came later in version 1: older files read them as unknown
    ds = load_dataset(generated)
    old = tmp_path / "old"
    old.mkdir()
    pq.write_table(ds.jobs.drop_columns(["startup"]), old / "jobs.parquet")
    pq.write_table(ds.progress.drop_columns(["scf_de"]), old / "progress.parquet")
    (old / "dataset.json").write_text((generated / "dataset.json").read_text())
    back = load_dataset(old)
    assert back.jobs.schema.remove_metadata() == JOBS_SCHEMA
    assert np.isnan(back.jobs["startup"].to_numpy()).all()
    assert back.progress["scf_de"].to_pylist()[:2] == [[], []]
    # and a writer that leaves them out (a reader of other files) gets them as unknown
    cols = {k: v for k, v in ds.job_columns().items() if k != "startup"}
    prog = {k: v for k, v in ds.progress_columns().items() if k != "scf_de"}
    again = load_dataset(write_dataset(cols, prog, tmp_path / "w", source="test"))
    assert np.isnan(again.jobs["startup"].to_numpy()).all()


def test_deterministic_bytes_and_no_temp_files(generated, tmp_path):
    again = generate_dataset(150, 7, tmp_path / "again")
    for name in ("jobs.parquet", "progress.parquet", "dataset.json"):
        assert (again / name).read_bytes() == (generated / name).read_bytes(), name
    generate_dataset(10, 8, again)  # overwrite in place
    assert sorted(p.name for p in again.iterdir()) == ["dataset.json", "jobs.parquet", "progress.parquet"]
    assert load_dataset(again).n_jobs == 10


def test_load_reorders_progress_written_out_of_order(generated, tmp_path):
    ds = load_dataset(generated)
    shuffled = ds.progress.take(pa.array(np.random.default_rng(0).permutation(ds.progress.num_rows)))
    out = write_dataset(ds.job_columns(), {k: shuffled[k] for k in shuffled.column_names}, tmp_path,
                        source="test")
    back = load_dataset(out)
    assert back.progress.equals(ds.progress)


def _copy(src, dst):
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_missing_folder_and_files(generated, tmp_path):
    with pytest.raises(InputError, match="nowhere: expected a data set folder"):
        load_dataset(tmp_path / "nowhere")
    for name in ("dataset.json", "jobs.parquet", "progress.parquet"):
        d = _copy(generated, tmp_path / f"no-{name}")
        (d / name).unlink()
        with pytest.raises(InputError) as err:
            load_dataset(d)
        assert str(err.value).startswith(f"{d / name}: expected ") and "got a missing file" in str(err.value)


def test_wrong_version_and_bad_json(generated, tmp_path):
    d = _copy(generated, tmp_path / "v2")
    meta = json.loads((d / "dataset.json").read_text())
    meta["version"] = 2
    (d / "dataset.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"dataset.json: version: expected version 1 .*, got 2"):
        load_dataset(d)
    (d / "dataset.json").write_text('{"version": 1,\n "features": [}')
    with pytest.raises(InputError, match=r"dataset.json:2: expected a JSON object, got invalid JSON"):
        load_dataset(d)


def test_missing_column_and_wrong_type(generated, tmp_path):
    d = _copy(generated, tmp_path / "cols")
    jobs = pq.read_table(d / "jobs.parquet")
    pq.write_table(jobs.drop_columns(["ENCUT"]), d / "jobs.parquet")
    with pytest.raises(InputError, match=r"jobs.parquet: column 'ENCUT': expected the columns .*got no such column"):
        load_dataset(d)
    pq.write_table(jobs.set_column(jobs.schema.get_field_index("cores"), "cores",
                                   pa.array(jobs["cores"].to_numpy().astype(float))), d / "jobs.parquet")
    with pytest.raises(InputError, match=r"column 'cores': expected type int64, got double"):
        load_dataset(d)
    (d / "jobs.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"jobs.parquet: expected a Parquet file, got an unreadable file"):
        load_dataset(d)


def test_progress_of_unknown_job_is_rejected(generated, tmp_path):
    d = _copy(generated, tmp_path / "orphan")
    prog = pq.read_table(d / "progress.parquet")
    ids = prog["job_id"].to_pylist()
    ids[0] = "vasp-999999"
    pq.write_table(prog.set_column(0, "job_id", pa.array(ids, pa.string())), d / "progress.parquet")
    with pytest.raises(InputError, match=r"progress.parquet: column 'job_id': expected job ids of jobs.parquet, "
                                         r"got 1 rows"):
        load_dataset(d)


def test_empty_dataset_round_trip(tmp_path):
    out = generate_dataset(0, 1, tmp_path / "empty")
    ds = load_dataset(out)
    assert ds.n_jobs == 0 and ds.progress.num_rows == 0
    assert ds.progress_offsets().tolist() == [0]


def _set_meta(d, **changes):
    meta = json.loads((d / "dataset.json").read_text())
    meta.update(changes)
    (d / "dataset.json").write_text(json.dumps(meta))


def test_feature_names_and_values_a_model_cannot_use_are_one_line(generated, tmp_path):
    # Each raised KeyError, TypeError, UnicodeDecodeError or a ValueError inside the
    # fit with a traceback, or (the target as a feature) trained silently on it.
    features = json.loads((generated / "dataset.json").read_text())["features"]
    cases = [
        ({"features": [*features, "NSW"]}, rf"features\[{len(features)}\]: expected each "
                                            r"feature once, got 'NSW' a second time"),
        ({"features": [1, 2]}, r"features\[0\]: expected a column name"),
        ({"features": [*features, "runtime"]}, r"expected a feature other than runtime or "
                                               r"job_id \(the target and the id\), got 'runtime'"),
    ]
    for i, (change, message) in enumerate(cases):
        d = _copy(generated, tmp_path / f"meta{i}")
        _set_meta(d, **change)
        with pytest.raises(InputError, match=message):
            load_dataset(d)
    d = _copy(generated, tmp_path / "utf8")
    (d / "dataset.json").write_bytes(b"\xff" + (d / "dataset.json").read_bytes())
    with pytest.raises(InputError, match=r"dataset.json: expected a UTF-8 JSON file, got a "
                                         r"byte that is not UTF-8 at offset 0"):
        load_dataset(d)
    # NaN is unknown and loads; infinity does not, nor a negative elapsed time
    d = _copy(generated, tmp_path / "values")
    jobs = pq.read_table(d / "jobs.parquet")
    nsw = jobs["NSW"].to_numpy().astype(float)
    nsw[3] = np.nan
    pq.write_table(jobs.set_column(jobs.schema.get_field_index("NSW"), "NSW", pa.array(nsw)),
                   d / "jobs.parquet")
    assert load_dataset(d).jobs.num_rows == jobs.num_rows
    nsw[4] = np.inf
    pq.write_table(jobs.set_column(jobs.schema.get_field_index("NSW"), "NSW", pa.array(nsw)),
                   d / "jobs.parquet")
    with pytest.raises(InputError, match=r"jobs.parquet: column 'NSW', row 4: expected a finite "
                                         r"number or NaN \(unknown\), got inf"):
        load_dataset(d)
    d = _copy(generated, tmp_path / "elapsed")
    prog = pq.read_table(d / "progress.parquet")
    elapsed = prog["elapsed"].to_numpy().copy()
    elapsed[2] = -5.0
    pq.write_table(prog.set_column(prog.schema.get_field_index("elapsed"), "elapsed",
                                   pa.array(elapsed)), d / "progress.parquet")
    with pytest.raises(InputError, match=r"progress.parquet: column 'elapsed', row 2: expected "
                                         r"a finite number of seconds, 0 or more, or NaN"):
        load_dataset(d)


def test_a_rewrite_cut_short_leaves_no_set_that_loads(generated, tmp_path, monkeypatch):
    # It left the new jobs.parquet beside the old progress and dataset.json, and loaded.
    import predictors.dataset as dataset

    d = _copy(generated, tmp_path / "set")
    (d / ".progress.parquet.abc.tmp").write_bytes(b"a killed write's leftovers")
    real = dataset._atomic_write

    def cut(path, write):
        if path.name == "progress.parquet":
            raise KeyboardInterrupt
        real(path, write)
    monkeypatch.setattr(dataset, "_atomic_write", cut)
    with pytest.raises(KeyboardInterrupt):
        generate_dataset(20, 99, d)
    assert sorted(p.name for p in d.iterdir()) == ["jobs.parquet", "progress.parquet"]
    with pytest.raises(InputError, match="dataset.json: expected dataset.json of a data set"):
        load_dataset(d)
