"""Scenario files: YAML into validated, frozen objects, with clear errors.

A scenario says what cluster, which workload, which policies and which
rules. Unknown keys are errors that suggest the nearest valid key; every
error names the file, the line when known, and the key path. ``--set
a.b=value`` overrides are parsed as YAML scalars and validated the same way.

Examples:
    >>> s = Scenario.model_validate({"name": "tiny", "workload": {"kind": "lublin", "jobs": 50}})
    >>> s.cluster.nodes, s.scheduler.policies
    (256, ('fcfs+easy',))
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cosim import limits
from cosim.errors import InputError, ScenarioError, did_you_mean

__all__ = ["Scenario", "ClusterConfig", "WorkloadConfig", "EstimateConfig", "SchedulerConfig",
           "FaultsConfig", "PredictorConfig", "RefitConfig", "TRACE_REFIT", "PredictionServiceConfig", "KillConfig", "MetricsConfig", "OutputConfig", "load_scenario", "apply_overrides",
           "scenario_from_dict", "read_scenario_dict", "set_path", "validation_error", "folder_name"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, value: Any, info: Any) -> Any:
        """Refuse ``true``/``false`` for a number: pydantic would read ``true`` as 1."""
        if isinstance(value, bool):
            annotation = cls.model_fields[info.field_name].annotation
            if annotation is not bool and bool not in get_args(annotation) \
                    and annotation is not Any:
                raise ValueError("a number (true and false are not numbers here)")
        annotation = cls.model_fields[info.field_name].annotation
        if not (isinstance(annotation, type) and issubclass(annotation, _Section)):
            _check_integers(value)   # a section checks its own keys, naming them
        return value


def _check_integers(value: Any) -> None:
    """Refuse an integer beyond int64 anywhere in ``value`` (numpy's columns and seeds
    take no others): one line naming the key instead of an OverflowError deep in a run."""
    stack = [value]
    while stack:
        v = stack.pop()
        if limits.out_of_int64(v):
            raise ValueError("a whole number within int64 (-2**63 to 2**63-1)")
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)


class ClusterConfig(_Section):
    """The machine.

    A trace replay (``workload.kind`` ``swf`` or ``slurm``) whose scenario
    leaves ``nodes`` unset takes the machine from the trace: the SWF header's
    ``MaxProcs`` (as ``MaxNodes`` nodes of ``MaxProcs / MaxNodes`` cores when
    that divides, else one core per node; split by ``cores_per_node`` when
    that alone is set), or for Slurm accounting the peak of concurrently
    allocated CPUs. "Unset" means the key is absent from the file and from
    ``--set``; see :func:`cosim.workloads.loading.resolve_machine`. Generators
    and explicit values are unaffected (an unset ``nodes`` is 256 there).

    Attributes:
        nodes: number of nodes.
        cores_per_node: cores on each node.
        memory_per_node: memory on each node (GB; 0 = memory not modelled).
        granularity: ``core`` (jobs ask for cores, SWF processors) or ``node``
            (jobs ask for whole nodes, as on Theta).
    """

    nodes: int = Field(256, gt=0)
    cores_per_node: int = Field(1, gt=0)
    memory_per_node: float = Field(0.0, ge=0, allow_inf_nan=False)
    granularity: Literal["core", "node"] = "core"

    @field_validator("nodes")
    @classmethod
    def _nodes_within_limit(cls, v: int) -> int:
        return _within(limits.NODES, v)

    @field_validator("cores_per_node")
    @classmethod
    def _cores_within_limit(cls, v: int) -> int:
        return _within(limits.CORES_PER_NODE, v)


def _within(limit: limits.Limit, value: int) -> int:
    """``value`` when within ``limit``, else the pydantic error that names the limit."""
    if value > limit.value:
        raise ValueError(limit.error(value, "").expected)
    return value


class EstimateConfig(_Section):
    """Where requested times come from.

    Attributes:
        model: ``trace`` keeps the workload's requested times (SWF field 9,
            else the run time); ``exact``, ``gaussian`` and ``tsafrir``
            replace them (see :mod:`cosim.workloads.estimates`).
        params: keyword arguments of the estimate model.
    """

    model: Literal["trace", "exact", "gaussian", "tsafrir"] = "trace"
    params: dict[str, Any] = Field(default_factory=dict)


class WorkloadConfig(_Section):
    """The job stream.

    Attributes:
        kind: ``swf`` (replay a trace), ``slurm`` (replay ``sacct`` output),
            ``lublin``, ``mao`` or ``vasp`` (generators).
        path: the trace for ``swf`` and ``slurm``.
        jobs: generators: how many jobs; traces: keep this many (a window).
        offset: traces: index of the first job kept, or ``random`` (DBF style).
        params: keyword arguments of the generator or reader.
        estimates: requested-time model.
        user_aware: submit dependent jobs a think time after their
            predecessor ends (SWF fields 17-18) instead of at trace times.
    """

    kind: Literal["swf", "slurm", "lublin", "mao", "vasp"]
    path: str | None = None
    jobs: int | None = Field(None, gt=0)
    offset: int | Literal["random"] = 0
    params: dict[str, Any] = Field(default_factory=dict)
    estimates: EstimateConfig = EstimateConfig()
    user_aware: bool = False

    @field_validator("offset")
    @classmethod
    def _offset_not_negative(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 0:
            raise ValueError("an index of 0 or more, or 'random'")
        return v

    @model_validator(mode="after")
    def _path_only_for_traces(self) -> WorkloadConfig:
        if self.path is not None and self.kind not in ("swf", "slurm"):
            raise ValueError(f"no path for the generator {self.kind!r} (workload.path names "
                             "the trace of kind swf or slurm)")
        return self


class SchedulerConfig(_Section):
    """Policies and the rules every policy runs under.

    Attributes:
        policies: policy names (``HEURISTIC[+BACKFILL]``); several are compared.
        enforce_walltime: kill a job when it reaches its requested time.
        overrun_min_extension: seconds a job that passed its expected end is
            still expected to run, at least.
        overrun_fraction: ... or this fraction of its elapsed time, if larger.
        correction: how a job that outlives its prediction is re-predicted:
            ``overrun`` (the rule above), ``stepup`` (EASY++'s ladder of
            increments), ``double`` (twice the elapsed time) or ``request``;
            each capped at the request (:mod:`cosim.actors.corrections`).
        slurm: knobs of the ``slurm`` policies by their slurm.conf names
            (``PriorityWeightAge: 1000``, ``bf_window: 1440``, ...; checked with
            the policy names, see :mod:`cosim.policies.slurm_params`).
    """

    policies: tuple[str, ...] = ("fcfs+easy",)
    slurm: dict[str, Any] = Field(default_factory=dict)
    enforce_walltime: bool = False
    correction: Literal["overrun", "stepup", "double", "request"] = "overrun"
    overrun_min_extension: float = Field(60.0, ge=0, allow_inf_nan=False)
    overrun_fraction: float = Field(0.2, ge=0, allow_inf_nan=False)

    @field_validator("policies", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        if isinstance(v, list | tuple) and not v:
            raise ValueError("at least one policy name")
        return [v] if isinstance(v, str) else v


class FaultsConfig(_Section):
    """Node failures.

    A run with failures ends at a bound at the latest (see
    :class:`cosim.actors.faults.RunBound` and ``docs/reference/limits.md``).

    Attributes:
        mtbf: mean time between failures of one node (s); 0 disables failures,
            else at least :data:`cosim.limits.MIN_MTBF` (60 s).
        mttr: mean time to repair (s); ``.inf``: failed nodes never return.
        on_failure: what happens to a job on a failed node.
        max_attempts: a job lost this many times fails instead of requeueing.
        start_limit: seconds a job may wait, in all, as the head of the queue
            needing more nodes than are up while failures alone keep it
            waiting (returning nodes are held for it meanwhile) before it is
            given up and reported as never started; None: 10 x ``mttr``, at
            most :data:`cosim.limits.MAX_START_LIMIT` (7 days). See
            ``docs/metrics.md`` (failures).
    """

    mtbf: float = Field(0.0, ge=0)
    mttr: float = Field(3600.0, gt=0)
    on_failure: Literal["requeue", "fail"] = "requeue"
    max_attempts: int = Field(3, gt=0)
    start_limit: float | None = Field(None, gt=0, allow_inf_nan=False)

    @field_validator("mtbf")
    @classmethod
    def _mtbf_at_least_the_minimum(cls, v: float) -> float:
        if 0 < v < limits.MIN_MTBF:
            raise ValueError(f"0 (no failures) or at least {limits.MIN_MTBF:g} s "
                             "(cosim.limits.MIN_MTBF: each node failing more often never lets "
                             "a run end)")
        return v

    @field_validator("mttr")
    @classmethod
    def _mttr_a_number(cls, v: float) -> float:
        if v != v:
            raise ValueError("a number of seconds above 0 (.inf: never repaired), not NaN")
        return v


class KillConfig(_Section):
    """Killing running jobs whose run time was badly underestimated (RLSchert, seed 001).

    ``rule`` picks one of the named rules of :class:`cosim.policies.kill.KillRule`;
    ``short``, ``long`` and ``error`` override its thresholds (seconds).

    - ``rlschert`` (default): the paper's rule in its 5-minute units
      (``unit`` seconds each): a job is killed when it has run less than its
      pre-run prediction ``len_param``, ``len_param`` < 10 units, its in-run
      prediction of the run time > 10 units, and the two differ by more than
      1 unit.
    - ``guarded``: the rule this project used before (30 min / 2 h / 10 min),
      which also requires a short job to be waiting for the cores.

    Attributes:
        enabled: apply the rule to every policy whose name does not say its
            predictor (a policy name can also ask with ``@rnn+kill``; either
            way it needs ``rnn`` predictions).
        rule: ``rlschert`` or ``guarded``.
        unit: seconds per RLSchert time unit (``rlschert`` thresholds are 10, 10
            and 1 units).
        short: a pre-run prediction below this (s) called the job short...
        long: ...an in-run prediction of its run time above this (s) calls it long...
        error: ...and the two differ by more than this (s).
        max_kills: kills per job at most (0: no limit). A killed job comes back
            with its in-run estimate, so the rule rarely fires twice; the limit
            makes sure a job cannot be killed forever.
    """

    enabled: bool = False
    rule: Literal["rlschert", "guarded"] = "rlschert"
    unit: float = Field(300.0, gt=0)
    short: float | None = Field(None, gt=0)
    long: float | None = Field(None, gt=0)
    error: float | None = Field(None, ge=0)
    max_kills: int = Field(1, ge=0)


class RefitConfig(_Section):
    """When a model that learns from finished jobs is fit again during a run.

    Exactly one of the two: ``{every_seconds: 604800}`` (each simulated week)
    or ``{every_jobs: 5000}`` (each 5,000 finished jobs). A refit sees only
    the jobs that had finished by then.

    Attributes:
        every_seconds: simulated seconds between refits.
        every_jobs: finished jobs between refits.
    """

    every_seconds: float | None = Field(None, gt=0, allow_inf_nan=False)
    every_jobs: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _exactly_one(self):
        if (self.every_seconds is None) == (self.every_jobs is None):
            raise ValueError("exactly one of every_seconds and every_jobs")
        return self


#: ``predictor.refit`` of the trace model (``@xgboost`` on a trace) when the scenario gives
#: none. Refitting every 10,000 finished jobs instead of 5,000 costs 0.5 % (SDSC-SP2)
#: and 0.9 % (CTC-SP2) in mean absolute error on the jobs after the first 20,000
#: and halves the fitting time (refits on the latest 20,000 jobs, 40 trees).
TRACE_REFIT = RefitConfig(every_jobs=10_000)


class PredictorConfig(_Section):
    """What the scheduler sees as run times.

    Attributes:
        runtime: ``estimate`` (requested times), ``history`` (per-user mean of
            the last two run times), ``xgboost`` (pre-run model) or ``rnn``
            (pre-run model, then remaining-time predictions from progress logs).
            A policy name may override it: ``sjf+easy@xgboost``, ``fcfs+easy@rnn+kill``.
        models: a models folder written by ``python -m predictors train``; when
            empty and a model is needed, one is trained on a generated VASP
            history and cached.
        train_jobs, train_seed, train_epochs: that training history and run.
        cache: where trained models are cached.
        update_interval: seconds between progress checks of running jobs, at
            least :data:`cosim.limits.MIN_UPDATE_INTERVAL` (1 s).
        min_remaining: floor of a remaining-time prediction (s).
        kill: the rule-based kill (:class:`KillConfig`).
        allow_shared_history: run ``history`` on a workload without user ids
            (one history shared by every job), which is refused otherwise.
        allow_missing_requests: run ``history`` on a workload without
            requested times (its cap at the request would be the run time
            itself), which is refused otherwise.
        refit: refit a model that learns from finished jobs during the run
            (:class:`RefitConfig`); None: never.
    """

    runtime: Literal["estimate", "history", "xgboost", "rnn"] = "estimate"
    models: str | None = None
    train_jobs: int = Field(4000, gt=10)
    train_seed: int = Field(977, ge=0)
    train_epochs: int | None = Field(None, ge=0)
    cache: str = ".cache/cosim-models"
    update_interval: float = Field(300.0, ge=limits.MIN_UPDATE_INTERVAL, allow_inf_nan=False)
    min_remaining: float = Field(30.0, ge=0)
    kill: KillConfig = KillConfig()
    allow_shared_history: bool = False
    allow_missing_requests: bool = False
    refit: RefitConfig | None = None


class PredictionServiceConfig(_Section):
    """Where predictions come from during a run (issue: co-simulation with a service).

    Attributes:
        backend: ``none`` (the models are called directly, no asyncio),
            ``inprocess`` (an asyncio service around the loaded models, through
            the bridge) or ``http`` (a server started with ``python -m
            predictors serve``, through the bridge).
        url: the server for ``http``.
        timeout_s: wall seconds a call may take before the decision point
            falls back to user estimates (counted in ``summary.json``).
        token: bearer token for the server.
        simulated_latency: simulated seconds a decision point is delayed by
            the service: 0, a number, ``measured`` (its wall time), or
            ``{median: s, sigma: x}`` (lognormal per call).
    """

    backend: Literal["none", "inprocess", "http"] = "none"
    url: str | None = None
    timeout_s: float = Field(5.0, gt=0)
    token: str | None = None
    simulated_latency: float | Literal["measured"] | dict[str, float] = 0.0

    @field_validator("simulated_latency", mode="before")
    @classmethod
    def _latency(cls, v: Any) -> Any:
        """0 or more seconds, ``measured``, or exactly ``{median, sigma}`` of finite numbers."""
        expected = ("0 or more seconds, 'measured', or {median: s, sigma: x} "
                    "(finite numbers of 0 or more)")
        if v == "measured":
            return v
        values = list(v.values()) if isinstance(v, dict) else [v]
        if isinstance(v, dict) and set(v) != {"median", "sigma"}:
            raise ValueError(expected)
        for x in values:
            if isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x < float("inf"):
                raise ValueError(expected)
        return v

    @model_validator(mode="after")
    def _http_needs_a_url(self) -> PredictionServiceConfig:
        if self.backend != "http":
            return self
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(self.url or "")
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise ValueError(f"a url http://HOST[:PORT] (port 1-65535) for backend http, "
                             f"not {self.url!r}")
        return self


class MetricsConfig(_Section):
    """Metric parameters. ``tau``: bounded-slowdown threshold (s)."""

    tau: float = Field(10.0, gt=0)


class OutputConfig(_Section):
    """What a run writes besides jobs and the summary.

    Attributes:
        plots: write PNGs and ``report.html``.
        until: stop the simulation at this time (s); later jobs are unfinished.
    """

    plots: bool = True
    until: float | None = Field(None, gt=0)


def folder_name(value: str) -> str:
    """``value`` when it can name a folder inside another (``results/<name>``), else ValueError.

    A name is one path component: not empty, not ``.`` or ``..``, without
    ``/``, ``\\`` or NUL, so the folder it makes never leaves the one named.
    """
    if (not value.strip() or value in (".", "..") or any(c in value for c in "/\\\0")):
        raise ValueError("a plain name (one folder: no '/', '\\', '..' or NUL), "
                         "as the results folder is results/<name>")
    return value


class Scenario(_Section):
    """A whole scenario (see the module docstring)."""

    name: str = "scenario"
    description: str = ""
    seed: int = Field(0, ge=0)
    cluster: ClusterConfig = ClusterConfig()
    workload: WorkloadConfig
    scheduler: SchedulerConfig = SchedulerConfig()
    faults: FaultsConfig = FaultsConfig()
    predictor: PredictorConfig = PredictorConfig()
    prediction_service: PredictionServiceConfig = PredictionServiceConfig()
    metrics: MetricsConfig = MetricsConfig()
    output: OutputConfig = OutputConfig()

    @field_validator("name")
    @classmethod
    def _name_is_one_folder(cls, v: str) -> str:
        return folder_name(v)


# -- loading and errors ------------------------------------------------------------

def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The section class that holds the key at ``loc`` (for suggestions)."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            return None
        # A section may be optional (``Section | None``): look through the union.
        ann = next((a for a in (field.annotation, *get_args(field.annotation))
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if ann is None:
            return None
        model = ann
    return model


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validation_error(err: ValidationError, source: str, lines: dict[str, int] | None = None, *,
                     root: type[BaseModel] | None = None,
                     locate: Callable[[str], str | None] | None = None) -> ScenarioError:
    """The one :class:`ScenarioError` to report for a pydantic ``ValidationError``.

    The first unknown key wins (it explains the other errors it causes, such
    as a misspelt required key) and gets the nearest valid key as a hint;
    otherwise the first error. The message names ``source``, the line when
    ``lines`` knows the key path, the key path, what was found and what was
    expected.

    Args:
        err: the error pydantic raised validating a raw mapping.
        source: the file (or flag) the mapping came from.
        lines: key path -> line number in ``source`` (see :func:`read_scenario_dict`).
        root: the model that was validated (default :class:`Scenario`); its
            sections give the valid keys of a hint.
        locate: ``key path -> where`` for paths that come from somewhere else
            than ``source`` (a study's overrides); None falls back to ``source``.
    """
    lines = lines or {}
    errors = err.errors()
    e = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    path = ".".join(str(p) for p in loc)
    where = locate(path) if locate is not None else None
    if where is None:
        where = f"{source}:{lines[path]}: {path}" if path in lines else f"{source}: {path}"
    if e["type"] == "extra_forbidden":
        section = _model_at(root or Scenario, loc)
        valid = list(section.model_fields) if section else []
        return ScenarioError(where, f"unknown key {str(loc[-1])!r}",
                             f"one of {', '.join(valid)}" if valid else "no key here",
                             did_you_mean(str(loc[-1]), valid))
    if e["type"] == "missing":
        return ScenarioError(where, "nothing", "this key (it is required)")
    msg = e["msg"].removeprefix("Input should be ").removeprefix("Value error, ")
    # Lower-case pydantic's capital only: a limit's variable (COSIM_MAX_NODES) keeps its case.
    return ScenarioError(where, _describe(e.get("input")), msg[:1].lower() + msg[1:])


def _line_map(text: str) -> dict[str, int]:
    """Key path -> line number of every mapping key in a YAML document."""
    out: dict[str, int] = {}

    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                path = f"{prefix}.{k.value}" if prefix else str(k.value)
                out[path] = k.start_mark.line + 1
                walk(v, path)

    try:
        walk(yaml.compose(text), "")
    except yaml.YAMLError:
        pass
    return out


def scenario_from_dict(raw: Any, source: str = "scenario", lines: dict[str, int] | None = None
                       ) -> Scenario:
    """Validate a raw mapping into a :class:`Scenario` or raise one :class:`ScenarioError`."""
    if not isinstance(raw, dict):
        raise ScenarioError(source, type(raw).__name__, "a mapping of scenario sections")
    try:
        return Scenario.model_validate(raw)
    except ValidationError as err:
        raise validation_error(err, source, lines or {}) from None


def read_scenario_dict(path: str | Path, what: str = "scenario") -> tuple[dict, dict[str, int]]:
    """Read a YAML file into a raw mapping and its key path -> line map.

    ``what`` names the kind of file in error messages (``scenario``, ``study``).
    """
    path = Path(path)
    data = limits.read_bytes(path, f"a {what} YAML file", limits.SCENARIO_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}", f"a byte that is not UTF-8 (0x{data[exc.start]:02x})",
                         f"a UTF-8 {what} YAML file") from None
    try:
        raw = limits.load_yaml(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ScenarioError(where, f"invalid YAML ({getattr(exc, 'problem', exc)})",
                            "a YAML mapping") from None
    return ({} if raw is None else raw), _line_map(text)


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``key.path=value`` overrides (values parsed as YAML) to a raw mapping."""
    import copy

    raw = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ScenarioError("--set", repr(item), "KEY.PATH=VALUE")
        try:
            value = limits.load_yaml(text, f"--set {key}")
        except yaml.YAMLError:
            value = text
        set_path(raw, key.strip(), value, where=f"--set {key}")
    return raw


def set_path(raw: dict, key: str, value: Any, *, where: str | None = None) -> None:
    """Set ``raw[a][b][c] = value`` for ``key = "a.b.c"``, creating sections on the way.

    Args:
        raw: a raw scenario mapping (changed in place).
        key: a dotted key path.
        value: the (already parsed) value.
        where: names the override in errors (default ``key``).

    Raises:
        ScenarioError: a part of the path is a value, not a section.
    """
    parts = key.split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(where or key, f"{'.'.join(parts[:i + 1])} is not a section",
                                "a path into scenario sections")
        node = nxt
    node[parts[-1]] = value


def load_scenario(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Load, override and validate a scenario file.

    Raises:
        InputError: missing file, invalid YAML, unknown key or wrong type.
    """
    raw, lines = read_scenario_dict(path)
    if overrides:
        raw = apply_overrides(raw, overrides)
        lines = {k: v for k, v in lines.items()}
    return scenario_from_dict(raw, str(path), lines)
