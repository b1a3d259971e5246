"""Slurm accounting (``sacct``) as a workload.

A cluster operator's own jobs, straight from the accounting database::

    sacct --allocations --parsable2 --starttime 2025-01-01 --endtime 2025-02-01 \\
          --format JobID,User,Submit,Start,End,Elapsed,Timelimit,NCPUS,NNodes,ReqMem,State,Partition,NodeList \\
          > jobs.txt
    python -m cosim run scenarios/slurm.yaml --set workload.path=jobs.txt
    python -m cosim convert jobs.txt --to swf          # jobs.swf, for any SWF tool

:func:`read_sacct` reads that output: one header line naming the columns,
then one job per line, fields separated by ``|`` (``--parsable2``; the
trailing ``|`` of ``--parsable`` is accepted too). Columns may come in any
order and extra ones are ignored. Required: ``JobID``, ``Submit``,
``Start``, ``End``, ``Timelimit``, ``State`` and ``NCPUS`` (or
``AllocCPUS``). Used when present: ``User``, ``Elapsed``, ``NNodes``,
``ReqMem``, ``Partition``, ``Account``, ``QOS``, ``JobName``, ``NodeList``
(the machine size, below).

What each field becomes:

- ``Submit``, ``Start``, ``End``: ``YYYY-MM-DDTHH:MM:SS`` (or with a space,
  or epoch seconds); ``Unknown``, ``None`` and empty mean not known. Submit
  times are shifted so the first kept job is submitted at 0; the real wait
  (``Start - Submit``) is kept as ``features["wait"]``.
- ``Elapsed`` is the run time (else ``End - Start``); ``Timelimit`` the
  requested time. Durations read ``D-HH:MM:SS``, ``D-HH:MM``, ``D-HH``,
  ``HH:MM:SS``, ``MM:SS`` and ``MM:SS.mmm``; ``UNLIMITED``,
  ``Partition_Limit``, ``INVALID``, ``Unknown`` and ``None`` mean no limit
  known, and the estimate falls back to the run time (a perfect estimate,
  counted in ``req_time_missing``).
- ``NCPUS`` (or ``AllocCPUS``) is ``procs``, or ``NNodes`` with
  ``unit="nodes"`` (node-granular clusters).
- ``ReqMem`` is the memory in GB for the whole job: a number with an
  optional unit ``K``, ``M`` (the default unit), ``G``, ``T``, then ``c``
  (per CPU: times NCPUS) or ``n`` (per node: times NNodes); without ``c`` or
  ``n`` (Slurm 21.08 and later) it is read as per node.
- ``State``: ``COMPLETED`` (SWF status 1), ``CANCELLED`` and ``CANCELLED by
  UID`` (status 5), ``TIMEOUT``, ``FAILED``, ``NODE_FAIL``,
  ``OUT_OF_MEMORY``, ``PREEMPTED``, ``BOOT_FAIL``, ``DEADLINE`` (status 0):
  each replays with the time it really ran. A job that never started
  (``PENDING``, or no ``Start``), was cancelled before starting, or has not
  ended (``RUNNING``, ``SUSPENDED``) is dropped and counted, and so is one
  whose ``End`` comes before its ``Start`` with no ``Elapsed`` (no run time).
  ``Workload.status_counts`` counts every state in the file; ``status=``
  keeps ``"all"`` (default), ``"completed"``, or a list of state names.
- ``JobID``: ``123``, array tasks ``123_4`` (a pending range
  ``123_[5-10]`` is a pending job), heterogeneous job components ``123+0``,
  ``123+1`` (merged into one job: they start together, so the scheduler must
  place them together); job steps (``123.batch``, ``123.extern``, ``123.0``)
  are not jobs and are skipped (counted). Jobs are numbered 1..n in submit
  order; the Slurm ids are kept as ``features["slurm_id"]``.
- ``User`` names are numbered in the order of their first job;
  ``Partition``, ``Account``, ``QOS`` and ``JobName`` names 1..k in
  alphabetical order (``features["partition"]``, ``["account"]``,
  ``["qos"]``, ``["job_name"]``, -1 when empty, with the names in
  ``Workload.labels``). ``Workload.epoch`` is the first kept submit on the
  file's own wall clock (read as UTC), for the submit hour and weekday.

The machine: ``max_procs`` when given (``convert --max-procs``; in a scenario,
``cluster.nodes`` and ``cluster.cores_per_node`` override it); else, with a
``NodeList`` column, the partition as the accounting shows it: the distinct
nodes that ran a job times the most CPUs a job had per node (``max_nodes`` is
the node count); else, loudly marked as a guess (:data:`PEAK_SOURCE`, and a
warning on every run), the peak number of CPUs (or nodes) allocated at once,
a lower bound under which no policy makes a job wait. Every rule is counted
in ``Workload.cleaning``.

Examples:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "sacct.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("JobID|Submit|Start|End|Timelimit|NCPUS|State\\n"
    ...                 "7|2025-01-01T00:00:00|2025-01-01T00:00:30|2025-01-01T00:10:30|"
    ...                 "01:00:00|4|COMPLETED\\n")
    >>> w = read_sacct(path)
    >>> int(w.procs[0]), float(w.run[0]), float(w.req_time[0]), str(w.features["slurm_id"][0])
    (4, 600.0, 3600.0, '7')
"""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from cosim import limits
from cosim.errors import InputError, WorkloadError
from cosim.workloads.base import Workload, read_input

__all__ = ["read_sacct", "parse_duration", "parse_memory", "parse_hostlist", "CLEANING_RULES",
           "REQUIRED_COLUMNS", "SWF_STATUS", "PEAK_SOURCE"]

#: ``Workload.machine_source`` when nothing gave the machine size: a guess, loudly marked.
PEAK_SOURCE = ("peak {unit} allocated at once (GUESSED: a lower bound of the machine, "
               "under which every job waits as little as possible)")

#: Columns every file needs (and one of ``NCPUS`` / ``AllocCPUS``).
REQUIRED_COLUMNS: tuple[str, ...] = ("JobID", "Submit", "Start", "End", "Timelimit", "State")

#: Names of the rules :func:`read_sacct` counts in ``Workload.cleaning``, in order.
CLEANING_RULES: tuple[str, ...] = (
    "steps_ignored",
    "het_components_merged",
    "status_dropped",
    "pending_dropped",
    "cancelled_before_start_dropped",
    "running_dropped",
    "end_before_start_dropped",
    "procs_unknown_dropped",
    "procs_over_machine_dropped",
    "array_tasks",
    "req_time_missing",
    "run_exceeds_request",
    "submit_out_of_order",
)

#: SWF status (field 11) of each Slurm end state; others are 0 (failed).
SWF_STATUS: dict[str, int] = {"COMPLETED": 1, "CANCELLED": 5}

_NO_TIME = {"", "UNKNOWN", "NONE", "N/A"}
_NO_LIMIT = {"", "UNLIMITED", "PARTITION_LIMIT", "INVALID", "UNKNOWN", "NONE", "N/A"}
_NOT_STARTED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD"}
_NOT_ENDED = {"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "RESIZING", "STOPPED",
              "SIGNALING", "STAGE_OUT"}
_DURATION_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+(?:\.\d+)?))?(?::(\d+(?:\.\d+)?))?$")
_MEM_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)([cn]?)$", re.IGNORECASE)
_GB_PER_UNIT = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0, "P": 1024.0**2}


def parse_duration(text: str) -> float | None:
    """Seconds of a Slurm duration, or None for no limit / unknown.

    ``D-HH:MM:SS``, ``D-HH:MM``, ``D-HH``, ``HH:MM:SS``, ``MM:SS``,
    ``MM:SS.mmm`` and plain minutes (``90``, as ``sbatch --time`` takes
    them) are read; ``UNLIMITED``, ``Partition_Limit``, ``INVALID``,
    ``Unknown``, ``None`` and empty give None. Minutes and seconds are
    below 60, and hours below 24 after a day count.

    Raises:
        ValueError: anything else (``1-99:99:99`` too).

    Examples:
        >>> parse_duration("1-02:03:04"), parse_duration("10:00"), parse_duration("UNLIMITED")
        (93784.0, 600.0, None)
        >>> parse_duration("1-99:99:99")
        Traceback (most recent call last):
        ...
        ValueError: 1-99:99:99
    """
    t = text.strip()
    if t.upper() in _NO_LIMIT:
        return None
    m = _DURATION_RE.match(t)
    if not m:
        raise ValueError(t)
    days, a, b, c = m.groups()
    # Slurm writes minutes and seconds below 60 and, after a day count, hours
    # below 24: 1-99:99:99 is a corrupt field, not 5 days.
    if any(part is not None and float(part) >= 60 for part in (b, c)) or (
            days is not None and int(a) >= 24):
        raise ValueError(t)
    if days is not None:     # D-HH[:MM[:SS]]
        return int(days) * 86400 + int(a) * 3600 + float(b or 0) * 60 + float(c or 0)
    if c is not None:        # HH:MM:SS
        return int(a) * 3600 + float(b) * 60 + float(c)
    if b is not None:        # MM:SS
        return int(a) * 60 + float(b)
    if "." in t:
        raise ValueError(t)
    return int(a) * 60.0     # minutes


def parse_memory(text: str, cpus: int, nodes: int) -> float:
    """GB of a ``ReqMem`` value for the whole job (0 when empty or 0).

    Raises:
        ValueError: not a Slurm memory value.

    Examples:
        >>> parse_memory("2000Mc", 4, 1), parse_memory("16Gn", 8, 2), parse_memory("1T", 1, 3)
        (7.8125, 32.0, 3072.0)
    """
    t = text.strip()
    if not t:
        return 0.0
    m = _MEM_RE.match(t)
    if not m:
        raise ValueError(t)
    value, unit, per = float(m.group(1)), m.group(2).upper() or "M", m.group(3).lower()
    gb = value * _GB_PER_UNIT[unit]
    if per == "c":
        return gb * max(cpus, 1)
    return gb * max(nodes, 1)


def _time(text: str) -> datetime | float | None:
    t = text.strip()
    if t.upper() in _NO_TIME:
        return None
    if t.isdigit():
        return float(t)   # SLURM_TIME_FORMAT=%s
    return datetime.fromisoformat(t)


def _read_lines(path: Path) -> list[str]:
    raw = read_input(path, "sacct output (sacct --parsable2 ...)")
    return raw.decode("utf-8", errors="replace").splitlines()


class _Job:
    """One allocation (het components merged) while the file is read."""

    __slots__ = ("sid", "line", "user", "submit", "start", "end", "elapsed", "limit", "cpus",
                 "nodes", "mem", "state", "partition", "parts", "hosts", "account", "qos",
                 "job_name")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


# read_sacct() by job: the header, the lines (het components merged), the jobs
# that can be replayed, and the machine size; each raises its own errors, in the
# order the file is read.
def _read_header(path: Path, lines: list[str], unit: str) -> tuple[int, list[str], dict[str, int],
                                                                 str | None]:
    """The header line: its index, the column names, name -> index, the CPU column."""
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        raise WorkloadError(str(path), "an empty file", "a header line of sacct column names "
                            "(sacct --parsable2 without --noheader)")
    header = lines[first].rstrip("\r").split("|")
    if header and header[-1] == "":
        header = header[:-1]   # --parsable ends every line with '|'
    names = [h.strip() for h in header]
    col = {n: i for i, n in enumerate(names)}
    cpu_col = "NCPUS" if "NCPUS" in col else "AllocCPUS" if "AllocCPUS" in col else None
    missing = [c for c in REQUIRED_COLUMNS if c not in col] + ([] if cpu_col else ["NCPUS"])
    if unit == "nodes" and "NNodes" not in col:
        missing.append("NNodes")
    if missing:
        raise InputError(f"{path}:{first + 1}", f"no column {', '.join(missing)} in the header "
                         f"{'|'.join(names)[:80]!r}",
                         "a header line of sacct --parsable2 with JobID, Submit, Start, End, "
                         "Timelimit, NCPUS (or AllocCPUS) and State (User, Elapsed, NNodes, "
                         "ReqMem, Partition when available)")
    return first, names, col, cpu_col


def _read_jobs(path: Path, lines: list[str], first: int, names: list[str], col: dict[str, int],
               cpu_col: str, cleaning: dict[str, int]) -> tuple[dict[str, _Job], dict[str, int]]:
    """Every allocation after the header (steps skipped), and the count of each state."""
    status_counts: dict[str, int] = {}
    jobs: dict[str, _Job] = {}
    for lineno, raw in enumerate(lines[first + 1:], start=first + 2):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) == len(names) + 1 and fields[-1] == "":
            fields = fields[:-1]
        if len(fields) != len(names):
            raise WorkloadError(f"{path}:{lineno}", f"{len(fields)} fields",
                                f"{len(names)} fields separated by '|', like the header")
        where = f"{path}:{lineno}"

        def get(name: str, default: str = "", fields: list[str] = fields) -> str:
            i = col.get(name)
            return fields[i].strip() if i is not None else default

        sid = get("JobID")
        if not sid:
            raise WorkloadError(where, "an empty JobID", "a Slurm job id (123, 123_4, 123+0)")
        if "." in sid:
            cleaning["steps_ignored"] += 1
            continue
        try:
            submit, start, end = _time(get("Submit")), _time(get("Start")), _time(get("End"))
        except ValueError as exc:
            raise WorkloadError(where, f"the time {exc.args[0] if exc.args else ''!s}",
                                "Submit/Start/End as YYYY-MM-DDTHH:MM:SS, epoch seconds, "
                                "Unknown or None") from None
        elapsed = _duration(get("Elapsed"), where, "Elapsed")
        limit = _duration(get("Timelimit"), where, "Timelimit")
        cpus = _int(get(cpu_col), where, cpu_col)
        nodes = _int(get("NNodes", "0"), where, "NNodes")
        try:
            mem = parse_memory(get("ReqMem"), cpus, nodes)
        except ValueError:
            raise WorkloadError(where, f"ReqMem {get('ReqMem')!r}",
                                "a Slurm memory like 4000Mc, 16Gn, 64G or 1T") from None
        state_text = get("State").upper()
        state = state_text.split()[0].rstrip("+") if state_text else "UNKNOWN"
        base = sid.split("+", 1)[0]
        if "+" in sid and base in jobs:
            j = jobs[base]      # another component of a heterogeneous job
            cleaning["het_components_merged"] += 1
            j.cpus += cpus
            j.nodes += nodes
            j.mem += mem
            j.parts += 1
            j.hosts = ",".join(h for h in (j.hosts, get("NodeList")) if h)
            for attr, value, pick in (("submit", submit, min), ("start", start, min),
                                      ("end", end, max)):
                old = getattr(j, attr)
                setattr(j, attr, value if old is None else old if value is None
                        else pick(old, value))
            if elapsed is not None:
                j.elapsed = elapsed if j.elapsed is None else max(j.elapsed, elapsed)
            if limit is not None:
                j.limit = limit if j.limit is None else max(j.limit, limit)
            continue
        if sid in jobs:
            raise WorkloadError(where, f"JobID {sid!r} a second time",
                                "one line per job (sacct --allocations)")
        status_counts[state] = status_counts.get(state, 0) + 1
        jobs[base if "+" in sid else sid] = _Job(
            sid=base if "+" in sid else sid, line=lineno, user=get("User"), submit=submit,
            start=start, end=end, elapsed=elapsed, limit=limit, cpus=cpus, nodes=nodes, mem=mem,
            state=state, partition=get("Partition"), parts=1, hosts=get("NodeList"),
            account=get("Account"), qos=get("QOS"), job_name=get("JobName"))
    return jobs, status_counts


def _replayable(jobs: dict[str, _Job], keep_states: frozenset[str] | None, unit: str,
                cleaning: dict[str, int]) -> list[_Job]:
    """The jobs with a status asked for that started, ended and had processors."""
    kept: list[_Job] = []
    for j in jobs.values():
        if keep_states is not None and j.state not in keep_states:
            cleaning["status_dropped"] += 1
            continue
        pending_range = "_[" in j.sid
        if j.start is None or j.state in _NOT_STARTED or pending_range:
            rule = "cancelled_before_start_dropped" if j.state == "CANCELLED" else "pending_dropped"
            cleaning[rule] += 1
            continue
        if j.end is None or j.state in _NOT_ENDED:
            cleaning["running_dropped"] += 1
            continue
        # A clock set back between Start and End: no run time to replay (it was
        # read as 0 s). Mixed time formats are refused below, with the file.
        if j.elapsed is None and type(j.start) is type(j.end) and j.end < j.start:
            cleaning["end_before_start_dropped"] += 1
            continue
        if (j.nodes if unit == "nodes" else j.cpus) <= 0:
            cleaning["procs_unknown_dropped"] += 1
            continue
        if "_" in j.sid:
            cleaning["array_tasks"] += 1
        kept.append(j)
    return kept


def _machine_size(path: Path, kept: list[_Job], start: np.ndarray, run: np.ndarray,
                  procs: np.ndarray, max_procs: int | None, unit: str) -> tuple[int, str, int]:
    """The machine (``max_procs`` or as the file shows it), where that came from, its nodes."""
    machine = max_procs
    source = ""
    max_nodes = 0
    if machine is None:
        machine = _peak(start, start + run, procs)
        source = PEAK_SOURCE.format(unit=unit)
        # The partition as the accounting shows it: every node that ran a job
        # (NodeList), each with the most CPUs a job had per node. Still a lower
        # bound (a node idle all period is missed), but far closer than the peak.
        hosts: set[str] = set()
        cpn = 0
        for j in kept:
            try:
                names = parse_hostlist(j.hosts)
            except ValueError:
                raise WorkloadError(f"{path}:{j.line}", f"NodeList {j.hosts!r}",
                                    "a Slurm host list like node[01-04,07],gpu1") from None
            hosts.update(names)
            if j.nodes > 0 and names:
                cpn = max(cpn, -(-j.cpus // j.nodes))
        if hosts and cpn:
            size = len(hosts) if unit == "nodes" else len(hosts) * cpn
            if size >= machine:
                machine, max_nodes = size, len(hosts)
                source = (f"nodes in NodeList ({len(hosts)} nodes x {cpn} cpus, "
                          "the partition as the accounting shows it)")
    return machine, source, max_nodes


def read_sacct(path: str | os.PathLike, *, max_procs: int | None = None,
               unit: str = "cpus", status: str | list[str] = "all") -> Workload:
    """Read ``sacct --parsable2`` output into a cleaned, submit-sorted workload.

    Args:
        path: the file (gzip is detected from the content).
        max_procs: machine size in ``unit``s; larger jobs are dropped.
            Default: the peak allocated at once in the file.
        unit: ``"cpus"`` (``procs`` = NCPUS) or ``"nodes"`` (``procs`` = NNodes).
        status: ``"all"`` jobs that ran, ``"completed"`` only, or a list of
            Slurm state names (``["COMPLETED", "TIMEOUT"]``).

    Returns:
        The workload (see the module docstring for every rule).

    Raises:
        InputError: a missing file or column, a malformed line (``file:line``
            and the column are named), or a bad argument.
        WorkloadError: a corrupt gzip file.
    """
    path = Path(path)
    if unit not in ("cpus", "nodes"):
        raise InputError("workload.params.unit", repr(unit), "cpus or nodes")
    if max_procs is not None and (isinstance(max_procs, bool) or not isinstance(
            max_procs, int | np.integer) or max_procs <= 0):
        raise InputError("max_procs", repr(max_procs), "a positive integer")
    keep_states = _status_choice(status)
    lines = _read_lines(path)
    first, names, col, cpu_col = _read_header(path, lines, unit)

    cleaning = dict.fromkeys(CLEANING_RULES, 0)
    jobs, status_counts = _read_jobs(path, lines, first, names, col, cpu_col, cleaning)

    kept = _replayable(jobs, keep_states, unit, cleaning)

    def seconds(a, b) -> float:
        """b - a in seconds for two datetimes or two epoch values."""
        if isinstance(a, datetime) and isinstance(b, datetime):
            return (b - a).total_seconds()
        if isinstance(a, float) and isinstance(b, float):
            return b - a
        raise WorkloadError(str(path), "a mix of date-times and epoch seconds",
                            "one time format throughout the file")

    if kept:
        t0 = min((j.submit for j in kept if j.submit is not None), default=kept[0].start,
                 key=lambda t: t.timestamp() if isinstance(t, datetime) else t)
    n = len(kept)
    submit = np.empty(n)
    run = np.empty(n)
    wait = np.empty(n)
    req = np.empty(n)
    procs = np.empty(n, dtype=np.int64)
    for i, j in enumerate(kept):
        sub = j.submit if j.submit is not None else j.start
        submit[i] = seconds(t0, sub)
        wait[i] = max(0.0, seconds(sub, j.start))
        run[i] = j.elapsed if j.elapsed is not None else max(0.0, seconds(j.start, j.end))
        req[i] = j.limit if j.limit is not None else math.nan
        procs[i] = j.nodes if unit == "nodes" else j.cpus
    missing_req = ~np.isfinite(req) | (req <= 0)
    exceeds = ~missing_req & (run > req)
    req = np.where(missing_req, np.maximum(run, 1.0), req)

    machine, source, max_nodes = _machine_size(path, kept, submit + wait, run, procs,
                                               max_procs, unit)
    over = procs > machine
    cleaning["procs_over_machine_dropped"] = int(over.sum())
    keep = ~over

    users: dict[str, int] = {}
    order = np.argsort(submit, kind="stable")
    cleaning["submit_out_of_order"] = int((np.diff(submit) < 0).sum()) if n else 0
    user_id = np.full(n, -1, dtype=np.int64)
    for i in order.tolist():
        name = kept[i].user
        if name:
            user_id[i] = users.setdefault(name, len(users))
    sel = order[keep[order]]
    # Counted over the jobs replayed (not those dropped as too wide just above).
    cleaning["req_time_missing"] = int(missing_req[sel].sum())
    cleaning["run_exceeds_request"] = int(exceeds[sel].sum())
    status = np.array([SWF_STATUS.get(j.state, 0) for j in kept], dtype=np.int64)
    chosen = [kept[i] for i in sel.tolist()]
    named = {name: _named_ids(chosen, name) for name in ("partition", "account", "qos", "job_name")}
    w = Workload.from_columns(
        job_id=np.arange(1, len(sel) + 1),
        submit=submit[sel], run=run[sel], procs=procs[sel], req_time=req[sel],
        mem=np.array([kept[i].mem for i in sel.tolist()], dtype=np.float64),
        user=user_id[sel],
        # req_time_missing per job, so that a window of the file counts its own.
        features={"status": status[sel], "wait": wait[sel], "req_time_missing": missing_req[sel],
                  **{name: ids for name, (ids, _) in named.items()},
                  "nodes": np.array([kept[i].nodes for i in sel.tolist()], dtype=np.int64),
                  "slurm_id": np.array([kept[i].sid for i in sel.tolist()], dtype=str)},
        max_procs=int(machine), max_nodes=max_nodes, machine_source=source, cleaning=cleaning,
        status_counts=status_counts, source=str(path),
        epoch=_wall_clock(t0) if kept else None)
    w.labels = {**{name: labels for name, (_, labels) in named.items()},
                "user": {v: k for k, v in users.items()}}
    return w


def _wall_clock(t: datetime | float) -> float:
    """Seconds since 1970 on the file's own clock (naive times read as UTC)."""
    if not isinstance(t, datetime):
        return float(t)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _named_ids(jobs: list[_Job], attr: str) -> tuple[np.ndarray, dict[int, str]]:
    """A name field as ids 1..k in alphabetical order (-1 empty), and id -> name."""
    names = [getattr(j, attr) for j in jobs]
    ids = {name: i + 1 for i, name in enumerate(sorted(set(names) - {""}))}
    return (np.array([ids.get(name, -1) for name in names], dtype=np.int64),
            {i: name for name, i in ids.items()})


def _status_choice(status: str | list[str]) -> frozenset[str] | None:
    if status == "all":
        return None
    if status == "completed":
        return frozenset({"COMPLETED"})
    if isinstance(status, list | tuple) and status and all(isinstance(s, str) for s in status):
        return frozenset(s.upper() for s in status)
    raise InputError("workload.params.status", repr(status),
                     "all, completed or a list of Slurm states (COMPLETED, TIMEOUT, ...)")


def _duration(text: str, where: str, name: str) -> float | None:
    try:
        return parse_duration(text)
    except ValueError:
        raise WorkloadError(where, f"{name} {text!r}",
                            "a Slurm duration (D-HH:MM:SS, HH:MM:SS, MM:SS; minutes and "
                            "seconds below 60, hours below 24 after days) or "
                            "UNLIMITED / Partition_Limit / Unknown") from None


def _int(text: str, where: str, name: str) -> int:
    t = text.strip()
    if not t:
        return 0
    try:
        value = int(t)
    except ValueError:
        raise WorkloadError(where, f"{name} {text!r}", "a whole number") from None
    # A count: negative is no job, and past int64 it cannot be a numpy column.
    if value < 0 or limits.out_of_int64(value):
        shown = t if len(t) <= 24 else f"{t[:12]}... ({len(t)} digits)"
        raise WorkloadError(where, f"{name} {shown}", "a whole number from 0 within int64")
    return value


def parse_hostlist(text: str) -> list[str]:
    """The node names of a Slurm host list (``node[01-03,07],gpu1`` -> 5 names).

    ``None assigned``, ``(null)`` and empty give no names. Ranges keep their
    zero padding; a bracket may hold several ranges and single numbers.

    Raises:
        ValueError: unbalanced brackets or a malformed range.

    Examples:
        >>> parse_hostlist("n[08-10,2],gpu1")
        ['n08', 'n09', 'n10', 'n2', 'gpu1']
    """
    text = text.strip()
    if not text or text.lower() in ("none assigned", "(null)", "none"):
        return []
    names: list[str] = []
    depth, part = 0, ""
    parts: list[str] = []
    for ch in text:   # split on commas outside brackets
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(text)
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    if depth:
        raise ValueError(text)
    parts.append(part)
    for part in parts:
        part = part.strip()
        if not part:
            continue
        if "[" not in part:
            names.append(part)
            continue
        prefix, _, rest = part.partition("[")
        body, _, suffix = rest.partition("]")
        if "[" in suffix or "]" in suffix:
            raise ValueError(text)   # one bracket group per name is what sacct writes
        for item in body.split(","):
            lo, dash, hi = item.strip().partition("-")
            if not lo.isdigit() or (dash and not hi.isdigit()):
                raise ValueError(text)
            if not dash:
                names.append(f"{prefix}{lo}{suffix}")
                continue
            a, b = int(lo), int(hi)
            if b < a or b - a > 1_000_000:
                raise ValueError(text)
            names.extend(f"{prefix}{k:0{len(lo)}d}{suffix}" for k in range(a, b + 1))
    return names


def _peak(start: np.ndarray, end: np.ndarray, size: np.ndarray) -> int:
    """Most ``size`` in use at once (ends before starts at the same instant)."""
    if not len(start):
        return 0
    times = np.concatenate([end, start])
    delta = np.concatenate([-size, size])
    order = np.lexsort((delta, times))   # by time, releases first
    return int(max(0, np.cumsum(delta[order]).max()))
