"""A trained agent's acting policy, built from its saved env config without a gym.Env.

A checkpoint saves the keyword arguments of the environment its agent was
trained in. Only some of them shape what the agent sees and may do (the
action model, window, observation and its scales); :data:`ACTING_KEYS` names
them, the one definition of that set. :func:`acting_policy` builds from
them, the scenario and the workload the same action model and observation
encoder as :class:`~cosim.env.SchedulingEnv` would, and answers each
decision point in process with a scorer ``act(obs, mask) -> action``. So a
trained agent runs in ``python -m cosim run`` like any heuristic, without
building an environment (no episode source, rewards or spaces).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cosim.config import Scenario
from cosim.env.actions import AgentPolicy, make_action_model
from cosim.env.observations import (
    DEFAULT_OBSERVATIONS,
    OBSERVATIONS,
    ObservationConfig,
    make_encoder,
)
from cosim.env.scheduling import default_image_slot, default_max_time, default_node_rows
from cosim.errors import ScenarioError
from cosim.policies import make_policy
from cosim.workloads.base import Workload

__all__ = ["ACTING_KEYS", "acting_config", "acting_policy", "window_setting"]

#: Env-config keys that shape what an acting agent sees and may do. Every
#: other key (episodes, rewards, curriculum, teacher, predictor, scenario)
#: matters only while training.
ACTING_KEYS = ("actions", "observation", "window", "kill_slots", "backfill", "backfill_order",
               "reserve", "guard_wait", "horizon", "image_slots", "image_slot_s", "node_rows",
               "max_time", "queue_norm", "base_policy", "max_skips")


def acting_config(env_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`ACTING_KEYS` of a saved env config (a JSON ``window`` list made a tuple/int)."""
    cfg = {k: v for k, v in (env_config or {}).items() if k in ACTING_KEYS}
    if cfg.get("window") is not None:
        cfg["window"] = window_setting(cfg["window"])
    return cfg


def window_setting(window):
    """A saved ``window`` as ``SchedulingEnv`` takes it: JSON keeps a tuple as a list."""
    if isinstance(window, int):
        return window
    return tuple(int(w) for w in window) if len(window) > 1 else int(window[0])


def acting_policy(config: Mapping[str, Any], scenario: Scenario, workload: Workload,
                  act: Callable[[np.ndarray, np.ndarray], int], *, name: str = "agent",
                  base=None, hub=None) -> AgentPolicy:
    """A fresh plain policy answering decision points with ``act(obs, mask)``.

    The action model and the observation are those of
    ``SchedulingEnv(scenario, workload=workload, **config)`` (the same
    defaults), so the agent sees exactly what it saw while training.

    Args:
        config: env keyword arguments (keys outside :data:`ACTING_KEYS` are ignored).
        scenario: the run's scenario (machine size resolved).
        workload: the run's jobs (the time scale of the observation comes from them
            unless ``max_time`` is given).
        act: the scorer, e.g. a trained agent's greedy ``act``.
        name: the policy's name in results.
        base: ``actions="kill"``: the policy that schedules (default: the config's
            ``base_policy`` heuristic, else ``sjf+easy``).
        hub: ``actions="kill"``: the run's prediction hub the agent reads.

    Raises:
        ScenarioError: an option the action model or observation cannot take.
    """
    cfg = acting_config(config)
    actions = cfg.get("actions", "start")
    observation = cfg.get("observation") or DEFAULT_OBSERVATIONS.get(actions, "compact")
    if observation not in OBSERVATIONS:
        raise ScenarioError("observation", repr(observation), f"one of {', '.join(OBSERVATIONS)}")
    guard_wait = cfg.get("guard_wait")
    if guard_wait is not None and not guard_wait >= 0:
        raise ScenarioError("guard_wait", repr(guard_wait), "seconds >= 0")
    extra: dict[str, Any] = {}
    if actions == "kill":
        from cosim.prediction_hub import KillRule

        if base is None:
            base = make_policy(cfg.get("base_policy") or "sjf+easy", where="base_policy")
        extra = {"base": base, "rule": KillRule.from_config(scenario.predictor.kill)}
    elif actions == "inspect":
        if base is None:
            base = make_policy(cfg.get("base_policy") or "sjf+easy", where="base_policy")
        extra = {"base": base, "max_skips": cfg.get("max_skips")}
    policy = make_action_model(
        actions, window=cfg.get("window"), kill_slots=int(cfg.get("kill_slots", 0)),
        guard_wait=None if guard_wait is None else float(guard_wait),
        backfill=cfg.get("backfill", "easy"), backfill_order=cfg.get("backfill_order", "fcfs"),
        reserve=cfg.get("reserve", "easy"), **extra)
    c = scenario.cluster
    capacity = c.nodes if c.granularity == "node" else c.nodes * c.cores_per_node
    image_slots = int(cfg.get("image_slots", 20))
    image_slot_s = cfg.get("image_slot_s")
    if image_slot_s is None:
        image_slot_s = default_image_slot(workload, image_slots)
    max_time = float(cfg.get("max_time") or default_max_time(workload))
    encoder = make_encoder(observation, ObservationConfig(
        amap=policy.amap, capacity=capacity, mem_capacity=c.memory_per_node * c.nodes,
        max_time=max_time, queue_norm=float(cfg.get("queue_norm", 4096.0)),
        horizon=int(cfg.get("horizon", 8)), image_slots=image_slots,
        image_slot_s=float(image_slot_s),
        node_rows=int(cfg.get("node_rows") or default_node_rows(capacity))))
    encoder.reset()
    if hub is not None:
        policy.bind(hub)
    return policy.acting(encoder.encode, act, name=name)
