"""The job record the engine, policies and agents share.

A :class:`Job` is created when its user submits it and lives until the run
ends. Policies read it; only the scheduler and the nodes change it.
"""

from __future__ import annotations

import math
from enum import IntEnum

__all__ = ["Job", "JobState", "Outcome", "Mode"]


class JobState(IntEnum):
    """Where a job is now."""

    PENDING = 0   # not yet submitted
    QUEUED = 1
    RUNNING = 2
    DONE = 3      # completed, timed out, failed or rejected: see ``outcome``


class Outcome:
    """Final outcome strings, as written to ``jobs.parquet``."""

    COMPLETED = "completed"
    TIMEOUT = "timeout"        # killed at its walltime: finished, its last attempt wasted
    FAILED = "failed"          # dropped after a kill or node failure
    REJECTED = "rejected"      # could never fit the cluster
    UNFINISHED = "unfinished"  # still queued or running when the run stopped


class Mode:
    """Execution modes (DRAS, seed 004, table IV)."""

    READY = "ready"            # started in priority order, nothing skipped
    RESERVED = "reserved"      # started at (or before) a reservation it held
    BACKFILLED = "backfilled"  # started ahead of a higher-priority waiting job


class Job:
    """One job: what the user asked for, what it really does, what happened.

    Attributes:
        id: job id from the workload.
        index: row of the job in its workload (for features and trajectories).
        submit: submit time (s).
        run: true run time (s); the scheduler must not read it.
        procs: cores (or whole nodes on a node-granular cluster).
        mem: memory in cluster units, 0 if not modelled.
        req_time: requested walltime (s), the limit when walltime is enforced.
        estimate: the scheduler's expected run time (user estimate or prediction).
        user: user id (-1 unknown).
        start: start of the current (or last) attempt, NaN before.
        expected_end: when the scheduler expects the running attempt to end.
        end: end of the final attempt, NaN before.
        attempts: number of starts.
        kills: kill decisions the scheduler applied to it (by a rule or an agent);
            node failures are not kills. The kill rule's "kills so far".
        killed_seconds: seconds run in attempts that were killed or lost.
        mode, reason: how and why the last attempt was started.
        reservation: first start time promised to the job, NaN if none.
    """

    __slots__ = (
        "id", "index", "submit", "run", "procs", "mem", "req_time", "estimate", "user",
        "prev_job", "think", "state", "outcome", "start", "expected_end", "end", "attempts",
        "kills",
        "killed_seconds", "killed_core_seconds", "mode", "reason", "reservation", "promised",
        "process", "alloc", "queue_slot", "enqueued_at",
    )

    def __init__(self, id: int, index: int, submit: float, run: float, procs: int,
                 req_time: float, estimate: float, mem: float = 0.0, user: int = -1,
                 prev_job: int = -1, think: float = -1.0):
        self.id = id
        self.index = index
        self.submit = submit
        self.run = run
        self.procs = procs
        self.mem = mem
        self.req_time = req_time
        self.estimate = estimate
        self.user = user
        self.prev_job = prev_job
        self.think = think
        self.state = JobState.PENDING
        self.outcome = Outcome.UNFINISHED
        self.start = math.nan
        self.expected_end = math.nan
        self.end = math.nan
        self.attempts = 0
        self.kills = 0
        self.killed_seconds = 0.0
        self.killed_core_seconds = 0.0
        self.mode = ""
        self.reason = ""
        self.reservation = math.nan
        self.promised = math.nan  # latest promised start (reservation)
        self.process = None      # the running attempt (cosim.actors.nodes.Attempt)
        self.alloc = None        # what the cluster gave the current attempt
        self.queue_slot = -1     # slot in the scheduler's queue arrays
        self.enqueued_at = math.nan

    def __repr__(self) -> str:
        return (f"Job(id={self.id}, submit={self.submit}, procs={self.procs}, "
                f"estimate={self.estimate}, state={self.state.name})")
