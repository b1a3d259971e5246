"""The study file: its schema (pydantic), loading with file:line errors, and the plan's types.

See :mod:`cosim.studies` for the format. :func:`load_study` reads and
validates a study; :class:`RunSpec` and :class:`StudyPlan` are what
:mod:`cosim.studies.plan` makes of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.registry import LEARNERS
from cosim import limits
from cosim.config import (
    Scenario,
    folder_name,
    read_scenario_dict,
    validation_error,
)
from cosim.errors import InputError, ScenarioError

__all__ = ["Study", "SeedRange", "TrainSpec", "RunSpec", "StudyPlan", "load_study", "is_study", "DEFAULT_METRICS", "TRAIN_METRICS", "FIXED_COLUMNS", "STATUS_COLUMNS"]

#: The report's metrics when a study names none (keys of ``summary.json``).
DEFAULT_METRICS = ("bsld_mean", "wait_mean", "utilization")
#: ... and for training studies (learning-curve columns, see :func:`execute_run`).
TRAIN_METRICS = ("mean_return", "bsld_mean")
#: Fixed columns of ``study.parquet`` before the overrides and the metrics.
FIXED_COLUMNS = ("setting", "policy", "seed")
#: Columns of ``study.parquet`` after the overrides, before the metrics.
STATUS_COLUMNS = ("status", "error", "run_seconds", "dir")


# -----------------------------------------------------------------------------------
# The study file
# -----------------------------------------------------------------------------------
class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The ``train.algo`` choices (the registry's names).
_LEARNER_NAMES = tuple(LEARNERS)


class SeedRange(_Section):
    """``seeds: {start: 1, count: 10}``: the seeds ``start .. start + count - 1``."""

    start: int = Field(1, ge=0, le=limits.INT64_MAX - 100_000)
    count: int = Field(..., gt=0, le=100_000)


class TrainSpec(_Section):
    """The ``train:`` section: each run trains an agent (``python -m agents train``).

    Attributes:
        algo: a learner of :data:`agents.registry.LEARNERS` (``ppo``, ``a2c``, ...).
        env: keyword arguments of :class:`cosim.env.SchedulingEnv` (window,
            observation, reward, episode_jobs, ...).
        args: fields of the learner's hyper-parameters (``agents.ppo.Args``, ...): total_steps,
            num_envs, lr, ... The seed is the run's seed.
    """

    algo: Literal[_LEARNER_NAMES] = "ppo"
    env: dict[str, Any] = Field(default_factory=dict)
    args: dict[str, Any] = Field(default_factory=dict)


class Study(_Section):
    """A study file (see the module docstring for every key)."""

    name: str | None = None
    description: str = ""
    scenario: str
    policies: tuple[str, ...] | None = None
    train: TrainSpec | None = None
    seeds: Any = None          # a list of ints or a SeedRange: checked by _seeds()
    set: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    metrics: tuple[str, ...] | None = None
    confidence: float = Field(0.95, gt=0, lt=1)
    bootstrap: int = Field(9999, ge=99)
    plots: bool = True

    @field_validator("policies", "metrics", mode="before")
    @classmethod
    def _one_or_many(cls, v):
        return [v] if isinstance(v, str) else v

    @field_validator("name")
    @classmethod
    def _name_is_one_folder(cls, v: str | None) -> str | None:
        return v if v is None else folder_name(v)

    @field_validator("bootstrap")
    @classmethod
    def _bootstrap_within_limit(cls, v: int) -> int:
        if v > limits.BOOTSTRAP.value:
            raise ValueError(limits.BOOTSTRAP.error(v, "").expected)
        return v


@dataclass(frozen=True)
class RunSpec:
    """One run of a study, as plain data a worker can run anywhere.

    Attributes:
        kind: ``policy`` (simulate a policy) or ``train`` (train an agent).
        setting: the folder name of its setting (grid values).
        seed: the run's seed (the scenario's ``seed``; also the learner's).
        policy: the policy name, or the algorithm of a training run.
        values: this run's overrides by key path (``set`` and the setting's ``grid`` values).
        scenario: the resolved scenario (seed and overrides applied), as a mapping.
        scenario_path: the scenario file (absolute).
        base_dir: where the scenario's relative paths are resolved.
        out_dir: the run's results folder (absolute).
        train: ``{"algo", "env", "args"}`` of a training run, overrides applied.
        digest: what the run computes, hashed; a finished run with another digest is redone.
    """

    kind: str
    setting: str
    seed: int
    policy: str
    values: dict[str, Any]
    scenario: dict[str, Any]
    scenario_path: str
    base_dir: str
    out_dir: str
    train: dict[str, Any] | None = None
    digest: str = ""

    @property
    def group_dir(self) -> Path:
        """The (setting, seed) folder holding this run's folder."""
        return Path(self.out_dir).parent


@dataclass
class StudyPlan:
    """A validated study and every run it makes.

    Attributes:
        study: the study file's contents.
        path: the study file.
        name: the study's name.
        out: the results folder.
        scenario: the scenario file's own scenario (no overrides).
        keys: override key paths (``set`` keys, then ``grid`` keys).
        settings: ``(folder name, grid values)`` of every setting, in order.
        seeds: the seeds.
        runs: every run, setting by setting, seed by seed, policy by policy.
    """

    study: Study
    path: Path
    name: str
    out: Path
    scenario: Scenario
    keys: list[str]
    settings: list[tuple[str, dict[str, Any]]]
    seeds: list[int]
    runs: list[RunSpec] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``policy`` or ``train``."""
        return "train" if self.study.train is not None else "policy"

    @property
    def metrics(self) -> tuple[str, ...]:
        """The report's metrics."""
        if self.study.metrics:
            return self.study.metrics
        return TRAIN_METRICS if self.kind == "train" else DEFAULT_METRICS

    @property
    def policies(self) -> list[str]:
        """Policy names (the algorithm of a training study), in the study's order."""
        return list(dict.fromkeys(r.policy for r in self.runs))


class _Where:
    """Locations in the study file, for one-line errors: ``FILE:LINE: key.path``."""

    def __init__(self, path: Path, lines: dict[str, int]):
        self.source, self.lines = str(path), lines

    def __call__(self, key: str, suffix: str = "") -> str:
        line = self.lines.get(key)
        return f"{self.source}:{line}: {key}{suffix}" if line else f"{self.source}: {key}{suffix}"


def _relocate(exc: InputError, where: str) -> InputError:
    """The same error, reported at ``where`` (a key of the study file)."""
    return type(exc)(where, exc.found, exc.expected, exc.hint)


def load_study(path: str | os.PathLike) -> tuple[Study, _Where]:
    """Read and validate a study file's own keys (not yet the scenario it names).

    Raises:
        InputError: missing file, invalid YAML, unknown key (with the nearest
            valid key) or a wrong value; one line naming the file, line and key.
    """
    path = Path(path)
    raw, lines = read_scenario_dict(path, what="study")
    where = _Where(path, lines)
    if not isinstance(raw, dict):
        raise ScenarioError(str(path), type(raw).__name__, "a mapping of study keys")
    try:
        study = Study.model_validate(raw)
    except ValidationError as err:
        raise validation_error(err, str(path), lines, root=Study) from None
    if study.policies is not None and study.train is not None:
        raise ScenarioError(where("train"), "both policies and train",
                            "one of them: policies (simulate them) or train (train agents)")
    if study.policies is not None and not study.policies:
        raise ScenarioError(where("policies"), "an empty list", "at least one policy name")
    if study.metrics is not None and not study.metrics:
        raise ScenarioError(where("metrics"), "an empty list", "at least one metric")
    seeds = _seeds(study, where)
    if seeds is not None and len(set(seeds)) != len(seeds):
        dup = next(s for s in seeds if seeds.count(s) > 1)
        raise ScenarioError(where("seeds"), f"seed {dup} twice", "distinct seeds")
    if seeds is not None and not seeds:
        raise ScenarioError(where("seeds"), "an empty list", "at least one seed")
    for section in ("set", "grid"):
        for key, value in getattr(study, section).items():
            at = where(f"{section}.{key}")
            parts = key.split(".")
            if not all(parts):
                raise ScenarioError(at, repr(key), "a dotted key path such as workload.jobs")
            if key == "seed":
                raise ScenarioError(at, "the seed as an override", "the seeds key (seeds: [1, 2, 3])")
            if parts[0] == "train":
                if study.train is None:
                    raise ScenarioError(at, f"{key!r} in a study without train",
                                        "scenario keys (train.* keys need a train section)")
                if len(parts) < 2 or parts[1] not in TrainSpec.model_fields or (
                        parts[1] in ("env", "args") and len(parts) != 3) or (
                        parts[1] == "algo" and len(parts) != 2):
                    raise ScenarioError(at, repr(key), "train.algo, train.env.NAME or "
                                        "train.args.NAME")
            if section == "grid":
                if not value:
                    raise ScenarioError(at, "an empty list", "at least one value to try")
                if key in study.set:
                    raise ScenarioError(at, f"{key!r} in both set and grid", "it in one of them")
    return study, where


def is_study(path: str | os.PathLike) -> bool:
    """Whether a YAML file is a study (it names a ``scenario``) rather than a scenario."""
    try:
        raw, _ = read_scenario_dict(path)
    except InputError:
        return False
    return isinstance(raw, dict) and isinstance(raw.get("scenario"), str) and "workload" not in raw


def _seeds(study: Study, where: _Where) -> list[int] | None:
    """The seeds of ``seeds: [1, 2]``, ``seeds: 3`` or ``seeds: {start: 1, count: 10}``."""
    from pydantic import TypeAdapter

    value = study.seeds
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    try:
        if isinstance(value, dict):
            r = SeedRange.model_validate(value)
            return list(range(r.start, r.start + r.count))
        return TypeAdapter(list[Annotated[int, Field(ge=0, le=limits.INT64_MAX)]]
                           ).validate_python(value, strict=True)
    except ValidationError as err:
        def locate(path: str) -> str:
            return where("seeds", f"[{path}]") if path.isdigit() else (
                where(f"seeds.{path}") if path else where("seeds"))
        error = validation_error(err, where.source, where.lines, root=SeedRange, locate=locate)
        if not isinstance(value, dict | list | tuple):
            error = ScenarioError(where("seeds"), repr(value),
                                  "a list of seeds or {start: N, count: M}")
        raise error from None
