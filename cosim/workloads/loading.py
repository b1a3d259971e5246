"""Loading a scenario's workload: read or generated, windowed, with its estimates.

Every random choice of a run comes from named streams split from the
scenario seed (:func:`streams`), so changing how estimates are drawn never
changes which jobs are generated.

Examples:
    >>> from cosim.config import scenario_from_dict
    >>> sc = scenario_from_dict({"cluster": {"nodes": 64},
    ...                          "workload": {"kind": "lublin", "jobs": 5}})
    >>> len(load_workload(sc))
    5
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import numpy as np

from cosim import limits
from cosim.config import ClusterConfig, Scenario
from cosim.errors import ScenarioError, WorkloadError, did_you_mean
from cosim.workloads.base import TRACE_FEATURES, Workload

__all__ = ["load_workload", "streams", "STREAMS", "TRACE_KINDS", "resolve_machine",
           "machine_from_trace", "workload_warnings", "require_jobs", "check_jobs_fit_memory"]

#: Workload kinds read from a file: their machine may come from the file.
TRACE_KINDS = ("swf", "slurm")

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
        for key in params:
            if key not in valid:
                raise ScenarioError(f"{where}.{key}", f"unknown parameter {key!r}",
                                    f"one of {', '.join(valid)}", did_you_mean(key, valid))
    try:
        return fn(**fixed, **params)
    except TypeError as exc:
        raise ScenarioError(where, repr(params), f"valid parameters ({exc})") from None


def machine_from_trace(scenario: Scenario) -> bool:
    """Whether the machine size comes from the trace: a trace replay whose
    scenario leaves ``cluster.nodes`` unset (see :class:`cosim.config.ClusterConfig`)."""
    return (scenario.workload.kind in TRACE_KINDS
            and "nodes" not in scenario.cluster.model_fields_set)


def resolve_machine(scenario: Scenario, workload: Workload) -> Scenario:
    """The scenario with its machine size filled in from the trace when it was left unset.

    ``workload.max_procs`` (the SWF header, or the peak of a Slurm
    accounting file) becomes ``MaxNodes`` nodes of ``max_procs / MaxNodes``
    cores when that divides, else one core per node; a ``cores_per_node``
    given alone splits it into that many per node; a node-granular cluster
    gets one node per unit. The returned scenario has both set, so calling
    this again changes nothing. Any other scenario is returned as it is.
    """
    if not machine_from_trace(scenario):
        return scenario
    c = scenario.cluster
    procs = int(workload.max_procs) or (int(workload.procs.max()) if len(workload) else 1)
    if c.granularity == "node":
        nodes, cpn = procs, c.cores_per_node
    elif "cores_per_node" in c.model_fields_set:
        cpn = c.cores_per_node
        nodes = -(-procs // cpn)
    elif workload.max_nodes and procs % workload.max_nodes == 0:
        nodes, cpn = workload.max_nodes, procs // workload.max_nodes
    else:
        nodes, cpn = procs, 1
    for limit, value in ((limits.NODES, nodes), (limits.CORES_PER_NODE, cpn)):
        limit.check(value, f"{workload.source or 'the trace'}: the machine it states "
                           f"({workload.machine_source or 'its largest job'}: {procs:,} "
                           f"processors as {nodes:,} nodes of {cpn:,} cores)")
    cluster = ClusterConfig(**{**c.model_dump(), "nodes": nodes, "cores_per_node": cpn})
    return scenario.model_copy(update={"cluster": cluster})


#: Memory one job costs a run, generously: the workload's columns, the
#: simulator's job object, its rows in the results tables.
BYTES_PER_JOB = 4096


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def check_jobs_fit_memory(n_jobs: int, where: str = "workload.jobs") -> None:
    """Refuse a job count the machine cannot hold, before anything is allocated.

    Raises:
        ScenarioError: ``n_jobs`` x :data:`BYTES_PER_JOB` exceeds the memory
            available now (a 10^11-job workload would ask for terabytes).
    """
    avail = available_memory()
    if avail is None or n_jobs * BYTES_PER_JOB <= avail:
        return
    most = avail // BYTES_PER_JOB
    raise ScenarioError(where, f"{n_jobs:,} jobs (about {n_jobs * BYTES_PER_JOB / 2**30:,.0f} GiB)",
                        f"at most about {most:,} jobs, what the {avail / 2**30:.1f} GiB of "
                        "memory available now hold")


def load_workload(scenario: Scenario, *, base_dir: str | Path | None = None) -> Workload:
    """The scenario's workload: read or generated, windowed, with its estimates.

    Args:
        scenario: the validated scenario.
        base_dir: directory relative trace paths are resolved against (the
            current directory if None).

    Raises:
        WorkloadError: no job is left (an empty trace, or every job dropped
            by the cleaning rules); the message says what was dropped.
    """
    wc = scenario.workload
    rngs = np.random.SeedSequence(scenario.seed).spawn(len(STREAMS))
    seed_of = dict(zip(STREAMS, (int(s.generate_state(1)[0]) for s in rngs)))
    cores = scenario.cluster.nodes * (1 if scenario.cluster.granularity == "node"
                                      else scenario.cluster.cores_per_node)
    if wc.jobs is not None and wc.kind not in TRACE_KINDS:   # a trace's jobs is only a window
        check_jobs_fit_memory(wc.jobs)
    if wc.kind in TRACE_KINDS:
        if not wc.path:
            example = "trace.swf" if wc.kind == "swf" else "sacct.txt"
            raise ScenarioError("workload.path", "nothing",
                                f"the trace to replay (e.g. --set workload.path={example})")
        path = Path(wc.path)
        if base_dir is not None and not path.is_absolute() and not path.exists():
            path = Path(base_dir) / path
        params = dict(wc.params)
        if not machine_from_trace(scenario):
            params.setdefault("max_procs", cores)
        if wc.kind == "swf":
            from cosim.workloads.swf import read_swf

            workload = _call_with_params(read_swf, params, "workload.params", path=str(path))
        else:
            from cosim.workloads.slurm import read_sacct

            if scenario.cluster.granularity == "node":
                params.setdefault("unit", "nodes")
            workload = _call_with_params(read_sacct, params, "workload.params", path=str(path))
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
        raise ScenarioError("workload.kind", repr(wc.kind), "swf, slurm, lublin, mao or vasp")

    require_jobs(workload, f"workload.{wc.kind}")
    if wc.kind in TRACE_KINDS and (wc.jobs is not None or wc.offset != 0):
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


def _dropped(workload: Workload) -> list[tuple[str, int]]:
    """(rule, count) of the cleaning rules that dropped jobs, in rule order."""
    return [(rule, n) for rule, n in workload.cleaning.items()
            if n and rule.endswith("_dropped")]


_DROP_WORDS = {
    "status_dropped": "with a status not kept (workload.params.status)",
    "submit_unknown_dropped": "with an unknown (negative) submit time",
    "run_unknown_dropped": "with an unknown run time",
    "run_zero_dropped": "with a zero run time",
    "procs_unknown_dropped": "with no processor count",
    "procs_over_machine_dropped": "wider than the machine",
    "pending_dropped": "that never started (pending)",
    "cancelled_before_start_dropped": "cancelled before they started",
    "running_dropped": "still running (no end)",
    "end_before_start_dropped": "ending before they started",
}


def require_jobs(workload: Workload, where: str = "workload") -> Workload:
    """``workload`` itself, or a :class:`WorkloadError` when it has no job.

    The message says why: an empty file, or every job dropped (by rule,
    with counts).
    """
    if len(workload):
        return workload
    dropped = _dropped(workload)
    if dropped:
        total = sum(n for _, n in dropped)
        parts = ", ".join(f"{n} {_DROP_WORDS.get(rule, rule)}" for rule, n in dropped)
        found = f"no job left after cleaning ({total} dropped: {parts})"
    else:
        found = "no job in it"
    raise WorkloadError(workload.source or where, found, "at least one job to simulate")


def workload_warnings(workload: Workload, scenario: Scenario | None = None) -> list[str]:
    """What a user must know before trusting a replay, one short line each.

    Lines appear only when something happened: jobs were dropped (by rule,
    with counts), requested times were missing so the scheduler's estimate is
    the true run time (a perfect estimate no real scheduler has), jobs were
    out of submit order in the file (re-sorted), the machine
    size was guessed (largest job, or the peak of an accounting file), a
    status filter is in force, or trace fields (:data:`TRACE_FEATURES`) are
    unknown for every job. Empty for generated workloads.

    Args:
        workload: the loaded workload.
        scenario: its scenario (says whether estimates were replaced and the
            machine used), or None.
    """
    lines: list[str] = []
    c = workload.cleaning
    n = len(workload)
    dropped = _dropped(workload)
    left_out = c.get("outside_window", 0)
    if dropped:
        total = sum(k for _, k in dropped)
        parts = ", ".join(f"{k} {_DROP_WORDS.get(rule, rule)}" for rule, k in dropped)
        # Out of the file's jobs: a window (workload.jobs) replays only some of those kept.
        in_file = total + left_out + n
        line = f"{total} of {in_file} jobs dropped: {parts}"
        if left_out:
            line += f"; {n} of the {in_file - total} kept replayed (workload.jobs)"
        lines.append(line)
    out_of_order = c.get("submit_out_of_order", 0)
    if out_of_order:
        lines.append(f"{out_of_order} jobs submitted before the job above them in the file: "
                     "replayed in submit order (a stable sort: equal submits keep file order)")
    missing = c.get("req_time_missing", 0)
    replaced = scenario is not None and scenario.workload.estimates.model != "trace"
    if missing and not replaced:
        share = f" ({100 * missing / n:.0f}%)" if n else ""
        lines.append(f"{missing} of {n} jobs{share} have no requested time: their estimate is "
                     "their real run time, a perfect estimate no real scheduler has "
                     "(set workload.estimates.model to gaussian or tsafrir for realistic ones)")
    if workload.machine_source == "largest job" or workload.machine_source.startswith("peak"):
        machine = workload.max_procs
        lines.append(f"machine size from the {workload.machine_source} ({machine}): "
                     "give the real size in the scenario (cluster.nodes, cluster.cores_per_node)"
                     " if it is larger")
    if workload.status_counts and c.get("status_dropped", 0):
        from cosim.workloads.swf import STATUS_NAMES

        def name(code):
            return f"{STATUS_NAMES.get(code, 'status')} ({code})" if isinstance(code, int) \
                else str(code)
        counts = ", ".join(f"{k} {name(code)}" for code, k in sorted(
            workload.status_counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))
        lines.append(f"status filter in force; statuses in the file: {counts}")
    absent = [name for name in TRACE_FEATURES
              if n and name in workload.features and bool((workload.features[name] < 0).all())]
    if absent:
        lines.append(f"no {', '.join(absent)} in the trace (unknown for every job): run-time "
                     "predictors learn without them")
    return lines
