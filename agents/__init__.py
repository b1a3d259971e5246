"""Learning agents: masked PPO, A2C, DRAS's PG and DQL, imitation, networks, checkpoints.

The heuristics, backfilling and knapsack policies are in :mod:`cosim.policies`.
``import agents`` is light: the learning parts (which need torch) are
imported on first use of their names, for example ``agents.MaskedCategorical``
or ``from agents import load_rl_policy``. Importing it installs the loader of
``rl:DIR`` policy names (:mod:`agents.acting`).
"""

from __future__ import annotations

import importlib
from typing import Any

from agents.acting import load_rl
from agents.beliefs import install as install_beliefs
from cosim.policies.loaders import register_policy_loader

# name -> module that defines it; loaded lazily (PEP 562) so torch stays unloaded.
_LAZY = {
    "MaskedCategorical": "agents.distributions",
    "compute_gae": "agents.gae",
    "make_network": "agents.networks",
    "Args": "agents.loop",
    "train": "agents.recipe",
    "warm_start": "agents.imitation",
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

__all__ = list(_LAZY)

# The learners install their loader of ``rl:DIR`` in the one registry of prefixed policy
# names, which runs and the evaluation protocol read (torch loads with the first agent).
register_policy_loader("rl", load_rl)
# ... and the predictors the protocol can plan with in its windows (``@history``).
install_beliefs()


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value   # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
