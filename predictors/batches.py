"""Checks of prediction batches and request bodies, before they reach a model.

The simulation sends one batch of JSON-able columns per call (the layout is
in :mod:`cosim.prediction_hub`); :func:`validate_batch` checks it, in process
(:class:`predictors.service.InProcessService`) and behind the HTTP server
(:mod:`predictors.server`, which first reads the request body with
:func:`parse_request`), so both reject the same batches with the same
message. Every problem is a :class:`BatchError` naming the key path of the
bad part (``"jobs.ENCUT"``), which the server returns as the ``field`` of
its 400 answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from cosim.errors import InputError

__all__ = ["BatchError", "validate_batch", "required_columns", "parse_request",
           "DEFAULT_MAX_BATCH", "KINDS", "REMAINING_COLUMNS", "FEATURE_RANGES", "DEFAULT_RANGE",
           "REMAINING_RANGE", "HugeInt"]

#: The two batched calls.
KINDS = ("runtime", "remaining")

#: Columns a remaining-time batch carries besides the features.
REMAINING_COLUMNS = ("elapsed", "scf_done", "prerun", "progress")

#: Largest batch (jobs) a call accepts by default: ten times a big decision point.
DEFAULT_MAX_BATCH = 100_000

#: Accepted range of each numeric feature of RLSchert's Table 1, inclusive.
#: Wide on purpose (a run far bigger than any today passes): they catch
#: values no VASP run has, such as a negative core count, and the huge
#: magnitudes that would overflow the float32 a model computes in.
#: Integer-coded INCAR tags may be negative (ISMEAR = -5, IBRION = -1).
FEATURE_RANGES: dict[str, tuple[float, float]] = {
    "NELECT": (0.0, 1e7), "NSW": (0.0, 1e9), "SystemVolume": (0.0, 1e10),
    "AtomNumber": (0.0, 1e7), "ElecNumber": (0.0, 1e8), "NELM": (0.0, 1e6),
    "ElementTypeNumber": (0.0, 200.0), "ENCUT": (0.0, 1e5), "EDIFFG": (-1e6, 1e6),
    "EDIFF": (0.0, 1e6), "numExhosts": (0.0, 1e6), "cores": (0.0, 1e8),
    "NELMIN": (0.0, 1e6), "ISPIN": (1.0, 2.0), "SIGMA": (0.0, 1e3),
    "ICHARG": (-1e4, 1e4), "ISYM": (-1e4, 1e4), "ISMEAR": (-1e4, 1e4),
    "IBRION": (-1e4, 1e4), "ISTART": (-1e4, 1e4),
}
#: Range of any other numeric feature (a site's own model).
DEFAULT_RANGE: tuple[float, float] = (-1e15, 1e15)
#: Range of ``elapsed``, ``scf_done`` and ``prerun`` (seconds or steps; 10^10 s
#: is three centuries) and of every number in ``progress`` rows.
REMAINING_RANGE: tuple[float, float] = (0.0, 1e10)


class BatchError(InputError):
    """A request or batch fails validation; ``field`` is its key path (``"jobs.ENCUT"``)."""

    def __init__(self, field: str, found: str, expected: str, hint: str = ""):
        super().__init__(field, found, expected, hint)
        self.field = field


# ----------------------------------------------------------------------------- validation

_NUMBER_TYPES = frozenset({int, float})
_NUMBER_OR_NULL = frozenset({int, float, type(None)})
_ID_TYPES = frozenset({int, str})
_CATEGORY_TYPES = frozenset({str, int, float, bool, type(None)})


def _json_type(v: Any) -> str:
    """How a value reads in a JSON-minded error message."""
    if v is None:
        return "null"
    if isinstance(v, bool | np.bool_):
        return "a boolean"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, int | float | np.integer | np.floating):
        return "a number"
    if isinstance(v, list | tuple):
        return "a list"
    if isinstance(v, Mapping):
        return "an object"
    return f"a {type(v).__name__}"


def _show(v: Any) -> str:
    if isinstance(v, HugeInt):
        return repr(v)
    text = json.dumps(v) if isinstance(v, str | int | float | bool | type(None)) else repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _what(v: Any) -> str:
    """A value and its JSON type, for "got ..." in messages."""
    return "null" if v is None else f"{_show(v)} ({_json_type(v)})"


def _is_number(v: Any, allow_none: bool = False) -> bool:
    if v is None:
        return allow_none
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)


def _check_list(batch: Mapping[str, Any], name: str, n: int | None, where: str) -> Any:
    field = f"{where}.{name}"
    if name not in batch:
        raise BatchError(field, "no such column", "a column with one value per job")
    col = batch[name]
    if isinstance(col, np.ndarray):
        if col.ndim != 1:
            raise BatchError(field, f"an array of shape {col.shape}", "a flat list of values")
    elif not isinstance(col, list | tuple):
        raise BatchError(field, _json_type(col), "a list with one value per job")
    if n is not None and len(col) != n:
        raise BatchError(field, f"{len(col)} values",
                         f"{n} values, one per job like {where}.job_id")
    return col


def _fmt_bound(x: float) -> str:
    return f"{x:g}"


def _check_numbers(col: Any, field: str, *, allow_none: bool,
                   bounds: tuple[float, float]) -> None:
    """Numbers (or null, when allowed), finite and within ``bounds``; NaN and
    infinities are refused: JSON's spelling of "unknown" is null."""
    if isinstance(col, np.ndarray):
        if col.dtype.kind not in "iuf":
            raise BatchError(field, f"an array of dtype {col.dtype}", "numbers")
    elif not set(map(type, col)) <= (_NUMBER_OR_NULL if allow_none else _NUMBER_TYPES):
        # slow path: find the row, and let numpy scalars of in-process callers through
        for i, v in enumerate(col):
            if not _is_number(v, allow_none):
                what = "numbers (null for unknown)" if allow_none else "numbers"
                raise BatchError(field, f"{_what(v)} in row {i}", what)
    if not len(col):
        return
    arr = np.asarray(col if isinstance(col, np.ndarray) else
                     [math.nan if v is None else v for v in col] if allow_none else col,
                     dtype=np.float64)
    known = np.ones(len(arr), dtype=bool) if isinstance(col, np.ndarray) or not allow_none \
        else np.fromiter((v is not None for v in col), dtype=bool, count=len(col))
    lo, hi = bounds
    with np.errstate(invalid="ignore"):
        bad = known & ~((arr >= lo) & (arr <= hi))   # NaN fails both tests
    if bad.any():
        i = int(np.argmax(bad))
        v = float(arr[i])
        kind = ("finite numbers" if not math.isfinite(v) else "numbers")
        unknown = " (null for unknown)" if allow_none else ""
        sent = col[i] if not isinstance(col, np.ndarray) else v
        raise BatchError(field, f"{sent if isinstance(sent, HugeInt) else v!r} in row {i}",
                         f"{kind} in [{_fmt_bound(lo)}, {_fmt_bound(hi)}]{unknown}")


def _check_progress(col: Any, field: str) -> None:
    expected = "per job a list of rows [elapsed, denergy, max_force, scf_steps] of numbers"
    # Fast path for JSON-parsed lists: a few C-level passes over all rows.
    if set(map(type, col)) <= {list}:
        rows = list(chain.from_iterable(col))
        if set(map(type, rows)) <= {list} and set(map(len, rows)) <= {4} \
                and set(map(type, chain.from_iterable(rows))) <= _NUMBER_TYPES:
            _check_progress_values(col, rows, field)
            return
    for i, entry in enumerate(col):
        if isinstance(entry, np.ndarray):
            if entry.size and (entry.ndim != 2 or entry.shape[1] != 4 or entry.dtype.kind not in "iuf"):
                raise BatchError(field, f"an array of shape {entry.shape} and dtype {entry.dtype} "
                                 f"in row {i}", expected)
            continue
        if not isinstance(entry, list | tuple):
            raise BatchError(field, f"{_what(entry)} in row {i}", expected)
        for r, step in enumerate(entry):
            if not isinstance(step, list | tuple | np.ndarray) or len(step) != 4:
                raise BatchError(field, f"{_show(step)} in row {i}, step {r}", expected)
            for v in step:
                if not _is_number(v):
                    raise BatchError(field, f"{_what(v)} in row {i}, step {r}",
                                     expected)
    rows = [step for entry in col for step in (entry.tolist() if isinstance(entry, np.ndarray)
                                                else entry)]
    _check_progress_values(col, rows, field)


def _check_progress_values(col: Any, rows: list, field: str) -> None:
    """Every progress number finite; elapsed and SCF steps >= 0 (denergy may be negative)."""
    if not rows:
        return
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    lo, hi = REMAINING_RANGE
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(arr) & (np.abs(arr) <= hi)
        ok[:, [0, 3]] &= arr[:, [0, 3]] >= lo
    if not ok.all():
        flat = int(np.argmax(~ok.all(axis=1)))
        # name the job and step of the first bad row
        ends = np.cumsum([len(entry) for entry in col])
        job = int(np.searchsorted(ends, flat, side="right"))
        step = flat - (int(ends[job - 1]) if job else 0)
        raise BatchError(field, f"{arr[flat].tolist()!r} in row {job}, step {step}",
                         f"finite numbers within +-{_fmt_bound(hi)} (elapsed and scf_steps "
                         ">= 0)")


def required_columns(kind: str, feature_names: Sequence[str]) -> list[str]:
    """Columns a ``kind`` batch must carry: ``job_id``, the features, and for remaining more."""
    cols = ["job_id", *[f for f in feature_names if f != "job_id"]]
    if kind == "remaining":
        cols += [c for c in REMAINING_COLUMNS if c not in cols]
    return cols


def validate_batch(batch: Any, *, kind: str, feature_names: Sequence[str],
                   categorical: Sequence[str] = (), max_batch: int = DEFAULT_MAX_BATCH,
                   where: str = "jobs") -> int:
    """Check a batch before it reaches a model; returns its number of jobs.

    Checks that the batch is a mapping, that every required column
    (:func:`required_columns`) is a list with one value per job, that
    ``job_id`` holds strings or integers, numeric features numbers or null
    (unknown), finite and within :data:`FEATURE_RANGES` (a negative core
    count, NaN or 1e308 are refused: null is how a batch says "unknown"),
    categorical features strings, numbers, booleans or null,
    ``elapsed``/``scf_done``/``prerun`` finite numbers in
    :data:`REMAINING_RANGE` and ``progress`` per job a (possibly empty) list
    of 4-number rows, all finite. Columns it does not know (``user``,
    ``req_time``) are ignored.

    Args:
        batch: the column dict (parsed JSON, or lists/arrays in process).
        kind: ``"runtime"`` or ``"remaining"``.
        feature_names: the model's feature columns (``ModelBundle.feature_names``).
        categorical: which of them are categorical.
        max_batch: most jobs accepted.
        where: key path of the batch in messages.

    Raises:
        BatchError: the first problem found, with its key path in ``field``.

    Examples:
        >>> validate_batch({"job_id": [1, 2], "ENCUT": [400, None]}, kind="runtime",
        ...                feature_names=["ENCUT"])
        2
        >>> validate_batch({"job_id": [1, 2], "ENCUT": [400, "high"]}, kind="runtime",
        ...                feature_names=["ENCUT"])
        Traceback (most recent call last):
        ...
        predictors.batches.BatchError: jobs.ENCUT: expected numbers (null for unknown), got "high" (a string) in row 1
    """
    if kind not in KINDS:
        raise BatchError("kind", repr(kind), f"one of {list(KINDS)}")
    if not isinstance(batch, Mapping):
        raise BatchError(where, _json_type(batch), "an object mapping column names to lists")
    ids = _check_list(batch, "job_id", None, where)
    n = len(ids)
    if n > max_batch:
        raise BatchError(f"{where}.job_id", f"{n} jobs", f"at most {max_batch} jobs per call",
                         "split the batch")
    if not isinstance(ids, np.ndarray) and not set(map(type, ids)) <= _ID_TYPES:
        for i, v in enumerate(ids):
            if not isinstance(v, str | int | np.integer | np.str_) or isinstance(v, bool):
                raise BatchError(f"{where}.job_id", f"{_what(v)} in row {i}",
                                 "strings or integers")
    cats = set(categorical)
    for name in required_columns(kind, feature_names)[1:]:
        col = _check_list(batch, name, n, where)
        field = f"{where}.{name}"
        if name == "progress":
            _check_progress(col, field)
        elif name in cats:
            if not isinstance(col, np.ndarray) and not set(map(type, col)) <= _CATEGORY_TYPES:
                for i, v in enumerate(col):
                    if not (isinstance(v, str | bool | np.str_) or _is_number(v, True)):
                        raise BatchError(field, f"{_what(v)} in row {i}",
                                         "strings (or numbers, null for unknown)")
        elif name in REMAINING_COLUMNS:
            _check_numbers(col, field, allow_none=False, bounds=REMAINING_RANGE)
        else:
            _check_numbers(col, field, allow_none=True,
                           bounds=FEATURE_RANGES.get(name, DEFAULT_RANGE))
    return n


# ----------------------------------------------------------------------------- request bodies


class HugeInt(float):
    """An integer literal of a request too big for a float64 (parsed as +-inf).

    JSON has no size limit on integers, and Python would parse one of 400
    digits into an int that no column can use (numpy cannot convert it, and
    past 4,300 digits Python refuses to parse it at all). Parsed as an
    infinity instead, it fails the range checks like any other out-of-range
    number, and the message tells the client what it sent.
    """

    digits: int

    def __new__(cls, text: str) -> HugeInt:
        value = super().__new__(cls, "-inf" if text.startswith("-") else "inf")
        value.digits = len(text.lstrip("-"))
        return value

    def __repr__(self) -> str:
        return f"an integer of {self.digits} digits"


#: Integer literals longer than this are not read as ints: 2**63 has 19 digits,
#: and no column takes more than a float64 holds.
_MAX_INT_DIGITS = 300


def _parse_int(text: str) -> int | float:
    return HugeInt(text) if len(text) > _MAX_INT_DIGITS else int(text)


def parse_request(body: bytes) -> Any:
    """The ``jobs`` column dict of a request body ``{"jobs": {...}}`` (not yet validated).

    Raises:
        BatchError: the body is empty, not UTF-8 JSON, nested deeper than
            the parser goes, not an object, or has keys other than ``jobs``
            (``field`` is ``"body"`` or the key).
    """
    if not body.strip():
        raise BatchError("body", "an empty body", 'a JSON object {"jobs": {...}}')
    try:
        payload = json.loads(body, parse_int=_parse_int)
    except RecursionError:
        # a batch is five levels deep; thousands of levels are an attack or a bug
        raise BatchError("body", "JSON nested too deep to parse",
                         'a JSON object {"jobs": {...}} a few levels deep') from None
    except UnicodeDecodeError:
        raise BatchError("body", "bytes that are not UTF-8 text", "a JSON object") from None
    except json.JSONDecodeError as exc:
        raise BatchError("body", f"invalid JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno})", 'a JSON object {"jobs": {...}}') from None
    if not isinstance(payload, dict):
        found = "a JSON array" if isinstance(payload, list) else _json_type(payload)
        raise BatchError("body", found, 'a JSON object {"jobs": {...}}')
    extra = sorted(k for k in payload if k != "jobs")
    if extra:
        raise BatchError(extra[0], "an unknown key", "only the key 'jobs' in the request body")
    if "jobs" not in payload:
        raise BatchError("jobs", "no such key", 'the batch columns under "jobs"')
    return payload["jobs"]
