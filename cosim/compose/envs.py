"""Environments from saved env configs, with what the learners cannot build themselves.

A learner gets an env factory and never imports the front. The front
(:func:`make_env`) turns a saved env config (a checkpoint's ``meta.json``
``env``, a study's ``train.env``) into a :class:`~cosim.env.SchedulingEnv`,
resolving the two settings that need more than ``cosim``: ``predictor``
becomes the env's ``predictions`` (a :class:`~cosim.compose.predictions.HubFactory`),
and a trained base policy ``base_policy: rl:DIR`` becomes a factory of fresh
acting policies. :class:`EnvFactory` is that call, picklable, for vector envs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cosim.errors import InputError

__all__ = ["make_env", "EnvFactory", "pin_scales"]


def make_env(env_config: dict[str, Any], **overrides: Any):
    """Build a :class:`cosim.env.SchedulingEnv` from a saved env config.

    Args:
        env_config: ``{"scenario": path, "scenario_set": [KEY=VALUE, ...],
            "predictor": NAME, **SchedulingEnv keyword arguments}`` (``window``
            may be a list; ``scenario_set`` are scenario overrides as in ``--set``).
        **overrides: keyword arguments that replace the saved ones (for example
            ``scenario=...``, ``episode_jobs=...`` or ``workload=...``).

    Raises:
        InputError: no scenario given.
    """
    from cosim.env import SchedulingEnv
    from cosim.env.acting import window_setting

    kwargs = {**env_config, **overrides}
    scenario = kwargs.pop("scenario", None)
    scenario_set = kwargs.pop("scenario_set", None) or []
    predictor = kwargs.pop("predictor", None)
    kwargs.pop("paired", None)   # a training wrapper's settings (agents train --paired), not the env's
    if scenario is None:
        raise InputError("env.scenario", "nothing", "a scenario path or Scenario")
    if isinstance(scenario, str | Path):
        from cosim.config import load_scenario

        kwargs.setdefault("base_dir", Path(scenario).resolve().parent)
        scenario = load_scenario(scenario, list(scenario_set))
    if kwargs.get("window") is not None:
        kwargs["window"] = window_setting(kwargs["window"])
    if predictor not in (None, "estimate"):
        from cosim.compose.predictions import HubFactory

        kwargs["predictions"] = HubFactory(scenario, predictor, kwargs.get("base_dir"))
    base = kwargs.get("base_policy")
    if isinstance(base, str) and base.startswith("rl:"):
        kwargs["base_policy"] = AgentBase(base, scenario, kwargs.get("base_dir"))
    return SchedulingEnv(scenario, **kwargs)


class AgentBase:
    """Fresh plain policies of a trained agent ``rl:DIR`` (the base of a kill agent).

    Picklable (a name, a scenario and a folder); each call loads the agent for
    the episode's workload.
    """

    def __init__(self, name: str, scenario, base_dir=None):
        from cosim.policies import parse_policy

        self.name, self.scenario, self.base_dir = name, scenario, base_dir
        self.spec = parse_policy(name, where="env.base_policy")

    def __call__(self, workload=None):
        from cosim.compose.policies import load_policy

        if workload is None:
            raise InputError("env.base_policy", self.name, "a heuristic base policy for training "
                             "(an rl:DIR base needs the episode's workload)")
        return load_policy(self.spec, self.scenario, workload, base_dir=self.base_dir)


class EnvFactory:
    """``make_env(env_config, **overrides)`` as a picklable zero-argument callable.

    The one env factory of training runs and benchmarks (worker processes and
    Ray actors build their own envs from it).

    Args:
        env_config: a :func:`make_env` configuration.
        levels: ``(level-1 teacher, level-2 teacher)``: put those heuristics' actions
            in ``info["teacher_action"]`` (:class:`~cosim.env.wrappers.LevelTeacher`);
            None keeps the env's own.
        episode_range: ``(low, high)``: a job count per episode drawn in that range
            (:class:`~cosim.env.wrappers.VariableLengthEpisodes`); None keeps the configured one.
        wrap: a picklable ``env -> env`` applied last.
        **overrides: further :func:`make_env` keywords (e.g. ``workload``).
    """

    def __init__(self, env_config: dict[str, Any], levels: tuple[str, str] | None = None, *,
                 episode_range: tuple[int, int] | None = None, wrap=None, **overrides: Any):
        self.env_config = dict(env_config)
        self.levels, self.episode_range, self.wrap = levels, episode_range, wrap
        self.overrides = overrides

    def __call__(self):
        from cosim.env.wrappers import LevelTeacher, VariableLengthEpisodes

        env = make_env(self.env_config, **self.overrides)
        if self.episode_range is not None:
            env = VariableLengthEpisodes(env, *self.episode_range)
        if self.levels is not None:
            env = LevelTeacher(env, *self.levels)
        return self.wrap(env) if self.wrap is not None else env


def pin_scales(env_config: dict[str, Any], probe=None):
    """Pin the feature scales of ``env_config`` to its training workload and machine (in place).

    The time normalization (``max_time``), the image row length and the DRAS
    node rows are otherwise derived by each env from its own workload, so a
    saved policy would see other scales on another workload or cluster size
    (transfer, seed 003). Values already set are kept.

    Returns:
        The probe env (built from ``env_config`` unless given; the caller closes it).
    """
    if probe is None:
        probe = make_env(env_config)
    base = probe.unwrapped
    env_config.setdefault("max_time", float(base.max_time))
    if base.observation_kind == "image":
        env_config.setdefault("image_slot_s", float(base.image_slot_s))
    if base.observation_kind == "dras":
        env_config.setdefault("node_rows", int(base.node_rows))
    return probe

