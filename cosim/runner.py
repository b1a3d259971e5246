"""Runs a scenario under one or several policies and writes the results folder.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import simpy
import yaml

from cosim.config import Scenario
from cosim.model import build, load_workload, streams
from cosim.workloads.base import Workload

__all__ = ["run_policy", "run_scenario", "comparison_table", "parse_policy_name",
           "prepare_models", "attach_predictions", "TABLE_COLUMNS", "PREDICTORS"]

#: (summary key, header, format) of the comparison table printed by ``run``.
TABLE_COLUMNS = [
    ("jobs_finished", "jobs", "{:.0f}"),
    ("wait_mean", "mean wait s", "{:.0f}"),
    ("wait_max", "max wait s", "{:.0f}"),
    ("slowdown_mean", "mean sld", "{:.2f}"),
    ("bsld_mean", "mean bsld", "{:.2f}"),
    ("response_mean", "mean resp s", "{:.0f}"),
    ("utilization", "util", "{:.3f}"),
    ("queue_len_mean", "mean queue", "{:.1f}"),
    ("wasted_core_hours", "wasted core-h", "{:.1f}"),
    ("jobs_per_second", "sim jobs/s", "{:.0f}"),
]


PREDICTORS = ("estimate", "history", "xgboost", "rnn")


def parse_policy_name(name: str, scenario: Scenario) -> tuple[str, str, bool]:
    """Split ``POLICY[@PREDICTOR[+kill]]`` into its parts (scenario defaults fill in).

    Raises:
        ScenarioError: an unknown predictor.
    """
    from cosim.errors import ScenarioError

    policy, at, pred = name.partition("@")
    kill = scenario.predictor.kill.enabled
    if not at:
        return policy, scenario.predictor.runtime, kill
    pred, plus, extra = pred.partition("+")
    if pred not in PREDICTORS or (plus and extra != "kill"):
        raise ScenarioError("--policy", repr(name),
                            f"POLICY[@PREDICTOR[+kill]] with PREDICTOR one of {', '.join(PREDICTORS)}")
    if plus and pred != "rnn":
        raise ScenarioError("--policy", repr(name), "+kill only with @rnn (it needs in-run predictions)")
    return policy, pred, kill or bool(plus)


def _policy_from_name(name: str, rng):
    from agents.heuristics import make_policy

    return make_policy(name, rng=rng, where="--policy")


def prepare_models(scenario: Scenario, names: list[str], base_dir: str | Path | None = None,
                   echo: Callable[[str], None] | None = print):
    """The model bundle the policies need (None if only estimates or history).

    Uses ``predictor.models`` when given, else trains (once, cached) on a
    generated VASP history.
    """
    preds = {parse_policy_name(n, scenario)[1] for n in names}
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
            from cosim.errors import ScenarioError

            raise ScenarioError("predictor.models", "nothing",
                                "a models folder (training a model is automatic only for VASP workloads)")
        folder = ensure_models(pc.cache, jobs=pc.train_jobs, seed=pc.train_seed,
                               remaining="rnn" in preds, epochs=pc.train_epochs,
                               generator_params=dict(scenario.workload.params), echo=echo)
        bundle = ModelBundle.load(folder)
    if "rnn" in preds and bundle.remaining_model is None:
        from cosim.errors import ScenarioError

        raise ScenarioError("predictor.models", "a folder without remaining/",
                            "a remaining-time model for @rnn (python -m predictors train remaining)")
    return bundle


class PrecomputedRuntime:
    """An in-process backend whose pre-run predictions were made in one batch."""

    def __init__(self, bundle, workload: Workload):
        from cosim.prediction import feature_columns

        self.bundle = bundle
        cols = feature_columns(workload, list(range(len(workload))), bundle.feature_names)
        self._X = bundle.spec.matrix(cols, where="workload features")
        self._values = bundle.runtime_model.predict(self._X)
        self.version = bundle.version
        self._row = {j: i for i, j in enumerate(workload.job_id.tolist())}

    def runtime(self, batch):
        return self._values[[self._row[j] for j in batch["job_id"]]], self.version

    def remaining(self, batch):
        import numpy as np

        from predictors.remaining import Progress

        X = self._X[[self._row[j] for j in batch["job_id"]]]
        pred = self.bundle.remaining_model.predict(
            X, Progress.from_arrays(batch["progress"]), np.asarray(batch["elapsed"], dtype=float),
            prerun=np.asarray(batch["prerun"], dtype=float),
            scf_done=np.asarray(batch["scf_done"], dtype=np.int64))
        return pred, self.version


async def _run_with_service(sim, scenario: Scenario, predictor: str, kill: bool, bundle):
    """Run the simulation under asyncio with predictions from the configured service."""
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
                from cosim.errors import InputError

                raise InputError("prediction_service.url", f"no answer from {cfg.url} "
                                 f"({getattr(exc, 'reason', type(exc).__name__)})",
                                 "a running 'python -m predictors serve'") from None
        hub = attach_predictions(sim, scenario, predictor, kill, service, feature_names=names,
                                 precompute=False)
        bridge = Bridge(sim, hub, service, timeout_s=cfg.timeout_s,
                        simulated_latency=cfg.simulated_latency,
                        rng=streams(scenario.seed)["agent"])
        await bridge.run(until=scenario.output.until)
    return hub


def attach_predictions(sim, scenario: Scenario, predictor: str, kill: bool, bundle, *,
                       feature_names: list[str] | None = None, precompute: bool = True):
    """Put a :class:`cosim.prediction.PredictionHub` between the scheduler and its policy."""
    if predictor == "estimate" and not kill:
        return None
    from cosim.prediction import KillRule, PredictionHub

    pc = scenario.predictor
    rule = KillRule(short=pc.kill.short, long=pc.kill.long, error=pc.kill.error) if kill else None
    source = {"estimate": "estimate", "history": "history"}.get(predictor, "model")
    backend = bundle if source == "model" else None
    if backend is not None and precompute:
        # A pre-run prediction depends only on the job's own inputs, so the
        # whole workload is predicted in one batch up front: the same numbers
        # the scheduler would get one arrival at a time, far faster.
        backend = PrecomputedRuntime(bundle, sim.workload)
    hub = PredictionHub(sim.scheduler, sim.workload, backend,
                        runtime_source=source, remaining=predictor == "rnn",
                        interval=pc.update_interval, min_remaining=pc.min_remaining,
                        kill_rule=rule,
                        feature_names=feature_names if feature_names is not None else (
                            bundle.feature_names if bundle is not None else []))
    sim.scheduler.predictions = hub
    return hub


def run_policy(scenario: Scenario, policy_name: str, out_dir: str | Path | None, *,
               workload: Workload | None = None, base_dir: str | Path | None = None,
               progress: bool = False, make_policy: Callable | None = None,
               bundle: Any = None) -> dict[str, Any]:
    """Simulate one policy (``POLICY[@PREDICTOR[+kill]]``); write its tables when ``out_dir`` is given.

    Returns:
        The summary: every metric plus scheduler counters and run figures.
    """
    t0 = time.perf_counter()
    if workload is None:
        workload = load_workload(scenario, base_dir=base_dir)
    if policy_name.startswith("rl:"):
        sim, hub, predictor = _run_agent(scenario, policy_name[3:], workload), None, "estimate"
        return _finish(scenario, policy_name, sim, hub, predictor, workload, t0, out_dir)
    base_name, predictor, kill = parse_policy_name(policy_name, scenario)
    service_cfg = scenario.prediction_service
    via_service = service_cfg.backend != "none" and predictor in ("xgboost", "rnn")
    if bundle is None and predictor in ("xgboost", "rnn") and service_cfg.backend != "http":
        bundle = prepare_models(scenario, [policy_name], base_dir, echo=None)
    rng = streams(scenario.seed)["policy"]
    policy = (make_policy or _policy_from_name)(base_name, rng)
    env = simpy.Environment()
    sim = build(env, scenario, policy, workload=workload)
    if via_service:
        import asyncio

        hub = asyncio.run(_run_with_service(sim, scenario, predictor, kill, bundle))
    else:
        hub = attach_predictions(sim, scenario, predictor, kill, bundle)
        _advance(sim, scenario.output.until, progress, policy_name)
    return _finish(scenario, policy_name, sim, hub, predictor, workload, t0, out_dir)


def _run_agent(scenario: Scenario, checkpoint: str, workload: Workload):
    """Run a trained agent (``rl:DIR``) greedily over the whole workload, in the Gym env."""
    from agents.rl_policy import load_rl_policy
    from cosim.env import SchedulingEnv

    agent = load_rl_policy(checkpoint)
    kwargs = {k: v for k, v in agent.env_kwargs.items()
              if k not in ("episode_jobs", "episode_end", "episode_source", "smdp_gamma")}
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload),
                        episode_end="completed", **kwargs)
    obs, info = env.reset(seed=scenario.seed)
    while True:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info["action_mask"]))
        if terminated or truncated:
            return env.simulation


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
                 progress: bool = True, echo: Callable[[str], None] | None = print
                 ) -> dict[str, dict[str, Any]]:
    """Run every policy on the same workload and write the results folder."""
    from cosim import records

    # Check every input (policy names, the workload) before writing anything,
    # so bad input leaves no output behind.
    for name in policies:
        if name.startswith("rl:"):
            if not Path(name[3:]).is_dir():
                from cosim.errors import InputError

                raise InputError("--policy", repr(name), "rl:DIR with DIR a checkpoint folder "
                                 "written by 'python -m agents train'")
            continue
        _policy_from_name(parse_policy_name(name, scenario)[0], None)
    workload = load_workload(scenario, base_dir=base_dir)
    bundle = (None if scenario.prediction_service.backend == "http"
              else prepare_models(scenario, policies, base_dir, echo=echo))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
    records.write_bytes_atomic(out / "scenario.yaml", text.encode("utf-8"))
    summaries: dict[str, dict[str, Any]] = {}
    for name in policies:
        summaries[name] = run_policy(scenario, name, out / policy_dir(name), workload=workload,
                                     progress=progress, bundle=bundle)
    records.write_json_atomic(out / "comparison.json", {
        "schema": "comparison/1", "scenario": scenario.name,
        "policies": [{"policy": n, "dir": policy_dir(n)} for n in policies],
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
