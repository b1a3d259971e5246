"""Scheduling policies: classic heuristics with backfilling, and learning agents.

``import agents`` is light: the heuristics need only numpy, and the learning
parts (which need torch) are imported on first use of their names, for
example ``agents.MaskedCategorical`` or ``from agents import load_rl_policy``.
"""

from __future__ import annotations

import importlib
from typing import Any

from agents.heuristics import HEURISTICS, make_policy, policy_names

# name -> module that defines it; loaded lazily (PEP 562) so torch stays unloaded.
_LAZY = {
    "MaskedCategorical": "agents.distributions",
    "compute_gae": "agents.gae",
    "make_network": "agents.networks",
    "Args": "agents.ppo",
    "A2CArgs": "agents.a2c",
    "collect_demonstrations": "agents.imitation",
    "behaviour_cloning": "agents.imitation",
    "save_checkpoint": "agents.checkpoint",
    "load_checkpoint": "agents.checkpoint",
    "load_rl_policy": "agents.rl_policy",
    "RLPolicy": "agents.rl_policy",
}

__all__ = ["HEURISTICS", "make_policy", "policy_names", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value   # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
