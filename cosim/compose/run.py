"""Runs a scenario under one or several policies and writes the results folder.

The composition root of a run: it wires in ``predictors`` (models and
prediction services for ``@PREDICTOR`` policies, through
:mod:`cosim.compose.predictions`) and ``agents`` (trained agents for
``rl:DIR``, through :mod:`cosim.compose.policies`). Everything goes into the
model through public seams: a :class:`~cosim.decisions.Policy`, and a
:class:`~cosim.prediction_hub.PredictionHub` hook with a backend. One function
builds the simulation (:func:`_build`), whether it then runs synchronously
or under asyncio beside a prediction service.

Layout of a results folder::

    OUT/scenario.yaml          the resolved scenario (every default filled in)
    OUT/comparison.json        every policy's summary (schema comparison/1)
    OUT/<policy>/jobs.parquet, events.parquet, decisions.parquet, summary.json
    OUT/report.html, *.png     unless plots are off

The folder is staged and replaced whole (:mod:`cosim.compose.staging`).
Feedback goes to stderr (``notify``): the workload's warnings (dropped jobs,
perfect estimates, a guessed machine size), which models folder is used or
trained, and a progress bar per policy once a policy has run for two
seconds. Only the comparison table and the results path go to stdout.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import simpy
import yaml

from cosim.cli import stderr_line
from cosim.compose.policies import load_policy, parse_policies, with_kills
from cosim.compose.predictions import (
    MODEL_PREDICTORS,
    check_history_inputs,
    make_prediction_hub,
    prediction_backend,
    prepare_models,
    service_feature_names,
)
from cosim.compose.staging import policy_dir, prepare_out, put_in_place
from cosim.compose.table import Progress, comparison_table
from cosim.config import Scenario
from cosim.kernel import run as run_env
from cosim.model import build
from cosim.policies import KillRulePolicy, PolicySpec
from cosim.policies.recorded import check_recorded_starts
from cosim.workloads.base import TRACE_FEATURES, Workload
from cosim.workloads.loading import load_workload, resolve_machine, streams, workload_warnings

__all__ = ["run_policy", "run_scenario", "summary_metric_names"]

#: The numbers :func:`_finish` adds to :func:`cosim.metrics.summarize`'s in
#: ``summary.json`` (a test keeps this list and a run's summary equal).
RUN_COUNTER_KEYS = (
    "wasted_core_hours", "jobs_in_workload", "jobs_not_submitted", "scheduler_passes",
    "decisions_refused", "reservations_broken", "reservations_withdrawn", "kills", "requeues",
    "node_failures", "jobs_lost_to_failures", "overruns", "rule_kills", "wall_seconds",
    "jobs_per_second")


def summary_metric_names() -> frozenset[str]:
    """Every number a run's ``summary.json`` can hold under ``metrics``, known before any run.

    :data:`cosim.metrics.METRIC_DEFINITIONS` (its ``<mode>`` and ``<class>``
    keys expanded), :data:`RUN_COUNTER_KEYS` and the prediction hub's counters.
    """
    from cosim import metrics
    from cosim.prediction_hub import PredictionStats

    fill = {"<mode>": metrics.EXEC_MODES,
            "<class>": [c[1] for c in metrics.SIZE_CLASSES + metrics.RUN_CLASSES]}
    names: set[str] = set(RUN_COUNTER_KEYS) | set(PredictionStats().as_dict())
    for key in metrics.METRIC_DEFINITIONS:
        hole = next((h for h in fill if h in key), None)
        names |= {key} if hole is None else {key.replace(hole, v) for v in fill[hole]}
    return frozenset(names)


def _build(env: simpy.Environment, spec: PolicySpec, scenario: Scenario, workload: Workload,
           policy, backend, feature_names: list[str] | None, base_dir):
    """The simulation of one policy: its prediction hub, its kills around it, the model.

    The one build for both ways of running: ``backend`` is the in-process
    backend or the asyncio bridge to a prediction service.
    """
    hub = make_prediction_hub(spec, scenario, workload, backend, feature_names=feature_names)
    policy = with_kills(spec, scenario, workload, policy, hub, base_dir=base_dir)
    sim = build(env, scenario, policy, workload=workload, hooks=[hub] if hub is not None else [])
    return sim, hub


async def _run_with_service(env, spec: PolicySpec, scenario: Scenario, workload: Workload, policy,
                            bundle, base_dir=None, progress: bool = False,
                            feature_names: list[str] | None = None):
    """Build and run the simulation under asyncio, predictions from the configured service.

    ``feature_names`` are the service's (asked once per run, before the first
    policy): a service that dies later only costs fallbacks, counted like
    any failed call, never the run.
    """
    from cosim.bridge import Bridge
    from predictors.service import make_service

    cfg = scenario.prediction_service
    if bundle is not None:
        names = bundle.feature_names
    elif feature_names is not None:
        names = feature_names
    else:
        names = await service_feature_names(scenario)
    service = make_service(cfg.backend, bundle=bundle, url=cfg.url, timeout_s=cfg.timeout_s,
                           token=cfg.token)
    async with service:
        bridge = Bridge(env, service, timeout_s=cfg.timeout_s,
                        simulated_latency=cfg.simulated_latency,
                        rng=streams(scenario.seed)["agent"])
        sim, hub = _build(env, spec, scenario, workload, policy, bridge, names, base_dir)
        with Progress(sim, spec.name, progress) as bar:
            await bridge.run(sim.finished, until=scenario.output.until, on_advance=bar.update)
    hub.stats.service_seconds = bridge.wall_seconds
    return sim, hub


def run_policy(scenario: Scenario, policy_name: str | PolicySpec, out_dir: str | Path | None, *,
               workload: Workload | None = None, base_dir: str | Path | None = None,
               progress: bool = False, bundle: Any = None,
               service_features: list[str] | None = None) -> dict[str, Any]:
    """Simulate one policy; write its tables when ``out_dir`` is given.

    Args:
        scenario: the scenario.
        policy_name: a policy name (``POLICY[@PREDICTOR[+kill]]``, ``rl:DIR``) or a parsed spec.
        out_dir: where the tables go (None: nowhere).
        workload: the jobs (default: the scenario's).
        base_dir: where relative paths are resolved.
        progress: show a progress bar on long runs.
        bundle: trained models (default: prepared from the scenario when needed,
            trained if missing with an announcement on stderr).
        service_features: the HTTP prediction service's feature names, when
            already known (default: asked from the service first).

    Returns:
        The summary: every metric plus scheduler counters and run figures.
    """
    t0 = time.perf_counter()
    spec = (policy_name if isinstance(policy_name, PolicySpec)
            else parse_policies([policy_name], scenario)[0])
    if workload is None:
        workload = load_workload(scenario, base_dir=base_dir)
    scenario = resolve_machine(scenario, workload)
    if spec.correction:        # a tuned folder's own correction (agents tune --corrections)
        scenario = scenario.model_copy(update={"scheduler": scenario.scheduler.model_copy(
            update={"correction": spec.correction})})
    service_cfg = scenario.prediction_service
    via_service = service_cfg.backend != "none" and spec.predictor in MODEL_PREDICTORS
    if bundle is None and spec.predictor in MODEL_PREDICTORS and service_cfg.backend != "http":
        bundle = prepare_models(scenario, [spec], base_dir, echo=None)
    policy = load_policy(spec, scenario, workload, rng=streams(scenario.seed)["policy"],
                         base_dir=base_dir)
    env = simpy.Environment()
    if via_service:
        import asyncio

        sim, hub = asyncio.run(_run_with_service(env, spec, scenario, workload, policy, bundle,
                                                 base_dir, progress=progress,
                                                 feature_names=service_features))
    else:
        backend = prediction_backend(spec.predictor, workload, bundle)
        sim, hub = _build(env, spec, scenario, workload, policy, backend,
                          bundle.feature_names if bundle is not None else None, base_dir)
        _advance(sim, scenario.output.until, progress, spec.name)
    return _finish(scenario, spec.name, sim, hub, spec.predictor, workload, t0, out_dir)


def _finish(scenario, policy_name, sim, hub, predictor, workload, t0, out_dir) -> dict[str, Any]:
    from cosim import metrics, records

    wall = time.perf_counter() - t0

    cores = sim.cluster.capacity
    jobs = sim.jobs_table()
    events = sim.events_table()
    summary = metrics.summarize(jobs, events, cores=cores, tau=scenario.metrics.tau)
    c = sim.scheduler.counters
    policy = sim.scheduler.policy
    rule_kills = policy.kills if isinstance(policy, KillRulePolicy) else 0
    summary.update({
        "wasted_core_hours": (summary.get("wasted_core_seconds") or 0.0) / 3600.0,
        "jobs_in_workload": len(workload),
        "jobs_not_submitted": len(workload) - len(sim.scheduler.jobs),
        "scheduler_passes": c.passes,
        "decisions_refused": c.refused,
        "reservations_broken": c.reservations_broken,
        "reservations_withdrawn": c.reservations_withdrawn,
        "kills": c.kills,
        "requeues": c.requeues,
        "node_failures": c.node_failures,
        "jobs_lost_to_failures": c.jobs_lost_to_failures,
        "overruns": c.overruns,
        "workload_cleaning": dict(workload.cleaning),
        "workload_status": {str(k): v for k, v in workload.status_counts.items()},
        "machine_source": workload.machine_source,
        # the bound a run with failures reached (None: it ended on its own)
        "run_bound": sim.bound.reached_by if sim.bound is not None else None,
        "predictor": predictor,
        **(hub.stats.as_dict() if hub is not None else {}),
        # kills of RLSchert's rule (a KillRulePolicy around the policy), beside the hub's counts
        **({"rule_kills": rule_kills} if hub is not None else {}),
        "wall_seconds": wall,
        "jobs_per_second": len(workload) / wall if wall > 0 else None,
    })
    if out_dir is not None:
        # The trace fields of each job (its row in the workload), beside its outcome.
        rows = np.fromiter((j.index for j in sim.scheduler.jobs), dtype=np.int64,
                           count=len(sim.scheduler.jobs))
        fields = [name for name in TRACE_FEATURES if name in workload.features]
        records.write_run(Path(out_dir), jobs=jobs, events=events,
                          decisions=sim.decisions_table(), cores=cores, policy=policy_name,
                          tau=scenario.metrics.tau,
                          meta={"scenario": scenario.name, "seed": scenario.seed,
                                "workload": workload.source},
                          summary=summary,
                          job_features={name: workload.features[name][rows] for name in fields},
                          feature_labels=workload.labels)
    return summary


def _advance(sim, until: float | None, progress: bool, label: str) -> None:
    """Run the model to the end (or ``until``), updating a progress bar as it goes.

    The run goes in about a hundred steps of simulated time (the submit times
    of every hundredth of the jobs), which changes nothing in the schedule:
    stopping ``env.run`` at a time and resuming it processes the same events
    in the same order. Each step is :func:`cosim.kernel.run` (full garbage
    collections put off while it runs).
    """
    env = sim.env
    if not progress:
        run_env(env, sim.finished if until is None else until)
        return
    n = len(sim.workload)
    with Progress(sim, label, progress) as bar:
        submit = sim.workload.submit
        for k in range(1, 101):
            if sim.finished.triggered:
                break
            t = float(submit[min(n - 1, k * n // 100)])
            if until is not None and t >= until:
                break
            if t > env.now:
                run_env(env, t)
            bar.update()
        if until is None:
            run_env(env, sim.finished)
        elif until > env.now:
            run_env(env, until)


def run_scenario(scenario: Scenario, policies: list[str], out_dir: str | Path, *,
                 base_dir: str | Path | None = None, plots: bool = True,
                 progress: bool = True, echo: Callable[[str], None] | None = print,
                 source: str = "--policy",
                 notify: Callable[[str], None] | None = stderr_line) -> dict[str, dict[str, Any]]:
    """Run every policy on the same workload and write the results folder.

    ``source`` says where the names came from (``"--policy"`` or the scenario
    file), so a bad name is reported where the user wrote it. ``echo`` gets
    the comparison table and the results path (stdout); ``notify`` gets the
    workload's warnings and which models are used (stderr); ``progress``
    shows a bar on stderr for each policy that runs longer than
    :data:`cosim.compose.table.PROGRESS_DELAY_S`. The folder is replaced as a whole when the run
    is complete (see :mod:`cosim.compose.staging`).

    Raises:
        InputError: bad policy names, workload, or an ``out_dir`` that is not a
            results folder; nothing is written then.
    """
    from cosim import records

    # Check every input (policy names, the workload, the folder) before
    # writing anything, so bad input leaves no output behind.
    specs = parse_policies(policies, scenario, source=source)
    workload = load_workload(scenario, base_dir=base_dir)
    scenario = resolve_machine(scenario, workload)
    for spec in specs:
        check_history_inputs(spec.predictor, scenario, workload)
        if spec.selector == "recorded":
            check_recorded_starts(workload)
    lines = workload_warnings(workload, scenario)
    if notify is not None:
        if lines:
            notify(f"warning: {workload.source or scenario.workload.kind}:")
            for line in lines:
                notify(f"  {line}")
    out = Path(out_dir)
    stage = prepare_out(out)
    try:
        features = None
        if scenario.prediction_service.backend == "http":
            bundle = None
            if any(s.predictor in MODEL_PREDICTORS for s in specs):
                import asyncio

                # Asked once: a server that dies between policies costs fallbacks, not the run.
                features = asyncio.run(service_feature_names(scenario))
        else:
            bundle = prepare_models(scenario, specs, base_dir, echo=notify)
        text = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
        records.write_bytes_atomic(stage / "scenario.yaml", text.encode("utf-8"))
        summaries: dict[str, dict[str, Any]] = {}
        for spec in specs:
            summaries[spec.name] = run_policy(scenario, spec, stage / policy_dir(spec.name),
                                              workload=workload, base_dir=base_dir,
                                              progress=progress, bundle=bundle,
                                              service_features=features)
            s = summaries[spec.name]
            if notify is not None and s.get("run_bound"):
                notify(f"warning: {spec.name}: the run reached its bound, {s['run_bound']}: "
                       f"failures stopped there and the jobs still queued were given up "
                       f"(see docs/reference/limits.md)")
            if notify is not None and s.get("jobs_never_started"):
                notify(f"warning: {spec.name}: {s['jobs_never_started']} of {s['jobs_total']} "
                       f"jobs never started ({s['jobs_given_up']} given up in the queue); "
                       f"reasons in jobs.parquet")
            if notify is not None:
                from predictors.service import fallback_line

                line = fallback_line(spec.name, summaries[spec.name])
                if line:
                    notify(line)
        records.write_json_atomic(stage / "comparison.json", {
            "schema": "comparison/1", "scenario": scenario.name,
            "policies": [{"policy": s.name, "dir": policy_dir(s.name)} for s in specs],
            "summaries": summaries})
        if echo is not None:
            echo(comparison_table(summaries))
        if plots:
            from cosim.report import write_report

            write_report(stage, warnings=lines)
        put_in_place(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if echo is not None:
        echo(f"results: {out}/")
        if plots:
            echo(f"  report: {out / 'report.html'}")
    return summaries
