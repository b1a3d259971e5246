"""How much does caching a dynamic priority's wait-free terms save where queues are long?

``agents tune``'s searched policies recompute their keys every scheduling
pass (a wait term makes them dynamic). Since stop 41 the terms that do not
change while a job waits (estimate, size, submit time, user history) are
computed once per job and cached per queue slot
(``cosim.policies.priority._WaitFreeTerms``), so a pass adds only the wait
terms. This times one run of a RICC training chunk (the tuner's
``--evaluation running`` unit) with the cached key and with the uncached
one, in the same process, in alternating rounds, and checks that both give
the same schedule figures to the last bit. Two dynamic policies: the one
``agents tune --selection minimax`` ships on RICC at 30 minutes (stop 41:
user-history terms, its own backfill order) and one with the backlog terms
and a wait/estimate term, which lets the queue grow to thousands of jobs::

    python benchmarks/long_queue_keys.py [--chunk 3] [--jobs 30000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cosim.policies.priority as priority
from cosim.config import load_scenario
from cosim.evaluation import capacity_of, chronological_split, run_window
from cosim.policies.priority import FEATURES, PriorityWeights, user_history
from cosim.workloads.loading import load_workload, resolve_machine

ROOT = Path(__file__).resolve().parent.parent
RICC = ROOT.parent / "shared" / "traces" / "RICC-2010-2.swf.gz"
#: ``policy.json`` of ``agents tune --selection minimax`` on RICC at 30 minutes (stop 41:
#: half the way from SAF+EASY's point to the point found), rounded to 4 places.
MINIMAX_RICC = ((0.6839, 0.6048, 0.2274, 0.1100, 0.0269, 0.0, -0.2514, 0.0179, 0.1962,
                 0.0, 0.0, 0.0),
                (0.5861, 0.6554, 0.4070, -0.0787, -0.2060, 0.0, 0.0352, 0.0312, -0.1025,
                 0.0, 0.0, 0.0))


def policies(capacity: int) -> list[PriorityWeights]:
    """The two dynamic policies timed."""
    w = dict.fromkeys(FEATURES, 0.0)
    w.update(log_est=0.7, log_wait=-0.5, wait_per_est=-0.3, backlog_log_est=0.2,
             backlog_log_wait=-0.3)
    return [PriorityWeights(MINIMAX_RICC[0], capacity, backfill_weights=MINIMAX_RICC[1],
                            name="minimax on RICC"),
            PriorityWeights(tuple(w[f] for f in FEATURES), capacity, name="backlog and wait")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunk", type=int, default=3, choices=(1, 2, 3, 4),
                    help="training chunk (the third is RICC's drain stretch)")
    ap.add_argument("--jobs", type=int, default=30_000, help="its first this many jobs")
    ap.add_argument("--rounds", type=int, default=3)
    ns = ap.parse_args(argv)
    if not RICC.exists():
        print(f"error: {RICC} is absent (the shared traces); nothing measured", file=sys.stderr)
        return 2
    sc = load_scenario(str(ROOT / "scenarios" / "swf.yaml"), [f"workload.path={RICC}"])
    wl = load_workload(sc, base_dir=ROOT / "scenarios")
    sc = resolve_machine(sc, wl)
    wl.features.update(user_history(wl))
    chunk = chronological_split(wl, size=2048, train_count=4, count=60,
                                evaluation="running").train[ns.chunk - 1]
    window = chunk.take(slice(0, ns.jobs))
    cached = priority._dynamic_key

    def uncached(*args, **kwargs):
        return cached(*args, **kwargs).uncached
    print(f"RICC training chunk {ns.chunk}, its first {len(window)} jobs, one run each; "
          f"min and median of {ns.rounds} rounds, alternating")
    print("| policy | cached key s | uncached s | speed-up | same figures |\n|---|---|---|---|---|")
    for spec in policies(capacity_of(sc)):
        times = {"cached": [], "uncached": []}
        results = {}
        for _ in range(ns.rounds):
            for mode, make in (("cached", cached), ("uncached", uncached)):
                priority._dynamic_key = make
                try:
                    t = time.perf_counter()
                    results[mode] = run_window(sc, spec, window)
                    times[mode].append(time.perf_counter() - t)
                finally:
                    priority._dynamic_key = cached
        a, b = sorted(times["cached"]), sorted(times["uncached"])
        same = results["cached"] == results["uncached"]
        print(f"| {spec.name} | {a[0]:.2f} (median {a[len(a) // 2]:.2f}) | {b[0]:.2f} "
              f"(median {b[len(b) // 2]:.2f}) | {b[0] / a[0]:.2f}x | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
