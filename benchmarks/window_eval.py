"""(policy, window) evaluations per second through the evaluation protocol's public API.

What ``python -m agents tune`` spends its budget on: each CMA-ES candidate is
simulated on every training window. This times
:class:`cosim.evaluation.Evaluator` on windows of 256 jobs of
``scenarios/lublin256.yaml`` (exact estimates, 256 cores, EASY), for a static
priority (SAF+EASY as a point of the priority space) and a dynamic one (a
wait/estimate term, keys recomputed every pass), in one process and in 2
worker processes. Rounds alternate 1 and 2 processes so that load from other
work on the machine hits both alike; the table gives the median round and the
spread. The worker start-up (shipping the windows once) is outside the timing,
as it is in a search, where the pool lives for the whole run.

    python benchmarks/window_eval.py [--windows 32] [--rounds 3] [--jobs 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosim.config import load_scenario
from cosim.evaluation import Evaluator, windows
from cosim.policies.priority import FEATURES, PriorityWeights, heuristic_weights
from cosim.workloads.loading import load_workload


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=256, help="jobs per window")
    a = p.parse_args()
    scenario = load_scenario("scenarios/lublin256.yaml", [f"workload.jobs={a.windows * a.jobs}"])
    ws = windows(load_workload(scenario), a.jobs, a.windows)
    dyn = list(heuristic_weights("saf", 256))
    dyn[FEATURES.index("wait_per_est")] = -0.05
    cases = {"static (saf)": PriorityWeights(heuristic_weights("saf", 256), 256),
             "dynamic (saf - 0.05 wait/est)": PriorityWeights(tuple(dyn), 256)}
    print(f"{len(ws)} windows of {a.jobs} jobs, {a.rounds} rounds each (1 and 2 processes "
          "alternate)")
    print(f"{'policy':32s} {'processes':>9s} {'evals/s (median)':>17s} {'min..max':>14s}")
    for label, spec in cases.items():
        rates = {1: [], 2: []}
        pools = {k: Evaluator(scenario, ws, k) for k in (1, 2)}
        try:
            pools[2].evaluate([spec])            # start the workers outside the timing
            for _ in range(a.rounds):
                for k in (1, 2):
                    t0 = time.perf_counter()
                    pools[k].evaluate([spec] * 2)
                    rates[k].append(2 * len(ws) / (time.perf_counter() - t0))
        finally:
            for e in pools.values():
                e.close()
        for k in (1, 2):
            r = np.array(rates[k])
            print(f"{label:32s} {k:9d} {np.median(r):17.1f} {r.min():6.1f}..{r.max():<6.1f}")


if __name__ == "__main__":
    main()
