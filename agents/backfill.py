"""Deprecated alias: backfilling moved to :mod:`cosim.policies.backfill` (kept for one release)."""

import warnings

from cosim.policies.backfill import Profile, QueuePolicy

__all__ = ["QueuePolicy", "Profile"]

warnings.warn("agents.backfill moved to cosim.policies.backfill; import from there",
              DeprecationWarning, stacklevel=2)
