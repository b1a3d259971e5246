"""Slurm's multifactor priority and backfill against the classic heuristics on real traces.

Each trace (gzipped SWF, user requests as estimates) is replayed whole by
every policy, and scored per period of its jobs (by submit order): three
periods of the past (0-70 %) and two of the future (70-85 %, 85-100 %).
Per period: mean bounded slowdown (tau 10 s), mean and max wait, and the
jobs that waited more than a day and more than a week (cosim.metrics).

The policies: FCFS, SJF, SAF, F1, WFP3 and UNICEF with EASY; ``slurm`` at
Slurm's defaults; and a ``slurm`` tuned on the past: ``--candidates`` points
of the search space (``cosim.policies.slurm_params.slurm_candidates``, Slurm's
defaults first) are replayed on the first 70 % of the jobs alone, and the one
with the lowest mean bsld there whose max wait is at most 2x FCFS+EASY's
on the same past is kept (Slurm's defaults when none qualifies). The best
classic heuristic is chosen the same way, on the same past, by mean bsld.
Only then are the future periods read.

Printed: one table per trace, the tuned knobs and their slurm.conf lines, the
targets (tuned vs the past's best classic on the future, its max wait vs
2x FCFS+EASY's, vs Slurm's defaults), and how often each policy is within
1.1x of the period's best mean bsld, past periods apart from future ones.

    PYTHONPATH=. python benchmarks/slurm_traces.py [--traces SDSC-SP2 CTC-SP2] \\
        [--jobs N] [--candidates 8] [--processes 2]

``--jobs N`` replays a prefix of N jobs of each trace instead of the whole.
``--speed`` only times FCFS+EASY and ``slurm`` with Slurm-style backfill at
depth 100 and a one-day window (``slurm:bf_max_job_test=100``) on each trace,
alternately ``--repeat`` times, and prints the best jobs/s of each and their
ratio (the speed target: at least 0.3x).
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import simpy

from cosim.config import scenario_from_dict
from cosim.evaluation import CLASSIC
from cosim.metrics import job_metrics, starvation
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.slurm_params import slurm_candidates, slurm_conf
from cosim.workloads.swf import read_swf

TRACES = {"SDSC-SP2": "SDSC-SP2-1998-4.2-cln.swf.gz", "CTC-SP2": "CTC-SP2-1996-3.1-cln.swf.gz",
          "HPC2N": "HPC2N-2002-2.2-cln.swf.gz", "RICC": "RICC-2010-2.swf.gz"}
#: Period bounds as fractions of the jobs: three of the past, two of the future.
BOUNDS = (0.0, 7 / 30, 14 / 30, 0.7, 0.85, 1.0)
PAST_PERIODS, FUTURE_PERIODS = (0, 1, 2), (3, 4)
PAST = 0.7
DEFAULTS = "slurm"


def load(path: Path, jobs: int | None):
    w = read_swf(path)
    return w.take(slice(0, jobs)) if jobs else w


def replay(path: str, jobs: int | None, rows: int | None, policy: str) -> dict:
    """Wait and bsld per job of the first ``rows`` jobs (all when None) under ``policy``."""
    w = load(Path(path), jobs)
    if rows is not None:
        w = w.take(slice(0, rows))
    cores = int(w.max_procs or w.procs.max())
    scenario = scenario_from_dict({"cluster": {"nodes": cores, "cores_per_node": 1},
                                   "workload": {"kind": "swf", "path": str(path)}})
    env = simpy.Environment()
    t0 = time.perf_counter()
    sim = build(env, scenario, make_policy(policy), workload=w, record=False)
    sim.run()
    seconds = time.perf_counter() - t0
    js = sorted(sim.scheduler.jobs, key=lambda j: j.index)
    table = {k: np.array([getattr(j, k) for j in js]) for k in
             ("submit", "start", "end", "procs", "killed_seconds", "killed_core_seconds")}
    table["run"] = np.array([j.end - j.start for j in js])
    table["outcome"] = np.array([j.outcome for j in js])
    m = job_metrics(table, tau=10.0)
    return {"policy": policy, "wait": m["wait"], "bsld": m["bsld"], "seconds": seconds,
            "jobs": len(w)}


def score(run: dict, lo: int, hi: int) -> dict:
    wait, bsld = run["wait"][lo:hi], run["bsld"][lo:hi]
    ok = np.isfinite(bsld)
    s = starvation(wait)
    return {"bsld_mean": float(bsld[ok].mean()), "wait_mean": float(wait[ok].mean()),
            "wait_max": float(wait[ok].max()), "starved_1d": s["starved_1d"],
            "starved_1w": s["starved_1w"]}


def run_all(pool, tasks):
    futures = [pool.submit(replay, *t) for t in tasks]
    return [f.result() for f in futures]


def tune(pool, path, jobs, n_past, candidates, seed) -> tuple[str, dict, str, list]:
    """The tuned slurm and the best classic, both chosen on the past alone."""
    names = [p.policy_name() for p in slurm_candidates(candidates, seed)]
    runs = run_all(pool, [(path, jobs, n_past, name) for name in list(CLASSIC) + names])
    past = {r["policy"]: score(r, 0, n_past) for r in runs}
    bound = 2.0 * past["fcfs+easy"]["wait_max"]
    best_classic = min(CLASSIC, key=lambda n: past[n]["bsld_mean"])
    ok = [n for n in names if past[n]["wait_max"] <= bound] or [DEFAULTS]
    chosen = min(ok, key=lambda n: past[n]["bsld_mean"])
    return chosen, past, best_classic, names


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def trace_table(label: str, runs: dict, bounds: list[int], chosen: str) -> list[str]:
    lines = [f"### {label}", "",
             "| policy | " + " | ".join(f"P{k + 1} bsld (max wait s)" for k in range(5))
             + " | future bsld | future wait mean | future wait max | >1 d | >1 w |",
             "|---" * 11 + "|"]
    for name, run in runs.items():
        cells = []
        for k in range(5):
            s = score(run, bounds[k], bounds[k + 1])
            cells.append(f"{fmt(s['bsld_mean'])} ({fmt(s['wait_max'])})")
        f = score(run, bounds[3], bounds[5])
        shown = "slurm tuned" if name == chosen and name != DEFAULTS else name
        lines.append(f"| {shown} | " + " | ".join(cells) + f" | {fmt(f['bsld_mean'])} | "
                     f"{fmt(f['wait_mean'])} | {fmt(f['wait_max'])} | {f['starved_1d']} | "
                     f"{f['starved_1w']} |")
    return lines


SPEED_POLICY = "slurm:bf_max_job_test=100"


def time_speed(args) -> None:
    """Best jobs/s of FCFS+EASY and of slurm at depth 100, window 1 day, per trace."""
    print("| trace | jobs | fcfs+easy jobs/s | slurm depth 100, window 1 d jobs/s | ratio |")
    print("|---|---|---|---|---|")
    for label in args.traces:
        path = str(Path(args.dir) / TRACES[label])
        best = {"fcfs+easy": 0.0, SPEED_POLICY: 0.0}
        for _ in range(max(1, args.repeat)):
            for name in best:
                r = replay(path, args.jobs, None, name)
                best[name] = max(best[name], r["jobs"] / r["seconds"])
        easy, ours = best["fcfs+easy"], best[SPEED_POLICY]
        print(f"| {label} | {r['jobs']:,} | {easy:,.0f} | {ours:,.0f} | {ours / easy:.2f}x |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--dir", default="../shared/traces", help="where the traces are")
    ap.add_argument("--jobs", type=int, default=None, help="replay a prefix of N jobs")
    ap.add_argument("--candidates", type=int, default=8, help="slurm points tried on the past")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--speed", action="store_true", help="only time fcfs+easy against slurm")
    ap.add_argument("--repeat", type=int, default=3, help="--speed: runs of each, best kept")
    args = ap.parse_args()
    if args.speed:
        time_speed(args)
        return
    started = datetime.now(UTC)
    hits = {"past": {}, "future": {}}
    out: list[str] = []
    targets: list[str] = []
    with ProcessPoolExecutor(max(1, args.processes)) as pool:
        for label in args.traces:
            path = str(Path(args.dir) / TRACES[label])
            n = len(load(Path(path), args.jobs))
            n_past = int(n * PAST)
            chosen, past, best_classic, _ = tune(pool, path, args.jobs, n_past,
                                                 args.candidates, args.seed)
            names = list(CLASSIC) + [DEFAULTS] + ([chosen] if chosen != DEFAULTS else [])
            runs = {r["policy"]: r for r in run_all(pool, [(path, args.jobs, None, name)
                                                           for name in names])}
            bounds = [int(round(b * n)) for b in BOUNDS]
            out += trace_table(f"{label} ({n:,} jobs)", runs, bounds, chosen) + [""]
            out += [f"Tuned on the past: `{chosen}` (best classic on the past: "
                    f"{best_classic}).", "", "```", slurm_conf(chosen), "```", ""]
            for k in range(5):
                period = "past" if k in PAST_PERIODS else "future"
                s = {nm: score(r, bounds[k], bounds[k + 1])["bsld_mean"] for nm, r in runs.items()}
                best = min(s.values())
                for nm, v in s.items():
                    key = "slurm tuned" if nm == chosen and nm != DEFAULTS else nm
                    got = hits[period].setdefault(key, [0, 0])
                    got[0] += v <= 1.1 * best
                    got[1] += 1
            fut = {nm: score(r, bounds[3], bounds[5]) for nm, r in runs.items()}
            t, c, d = fut[chosen], fut[best_classic], fut[DEFAULTS]
            cap = 2.0 * fut["fcfs+easy"]["wait_max"]
            classic_best = [min(score(runs[nm], bounds[k], bounds[k + 1])["bsld_mean"]
                                for nm in CLASSIC) for k in FUTURE_PERIODS]
            within = sum(score(runs[chosen], bounds[k], bounds[k + 1])["bsld_mean"]
                         <= 1.1 * b for k, b in zip(FUTURE_PERIODS, classic_best))
            speed = {nm: r["jobs"] / r["seconds"] for nm, r in runs.items()}
            targets.append(
                f"| {label} | {t['bsld_mean']:.2f} | {c['bsld_mean']:.2f} ({best_classic}) | "
                f"{t['bsld_mean'] / c['bsld_mean']:.2f} | {t['wait_max']:,.0f} / {cap:,.0f} | "
                f"{t['bsld_mean'] / d['bsld_mean']:.2f} | {within}/2 | "
                f"{speed[DEFAULTS] / speed['fcfs+easy']:.2f} |")
            print("\n".join(out[-(len(runs) + 12):]), flush=True)
    lines = [f"Run {started:%Y-%m-%d %H:%M} UTC: `PYTHONPATH=. python benchmarks/slurm_traces.py "
             f"--traces {' '.join(args.traces)}"
             + (f" --jobs {args.jobs}" if args.jobs else "")
             + f" --candidates {args.candidates} --seed {args.seed}`", ""] + out
    lines += ["### Targets (future = last 30 %)", "",
              "| trace | tuned bsld | best classic of the past | ratio | tuned max wait / 2x "
              "FCFS+EASY's | tuned / defaults | future periods within 1.1x of the best classic "
              "| slurm defaults jobs/s over FCFS+EASY's |", "|---" * 8 + "|"] + targets + [""]
    lines += ["### Within 1.1x of the period's best mean bsld", "",
              "| policy | past periods | future periods |", "|---|---|---|"]
    for key in hits["past"]:
        p, f = hits["past"][key], hits["future"].get(key, [0, 0])
        lines.append(f"| {key} | {p[0]}/{p[1]} | {f[0]}/{f[1]} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
