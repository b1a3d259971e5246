"""Builds the SimPy model of one scenario into a caller-owned environment.

``build(env, scenario, policy)`` adds the cluster (node processes when faults
are on), the scheduler process and the user processes to ``env`` and returns
a :class:`Simulation` handle. It never calls ``env.run()``: the runner, the
Gym environment or a host model (a data-center study with its own
processes) owns the clock.

Examples:
    >>> import simpy
    >>> from cosim.config import scenario_from_dict
    >>> from cosim.policies import make_policy
    >>> from cosim.workloads.base import Workload
    >>> sc = scenario_from_dict({"cluster": {"nodes": 4},
    ...                          "workload": {"kind": "lublin", "jobs": 2}})
    >>> w = Workload.from_columns(submit=[0, 1], run=[5, 5], procs=[4, 2])
    >>> env = simpy.Environment()
    >>> sim = build(env, sc, make_policy("fcfs+easy"), workload=w)
    >>> env.run(until=sim.finished)
    >>> [job.start for job in sim.scheduler.jobs]
    [0.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from cosim import kernel, limits, records
from cosim.actors.faults import FaultGuard, RunBound
from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler, SchedulerHooks, SchedulerRules
from cosim.actors.users import Users
from cosim.config import Scenario
from cosim.decisions import Policy
from cosim.workloads.base import Workload
from cosim.workloads.loading import STREAMS, load_workload, resolve_machine, streams

# load_workload and streams live in cosim.workloads.loading; kept importable here.
__all__ = ["Simulation", "build", "capacity_of", "load_workload", "streams", "STREAMS",
           "run_horizon", "start_limit"]


@dataclass
class Simulation:
    """Handle on a built model.

    Attributes:
        env: the environment the model lives in.
        cluster, scheduler, users: the actors.
        workload: the jobs being submitted.
        finished: an event that fires when every job is done (completed,
            timed out, failed or rejected).
        bound: the bound of a run with failures (:class:`RunBound`), else None.
    """

    env: simpy.Environment
    scenario: Scenario
    cluster: Cluster
    scheduler: Scheduler
    users: Users
    workload: Workload
    bound: RunBound | None = None

    @property
    def finished(self) -> simpy.Event:
        """Fires when every job of the workload is done."""
        return self.scheduler.finished

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Run the environment until every job is done (or ``until``).

        The same events in the same order as ``env.run(until=...)``, with
        the garbage collector's full collections put off until it returns
        (see :func:`cosim.kernel.run`); runners should prefer it.
        """
        kernel.run(self.env, self.finished if until is None else until)

    def jobs_table(self) -> dict[str, np.ndarray | list]:
        """One row per submitted job (schema ``jobs/1``)."""
        return records.jobs_table(self.scheduler.jobs)

    def events_table(self) -> dict[str, np.ndarray | list]:
        """One row per state change (schema ``events/1``)."""
        return records.events_table(self.scheduler.events)

    def decisions_table(self) -> dict[str, np.ndarray | list]:
        """One row per applied (or refused) decision (schema ``decisions/1``)."""
        return records.decisions_table(self.scheduler.decisions)


def capacity_of(scenario: Scenario) -> int:
    """Schedulable units of the scenario's machine (cores, or nodes on a node-granular
    cluster): the capacity of the cluster :func:`build` makes."""
    c = scenario.cluster
    return c.nodes if c.granularity == "node" else c.nodes * c.cores_per_node


def build(env: simpy.Environment, scenario: Scenario, policy: Policy, *,
          workload: Workload | None = None, estimate: np.ndarray | None = None,
          record: bool = True, base_dir: str | Path | None = None,
          hooks: Sequence[SchedulerHooks] = ()) -> Simulation:
    """Add the scenario's actors to ``env`` (see the module docstring).

    Args:
        env: the caller's environment.
        scenario: the validated scenario.
        policy: the scheduling policy.
        workload: the jobs (default: :func:`load_workload`).
        estimate: the scheduler's expected run time per workload row
            (default: the requested times).
        record: keep event and decision rows.
        base_dir: where relative trace paths are resolved.
        hooks: :class:`cosim.actors.scheduler.SchedulerHooks` that follow or
            assist the scheduler (a :class:`cosim.prediction_hub.PredictionHub`,
            a study's own probes).
    """
    if workload is None:
        workload = load_workload(scenario, base_dir=base_dir)
    # A trace replay that left the machine size unset runs on the trace's machine.
    scenario = resolve_machine(scenario, workload)
    c = scenario.cluster
    cluster = Cluster(env, nodes=c.nodes, cores_per_node=c.cores_per_node,
                      memory_per_node=c.memory_per_node, granularity=c.granularity,
                      enforce_walltime=scenario.scheduler.enforce_walltime,
                      track_placement=scenario.faults.mtbf > 0)
    rules = SchedulerRules(
        correction=scenario.scheduler.correction,
        overrun_min_extension=scenario.scheduler.overrun_min_extension,
        overrun_fraction=scenario.scheduler.overrun_fraction,
        requeue_on_failure=scenario.faults.on_failure == "requeue",
        max_attempts=scenario.faults.max_attempts)
    scheduler = Scheduler(env, cluster, policy, rules=rules, record=record, hooks=tuple(hooks),
                          expected_jobs=len(workload))
    # A policy that needs the trace and timers of its own (``recorded``) binds here.
    attach = getattr(policy, "attach_model", None)
    if attach is not None:
        attach(scheduler, workload)
    users = Users(env, scheduler, workload, estimate=estimate,
                  user_aware=scenario.workload.user_aware)
    bound = None
    if scenario.faults.mtbf > 0:
        f = scenario.faults
        limit = start_limit(scenario)
        scheduler.add_hook(FaultGuard(limit))
        bound = RunBound(env, run_horizon(scenario, workload, limit),
                         limits.NODE_FAILURES.value)
        scheduler.add_hook(bound)
        stop = simpy.AnyOf(env, [scheduler.finished, bound.reached])
        rng = streams(scenario.seed)["faults"]
        for node in cluster.nodes:
            env.process(node.fail_and_recover(cluster, f.mtbf, f.mttr, rng, stop=stop))
    return Simulation(env, scenario, cluster, scheduler, users, workload, bound)


def start_limit(scenario: Scenario) -> float:
    """``faults.start_limit``, or its default: 10 x ``mttr`` but at most
    :data:`cosim.limits.MAX_START_LIMIT` (finite whatever ``mttr`` is)."""
    f = scenario.faults
    if f.start_limit is not None:
        return f.start_limit
    return min(10.0 * f.mttr, limits.MAX_START_LIMIT)


def run_horizon(scenario: Scenario, workload: Workload, limit: float) -> float:
    """The simulated time a run with failures may last (its :class:`RunBound`).

    The last submit, plus the workload's serial time (every job run after
    another, each at its longest: run or requested time, ``max_attempts``
    times; think times when users wait on their jobs), plus one start limit.
    Any schedule that keeps starting jobs ends well within it; only a run
    that failures keep from ending reaches it.
    """
    if not len(workload):
        return limit
    longest = np.maximum(workload.run, workload.req_time)
    serial = scenario.faults.max_attempts * float(longest.sum())
    if scenario.workload.user_aware:
        serial += float(np.nansum(np.maximum(workload.think, 0.0)))
    return float(workload.submit.max()) + serial + limit
