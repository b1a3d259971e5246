"""Versioned Parquet tables and JSON files of a run, written atomically.

A run produces three tables (see ``docs/schemas.md``):

* ``jobs``: one row per job that entered the system, in submit order;
* ``events``: one row per state change, in occurrence order;
* ``decisions``: one row per scheduler decision applied.

Each Parquet file carries its schema id (``cosim.schema`` = ``"jobs/1"``) and
the run metadata (``cosim.run``, canonical JSON: cores, policy, tau, ...) in
its key-value metadata. Readers refuse a file whose schema id is absent or
not one they understand, so a results folder from another tool or a future
version fails with one clear message instead of a wrong metric.

Files are written to a temporary name in the target directory, fsynced and
renamed with :func:`os.replace`, so an interrupted run never leaves a
half-written file under the final name. The bytes are deterministic: the same
columns and metadata give byte-identical files (pyarrow embeds no timestamp
or random id; ``created_by`` names the pyarrow version only).

Examples:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> cols = {"time": [0.0], "job_id": [1], "action": ["start"], "mode": ["ready"],
    ...         "reason": ["fits at head"], "reserved_time": [float("nan")]}
    >>> _ = write_table(d / "decisions.parquet", cols, DECISIONS_SCHEMA, {"cores": 4})
    >>> t = read_decisions(d / "decisions.parquet")
    >>> t.schema_id, t.meta["cores"], str(t["action"][0])
    ('decisions/1', 4, 'start')
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cosim.errors import InputError
from cosim.limits import DEPTH, read_json

__all__ = [
    "JOBS_SCHEMA", "jobs_schema", "EVENTS_SCHEMA", "DECISIONS_SCHEMA", "SCHEMAS", "OUTCOMES",
    "MODES", "EVENT_KINDS", "ACTIONS", "RecordTable", "write_table", "write_json_atomic",
    "write_bytes_atomic", "write_run", "read_table", "read_jobs", "read_events", "read_decisions",
    "read_json", "JSON_MAX_DEPTH", "to_jsonable", "jobs_table", "events_table", "decisions_table",
    "EVENT_COLUMNS", "DECISION_COLUMNS", "EventRow", "DecisionRow", "Recorder",
]

#: Allowed values of ``jobs.outcome``.
OUTCOMES = ("completed", "timeout", "failed", "rejected", "unfinished")
#: Allowed values of ``jobs.mode`` and ``decisions.mode`` ("" = never started / none).
MODES = ("ready", "reserved", "backfilled", "")
#: Allowed values of ``events.kind``.
EVENT_KINDS = ("submit", "start", "end", "kill", "requeue", "reject", "timeout",
               "node_down", "node_up", "overrun", "pass")
#: Allowed values of ``decisions.action``.
ACTIONS = ("start", "reserve", "kill", "wait")

# (name, arrow type, unit, meaning): the single source of the schemas below;
# docs/schemas.md documents the same columns (a test checks they agree).
_JOBS_COLUMNS = [
    ("job_id", pa.int64(), "", "job id from the workload"),
    ("user", pa.int64(), "", "user id, -1 unknown"),
    ("submit", pa.float64(), "s", "submit time"),
    ("start", pa.float64(), "s", "start of the final attempt, NaN if never started"),
    ("end", pa.float64(), "s", "end of the final attempt, NaN if never ended"),
    ("run", pa.float64(), "s", "run time of the final attempt (end - start), NaN if not ended"),
    ("req_time", pa.float64(), "s", "requested walltime"),
    ("estimate", pa.float64(), "s", "scheduler's pre-run expected run time"),
    ("procs", pa.int64(), "cores", "cores, or nodes on a node-granular cluster"),
    ("mem", pa.float64(), "GB", "memory, 0 = not modelled"),
    ("outcome", pa.string(), "", "completed | timeout | failed | rejected | unfinished"),
    ("mode", pa.string(), "", "ready | reserved | backfilled | '' (never started)"),
    ("reason", pa.string(), "", "why it was started, or why it was rejected"),
    ("attempts", pa.int32(), "", "number of starts"),
    ("killed_seconds", pa.float64(), "s", "seconds run in killed or lost attempts"),
    ("killed_core_seconds", pa.float64(), "core*s", "core-seconds of killed or lost attempts"),
    ("reservation", pa.float64(), "s", "first start time promised, NaN if none"),
]
_EVENTS_COLUMNS = [
    ("time", pa.float64(), "s", "time of the change"),
    ("kind", pa.string(), "", "submit | start | end | kill | requeue | reject | timeout | "
                              "node_down | node_up | overrun | pass"),
    ("job_id", pa.int64(), "", "job concerned, -1 if none"),
    ("node", pa.int64(), "", "node concerned, -1 if none"),
    ("queue_len", pa.int64(), "jobs", "jobs queued after the change"),
    ("running", pa.int64(), "jobs", "jobs running after the change"),
    ("used_cores", pa.int64(), "cores", "cores in use after the change"),
    ("up_cores", pa.int64(), "cores", "cores on nodes that are up"),
    ("queued_area", pa.float64(), "core*s", "sum over queued jobs of procs * estimate"),
    ("idle_fit_cores", pa.int64(), "cores",
     "idle cores if some queued job would fit on them now, else 0 (pass rows)"),
]
_DECISIONS_COLUMNS = [
    ("time", pa.float64(), "s", "time the decision was applied"),
    ("job_id", pa.int64(), "", "job concerned, -1 if none"),
    ("action", pa.string(), "", "start | reserve | kill | wait"),
    ("mode", pa.string(), "", "ready | reserved | backfilled | ''"),
    ("reason", pa.string(), "", "why"),
    ("reserved_time", pa.float64(), "s", "promised start time, NaN unless action is reserve"),
]

_SCHEMA_KEY = b"cosim.schema"
_RUN_KEY = b"cosim.run"


def _make_schema(kind: str, version: int, columns: list) -> pa.Schema:
    fields = [
        pa.field(name, typ, nullable=False,
                 metadata={b"unit": unit.encode(), b"doc": doc.encode()})
        for name, typ, unit, doc in columns
    ]
    return pa.schema(fields, metadata={_SCHEMA_KEY: f"{kind}/{version}".encode()})


#: Schema of ``jobs.parquet`` (id ``jobs/1``).
JOBS_SCHEMA = _make_schema("jobs", 1, _JOBS_COLUMNS)
#: Schema of ``events.parquet`` (id ``events/1``).
EVENTS_SCHEMA = _make_schema("events", 1, _EVENTS_COLUMNS)
#: Schema of ``decisions.parquet`` (id ``decisions/1``).
DECISIONS_SCHEMA = _make_schema("decisions", 1, _DECISIONS_COLUMNS)
#: Schema by table kind; the readers accept exactly these ids.
SCHEMAS: dict[str, pa.Schema] = {"jobs": JOBS_SCHEMA, "events": EVENTS_SCHEMA,
                                 "decisions": DECISIONS_SCHEMA}


def _schema_id(schema: pa.Schema) -> str:
    meta = schema.metadata or {}
    if _SCHEMA_KEY not in meta:
        raise ValueError("schema has no cosim.schema metadata; use one of records.SCHEMAS")
    return meta[_SCHEMA_KEY].decode()


_FEATURE_KEY = b"feature"
_LABELS_KEY = b"labels"


def jobs_schema(features: Mapping[str, Mapping[int, str]]) -> pa.Schema:
    """:data:`JOBS_SCHEMA` plus an int64 column (-1 unknown) per job feature (a trace
    field), name -> its labels {id: name}, kept in the field metadata as JSON (the id
    stays ``jobs/1``: every ``jobs/1`` column is still there)."""
    assert not set(features) & set(JOBS_SCHEMA.names), f"{sorted(features)} clash"
    extra = [pa.field(name, pa.int64(), nullable=False, metadata={
        b"unit": b"", b"doc": b"workload feature (trace field), -1 unknown", _FEATURE_KEY: b"1",
        _LABELS_KEY: _canonical_json({str(k): str(v) for k, v in labels.items()}).encode()})
        for name, labels in features.items()]
    return pa.schema(list(JOBS_SCHEMA) + extra, metadata=JOBS_SCHEMA.metadata)


class RecordTable(dict):
    """Columns of a table read back from Parquet, as numpy arrays by name.

    A plain ``dict`` (so it goes straight into :func:`cosim.metrics.summarize`)
    with three attributes.

    Attributes:
        schema_id: the file's schema id, e.g. ``"jobs/1"``.
        meta: the run metadata stored with the table (cores, policy, tau, ...).
        labels: names behind the job-feature columns, column -> {id: name}.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], schema_id: str, meta: dict,
                 labels: Mapping[str, dict[int, str]] | None = None):
        super().__init__(columns)
        self.schema_id = schema_id
        self.meta = meta
        self.labels = dict(labels or {})

    @property
    def num_rows(self) -> int:
        """Number of rows (``len()`` counts columns, as for any dict)."""
        return len(next(iter(self.values()))) if self else 0


# ---------------------------------------------------------------- JSON ----

def to_jsonable(obj: Any) -> Any:
    """A copy of ``obj`` that :func:`json.dumps` accepts with ``allow_nan=False``.

    numpy scalars and arrays become Python numbers and lists, tuples become
    lists, paths become strings, and non-finite floats (NaN, inf) become
    ``None`` because strict JSON has no spelling for them.
    """
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    raise TypeError(f"cannot store a {type(obj).__name__} in JSON: {obj!r}")


def _canonical_json(obj: Any, indent: int | None = None) -> str:
    return json.dumps(to_jsonable(obj), sort_keys=True, allow_nan=False, indent=indent,
                      separators=(",", ": ") if indent else (",", ":"))


def _write_atomic(path: Path, write: Callable[[Any], None]) -> Path:
    """Call ``write(fileobj)`` on a temp file beside ``path``, fsync, rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; results are meant to be shared.
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    # Persist the rename itself; not all platforms can open a directory.
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path


def write_bytes_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically.

    The same temp-file, fsync and rename sequence as every result file, for
    side files such as the resolved ``scenario.yaml``.

    Returns:
        The path written.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return _write_atomic(Path(path), lambda f: f.write(raw))


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as indented, key-sorted JSON, atomically.

    Non-finite floats are written as ``null`` (see :func:`to_jsonable`), so
    the file is strict JSON and identical for identical input.

    Returns:
        The path written.
    """
    text = _canonical_json(obj, indent=2) + "\n"
    return _write_atomic(Path(path), lambda f: f.write(text.encode("utf-8")))


#: Deepest nesting of arrays and objects :func:`read_json` accepts by default
#: (:data:`cosim.limits.DEPTH`): code that walks a document recursively (the
#: report's tables) would exhaust the stack on a deeper one.
JSON_MAX_DEPTH = DEPTH.default


# ------------------------------------------------------------- Parquet ----

def _to_arrow(name: str, values: Any, typ: pa.DataType, where: str) -> pa.Array:
    try:
        if isinstance(values, np.ndarray) and pa.types.is_string(typ):
            values = values.tolist()
        arr = pa.array(values, type=typ, from_pandas=False)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{where}.{name}", f"values not convertible ({exc})",
                         f"a column of {typ}") from None
    if arr.null_count:
        i = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"{where}.{name}[{i}]", "a missing value (None)",
                         f"a {typ} (use NaN for an unknown time, -1 for an unknown id)")
    return arr


def write_table(path: str | os.PathLike, columns: Mapping[str, Any], schema: pa.Schema,
                metadata: Mapping[str, Any] | None = None) -> Path:
    """Write one table to Parquet, atomically and deterministically.

    Args:
        path: file to write (its directory is created if needed).
        columns: column name -> equal-length array-like (numpy arrays, or
            lists for strings); exactly the columns of ``schema``.
        schema: one of :data:`JOBS_SCHEMA`, :data:`EVENTS_SCHEMA`,
            :data:`DECISIONS_SCHEMA`.
        metadata: run metadata (JSON-able: cores, policy, tau, ...), stored
            as canonical JSON under ``cosim.run``.

    Returns:
        The path written.

    Raises:
        InputError: a column is missing, unknown, of the wrong length, or
            holds values that do not convert to the schema's type.
    """
    kind = _schema_id(schema).split("/")[0]
    names = schema.names
    missing = [n for n in names if n not in columns]
    extra = sorted(set(columns) - set(names))
    if missing:
        raise InputError(kind, f"no column(s) {', '.join(missing)}",
                         f"columns {', '.join(names)}")
    if extra:
        raise InputError(kind, f"unknown column(s) {', '.join(extra)}",
                         f"only columns {', '.join(names)}")
    arrays = [_to_arrow(n, columns[n], schema.field(n).type, kind) for n in names]
    lengths = {n: len(a) for n, a in zip(names, arrays, strict=True)}
    if len(set(lengths.values())) > 1:
        n0 = names[0]
        bad = next(n for n in names if lengths[n] != lengths[n0])
        raise InputError(f"{kind}.{bad}", f"{lengths[bad]} rows",
                         f"{lengths[n0]} rows like column {n0}")
    meta = dict(schema.metadata)
    meta[_RUN_KEY] = _canonical_json(dict(metadata or {})).encode()
    table = pa.Table.from_arrays(arrays, schema=schema.with_metadata(meta))
    strings = [n for n in names if pa.types.is_string(schema.field(n).type)]

    def write(f):
        # Dictionary-encode the (highly repetitive) string columns only:
        # numeric columns are mostly distinct and zstd handles them.
        pq.write_table(table, f, compression="zstd", use_dictionary=strings,
                       write_statistics=True)

    return _write_atomic(Path(path), write)


def _parse_schema_id(text: str) -> tuple[str, int] | None:
    kind, _, version = text.partition("/")
    return (kind, int(version)) if version.isdigit() else None


def read_table(path: str | os.PathLike, kind: str) -> RecordTable:
    """Read a table written by :func:`write_table`, checking its schema id.

    Args:
        path: the Parquet file.
        kind: ``"jobs"``, ``"events"`` or ``"decisions"``.

    Returns:
        A :class:`RecordTable`: numpy column arrays (strings as ``object``
        arrays of ``str``) plus ``schema_id`` and ``meta``.

    Raises:
        InputError: the file is missing, not Parquet, or its schema id is
            absent, of another table kind, or of an unsupported version.
    """
    if kind not in SCHEMAS:
        raise ValueError(f"unknown table kind {kind!r}; one of {sorted(SCHEMAS)}")
    schema = SCHEMAS[kind]
    want = _schema_id(schema)
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), "no such file", f"a {kind} Parquet file ({want})")
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), f"a file that is not Parquet ({exc})",
                         f"a {kind} Parquet file ({want}) written by cosim") from None
    kv = pf.metadata.metadata or {}
    found = kv.get(_SCHEMA_KEY)
    if found is None:
        raise InputError(str(path), "no cosim.schema entry in the Parquet metadata",
                         f"a {kind} table with schema id {want!r}")
    found = found.decode(errors="replace")
    parsed = _parse_schema_id(found)
    if parsed is None or parsed[0] != kind:
        raise InputError(str(path), f"schema id {found!r}",
                         f"a {kind} table with schema id {want!r}")
    if found != want:
        raise InputError(str(path), f"schema id {found!r} (unsupported version)",
                         f"schema id {want!r}; this cosim reads version "
                         f"{want.split('/')[1]} only")
    try:
        table = pf.read()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(str(path), f"a corrupt Parquet file ({exc})",
                         "a readable Parquet file") from None
    columns: dict[str, np.ndarray] = {}
    for field in schema:
        if field.name not in table.column_names:
            raise InputError(f"{path}", f"no column {field.name!r}",
                             f"the columns of schema {want}")
        col = table.column(field.name)
        if col.type != field.type:
            raise InputError(f"{path}:{field.name}", f"type {col.type}",
                             f"type {field.type} (schema {want})")
        # Strings stay Python objects: numpy's fixed-width str dtype would
        # drop trailing NULs and pad every cell to the longest reason.
        columns[field.name] = col.to_numpy()
    labels = _read_features(table, columns, path) if kind == "jobs" else {}
    try:
        meta = json.loads(kv.get(_RUN_KEY, b"{}").decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InputError(f"{path}", "unparsable cosim.run metadata",
                         "canonical JSON run metadata") from None
    if not isinstance(meta, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        raise InputError(f"{path}: cosim.run", kind.get(type(meta), "a number"),
                         "a JSON object of run metadata (cores, policy, tau, ...)")
    return RecordTable(columns, found, meta, labels)


def _read_features(table: pa.Table, columns: dict[str, np.ndarray], path: Path
                   ) -> dict[str, dict[int, str]]:
    """Add the job-feature columns (see :func:`jobs_schema`); their labels by column."""
    labels: dict[str, dict[int, str]] = {}
    for field in table.schema:
        meta = field.metadata or {}
        if field.name not in columns and _FEATURE_KEY in meta:
            try:
                names = json.loads(meta.get(_LABELS_KEY, b"{}").decode())
                labels[field.name] = {int(k): str(v) for k, v in names.items()}
                assert field.type == pa.int64()
            except (UnicodeDecodeError, ValueError, AttributeError, AssertionError):
                raise InputError(f"{path}:{field.name}", "a malformed job-feature column",
                                 "int64 ids with labels as JSON {id: name}") from None
            columns[field.name] = table.column(field.name).to_numpy()
    return labels


def read_jobs(path: str | os.PathLike) -> RecordTable:
    """Read ``jobs.parquet`` (schema ``jobs/1``); see :func:`read_table`."""
    return read_table(path, "jobs")


def read_events(path: str | os.PathLike) -> RecordTable:
    """Read ``events.parquet`` (schema ``events/1``); see :func:`read_table`."""
    return read_table(path, "events")


def read_decisions(path: str | os.PathLike) -> RecordTable:
    """Read ``decisions.parquet`` (schema ``decisions/1``); see :func:`read_table`."""
    return read_table(path, "decisions")


# -- tables from the model's records ------------------------------------------------

class EventRow(NamedTuple):
    """The fields of a row of the events table (schema ``events/1``), in order:
    ``EventRow(*row)`` names a row :class:`Recorder` wrote."""

    time: float
    kind: str              # one of EVENT_KINDS
    job_id: int            # -1: no job
    node: int              # -1: no node
    queue_len: int
    running: int
    used_cores: int
    up_cores: int
    queued_area: float     # core-seconds the queued jobs ask for
    idle_fit_cores: int    # free units some queued job fits in (pass rows), else 0


class DecisionRow(NamedTuple):
    """The fields of a row of the decisions table (schema ``decisions/1``), in order:
    ``DecisionRow(*row)`` names a row :class:`Recorder` wrote."""

    time: float
    job_id: int            # -1: no job (wait)
    action: str            # one of ACTIONS
    mode: str              # start mode, "" otherwise
    reason: str            # "refused: ..." for a refused decision
    reserved_time: float   # the promised start of a reservation, NaN otherwise


#: Column order of the scheduler's event rows, schema ``events/1``.
EVENT_COLUMNS = EventRow._fields
_EVENT_DTYPES = (np.float64, None, np.int64, np.int64, np.int64, np.int64, np.int64,
                 np.int64, np.float64, np.int64)
#: Column order of the scheduler's decision rows, schema ``decisions/1``.
DECISION_COLUMNS = DecisionRow._fields
_DECISION_DTYPES = (np.float64, np.int64, None, None, None, np.float64)

_NAN = math.nan


class Recorder:
    """The one writer of a run's event and decision rows (kept in memory).

    ``events`` and ``decisions`` hold one plain tuple per row, in the field
    order of :class:`EventRow` and :class:`DecisionRow`; read them by name
    with ``EventRow(*row)`` (or by the index ``EVENT_COLUMNS.index(name)``),
    or as columns with :func:`events_table` and :func:`decisions_table`.
    Plain tuples, not named ones, because the garbage collector stops
    tracking a plain tuple of numbers and strings but keeps visiting every
    named one for the rest of the run (tens of thousands of rows).

    Examples:
        >>> log = Recorder()
        >>> log.start(0.0, 7, "ready", "fits at head")
        >>> row = DecisionRow(*log.decisions[0])
        >>> row.action, row.job_id
        ('start', 7)
    """

    __slots__ = ("events", "decisions")

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.decisions: list[tuple] = []

    def event(self, time: float, kind: str, job_id: int, node: int, queue_len: int,
              running: int, used_cores: int, up_cores: int, queued_area: float,
              idle_fit_cores: int = 0) -> None:
        """A state change (``kind`` one of :data:`EVENT_KINDS`)."""
        self.events.append((time, kind, job_id, node, queue_len, running, used_cores,
                            up_cores, queued_area, idle_fit_cores))

    def start(self, time: float, job_id: int, mode: str, reason: str) -> None:
        """A job started."""
        self.decisions.append((time, job_id, "start", mode, reason, _NAN))

    def started(self, time: float, job_id: int, mode: str, reason: str, queue_len: int,
                running: int, used_cores: int, up_cores: int, queued_area: float) -> None:
        """A job started: its decision row and its ``start`` event row (one call per job)."""
        self.decisions.append((time, job_id, "start", mode, reason, _NAN))
        self.events.append((time, "start", job_id, -1, queue_len, running, used_cores,
                            up_cores, queued_area, 0))

    def reserve(self, time: float, job_id: int, reason: str, reserved_time: float) -> None:
        """A job was promised a start at ``reserved_time`` (NaN: the promise withdrawn)."""
        self.decisions.append((time, job_id, "reserve", "", reason, reserved_time))

    def kill(self, time: float, job_id: int, reason: str) -> None:
        """A running job was killed."""
        self.decisions.append((time, job_id, "kill", "", reason, _NAN))

    def wait(self, time: float, reason: str) -> None:
        """The policy chose to wait."""
        self.decisions.append((time, -1, "wait", "", reason, _NAN))

    def refused(self, time: float, job_id: int, action: str, mode: str, why: str) -> None:
        """A decision was refused (not applied), for ``why``."""
        self.decisions.append((time, job_id, action, mode, f"refused: {why}", _NAN))


def jobs_table(jobs, columns: tuple[str, ...] | None = None) -> dict[str, np.ndarray | list]:
    """Columns of ``jobs.parquet`` (schema ``jobs/1``) from the scheduler's job records.

    Args:
        jobs: the scheduler's :class:`cosim.job.Job` records.
        columns: only these columns (default: all, in schema order).
    """
    n = len(jobs)

    def f(attr):
        return np.fromiter((getattr(j, attr) for j in jobs), dtype=np.float64, count=n)

    def i(attr, dtype=np.int64):
        return np.fromiter((getattr(j, attr) for j in jobs), dtype=dtype, count=n)

    def run():
        start, end = f("start"), f("end")
        ended = np.array([j.outcome in ("completed", "timeout") for j in jobs], dtype=bool)
        # A failed job's "end" is when it was dropped; only ended jobs have a run.
        return np.where(ended, end - start, math.nan)

    makers = {
        "job_id": lambda: i("id"), "user": lambda: i("user"), "submit": lambda: f("submit"),
        "start": lambda: f("start"), "end": lambda: f("end"), "run": run,
        "req_time": lambda: f("req_time"), "estimate": lambda: f("estimate"),
        "procs": lambda: i("procs"), "mem": lambda: f("mem"),
        "outcome": lambda: [j.outcome for j in jobs], "mode": lambda: [j.mode for j in jobs],
        "reason": lambda: [j.reason for j in jobs], "attempts": lambda: i("attempts", np.int32),
        "killed_seconds": lambda: f("killed_seconds"),
        "killed_core_seconds": lambda: f("killed_core_seconds"),
        "reservation": lambda: f("reservation"),
    }
    return {name: makers[name]() for name in (columns or makers)}


def _rows_to_columns(rows: list[tuple], names: tuple[str, ...], dtypes: tuple
                     ) -> dict[str, np.ndarray | list]:
    cols = list(zip(*rows)) if rows else [()] * len(names)
    return {name: (list(col) if dt is None else np.asarray(col, dtype=dt))
            for name, col, dt in zip(names, cols, dtypes)}


def events_table(rows: list[tuple]) -> dict[str, np.ndarray | list]:
    """Columns of ``events.parquet`` (schema ``events/1``) from the scheduler's event rows."""
    return _rows_to_columns(rows, EVENT_COLUMNS, _EVENT_DTYPES)


def decisions_table(rows: list[tuple]) -> dict[str, np.ndarray | list]:
    """Columns of ``decisions.parquet`` (schema ``decisions/1``) from the decision rows."""
    return _rows_to_columns(rows, DECISION_COLUMNS, _DECISION_DTYPES)


def write_run(out_dir: str | os.PathLike, *, jobs: Mapping[str, Any],
              events: Mapping[str, Any], decisions: Mapping[str, Any], cores: int,
              policy: str, tau: float = 10.0, meta: Mapping[str, Any] | None = None,
              summary: Mapping[str, Any] | None = None,
              job_features: Mapping[str, Any] | None = None,
              feature_labels: Mapping[str, Mapping[int, str]] | None = None
              ) -> dict[str, Path]:
    """Write a run's results folder: three tables and ``summary.json``.

    Args:
        out_dir: the results folder (created if needed).
        jobs, events, decisions: the engine's tables (column dicts).
        cores: nominal total cores of the machine.
        policy: policy name.
        tau: bounded-slowdown bound in seconds.
        meta: extra run metadata (seed, scenario name, ...), stored with
            every table and in the summary under ``meta``.
        summary: precomputed metrics; computed with
            :func:`cosim.metrics.summarize` when omitted.
        job_features, feature_labels: trace fields for ``jobs.parquet``, name
            -> one id per job row, and name -> {id: label} (:func:`jobs_schema`).

    Returns:
        File role (``"jobs"``, ``"events"``, ``"decisions"``, ``"summary"``) -> path.
    """
    run_meta = {"cores": int(cores), "policy": str(policy), "tau": float(tau),
                **dict(meta or {})}
    out = Path(out_dir)
    paths = {
        "jobs": write_table(out / "jobs.parquet", {**jobs, **(job_features or {})},
                            jobs_schema({name: (feature_labels or {}).get(name, {})
                                         for name in job_features or {}}), run_meta),
        "events": write_table(out / "events.parquet", events, EVENTS_SCHEMA, run_meta),
        "decisions": write_table(out / "decisions.parquet", decisions, DECISIONS_SCHEMA,
                                 run_meta),
    }
    if summary is None:
        from cosim.metrics import summarize  # metrics does not import records

        summary = summarize(jobs, events, cores=cores, tau=tau)
    doc = {"schema": "summary/1", "policy": str(policy), "meta": run_meta,
           "metrics": dict(summary)}
    paths["summary"] = write_json_atomic(out / "summary.json", doc)
    return paths
