"""What a scheduler sees of running jobs: progress arrays, SCF lines, and cuts.

:class:`Progress` holds the ionic-step rows of many jobs (columns
:data:`PROGRESS_COLUMNS`, as in ``progress.parquet``) and the SCF lines of
the step under way; :func:`observe` cuts them at an elapsed time, the view
:class:`predictors.remaining.RemainingTimeRegressor` trains and predicts on;
:func:`scf_done_at` counts the SCF steps finished by then. Split out of
:mod:`predictors.remaining`, which re-exports every name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from predictors.progress import (
    segment_rows,
)
from predictors.runtime import column

__all__ = ["PROGRESS_COLUMNS", "FRACTIONS", "Progress", "scf_done_at", "Observation", "observe"]

#: Columns of a progress array, one row per completed ionic step.
PROGRESS_COLUMNS: tuple[str, ...] = ("elapsed", "denergy", "max_force", "scf_steps")

#: Elapsed fractions of the run at which evaluation cuts jobs (RLSchert's ten parts).
FRACTIONS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass
class Progress:
    """Ragged progress logs of many jobs: all rows concatenated, plus offsets.

    Rows ``offsets[i]:offsets[i+1]`` of ``values`` are job ``i``'s completed
    ionic steps, with columns :data:`PROGRESS_COLUMNS` and ``elapsed``
    non-decreasing. Keeping one flat array makes cutting 20k logs at an
    elapsed time, and gathering the last steps of 10k running jobs, a few
    vectorized numpy operations.

    Complete logs (training and evaluation data) may also carry the SCF lines
    of every step: ``lines`` holds the ``dE`` of every SCF line, and rows
    ``r`` has lines ``line_offsets[r]:line_offsets[r+1]`` (a row whose lines
    are unknown has none). They let training cut a step under way at any SCF
    line, as a running job shows it.

    Examples:
        >>> p = Progress.from_arrays([np.zeros((0, 4)), [[10.0, -0.1, 0.5, 20], [15.0, -0.01, 0.2, 6]]])
        >>> p.lengths().tolist(), p[1][:, 0].tolist()
        ([0, 2], [10.0, 15.0])
        >>> p.prefix(np.array([5.0, 12.0])).lengths().tolist()
        [0, 1]
    """

    values: np.ndarray
    offsets: np.ndarray
    lines: np.ndarray | None = None
    line_offsets: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.values = np.asarray(self.values, dtype=np.float64).reshape(-1, len(PROGRESS_COLUMNS))
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0 \
                or self.offsets[-1] != len(self.values) or np.any(np.diff(self.offsets) < 0):
            raise ValueError(f"offsets must rise from 0 to {len(self.values)}; got {self.offsets}")
        if (self.lines is None) != (self.line_offsets is None):
            raise ValueError("lines and line_offsets come together")
        if self.lines is not None:
            self.lines = np.asarray(self.lines, dtype=np.float64).ravel()
            self.line_offsets = np.asarray(self.line_offsets, dtype=np.int64)
            lo = self.line_offsets
            if lo.shape != (len(self.values) + 1,) or lo[0] != 0 or lo[-1] != len(self.lines) \
                    or np.any(np.diff(lo) < 0):
                raise ValueError(f"line_offsets must rise from 0 to {len(self.lines)} with one "
                                 f"entry per row plus one")

    @classmethod
    def from_arrays(cls, seqs: Sequence[Any], lines: Sequence[Any] | None = None) -> Progress:
        """Build from one ``(k_i, 4)`` array-like per job (``k_i`` may be 0).

        ``lines``, if given, holds the ``dE`` of the SCF lines of every row, one
        sequence per row, rows of all jobs in order.
        """
        arrs = [np.asarray(s, dtype=np.float64).reshape(-1, len(PROGRESS_COLUMNS)) for s in seqs]
        lengths = np.fromiter((len(a) for a in arrs), dtype=np.int64, count=len(arrs))
        values = np.concatenate(arrs) if arrs else np.zeros((0, len(PROGRESS_COLUMNS)))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        if lines is None:
            return cls(values, offsets)
        flat, line_offsets = _ragged(lines, len(values), "lines")
        return cls(values, offsets, flat, line_offsets)

    @classmethod
    def empty(cls, n_jobs: int) -> Progress:
        """``n_jobs`` jobs without any completed step."""
        return cls(np.zeros((0, len(PROGRESS_COLUMNS))), np.zeros(n_jobs + 1, dtype=np.int64))

    @classmethod
    def from_table(cls, progress: Any, job_ids: Any, where: str = "progress") -> Progress:
        """Group a ``progress.parquet`` table by job, in the order of ``job_ids``.

        Rows of jobs not in ``job_ids`` are ignored; rows are ordered by
        ``step`` within a job.

        Raises:
            InputError: a column is missing.
        """
        ids = np.asarray(job_ids).astype(str)
        pid = column(progress, "job_id", where).astype(str)
        step = column(progress, "step", where).astype(np.int64)
        vals = np.column_stack([column(progress, c, where).astype(np.float64)
                                for c in PROGRESS_COLUMNS]) if len(pid) else \
            np.zeros((0, len(PROGRESS_COLUMNS)))
        lines, line_offsets = _lines_of(progress)
        order_ids = np.argsort(ids, kind="stable")
        pos = np.searchsorted(ids[order_ids], pid)
        pos = np.minimum(pos, max(len(ids) - 1, 0))
        known = (len(ids) > 0) & (ids[order_ids][pos] == pid) if len(ids) else \
            np.zeros(len(pid), dtype=bool)
        job_index = order_ids[pos][known]
        vals, step = vals[known], step[known]
        order = np.lexsort((step, job_index))
        counts = np.bincount(job_index, minlength=len(ids))
        offsets = np.concatenate([[0], np.cumsum(counts)])
        if lines is None:
            return cls(vals[order], offsets)
        rows = np.flatnonzero(known)[order]
        n_lines = np.diff(line_offsets)[rows]
        new_lines = lines[segment_rows(line_offsets[:-1][rows], n_lines)]
        return cls(vals[order], offsets, new_lines, np.concatenate([[0], np.cumsum(n_lines)]))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """Completed steps per job."""
        return np.diff(self.offsets)

    def job_index(self) -> np.ndarray:
        """For every row, the index of its job."""
        return np.repeat(np.arange(len(self)), self.lengths())

    def take(self, index: Any) -> Progress:
        """The jobs at ``index`` (an integer array), in that order."""
        index = np.asarray(index, dtype=np.int64)
        lengths = self.lengths()[index]
        starts = self.offsets[:-1][index]
        rows = _segment_rows(starts, lengths)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        if self.lines is None:
            return Progress(self.values[rows], offsets)
        n_lines = np.diff(self.line_offsets)[rows]
        lines = self.lines[_segment_rows(self.line_offsets[:-1][rows], n_lines)]
        return Progress(self.values[rows], offsets, lines, np.concatenate([[0], np.cumsum(n_lines)]))

    def prefix(self, elapsed: Any) -> Progress:
        """Only the steps each job had completed ``elapsed[i]`` seconds after its start."""
        elapsed = np.asarray(elapsed, dtype=np.float64)
        keep = self.values[:, 0] <= np.repeat(elapsed, self.lengths())
        counts = np.bincount(self.job_index()[keep], minlength=len(self))
        return Progress(self.values[keep], np.concatenate([[0], np.cumsum(counts)]))


_segment_rows = segment_rows


def _lines_of(progress: Any) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The ``scf_de`` list column of a progress table as flat values and row offsets, if any."""
    names = list(progress.column_names) if hasattr(progress, "column_names") else list(progress)
    if "scf_de" not in names:
        return None, None
    col = progress["scf_de"]
    if hasattr(col, "combine_chunks"):  # pyarrow: flatten() skips null (unknown) lists
        import pyarrow as pa
        import pyarrow.compute as pc

        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        n = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
        values = col.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        return values, np.concatenate([[0], np.cumsum(n.astype(np.int64))])
    arrs = [np.asarray(x if x is not None else [], dtype=np.float64) for x in col]
    n = np.fromiter((len(a) for a in arrs), dtype=np.int64, count=len(arrs))
    return (np.concatenate(arrs) if arrs else np.zeros(0)), np.concatenate([[0], np.cumsum(n)])


def scf_done_at(progress: Progress, elapsed: Any, job: Any = None, startup: Any = None
                ) -> np.ndarray:
    """SCF steps finished in the ionic step under way, from complete progress logs.

    SCF steps are taken as evenly spaced within their ionic step, the first
    ionic step starting after the job's start-up (``startup``, one value per
    job of ``progress``; 0 when not given or NaN). While no SCF step is under
    way (start-up, final I/O) the count is 0. This is what
    :meth:`cosim.workloads.vasp.VaspJobs.progress_at` reports for a generated
    job, reconstructed from a data set.

    Args:
        progress: the complete logs (every ionic step of each job).
        elapsed: seconds since the job started, one per sample.
        job: the job of each sample (default: sample ``i`` is job ``i``).
        startup: seconds before the first SCF line, per job of ``progress``.

    Examples:
        >>> p = Progress.from_arrays([[[100.0, -1.0, 0.5, 20], [130.0, -0.1, 0.2, 6]]])
        >>> scf_done_at(p, [0.0, 50.0, 99.0, 115.0, 200.0], job=[0, 0, 0, 0, 0]).tolist()
        [0, 10, 19, 3, 0]
        >>> scf_done_at(p, [10.0, 55.0], job=[0, 0], startup=[20.0]).tolist()
        [0, 8]
    """
    elapsed = np.asarray(elapsed, dtype=np.float64)
    job = np.arange(len(progress)) if job is None else np.asarray(job, dtype=np.int64)
    k = _steps_done(progress, job, elapsed)
    starts = progress.offsets[:-1][job]
    running = k < progress.lengths()[job]
    v = progress.values if len(progress.values) else np.zeros((1, len(PROGRESS_COLUMNS)))
    su = np.zeros(len(job)) if startup is None else \
        np.nan_to_num(np.asarray(startup, dtype=np.float64)[job], nan=0.0)
    nxt = np.where(running, starts + k, 0)
    t0 = np.where(k > 0, v[np.maximum(starts + k - 1, 0), 0], su)
    t1 = v[nxt, 0]
    n = np.nan_to_num(v[nxt, 3], nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(t1 > t0, (elapsed - t0) / (t1 - t0), 0.0)
    done = np.floor(np.clip(frac, 0.0, 1.0) * n)
    return np.where(running, np.clip(done, 0, np.maximum(n - 1, 0)), 0).astype(np.int64)


@dataclass
class Observation:
    """What an observer sees of jobs cut at given elapsed times (see :func:`observe`).

    Attributes:
        job: per sample, its job (index into the complete logs).
        elapsed: per sample, seconds since the job started.
        k: finished ionic steps.
        scf_done: SCF lines finished in the step under way (-1: not seen).
        lines_start, lines_len: where those lines are in :attr:`Progress.lines`
            (``lines_len`` 0 when the lines are not known or not seen).
        startup: the start-up time once the first SCF line is out (NaN before,
            or when unknown or not seen).
    """

    job: np.ndarray
    elapsed: np.ndarray
    k: np.ndarray
    scf_done: np.ndarray
    lines_start: np.ndarray
    lines_len: np.ndarray
    startup: np.ndarray


def observe(progress: Progress, elapsed: Any, job: Any = None, startup: Any = None,
            scf: Any = True) -> Observation:
    """Cut complete logs at ``elapsed``: what a running job shows at that moment.

    Args:
        progress: complete logs; with :attr:`Progress.lines`, the SCF lines of
            the step under way are seen too.
        elapsed: per sample, seconds since its job started.
        job: per sample, its job (default: sample ``i`` is job ``i``).
        startup: per job of ``progress``, seconds before its first SCF line
            (NaN or None: unknown).
        scf: whether the SCF view (lines of the step under way, start-up) is
            seen: a bool, or one bool per sample.

    Examples:
        >>> p = Progress.from_arrays([[[100.0, -1.0, 0.5, 20]]], lines=[np.full(20, -0.1)])
        >>> o = observe(p, [5.0, 50.0], job=[0, 0], startup=[10.0])
        >>> o.k.tolist(), o.scf_done.tolist(), o.lines_len.tolist(), o.startup.tolist()
        ([0, 0], [0, 8], [0, 8], [nan, 10.0])
    """
    elapsed = np.asarray(elapsed, dtype=np.float64)
    job = np.arange(len(progress)) if job is None else np.asarray(job, dtype=np.int64)
    elapsed = np.broadcast_to(elapsed, job.shape).astype(np.float64)
    k = _steps_done(progress, job, elapsed)
    d = scf_done_at(progress, elapsed, job, startup)
    seen = np.broadcast_to(np.asarray(scf, dtype=bool), job.shape)
    row = progress.offsets[:-1][job] + k
    running = k < progress.lengths()[job]
    if progress.lines is not None:
        nrow = np.where(running, row, 0)
        have = running & (np.diff(progress.line_offsets)[nrow] >= d) if len(progress.values) \
            else np.zeros(len(job), bool)
        lines_start = np.where(have, progress.line_offsets[:-1][nrow] if len(progress.values)
                               else 0, 0)
        lines_len = np.where(have & seen, d, 0)
    else:
        lines_start = np.zeros(len(job), dtype=np.int64)
        lines_len = np.zeros(len(job), dtype=np.int64)
    su = np.full(len(job), np.nan) if startup is None else \
        np.asarray(startup, dtype=np.float64)[job]
    su = np.where(seen & ((k > 0) | (d > 0)), su, np.nan)
    return Observation(job, elapsed, k, np.where(seen, d, -1), lines_start.astype(np.int64),
                       lines_len.astype(np.int64), su)


def _as_progress(progress: Progress | Sequence[Any]) -> Progress:
    return progress if isinstance(progress, Progress) else Progress.from_arrays(progress)


def _ragged(values: Any, n: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-job lists of numbers (or None) as flat values and offsets."""
    if values is None:
        return np.zeros(0), np.zeros(n + 1, dtype=np.int64)
    if len(values) != n:
        raise ValueError(f"{where} has {len(values)} entries, X has {n} rows")
    kinds = set(map(type, values))
    if kinds <= {list}:   # JSON-parsed: one C-level pass over all numbers
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
        flat = np.fromiter(chain.from_iterable(values), dtype=np.float64,
                           count=int(lengths.sum()))
    else:
        arrs = [np.zeros(0) if v is None else np.asarray(v, dtype=np.float64).ravel()
                for v in values]
        lengths = np.fromiter(map(len, arrs), dtype=np.int64, count=n)
        flat = np.concatenate(arrs) if n and lengths.sum() else np.zeros(0)
    return flat, np.concatenate([[0], np.cumsum(lengths)])


def _steps_done(p: Progress, job: np.ndarray, now: np.ndarray) -> np.ndarray:
    """Completed steps of job ``job[i]`` at time ``now[i]`` (binary search in its log)."""
    elapsed = p.values[:, 0]
    lo, hi = p.offsets[:-1][job], p.offsets[1:][job]
    # vectorised bisection: at most log2(longest log) rounds
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        ok = np.zeros(len(job), dtype=bool)
        ok[active] = elapsed[mid[active]] <= now[active]
        lo = np.where(active & ok, mid + 1, lo)
        hi = np.where(active & ~ok, mid, hi)
    return lo - p.offsets[:-1][job]
