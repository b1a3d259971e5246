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

A run writes into a fresh staging folder beside ``OUT`` (``.OUT.partial-PID``)
and, when everything is written, puts it in place of ``OUT`` in one rename
(the previous ``OUT``, if any, is moved aside first and then deleted). So a
rerun never mixes its files with an earlier run's (no stale policy folders,
plots or report), and an interrupted run leaves ``OUT`` as it was; the staging
folders of killed runs are removed by the next run into the same ``OUT``. A
folder that is not a results folder (no ``scenario.yaml`` or
``comparison.json``, and not empty) is never replaced: the run refuses
before simulating anything.

Feedback goes to stderr (``notify``): the workload's warnings (dropped jobs,
perfect estimates, a guessed machine size), which models folder is used or
trained, and a progress bar per policy once a policy has run for two
seconds. Only the comparison table and the results path go to stdout.
"""

from __future__ import annotations

import os
import shutil
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
from cosim.workloads.loading import load_workload, resolve_machine, streams, workload_warnings

__all__ = ["run_policy", "run_scenario", "comparison_table", "parse_policies", "load_policy",
           "load_kill_agent",
           "prepare_models", "prediction_backend", "make_prediction_hub", "attach_predictions",
           "policy_dir", "TABLE_COLUMNS", "PREDICTORS", "parse_policy_name", "default_out_dir",
           "PROGRESS_DELAY_S"]

#: Wall seconds a policy runs before its progress bar appears (stderr).
PROGRESS_DELAY_S = 2.0

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


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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
        spec = parse_policy(name, where=where)
        if spec.kind == "agent" and spec.predictor is None:
            # A trained agent sees what it was trained with, unless the name says otherwise.
            spec = spec.resolved(_agent_predictor(spec.checkpoint, where))
        spec = spec.resolved(scenario.predictor.runtime, scenario.predictor.kill.enabled)
        if spec.kill and spec.predictor != "rnn":
            raise ScenarioError(where, repr(name), "+kill (predictor.kill.enabled) only with "
                                "@rnn predictions: it needs in-run predictions")
        if spec.kind == "agent" and not Path(spec.checkpoint).is_dir():
            raise InputError(where, repr(name), "rl:DIR with DIR a checkpoint folder written by "
                             "'python -m agents train'")
        if spec.kill_agent and not Path(spec.kill_agent).is_dir():
            raise InputError(where, repr(name), "+kill=DIR with DIR a kill agent's checkpoint "
                             "folder ('python -m agents train --actions kill')")
        specs.append(spec)
    return specs


def _agent_predictor(folder: str, where: str) -> str:
    """The predictor a checkpoint's agent was trained with (``estimate`` if none)."""
    if not Path(folder).is_dir():
        raise InputError(where, repr(f"rl:{folder}"), "rl:DIR with DIR a checkpoint folder "
                         "written by 'python -m agents train'")
    from agents.checkpoint import read_meta

    return (read_meta(folder).get("env") or {}).get("predictor") or "estimate"


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
                           "smdp_gamma", "predictor")}
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload),
                        base_dir=base_dir, **kwargs)
    return env.acting_policy(agent.act, name=spec.name)


def load_kill_agent(folder: str, scenario: Scenario, workload: Workload, base, hub, *,
                    name: str, base_dir: str | Path | None = None):
    """A trained kill agent around ``base``: it decides kills from ``hub``'s predictions."""
    from agents.rl_policy import load_rl_policy
    from cosim.env import SchedulingEnv

    agent = load_rl_policy(folder)
    if (agent.env_config or {}).get("actions") != "kill":
        raise InputError(f"+kill={folder}", "an agent that does not decide kills",
                         "a checkpoint of 'python -m agents train --actions kill'")
    kwargs = {k: v for k, v in agent.env_kwargs.items()
              if k not in ("episode_jobs", "episode_end", "episode_source", "curriculum",
                           "smdp_gamma", "predictor", "base_policy")}
    env = SchedulingEnv(scenario, workload=workload, episode_jobs=len(workload),
                        base_dir=base_dir, **kwargs)
    return env.acting_policy(agent.act, name=name, base=base, hub=hub)


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
        if echo is not None:
            echo(f"predictors: {path}")
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
    """The hub that gives a policy its ``@PREDICTOR`` beliefs (None for ``@estimate``).

    With ``+kill`` the hub applies the scenario's kill rule; with ``+kill=DIR``
    the kill agent decides instead (see :func:`load_kill_agent`).
    """
    if spec.predictor == "estimate" and not spec.kill:
        return None
    pc = scenario.predictor
    rule = KillRule.from_config(pc.kill) if spec.kill and not spec.kill_agent else None
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


async def _service_feature_names(scenario: Scenario) -> list[str]:
    """The feature names the configured service's models take (``GET /models``).

    Raises:
        InputError: the service does not answer (not started, wrong URL or token).
    """
    from predictors.service import make_service

    cfg = scenario.prediction_service
    async with make_service(cfg.backend, url=cfg.url, timeout_s=cfg.timeout_s,
                            token=cfg.token) as service:
        try:
            return list((await service.models())["feature_names"])
        except Exception as exc:
            raise InputError("prediction_service.url", f"no answer from {cfg.url} "
                             f"({getattr(exc, 'reason', type(exc).__name__)})",
                             "a running 'python -m predictors serve'") from None


async def _run_with_service(env, spec: PolicySpec, scenario: Scenario, workload: Workload, policy,
                            bundle, compose=None, progress: bool = False,
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
        names = await _service_feature_names(scenario)
    service = make_service(cfg.backend, bundle=bundle, url=cfg.url, timeout_s=cfg.timeout_s,
                           token=cfg.token)
    async with service:
        bridge = Bridge(env, service, timeout_s=cfg.timeout_s,
                        simulated_latency=cfg.simulated_latency,
                        rng=streams(scenario.seed)["agent"])
        hub = make_prediction_hub(spec, scenario, workload, bridge, feature_names=names)
        if compose is not None:
            policy = compose(policy, hub)
        sim = build(env, scenario, policy, workload=workload, hooks=[hub])
        with _Progress(sim, spec.name, progress) as bar:
            await bridge.run(sim.finished, until=scenario.output.until, on_advance=bar.update)
    hub.stats.service_seconds = bridge.wall_seconds
    return sim, hub


# -- runs --------------------------------------------------------------------------------------
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
        bundle: trained models (default: prepared from the scenario when needed).
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
    service_cfg = scenario.prediction_service
    via_service = service_cfg.backend != "none" and spec.predictor in ("xgboost", "rnn")
    if bundle is None and spec.predictor in ("xgboost", "rnn") and service_cfg.backend != "http":
        bundle = prepare_models(scenario, [spec], base_dir, echo=None)
    policy = load_policy(spec, scenario, workload, rng=streams(scenario.seed)["policy"],
                         base_dir=base_dir)

    def compose(policy, hub):
        if not spec.kill_agent:
            return policy
        return load_kill_agent(spec.kill_agent, scenario, workload, policy, hub, name=spec.name,
                               base_dir=base_dir)
    env = simpy.Environment()
    if via_service:
        import asyncio

        sim, hub = asyncio.run(_run_with_service(env, spec, scenario, workload, policy, bundle,
                                                 compose, progress=progress,
                                                 feature_names=service_features))
    else:
        backend = prediction_backend(spec.predictor, workload, bundle)
        hub = make_prediction_hub(spec, scenario, workload, backend,
                                  feature_names=bundle.feature_names if bundle is not None else None)
        policy = compose(policy, hub)
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
        "reservations_withdrawn": c.reservations_withdrawn,
        "kills": c.kills,
        "requeues": c.requeues,
        "node_failures": c.node_failures,
        "jobs_lost_to_failures": c.jobs_lost_to_failures,
        "overruns": c.overruns,
        "workload_cleaning": dict(workload.cleaning),
        "workload_status": {str(k): v for k, v in workload.status_counts.items()},
        "machine_source": workload.machine_source,
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


class _Progress:
    """A progress bar on stderr for one policy: jobs done of jobs in the workload.

    It appears only once the policy has run for :data:`PROGRESS_DELAY_S`
    wall seconds (short runs print nothing) and clears itself when done.
    """

    def __init__(self, sim, label: str, enabled: bool):
        self.sim = sim
        self.bar = None
        self.t0 = time.monotonic()
        if enabled:
            from cosim.cli import progress_bar as tqdm  # no \r frames in logs

            self.bar = tqdm(total=len(sim.workload), desc=label, unit="job", file=sys.stderr,
                            leave=False, delay=PROGRESS_DELAY_S, dynamic_ncols=True)

    def update(self) -> None:
        """Show the jobs done so far."""
        if self.bar is not None:
            self.bar.update(self.sim.scheduler.done_count - self.bar.n)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.update()
            if time.monotonic() - self.t0 >= PROGRESS_DELAY_S:
                self.bar.refresh()   # the final count, before the bar clears itself
            self.bar.close()


def _advance(sim, until: float | None, progress: bool, label: str) -> None:
    """Run the model to the end (or ``until``), updating a progress bar as it goes.

    The run goes in about a hundred steps of simulated time (the submit times
    of every hundredth of the jobs), which changes nothing in the schedule:
    stopping ``env.run`` at a time and resuming it processes the same events
    in the same order.
    """
    env = sim.env
    if not progress:
        env.run(until=sim.finished if until is None else until)
        return
    n = len(sim.workload)
    with _Progress(sim, label, progress) as bar:
        submit = sim.workload.submit
        for k in range(1, 101):
            if sim.finished.triggered:
                break
            t = float(submit[min(n - 1, k * n // 100)])
            if until is not None and t >= until:
                break
            if t > env.now:
                env.run(until=t)
            bar.update()
        if until is None:
            env.run(until=sim.finished)
        elif until > env.now:
            env.run(until=until)


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


def default_out_dir(scenario: Scenario) -> Path:
    """``results/<scenario name>``, plus the trace's name for a trace replay.

    ``scenarios/swf.yaml`` on ``RICC-2010-2.swf.gz`` writes
    ``results/swf-RICC-2010-2``, so replays of different traces do not
    overwrite each other.
    """
    wc = scenario.workload
    if wc.kind in ("swf", "slurm") and wc.path:
        name = Path(wc.path).name
        for suffix in (".gz", ".swf", ".txt", ".csv", ".log", ".sacct"):
            name = name.removesuffix(suffix)
        return Path("results") / f"{scenario.name}-{name or wc.kind}"
    return Path("results") / scenario.name


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(out: Path) -> list[tuple[Path, str, int]]:
    """(path, kind, pid) of staging and set-aside folders of runs into ``out``."""
    found = []
    for kind in ("partial", "old"):
        for p in out.parent.glob(f".{out.name}.{kind}-*"):
            pid = p.name.rsplit("-", 1)[-1]
            if pid.isdigit():
                found.append((p, kind, int(pid)))
    return found


def _prepare_out(out: Path) -> Path:
    """Check that ``out`` may be replaced, clean up after killed runs, make the staging folder.

    Raises:
        InputError: ``out`` is a file, or a folder that holds something other
            than a results folder.
    """
    for path, kind, pid in _leftovers(out):
        if pid == os.getpid() or _pid_alive(pid):
            continue   # another run in progress (or this one)
        if kind == "old" and not out.exists():
            os.replace(path, out)   # killed between its two renames: put the results back
        else:
            shutil.rmtree(path, ignore_errors=True)
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "a file", "a results folder (--out DIR)")
        if any(out.iterdir()) and not ((out / "comparison.json").exists()
                                       or (out / "scenario.yaml").exists()):
            raise InputError(str(out), "a folder that is not a results folder (no "
                             "comparison.json or scenario.yaml)",
                             "a new or empty folder, or one written by 'cosim run' (it is "
                             "replaced as a whole)", "choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.partial-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    return stage


def _put_in_place(stage: Path, out: Path) -> None:
    """Replace ``out`` by ``stage``: the old folder is set aside, the new renamed in, the old deleted."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(stage, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def run_scenario(scenario: Scenario, policies: list[str], out_dir: str | Path, *,
                 base_dir: str | Path | None = None, plots: bool = True,
                 progress: bool = True, echo: Callable[[str], None] | None = print,
                 source: str = "--policy",
                 notify: Callable[[str], None] | None = _stderr) -> dict[str, dict[str, Any]]:
    """Run every policy on the same workload and write the results folder.

    ``source`` says where the names came from (``"--policy"`` or the scenario
    file), so a bad name is reported where the user wrote it. ``echo`` gets
    the comparison table and the results path (stdout); ``notify`` gets the
    workload's warnings and which models are used (stderr); ``progress``
    shows a bar on stderr for each policy that runs longer than
    :data:`PROGRESS_DELAY_S`. The folder is replaced as a whole when the run
    is complete (see the module docstring).

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
    lines = workload_warnings(workload, scenario)
    if notify is not None:
        if lines:
            notify(f"warning: {workload.source or scenario.workload.kind}:")
            for line in lines:
                notify(f"  {line}")
    out = Path(out_dir)
    stage = _prepare_out(out)
    try:
        features = None
        if scenario.prediction_service.backend == "http":
            bundle = None
            if any(s.predictor in ("xgboost", "rnn") for s in specs):
                import asyncio

                # Asked once: a server that dies between policies costs fallbacks, not the run.
                features = asyncio.run(_service_feature_names(scenario))
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
        records.write_json_atomic(stage / "comparison.json", {
            "schema": "comparison/1", "scenario": scenario.name,
            "policies": [{"policy": s.name, "dir": policy_dir(s.name)} for s in specs],
            "summaries": summaries})
        if echo is not None:
            echo(comparison_table(summaries))
        if plots:
            from cosim.report import write_report

            write_report(stage, warnings=lines)
        _put_in_place(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if echo is not None:
        echo(f"results: {out}/")
        if plots:
            echo(f"  report: {out / 'report.html'}")
    return summaries
