"""A trained agent's acting policy, built from (spec, scenario, weights) without a gym.Env.

A checkpoint saves the :class:`~cosim.env.spec.EnvSpec` of the environment
its agent was trained in. Only some settings shape what the agent sees and
may do (the action model, window, observation and its scales);
:data:`ACTING_KEYS` names them. :func:`action_model` and :func:`encoder`
build, from a resolved spec and the scenario, the action model and the
observation encoder that :class:`~cosim.env.SchedulingEnv` itself uses (one
construction for both), and :func:`acting_policy` answers each decision
point in process with a scorer ``act(obs, mask) -> action``. So a trained
agent runs in ``python -m cosim run`` like any heuristic, without building an
environment (no episode source, rewards or spaces).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cosim.config import Scenario
from cosim.env.actions import AgentPolicy, make_action_model
from cosim.env.observations import ObservationConfig, make_encoder
from cosim.env.spec import EnvSpec, capacity_of
from cosim.policies import make_policy
from cosim.workloads.base import Workload

__all__ = ["ACTING_KEYS", "acting_config", "acting_spec", "acting_policy", "action_model",
           "encoder", "window_setting"]

#: Env settings that shape what an acting agent sees and may do. Every other
#: one (episodes, rewards, curriculum, teacher) and the front's keys
#: (predictor, scenario) matter only while training.
ACTING_KEYS = ("actions", "observation", "window", "kill_slots", "backfill", "backfill_order",
               "reserve", "guard_wait", "horizon", "image_slots", "image_slot_s", "node_rows",
               "max_time", "queue_norm", "base_policy", "max_skips")


def acting_config(env_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`ACTING_KEYS` of a saved env config (a JSON ``window`` list made a tuple/int)."""
    cfg = {k: v for k, v in (env_config or {}).items() if k in ACTING_KEYS}
    if cfg.get("window") is not None:
        cfg["window"] = window_setting(cfg["window"])
    return cfg


def acting_spec(config: EnvSpec | Mapping[str, Any] | None) -> EnvSpec:
    """The spec an agent acts by: a spec as it is, or a saved env config's :data:`ACTING_KEYS`.

    Training-only settings of a saved config are left out (they take their
    defaults), so an old checkpoint acts exactly as it did.
    """
    if isinstance(config, EnvSpec):
        return config
    return EnvSpec.from_dict(acting_config(config), where="env")


def window_setting(window):
    """A saved ``window`` as ``SchedulingEnv`` takes it: JSON keeps a tuple as a list."""
    if isinstance(window, int):
        return window
    return tuple(int(w) for w in window) if len(window) > 1 else int(window[0])


def action_model(spec: EnvSpec, scenario: Scenario, *, on_post=None, base=None) -> AgentPolicy:
    """A fresh action model of a resolved ``spec`` (:meth:`EnvSpec.resolved`).

    For ``actions="kill"`` and ``"inspect"``, ``base`` is the policy that
    schedules (default: the spec's heuristic ``base_policy``); the kill
    teacher's rule comes from the scenario's ``predictor.kill``.
    """
    extra: dict[str, Any] = {}
    if spec.actions == "kill":
        from cosim.policies.kill import KillRule

        if base is None:
            base = make_policy(spec.base_policy or "sjf+easy", where="base_policy")
        extra = {"base": base, "rule": KillRule.from_config(scenario.predictor.kill)}
    elif spec.actions in ("inspect", "backfill"):
        if base is None:
            base = make_policy(spec.base_policy or "sjf+easy", where="base_policy")
        extra = {"base": base, "max_skips": spec.max_skips}
    return make_action_model(spec.actions, window=spec.window, kill_slots=spec.kill_slots,
                             on_post=on_post, guard_wait=spec.guard_wait, backfill=spec.backfill,
                             backfill_order=spec.backfill_order, reserve=spec.reserve, **extra)


def encoder(spec: EnvSpec, scenario: Scenario):
    """The observation encoder of a resolved ``spec`` on ``scenario``'s machine (not yet reset)."""
    c = scenario.cluster
    return make_encoder(spec.observation, ObservationConfig(
        amap=spec.action_map, capacity=capacity_of(scenario),
        mem_capacity=c.memory_per_node * c.nodes, max_time=spec.max_time,
        queue_norm=spec.queue_norm, horizon=spec.horizon, image_slots=spec.image_slots,
        image_slot_s=spec.image_slot_s, node_rows=spec.node_rows))


def acting_policy(config: EnvSpec | Mapping[str, Any], scenario: Scenario, workload: Workload,
                  act: Callable[[np.ndarray, np.ndarray], int], *, name: str = "agent",
                  base=None, hub=None) -> AgentPolicy:
    """A fresh plain policy answering decision points with ``act(obs, mask)``.

    The action model and the observation are those of
    ``SchedulingEnv(scenario, spec, workload=workload)`` (the same defaults,
    resolved by :meth:`EnvSpec.resolved`), so the agent sees exactly what it
    saw while training.

    Args:
        config: the agent's :class:`EnvSpec`, or a saved env config (only its
            :data:`ACTING_KEYS` are read).
        scenario: the run's scenario (machine size resolved).
        workload: the run's jobs (the time scale of the observation comes from them
            unless ``max_time`` is given).
        act: the scorer, e.g. a trained agent's greedy ``act``.
        name: the policy's name in results.
        base: ``actions="kill"``: the policy that schedules (default: the spec's
            ``base_policy`` heuristic, else ``sjf+easy``).
        hub: ``actions="kill"``: the run's prediction hub the agent reads.

    When ``act`` is the bound ``act`` of an object with a
    ``chooser(encoder, actions)`` method (a trained agent,
    :meth:`agents.rl_policy.RLPolicy.chooser`), the chooser it returns, if
    any, is asked first and ``act`` only when it declines (same decisions,
    without building the observation array, or for ``select`` most of it).

    Raises:
        ScenarioError: an option the action model or observation cannot take.
    """
    spec = acting_spec(config).resolved(scenario, workload)
    policy = action_model(spec, scenario, base=base)
    enc = encoder(spec, scenario)
    enc.reset()
    if hub is not None:
        policy.bind(hub)
    return policy.acting(enc.encode, act, name=name, choose=_chooser(act, spec, enc))


def _chooser(act, spec: EnvSpec, enc):
    """A trained agent's shortcut past the observation (``RLPolicy.chooser``), where it has one."""
    owner = getattr(act, "__self__", None)
    make = getattr(owner, "chooser", None)
    return None if make is None else make(enc, spec.actions)
