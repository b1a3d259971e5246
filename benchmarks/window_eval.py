"""(policy, window) evaluations per second through the evaluation protocol's public API.

What ``python -m agents tune`` spends its budget on: each CMA-ES candidate is
simulated on every training window. This times
:class:`cosim.evaluation.Evaluator` on windows of 256 jobs of
``scenarios/lublin256.yaml`` (exact estimates, 256 cores, EASY), for a static
priority (SAF+EASY as a point of the priority space) and a dynamic one (a
wait/estimate term, keys recomputed every pass), in one process and in one
worker process per core (``--processes``, default all cores this process may
use). Rounds alternate the two so that load from other work on the machine
hits both alike; the table gives the median round and the spread.

Set-up is paid once per worker, as in a search, where the pool lives for the
whole run: the windows are parsed once and shipped to each worker once (the
pool's initializer); per (policy, window) only the model is built (a few ms)
and the policy made from its weights. The worker start-up is outside the
timing.

With ``--yardstick PATH`` it also runs the shared plain-Python FCFS+EASY loop
(``../shared/tools/ref_easy.py``) on ``--trace`` in the same run, and prints
the simulated jobs/s of each row (evaluations/s times jobs per window) as a
ratio to it, since absolute figures move between machines and with the load.

    python benchmarks/window_eval.py [--windows 32] [--rounds 3] [--jobs 256] \
        [--yardstick ../shared/tools/ref_easy.py]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from cosim.config import load_scenario
from cosim.evaluation import Evaluator, default_processes, windows
from cosim.policies.priority import FEATURES, PriorityWeights, heuristic_weights
from cosim.workloads.loading import load_workload
from cosim.yardstick import run_yardstick


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=256, help="jobs per window")
    p.add_argument("--processes", type=int, default=default_processes(),
                   help="worker processes of the parallel rows (default: all cores)")
    p.add_argument("--yardstick", default=None, help="path of ref_easy.py to run beside")
    p.add_argument("--trace", default="../shared/traces/lublin_256.swf",
                   help="the trace the yardstick replays")
    a = p.parse_args()
    yardstick: list[float] = []

    def measure_yardstick() -> None:
        # once per round, so that its median sees the same load as the rounds
        if a.yardstick:
            yardstick.append(run_yardstick(a.yardstick, a.trace)["jobs_per_s"])

    par = max(2, a.processes)
    scenario = load_scenario("scenarios/lublin256.yaml", [f"workload.jobs={a.windows * a.jobs}"])
    ws = windows(load_workload(scenario), a.jobs, a.windows)
    dyn = list(heuristic_weights("saf", 256))
    dyn[FEATURES.index("wait_per_est")] = -0.05
    cases = {"static (saf)": PriorityWeights(heuristic_weights("saf", 256), 256),
             "dynamic (saf - 0.05 wait/est)": PriorityWeights(tuple(dyn), 256)}
    results = []
    for label, spec in cases.items():
        rates = {1: [], par: []}
        pools = {k: Evaluator(scenario, ws, k) for k in (1, par)}
        try:
            pools[par].evaluate([spec])          # start the workers outside the timing
            for _ in range(a.rounds):
                measure_yardstick()
                for k in (1, par):
                    t0 = time.perf_counter()
                    pools[k].evaluate([spec] * 2)
                    rates[k].append(2 * len(ws) / (time.perf_counter() - t0))
        finally:
            for e in pools.values():
                e.close()
        results += [(label, k, np.array(rates[k])) for k in (1, par)]
    ref_rate = float(np.median(yardstick)) if yardstick else None
    print(f"{len(ws)} windows of {a.jobs} jobs, {a.rounds} rounds each (1 and {par} processes "
          f"alternate; {default_processes()} cores)")
    if ref_rate:
        print(f"yardstick: {ref_rate:,.0f} jobs/s (median of {len(yardstick)} runs of ref_easy.py, "
              f"FCFS+EASY on {a.trace}, one before each round)")
    print(f"{'policy':32s} {'processes':>9s} {'evals/s (median)':>17s} {'min..max':>14s}"
          + (f" {'jobs/s / yardstick':>19s}" if ref_rate else ""))
    for label, k, r in results:
        ratio = f" {np.median(r) * a.jobs / ref_rate:18.2f}x" if ref_rate else ""
        print(f"{label:32s} {k:9d} {np.median(r):17.1f} {r.min():6.1f}..{r.max():<6.1f}" + ratio)


if __name__ == "__main__":
    main()
