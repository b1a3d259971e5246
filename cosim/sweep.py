"""Studies: many runs (policies x seeds x settings, or training runs) on Ray, one table, one report.

A study file names a scenario, what to run on it, the seeds and the
settings; every (setting, seed, policy) is one run, and every run is one Ray
task (a local Ray started in this process, or a running cluster with
``--address``)::

    name: study-lublin                     # default: the file's name
    scenario: lublin256.yaml               # relative to the study file
    policies: [fcfs+easy, sjf+easy, f1+conservative]   # default: the scenario's
    seeds: [1, 2, 3, 4, 5]                 # or {start: 1, count: 10}; default: the scenario's seed
    set: {workload.jobs: 2000}             # overrides for every run (as --set)
    grid:                                  # optional: every combination of these values
      workload.estimates.model: [exact, tsafrir]
    metrics: [bsld_mean, wait_mean, utilization]   # the report's columns (summary.json keys)
    confidence: 0.95                       # of the bootstrap intervals
    bootstrap: 9999                        # resamples

A run's seed replaces the scenario's top-level ``seed`` (the generated
workload, estimate noise, faults). A *training* study has ``train:`` instead
of ``policies:``; each run is one ``python -m agents train`` run whose seed is
also the learner's, and ``train.*`` keys can be set and gridded like scenario
keys::

    train:
      algo: ppo                            # or a2c
      env: {window: [8, 2], episode_jobs: 64}              # SchedulingEnv arguments
      args: {total_steps: 20000, num_envs: 2, lr: 0.0003}  # agents.ppo.Args fields
    grid:
      train.args.lr: [0.0001, 0.0003]

The results folder (``--out``, default ``results/<name>``)::

    OUT/study.yaml            the study as resolved (every default filled in)
    OUT/study.parquet         one row per run: setting, policy, seed, every override,
                              status and error, every summary metric (schema study/1)
    OUT/report.json           mean and bootstrap interval per setting, policy and metric
    OUT/report.html, *.png    the tables and the plots across seeds
    OUT/runs/<setting>/seed-<n>/scenario.yaml, comparison.json   (as ``python -m cosim run``)
    OUT/runs/<setting>/seed-<n>/<policy>/jobs.parquet, ..., summary.json, run.json

``run.json`` records each run's status (``pending``, ``ok`` or ``error`` with
its message), the digest of what it ran and its summary. Running the same
study again skips every run whose ``run.json`` says ``ok`` for the same
digest, so an interrupted study finishes only what is missing, and a failed
run is tried again; a changed scenario or override changes the digest and
the run is redone. A run that fails is recorded with its error and does not
stop the others. Every file is written to a temporary name and renamed.

Statistics: the report gives, per setting and policy, each metric's mean over
seeds with a bias-corrected and accelerated (BCa) bootstrap confidence
interval of that mean (``scipy.stats.bootstrap``, seeded, so the report is
reproducible), and the same for each policy's difference to the first policy
paired by seed (the runs of one seed share their workload, so the paired
interval is the sharper test). With fewer than two seeds there is no
interval; with five or fewer, read intervals as rough.

Examples:
    >>> plan = plan_study("scenarios/study-lublin.yaml")     # doctest: +SKIP
    >>> len(plan.runs)                                       # doctest: +SKIP
    60
    >>> run_study("scenarios/study-lublin.yaml")             # doctest: +SKIP
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import html
import importlib.util
import inspect
import io
import itertools
import json
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cosim import records
from cosim.config import (
    Scenario,
    read_scenario_dict,
    scenario_from_dict,
    set_path,
    validation_error,
)
from cosim.errors import CosimError, InputError, ScenarioError
from cosim.runner import parse_policies, policy_dir

__all__ = ["Study", "SeedRange", "TrainSpec", "RunSpec", "StudyPlan", "load_study",
           "is_study", "validate_study", "plan_study", "run_study", "execute_run", "bootstrap_ci", "study_rows",
           "write_study_table", "summarize_study", "write_study_report", "DEFAULT_METRICS",
           "TRAIN_METRICS"]

#: The report's metrics when a study names none (keys of ``summary.json``).
DEFAULT_METRICS = ("bsld_mean", "wait_mean", "utilization")
#: ... and for training studies (learning-curve columns, see :func:`execute_run`).
TRAIN_METRICS = ("mean_return", "mean_bsld")
#: Fixed columns of ``study.parquet`` before the overrides and the metrics.
FIXED_COLUMNS = ("setting", "policy", "seed")
#: Columns of ``study.parquet`` after the overrides, before the metrics.
STATUS_COLUMNS = ("status", "error", "run_seconds", "dir")


# -----------------------------------------------------------------------------------
# 1. The study file
# -----------------------------------------------------------------------------------
class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SeedRange(_Section):
    """``seeds: {start: 1, count: 10}``: the seeds ``start .. start + count - 1``."""

    start: int = Field(1, ge=0)
    count: int = Field(..., gt=0, le=100_000)


class TrainSpec(_Section):
    """The ``train:`` section: each run trains an agent (``python -m agents train``).

    Attributes:
        algo: ``ppo`` or ``a2c``.
        env: keyword arguments of :class:`cosim.env.SchedulingEnv` (window,
            observation, reward, episode_jobs, ...).
        args: fields of :class:`agents.ppo.Args` (or ``A2CArgs``): total_steps,
            num_envs, lr, ... The seed is the run's seed.
    """

    algo: Literal["ppo", "a2c"] = "ppo"
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


def validate_study(path: str | os.PathLike) -> str:
    """Check a study and everything it names; the study resolved, as YAML, and a summary line.

    What ``python -m cosim validate STUDY`` prints.

    Raises:
        InputError: as :func:`plan_study`.
    """
    plan = plan_study(path)
    shape = _shape(plan)
    return (yaml.safe_dump(_resolved_study(plan), sort_keys=False)
            + f"# ok: a study of {len(plan.runs)} runs ({shape})\n")


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
        return TypeAdapter(list[int]).validate_python(value, strict=True)
    except ValidationError as err:
        def locate(path: str) -> str:
            return where("seeds", f"[{path}]") if path.isdigit() else (
                where(f"seeds.{path}") if path else where("seeds"))
        error = validation_error(err, where.source, where.lines, root=SeedRange, locate=locate)
        if not isinstance(value, dict | list | tuple):
            error = ScenarioError(where("seeds"), repr(value),
                                  "a list of seeds or {start: N, count: M}")
        raise error from None


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9.+_-]+", "_", text).strip("._")[:limit] or "x"


def _setting_names(grid: dict[str, list[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every combination of the grid, with a readable, stable folder name."""
    if not grid:
        return [("base", {})]
    keys = list(grid)
    # Name each key by its last part unless two keys share it.
    short = [k.split(".")[-1] for k in keys]
    names = [s if short.count(s) == 1 else k for k, s in zip(keys, short)]
    out, taken = [], set()
    for combo in itertools.product(*(grid[k] for k in keys)):
        label = ",".join(f"{_slug(n, 30)}={_slug(json.dumps(v) if not isinstance(v, str) else v)}"
                         for n, v in zip(names, combo))
        base, i = label, 2
        while label in taken:
            label, i = f"{base}~{i}", i + 1
        taken.add(label)
        out.append((label, dict(zip(keys, combo))))
    return out


def _digest(obj: Any) -> str:
    text = json.dumps(records.to_jsonable(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_study(path: str | os.PathLike, out: str | os.PathLike | None = None) -> StudyPlan:
    """Validate a study file and everything it names, and list its runs.

    Every setting's scenario is validated with its overrides, and every policy
    name (or the training section) against it, before anything runs or is
    written; an error names the study file, the line and the key that caused
    it (``set.workload.jbos``, ``grid.cluster.nodes[1]``, ``policies[2]``).

    Args:
        path: the study file.
        out: the results folder (default ``results/<name>``).

    Raises:
        InputError: a bad study, scenario, override, policy name or training option.
    """
    path = Path(path)
    study, where = load_study(path)
    base = path.resolve().parent
    scenario_path = Path(study.scenario)
    if not scenario_path.is_absolute():
        scenario_path = base / scenario_path
    if not scenario_path.is_file():
        raise InputError(where("scenario"), repr(study.scenario),
                         f"a scenario file (relative to {path.parent or '.'}/)")
    raw, lines = read_scenario_dict(scenario_path)
    scenario = scenario_from_dict(raw, str(scenario_path), lines)
    name = study.name or path.stem
    out_dir = Path(out) if out is not None else Path("results") / name
    seeds = _seeds(study, where) or [scenario.seed]
    settings = _setting_names(study.grid)
    plan = StudyPlan(study=study, path=path, name=name, out=out_dir, scenario=scenario,
                     keys=list(study.set) + list(study.grid), settings=settings, seeds=seeds)
    runs_dir = out_dir.resolve() / "runs"
    policies = list(study.policies or scenario.scheduler.policies)
    prober = _TrainProbe(study, where) if study.train is not None else None
    for label, grid_values in settings:
        values = {**study.set, **grid_values}
        scen_values = {k: v for k, v in values.items() if not k.startswith("train.")}
        for seed in seeds:
            resolved = _setting_scenario(raw, lines, scen_values, seed, scenario_path, where,
                                         grid_values, study.grid)
            scenario_dict = resolved.model_dump(mode="json")
            group = runs_dir / label / f"seed-{seed}"
            if prober is not None:
                train = _train_config(study.train, values)
                if seed == seeds[0]:
                    prober.check(train, resolved, scenario_path, scen_values, label)
                plan.runs.append(RunSpec(
                    kind="train", setting=label, seed=seed, policy=train["algo"], values=values,
                    scenario=scenario_dict, scenario_path=str(scenario_path), base_dir=str(base),
                    out_dir=str(group / train["algo"]), train=train,
                    digest=_digest({"scenario": scenario_dict, "train": train,
                                    "set": _scenario_set(scen_values, seed)})))
                continue
            for i, name_ in enumerate(policies):
                try:
                    spec = parse_policies([name_], resolved, source="--policy")[0]
                except InputError as exc:
                    at = (where("policies", f"[{i}]") if study.policies
                          else f"{scenario_path}: scheduler.policies[{i}]")
                    raise _relocate(exc, at) from None
                plan.runs.append(RunSpec(
                    kind="policy", setting=label, seed=seed, policy=spec.name, values=values,
                    scenario=scenario_dict, scenario_path=str(scenario_path), base_dir=str(base),
                    out_dir=str(group / policy_dir(spec.name)),
                    digest=_digest({"scenario": scenario_dict, "policy": spec.name})))
    dirs = [r.out_dir for r in plan.runs]
    if len(set(dirs)) != len(dirs):
        dup = next(d for d in dirs if dirs.count(d) > 1)
        raise ScenarioError(where("policies"), f"two policies with the folder {Path(dup).name!r}",
                            "policy names that differ in more than '/' and ':'")
    return plan


def _setting_scenario(raw: dict, lines: dict[str, int], values: dict[str, Any], seed: int,
                      scenario_path: Path,
                      where: _Where, grid_values: dict[str, Any],
                      grid: dict[str, list[Any]]) -> Scenario:
    """The scenario of one setting and seed; errors point at the override that caused them."""
    def at(key: str, rest: str = "") -> str:
        if key in grid_values:
            index = next(i for i, v in enumerate(grid[key]) if v == grid_values[key])
            return where(f"grid.{key}", f"[{index}]{rest}")
        return where(f"set.{key}", rest)

    scen = copy.deepcopy(raw)
    for key, value in values.items():
        # A mapping is merged into the section it names, key by key (so that
        # `workload: {estimates: {model: x}}` keeps the workload's other keys).
        for path, leaf in _leaves(key, value):
            set_path(scen, path, copy.deepcopy(leaf), where=at(key))
    scen["seed"] = seed

    def locate(path: str) -> str | None:
        for key in values:
            if path == key or path.startswith(key + "."):
                return at(key, path[len(key):])
        return None

    try:
        return Scenario.model_validate(scen)
    except ValidationError as err:
        raise validation_error(err, str(scenario_path), lines, locate=locate) from None


def _leaves(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(f"{key}.{k}", v)
    else:
        yield key, value


def _train_config(train: TrainSpec, values: dict[str, Any]) -> dict[str, Any]:
    cfg = {"algo": train.algo, "env": copy.deepcopy(train.env), "args": copy.deepcopy(train.args)}
    for key, value in values.items():
        if key.startswith("train."):
            set_path(cfg, key[len("train."):], copy.deepcopy(value))
    return cfg


def _scenario_set(values: dict[str, Any], seed: int) -> list[str]:
    """Scenario overrides as ``--set`` strings (JSON is YAML, so values round-trip)."""
    return [f"{k}={json.dumps(v)}" for k, v in values.items()] + [f"seed={seed}"]


class _TrainProbe:
    """Checks a training setting before anything runs: names, arguments, an environment."""

    def __init__(self, study: Study, where: _Where):
        self.study, self.where = study, where

    def _at(self, section: str, name: str) -> str:
        key = f"train.{section}.{name}"
        for src in ("grid", "set"):
            if key in getattr(self.study, src):
                return self.where(f"{src}.{key}")
        return self.where(key)

    def check(self, train: dict[str, Any], scenario: Scenario, scenario_path: Path,
              values: dict[str, Any], label: str) -> None:
        from dataclasses import fields

        from cosim.env import SchedulingEnv

        args_cls = _args_class(train["algo"])
        arg_names = [f.name for f in fields(args_cls)]
        env_names = [p for p in inspect.signature(SchedulingEnv.__init__).parameters
                     if p not in ("self", "scenario", "workload", "base_dir")]
        for section, names, given in (("args", arg_names, train["args"]),
                                      ("env", env_names, train["env"])):
            for key in given:
                if key in ("seed", "ray") and section == "args":
                    raise ScenarioError(self._at(section, key), f"args.{key}",
                                        "the seeds key for seeds; no Ray inside a sweep's runs"
                                        if key == "seed" else "no Ray inside a sweep's runs "
                                        "(each run is already a Ray task)")
                if key not in names:
                    near = difflib.get_close_matches(key, names, n=1)
                    raise ScenarioError(self._at(section, key), f"unknown key {key!r}",
                                        f"a field of {args_cls.__name__}" if section == "args"
                                        else "a keyword argument of cosim.env.SchedulingEnv",
                                        f"did you mean {near[0]!r}?" if near else "")
        try:
            args = args_cls(**train["args"])
            args.validate()
        except InputError as exc:
            name = exc.where.removeprefix("args.").split("/")[0]
            raise _relocate(exc, self._at("args", name)) from None
        except (TypeError, ValueError) as exc:
            raise ScenarioError(self.where("train.args"), str(exc), "valid hyper-parameters") from None
        try:
            env = SchedulingEnv(scenario, base_dir=scenario_path.parent, **_env_kwargs(train["env"]))
        except InputError as exc:
            at = self._at("env", exc.where) if exc.where in train["env"] else (
                f"{self.where('train.env')} (setting {label}): {exc.where}")
            raise _relocate(exc, at) from None
        except (TypeError, ValueError) as exc:
            raise ScenarioError(f"{self.where('train.env')} (setting {label})", str(exc),
                                "valid SchedulingEnv arguments") from None
        env.close()


def _args_class(algo: str):
    if algo == "a2c":
        from agents.a2c import A2CArgs

        return A2CArgs
    from agents.ppo import Args

    return Args


def _env_kwargs(env: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(env)
    if isinstance(kwargs.get("window"), list):
        kwargs["window"] = tuple(kwargs["window"])
    return kwargs


# -----------------------------------------------------------------------------------
# 2. One run (in a Ray worker, or in this process)
# -----------------------------------------------------------------------------------
def execute_run(spec: RunSpec, driver_node: str | None = None) -> dict[str, Any]:
    """Run one study run and return its record; never raises for a failing run.

    A policy run is :func:`cosim.runner.run_policy` (the same folder as
    ``python -m cosim run`` writes per policy). A training run is
    :func:`agents.ppo.train` (or A2C) with ``resume=True``, so an
    interrupted training run continues from its last checkpoint; its summary
    holds the learning curve's columns averaged over the last 10 % of updates
    (at least one), plus ``updates``, ``global_step`` and ``train_seconds``.

    On a Ray node other than ``driver_node`` the run writes to a temporary
    folder and returns the files' bytes, so a cluster needs no shared file
    system for results.

    Returns:
        ``{"status": "ok" | "error", "summary", "error", "traceback", "seconds",
        "host", "files"}``.
    """
    t0 = time.perf_counter()
    record: dict[str, Any] = {"status": "ok", "summary": None, "error": "", "traceback": "",
                              "host": socket.gethostname(), "files": None}
    try:
        remote = driver_node is not None and _node_id() != driver_node
        target = Path(tempfile.mkdtemp(prefix="cosim-run-")) if remote else Path(spec.out_dir)
        try:
            run = _train_run if spec.kind == "train" else _policy_run
            record["summary"] = run(spec, target)
            if remote:
                record["files"] = {str(p.relative_to(target)): p.read_bytes()
                                   for p in sorted(target.rglob("*")) if p.is_file()}
        finally:
            if remote:
                shutil.rmtree(target, ignore_errors=True)
    except CosimError as exc:
        record.update(status="error", error=str(exc))
    except Exception as exc:   # a bug or a broken input: keep the traceback for run.json
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        record.update(status="error", error=f"{type(exc).__name__}: {first}".rstrip(": "),
                      traceback=traceback.format_exc())
    record["seconds"] = time.perf_counter() - t0
    return record


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _policy_run(spec: RunSpec, target: Path) -> dict[str, Any]:
    from cosim.runner import run_policy

    scenario = scenario_from_dict(spec.scenario, spec.scenario_path)
    return run_policy(scenario, spec.policy, target, base_dir=spec.base_dir)


def _train_run(spec: RunSpec, target: Path) -> dict[str, Any]:
    import functools

    from agents.rl_policy import make_env

    cfg = spec.train
    scen_values = {k: v for k, v in spec.values.items() if not k.startswith("train.")}
    env_config = {"scenario": spec.scenario_path, "scenario_set": _scenario_set(scen_values, spec.seed),
                  **cfg["env"]}
    probe = make_env(env_config)
    # As `python -m agents train`: pin the time scale of the training workload.
    env_config.setdefault("max_time", float(probe.unwrapped.max_time))
    probe.close()
    args = _args_class(cfg["algo"])(**{**cfg["args"], "seed": spec.seed})
    if cfg["algo"] == "a2c":
        from agents.a2c import train
    else:
        from agents.ppo import train
    result = train(functools.partial(make_env, env_config), args, out_dir=target, resume=True,
                   env_config=env_config)
    curve = result.curve
    tail = curve[-max(1, math.ceil(len(curve) / 10)):] if curve else []
    summary: dict[str, Any] = {}
    skip = {"update", "global_step", "lr", "fps", "elapsed_s", "epochs"}
    for key in (curve[0] if curve else {}):
        if key in skip:
            continue
        vals = np.array([row[key] for row in tail], dtype=float)
        vals = vals[np.isfinite(vals)]
        summary[key] = float(vals.mean()) if len(vals) else None
    summary.update(updates=result.update, global_step=result.global_step,
                   train_seconds=curve[-1]["elapsed_s"] if curve else 0.0,
                   finished=bool(result.finished))
    return summary


# -----------------------------------------------------------------------------------
# 3. Executing a plan: skip what is done, run the rest, record every run
# -----------------------------------------------------------------------------------
def _read_record(spec: RunSpec) -> dict[str, Any] | None:
    path = Path(spec.out_dir) / "run.json"
    if not path.is_file():
        return None
    try:
        doc = records.read_json(path)
    except InputError:
        return None
    return doc if isinstance(doc, dict) else None


def _finished(spec: RunSpec) -> dict[str, Any] | None:
    doc = _read_record(spec)
    if doc and doc.get("status") == "ok" and doc.get("digest") == spec.digest:
        return doc
    return None


def _prepare(spec: RunSpec) -> None:
    """Make the run's folder ready: a training run of the same digest keeps its checkpoints."""
    out = Path(spec.out_dir)
    doc = _read_record(spec)
    keep = spec.kind == "train" and doc is not None and doc.get("digest") == spec.digest
    if out.exists() and not keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    records.write_json_atomic(out / "run.json", _record_doc(spec, {"status": "pending"}))


def _record_doc(spec: RunSpec, result: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "run/1", "status": result.get("status"), "digest": spec.digest,
            "kind": spec.kind, "setting": spec.setting, "seed": spec.seed, "policy": spec.policy,
            "values": spec.values, "error": result.get("error", ""),
            "traceback": result.get("traceback", ""), "seconds": result.get("seconds"),
            "host": result.get("host"), "finished_at": time.time(),
            "summary": result.get("summary")}


def _store(spec: RunSpec, result: dict[str, Any]) -> dict[str, Any]:
    """Write a finished run's files (from a remote node) and its ``run.json``."""
    out = Path(spec.out_dir)
    for rel, data in (result.get("files") or {}).items():
        records.write_bytes_atomic(out / rel, data)
    doc = _record_doc(spec, result)
    records.write_json_atomic(out / "run.json", doc)
    return doc


@dataclass
class _Progress:
    """Runs done, running and failed, on a tqdm bar (stderr)."""

    total: int
    quiet: bool
    done: int = 0
    failed: int = 0
    running: int = 0
    bar: Any = None

    def __post_init__(self):
        if not self.quiet and self.total:
            from cosim.cli import progress_bar as tqdm  # no \r frames in logs

            self.bar = tqdm(total=self.total, unit="run", desc="runs", file=sys.stderr,
                            dynamic_ncols=True)
            self._show()

    def _show(self):
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.running} running, {self.failed} failed",
                                     refresh=False)

    def set_running(self, n: int) -> None:
        """Runs in flight now."""
        self.running = n
        self._show()

    def finished(self, ok: bool) -> None:
        """One more run finished (``ok`` or failed)."""
        self.done += 1
        self.failed += not ok
        if self.bar is not None:
            self.bar.update(1)
        self._show()

    def close(self) -> None:
        """Remove the bar."""
        if self.bar is not None:
            self.bar.close()


def _serial(specs: Sequence[RunSpec], progress: _Progress
            ) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    for spec in specs:
        _prepare(spec)
        progress.set_running(1)
        yield spec, execute_run(spec)
    progress.set_running(0)


def _on_ray(specs: Sequence[RunSpec], session, workers: int, progress: _Progress
            ) -> Iterator[tuple[RunSpec, dict[str, Any]]]:
    """Each run one Ray task; ``workers`` run at once and as many wait in Ray's queue, so
    that a worker finds its next run there while this process records the last one."""
    ray = session.ray
    task = ray.remote(num_cpus=1, max_retries=1)(execute_run)
    driver = ray.get_runtime_context().get_node_id()
    todo = list(reversed(specs))
    inflight: dict[Any, RunSpec] = {}
    try:
        while todo or inflight:
            while todo and len(inflight) < 2 * workers:
                spec = todo.pop()
                _prepare(spec)
                inflight[task.remote(spec, driver)] = spec
            progress.set_running(min(workers, len(inflight)))
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                spec = inflight.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:   # the worker died (memory, a signal)
                    text = str(exc).strip().splitlines()
                    result = {"status": "error", "seconds": None, "host": None,
                              "error": f"{type(exc).__name__}: {text[0] if text else ''}"}
                progress.set_running(min(workers, len(inflight)))
                yield spec, result
    finally:
        for ref in inflight:
            ray.cancel(ref, force=True)


def _prepare_models(plan: StudyPlan, pending: Sequence[RunSpec]) -> None:
    """Train (or find in the cache) the predictors pending runs need, once, here."""
    from cosim.policies import parse_policy
    from cosim.runner import prepare_models

    seen = set()
    for spec in pending:
        if spec.kind != "policy":
            continue
        scenario = scenario_from_dict(spec.scenario, spec.scenario_path)
        pred = parse_policy(spec.policy).resolved(scenario.predictor.runtime,
                                                 scenario.predictor.kill.enabled).predictor
        key = json.dumps(spec.scenario.get("predictor"), sort_keys=True) + json.dumps(
            spec.scenario.get("workload"), sort_keys=True)
        if pred in ("xgboost", "rnn") and (key, pred) not in seen:
            seen.add((key, pred))
            if scenario.prediction_service.backend != "http":
                prepare_models(scenario, [spec.policy], spec.base_dir,
                               echo=lambda m: print(m, file=sys.stderr))


def run_study(path: str | os.PathLike, *, out: str | os.PathLike | None = None,
              address: str | None = None, workers: int | None = None, serial: bool = False,
              dry_run: bool = False, quiet: bool = False,
              echo: Callable[[str], None] | None = print) -> int:
    """Run a study: every missing run on Ray, then ``study.parquet`` and the report.

    Args:
        path: the study file.
        out: the results folder (default ``results/<name>``).
        address: None (a local Ray in this process), ``"auto"`` or ``"HOST:PORT"``.
            A Ray that is already initialized (a notebook, the tests) is used as it is.
        workers: runs at once (default: the CPUs of the Ray cluster; of a local
            Ray, the machine's cores).
        serial: run in this process, one run after another, without Ray (also what
            happens, with a note, when Ray is not installed and no address is given).
        dry_run: check the study and say what would run; run and write nothing.
        quiet: no progress bar.
        echo: where the summary lines go (None: nowhere).

    Returns:
        0 when every run succeeded, 1 when some failed (they are in the table
        and the report with their errors).

    Raises:
        InputError: a bad study (nothing is run or written).
        KeyboardInterrupt: interrupted; finished runs are kept for the next run.
    """
    say = echo or (lambda _m: None)
    if workers is not None and workers < 1:
        raise InputError("--workers", str(workers), "a positive number of runs at once")
    plan = plan_study(path, out)
    out_dir = plan.out
    done: dict[str, dict[str, Any]] = {}
    pending = []
    for spec in plan.runs:
        doc = _finished(spec)
        if doc is not None:
            done[spec.out_dir] = doc
        else:
            pending.append(spec)
    shape = _shape(plan)
    if dry_run:
        say(f"study {plan.name}: {len(plan.runs)} runs ({shape}); {len(done)} finished earlier, "
            f"{len(pending)} to run; results in {out_dir}/")
        for label, values in plan.settings:
            say(f"  setting {label}: " + (", ".join(f"{k}={v}" for k, v in values.items())
                                         or "no grid"))
        return 0
    # Connect first, then write: a wrong address leaves nothing behind.
    session = None
    how = "in this process"
    if pending and not serial and address is None and importlib.util.find_spec("ray") is None:
        print("note: Ray is not installed (pip install -e \".[ray]\"); running the runs one "
              "after another in this process", file=sys.stderr)
        serial = True
    if pending and not serial:
        from cosim.distributed import ray_session

        session = ray_session(address, num_cpus=workers, what="python -m cosim sweep")
        workers = workers or session.cpus
        how = (f"on {'a local Ray' if session.address is None else 'Ray at ' + session.address}"
               f" ({session.cpus} CPUs, {workers} at once)")
    say(f"study {plan.name}: {len(plan.runs)} runs ({shape}); {len(done)} finished earlier, "
        f"{len(pending)} to run{' ' + how if pending else ''}")
    try:
        if pending and plan.kind == "policy":
            _prepare_models(plan, pending)
        out_dir.mkdir(parents=True, exist_ok=True)
        records.write_bytes_atomic(out_dir / "study.yaml", yaml.safe_dump(
            _resolved_study(plan), sort_keys=False))
        for spec in plan.runs:
            scen = spec.group_dir / "scenario.yaml"
            if spec.kind == "policy" and not scen.exists():
                records.write_bytes_atomic(scen, yaml.safe_dump(spec.scenario, sort_keys=False))
    except BaseException:
        if session is not None:
            session.close()
        raise
    progress = _Progress(len(pending), quiet)
    t0 = time.perf_counter()
    try:
        results = (_serial(pending, progress) if session is None
                   else _on_ray(pending, session, workers, progress))
        for spec, result in results:
            done[spec.out_dir] = _store(spec, result)
            progress.finished(result["status"] == "ok")
    except KeyboardInterrupt:
        progress.close()
        # Count from the run records: the interrupt may have come after a record was written.
        finished = sum(1 for r in plan.runs if _finished(r) is not None)
        print(f"interrupted: {finished} of {len(plan.runs)} runs finished; run the same command "
              "again to finish the rest", file=sys.stderr)
        raise
    finally:
        progress.close()
        if session is not None:
            session.close()
    wall = time.perf_counter() - t0
    _write_comparisons(plan, done)
    rows = study_rows(plan, done)
    stats = summarize_study(plan, rows)    # checks the metric names before writing
    write_study_table(out_dir / "study.parquet", plan, rows)
    records.write_json_atomic(out_dir / "report.json", {
        "schema": "study-report/1", "study": plan.name, "confidence": plan.study.confidence,
        "bootstrap": plan.study.bootstrap, "method": "BCa", "metrics": list(plan.metrics),
        "rows": stats})
    failed = [r for r in rows if r["status"] != "ok"]
    if pending:
        say(f"{len(pending)} runs in {wall:.1f} s ({wall / len(pending):.2f} s a run)")
    say(_stats_table(plan, stats))
    for r in failed[:5]:
        say(f"failed: {r['dir']}: {r['error']}")
    if len(failed) > 5:
        say(f"... and {len(failed) - 5} more failed runs (study.parquet, column error)")
    report = write_study_report(out_dir, plan, rows, stats) if plan.study.plots else None
    say(f"results: {out_dir}/  table: {out_dir / 'study.parquet'}"
        + (f"  report: {report}" if report else ""))
    return 1 if failed else 0


def _shape(plan: StudyPlan) -> str:
    """``3 policies x 10 seeds x 2 settings``."""
    return " x ".join([_count(len(plan.policies), "algorithm" if plan.kind == "train"
                              else "policy"), _count(len(plan.seeds), "seed"),
                       _count(len(plan.settings), "setting")])


def _count(n: int, word: str) -> str:
    plural = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{n} {word if n == 1 else plural}"


def _resolved_study(plan: StudyPlan) -> dict[str, Any]:
    doc = plan.study.model_dump(mode="json")
    doc.update(name=plan.name, seeds=plan.seeds, policies=plan.policies if plan.kind == "policy"
               else None, metrics=list(plan.metrics),
               settings=[{"dir": label, "values": values} for label, values in plan.settings])
    return doc


def _write_comparisons(plan: StudyPlan, done: dict[str, dict[str, Any]]) -> None:
    """``comparison.json`` in every (setting, seed) folder whose policy runs all succeeded,
    so that ``python -m cosim report`` works on it as on a ``cosim run`` folder."""
    if plan.kind != "policy":
        return
    groups: dict[Path, list[RunSpec]] = {}
    for spec in plan.runs:
        groups.setdefault(spec.group_dir, []).append(spec)
    for group, specs in groups.items():
        docs = [done.get(s.out_dir) for s in specs]
        if not all(d is not None and d["status"] == "ok" for d in docs):
            continue
        records.write_json_atomic(group / "comparison.json", {
            "schema": "comparison/1", "scenario": specs[0].scenario.get("name"),
            "policies": [{"policy": s.policy, "dir": Path(s.out_dir).name} for s in specs],
            "summaries": {s.policy: d["summary"] for s, d in zip(specs, docs)}})


# -----------------------------------------------------------------------------------
# 4. The table and the statistics
# -----------------------------------------------------------------------------------
def study_rows(plan: StudyPlan, done: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per run of the plan (missing runs count as failed).

    Scalar summary values become columns; a summary value that is a mapping
    of scalars (``workload_cleaning``) becomes ``key.subkey`` columns.
    """
    out_root = plan.out.resolve()
    rows = []
    for spec in plan.runs:
        doc = done.get(spec.out_dir) or {"status": "error", "error": "not run"}
        row: dict[str, Any] = {"setting": spec.setting, "policy": spec.policy, "seed": spec.seed}
        for key in plan.keys:
            row[key] = spec.values.get(key)
        row.update(status=doc.get("status"), error=doc.get("error") or "",
                   run_seconds=doc.get("seconds"),
                   dir=str(Path(spec.out_dir).relative_to(out_root)))
        for key, value in (doc.get("summary") or {}).items():
            name = key if key not in row else f"summary.{key}"
            if isinstance(value, dict):
                for sub, v in value.items():
                    if v is None or isinstance(v, bool | int | float | str):
                        row[f"{name}.{sub}"] = v
            elif value is None or isinstance(value, bool | int | float | str):
                row[name] = value
        rows.append(row)
    return rows


def _column(values: list[Any]):
    """A pyarrow array of one column: int, float, bool or string (mixed: the YAML text)."""
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, type=pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) \
            and len(present) == len(values):
        return pa.array(values, type=pa.int64())
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.array([math.nan if v is None else float(v) for v in values], type=pa.float64())
    if all(v is None or isinstance(v, str) for v in values):
        return pa.array(values, type=pa.string())
    return pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v))
                     for v in values], type=pa.string())


def write_study_table(path: str | os.PathLike, plan: StudyPlan,
                      rows: list[dict[str, Any]]) -> Path:
    """Write ``study.parquet`` (schema ``study/1``), atomically.

    Columns: ``setting``, ``policy``, ``seed``, one per override key path,
    ``status``, ``error``, ``run_seconds``, ``dir`` (relative to the results
    folder), then every summary metric in name order. A failed run has
    nulls (NaN) for its metrics.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    head = [*FIXED_COLUMNS, *plan.keys, *STATUS_COLUMNS]
    metric_names = sorted({k for r in rows for k in r} - set(head))
    names = head + metric_names
    arrays = [_column([r.get(n) for r in rows]) for n in names]
    meta = {"cosim.schema": "study/1", "cosim.study": json.dumps(
        {"name": plan.name, "scenario": plan.study.scenario, "kind": plan.kind,
         "keys": plan.keys, "seeds": plan.seeds})}
    table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(meta)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return records.write_bytes_atomic(path, buf.getvalue())


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, confidence: float = 0.95,
                 resamples: int = 9999, seed: int = 0) -> tuple[float, float, float]:
    """Mean of ``values`` and a BCa bootstrap confidence interval of it.

    Non-finite values are left out. With fewer than two values there is no
    interval (NaN bounds); when every value is the same the interval is that
    value. Seeded, so the same values always give the same interval.

    Examples:
        >>> bootstrap_ci([2.0, 2.0, 2.0])
        (2.0, 2.0, 2.0)
        >>> m, lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        >>> m, lo < m < hi
        (3.5, True)
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan, math.nan
    if np.all(x == x[0]):
        return mean, mean, mean
    from scipy.stats import bootstrap

    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=resamples,
                    method="BCa", rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):   # BCa undefined: percentile instead
        res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=resamples,
                        method="percentile", rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return mean, lo, hi


def summarize_study(plan: StudyPlan, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting, policy and metric: runs, mean, interval, and the paired difference
    to the first policy (by seed).

    Raises:
        ScenarioError: a metric of the study is in no run's summary (the
            nearest names are suggested).
    """
    ok = [r for r in rows if r["status"] == "ok"]
    numeric = sorted({k for r in ok for k, v in r.items()
                      if isinstance(v, int | float) and not isinstance(v, bool)}
                     - {"seed", "run_seconds"})
    if ok:
        for i, metric in enumerate(plan.metrics):
            if metric not in numeric:
                near = difflib.get_close_matches(metric, numeric, n=1)
                where = (f"{plan.path}: metrics[{i}]" if plan.study.metrics
                         else f"{plan.path}: metrics (default)")
                raise ScenarioError(where, repr(metric), "a numeric summary metric such as "
                                    + ", ".join(DEFAULT_METRICS if plan.kind == "policy"
                                                else TRAIN_METRICS),
                                    f"did you mean {near[0]!r}?" if near else "")
    conf, n_boot = plan.study.confidence, plan.study.bootstrap
    policies = plan.policies
    baseline = policies[0]
    out = []
    for label, _ in plan.settings:
        by_policy = {p: {r["seed"]: r for r in rows if r["setting"] == label and r["policy"] == p}
                     for p in policies}
        for policy in policies:
            runs = by_policy[policy]
            good = {s: r for s, r in runs.items() if r["status"] == "ok"}
            for metric in plan.metrics:
                vals = [_num(r.get(metric)) for r in good.values()]
                mean, lo, hi = bootstrap_ci(vals, confidence=conf, resamples=n_boot)
                row = {"setting": label, "policy": policy, "metric": metric,
                       "runs": len(runs), "ok": len(good),
                       "n": int(np.isfinite(np.array(vals, dtype=float)).sum()),
                       "mean": mean, "low": lo, "high": hi,
                       "std": float(np.nanstd(vals, ddof=1)) if len(vals) > 1 else math.nan,
                       "baseline": baseline}
                if policy != baseline:
                    base = by_policy[baseline]
                    diffs = [_num(r.get(metric)) - _num(base[s].get(metric))
                             for s, r in good.items()
                             if s in base and base[s]["status"] == "ok"]
                    d, dlo, dhi = bootstrap_ci(diffs, confidence=conf, resamples=n_boot)
                    row.update(diff_mean=d, diff_low=dlo, diff_high=dhi)
                out.append(row)
    return out


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def _fmt(v: float) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}" if a >= 0.001 or v == 0 else f"{v:.2e}"


def _ci_text(mean: float, lo: float, hi: float) -> str:
    if math.isfinite(lo):
        return f"{_fmt(mean)} [{_fmt(lo)}, {_fmt(hi)}]"
    return _fmt(mean)


def _stats_table(plan: StudyPlan, stats: list[dict[str, Any]]) -> str:
    """The terminal table: per setting, one row per policy, mean [interval] per metric."""
    pct = f"{plan.study.confidence * 100:g}%"
    blocks = []
    for label, values in plan.settings:
        rows = [s for s in stats if s["setting"] == label]
        header = ["policy", "runs"] + [f"{m} ({pct} CI)" for m in plan.metrics]
        table = []
        for policy in plan.policies:
            cells = {s["metric"]: s for s in rows if s["policy"] == policy}
            first = next(iter(cells.values()))
            table.append([policy, f"{first['ok']}/{first['runs']}"]
                         + [_ci_text(cells[m]["mean"], cells[m]["low"], cells[m]["high"])
                            for m in plan.metrics])
        widths = [max(len(r[i]) for r in [header] + table) for i in range(len(header))]
        lines = []
        if len(plan.settings) > 1 or values:
            lines.append(f"setting {label}")
        lines.append("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                               for i, (h, w) in enumerate(zip(header, widths))))
        lines.append("  ".join("-" * w for w in widths))
        for r in table:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# -----------------------------------------------------------------------------------
# 5. The report: tables and plots across seeds
# -----------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)   # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def _plot_metric(plan: StudyPlan, rows: list[dict[str, Any]], stats: list[dict[str, Any]],
                 metric: str, path: Path) -> None:
    """One panel per setting: each seed's value (a dot, seeds joined across policies),
    and the mean with its interval."""
    plt = _pyplot()
    settings = [label for label, _ in plan.settings]
    policies = plan.policies
    ncols = min(3, len(settings))
    nrows = math.ceil(len(settings) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False,
                             sharey=True)
    x = np.arange(len(policies))
    for k, label in enumerate(settings):
        ax = axes[k // ncols][k % ncols]
        for seed in plan.seeds:
            ys = [next((_num(r.get(metric)) for r in rows if r["setting"] == label
                        and r["policy"] == p and r["seed"] == seed and r["status"] == "ok"),
                       math.nan) for p in policies]
            ax.plot(x, ys, color="#bbbbbb", lw=0.8, marker="o", ms=3, zorder=1)
        for i, p in enumerate(policies):
            s = next(s for s in stats if s["setting"] == label and s["policy"] == p
                     and s["metric"] == metric)
            if math.isfinite(s["low"]):
                ax.errorbar([i], [s["mean"]], yerr=[[s["mean"] - s["low"]], [s["high"] - s["mean"]]],
                            fmt="D", color="#c44e52", capsize=4, zorder=3)
            elif math.isfinite(s["mean"]):
                ax.plot([i], [s["mean"]], "D", color="#c44e52", zorder=3)
        ax.set_xticks(x, policies, rotation=20, ha="right", fontsize=8)
        if len(settings) > 1:
            ax.set_title(label, fontsize=9)
        if k % ncols == 0:
            ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
    for k in range(len(settings), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle(f"{metric}: seeds (grey, joined by seed) and mean with "
                 f"{plan.study.confidence * 100:g}% CI (red)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def _plot_curves(plan: StudyPlan, rows: list[dict[str, Any]], path: Path) -> bool:
    """Training studies: mean return against steps per setting, mean over seeds and range."""
    import csv

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    drawn = False
    for k, (label, _) in enumerate(plan.settings):
        curves = []
        for r in rows:
            f = plan.out / r["dir"] / "curve.csv"
            if r["setting"] != label or r["status"] != "ok" or not f.is_file():
                continue
            with open(f, newline="", encoding="utf-8") as fh:
                pts = [(float(row["global_step"]), float(row["mean_return"] or "nan"))
                       for row in csv.DictReader(fh)]
            if pts:
                curves.append(np.array(pts))
        if not curves:
            continue
        n = min(len(c) for c in curves)
        steps = curves[0][:n, 0]
        ys = np.stack([c[:n, 1] for c in curves])
        color = plt.get_cmap("tab10")(k % 10)
        with warnings.catch_warnings():   # updates where no episode ended yet: NaN, not drawn
            warnings.simplefilter("ignore", RuntimeWarning)
            ax.plot(steps, np.nanmean(ys, axis=0), color=color,
                    label=f"{label} ({len(curves)} seeds)")
            ax.fill_between(steps, np.nanmin(ys, axis=0), np.nanmax(ys, axis=0), color=color,
                            alpha=0.2)
        drawn = True
    if drawn:
        ax.set_xlabel("steps")
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return drawn


def write_study_report(out_dir: str | os.PathLike, plan: StudyPlan, rows: list[dict[str, Any]],
                       stats: list[dict[str, Any]]) -> Path:
    """Write ``report.html`` and its PNGs: per-setting tables of means with intervals,
    paired differences to the first policy, failed runs, and the plots across seeds."""
    out = Path(out_dir)
    images = []

    def add(fname: str, caption: str, draw) -> None:
        tmp = out / f".{fname}.tmp.png"
        try:
            if draw(tmp) is not False:
                os.replace(tmp, out / fname)
                images.append((fname, caption))
        finally:
            tmp.unlink(missing_ok=True)

    for metric in plan.metrics:
        add(f"metric_{_slug(metric)}.png", f"{metric} across seeds",
            lambda p, m=metric: _plot_metric(plan, rows, stats, m, p))
    if plan.kind == "train":
        add("learning_curves.png", "Learning curves: mean over seeds, band from min to max",
            lambda p: _plot_curves(plan, rows, p))
    pct = f"{plan.study.confidence * 100:g}%"
    parts = [f"<h1>study {html.escape(plan.name)}</h1>"]
    if plan.study.description:
        parts.append(f"<p>{html.escape(plan.study.description)}</p>")
    failed = [r for r in rows if r["status"] != "ok"]
    parts.append(f"<p>Scenario <code>{html.escape(plan.study.scenario)}</code>; "
                 f"{len(rows)} runs ({len(rows) - len(failed)} ok, {len(failed)} failed); "
                 f"seeds {html.escape(', '.join(map(str, plan.seeds)))}. Means over seeds with "
                 f"{pct} BCa bootstrap confidence intervals ({plan.study.bootstrap} resamples); "
                 f"&Delta; is the difference to {html.escape(plan.policies[0])} on the same "
                 "seeds, with its interval. One row per run: <code>study.parquet</code>.</p>")
    if plan.study.set:
        parts.append("<p>For every run: " + html.escape(", ".join(
            f"{k} = {v}" for k, v in plan.study.set.items())) + "</p>")
    for label, values in plan.settings:
        if values:
            parts.append(f"<h2>setting {html.escape(label)}</h2><p>" + html.escape(", ".join(
                f"{k} = {v}" for k, v in values.items())) + "</p>")
        head = "".join(f"<th>{html.escape(m)}</th><th>&Delta; {html.escape(m)}</th>"
                       for m in plan.metrics)
        body = []
        for policy in plan.policies:
            cells = {s["metric"]: s for s in stats if s["setting"] == label and s["policy"] == policy}
            first = next(iter(cells.values()))
            tds = ""
            for m in plan.metrics:
                s = cells[m]
                diff = (_ci_text(s["diff_mean"], s["diff_low"], s["diff_high"])
                        if "diff_mean" in s else "&ndash;")
                tds += f"<td>{_ci_text(s['mean'], s['low'], s['high'])}</td><td>{diff}</td>"
            body.append(f"<tr><th>{html.escape(policy)}</th><td>{first['ok']}/{first['runs']}"
                        f"</td>{tds}</tr>")
        parts.append(f"<table><tr><th>policy</th><th>runs ok</th>{head}</tr>"
                     + "".join(body) + "</table>")
    if failed:
        items = "".join(f"<li><code>{html.escape(r['dir'])}</code>: {html.escape(r['error'])}</li>"
                        for r in failed)
        parts.append(f"<h2>Failed runs</h2><ul>{items}</ul>")
    parts.append("<h2>Figures</h2>" + "".join(
        f'<figure><img src="{html.escape(src)}" alt="{html.escape(cap)}">'
        f"<figcaption>{html.escape(cap)}</figcaption></figure>" for src, cap in images))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>study {html.escape(plan.name)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1200px; }}
table {{ border-collapse: collapse; font-size: 0.9em; margin-bottom: 1em; }}
th, td {{ border: 1px solid #ccc; padding: 2px 8px; text-align: right; }}
tr th:first-child {{ text-align: left; font-family: monospace; }}
img {{ max-width: 100%; }}
figcaption {{ font-size: 0.85em; color: #555; }}
</style></head>
<body>
{chr(10).join(parts)}
</body></html>
"""
    return records.write_bytes_atomic(out / "report.html", page)
