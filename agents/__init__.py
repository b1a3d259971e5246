"""Learning agents: masked PPO, A2C, DRAS's PG and DQL, imitation, networks, checkpoints.

The heuristics, backfilling and knapsack policies are in :mod:`cosim.policies`.
``import agents`` is light: the learning parts (which need torch) are
imported on first use of their names, for example ``agents.MaskedCategorical``
or ``from agents import load_rl_policy``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# name -> module that defines it; loaded lazily (PEP 562) so torch stays unloaded.
_LAZY = {
    "MaskedCategorical": "agents.distributions",
    "compute_gae": "agents.gae",
    "make_network": "agents.networks",
    "Args": "agents.loop",
    "A2CArgs": "agents.a2c",
    "PGArgs": "agents.pg",
    "DQLArgs": "agents.dql",
    "collect_demonstrations": "agents.imitation",
    "behaviour_cloning": "agents.imitation",
    "save_checkpoint": "agents.checkpoint",
    "load_checkpoint": "agents.checkpoint",
    "load_rl_policy": "agents.rl_policy",
    "RLPolicy": "agents.rl_policy",
}

#: Names that moved to cosim.policies; still found here, with a warning, for one release.
_MOVED = {"HEURISTICS": "cosim.policies", "make_policy": "cosim.policies",
          "policy_names": "cosim.policies"}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(f"agents.{name} moved to {_MOVED[name]}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value   # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
