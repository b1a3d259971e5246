"""The predictor data set on disk: ``jobs.parquet``, ``progress.parquet``, ``dataset.json``.

Generated jobs (:func:`generate_dataset`) and real VASP runs
(:func:`predictors.ingest.ingest_runs`) are written in the same layout, so a
model trained on one reads the other:

``jobs.parquet``, one row per job:
    ``job_id`` (string; ``"vasp-000001"`` when generated, the run directory's
    name when ingested), ``user`` (string), ``kind`` (string: single_point /
    relaxation / md / phonon), ``multi_ionic`` (bool: more than one ionic
    step), ``submit`` and ``req_time`` (float64 s, NaN when unknown),
    ``runtime`` (float64 s, the target; NaN when unknown), ``cores`` (int64,
    0 when unknown), then every other name of
    :data:`cosim.workloads.vasp.FEATURES` (float64, NaN when unknown; ``cores``
    is a Table-1 feature too but appears once, as the int64 column) and of
    :data:`cosim.workloads.vasp.CATEGORICAL` (string, ``""`` when unknown),
    then ``startup`` (float64 s from the job's start to its first SCF line;
    NaN when unknown).

``progress.parquet``, one row per finished ionic step, grouped by job in the
order of ``jobs.parquet`` and by step:
    ``job_id`` (string), ``step`` (int32, from 1), ``elapsed`` (float64 s since
    the job started, at the end of the step; NaN when unknown), ``energy``
    (float64, F), ``denergy`` (float64, ``d E``), ``max_force`` (float64,
    NaN when unknown), ``scf_steps`` (int32), ``scf_de`` (list of float32:
    ``dE`` of each SCF line of the step as OSZICAR prints it; empty when
    unknown). ``scf_de`` is what an in-run model reads to tell how far the
    SCF of a step under way is from converging.

``startup`` and ``scf_de`` were added to version 1 later: files without them
still load (read as unknown), and writers may leave them out.

``dataset.json``:
    ``{"version": 1, "features": [...], "categorical": {name: vocabulary},
    "n_jobs": N, "n_progress_rows": R, "source": "...", "seed": seed or null}``.

Every file is written under a temporary name in the target folder and renamed
(``dataset.json`` last), so an interrupted write never leaves a set that
looks complete. The bytes are deterministic for the same input.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cosim.errors import InputError
from cosim.limits import read_json
from cosim.workloads.loading import available_memory
from cosim.workloads.vasp import CATEGORICAL, FEATURES, generate_vasp

__all__ = [
    "DATASET_VERSION",
    "JOBS_SCHEMA",
    "PROGRESS_SCHEMA",
    "Dataset",
    "write_dataset",
    "generate_dataset",
    "load_dataset",
]

#: Version written to ``dataset.json``; :func:`load_dataset` refuses others.
DATASET_VERSION = 1

_FIXED = [("job_id", pa.string()), ("user", pa.string()), ("kind", pa.string()),
          ("multi_ionic", pa.bool_()), ("submit", pa.float64()), ("req_time", pa.float64()),
          ("runtime", pa.float64()), ("cores", pa.int64())]


#: Columns that may be absent from a file or a writer's columns: read and written as unknown.
_OPTIONAL = {"startup": float("nan"), "scf_de": []}


def _jobs_schema(features, categorical) -> pa.Schema:
    # "cores" is both a fixed column and a Table-1 feature: it appears once, as int64.
    fixed = {name for name, _ in _FIXED}
    return pa.schema(_FIXED + [(n, pa.float64()) for n in features if n not in fixed]
                     + [(n, pa.string()) for n in categorical if n not in fixed]
                     + [("startup", pa.float64())])


#: Columns of ``jobs.parquet`` in order.
JOBS_SCHEMA = _jobs_schema(FEATURES, CATEGORICAL)

#: Columns of ``progress.parquet`` in order.
PROGRESS_SCHEMA = pa.schema([
    ("job_id", pa.string()), ("step", pa.int32()), ("elapsed", pa.float64()),
    ("energy", pa.float64()), ("denergy", pa.float64()), ("max_force", pa.float64()),
    ("scf_steps", pa.int32()), ("scf_de", pa.list_(pa.float32())),
])

_FILES = ("jobs.parquet", "progress.parquet", "dataset.json")


@dataclass
class Dataset:
    """A loaded data set.

    Attributes:
        jobs: ``jobs.parquet`` as a table (columns of :data:`JOBS_SCHEMA`).
        progress: ``progress.parquet`` as a table, grouped by job in ``jobs`` order.
        meta: ``dataset.json``.
        path: the folder it was read from.

    Examples:
        >>> import tempfile
        >>> d = generate_dataset(20, seed=1, out_dir=tempfile.mkdtemp())
        >>> ds = load_dataset(d)
        >>> ds.n_jobs, ds.jobs["job_id"][0].as_py(), ds.meta["version"]
        (20, 'vasp-000001', 1)
        >>> int(ds.progress_offsets()[-1]) == ds.progress.num_rows
        True
    """

    jobs: pa.Table
    progress: pa.Table
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        return self.jobs.num_rows

    @property
    def features(self) -> list[str]:
        """Numeric feature names (from ``dataset.json``)."""
        return list(self.meta["features"])

    @property
    def categorical(self) -> dict[str, list[str]]:
        """Categorical feature vocabularies (from ``dataset.json``)."""
        return {k: list(v) for k, v in self.meta["categorical"].items()}

    def job_columns(self) -> dict[str, np.ndarray]:
        """``jobs`` as numpy arrays (strings as object arrays)."""
        return {name: self.jobs[name].to_numpy() for name in self.jobs.column_names}

    def progress_columns(self) -> dict[str, np.ndarray]:
        """``progress`` as numpy arrays (strings as object arrays)."""
        return {name: self.progress[name].to_numpy() for name in self.progress.column_names}

    def progress_offsets(self) -> np.ndarray:
        """Row offsets (CSR): job ``i``'s steps are ``progress[off[i]:off[i+1]]``."""
        index = pc.index_in(self.progress["job_id"], value_set=self.jobs["job_id"]).to_numpy(
            zero_copy_only=False)
        counts = np.bincount(index.astype(np.int64), minlength=self.n_jobs) if len(index) else \
            np.zeros(self.n_jobs, dtype=np.int64)
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


# ----------------------------------------------------------------------------- writing


def _atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename the result to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _table(columns: Mapping[str, Any], schema: pa.Schema, where: str) -> pa.Table:
    missing = [f.name for f in schema if f.name not in columns and f.name not in _OPTIONAL]
    if missing:
        raise ValueError(f"{where}: missing columns {missing}")
    n_rows = len(next(iter(columns.values()))) if columns else 0
    arrays = []
    for f in schema:
        if f.name not in columns:
            arrays.append(pa.array([_OPTIONAL[f.name]] * n_rows, type=f.type))
            continue
        values = columns[f.name]
        if isinstance(values, pa.Array | pa.ChunkedArray):
            arrays.append(values.cast(f.type))
        else:
            arrays.append(pa.array(np.asarray(values).tolist() if f.type == pa.string() else
                                   np.asarray(values), type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_dataset(jobs: Mapping[str, Any], progress: Mapping[str, Any], out_dir: str | Path, *,
                  source: str, seed: int | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """Write a data set in the layout above.

    Args:
        jobs: column name -> values for every column of :data:`JOBS_SCHEMA`.
        progress: column name -> values for every column of :data:`PROGRESS_SCHEMA`,
            grouped by job in the order of ``jobs``.
        out_dir: target folder (created if needed).
        source: where the data came from (written to ``dataset.json``).
        seed: generator seed, or None.
        extra: more JSON-ready keys for ``dataset.json``.

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`.
    """
    out = check_output_folder(out_dir)
    jt = _table(jobs, JOBS_SCHEMA, "jobs")   # before the folder: a bad column leaves nothing
    pt = _table(progress, PROGRESS_SCHEMA, "progress")
    try:
        out.mkdir(parents=True, exist_ok=True)
        # dataset.json is what makes a set load, and it is written last: an earlier
        # set's goes first, so that a rewrite cut short never mixes the new files
        # with the old description; temporary files of killed writes go with it.
        (out / "dataset.json").unlink(missing_ok=True)
        for name in _FILES:
            for stale in out.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)
    except OSError as exc:
        raise InputError(str(out), f"a folder that cannot be made ({exc.strerror or exc})",
                         "a writable folder for the data set") from None
    meta = {
        "version": DATASET_VERSION,
        "features": list(FEATURES),
        "categorical": {k: list(v) for k, v in CATEGORICAL.items()},
        "n_jobs": jt.num_rows,
        "n_progress_rows": pt.num_rows,
        "source": source,
        "seed": seed,
    }
    meta.update(extra or {})
    _atomic_write(out / "jobs.parquet", lambda p: pq.write_table(jt, p))
    _atomic_write(out / "progress.parquet", lambda p: pq.write_table(pt, p))
    text = json.dumps(meta, indent=1) + "\n"
    _atomic_write(out / "dataset.json", lambda p: Path(p).write_text(text))
    return out


#: Peak memory one generated job takes on the way to the data set's files
#: (measured: going from 2,000 to 8,000 jobs raised the peak by 36 KB a job),
#: with a margin.
GENERATE_BYTES_PER_JOB = 48_000


def check_generate_fits(n_jobs: int, where: str = "--jobs") -> None:
    """Refuse a job count whose generation would not fit in memory, before allocating.

    Raises:
        InputError: ``n_jobs`` times :data:`GENERATE_BYTES_PER_JOB` exceeds the
            available memory.
    """
    available = available_memory()
    need = n_jobs * GENERATE_BYTES_PER_JOB
    if available is not None and need > available:
        raise InputError(where, f"{n_jobs} jobs (about {need / 2**30:,.1f} GiB to generate)",
                         f"at most {available // GENERATE_BYTES_PER_JOB:,} jobs on this machine "
                         f"({available / 2**30:.1f} GiB available)")


def check_output_folder(out_dir: str | Path) -> Path:
    """Refuse, before any work, an output path that cannot become a folder.

    Raises:
        InputError: ``out_dir`` is a file, or one of its parents is.
    """
    out = Path(out_dir)
    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                found = "a file" if path == out else f"a path under the file {path}"
                raise InputError(str(out), found, "a folder for the data set (new or existing)")
            break
    return out


def generate_dataset(n_jobs: int, seed: int, out_dir: str | Path, **params) -> Path:
    """Generate ``n_jobs`` VASP jobs with :func:`cosim.workloads.vasp.generate_vasp` and write them.

    Args:
        n_jobs: number of jobs.
        seed: generator seed.
        out_dir: target folder (created if needed; existing files are replaced).
        **params: passed to :func:`~cosim.workloads.vasp.generate_vasp`
            (``n_users``, ``mean_interarrival`` or any ``VaspParams`` field).

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`.

    Raises:
        InputError: ``out_dir`` is a file, or ``n_jobs`` does not fit in memory.
    """
    check_output_folder(out_dir)
    check_generate_fits(n_jobs)
    vj = generate_vasp(n_jobs, seed=seed, **params)
    w, f = vj.workload, vj.workload.features
    width = max(6, len(str(n_jobs)))
    job_id = pa.array([f"vasp-{i:0{width}d}" for i in w.job_id.tolist()], type=pa.string())
    jobs: dict[str, Any] = {
        "job_id": job_id,
        "user": [f"user-{u:03d}" for u in w.user.tolist()],
        "kind": f["kind"],
        "multi_ionic": f["multi_ionic"],
        "submit": w.submit,
        "req_time": w.req_time,
        "runtime": w.run,
        "cores": w.procs,
    }
    jobs.update({name: f[name] for name in FEATURES if name != "cores"})
    jobs.update({name: f[name] for name in CATEGORICAL})
    jobs["startup"] = vj.render["startup"]
    n_ionic = vj.n_ionic
    row_job = np.repeat(np.arange(len(w)), n_ionic)
    starts = np.repeat(vj.offsets[:-1], n_ionic)
    progress = {
        "job_id": job_id.take(pa.array(row_job)),
        "step": (np.arange(len(row_job)) - starts + 1).astype(np.int32),
        "elapsed": vj.elapsed,
        "energy": vj.energy,
        "denergy": vj.denergy,
        "max_force": vj.max_force,
        "scf_steps": vj.scf_steps,
        "scf_de": pa.ListArray.from_arrays(pa.array(vj.scf_offsets, type=pa.int64()).cast(pa.int32()),
                                           pa.array(vj.scf_de, type=pa.float32())),
    }
    params_json = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(vj.params).items()}
    # the centre the jobs come from (None: drawn from the seed, a centre of its own)
    extra = {"params": params_json, "population_seed": params.get("population_seed")}
    return write_dataset(jobs, progress, out_dir, source="cosim.workloads.vasp.generate_vasp",
                         seed=seed, extra=extra)


# ----------------------------------------------------------------------------- reading


def _read_table(path: Path, schema: pa.Schema) -> pa.Table:
    if not path.is_file():
        raise InputError(str(path), "a missing file", f"{path.name} of a data set "
                         "(write one with generate_dataset or ingest_runs)")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(str(path), f"an unreadable file ({exc})", "a Parquet file") from None
    for f in schema:
        if f.name not in table.column_names and f.name in _OPTIONAL:
            # written before the column existed: unknown
            table = table.append_column(f, pa.array([_OPTIONAL[f.name]] * table.num_rows,
                                                    type=f.type))
        if f.name not in table.column_names:
            raise InputError(f"{path}: column {f.name!r}", "no such column",
                             f"the columns {', '.join(schema.names)}")
        if table.schema.field(f.name).type != f.type:
            raise InputError(f"{path}: column {f.name!r}", str(table.schema.field(f.name).type),
                             f"type {f.type}")
    return table.select(schema.names)


#: Names a feature may not take: the target itself (a model trained on it learns
#: nothing) and the job's identifier.
_NOT_FEATURES = ("runtime", "job_id")


def _check_feature_names(meta_path: Path, features: list, categorical: dict) -> None:
    """``features`` and ``categorical``'s keys: distinct strings, neither target nor id."""
    seen: set[str] = set()
    for key, names in (("features", features), ("categorical", list(categorical))):
        for i, name in enumerate(names):
            where = f"{meta_path}: {key}[{i}]"
            if not isinstance(name, str) or not name:
                raise InputError(where, repr(name), "a column name (a non-empty string)")
            if name in _NOT_FEATURES:
                raise InputError(where, repr(name), f"a feature other than {' or '.join(_NOT_FEATURES)} "
                                 "(the target and the id)")
            if name in seen:
                raise InputError(where, f"{name!r} a second time", "each feature once")
            seen.add(name)


def _check_finite(path: Path, table: pa.Table, columns: list[str], *,
                  negative_ok: bool = True) -> None:
    """Refuse infinite values in ``columns`` (and negative ones unless ``negative_ok``).

    NaN stays allowed: it is "unknown" (a feature, or an elapsed time ingest
    could not read).
    """
    for name in columns:
        values = table[name].to_numpy(zero_copy_only=False).astype(np.float64)
        bad = np.isinf(values) if negative_ok else np.isinf(values) | (values < 0)
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(f"{path}: column {name!r}, row {row}", repr(float(values[row])),
                             "a finite number or NaN (unknown)" if negative_ok
                             else "a finite number of seconds, 0 or more, or NaN (unknown)")


def load_dataset(path: str | Path) -> Dataset:
    """Read a data set folder written by :func:`write_dataset`.

    Raises:
        InputError: the folder or one of its files is missing, unreadable, of
            another version, or lacks a column; the message names the file.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(str(folder), "no such folder", f"a data set folder with {', '.join(_FILES)}")
    meta_path = folder / "dataset.json"
    if not meta_path.is_file():
        raise InputError(str(meta_path), "a missing file", "dataset.json of a data set "
                         "(write one with generate_dataset or ingest_runs)")
    meta = read_json(meta_path, "a JSON object")
    if not isinstance(meta, dict):
        raise InputError(str(meta_path), type(meta).__name__, "a JSON object")
    if meta.get("version") != DATASET_VERSION:
        raise InputError(f"{meta_path}: version", repr(meta.get("version")),
                         f"version {DATASET_VERSION} (regenerate or re-ingest the data set)")
    for key, kind in (("features", list), ("categorical", dict), ("n_jobs", int)):
        if not isinstance(meta.get(key), kind):
            raise InputError(f"{meta_path}: {key}", repr(meta.get(key)), f"a JSON {kind.__name__}")
    _check_feature_names(meta_path, meta["features"], meta["categorical"])
    schema = _jobs_schema(meta["features"], meta["categorical"])
    jobs = _read_table(folder / "jobs.parquet", schema)
    progress = _read_table(folder / "progress.parquet", PROGRESS_SCHEMA)
    _check_finite(folder / "jobs.parquet", jobs, [f.name for f in schema
                                                  if pa.types.is_floating(f.type)])
    _check_finite(folder / "progress.parquet", progress, ["elapsed"], negative_ok=False)
    if jobs.num_rows != meta["n_jobs"]:
        raise InputError(f"{folder / 'jobs.parquet'}", f"{jobs.num_rows} rows",
                         f"{meta['n_jobs']} rows (n_jobs in dataset.json)")
    unknown = pc.sum(pc.invert(pc.is_in(progress["job_id"], value_set=jobs["job_id"]))).as_py() or 0
    if unknown:
        raise InputError(f"{folder / 'progress.parquet'}: column 'job_id'",
                         f"{unknown} rows whose job_id is not in jobs.parquet", "job ids of jobs.parquet")
    # Keep the documented order (grouped by job in jobs order, then by step) even
    # if another tool wrote the rows in a different order.
    index = pc.index_in(progress["job_id"], value_set=jobs["job_id"]).to_numpy(zero_copy_only=False)
    step = progress["step"].to_numpy()
    if len(index) and (np.any(np.diff(index) < 0) or np.any((np.diff(index) == 0) & (np.diff(step) < 0))):
        progress = progress.take(pa.array(np.lexsort((step, index))))
    return Dataset(jobs, progress, meta, folder)
