"""Does a learned backfilling order (``--actions backfill``) beat its EASY base? Paired, with intervals.

The protocol of :mod:`cosim.evaluation`, as ``benchmarks/inspector.py``:
windows of Lublin-Feitelson jobs (256 cores) from disjoint generator seeds,
training (the agent's own scenario, seed 1), validation (seed 1002) and test
(seed 1003); every policy runs on the same windows; the agent is compared
with its base policy (mean-bsld ratio and median per-window ratio, 95 %
bootstrap intervals, wins and losses) and with the best classic heuristic,
chosen on validation. The test windows are read once, and only when
validation says the agent helps (the upper end of its mean-ratio interval
against its base below 1).

Train one first, e.g. (about 9 minutes of 2 shared cores)::

    python -m agents train scenarios/lublin256.yaml --set workload.estimates.model=tsafrir \\
        --actions backfill --base-policy saf+easy --paired saf+easy --paired-mode log \\
        --contention-min 0.05 --teacher saf+easy --bc-steps 2048 --mimic-decay 0.25 \\
        --episode-jobs 256 --arg gamma=1.0 --arg gae_lambda=1.0 --envs 4 \\
        --time-budget 540 --out runs/backfill-tsafrir

then::

    python benchmarks/backfiller.py --checkpoint runs/backfill-tsafrir --estimates tsafrir [--test]
    python benchmarks/backfiller.py --probe 0.2 --base saf+easy --windows 30   # is there room?

Prints every heuristic's mean bsld on validation, the agent against its base
and the best heuristic, and how often the greedy agent departs from EASY's
own pick (slot 0) or stops backfilling.
"""

from __future__ import annotations

import sys

import numpy as np

from agents.corrections import Correction, main


class _RandomDepartures:
    """A stand-in agent: EASY's pick, except with probability ``p`` a random other legal
    action (another candidate or stop), for ``--probe``."""

    def __init__(self, base: str, p: float, seed: int):
        self.env_config = {"actions": "backfill", "base_policy": base}
        self.p, self.rng = p, np.random.default_rng(seed)

    def act(self, obs, mask) -> int:
        others = np.flatnonzero(mask[1:]) + 1
        if len(others) and self.rng.random() < self.p:
            return int(self.rng.choice(others))
        return 0


def _choices(policies) -> tuple[str, dict]:
    return "choices", {k: sum(getattr(p, k) for p in policies)
                       for k in ("asks", "departures", "stops")}


BACKFILL = Correction(
    "backfill", "backfiller", _RandomDepartures, "random departures from EASY's pick",
    _choices, lambda c: (f"backfiller: {c['asks']} choices, {c['departures']} departures "
                         f"from EASY's pick, {c['stops']} stops"),
    default_base="saf+easy", default_estimates="tsafrir")


if __name__ == "__main__":
    sys.exit(main(correction=BACKFILL))
