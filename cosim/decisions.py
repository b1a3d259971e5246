"""The seam every policy uses: :class:`SchedulerView` in, :class:`Decision` out.

A policy is any object with a ``name`` and ``decide(view)`` returning an
iterable of decisions. The scheduler applies each decision as soon as it is
produced, so a generator policy sees the cluster and queue as its earlier
decisions left them. The scheduler validates every decision (a start must
fit now, a kill must name a running job); refused decisions are counted and
recorded, never applied.

A policy that needs an answer from outside the simulation (a learning agent
behind the Gym environment, a remote scheduler) yields a SimPy event instead
of a decision: the scheduler process waits for it, simulated time standing
still unless the event is a timeout, and applies the decision the event
succeeds with (``None``: nothing). Heuristics never do this and pay nothing
for it.

Examples:
    >>> class StartHead:
    ...     name = "start-head"
    ...     def decide(self, view):
    ...         job = view.queue.first()
    ...         if job is not None and view.cluster.fits_now(job.procs, job.mem):
    ...             yield start(job, "ready", "fits at head")
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from cosim.kernel import now as clock

if TYPE_CHECKING:
    import simpy

    from cosim.job import Job
    from cosim.queue import JobQueue

__all__ = ["Decision", "Policy", "SchedulerView", "ClusterState", "START", "RESERVE", "KILL", "WAIT",
           "start", "reserve", "release", "kill", "wait"]

START, RESERVE, KILL, WAIT = "start", "reserve", "kill", "wait"


class Decision(NamedTuple):
    """One scheduling decision.

    Attributes:
        action: ``"start"``, ``"reserve"``, ``"kill"`` or ``"wait"``.
        job: the job it concerns (None for wait).
        mode: execution mode for a start (``ready``/``reserved``/``backfilled``).
        reason: why, in a few words (recorded in ``decisions.parquet``).
        time: the promised start time for a reservation (NaN withdraws it).
        requeue: for a kill, whether the job goes back to the queue.
    """

    action: str
    job: Job | None
    mode: str = ""
    reason: str = ""
    time: float = math.nan
    requeue: bool = True


def start(job: Job, mode: str, reason: str) -> Decision:
    """Start ``job`` now."""
    return Decision(START, job, mode, reason)


def reserve(job: Job, time: float, reason: str = "") -> Decision:
    """Promise ``job`` a start no later than ``time``."""
    return Decision(RESERVE, job, "", reason, time)


def release(job: Job, reason: str = "") -> Decision:
    """Withdraw ``job``'s standing reservation (it no longer holds a promised start)."""
    return Decision(RESERVE, job, "", reason, math.nan)


def kill(job: Job, reason: str, requeue: bool = True) -> Decision:
    """Kill a running job; requeue it or drop it."""
    return Decision(KILL, job, "", reason, math.nan, requeue)


def wait(reason: str = "") -> Decision:
    """Do nothing until the next event."""
    return Decision(WAIT, None, reason=reason)


class ClusterState(Protocol):
    """What a policy may read of the cluster (the scheduler's ``Cluster`` satisfies it).

    Typing the seam by this Protocol, not by the concrete ``Cluster``, keeps
    policies below the actors: they read these figures and never call the
    cluster's methods that change it.
    """

    capacity: int           # units (cores, or nodes on a node-granular cluster)
    free: int               # free units on nodes that are up
    up_units: int           # units on nodes that are up
    free_mem: float         # free pooled memory (inf when memory is not modelled)
    node_granular: bool
    memory_pooled: bool
    cores_per_node: int
    memory_per_node: float
    nodes: Sequence         # the nodes (a policy reads their count)

    def fits_now(self, procs: int, mem: float) -> bool:
        """Whether a job of this size fits in the free resources now."""
        ...


class SchedulerView:
    """What a policy may read: now, the queue, running jobs, free resources.

    Policies must not change what they read; they return decisions. The
    scheduler keeps the view current and sets its flags before each pass.

    Args:
        env: the simulation environment.
        queue: the :class:`cosim.queue.JobQueue` of waiting jobs.
        cluster: the cluster, read through :class:`ClusterState` (capacity, free units).
        ends: ``(expected_end, seq, job)`` of running jobs, kept sorted by
            whoever owns it (the scheduler); read, never modified, here.
        jobs: every job submitted so far (the scheduler's list).
        expected_jobs: how many jobs the run will submit in all (-1: unknown).

    Attributes:
        released: resources were freed or expectations changed since the
            previous pass (a policy may skip work when this is False).
        surprise: something did not go as the scheduler expected since the
            previous pass (a job ended early or overran, a kill, a node
            change, an estimate update): plans must be rebuilt.
        new_jobs: jobs that joined the queue since the previous pass.
    """

    def __init__(self, env: simpy.Environment, queue: JobQueue, cluster: ClusterState,
                 ends: list[tuple[float, int, Job]], jobs: list[Job] | None = None,
                 expected_jobs: int = -1):
        self.env = env
        self.queue = queue
        self.cluster = cluster
        self._ends = ends
        self._jobs = jobs if jobs is not None else []
        self._expected_jobs = expected_jobs
        self.released = True
        self.surprise = True
        self.new_jobs: list[Job] = []

    @property
    def now(self) -> float:
        """Current simulated time (s)."""
        return self.env.now

    @property
    def free(self) -> int:
        """Free units (cores, or nodes on a node-granular cluster)."""
        return self.cluster.free

    @property
    def free_mem(self) -> float:
        """Free memory (inf when memory is not modelled)."""
        return self.cluster.free_mem

    @property
    def running(self) -> list[Job]:
        """Running jobs ordered by expected end."""
        return [entry[2] for entry in self._ends]

    def arrivals_pending(self) -> bool:
        """Whether more jobs will be submitted (True when the total is unknown)."""
        return self._expected_jobs < 0 or len(self._jobs) < self._expected_jobs

    def ends(self) -> list[tuple[float, int, Job]]:
        """``(expected_end, seq, job)`` of running jobs, sorted (do not modify)."""
        return self._ends

    def shadow(self, procs: int, mem: float = 0.0) -> tuple[float, int, float]:
        """When a job of this size could start if running jobs end as expected.

        Returns:
            ``(shadow_time, extra_units, extra_mem)``: the earliest time enough
            units and memory are free, and what is left over at that time once
            the job is placed (every job expected to end by then counted).
            ``(inf, 0, 0)`` if that never happens (nodes down).
        """
        cl = self.cluster
        avail, avail_mem = cl.free, cl.free_mem
        now = clock(self.env)
        if procs <= avail and mem <= avail_mem:
            return now, avail - procs, avail_mem - mem
        ends = self._ends
        n = len(ends)
        if avail_mem == math.inf or cl.node_granular:
            # Cores only (the common case): one pass over the sorted ends.
            need = procs - avail
            for i, (t, _, job) in enumerate(ends):
                need -= job.procs
                if need <= 0:
                    extra = -need
                    i += 1
                    while i < n and ends[i][0] == t:   # every job ending then counts
                        extra += ends[i][2].procs
                        i += 1
                    return (t if t > now else now), extra, avail_mem - mem
            return math.inf, 0, 0.0
        i = 0
        while i < n:
            t = ends[i][0]
            # Take every job expected to end at this same time.
            while i < n and ends[i][0] == t:
                job = ends[i][2]
                avail += job.procs
                avail_mem += job.mem
                i += 1
            if avail >= procs and avail_mem >= mem:
                return (t if t > now else now), avail - procs, avail_mem - mem
        return math.inf, 0, 0.0


class Policy(Protocol):
    """What the scheduler asks at every decision point."""

    name: str

    def decide(self, view: SchedulerView) -> Iterable[Decision | simpy.Event]:
        """Decisions for now, applied in order as they are produced (see the module docstring)."""
        ...
