"""A study's plan: settings x seeds x policies (or training runs), each with its digest.

:func:`plan_study` resolves every run's scenario (with the file's errors),
checks a training study's env and learner arguments by building one probe
environment per setting, and names each run's folder.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agents.registry import learner
from cosim import limits, records
from cosim.compose import parse_policies, policy_dir
from cosim.config import (
    Scenario,
    read_scenario_dict,
    scenario_from_dict,
    set_path,
    validation_error,
)
from cosim.errors import InputError, ScenarioError, did_you_mean
from cosim.studies.schema import (
    RunSpec,
    Study,
    StudyPlan,
    TrainSpec,
    _relocate,
    _seeds,
    _Where,
    load_study,
)

__all__ = ["plan_study", "validate_study"]

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


def _check_metrics(names: tuple[str, ...], where) -> None:
    """Refuse a report metric no run's summary can hold, before any run."""
    from cosim.compose.run import summary_metric_names

    known = summary_metric_names()
    for i, metric in enumerate(names):
        if metric not in known:
            raise ScenarioError(where("metrics", f"[{i}]"), repr(metric),
                                "a numeric summary metric such as bsld_mean, wait_mean, "
                                "utilization (see the metrics reference)",
                                did_you_mean(metric, sorted(known)))


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
    policies = list(study.policies or scenario.scheduler.policies)
    # Counted before the grid is expanded: a grid of millions is refused at once.
    runs = len(seeds) * (1 if study.train is not None else len(policies))
    for values in study.grid.values():
        runs *= len(values)
    limits.STUDY_RUNS.check(runs, f"{path}: the study's runs (grid x seeds x policies)")
    if study.metrics and study.train is None:
        _check_metrics(study.metrics, where)
    settings = _setting_names(study.grid)
    plan = StudyPlan(study=study, path=path, name=name, out=out_dir, scenario=scenario,
                     keys=list(study.set) + list(study.grid), settings=settings, seeds=seeds)
    runs_dir = out_dir.resolve() / "runs"
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
        from cosim.env.spec import EnvSpec

        args_cls = learner(train["algo"], where="train.algo").args_class()
        arg_names = [f.name for f in fields(args_cls)]
        env_names = list(EnvSpec.names())
        for section, names, given in (("args", arg_names, train["args"]),
                                      ("env", env_names, train["env"])):
            for key in given:
                if key in ("seed", "ray") and section == "args":
                    raise ScenarioError(self._at(section, key), f"args.{key}",
                                        "the seeds key for seeds; no Ray inside a sweep's runs"
                                        if key == "seed" else "no Ray inside a sweep's runs "
                                        "(each run is already a Ray task)")
                if key not in names:
                    raise ScenarioError(self._at(section, key), f"unknown key {key!r}",
                                        f"a field of {args_cls.__name__}" if section == "args"
                                        else "a keyword argument of cosim.env.SchedulingEnv",
                                        did_you_mean(key, names))
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


def _env_kwargs(env: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(env)
    if isinstance(kwargs.get("window"), list):
        kwargs["window"] = tuple(kwargs["window"])
    return kwargs


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
