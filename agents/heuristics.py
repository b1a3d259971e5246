"""Deprecated alias: the heuristics moved to :mod:`cosim.policies` (kept for one release).

``from agents.heuristics import make_policy`` keeps working with a
``DeprecationWarning``; write ``from cosim.policies import make_policy``.
"""

import warnings

from cosim.policies.backfill import BACKFILLS
from cosim.policies.heuristics import HEURISTICS, Heuristic
from cosim.policies.names import SELECTORS, make_policy, policy_names

__all__ = ["Heuristic", "HEURISTICS", "BACKFILLS", "SELECTORS", "make_policy", "policy_names"]

warnings.warn("agents.heuristics moved to cosim.policies; import from there",
              DeprecationWarning, stacklevel=2)
