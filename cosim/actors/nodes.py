"""Compute nodes and the cluster that allocates them.

Nodes own cores (and, on node-granular clusters, their memory); a running job
is an :class:`Attempt`, a timer with callbacks that any node of its allocation
can interrupt (kill, node failure) as one would interrupt a SimPy process. Core-granular clusters let a job span nodes
and treat memory as one cluster-wide pool, the two-resource model of DeepRM
(Mao et al. 2016, seed 002); node-granular clusters give whole nodes, so
memory only decides whether a job fits a node at all (checked at submit).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import simpy

from cosim.job import Job, Outcome
from cosim.kernel import call_urgent, timer
from cosim.kernel import now as clock

__all__ = ["Node", "Cluster", "ClusterListener", "Killed", "NodeFailure", "Attempt"]

_POOLED: list = []   # the allocation of a job holding pooled cores (no placement)
_TIMEOUT, _COMPLETED = Outcome.TIMEOUT, Outcome.COMPLETED


@dataclass(frozen=True)
class Killed:
    """Interrupt cause: the scheduler (or an agent) killed the job."""

    reason: str = "killed"
    requeue: bool = True


@dataclass(frozen=True)
class NodeFailure:
    """Interrupt cause: a node of the job's allocation went down."""

    node: int


class ClusterListener(Protocol):
    """Who hears what happens to running jobs and nodes (the scheduler)."""

    def job_ended(self, job: Job, outcome: str) -> None:
        """An attempt finished: completed, or killed at its walltime."""

    def job_interrupted(self, job: Job, cause: object) -> None:
        """An attempt was interrupted (a kill or a node failure)."""

    def job_overran(self, job: Job) -> None:
        """A running job passed the end it was expected at."""

    def node_changed(self, node: Node, *, up: bool) -> None:
        """A node went down or came back."""


class Node:
    """One compute node.

    Args:
        env: the simulation environment.
        index: position in the cluster.
        cores: cores on the node.
        memory: memory on the node (cluster units, 0 = not modelled).
    """

    __slots__ = ("env", "index", "cores", "memory", "free_cores", "up", "jobs")

    def __init__(self, env: simpy.Environment, *, index: int, cores: int, memory: float = 0.0):
        self.env = env
        self.index = index
        self.cores = cores
        self.memory = memory
        self.free_cores = cores
        self.up = True
        self.jobs: dict[Job, int] = {}   # job -> cores it holds here

    def fail_and_recover(self, cluster: Cluster, mtbf: float, mttr: float,
                         rng: np.random.Generator,
                         stop: simpy.Event | None = None) -> Generator:
        """Process: go down after Exp(mtbf), come back after Exp(mttr), until ``stop``.

        ``stop`` (the scheduler's ``finished``) ends the process at its next
        wake-up once it has fired, so a model whose jobs are all done runs out
        of events instead of failing nodes forever (``env.run()`` returns).
        """
        env = self.env
        while stop is None or not stop.triggered:
            yield env.timeout(rng.exponential(mtbf))
            if stop is not None and stop.triggered:
                return
            cluster.node_down(self)
            yield env.timeout(rng.exponential(mttr))
            cluster.node_up(self)


class Cluster:
    """The nodes and the bookkeeping the scheduler needs to place jobs fast.

    Free capacity is kept as running totals so a fit test is O(1); an
    allocation touches only the nodes it takes.

    Args:
        env: the simulation environment.
        nodes: node count.
        cores_per_node: cores on each node.
        memory_per_node: memory on each node (0 = memory not modelled).
        granularity: ``"core"`` (jobs ask for cores and may span nodes) or
            ``"node"`` (jobs ask for whole nodes).
        enforce_walltime: kill a job that reaches its requested time.
        track_placement: record which nodes hold each job's cores. Needed
            when something depends on placement (node failures, whole-node
            allocation); without it a core-granular job holds cores from the
            pool, which is observably the same and several times faster on
            clusters of many small nodes.
    """

    def __init__(self, env: simpy.Environment, *, nodes: int, cores_per_node: int,
                 memory_per_node: float = 0.0, granularity: str = "core",
                 enforce_walltime: bool = False, track_placement: bool = True):
        self.env = env
        self.granularity = granularity
        self.node_granular = granularity == "node"
        self.cores_per_node = cores_per_node
        self.memory_per_node = memory_per_node
        self.enforce_walltime = enforce_walltime
        self.track_placement = track_placement or granularity == "node"
        self.nodes = [Node(env, index=i, cores=cores_per_node, memory=memory_per_node)
                      for i in range(nodes)]
        self.total_cores = nodes * cores_per_node
        # The unit jobs ask for: cores, or whole nodes.
        self.capacity = nodes if self.node_granular else self.total_cores
        self.free = self.capacity           # free units on nodes that are up
        self.up_units = self.capacity
        self.memory_pooled = memory_per_node > 0 and not self.node_granular
        self.free_mem = memory_per_node * nodes if self.memory_pooled else math.inf
        # Nodes with free cores, in a stable order: partly used first (packing).
        self._partial: dict[int, None] = {}
        self._empty: dict[int, None] = dict.fromkeys(range(nodes))
        self.listener: ClusterListener | None = None
        # Units of nodes that came back while ``hold_for`` (a queued job wider
        # than the nodes up) waits: a count kept out of ``free`` and
        # ``up_units`` alike (they count as down), so backfilling cannot take
        # them before the wide job gets its chance. Which cores are held does
        # not matter: jobs take any free ones. Cores freed by ending jobs are
        # not held: draining the machine for a job that may never start idled
        # it (lublin256, mtbf 1e6 s: mean wait 6x that of holding returns only).
        self.hold_for: Job | None = None
        self.held = 0

    def bind(self, listener: ClusterListener) -> None:
        """Tell ``listener`` (the scheduler) about job ends, interrupts and node changes."""
        self.listener = listener

    # -- queries ---------------------------------------------------------
    # On node-granular clusters every count below is in nodes, like job sizes,
    # so utilization and its parts stay in one unit.
    @property
    def used_cores(self) -> int:
        """Units (cores, or nodes) held by running jobs on nodes that are up."""
        return self.up_units - self.free

    @property
    def up_cores(self) -> int:
        """Units (cores, or nodes) on nodes that are up."""
        return self.up_units

    def fits_now(self, procs: int, mem: float) -> bool:
        """Whether a job of this size can start now."""
        return procs <= self.free and mem <= self.free_mem

    def could_ever_fit(self, procs: int, mem: float) -> str:
        """Why a job can never run here, or "" if it can."""
        if procs > self.capacity:
            unit = "nodes" if self.node_granular else "cores"
            return f"needs {procs} {unit}, cluster has {self.capacity}"
        if self.memory_per_node > 0:
            if self.node_granular and mem / procs > self.memory_per_node:
                return f"needs {mem / procs:g} memory per node, nodes have {self.memory_per_node:g}"
            if not self.node_granular and mem > self.memory_per_node * len(self.nodes):
                return f"needs {mem:g} memory, cluster has {self.memory_per_node * len(self.nodes):g}"
        return ""

    # -- allocation --------------------------------------------------------
    def allocate(self, job: Job) -> list[tuple[Node, int]]:
        """Take resources for ``job`` (the caller checked it fits)."""
        if not self.track_placement:
            self.free -= job.procs
            self.free_mem -= job.mem
            return _POOLED
        need = job.procs
        alloc: list[tuple[Node, int]] = []
        nodes = self.nodes
        if self.node_granular:
            empty = self._empty
            for i in empty:
                alloc.append((nodes[i], nodes[i].cores))
                need -= 1
                if need == 0:
                    break
            for node, cores in alloc:
                del empty[node.index]
                node.free_cores = 0
                node.jobs[job] = cores
            self.free -= job.procs
            return alloc
        for pool in (self._partial, self._empty):
            if need == 0:
                break
            for i in pool:
                node = nodes[i]
                take = node.free_cores if node.free_cores < need else need
                alloc.append((node, take))
                need -= take
                if need == 0:
                    break
        partial, empty = self._partial, self._empty
        for node, take in alloc:
            i = node.index
            if node.free_cores == node.cores:
                del empty[i]
            else:
                del partial[i]
            node.free_cores -= take
            if node.free_cores:
                partial[i] = None
            node.jobs[job] = take
        self.free -= job.procs
        self.free_mem -= job.mem
        return alloc

    def release(self, job: Job) -> None:
        """Give back what ``job`` holds; cores on down nodes stay out of the pool."""
        if job.alloc is _POOLED:
            self.free += job.procs
            self.free_mem += job.mem
            job.alloc = None
            return
        freed = 0
        partial, empty = self._partial, self._empty
        for node, take in job.alloc:
            del node.jobs[job]
            was_free = node.free_cores
            node.free_cores += take
            if not node.up:
                continue
            freed += take
            i = node.index
            if was_free:
                del partial[i]
            if node.free_cores == node.cores:
                empty[i] = None
            else:
                partial[i] = None
        if self.node_granular:
            self.free += freed // self.cores_per_node
        else:
            self.free += freed
            self.free_mem += job.mem
        job.alloc = None

    # -- running jobs ------------------------------------------------------
    def run_job(self, job: Job) -> Attempt:
        """Start one attempt of ``job`` on its allocation (the caller allocated it).

        The attempt is an :class:`Attempt`: a timer with callbacks rather than
        a SimPy process of its own (three events and a generator per job
        become one event), with the semantics of one: it ends when the job
        ends or hits its walltime, tells the scheduler when the job passes
        its expected end, and can be interrupted (kill, node failure).

        Returns:
            The attempt, also stored as ``job.process``.
        """
        attempt = job.process = Attempt(self, job)
        env = self.env
        now = clock(env)
        end_at = attempt.end_at
        if end_at > now:
            # Attempt._arm, inlined: once per job
            expected_end = job.expected_end
            if expected_end < end_at:
                delay = expected_end - now
                attempt._timer = timer(env, delay if delay > 0.0 else 0.0,
                                       attempt._expected_end_reached)
            else:
                attempt._timer = timer(env, end_at - now, attempt._ended)
        else:
            attempt.begin()
        return attempt

        # -- faults -------------------------------------------------------------
    def node_down(self, node: Node) -> None:
        """Take a node out: its free cores leave the pool, its jobs are interrupted."""
        if not node.up:
            return
        node.up = False
        i = node.index
        # Hold counts are not tied to nodes: give them back, take the node out,
        # then hold again what is still free (at most what was held).
        held = self._unhold()
        if self.node_granular:
            self.up_units -= 1
            if i in self._empty:
                del self._empty[i]
                self.free -= 1
        else:
            self.up_units -= node.cores
            self.free -= node.free_cores
            self._partial.pop(i, None)
            self._empty.pop(i, None)
            if self.memory_pooled:
                self.free_mem -= node.memory
        if held:
            self._hold(min(held, self.free))
        for job in list(node.jobs):
            if job.process is not None and job.process.is_alive:
                job.process.interrupt(NodeFailure(node=i))
        self.listener.node_changed(node, up=False)

    def node_up(self, node: Node) -> None:
        """Bring a node back with all its cores free."""
        if node.up:
            return
        node.up = True
        i = node.index
        free_before = self.free
        if self.node_granular:
            self.up_units += 1
            self.free += 1
        else:
            self.up_units += node.cores
            self.free += node.free_cores
            if self.memory_pooled:
                self.free_mem += node.memory
        if node.free_cores == node.cores:
            self._empty[i] = None
        elif node.free_cores:
            self._partial[i] = None
        if self.hold_for is not None:
            self._hold(self.free - free_before)
        self.listener.node_changed(node, up=True)

    def _hold(self, units: int) -> None:
        """Keep ``units`` free units out of the pool (and out of ``up_units``)."""
        self.held += units
        self.free -= units
        self.up_units -= units

    def _unhold(self) -> int:
        units = self.held
        self.held = 0
        self.free += units
        self.up_units += units
        return units

    def release_held(self) -> int:
        """Give the held units back to the pool and stop holding; returns how many."""
        self.hold_for = None
        return self._unhold()


class Attempt:
    """One attempt of a running job: a timer with callbacks, interruptible like a process.

    While the job runs, exactly one timer of the attempt is pending: until
    the job's expected end when it will outlive it (then the scheduler hears
    :meth:`ClusterListener.job_overran` and the timer is set again), else
    until the job ends or hits its walltime. :meth:`interrupt` ends the
    attempt early: like ``simpy.Process.interrupt`` it takes effect in an
    urgent event at the current time, releases the resources and tells the
    scheduler (:meth:`ClusterListener.job_interrupted`); a second interrupt
    of the same attempt, or a timer of an attempt that is over, does nothing.

    Attributes:
        job: the job.
        end_at: when the attempt ends if nothing interrupts it.
        timed_out: whether it ends at the walltime rather than completing.
        is_alive: True until the attempt ended or was interrupted.
    """

    __slots__ = ("cluster", "job", "end_at", "timed_out", "is_alive", "_timer")

    def __init__(self, cluster: Cluster, job: Job):
        self.cluster = cluster
        self.job = job
        limit = job.req_time if cluster.enforce_walltime else math.inf
        self.timed_out = job.run > limit
        self.end_at = clock(cluster.env) + (limit if self.timed_out else job.run)
        self.is_alive = True
        self._timer: object = None   # the pending timer (cosim.kernel.Call)

    def begin(self) -> None:
        """Set the first timer (called once, right after the job started)."""
        env = self.cluster.env
        if self.end_at <= clock(env):
            # A zero-length attempt: its end event must come after whatever the
            # scheduler's pass set off at this instant (a SimPy process would
            # only create it once started), so arm it from an urgent event.
            call_urgent(env, self._arm)
            return
        self._arm(None)

    def _arm(self, _event) -> None:
        # (inlined in Cluster.run_job: keep the two alike)
        if not self.is_alive:
            return
        env = self.cluster.env
        # The same arithmetic as a process sleeping ``timeout(t - now)``, so
        # event times (and ties) are bit-identical to the process version.
        expected_end = self.job.expected_end
        if expected_end < self.end_at:
            delay = expected_end - clock(env)
            self._timer = timer(env, delay if delay > 0.0 else 0.0, self._expected_end_reached)
        else:
            self._timer = timer(env, self.end_at - clock(env), self._ended)

    def _expected_end_reached(self, event) -> None:
        if event is not self._timer or not self.is_alive:
            return
        job, now = self.job, self.cluster.env.now
        if job.expected_end <= now < self.end_at:
            self.cluster.listener.job_overran(job)
        self._arm(None)

    def _ended(self, event) -> None:
        if event is not self._timer or not self.is_alive:
            return
        self.is_alive = False
        self._timer = None
        job = self.job
        cluster = self.cluster
        if job.alloc is _POOLED:   # Cluster.release's first case, inlined: once per job
            cluster.free += job.procs
            cluster.free_mem += job.mem
            job.alloc = None
        else:
            cluster.release(job)
        cluster.listener.job_ended(job, _TIMEOUT if self.timed_out else _COMPLETED)

    def interrupt(self, cause: object) -> None:
        """End the attempt now, for ``cause`` (:class:`Killed` or :class:`NodeFailure`).

        Takes effect in an urgent event at the current time, as
        ``simpy.Process.interrupt`` does.

        Raises:
            RuntimeError: the attempt is already over.
        """
        if not self.is_alive:
            raise RuntimeError(f"the attempt of {self.job} is over and cannot be interrupted")
        env = self.cluster.env
        call_urgent(env, self._interrupted, cause)

    def _interrupted(self, event) -> None:
        if not self.is_alive:
            return   # a second interrupt in the same instant: the first one ended it
        self.is_alive = False
        self._timer = None
        job = self.job
        self.cluster.release(job)
        self.cluster.listener.job_interrupted(job, event.value)
