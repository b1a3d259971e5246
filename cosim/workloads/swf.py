"""Read and write traces in the Standard Workload Format (SWF).

SWF (Parallel Workloads Archive, Feitelson et al.) has one job per line with
18 whitespace-separated numeric fields; lines starting with ``;`` are header
or comment lines (``; MaxProcs: 256``). Field meanings are listed in
``METRICS.md``; -1 means unknown.

:func:`read_swf` turns a trace into a :class:`~cosim.workloads.base.Workload`
and applies the cleaning rules below. Every rule is counted in
``Workload.cleaning`` under its name (all names are always present, with 0
when the rule never fired), so a report can say exactly what was changed.
Drop rules are checked in this order and a dropped job is counted once, under
the first rule that drops it:

==========================  ==========================================================
rule name                   what happens
==========================  ==========================================================
``status_dropped``          status (field 11) not among those kept (``status=``)
``submit_unknown_dropped``  submit time (field 2) < 0, i.e. unknown (the log starts at 0)
``run_unknown_dropped``     run time (field 4) < 0, i.e. unknown: job dropped
``run_zero_dropped``        run time == 0 and ``drop_zero_run=True``: job dropped
``run_zero_kept``           run time == 0 and ``drop_zero_run=False``: kept, counted
``procs_unknown_dropped``   neither allocated (5) nor requested (8) processors > 0
``procs_over_machine_dropped``  procs > machine size: job dropped
``procs_fallback``          the preferred processor field was <= 0, the other one used
``req_time_missing``        requested time (field 9) <= 0: set to max(run, 1 s)
``run_exceeds_request``     run > requested time (a real estimate): kept, counted
``submit_out_of_order``     job submitted before its predecessor in the file: re-sorted
                            (stably, equal submits keep file order), counted, warned
==========================  ==========================================================

Refused, not cleaned (one line naming ``file:line``): a count or id field
(job, processors, status, user, group, executable, queue, partition,
preceding job) that is not a whole number within int64, a time beyond
:data:`MAX_SECONDS`, and a header ``MaxProcs``/``MaxNodes`` that is not a
whole number above 0.

Status: the Parallel Workloads Archive codes field 11 as 1 completed, 0
failed, 5 cancelled (-1 unknown; other values for checkpointed or swapped
jobs). ``status="all"`` (the default) keeps every job, ``"completed"`` only
the completed ones, and a code or a list of codes keeps those;
``Workload.status_counts`` counts every code in the file, whichever is kept,
and the kept jobs' codes are ``features["status"]``.

Processors: ``procs`` is the allocated count (field 5) when it is > 0, else
the requested count (field 8); ``use_allocated=False`` swaps the preference.
The machine size is the ``max_procs`` argument, else the header's
``MaxProcs``, else ``MaxNodes``, else the largest job in the file
(``Workload.machine_source`` says which).

Memory: SWF stores kilobytes per processor. ``mem`` (GB for the whole job) is
``kb * procs / 1024**2``, taken from the requested memory (field 10) when it
is > 0, else the used memory (field 7), else 0 (not modelled). The request
comes first because that is what a scheduler reserves.

Trace fields: group, executable, queue and partition (fields 13-16) are kept
as integer ids in ``features`` (-1 unknown); the header's ``UnixStartTime``
and ``TimeZoneString`` become ``Workload.epoch`` and ``Workload.timezone``
(the site's clock, for the submit hour and weekday).

Examples:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.swf")
    >>> with open(path, "w") as f:
    ...     _ = f.write("; MaxProcs: 4\\n1 0 -1 10 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1 -1\\n")
    >>> w = read_swf(path)
    >>> len(w), int(w.procs[0]), float(w.req_time[0]), w.max_procs
    (1, 2, 60.0, 4)
"""

from __future__ import annotations

import gzip
import io
import itertools
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim.errors import InputError, WorkloadError
from cosim.workloads.base import Workload, read_input

__all__ = ["SWF_FIELDS", "CLEANING_RULES", "STATUS_NAMES", "SwfHeader", "read_swf",
           "read_swf_header", "write_swf", "status_codes"]

#: The 18 SWF fields in file order (1-based field i is ``SWF_FIELDS[i - 1]``).
SWF_FIELDS: tuple[str, ...] = (
    "job_id", "submit", "wait", "run", "alloc_procs", "avg_cpu", "used_mem",
    "req_procs", "req_time", "req_mem", "status", "user", "group", "executable",
    "queue", "partition", "prev_job", "think",
)

#: Names of the cleaning rules :func:`read_swf` counts, in the order they apply.
CLEANING_RULES: tuple[str, ...] = (
    "status_dropped",
    "submit_unknown_dropped",
    "run_unknown_dropped",
    "run_zero_dropped",
    "run_zero_kept",
    "procs_unknown_dropped",
    "procs_over_machine_dropped",
    "procs_fallback",
    "req_time_missing",
    "run_exceeds_request",
    "submit_out_of_order",
)

#: Names of the SWF status codes (field 11) of the Parallel Workloads Archive.
STATUS_NAMES: dict[int, str] = {1: "completed", 0: "failed", 5: "cancelled", -1: "unknown",
                                2: "partial (to be continued)", 3: "partial (last)",
                                4: "partial (failed)"}

_N_FIELDS = len(SWF_FIELDS)


def status_codes(status: str | int | list[int] | tuple[int, ...]) -> frozenset[int] | None:
    """The status codes a ``status=`` choice keeps (None: every code).

    Raises:
        InputError: a choice that is neither ``all``, ``completed``, a code nor a list of codes.
    """
    if status == "all":
        return None
    if status == "completed":
        return frozenset({1})
    if isinstance(status, bool):
        status = [status]   # not a code: refused below
    if isinstance(status, int | np.integer):
        return frozenset({int(status)})
    if isinstance(status, list | tuple) and status and all(
            isinstance(c, int | np.integer) and not isinstance(c, bool) for c in status):
        return frozenset(int(c) for c in status)
    raise InputError("workload.params.status", repr(status),
                     "all, completed, a status code (1 completed, 0 failed, 5 cancelled) "
                     "or a list of codes")
_KB_PER_GB = 1024.0**2


@dataclass
class SwfHeader:
    """Header key/values of an SWF file.

    Attributes:
        max_procs: ``MaxProcs`` as an int, or 0 when absent (a stated value
            that is not a whole number above 0 is refused).
        max_nodes: ``MaxNodes`` as an int, or 0 when absent.
        fields: every ``; Key: value`` header line, key -> value (stripped).
            A key that appears several times (``Queue``) keeps all its values
            joined by newlines, in file order.
    """

    max_procs: int = 0
    max_nodes: int = 0
    fields: dict[str, str] = field(default_factory=dict)


def _read_bytes(path: Path) -> bytes:
    return read_input(path, "an SWF trace (.swf or .swf.gz)")


def _comment_lines(raw: bytes) -> list[bytes]:
    """Text after ';' of every line whose first non-blank character is ';'."""
    # bytes.find jumps between ';' characters at C speed; a line-by-line or
    # multiline-regex scan costs ~0.3 s on a 448k-line trace.
    out = []
    pos = raw.find(b";")
    while pos != -1:
        start = raw.rfind(b"\n", 0, pos) + 1
        end = raw.find(b"\n", pos)
        end = len(raw) if end == -1 else end
        if not raw[start:pos].strip():
            out.append(raw[pos + 1 : end].rstrip(b"\r"))
        pos = raw.find(b";", end)
    return out


def _parse_header(raw: bytes, where: str) -> SwfHeader:
    """Collect ``; Key: value`` lines; comment lines without a colon are ignored.

    Raises:
        WorkloadError: ``MaxProcs`` or ``MaxNodes`` stated but not a whole number above 0.
    """
    header = SwfHeader()
    for body in _comment_lines(raw):
        text = body.decode("utf-8", errors="replace").strip()
        key, sep, value = text.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key or " " in key:
            continue
        prev = header.fields.get(key)
        header.fields[key] = value if prev is None else f"{prev}\n{value}"
    header.max_procs = _header_int(header.fields.get("MaxProcs"), "MaxProcs", where)
    header.max_nodes = _header_int(header.fields.get("MaxNodes"), "MaxNodes", where)
    return header


def _header_int(value: str | None, key: str, where: str) -> int:
    """A machine size the header states, 0 when it states none.

    A stated size that is not a whole number above 0 (``0``, ``-8``,
    ``lots``) is refused: replayed, it would silently become the largest
    job's width, a different machine than the trace's.
    """
    if value is None:
        return 0
    first = value.split()[0] if value.split() else ""
    try:
        number = float(first)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number == int(number) and number > 0):
        raise WorkloadError(f"{where}: header {key}", repr(value.split("\n")[0]),
                            "a whole number of processors above 0 (or no such header line)")
    return int(number)


def read_swf_header(path: str | os.PathLike) -> SwfHeader:
    """Parse only the header comments of an SWF file (plain or gzip).

    Args:
        path: the trace file.

    Returns:
        The header key/values and the machine size it states.

    Raises:
        InputError: the file does not exist or cannot be read.
    """
    return _parse_header(_read_bytes(Path(path)), str(path))


def _locate_bad_line(raw: bytes, path: Path) -> WorkloadError | None:
    """Scan line by line for the first malformed job line (slow path, errors only)."""
    for lineno, line in enumerate(raw.splitlines(), start=1):
        body = line.split(b";", 1)[0]
        tokens = body.split()
        if not tokens:
            continue
        where = f"{path}:{lineno}"
        shown = body.strip().decode("utf-8", errors="replace")
        if len(shown) > 80:
            shown = shown[:77] + "..."
        if len(tokens) != _N_FIELDS:
            return WorkloadError(
                where, f"{len(tokens)} fields in {shown!r}", f"{_N_FIELDS} numeric fields per job line"
            )
        for col, tok in enumerate(tokens, start=1):
            try:
                value = float(tok)
            except ValueError:
                value = math.nan
            if not math.isfinite(value) or b"_" in tok:
                return WorkloadError(
                    where,
                    f"{tok.decode('utf-8', errors='replace')!r} in field {col} ({SWF_FIELDS[col - 1]})",
                    f"{_N_FIELDS} numeric fields per job line",
                )
    return None


def _parse_table(raw: bytes, path: Path) -> np.ndarray:
    """All job lines as an (n, 18) float array; malformed lines raise WorkloadError."""
    # np.loadtxt parses in C (about 0.7 s for the 448k-job RICC trace); its own
    # error messages count rows inconsistently, so on failure a Python scan
    # finds the offending line and names it by file line number.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
            table = np.loadtxt(io.BytesIO(raw), comments=";", dtype=np.float64, ndmin=2)
    except ValueError as e:
        bad = _locate_bad_line(raw, path)
        if bad is not None:
            raise bad from None
        raise WorkloadError(str(path), f"unparseable content ({e})", "an SWF trace") from None
    if table.size == 0:
        return np.empty((0, _N_FIELDS))
    if table.shape[1] != _N_FIELDS or not np.isfinite(table).all():
        bad = _locate_bad_line(raw, path)
        if bad is not None:
            raise bad
    _check_times(table, raw, path)
    _check_whole(table, raw, path)
    return table


#: Largest time an SWF field may hold (s, about 317 years): a run time of
#: 1e308 would turn every mean into a 300-digit number, not a result.
MAX_SECONDS = 1e10
_TIME_FIELDS = (2, 3, 4, 9, 18)    # submit, wait, run, req_time, think (1-based)


def _check_times(table: np.ndarray, raw: bytes, path: Path) -> None:
    """Refuse times beyond :data:`MAX_SECONDS`, naming the file line."""
    cols = [c - 1 for c in _TIME_FIELDS]
    over = np.abs(table[:, cols]) > MAX_SECONDS
    if not over.any():
        return
    row, k = np.argwhere(over)[0]
    col = _TIME_FIELDS[k]
    name = SWF_FIELDS[col - 1].replace("_", " ")
    name = "run time" if name == "run" else name
    raise WorkloadError(f"{path}:{_job_lineno(raw, int(row))}",
                        f"{name} {table[row, col - 1]:g} s in field {col}",
                        f"times of at most {MAX_SECONDS:g} s (about 317 years)")


def _job_lineno(raw: bytes, row: int) -> int:
    """The file line number of job line ``row`` (0-based), for a message (slow path)."""
    job_lines = (i for i, line in enumerate(raw.splitlines(), start=1)
                 if line.split(b";", 1)[0].split())
    return next(itertools.islice(job_lines, row, None))


#: Fields that hold counts and ids (1-based): job, processors, status, user,
#: group, executable, queue, partition, preceding job. Each must be a whole
#: number within int64: 2.5 processors or a user id of 10**23 is no job.
_WHOLE_FIELDS = (1, 5, 8, 11, 12, 13, 14, 15, 16, 17)


def _check_whole(table: np.ndarray, raw: bytes, path: Path) -> None:
    """Refuse a count or id field that is not a whole number within int64, naming the line."""
    cols = table[:, [c - 1 for c in _WHOLE_FIELDS]]
    bad = (cols != np.floor(cols)) | (np.abs(cols) >= 2.0**63)
    if not bad.any():
        return
    row, k = np.argwhere(bad)[0]
    col = _WHOLE_FIELDS[k]
    value = table[row, col - 1]
    raise WorkloadError(f"{path}:{_job_lineno(raw, int(row))}",
                        f"{value:g} in field {col} ({SWF_FIELDS[col - 1]})",
                        "a whole number within int64 (a count or an id)")


def read_swf(
    path: str | os.PathLike,
    *,
    max_procs: int | None = None,
    use_allocated: bool = True,
    drop_zero_run: bool = False,
    status: str | int | list[int] = "all",
) -> Workload:
    """Read an SWF trace (plain or gzip) into a cleaned, submit-sorted workload.

    Args:
        path: the trace (``.swf``; gzip is detected from the content).
        max_procs: machine size in processors; jobs larger than it are
            dropped. Default: the header's ``MaxProcs``, else ``MaxNodes``,
            else the largest job.
        use_allocated: prefer allocated processors (field 5) over requested
            (field 8); the other field is the fallback when the first is <= 0.
        drop_zero_run: drop jobs whose run time is 0 instead of keeping them.
        status: which jobs to keep by status (field 11): ``"all"``,
            ``"completed"``, a code or a list of codes (see the module docstring).

    Returns:
        The workload. ``cleaning`` counts every rule listed in the module
        docstring, ``source`` is the path, ``max_procs`` the machine size used
        and ``max_nodes`` the header's ``MaxNodes`` (0 if absent). The header
        itself is available from :func:`read_swf_header`.

    Raises:
        InputError: the file is missing or unreadable, ``max_procs`` is not
            a positive integer, or ``status`` is not a valid choice.
        WorkloadError: a job line does not have 18 numeric fields, or a count
            or id that is not a whole number within int64 (the message names
            ``path:line``); a header machine size that is not a whole number above 0.
    """
    path = Path(path)
    if max_procs is not None and (
        isinstance(max_procs, bool) or not isinstance(max_procs, int | np.integer) or max_procs <= 0
    ):
        raise InputError("max_procs", repr(max_procs), "a positive integer number of processors")
    keep_status = status_codes(status)
    raw = _read_bytes(path)
    header = _parse_header(raw, str(path))
    table = _parse_table(raw, path)
    del raw

    run = table[:, 3]
    first, second = (table[:, 4], table[:, 7]) if use_allocated else (table[:, 7], table[:, 4])
    fallback = first <= 0
    procs_f = np.where(fallback, second, first)

    cleaning = dict.fromkeys(CLEANING_RULES, 0)
    keep = np.ones(len(table), dtype=bool)
    codes = np.rint(table[:, 10]).astype(np.int64)
    found, counts = np.unique(codes, return_counts=True)
    status_counts = {int(c): int(k) for c, k in zip(found, counts, strict=True)}

    def drop(rule: str, mask: np.ndarray) -> None:
        hit = mask & keep
        cleaning[rule] = int(hit.sum())
        keep[hit] = False

    if keep_status is not None:
        drop("status_dropped", ~np.isin(codes, sorted(keep_status)))
    # SWF counts time from the log's start, so a negative submit is -1, "unknown":
    # replayed at time 0 it would change the job's wait and its order.
    drop("submit_unknown_dropped", table[:, 1] < 0)
    drop("run_unknown_dropped", run < 0)
    if drop_zero_run:
        drop("run_zero_dropped", run == 0)
    else:
        cleaning["run_zero_kept"] = int(((run == 0) & keep).sum())
    drop("procs_unknown_dropped", procs_f <= 0)

    machine = max_procs or header.max_procs or header.max_nodes
    source = ("" if max_procs else "header MaxProcs" if header.max_procs
              else "header MaxNodes" if header.max_nodes else "largest job")
    if not machine:
        machine = int(procs_f[keep].max()) if keep.any() else 0
    drop("procs_over_machine_dropped", procs_f > machine)

    t = table[keep]
    run = t[:, 3]
    procs = np.rint(procs_f[keep]).astype(np.int64)
    cleaning["procs_fallback"] = int(fallback[keep].sum())

    req = t[:, 8]
    missing = req <= 0
    cleaning["req_time_missing"] = int(missing.sum())
    cleaning["run_exceeds_request"] = int((~missing & (run > req)).sum())
    req = np.where(missing, np.maximum(run, 1.0), req)

    kb = np.where(t[:, 9] > 0, t[:, 9], np.where(t[:, 6] > 0, t[:, 6], 0.0))
    mem = kb * procs / _KB_PER_GB

    submit = t[:, 1]
    cleaning["submit_out_of_order"] = int((np.diff(submit) < 0).sum()) if len(submit) else 0

    return Workload.from_columns(
        job_id=t[:, 0],
        submit=submit,
        run=run,
        procs=procs,
        req_time=req,
        mem=mem,
        user=t[:, 11],
        prev_job=t[:, 16],
        think=t[:, 17],
        # Per job, so that a window of the trace counts its own missing times.
        features={"status": codes[keep], "wait": t[:, 2], "req_time_missing": missing,
                  **_trace_features(t)},
        max_procs=int(machine),
        max_nodes=header.max_nodes,
        machine_source=source,
        cleaning=cleaning,
        status_counts=status_counts,
        source=str(path),
        epoch=_header_float(header.fields.get("UnixStartTime")),
        timezone=header.fields.get("TimeZoneString", "").split("\n")[0].strip(),
    )


def _trace_features(t: np.ndarray) -> dict[str, np.ndarray]:
    """Fields 13-16 (group, executable, queue, partition) as integer ids, -1 unknown."""
    return {name: np.rint(t[:, SWF_FIELDS.index(name)]).astype(np.int64)
            for name in ("group", "executable", "queue", "partition")}


def _header_float(value: str | None) -> float | None:
    """A header number (``UnixStartTime``), or None when absent or not a number."""
    try:
        number = float(value.split()[0]) if value else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _fmt(values: np.ndarray) -> np.ndarray:
    """Shortest round-trip text for each value; integral values without '.0'."""
    values = np.asarray(values, dtype=np.float64)
    integral = (values == np.floor(values)) & (np.abs(values) < 2**53)
    out = np.zeros(len(values), dtype="<U24")
    # numpy's float -> str conversion is the shortest repr that reads back exactly
    out[~integral] = values[~integral].astype(str)
    out[integral] = values[integral].astype(np.int64).astype(str)
    return out


def write_swf(workload: Workload, path: str | os.PathLike, *, header: dict[str, str] | None = None) -> Path:
    """Write a workload as an SWF trace that :func:`read_swf` reads back unchanged.

    The file is written under a temporary name and renamed, so an interrupted
    write never leaves a truncated trace. A path ending in ``.gz`` is gzip
    compressed. Fields the workload does not carry are written as -1; status
    is ``features["status"]`` when the workload has it, else 1 (completed);
    ``features["group"]``, ``["executable"]``, ``["queue"]`` and
    ``["partition"]`` go to fields 13-16 when present; allocated and requested processors are both ``procs``;
    memory goes to field 10 as KB per processor.

    Args:
        workload: the jobs to write.
        path: destination file.
        header: extra ``; Key: value`` header lines (after the standard ones).

    Returns:
        The path written.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), "a folder", "a file path for the SWF trace (e.g. "
                         f"{path / 'jobs.swf'})")
    w = workload
    n = len(w)
    lines = [
        "; Version: 2.2",
        "; Computer: hpc-cosim",
        f"; Note: written by hpc-cosim from {w.source or 'a generated workload'}",
        f"; MaxJobs: {n}",
        f"; MaxRecords: {n}",
    ]
    if w.max_procs > 0:
        lines.append(f"; MaxProcs: {w.max_procs}")
    if w.max_nodes > 0:
        lines.append(f"; MaxNodes: {w.max_nodes}")
    if w.epoch is not None:
        lines.append(f"; UnixStartTime: {_fmt(np.array([w.epoch]))[0]}")
    if w.timezone:
        lines.append(f"; TimeZoneString: {w.timezone}")
    for key, value in (header or {}).items():
        for part in str(value).splitlines() or [""]:
            lines.append(f"; {key}: {part}")

    procs = w.procs.astype(np.float64)
    mem_kb = np.where(w.mem > 0, w.mem * _KB_PER_GB / np.maximum(procs, 1.0), -1.0)
    minus1 = ["-1"] * n
    procs_text = _fmt(procs).tolist()

    def feature(name: str, default: list[str]) -> list[str]:
        return _fmt(w.features[name]).tolist() if name in w.features else default

    cols = [
        _fmt(w.job_id).tolist(), _fmt(w.submit).tolist(), feature("wait", minus1),
        _fmt(w.run).tolist(), procs_text,
        minus1, minus1, procs_text, _fmt(w.req_time).tolist(), _fmt(mem_kb).tolist(),
        feature("status", ["1"] * n), _fmt(w.user).tolist(), feature("group", minus1),
        feature("executable", minus1), feature("queue", minus1), feature("partition", minus1), _fmt(w.prev_job).tolist(),
        _fmt(w.think).tolist(),
    ]
    lines.extend(map(" ".join, zip(*cols, strict=True)))
    data = ("\n".join(lines) + "\n").encode()

    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6, mtime=0)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        # A folder or an unwritable place where the file should go: one line,
        # and no half-written trace left beside it.
        tmp.unlink(missing_ok=True)
        raise InputError(str(path), exc.strerror or type(exc).__name__,
                         "a writable file path for the SWF trace") from None
    return path
