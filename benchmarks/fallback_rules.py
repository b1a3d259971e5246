"""Which heuristic should ``agents tune`` keep when nothing searched qualifies?

``agents tune --fallback`` chooses among FCFS, SJF, SAF, F1, WFP3 and UNICEF
with EASY either on validation alone (``validation``, the default: the issue's
reference) or on the whole past (``median``: the lowest median, over the
training periods and validation, of the heuristic's mean bsld over each
period's best). This script measures every heuristic exactly as the tuner
does (running evaluation, defaults: four training chunks, 100 validation and
100 test windows of 256 jobs; RICC 60 windows of 2,048 jobs), on many traces,
and scores each rule by its pick's test mean bsld over the validation pick's.
No search runs, so a Lublin trace takes seconds.

Two sets of traces::

    python benchmarks/fallback_rules.py --traces design    # the traces used before stop 35
    python benchmarks/fallback_rules.py --traces holdout   # 40 fresh Lublin traces x 2 starts

``design``: the synthetic traces of stops 34-35 (``scenarios/lublin256.yaml``
with the overrides of docs/tuning.md) and ``lublin_256.swf``, each from an empty
machine and after the whole past (``--warmup all``), plus RICC from an empty
machine (``--with-ricc-warm`` adds RICC after the whole past: 15-20 minutes).
``holdout``: 40 Lublin traces whose kind, offered load, estimate model and
length are drawn from a seeded generator (seeds 101-140), each from an empty
machine and after the whole past; the rule was chosen on ``design`` before
these were run. The shared traces are read from ``../shared/traces/``; rows
that need them are skipped, with a line saying so, when it is absent.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agents.tuning.select import fallback_heuristic
from cosim.config import load_scenario
from cosim.evaluation import CLASSIC, Evaluator, chronological_split
from cosim.workloads.loading import load_workload, resolve_machine

ROOT = Path(__file__).resolve().parent.parent
LUBLIN = "scenarios/lublin256.yaml"
SWF = "scenarios/swf.yaml"
SHARED = ROOT.parent / "shared" / "traces"
DESIGN_OVERRIDES = [
    ["seed=7"],
    ["seed=7", "workload.params.kind=batch", "workload.params.load=0.9",
     "workload.estimates.model=tsafrir"],
    ["seed=11", "workload.estimates.model=tsafrir"],
    ["seed=13", "workload.jobs=20000"],
    ["seed=21"],
    ["seed=23", "workload.params.load=0.95", "workload.estimates.model=tsafrir"],
    ["seed=29", "workload.params.kind=batch"],
    ["seed=31", "workload.jobs=20000", "workload.estimates.model=tsafrir"],
    ["seed=37"],
    ["seed=41", "workload.params.load=0.95", "workload.estimates.model=tsafrir"],
    ["seed=43", "workload.params.kind=batch"],
    ["seed=47", "workload.jobs=20000", "workload.estimates.model=tsafrir"],
    ["seed=53", "workload.params.kind=interactive", "workload.params.load=0.9"],
    ["seed=59", "workload.params.load=0.8", "workload.estimates.model=tsafrir"],
    ["seed=61", "workload.params.kind=batch", "workload.params.load=0.9",
     "workload.estimates.model=tsafrir"],
    ["seed=67", "workload.jobs=20000"],
]
RULES = ("median", "worst")


def design_traces(with_ricc_warm: bool) -> list[tuple[str, list[str], str | int]]:
    rows = [(LUBLIN, o, w) for w in (0, "all") for o in DESIGN_OVERRIDES]
    rows += [(SWF, [f"workload.path={SHARED / 'lublin_256.swf'}"], w) for w in (0, "all")]
    ricc = [f"workload.path={SHARED / 'RICC-2010-2.swf.gz'}"]
    rows += [(SWF, ricc, 0)] + ([(SWF, ricc, "all")] if with_ricc_warm else [])
    return rows


def holdout_traces(rng_seed: int = 20261128, first: int = 101
                   ) -> list[tuple[str, list[str], str | int]]:
    rng = np.random.default_rng(rng_seed)
    rows = []
    for i in range(40):
        kind = rng.choice(["typeless", "batch", "interactive"])
        load = rng.choice([0.8, 0.85, 0.9, 0.95, 1.0])
        est = rng.choice(["exact", "tsafrir"])
        jobs = rng.choice([10000, 20000])
        o = [f"seed={first + i}", f"workload.params.kind={kind}", f"workload.params.load={load}",
             f"workload.estimates.model={est}", f"workload.jobs={jobs}"]
        rows += [(LUBLIN, o, 0), (LUBLIN, o, "all")]
    return rows


def measure(scenario: str, overrides: list[str], warmup, processes: int) -> dict:
    """Every classic heuristic on the training chunks, validation and test, as the tuner
    measures them (the test windows are read here because no choice is made from them)."""
    ricc = any("RICC" in o for o in overrides)
    sc = load_scenario(str(ROOT / scenario), overrides)
    wl = load_workload(sc, base_dir=ROOT / "scenarios")
    sc = resolve_machine(sc, wl)
    sp = chronological_split(wl, size=2048 if ricc else 256, train_count=4,
                             count=60 if ricc else 100,
                             warmup=len(wl) if warmup == "all" else int(warmup),
                             evaluation="running")
    with Evaluator(sc, sp.train, processes) as ev:
        train = ev.evaluate(CLASSIC)[:, :, 0]
    spans = {}
    for name, windows in (("validation", sp.validation), ("test", sp.test.read())):
        with Evaluator(sc, windows, processes, slices=[sp.slices[name]]) as ev:
            spans[name] = ev.evaluate(CLASSIC)[:, :-1, 0].mean(axis=1)
    return {"train": train, "val": spans["validation"], "test": spans["test"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", choices=("design", "holdout"), default="holdout")
    ap.add_argument("--with-ricc-warm", action="store_true",
                    help="design: also RICC after the whole past (15-20 minutes)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N traces")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--json", default=None, help="write every trace's figures here")
    ns = ap.parse_args(argv)
    rows = design_traces(ns.with_ricc_warm) if ns.traces == "design" else holdout_traces()
    ratios = {k: [] for k in RULES}
    hindsight, out = [], []
    for scenario, overrides, warmup in rows[:ns.limit]:
        path = next((o.split("=", 1)[1] for o in overrides if o.startswith("workload.path=")),
                    None)
        if path is not None and not Path(path).exists():
            print(f"skipped: {path} is absent (the shared traces)")
            continue
        m = measure(scenario, overrides, warmup, ns.processes)
        test = dict(zip(CLASSIC, m["test"]))
        ref = test[fallback_heuristic(list(CLASSIC), None, m["val"], 4)["heuristic"]]
        picks = {"median": fallback_heuristic(list(CLASSIC), m["train"], m["val"], 4,
                                              "median")["heuristic"]}
        # the worst-period rule, rejected in stop 35 (one catastrophic period decides it)
        P = np.column_stack([m["train"], m["val"]])
        picks["worst"] = CLASSIC[int(np.argmin((P / P.min(axis=0)).max(axis=1)))]
        tag = " ".join(o.split("=", 1)[1] for o in overrides if not o.startswith("workload.path"))
        tag = (tag or Path(path).name) + f" (warm-up {warmup})"
        line = {k: test[picks[k]] / ref for k in RULES}
        for k in RULES:
            ratios[k].append(line[k])
        hindsight.append(min(test.values()) / ref)
        print(f"{tag:60s} " + " ".join(f"{k} {picks[k]} {line[k]:.3f}" for k in RULES)
              + f"; best on test {min(test.values()) / ref:.3f}", flush=True)
        out.append({"scenario": scenario, "overrides": overrides, "warmup": warmup,
                    "train": m["train"].tolist(), "val": m["val"].tolist(),
                    "test": m["test"].tolist(), "picks": picks})
    if not hindsight:
        print("no traces measured", file=sys.stderr)
        return 1
    print(f"\n{len(hindsight)} traces; test mean bsld of each rule's pick over the "
          "validation pick's:")
    for k in RULES:
        v = np.array(ratios[k])
        print(f"  {k:7s} mean {v.mean():.3f}, wins {int((v < 0.999).sum())}, losses "
              f"{int((v > 1.001).sum())}, best {v.min():.3f}, worst {v.max():.3f}")
    print(f"  the best heuristic on each test span, in hindsight: mean {np.mean(hindsight):.3f}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
