"""Does the queue's backlog tell apart the periods where one heuristic or another leads?

A probe for ``--backlog searched`` (stop 39): the order that switches between
two classic heuristics at a backlog threshold, ``B = log10(1 + Q / N)`` with
``Q`` the queued jobs' estimated core-hours (the measure of
:mod:`cosim.policies.priority`'s backlog products): the first heuristic's key
while ``B`` is below the threshold, the second's from it on, the whole queue
re-keyed at every pass. Each threshold of a grid runs on every period as the
tuner measures them (:class:`hindsight_search.Periods`: four training chunks
run whole, validation and test windows inside one run of each span); the
threshold with the lowest worst ratio over the past (the chunks and
validation) to the best heuristic on validation is the pick, and only then is
its test ratio read::

    python benchmarks/backlog_switch.py --trace lublin
    python benchmarks/backlog_switch.py --trace lublin --pair saf,f1
    python benchmarks/backlog_switch.py --trace ricc --pair saf,f1 --grid 2

Each switch is registered as a heuristic (``switch0``, ``switch1``, ...) in
:data:`cosim.policies.HEURISTICS` for this process and its worker processes
(forked after it), so the evaluator runs it by name.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hindsight_search import ROOT, TRACES, Periods  # noqa: E402

from cosim.evaluation import CLASSIC  # noqa: E402
from cosim.policies import HEURISTICS, Heuristic  # noqa: E402

GRID = (0.1, 0.3, 0.5, 0.7, 1.0, 1.3, 1.6, 2.0, 2.5)


def _keys(name: str, q, slots) -> np.ndarray:
    est = np.maximum(q.estimate[slots], 1.0)
    procs = q.procs[slots].astype(np.float64)
    if name == "saf":
        return est * procs
    if name == "sjf":
        return est
    if name == "f1":
        return np.log10(est) * procs + 870.0 * np.log10(np.maximum(q.submit[slots], 1.0))
    if name == "fcfs":
        return q.submit[slots].astype(np.float64)
    raise ValueError(f"--pair: {name!r}, expected saf, sjf, f1 or fcfs")


def switch(low: str, high: str, threshold: float, name: str) -> Heuristic:
    """The order ``low`` below the backlog ``threshold`` and ``high`` from it on."""
    def key(q, slots, now, cluster, rng) -> np.ndarray:
        everyone = q.slots()
        work = float(np.dot(q.estimate[everyone], q.procs[everyone])) / 3600.0
        backlog = math.log10(1.0 + work / cluster.capacity)
        return _keys(high if backlog >= threshold else low, q, slots)
    return Heuristic(name, f"{low} below backlog {threshold:g}, {high} from it on",
                     dynamic=key)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", choices=sorted(TRACES), default="lublin")
    ap.add_argument("--pair", default="f1,saf", help="LOW,HIGH: the heuristics below and "
                                                     "from the threshold on")
    ap.add_argument("--grid", type=float, nargs="+", default=list(GRID),
                    help="the backlog thresholds tried")
    ap.add_argument("--processes", type=int, default=2)
    ns = ap.parse_args(argv)
    grid = tuple(ns.grid)
    low, _, high = ns.pair.partition(",")
    for n in (low, high):
        if n not in ("saf", "sjf", "f1", "fcfs"):
            print(f"error: --pair: {n!r}, expected two of saf, sjf, f1, fcfs", file=sys.stderr)
            return 2
    path = TRACES[ns.trace]
    if not path.exists():
        print(f"error: {path} is absent (the shared traces); nothing measured", file=sys.stderr)
        return 2
    names = [f"switch{i}" for i in range(len(grid))]
    for name, t in zip(names, grid):       # before the worker processes fork
        HEURISTICS[name] = switch(low, high, t, name)
    per = Periods(str(ROOT / "scenarios" / "swf.yaml"), [f"workload.path={path}"],
                  ns.processes)
    try:
        heur = per.run(list(CLASSIC))["means"]
        ref_i = int(np.argmin(heur[:, -2]))
        ref = heur[ref_i]
        print(f"{ns.trace}: ratio to {CLASSIC[ref_i]} (best on validation) per period: "
              + ", ".join(per.names))
        for h, row in zip(CLASSIC, heur):
            print(f"  {h:28s} " + " ".join(f"{v:.3f}" for v in row / ref))
        m = per.run([f"{n}+easy" for n in names], ("train", "validation"))["means"]
        worst = (m[:, :-1] / ref[:-1]).max(axis=1)
        for t, row, w in zip(grid, m, worst):
            print(f"  {low} below B {t:<4g}, {high} from it " + " ".join(
                f"{v:.3f}" for v in (row / ref)[:-1]) + f"  worst past {w:.3f}")
        pick = int(np.argmin(worst))
        test = per.run([f"{names[pick]}+easy"], ("test",))["means"][0, -1] / ref[-1]
        print(f"pick (lowest worst past ratio): B {grid[pick]:g}, worst past {worst[pick]:.3f}; "
              f"test {test:.3f} of {CLASSIC[ref_i]}"
              + ("" if worst[pick] < 0.95 else " (above the 0.95 margin: minimax would keep "
                                                 "the heuristic)"))
    finally:
        per.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
