"""Does a learned inspector (accept/skip over a base policy) beat its base? Paired, with intervals.

The protocol of :mod:`cosim.evaluation`: windows of Lublin-Feitelson jobs
(256 cores) from disjoint generator seeds, training (the agent's own
scenario, seed 1), validation (seed 1002) and test (seed 1003); every policy
runs on the same windows; the inspector is compared with its base policy
(mean-bsld ratio and median per-window ratio, 95 % bootstrap intervals,
wins and losses), and the best classic heuristic is chosen on validation.
The test windows are read once, and only when validation says the inspector
helps (the upper end of its mean-ratio interval below 1).

Train an inspector first, e.g. (about 3 minutes of 2 shared cores)::

    python -m agents train scenarios/lublin256.yaml --actions inspect \\
        --base-policy f1+easy --paired f1+easy --paired-mode log \\
        --teacher f1+easy --bc-steps 4096 --mimic-decay 0.5 \\
        --episode-jobs 256 --steps 20000 --time-budget 180 --out runs/inspect-exact

(add ``--set workload.estimates.model=tsafrir`` for Tsafrir estimates), then::

    python benchmarks/inspector.py --checkpoint runs/inspect-exact [--estimates tsafrir] [--test]

Prints the offered load of each set, every heuristic's mean bsld on
validation, the inspector against its base (and its skip rate), and, if
allowed, the same on test.

``--trace SWF`` takes the windows from a trace instead: its validation and
test spans cut in time order as ``agents tune`` cuts them, each window run
from an empty machine, the trace's own requests as estimates. Is there room
over SAF+EASY on RICC, where user estimates leave EASY the most?::

    python benchmarks/inspector.py --trace ../shared/traces/RICC-2010-2.swf.gz \
        --size 2048 --windows 30 --probe 0.05 --base saf+easy
"""

from __future__ import annotations

import sys

from agents.corrections import main

if __name__ == "__main__":
    sys.exit(main())
