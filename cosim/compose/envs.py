"""Environments from saved env configs, with what the learners cannot build themselves.

A learner gets an env factory and never imports the front. The front
(:func:`make_env`) turns a saved env config (a checkpoint's ``meta.json``
``env``, a study's ``train.env``) into a :class:`~cosim.env.SchedulingEnv`,
resolving the two settings that need more than ``cosim``: ``predictor``
becomes the env's ``predictions`` (a :class:`~cosim.compose.predictions.HubFactory`),
and a trained base policy ``base_policy: rl:DIR`` becomes a factory of fresh
acting policies. :class:`EnvFactory` is that call, picklable, for vector envs.

:class:`EnvFactory` stays here, not in :mod:`cosim.env`: what it resolves
(a predictor into a prediction hub, ``rl:DIR`` into a loaded agent) is the
front's work. Learners receive it as a plain zero-argument callable and never
import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cosim.errors import InputError

__all__ = ["make_env", "EnvFactory", "pin_scales"]


def make_env(env_config: dict[str, Any], **overrides: Any):
    """Build a :class:`cosim.env.SchedulingEnv` from a saved env config.

    The config's :data:`~cosim.env.spec.FRONT_KEYS` are resolved here; the
    rest is an :class:`~cosim.env.spec.EnvSpec` (validated once).

    Args:
        env_config: ``{"scenario": path, "scenario_set": [KEY=VALUE, ...],
            "predictor": NAME, **EnvSpec settings}`` (``window`` may be a
            list; ``scenario_set`` are scenario overrides as in ``--set``).
        **overrides: keyword arguments that replace the saved ones: settings
            (``episode_jobs=...``), ``scenario=...`` (a path or Scenario), or
            the live ``workload=``, ``predictions=``, ``base_factory=``, ``base_dir=``.

    Raises:
        InputError: no scenario given, or a bad setting.
    """
    from cosim.env import SchedulingEnv
    from cosim.env.spec import split_config

    live = {k: overrides.pop(k) for k in _LIVE if k in overrides}
    config = {**env_config, **overrides}
    if isinstance(config.get("curriculum"), list | tuple):   # prepared workloads: live
        live["curriculum"] = config.pop("curriculum")
    spec, front = split_config(config)
    scenario = front.get("scenario")
    if scenario is None:
        raise InputError("env.scenario", "nothing", "a scenario path or Scenario")
    if isinstance(scenario, str | Path):
        from cosim.config import load_scenario

        live.setdefault("base_dir", Path(scenario).resolve().parent)
        scenario = load_scenario(scenario, list(front.get("scenario_set") or []))
    predictor = front.get("predictor")
    if predictor not in (None, "estimate") and "predictions" not in live:
        from cosim.compose.predictions import HubFactory

        live["predictions"] = HubFactory(scenario, predictor, live.get("base_dir"))
    base = spec.base_policy
    if isinstance(base, str) and base.startswith("rl:") and "base_factory" not in live:
        live["base_factory"] = AgentBase(base, scenario, live.get("base_dir"))
    return SchedulingEnv(scenario, spec, **live)


#: :func:`make_env` keywords that are live collaborators, not settings.
_LIVE = ("workload", "predictions", "base_factory", "base_dir")


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
        levels: ``(level-1 teacher, level-2 teacher)``: the env's ``teacher``
            setting, so ``info["teacher_action"]`` holds those heuristics' actions
            at DRAS's two levels; None keeps the configured teacher.
        episode_range: ``(low, high)``: a job count per episode drawn in that range
            (:class:`~cosim.env.wrappers.VariableLengthEpisodes`); None keeps the configured one.
        wrap: a picklable ``env -> env`` applied last.
        **overrides: further :func:`make_env` keywords (e.g. ``workload``).
    """

    def __init__(self, env_config: dict[str, Any], levels: tuple[str, str] | None = None, *,
                 episode_range: tuple[int, int] | None = None, wrap=None, **overrides: Any):
        self.env_config = dict(env_config)
        if levels is not None:
            self.env_config["teacher"] = list(levels)
        self.levels, self.episode_range, self.wrap = levels, episode_range, wrap
        self.overrides = overrides

    def __call__(self):
        from cosim.env.wrappers import VariableLengthEpisodes

        env = make_env(self.env_config, **self.overrides)
        if self.episode_range is not None:
            env = VariableLengthEpisodes(env, *self.episode_range)
        return self.wrap(env) if self.wrap is not None else env


def pin_scales(env_config: dict[str, Any], probe=None):
    """Pin the feature scales of ``env_config`` to its training workload and machine (in place).

    The time normalization (``max_time``), the image row length and the DRAS
    node rows are otherwise derived by each env from its own workload, so a
    saved policy would see other scales on another workload or cluster size
    (transfer, seed 003). Values already set are kept
    (:meth:`cosim.env.spec.EnvSpec.with_scales`).

    Returns:
        The probe env (built from ``env_config`` unless given; the caller closes it).
    """
    from cosim.env.spec import split_config

    if probe is None:
        probe = make_env(env_config)
    spec, _ = split_config(env_config)
    pinned = spec.with_scales(probe.unwrapped.env_spec)
    for key in ("max_time", "image_slot_s", "node_rows"):
        if getattr(pinned, key) != getattr(spec, key):
            env_config[key] = getattr(pinned, key)
    return probe
