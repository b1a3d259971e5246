"""Runs a scenario under one or several policies and writes the results folder.

This is the composition root: the only ``cosim`` module (with the CLI) that
wires in ``predictors`` (models and prediction services for ``@PREDICTOR``
policies) and ``agents`` (trained agents for ``rl:DIR``). Everything it
builds goes into the model through public seams: a
:class:`~cosim.policy.Policy`, and a :class:`~cosim.prediction.PredictionHub`
hook with a backend.

Layout of a results folder::

    OUT/scenario.yaml          the resolved scenario (every default filled in)
    OUT/comparison.json        every policy's summary (schema comparison/1)
    OUT/<policy>/jobs.parquet, events.parquet, decisions.parquet, summary.json
    OUT/report.html, *.png     unless plots are off

Every file is written to a temporary name and renamed, so an interrupted run
never leaves a file that looks complete but is not.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import simpy
import yaml

from cosim.config import Scenario
from cosim.errors import InputError, ScenarioError
from cosim.model import Simulation, build
from cosim.policies import PolicySpec, make_policy, parse_policy
from cosim.policies.names import PREDICTORS as _PREDICTORS
from cosim.prediction import KillRule, PredictionHub, feature_columns
from cosim.workloads.base import Workload
from cosim.workloads.loading import load_workload, streams

__all__ = ["run_policy", "run_scenario", "comparison_table", "parse_policies", "load_policy",
           "prepare_models", "prediction_backend", "make_prediction_hub", "attach_predictions",
           "policy_dir", "TABLE_COLUMNS", "PREDICTORS", "parse_policy_name"]

#: (summary key, header, format) of the comparison table printed by ``run``:
#: ``util`` is useful utilization (completed attempts), ``busy`` counts every
#: attempt, ``wasted core-h`` is their difference (timeouts, kills, failures),
#: ``jain`` is Jain's fairness over users' mean bsld (``docs/metrics.md``).
TABLE_COLUMNS = [
    ("jobs_finished", "jobs", "{:.0f}"),
    ("wait_mean", "mean wait s", "{:.0f}"),
    ("wait_max", "max wait s", "{:.0f}"),
    ("slowdown_mean", "mean sld", "{:.2f}"),
    ("bsld_mean", "mean bsld", "{:.2f}"),
    ("response_mean", "mean resp s", "{:.0f}"),
    ("utilization", "util", "{:.3f}"),
    ("utilization_busy", "busy", "{:.3f}"),
    ("queue_len_mean", "mean queue", "{:.1f}"),
    ("wasted_core_hours", "wasted core-h", "{:.1f}"),
    ("fairness_jain", "jain", "{:.3f}"),
    ("bsld_worst_user_mean", "worst user bsld", "{:.1f}"),
    ("jobs_per_second", "sim jobs/s", "{:.0f}"),
]

#: Predictor names of ``@PREDICTOR`` (see :mod:`cosim.policies.names`).
PREDICTORS = tuple(_PREDICTORS)


# -- names -----------------------------------------------------------------------------------
def parse_policies(names: Sequence[str], scenario: Scenario, *, source: str = "--policy"
                   ) -> list[PolicySpec]:
    """Parse policy names and fill in the scenario's predictor defaults.

    Args:
        names: policy names.
        scenario: gives ``predictor.runtime`` and ``predictor.kill.enabled``
            for names without ``@PREDICTOR``.
        source: where the names came from, for error messages: ``"--policy"``,
            or the scenario file (errors then name ``FILE: scheduler.policies[i]``).

    Raises:
        ScenarioError: a name that does not parse, or ``rl:DIR`` without a folder.
    """
    specs = []
    for i, name in enumerate(names):
        where = source if source.startswith("--") else f"{source}: scheduler.policies[{i}]"
        spec = parse_policy(name, where=where).resolved(scenario.predictor.runtime,
                                                        scenario.predictor.kill.enabled)
        if spec.kill and spec.predictor != "rnn":
            raise ScenarioError(where, repr(name), "+kill (predictor.kill.enabled) only with "
                                "@rnn predictions: it needs in-run predictions")
        if spec.kind == "agent" and not Path(spec.checkpoint).is_dir():
            raise InputError(where, repr(name), "rl:DIR with DIR a checkpoint folder written by "
                             "'python -m agents train'")
        specs.append(spec)
    return specs


def parse_policy_name(name: str, scenario: Scenario) -> tuple[str, str, bool]:
    """Deprecated: use :func:`parse_policies` (or :func:`cosim.policies.parse_policy`)."""
    warnings.warn("parse_policy_name is deprecated; use cosim.runner.parse_policies",
                  DeprecationWarning, stacklevel=2)
    spec = parse_policies([name], scenario)[0]
    return spec.order, spec.predictor, spec.kill


# -- policies -------------------------------------------------------------------------------
def load_policy(spec: PolicySpec, scenario: Scenario, workload: Workload, *,
                rng=None, base_dir: str | Path | None = None):
    """The policy a spec names: a heuristic, a selector, or a trained agent (``rl:DIR``).

    A trained agent becomes an :class:`cosim.env.ActingPolicy`: the same
    window, mask and observation as the environment it was trained in,
    answered in process by the network (greedy).
    """
    if spec.kind != "agent":
        return make_policy(spec, rng=rng)
    from agents.rl_policy import load_rl_policy
    from cosim.env import SchedulingEnv

    agent = load_rl_policy(spec.checkpoint)
    kwargs = {k: v for k, v in agent.env_kwargs.items()
              if k not in ("episode_jobs", "episode_end", "episode_source", "curriculum",
                           "smdp_gamma")}
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload),
                        base_dir=base_dir, **kwargs)
    return env.acting_policy(agent.act, name=spec.name)


# -- predictions ------------------------------------------------------------------------------
def prepare_models(scenario: Scenario, names: Sequence[str | PolicySpec],
                   base_dir: str | Path | None = None,
                   echo: Callable[[str], None] | None = print):
    """The model bundle the policies need (None if only estimates or history).

    Uses ``predictor.models`` when given, else trains (once, cached) on a
    generated VASP history.
    """
    specs = [n if isinstance(n, PolicySpec) else parse_policies([n], scenario)[0] for n in names]
    preds = {s.predictor for s in specs}
    if not preds & {"xgboost", "rnn"}:
        return None
    from predictors.bundle import ModelBundle, ensure_models

    pc = scenario.predictor
    if pc.models:
        path = Path(pc.models)
        if base_dir is not None and not path.is_absolute() and not path.exists():
            path = Path(base_dir) / path
        bundle = ModelBundle.load(path)
    else:
        if scenario.workload.kind != "vasp":
            raise ScenarioError("predictor.models", "nothing",
                                "a models folder (training a model is automatic only for VASP workloads)")
        folder = ensure_models(pc.cache, jobs=pc.train_jobs, seed=pc.train_seed,
                               remaining="rnn" in preds, epochs=pc.train_epochs,
                               generator_params=dict(scenario.workload.params), echo=echo)
        bundle = ModelBundle.load(folder)
    if "rnn" in preds and bundle.remaining_model is None:
        raise ScenarioError("predictor.models", "a folder without remaining/",
                            "a remaining-time model for @rnn (python -m predictors train remaining)")
    return bundle


def prediction_backend(predictor: str, workload: Workload, bundle=None):
    """The in-process backend for ``@PREDICTOR`` (None for ``estimate``).

    ``history`` learns per-user run times online; ``xgboost`` and ``rnn``
    use the bundle, whose pre-run predictions depend only on each job's own
    inputs and are therefore made for the whole workload in one batch up
    front (the same numbers as one arrival at a time, far faster).
    """
    if predictor == "estimate":
        return None
    if predictor == "history":
        from predictors.history import HistoryBackend

        return HistoryBackend()
    return bundle.precomputed(feature_columns(workload, list(range(len(workload))),
                                              bundle.feature_names))


def make_prediction_hub(spec: PolicySpec, scenario: Scenario, workload: Workload, backend, *,
                        feature_names: list[str] | None = None) -> PredictionHub | None:
    """The hub that gives a policy its ``@PREDICTOR`` beliefs (None for ``@estimate``)."""
    if spec.predictor == "estimate" and not spec.kill:
        return None
    pc = scenario.predictor
    rule = KillRule(short=pc.kill.short, long=pc.kill.long, error=pc.kill.error) if spec.kill else None
    return PredictionHub(workload, backend, remaining=spec.predictor == "rnn",
                         interval=pc.update_interval, min_remaining=pc.min_remaining,
                         kill_rule=rule, feature_names=feature_names or [])


def attach_predictions(sim: Simulation, scenario: Scenario, predictor: str, kill: bool, bundle):
    """Add the prediction hub of ``@PREDICTOR[+kill]`` to a built simulation (before it runs)."""
    spec = PolicySpec(name="attached", kind="queue", predictor=predictor, kill=kill)
    backend = prediction_backend(predictor, sim.workload, bundle)
    hub = make_prediction_hub(spec, scenario, sim.workload, backend,
                              feature_names=bundle.feature_names if bundle is not None else None)
    if hub is not None:
        sim.scheduler.add_hook(hub)
    return hub


async def _run_with_service(env, spec: PolicySpec, scenario: Scenario, workload: Workload, policy,
                            bundle):
    """Build and run the simulation under asyncio, predictions from the configured service."""
    from cosim.bridge import Bridge
    from predictors.service import make_service

    cfg = scenario.prediction_service
    service = make_service(cfg.backend, bundle=bundle, url=cfg.url, timeout_s=cfg.timeout_s,
                           token=cfg.token)
    async with service:
        if bundle is not None:
            names = bundle.feature_names
        else:
            try:
                names = list((await service.models())["feature_names"])
            except Exception as exc:
                raise InputError("prediction_service.url", f"no answer from {cfg.url} "
                                 f"({getattr(exc, 'reason', type(exc).__name__)})",
                                 "a running 'python -m predictors serve'") from None
        bridge = Bridge(env, service, timeout_s=cfg.timeout_s,
                        simulated_latency=cfg.simulated_latency,
                        rng=streams(scenario.seed)["agent"])
        hub = make_prediction_hub(spec, scenario, workload, bridge, feature_names=names)
        sim = build(env, scenario, policy, workload=workload, hooks=[hub])
        await bridge.run(sim.finished, until=scenario.output.until)
    hub.stats.service_seconds = bridge.wall_seconds
    return sim, hub


# -- runs --------------------------------------------------------------------------------------
def run_policy(scenario: Scenario, policy_name: str | PolicySpec, out_dir: str | Path | None, *,
               workload: Workload | None = None, base_dir: str | Path | None = None,
               progress: bool = False, bundle: Any = None) -> dict[str, Any]:
    """Simulate one policy; write its tables when ``out_dir`` is given.

    Args:
        scenario: the scenario.
        policy_name: a policy name (``POLICY[@PREDICTOR[+kill]]``, ``rl:DIR``) or a parsed spec.
        out_dir: where the tables go (None: nowhere).
        workload: the jobs (default: the scenario's).
        base_dir: where relative paths are resolved.
        progress: show a progress bar on long runs.
        bundle: trained models (default: prepared from the scenario when needed).

    Returns:
        The summary: every metric plus scheduler counters and run figures.
    """
    t0 = time.perf_counter()
    spec = (policy_name if isinstance(policy_name, PolicySpec)
            else parse_policies([policy_name], scenario)[0])
    if workload is None:
        workload = load_workload(scenario, base_dir=base_dir)
    service_cfg = scenario.prediction_service
    via_service = service_cfg.backend != "none" and spec.predictor in ("xgboost", "rnn")
    if bundle is None and spec.predictor in ("xgboost", "rnn") and service_cfg.backend != "http":
        bundle = prepare_models(scenario, [spec], base_dir, echo=None)
    policy = load_policy(spec, scenario, workload, rng=streams(scenario.seed)["policy"],
                         base_dir=base_dir)
    env = simpy.Environment()
    if via_service:
        import asyncio

        sim, hub = asyncio.run(_run_with_service(env, spec, scenario, workload, policy, bundle))
    else:
        backend = prediction_backend(spec.predictor, workload, bundle)
        hub = make_prediction_hub(spec, scenario, workload, backend,
                                  feature_names=bundle.feature_names if bundle is not None else None)
        sim = build(env, scenario, policy, workload=workload,
                    hooks=[hub] if hub is not None else [])
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
    summary.update({
        "wasted_core_hours": (summary.get("wasted_core_seconds") or 0.0) / 3600.0,
        "jobs_in_workload": len(workload),
        "jobs_not_submitted": len(workload) - len(sim.scheduler.jobs),
        "scheduler_passes": c.passes,
        "decisions_refused": c.refused,
        "reservations_broken": c.reservations_broken,
        "kills": c.kills,
        "requeues": c.requeues,
        "node_failures": c.node_failures,
        "jobs_lost_to_failures": c.jobs_lost_to_failures,
        "overruns": c.overruns,
        "workload_cleaning": dict(workload.cleaning),
        "predictor": predictor,
        **(hub.stats.as_dict() if hub is not None else {}),
        "wall_seconds": wall,
        "jobs_per_second": len(workload) / wall if wall > 0 else None,
    })
    if out_dir is not None:
        records.write_run(Path(out_dir), jobs=jobs, events=events,
                          decisions=sim.decisions_table(), cores=cores, policy=policy_name,
                          tau=scenario.metrics.tau,
                          meta={"scenario": scenario.name, "seed": scenario.seed,
                                "workload": workload.source},
                          summary=summary)
    return summary


def _advance(sim, until: float | None, progress: bool, label: str) -> None:
    """Run the model to the end (or ``until``), with a progress bar on long runs."""
    env = sim.env
    stop = sim.finished if until is None else min(until, 1e300)
    if not progress or len(sim.workload) < 20_000:
        env.run(until=stop if until is None else until)
        return
    from tqdm import tqdm

    n = len(sim.workload)
    with tqdm(total=n, desc=label, unit="job", file=sys.stderr, leave=False) as bar:
        submit = sim.workload.submit
        for k in range(1, 101):
            if sim.finished.triggered:
                break
            t = float(submit[min(n - 1, k * n // 100)])
            if until is not None and t >= until:
                break
            if t > env.now:
                env.run(until=t)
            bar.update(sim.scheduler.done_count - bar.n)
        if until is None:
            env.run(until=sim.finished)
        elif until > env.now:
            env.run(until=until)
        bar.update(sim.scheduler.done_count - bar.n)


def policy_dir(name: str) -> str:
    """The results subfolder of a policy (``rl:runs/a`` -> ``rl_runs_a``)."""
    return name.replace("/", "_").replace(":", "_").strip("._") or "policy"


def comparison_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A plain-text table, one row per policy."""
    headers = ["policy"] + [h for _, h, _ in TABLE_COLUMNS]
    rows = []
    for name, s in summaries.items():
        row = [name]
        for key, _, fmt in TABLE_COLUMNS:
            v = s.get(key)
            row.append("-" if v is None else fmt.format(v))
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def run_scenario(scenario: Scenario, policies: list[str], out_dir: str | Path, *,
                 base_dir: str | Path | None = None, plots: bool = True,
                 progress: bool = True, echo: Callable[[str], None] | None = print,
                 source: str = "--policy") -> dict[str, dict[str, Any]]:
    """Run every policy on the same workload and write the results folder.

    ``source`` says where the names came from (``"--policy"`` or the scenario
    file), so a bad name is reported where the user wrote it.
    """
    from cosim import records

    # Check every input (policy names, the workload) before writing anything,
    # so bad input leaves no output behind.
    specs = parse_policies(policies, scenario, source=source)
    workload = load_workload(scenario, base_dir=base_dir)
    bundle = (None if scenario.prediction_service.backend == "http"
              else prepare_models(scenario, specs, base_dir, echo=echo))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
    records.write_bytes_atomic(out / "scenario.yaml", text.encode("utf-8"))
    summaries: dict[str, dict[str, Any]] = {}
    for spec in specs:
        summaries[spec.name] = run_policy(scenario, spec, out / policy_dir(spec.name),
                                          workload=workload, base_dir=base_dir,
                                          progress=progress, bundle=bundle)
    records.write_json_atomic(out / "comparison.json", {
        "schema": "comparison/1", "scenario": scenario.name,
        "policies": [{"policy": s.name, "dir": policy_dir(s.name)} for s in specs],
        "summaries": summaries})
    if echo is not None:
        echo(comparison_table(summaries))
    if plots:
        from cosim.report import write_report

        path = write_report(out)
        if echo is not None:
            echo(f"results: {out}/  report: {path}")
    elif echo is not None:
        echo(f"results: {out}/")
    return summaries
