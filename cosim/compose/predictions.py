"""Prediction set-up: the models, the backend and the hub behind ``@PREDICTOR``.

One path for every caller (``cosim run``, studies, the env factory): the
front decides which models a run uses (:func:`prepare_models`), makes the
in-process backend (:func:`prediction_backend`) or, with a configured
prediction service, asks the service for its feature names
(:func:`service_feature_names`), and wraps the backend in the
:class:`~cosim.prediction_hub.PredictionHub` the scheduler consults
(:func:`make_prediction_hub`). :class:`HubFactory` is that set-up made once
and handed, picklable, to whoever needs a hub per workload (the env's
``predictions``).

Predictors are trained only when asked: without ``predictor.models``,
:func:`prepare_models` trains (or reuses from the cache) models on a
generated VASP history only when ``train_if_missing`` is true, and then says
so on stderr; otherwise it stops with a message naming the fix. ``@xgboost``
on a trace (``swf``, ``slurm``) without a models folder needs nothing up front:
the trace model learns inside each run from the jobs finished so far
(:class:`TraceModels`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from cosim.cli import stderr_line
from cosim.config import TRACE_REFIT, Scenario  # TRACE_REFIT re-exported
from cosim.errors import InputError, ScenarioError
from cosim.policies import KillRule, KillRulePolicy, PolicySpec, parse_policy
from cosim.prediction_hub import (  # check_history_inputs re-exported: its callers import it here
    PredictionHub,
    check_history_inputs,
    feature_columns,
    scenario_hub,
)
from cosim.workloads.base import Workload

__all__ = ["prepare_models", "prediction_backend", "make_prediction_hub", "attach_predictions",
           "check_history_inputs", "TraceModels", "TRACE_KINDS", "TRACE_REFIT",
           "service_feature_names", "HubFactory", "MODEL_PREDICTORS"]

#: Predictors that need trained models (a bundle, or the prediction service).
MODEL_PREDICTORS = ("xgboost", "rnn")


def _training_only(text: str) -> None:
    """What a quiet caller still hears: training is announced, a cache hit is not."""
    if not text.endswith("(cached)"):
        stderr_line(text)


def prepare_models(scenario: Scenario, names: Sequence[str | PolicySpec],
                   base_dir: str | Path | None = None,
                   echo: Callable[[str], None] | None = stderr_line, *,
                   train_if_missing: bool = True):
    """The model bundle the policies need (None if only estimates or history).

    Uses ``predictor.models`` when given. Without it, and only when
    ``train_if_missing``, trains (once, cached) on a generated VASP history,
    announcing training on stderr even when ``echo`` is None (never silent).

    Args:
        scenario: gives ``predictor`` (models folder, cache, training set-up).
        names: the policies, names or parsed (their ``predictor`` says what is needed).
        base_dir: where a relative ``predictor.models`` is resolved.
        echo: hears which models folder is used (None: quiet).
        train_if_missing: train when no models folder is given.

    Raises:
        ScenarioError: no models folder and training not allowed or not possible
            (not a VASP workload), or a folder without the remaining-time model @rnn needs.
    """
    from cosim.compose.policies import parse_policies

    specs = [n if isinstance(n, PolicySpec) else parse_policies([n], scenario)[0] for n in names]
    preds = {s.predictor for s in specs}
    if not preds & set(MODEL_PREDICTORS):
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
        if scenario.workload.kind in TRACE_KINDS and "rnn" not in preds:
            if echo is not None:
                echo("predictors: the trace model, learnt in each run from the jobs "
                     "finished so far (predictor.refit)")
            return TraceModels.for_scenario(scenario, base_dir, echo)
        if scenario.workload.kind != "vasp":
            raise ScenarioError("predictor.models", "nothing",
                                "a models folder (training a model is automatic only for VASP "
                                "workloads, and for @xgboost on a trace)")
        if not train_if_missing:
            raise ScenarioError("predictor.models", "nothing", "a models folder "
                                "(python -m predictors train), or training if missing")
        folder = ensure_models(pc.cache, jobs=pc.train_jobs, seed=pc.train_seed,
                               remaining="rnn" in preds, epochs=pc.train_epochs,
                               generator_params=dict(scenario.workload.params),
                               echo=echo or _training_only)
        bundle = ModelBundle.load(folder)
    if "rnn" in preds and bundle.remaining_model is None:
        raise ScenarioError("predictor.models", "a folder without remaining/",
                            "a remaining-time model for @rnn (python -m predictors train remaining)")
    return bundle


#: Workload kinds that are real traces: ``@xgboost`` learns the trace model in the run.
TRACE_KINDS = ("swf", "slurm")


class TraceModels:
    """``@xgboost`` on a trace without ``predictor.models``: the trace model
    (:class:`predictors.trace.TraceRuntimeRegressor`) learnt inside each run from the
    jobs finished so far (:class:`predictors.trace_backend.TraceModelBackend`), refitted
    every ``predictor.refit`` (default :data:`TRACE_REFIT`); requests until its first fit.

    A window of a trace (``workload.offset``) starts from the trace model fitted
    on the jobs finished before it (:mod:`predictors.trace_past`, cached by
    trace hash in ``predictor.cache``), its users' histories seeded with them.

    Attributes:
        model: the model fitted on the window's past (None: the run starts on requests).
        past: ``user``, ``runtime``, ``req_time`` of those jobs, in end order (or None).
    """

    feature_names: list[str] = []

    def __init__(self, model=None, past=None):
        self.model = model
        self.past = past

    @classmethod
    def for_scenario(cls, scenario: Scenario, base_dir: str | Path | None = None,
                     echo: Callable[[str], None] | None = None) -> TraceModels:
        """The trace models of ``scenario``: fitted on the window's past where it has one."""
        wc = scenario.workload
        if wc.offset == 0:
            return cls()
        from cosim.workloads import load_workload
        from predictors.trace_past import window_model

        whole_scenario = scenario.model_copy(update={"workload": wc.model_copy(
            update={"jobs": None, "offset": 0})})
        whole = load_workload(whole_scenario, base_dir=base_dir)
        return cls(*window_model(scenario, whole, load_workload(scenario, base_dir=base_dir),
                                 echo))

    def trace_backend(self, workload: Workload):
        from predictors.trace_backend import TraceModelBackend

        return TraceModelBackend(workload, self.model, past=self.past)


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
        from predictors.history import history_backend

        return history_backend(workload)
    if isinstance(bundle, TraceModels):
        return bundle.trace_backend(workload)
    return bundle.precomputed(feature_columns(workload, list(range(len(workload))),
                                              bundle.feature_names))


def make_prediction_hub(spec: PolicySpec, scenario: Scenario, workload: Workload, backend, *,
                        feature_names: list[str] | None = None) -> PredictionHub | None:
    """The hub that gives a policy its ``@PREDICTOR`` beliefs (None for ``@estimate``).

    The hub only predicts: kills (``+kill``, ``+kill=DIR``) wrap the policy
    and read the hub (:func:`cosim.compose.policies.with_kills`). ``@history``
    is refused where it cannot work (:func:`check_history_inputs`).
    """
    if spec.predictor == "estimate" and not spec.kill:
        return None
    refit = scenario.predictor.refit or getattr(backend, "default_refit", None)
    return scenario_hub(spec.predictor, scenario, workload, backend,
                        feature_names=feature_names, refit=refit)


def attach_predictions(sim, scenario: Scenario, predictor: str, kill: bool, bundle):
    """Add the prediction hub of ``@PREDICTOR[+kill]`` to a built simulation (before it runs).

    With ``kill`` the scheduler's policy is wrapped in the scenario's kill rule
    (:class:`cosim.policies.KillRulePolicy`), which reads the new hub.
    """
    spec = PolicySpec(name="attached", kind="queue", predictor=predictor, kill=kill).checked()
    backend = prediction_backend(predictor, sim.workload, bundle)
    hub = make_prediction_hub(spec, scenario, sim.workload, backend,
                              feature_names=bundle.feature_names if bundle is not None else None)
    if hub is not None:
        sim.scheduler.add_hook(hub)
    if kill:
        sched = sim.scheduler
        sched.policy = KillRulePolicy(sched.policy, KillRule.from_config(scenario.predictor.kill),
                                      hub)
    return hub


class HubFactory:
    """``workload -> PredictionHub`` for one predictor: the prediction set-up made once.

    The models are prepared when the factory is made (trained only if
    ``train_if_missing``, announced on stderr); each call makes a fresh hub
    with an in-process backend for that workload. Picklable when its bundle is,
    so env factories holding one can go to worker processes.

    Args:
        scenario: the scenario (predictor settings, kill rule).
        predictor: ``history``, ``xgboost`` or ``rnn``.
        base_dir: where a relative ``predictor.models`` is resolved.
        train_if_missing: see :func:`prepare_models`.
    """

    def __init__(self, scenario: Scenario, predictor: str, base_dir: str | Path | None = None, *,
                 train_if_missing: bool = True):
        self.scenario = scenario
        self.spec = parse_policy(f"fcfs@{predictor}", where="env.predictor")
        self.bundle = prepare_models(scenario, [self.spec], base_dir, echo=None,
                                     train_if_missing=train_if_missing)

    def __call__(self, workload: Workload) -> PredictionHub | None:
        bundle = self.bundle
        return make_prediction_hub(self.spec, self.scenario, workload,
                                   prediction_backend(self.spec.predictor, workload, bundle),
                                   feature_names=bundle.feature_names if bundle is not None else None)


async def service_feature_names(scenario: Scenario) -> list[str]:
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


