"""Deprecated alias: the knapsack baseline moved to :mod:`cosim.policies.knapsack` (kept for one release)."""

import warnings

from cosim.policies.knapsack import KnapsackPolicy, knapsack

__all__ = ["KnapsackPolicy", "knapsack"]

warnings.warn("agents.knapsack moved to cosim.policies.knapsack; import from there",
              DeprecationWarning, stacklevel=2)
