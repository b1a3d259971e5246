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


def pin_scales(env_config: dict[str, Any], env=None) -> dict[str, Any]:
    """Pin a training env config's feature scales to its own workload and machine.

    Sets (unless given) ``max_time``, and ``image_slot_s`` or ``node_rows``
    for the observations that have them, to the values the env derived, so
    that the saved policy sees the same scales on any other workload or
    cluster size (transfer, seed 003).

    Args:
        env_config: the saved env config; updated in place and returned.
        env: an env already built from it (a probe is built and closed when None).
    """
    probe = make_env(env_config) if env is None else env
    base = probe.unwrapped
    env_config.setdefault("max_time", float(base.max_time))
    if base.observation_kind == "image":
        env_config.setdefault("image_slot_s", float(base.image_slot_s))
    if base.observation_kind == "dras":
        env_config.setdefault("node_rows", int(base.node_rows))
    if env is None:
        probe.close()
    return env_config


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
    """``make_env(env_config, **overrides)`` as a picklable zero-argument callable."""

    def __init__(self, env_config: dict[str, Any], **overrides: Any):
        self.env_config = dict(env_config)
        self.overrides = overrides

    def __call__(self):
        return make_env(self.env_config, **self.overrides)
