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
from pathlib import Path

import numpy as np

from cosim.config import Scenario
from cosim.errors import ScenarioError
from cosim.workloads.base import Workload

__all__ = ["load_workload", "streams", "STREAMS"]

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
