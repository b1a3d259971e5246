"""Builds the SimPy model of one scenario into a caller-owned environment.

``build(env, scenario, policy)`` adds the cluster (node processes when faults
are on), the scheduler process and the user processes to ``env`` and returns
a :class:`Simulation` handle. It never calls ``env.run()``: the runner, the
Gym environment or a host model (a data-center study with its own
processes) owns the clock.

Examples:
    >>> import simpy
    >>> from cosim.config import scenario_from_dict
    >>> from agents.heuristics import make_policy
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

import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from cosim.actors.nodes import Cluster
from cosim.actors.scheduler import Scheduler, SchedulerRules
from cosim.actors.users import Users
from cosim.config import Scenario
from cosim.errors import ScenarioError
from cosim.policy import Policy
from cosim.workloads.base import Workload

__all__ = ["Simulation", "build", "load_workload", "streams", "STREAMS"]

#: Named random streams split from the scenario seed (SeedSequence.spawn order).
STREAMS = ("workload", "estimates", "window", "faults", "policy", "agent")


def streams(seed: int) -> dict[str, np.random.Generator]:
    """One independent generator per named stream, all from ``seed``."""
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(STREAMS, children)}


def _call_with_params(fn, params: dict, where: str, **fixed):
    """Call a generator with user params, naming any unknown parameter clearly."""
    sig = inspect.signature(fn)
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    valid = [n for n, p in sig.parameters.items()
             if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n not in fixed]
    if not accepts_any:
        import difflib
        for key in params:
            if key not in valid:
                near = difflib.get_close_matches(key, valid, n=1)
                raise ScenarioError(f"{where}.{key}", f"unknown parameter {key!r}",
                                    f"one of {', '.join(valid)}",
                                    f"did you mean {near[0]!r}?" if near else "")
    try:
        return fn(**fixed, **params)
    except TypeError as exc:
        raise ScenarioError(where, repr(params), f"valid parameters ({exc})") from None


def load_workload(scenario: Scenario, *, base_dir: str | Path | None = None) -> Workload:
    """The scenario's workload: read or generated, windowed, with its estimates.

    Args:
        scenario: the validated scenario.
        base_dir: directory relative trace paths are resolved against (the
            current directory if None).
    """
    wc = scenario.workload
    rngs = np.random.SeedSequence(scenario.seed).spawn(len(STREAMS))
    seed_of = dict(zip(STREAMS, (int(s.generate_state(1)[0]) for s in rngs)))
    cores = scenario.cluster.nodes * (1 if scenario.cluster.granularity == "node"
                                      else scenario.cluster.cores_per_node)
    if wc.kind == "swf":
        from cosim.workloads.swf import read_swf

        if not wc.path:
            raise ScenarioError("workload.path", "nothing",
                                "the trace to replay (e.g. --set workload.path=trace.swf)")
        path = Path(wc.path)
        if base_dir is not None and not path.is_absolute() and not path.exists():
            path = Path(base_dir) / path
        params = dict(wc.params)
        params.setdefault("max_procs", cores)
        workload = _call_with_params(read_swf, params, "workload.params", path=str(path))
    elif wc.kind == "lublin":
        from cosim.workloads.lublin import lublin

        params = dict(wc.params)
        params.setdefault("procs", cores)
        workload = _call_with_params(lublin, params, "workload.params",
                                     n_jobs=wc.jobs or 10_000, seed=seed_of["workload"])
    elif wc.kind == "mao":
        from cosim.workloads.mao import mao

        params = dict(wc.params)
        params.setdefault("cluster_cpu", cores)
        if scenario.cluster.memory_per_node > 0:
            params.setdefault("cluster_mem", scenario.cluster.memory_per_node
                              * scenario.cluster.nodes)
        workload = _call_with_params(mao, params, "workload.params",
                                     n_jobs=wc.jobs or 1_000, seed=seed_of["workload"])
    elif wc.kind == "vasp":
        from cosim.workloads.vasp import generate_vasp

        jobs = _call_with_params(generate_vasp, dict(wc.params), "workload.params",
                                 n_jobs=wc.jobs or 1_000, seed=seed_of["workload"])
        workload = jobs.workload
        # Keep the trajectories: predictors read running jobs' progress logs.
        workload.features["progress_index"] = np.arange(len(workload))
        workload.progress = jobs
    else:  # pragma: no cover - the schema admits no other kind
        raise ScenarioError("workload.kind", repr(wc.kind), "swf, lublin, mao or vasp")

    if wc.kind == "swf" and (wc.jobs is not None or wc.offset != 0):
        from cosim.workloads.windows import window

        n = min(wc.jobs or len(workload), len(workload))
        start = None if wc.offset == "random" else int(wc.offset)
        if start is not None and start + n > len(workload):
            raise ScenarioError("workload.offset", str(start),
                                f"at most {len(workload) - n} for {n} jobs of {len(workload)}")
        workload = window(workload, n, rng_or_seed=seed_of["window"], start=start)
    if wc.estimates.model != "trace":
        from cosim.workloads.estimates import apply_estimates

        workload = _call_with_params(apply_estimates, dict(wc.estimates.params),
                                     "workload.estimates.params", workload=workload,
                                     name=wc.estimates.model, seed=seed_of["estimates"])
    workload.validate()
    return workload


@dataclass
class Simulation:
    """Handle on a built model.

    Attributes:
        env: the environment the model lives in.
        cluster, scheduler, users: the actors.
        workload: the jobs being submitted.
        finished: an event that fires when every job is done (completed,
            timed out, failed or rejected).
    """

    env: simpy.Environment
    scenario: Scenario
    cluster: Cluster
    scheduler: Scheduler
    users: Users
    workload: Workload

    @property
    def finished(self) -> simpy.Event:
        """Fires when every job of the workload is done."""
        return self.scheduler.finished

    def jobs_table(self) -> dict[str, np.ndarray | list]:
        """One row per submitted job (schema ``jobs/1``)."""
        jobs = self.scheduler.jobs

        def f(attr):
            return np.fromiter((getattr(j, attr) for j in jobs), dtype=np.float64, count=len(jobs))

        def i(attr, dtype=np.int64):
            return np.fromiter((getattr(j, attr) for j in jobs), dtype=dtype, count=len(jobs))

        start = f("start")
        end = f("end")
        outcome = [j.outcome for j in jobs]
        ended = np.array([o in ("completed", "timeout") for o in outcome], dtype=bool)
        # A failed job's "end" is when it was dropped; it has no completed run.
        end = np.where(ended | np.isnan(start), end, end)
        run = np.where(ended, end - start, math.nan)
        return {
            "job_id": i("id"), "user": i("user"), "submit": f("submit"), "start": start,
            "end": end, "run": run, "req_time": f("req_time"), "estimate": f("estimate"),
            "procs": i("procs"), "mem": f("mem"), "outcome": outcome,
            "mode": [j.mode for j in jobs], "reason": [j.reason for j in jobs],
            "attempts": i("attempts", np.int32), "killed_seconds": f("killed_seconds"),
            "killed_core_seconds": f("killed_core_seconds"), "reservation": f("reservation"),
        }

    def events_table(self) -> dict[str, np.ndarray | list]:
        """One row per state change (schema ``events/1``)."""
        rows = self.scheduler.events
        names = ("time", "kind", "job_id", "node", "queue_len", "running", "used_cores",
                 "up_cores", "queued_area", "idle_fit_cores")
        dtypes = (np.float64, None, np.int64, np.int64, np.int64, np.int64, np.int64,
                  np.int64, np.float64, np.int64)
        cols = list(zip(*rows)) if rows else [()] * len(names)
        return {name: (list(col) if dt is None else np.asarray(col, dtype=dt))
                for name, col, dt in zip(names, cols, dtypes)}

    def decisions_table(self) -> dict[str, np.ndarray | list]:
        """One row per applied (or refused) decision (schema ``decisions/1``)."""
        rows = self.scheduler.decisions
        names = ("time", "job_id", "action", "mode", "reason", "reserved_time")
        dtypes = (np.float64, np.int64, None, None, None, np.float64)
        cols = list(zip(*rows)) if rows else [()] * len(names)
        return {name: (list(col) if dt is None else np.asarray(col, dtype=dt))
                for name, col, dt in zip(names, cols, dtypes)}


def build(env: simpy.Environment, scenario: Scenario, policy: Policy, *,
          workload: Workload | None = None, estimate: np.ndarray | None = None,
          record: bool = True, base_dir: str | Path | None = None) -> Simulation:
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
    """
    if workload is None:
        workload = load_workload(scenario, base_dir=base_dir)
    c = scenario.cluster
    cluster = Cluster(env, nodes=c.nodes, cores_per_node=c.cores_per_node,
                      memory_per_node=c.memory_per_node, granularity=c.granularity,
                      enforce_walltime=scenario.scheduler.enforce_walltime,
                      track_placement=scenario.faults.mtbf > 0)
    rules = SchedulerRules(
        overrun_min_extension=scenario.scheduler.overrun_min_extension,
        overrun_fraction=scenario.scheduler.overrun_fraction,
        requeue_on_failure=scenario.faults.on_failure == "requeue",
        max_attempts=scenario.faults.max_attempts)
    scheduler = Scheduler(env, cluster, policy, rules=rules, record=record)
    scheduler.expected_jobs = len(workload)
    if len(workload) == 0:
        scheduler.finished.succeed()
    users = Users(env, scheduler, workload, estimate=estimate,
                  user_aware=scenario.workload.user_aware)
    if scenario.faults.mtbf > 0:
        rng = streams(scenario.seed)["faults"]
        for node in cluster.nodes:
            env.process(node.fail_and_recover(cluster, scenario.faults.mtbf,
                                              scenario.faults.mttr, rng))
    return Simulation(env, scenario, cluster, scheduler, users, workload)
