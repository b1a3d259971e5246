"""The columnar job stream every workload source produces.

A :class:`Workload` holds one job per index in parallel numpy columns, sorted
by submit time. Readers and generators build it; the engine turns rows into
:class:`cosim.job.Job` objects only when they are submitted, so windowing,
sampling and cleaning stay vectorized.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cosim import limits
from cosim.errors import WorkloadError

__all__ = ["Workload", "COLUMNS", "TRACE_FEATURES", "read_input"]

#: name -> dtype of the required columns, in order.
COLUMNS: dict[str, np.dtype] = {
    "job_id": np.dtype(np.int64),     # unique id (SWF field 1)
    "submit": np.dtype(np.float64),   # seconds, non-decreasing
    "run": np.dtype(np.float64),      # actual run time in seconds, >= 0
    "procs": np.dtype(np.int64),      # cores, or nodes on a node-granular cluster, > 0
    "req_time": np.dtype(np.float64),  # requested time (walltime / user estimate), > 0
    "mem": np.dtype(np.float64),      # memory the job needs, cluster units (GB); 0 = not modelled
    "user": np.dtype(np.int64),       # user id, -1 unknown
    "prev_job": np.dtype(np.int64),   # preceding job id (SWF field 17), -1 none
    "think": np.dtype(np.float64),    # think time after prev_job ends (SWF field 18), -1 none
}

#: Trace fields kept as integer job features (``Workload.features``, -1 unknown),
#: the runtime-prediction literature's strongest hints besides the user and the
#: request: SWF fields 13-16 and sacct's Partition, Account, QOS and JobName (names
#: in ``Workload.labels`` where the source has them). The user stays ``Workload.user``.
TRACE_FEATURES: tuple[str, ...] = ("group", "executable", "queue", "partition", "account", "qos",
                                   "job_name")


@dataclass
class Workload:
    """Jobs in columns, sorted by submit time.

    Attributes:
        job_id, submit, run, procs, req_time, mem, user, prev_job, think:
            numpy arrays of equal length, dtypes as in :data:`COLUMNS`.
        max_procs: machine size the source states (SWF ``MaxProcs``), or 0.
        max_nodes: node count the source states (SWF ``MaxNodes``), or 0.
        machine_source: where ``max_procs`` came from ("header MaxProcs",
            "largest job", ...; "" when the caller gave it or nobody said).
        cleaning: rule name -> number of jobs it dropped or changed.
        status_counts: jobs per status in the source, before any filtering
            (SWF field 11 codes: 1 completed, 0 failed, 5 cancelled, -1
            unknown; Slurm state names for sacct output); empty for
            generated workloads.
        labels: names behind integer columns, column -> {id: name} (Slurm
            user, partition, account, QOS and job names).
        source: where the jobs came from (path or generator name and seed).
        epoch: Unix time of submit time 0 (SWF ``UnixStartTime``, sacct's
            first submit), None when the source does not say; with
            ``timezone``, the trace's own clock (submit hour and weekday).
        timezone: the site's IANA time zone (SWF ``TimeZoneString``) or "".
        features: extra per-job columns (for example VASP input parameters).
        progress: where running jobs' progress logs come from (for example a
            :class:`cosim.workloads.vasp.VaspJobs`), indexed by
            ``features["progress_index"]``; None when the source has none.

    Examples:
        >>> w = Workload.from_columns(submit=[0, 5], run=[10, 20], procs=[1, 2],
        ...                           req_time=[15, 20])
        >>> len(w), int(w.procs.sum())
        (2, 3)
    """

    job_id: np.ndarray
    submit: np.ndarray
    run: np.ndarray
    procs: np.ndarray
    req_time: np.ndarray
    mem: np.ndarray
    user: np.ndarray
    prev_job: np.ndarray
    think: np.ndarray
    max_procs: int = 0
    max_nodes: int = 0
    machine_source: str = ""
    cleaning: dict[str, int] = field(default_factory=dict)
    status_counts: dict[int | str, int] = field(default_factory=dict)
    labels: dict[str, dict[int, str]] = field(default_factory=dict)
    source: str = ""
    features: dict[str, np.ndarray] = field(default_factory=dict)
    epoch: float | None = None
    timezone: str = ""
    progress: Any = None

    @classmethod
    def from_columns(cls, *, submit, run, procs, req_time=None, job_id=None, mem=None,
                     user=None, prev_job=None, think=None, features=None,
                     **meta) -> Workload:
        """Build a workload from array-likes; missing columns get their defaults.

        Rows are stably sorted by submit time.
        """
        submit = np.asarray(submit, dtype=np.float64)
        n = len(submit)

        def col(values, name, default):
            if values is None:
                return np.full(n, default, dtype=COLUMNS[name])
            arr = np.asarray(values, dtype=COLUMNS[name])
            if arr.shape != (n,):
                raise ValueError(f"column {name!r} has shape {arr.shape}, expected ({n},)")
            return arr

        run = col(run, "run", 0.0)
        w = cls(
            job_id=col(job_id, "job_id", 0) if job_id is not None else np.arange(1, n + 1),
            submit=submit,
            run=run,
            procs=col(procs, "procs", 1),
            req_time=col(req_time, "req_time", 0.0) if req_time is not None else run.copy(),
            mem=col(mem, "mem", 0.0),
            user=col(user, "user", -1),
            prev_job=col(prev_job, "prev_job", -1),
            think=col(think, "think", -1.0),
            features={k: np.asarray(v) for k, v in (features or {}).items()},
            **meta,
        )
        order = np.argsort(w.submit, kind="stable")
        if np.any(order != np.arange(n)):
            w = w.take(order)
        return w

    def __len__(self) -> int:
        return len(self.submit)

    def columns(self) -> dict[str, np.ndarray]:
        """The required columns by name (views, not copies)."""
        return {name: getattr(self, name) for name in COLUMNS}

    def take(self, index) -> Workload:
        """Rows at ``index`` (an index array or slice), metadata kept."""
        cols = {name: arr[index] for name, arr in self.columns().items()}
        feats = {k: v[index] for k, v in self.features.items()}
        return replace(self, **cols, features=feats, cleaning=dict(self.cleaning))

    def shifted(self, t0: float | None = None) -> Workload:
        """A copy whose submit times start at ``t0`` less (default: the first submit)."""
        if len(self) == 0:
            return self.take(slice(None))
        t0 = float(self.submit[0]) if t0 is None else t0
        w = self.take(slice(None))
        w.submit = w.submit - t0
        if w.epoch is not None:
            w.epoch = w.epoch + t0   # the same wall clock
        return w

    def validate(self) -> None:
        """Check internal invariants (programming errors, not user input)."""
        n = len(self)
        for name, dtype in COLUMNS.items():
            arr = getattr(self, name)
            assert arr.shape == (n,) and arr.dtype == dtype, f"column {name}: {arr.dtype} {arr.shape}"
        for k, v in self.features.items():
            assert len(v) == n, f"feature {k}: length {len(v)} != {n}"
        assert n == 0 or np.all(np.diff(self.submit) >= 0), "submit times must be sorted"
        assert np.all(self.procs > 0), "procs must be positive"
        assert np.all(self.run >= 0), "run times must be non-negative"
        assert np.all(self.req_time > 0), "requested times must be positive"


def read_input(path: str | Path, expected: str) -> bytes:
    """The whole of an input file, decompressed when it is gzip (by magic number,
    not suffix). A missing, unreadable or corrupt file raises one error naming
    the file, what was found and ``expected`` (what the file should be, such
    as "an SWF trace (.swf or .swf.gz)").
    """
    raw = limits.read_bytes(path, expected, limits.TRACE_BYTES)
    if raw[:2] == b"\x1f\x8b":
        raw = limits.gunzip(raw, str(path), limits.TRACE_BYTES, WorkloadError)
    return raw
