"""Slurm's multifactor priority and backfill against the classic heuristics on real traces.

The experiment, per trace (gzipped SWF, the users' requests as estimates):

1. **The past chooses.** The first 70 % of the jobs (by submit order) is the
   past. ``slurm`` is tuned on it with the tuner of ``python -m agents tune
   --space slurm`` (:func:`agents.tuning.prepare` and
   :func:`agents.tuning.select_slurm`, its defaults: a max wait at most 2x
   FCFS+EASY's): search on the training chunks of its first 50 %, selection
   on its last 20 % measured inside one run (after ``--warmup`` jobs). The
   best classic heuristic is chosen on the past too, twice: by mean bsld alone
   (the issue's reference) and among those whose max wait there is at most 2x
   FCFS+EASY's (the bound the tuned policy is held to).
2. **The future is read once.** Every policy (FCFS, SJF, SAF, F1, WFP3 and
   UNICEF with EASY; ``slurm`` at Slurm's defaults; the tuned ``slurm``) is
   replayed once through the whole trace, and each of five periods of its
   jobs is scored inside that run: P1-P3 the past (0-70 %), P4 (70-85 %) and
   P5 (85-100 %) the future. Per period: mean bounded slowdown (tau 10 s),
   mean and max wait, the jobs that waited more than a day and more than a
   week (:func:`cosim.evaluation.job_rows`, :func:`cosim.metrics.starvation`).

Printed: one table per trace, the tuned knobs and their slurm.conf lines, the
targets (tuned vs the past's best classic, unbounded and bounded; its max wait
vs 2x FCFS+EASY's; vs Slurm's defaults, all on the future; the future periods
within 1.1x of the period's best classic), and how often each policy is within
1.1x of the period's best mean bsld, past periods apart from future ones.

    PYTHONPATH=. python benchmarks/slurm_traces.py [--traces SDSC-SP2 CTC-SP2] \\
        [--jobs N] [--generations 2] [--processes 2]

``--jobs N`` replays a prefix of N jobs of each trace instead of the whole.
``--speed`` only times FCFS+EASY and ``slurm`` with Slurm-style backfill at
depth 100 and a one-day window (``slurm:bf_max_job_test=100``) on each trace,
alternately ``--repeat`` times, and prints the best jobs/s of each and their
ratio (the speed target: at least 0.3x).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import simpy
import yaml

from agents.tuning import prepare, select_slurm
from agents.tuning.options import DEFAULT_MAX_WAIT
from cosim.config import scenario_from_dict
from cosim.evaluation import CLASSIC, job_rows
from cosim.metrics import starvation
from cosim.model import build
from cosim.policies import make_policy
from cosim.policies.slurm_params import anchor_points, slurm_conf
from cosim.workloads.swf import read_swf

TRACES = {"SDSC-SP2": "SDSC-SP2-1998-4.2-cln.swf.gz", "CTC-SP2": "CTC-SP2-1996-3.1-cln.swf.gz",
          "HPC2N": "HPC2N-2002-2.2-cln.swf.gz", "RICC": "RICC-2010-2.swf.gz"}
#: Period bounds as fractions of the jobs: three of the past, two of the future.
BOUNDS = (0.0, 7 / 30, 14 / 30, 0.7, 0.85, 1.0)
PAST_PERIODS, FUTURE_PERIODS = (0, 1, 2), (3, 4)
#: The tuner's cut points inside the past: train on 0-50 %, validate on 50-70 %.
SPLIT = (0.5, 0.7)
DEFAULTS = "slurm"
TUNED = "slurm tuned"


def load(path: Path, jobs: int | None):
    w = read_swf(path)
    return w.take(slice(0, jobs)) if jobs else w


def replay(path: str, jobs: int | None, policy: str) -> dict:
    """Per job (in submit order) bsld, wait and time queued of one run of ``policy``
    through the trace (its first ``jobs`` jobs)."""
    w = load(Path(path), jobs)
    cores = int(w.max_procs or w.procs.max())
    scenario = scenario_from_dict({"cluster": {"nodes": cores, "cores_per_node": 1},
                                   "workload": {"kind": "swf", "path": str(path)}})
    env = simpy.Environment()
    t0 = time.perf_counter()
    sim = build(env, scenario, make_policy(policy), workload=w, record=False)
    sim.run()
    seconds = time.perf_counter() - t0
    bsld, wait, queued = job_rows(sim.scheduler.jobs, len(w), scenario.metrics.tau)
    return {"policy": policy, "bsld": bsld, "wait": wait, "queued": queued,
            "seconds": seconds, "jobs": len(w)}


def score(run: dict, lo: int, hi: int) -> dict:
    """A period's figures: the jobs of rows ``[lo, hi)`` inside the policy's one run."""
    bsld, wait, queued = run["bsld"][lo:hi], run["wait"][lo:hi], run["queued"][lo:hi]
    done = ~np.isnan(bsld)
    s = starvation(queued)
    return {"bsld_mean": float(bsld[done].mean()), "wait_mean": float(wait[done].mean()),
            "wait_max": float(np.nanmax(queued)), "starved_1d": s["starved_1d"],
            "starved_1w": s["starved_1w"]}


def tune_on_past(path: str, jobs: int | None, args, echo) -> dict:
    """``agents tune --space slurm``'s search and selection on the first 70 % alone."""
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "trace.yaml"
        scenario.write_text(yaml.safe_dump({"name": Path(path).name, "workload": {
            "kind": "swf", "path": str(Path(path).resolve())}}))
        run = prepare(str(scenario), [f"workload.jobs={jobs}"] if jobs else [], 1e6,
                      echo=echo, space="slurm", split=SPLIT, evaluation="running",
                      warmup=args.warmup, max_wait=DEFAULT_MAX_WAIT, keep=args.keep,
                      generations=args.generations, processes=args.processes, seed=args.seed,
                      user_features=False)
        return select_slurm(run)


def best_classic(past: dict, bounded: bool) -> str:
    """The classic heuristic of lowest mean bsld on the past (with ``bounded``, among those
    whose max wait there is at most 2x FCFS+EASY's)."""
    cap = DEFAULT_MAX_WAIT * past["fcfs+easy"]["wait_max"]
    return min((h for h in CLASSIC if not bounded or past[h]["wait_max"] <= cap),
               key=lambda h: past[h]["bsld_mean"])


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def trace_table(label: str, runs: dict, bounds: list[int]) -> list[str]:
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
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fmt(f['bsld_mean'])} | "
                     f"{fmt(f['wait_mean'])} | {fmt(f['wait_max'])} | {f['starved_1d']} | "
                     f"{f['starved_1w']} |")
    return lines


def search_lines(sel: dict) -> list[str]:
    """What the search scored: the points nearest the heuristics and the best found."""
    s, val = sel["search"], sel["validation"]
    near = [p for p in s if p.get("near")]
    anchors = len(anchor_points())
    lines = [f"Search: {len(s)} points (Slurm's defaults, {len(near)} nearest the classic "
             f"heuristics, {anchors - len(near)} of them with a slow age, "
             f"{sel['generations']} generations of 8 random points by successive halving over "
             "the training chunks); on validation (the past's last 20 %):", "",
             "| slurm point | nearest | training fitness | validation bsld | span whole "
             "| validation max wait (s) | eligible |", "|---|---|---|---|---|---|---|"]
    fit = {p["policy"]: p for p in s}
    for n in val["names"]:
        if not n.startswith("slurm"):
            continue
        p = fit.get(n, {})
        lines.append(f"| `{n}` | {p.get('near') or '-'} | "
                     f"{p['fitness']:.3f} ({p['chunks']} chunks) | " if p else f"| `{n}` | - | - | ")
        lines[-1] += (f"{val['bsld'][n]:.2f} | {val['whole'][n]:.2f} | "
                      f"{val['max_wait'][n]:,.0f} | {'yes' if n in val['eligible'] else 'no'} |")
    return lines + [""]


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
                r = replay(path, args.jobs, name)
                best[name] = max(best[name], r["jobs"] / r["seconds"])
        easy, ours = best["fcfs+easy"], best[SPEED_POLICY]
        print(f"| {label} | {r['jobs']:,} | {easy:,.0f} | {ours:,.0f} | {ours / easy:.2f}x |",
              flush=True)


def one_trace(label: str, args, pool, hits: dict) -> tuple[list[str], str]:
    """The trace's tables and its targets row."""
    path = str(Path(args.dir) / TRACES[label])
    n = len(load(Path(path), args.jobs))
    sel = tune_on_past(path, args.jobs, args, lambda m: print(f"  [{label}] {m}", flush=True))
    chosen = sel["chosen"]
    # -- the future, read once: every policy through the whole trace ----------------------
    names = list(CLASSIC) + [DEFAULTS] + ([chosen] if chosen != DEFAULTS else [])
    futures = [pool.submit(replay, path, args.jobs, nm) for nm in names]
    runs = {nm: f.result() for nm, f in zip(names, futures)}
    if chosen != DEFAULTS:
        runs[TUNED] = runs.pop(chosen)
    else:
        runs[TUNED] = runs[DEFAULTS]
    bounds = [int(round(b * n)) for b in BOUNDS]
    past = {nm: score(r, 0, bounds[3]) for nm, r in runs.items()}
    unb, bnd = best_classic(past, False), best_classic(past, True)
    out = trace_table(f"{label} ({n:,} jobs)", runs, bounds) + [""]
    out += [f"Tuned on the past: `{chosen}`; best classic on the past {unb}, within 2x "
            f"FCFS+EASY's max wait there {bnd}; the tuner's reference on validation "
            f"{sel['reference']}.", ""] + search_lines(sel)
    out += ["```", slurm_conf(chosen), "```", ""]
    for k in range(5):
        period = "past" if k in PAST_PERIODS else "future"
        s = {nm: score(r, bounds[k], bounds[k + 1])["bsld_mean"] for nm, r in runs.items()}
        best = min(s.values())
        for nm, v in s.items():
            got = hits[period].setdefault(nm, [0, 0])
            got[0] += v <= 1.1 * best
            got[1] += 1
    fut = {nm: score(r, bounds[3], bounds[5]) for nm, r in runs.items()}
    t = fut[TUNED]
    cap = DEFAULT_MAX_WAIT * fut["fcfs+easy"]["wait_max"]
    within = sum(score(runs[TUNED], bounds[k], bounds[k + 1])["bsld_mean"]
                 <= 1.1 * min(score(runs[h], bounds[k], bounds[k + 1])["bsld_mean"]
                              for h in CLASSIC) for k in FUTURE_PERIODS)
    row = (f"| {label} | {t['bsld_mean']:.2f} | {t['bsld_mean'] / fut[unb]['bsld_mean']:.2f} "
           f"({unb}) | {t['bsld_mean'] / fut[bnd]['bsld_mean']:.2f} ({bnd}) | "
           f"{t['wait_max']:,.0f} / {cap:,.0f} = {t['wait_max'] / cap:.2f} | "
           f"{t['bsld_mean'] / fut[DEFAULTS]['bsld_mean']:.2f} | {within}/2 |")
    return out, row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--dir", default="../shared/traces", help="where the traces are")
    ap.add_argument("--jobs", type=int, default=None, help="replay a prefix of N jobs")
    ap.add_argument("--generations", type=int, default=2,
                    help="generations of 8 random slurm points searched (after the points "
                         "nearest the classic heuristics)")
    ap.add_argument("--keep", type=int, default=3, help="random points taken to validation")
    ap.add_argument("--warmup", type=int, default=2000,
                    help="jobs of the past run before the validation span, not measured")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--speed", action="store_true", help="only time fcfs+easy against slurm")
    ap.add_argument("--repeat", type=int, default=3, help="--speed: runs of each, best kept")
    args = ap.parse_args()
    if args.speed:
        time_speed(args)
        return
    started = datetime.now(UTC)
    hits: dict = {"past": {}, "future": {}}
    out: list[str] = []
    targets: list[str] = []
    with ProcessPoolExecutor(max(1, args.processes)) as pool:
        for label in args.traces:
            lines, row = one_trace(label, args, pool, hits)
            out += lines
            targets.append(row)
            print("\n".join(lines), flush=True)
    lines = [f"Run {started:%Y-%m-%d %H:%M} UTC: `PYTHONPATH=. python benchmarks/slurm_traces.py "
             f"--traces {' '.join(args.traces)}" + (f" --jobs {args.jobs}" if args.jobs else "")
             + f" --generations {args.generations} --keep {args.keep} --warmup {args.warmup} "
             f"--seed {args.seed}`", ""] + out
    lines += ["### Targets (future = last 30 %)", "",
              "| trace | tuned bsld | tuned / best classic of the past | tuned / best classic "
              "of the past within 2x FCFS+EASY's max wait | tuned max wait / 2x FCFS+EASY's "
              "| tuned / defaults | future periods within 1.1x of the best classic |",
              "|---" * 7 + "|"] + targets + [""]
    lines += ["### Within 1.1x of the period's best mean bsld", "",
              "| policy | past periods | future periods |", "|---|---|---|"]
    for key in hits["past"]:
        p, f = hits["past"][key], hits["future"].get(key, [0, 0])
        lines.append(f"| {key} | {p[0]}/{p[1]} | {f[0]}/{f[1]} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
