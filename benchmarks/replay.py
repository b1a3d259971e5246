"""Whole-trace replay speed through the SimPy model.

Prints jobs/s (jobs divided by the seconds from the start of reading the
trace to the end of the simulation; interpreter start-up and imports
excluded), scheduler passes (run and skipped, per 10,000 jobs) and peak
memory. With ``--yardstick PATH`` it first runs the shared plain-Python
FCFS+EASY loop (``../shared/tools/ref_easy.py``) on the same trace in a
subprocess and prints every speed figure as a ratio to it as well, since
absolute figures move between machines and with the load.

The model runs through :meth:`cosim.model.Simulation.run`, as a library
runner should (the garbage collector's full collections put off until the
run ends), and each replay starts after a full collection: without the
garbage of the replays before it, as the yardstick starts in a fresh
process each time.

Run it from the repository root with ``PYTHONPATH=.`` (or an installed
checkout): the script's own folder comes first on ``sys.path``, so a plain
``python benchmarks/replay.py`` imports whichever ``cosim`` is installed.

    python benchmarks/replay.py ../shared/traces/lublin_256.swf --policy fcfs --backfill easy \
        --yardstick ../shared/tools/ref_easy.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

import numpy as np
import simpy

from cosim import metrics
from cosim.config import scenario_from_dict
from cosim.model import build
from cosim.policies import make_policy
from cosim.workloads.swf import read_swf
from cosim.yardstick import run_yardstick


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--policy", default="fcfs")
    ap.add_argument("--backfill", default="easy")
    ap.add_argument("--cores-per-node", type=int, default=None,
                    help="node size (default: MaxProcs/MaxNodes from the header, else 1)")
    ap.add_argument("--no-record", action="store_true", help="skip event/decision rows")
    ap.add_argument("--yardstick", default=None, help="path of ref_easy.py to run beside")
    ap.add_argument("--repeat", type=int, default=3,
                    help="yardstick and replay pairs, run alternately; the best of each "
                         "is compared (a loaded machine slows runs at random, never speeds "
                         "them up)")
    args = ap.parse_args()

    ref_rates: list[float] = []
    rates: list[float] = []
    for _ in range(max(1, args.repeat)):
        if args.yardstick:
            ref = run_yardstick(args.yardstick, args.trace)
            ref_rates.append(ref["jobs_per_s"])
        rates.append(replay(args))
    ref_rate = max(ref_rates) if ref_rates else None
    print(f"  best of {len(rates)}: {rate(max(rates), ref_rate)}")
    if ref_rate:
        pairs = sorted(r / y for r, y in zip(rates, ref_rates))
        print(f"yardstick: best {ref_rate:,.0f} jobs/s of {len(ref_rates)} runs, mean wait "
              f"{ref['mean_wait']:,.1f} s")
        print(f"run by run: {' '.join(f'{p:.2f}x' for p in pairs)} "
              f"(median {pairs[len(pairs) // 2]:.2f}x)")
        print(f"ratio: {max(rates) / ref_rate:.2f}x the yardstick's jobs/s (best of each)")


def rate(jobs_per_s: float, ref_rate: float | None) -> str:
    ratio = f" ({jobs_per_s / ref_rate:.2f}x the yardstick)" if ref_rate else ""
    return f"{jobs_per_s:,.0f} jobs/s{ratio}"


def replay(args) -> float:
    """One replay of the trace; prints its figures and returns its jobs/s."""
    # Every replay starts as the first does (the yardstick starts in a fresh
    # process each time): without the earlier replays' garbage, a reference
    # cycle the collector alone frees, for it to walk during this one.
    gc.collect()
    t0 = time.perf_counter()
    workload = read_swf(args.trace)   # the machine size comes with it (header or largest job)
    t1 = time.perf_counter()
    procs = workload.max_procs
    nodes = workload.max_nodes
    cpn = args.cores_per_node
    if cpn is None:
        cpn = procs // nodes if nodes and procs % nodes == 0 else 1
    scenario = scenario_from_dict({
        "cluster": {"nodes": procs // cpn, "cores_per_node": cpn},
        "workload": {"kind": "swf", "path": args.trace}})
    env = simpy.Environment()
    sim = build(env, scenario, make_policy(f"{args.policy}+{args.backfill}"),
                workload=workload, record=not args.no_record)
    sim.run()   # as the library runs a model: set-up objects frozen for the collector
    t2 = time.perf_counter()
    n = len(workload)
    jobs = sim.scheduler.jobs
    counters = sim.scheduler.counters
    mean_wait = float(np.sum(metrics.wait([j.start for j in jobs], [j.submit for j in jobs],
                                          [j.killed_seconds for j in jobs]))) / n
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ours = n / (t2 - t0)
    print(f"cosim: {n} jobs, {procs} cores ({procs // cpn} nodes x {cpn}), "
          f"{args.policy}+{args.backfill}")
    print(f"  parse {t1 - t0:.2f} s, simulate {t2 - t1:.2f} s, events {len(sim.scheduler.events)}")
    print(f"  passes {counters.passes} ({counters.passes * 10000 / n:,.0f} per 10,000 jobs), "
          f"arrivals and ends that woke no pass {counters.wakeups_skipped}")
    print(f"  {rate(ours, None)}")
    print(f"  peak memory {peak_mb:,.0f} MB ({peak_mb * 1024 / n:.1f} KB/job)")
    print(f"  mean wait {mean_wait:,.1f} s, overruns {counters.overruns}, "
          f"reservations broken {counters.reservations_broken}")
    return ours

if __name__ == "__main__":
    main()
