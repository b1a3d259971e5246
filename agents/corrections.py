"""The harness that compares a learned correction with its base policy, paired.

A correction is an agent that adjusts a base policy's decisions: an
inspector (accept or skip each job the base proposes, :data:`INSPECT`) or a
backfiller (choose the job EASY backfills). :func:`main` is the command line
of ``benchmarks/inspector.py`` and ``benchmarks/backfiller.py`` (each passes
its :class:`Correction`): windows from disjoint Lublin generator seeds
(:data:`SEEDS`) or cut from a trace in time order (:func:`trace_protocol`), every
heuristic and the agent on the same windows (:func:`measure`), the agent
against its base and the best heuristic on validation
(:func:`cosim.evaluation.compare`), the test windows read once and only when
validation says the correction helps; :func:`probe` asks whether there is
room with a random stand-in.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from agents.reproductions import ROOT
from cosim.config import load_scenario, scenario_from_dict
from cosim.errors import CosimError
from cosim.evaluation import (
    CLASSIC,
    Evaluator,
    Protocol,
    best_heuristic,
    capacity_of,
    compare,
    job_rows,
)
from cosim.model import build
from cosim.workloads.loading import load_workload

__all__ = ["SEEDS", "lublin_maker", "trace_protocol", "offered_load", "Correction", "INSPECT",
           "probe", "run_agent", "measure", "report", "main"]

#: Generator seeds of the training, validation and test sets.
SEEDS = (1, 1002, 1003)


def lublin_maker(estimates: str, cores: int = 256):
    """``make(seed, jobs)``: a Lublin-Feitelson workload with the named estimate model."""
    def make(seed: int, jobs: int):
        sc = scenario_from_dict({"seed": seed, "cluster": {"nodes": cores},
                                 "workload": {"kind": "lublin", "jobs": jobs,
                                              "estimates": {"model": estimates}}})
        return load_workload(sc)
    return make


def trace_protocol(path: str, size: int, count: int) -> Protocol:
    """The protocol on an SWF trace: ``scenarios/swf.yaml`` on it, the machine from its
    header, and :meth:`cosim.evaluation.Protocol.chronological`'s cold windows."""
    sc = load_scenario(str(ROOT / "scenarios" / "swf.yaml"),
                       [f"workload.path={Path(path).resolve()}"])
    wl = load_workload(sc, base_dir=ROOT / "scenarios")
    return Protocol.chronological(sc, wl, size=size, train_count=1, count=count)


def offered_load(windows, cores: int) -> float:
    """Mean over windows of ``sum(run * procs) / (cores * submit span)``."""
    loads = []
    for w in windows:
        span = float(w.submit[-1] - w.submit[0]) or 1.0
        loads.append(float(np.sum(w.run * w.procs)) / (cores * span))
    return float(np.mean(loads))


class _RandomSkips:
    """A stand-in agent that skips with probability ``p`` (for :func:`probe`)."""

    def __init__(self, base: str, p: float, seed: int):
        self.env_config = {"actions": "inspect", "base_policy": base}
        self.p, self.rng = p, np.random.default_rng(seed)

    def act(self, obs, mask) -> int:
        return int(mask[1] and self.rng.random() < self.p)


@dataclass(frozen=True)
class Correction:
    """What differs between the learned corrections this harness compares with their base
    (:data:`INSPECT`, ``backfill`` in ``benchmarks/backfiller.py``): the rest is shared."""

    actions: str                  # the action model a checkpoint must have
    label: str                    # its row name
    random_agent: Callable        # (base, p, seed) -> a stand-in agent for --probe
    probe_what: str               # what the stand-in does, for the probe's line
    counts: Callable              # policies of a set -> (key, plain data) of its choices
    describe: Callable            # that data -> one line
    default_base: str = "f1+easy"
    default_estimates: str = "exact"


def _skip_rate(policies) -> tuple[str, float]:
    skips = sum(getattr(p, "skips", 0) for p in policies)
    accepts = sum(getattr(p, "accepts", 0) for p in policies)
    return "skip_rate", skips / max(1, skips + accepts)


INSPECT = Correction("inspect", "inspector", _RandomSkips, "random skips", _skip_rate,
                     lambda r: f"inspector skip rate {r:.3%} of its proposals")


def probe(scenario, windows, base: str, p: float, tries: int,
          correction: Correction = INSPECT) -> None:
    """Is there room? The correction's random stand-in with probability ``p``, ``tries``
    seeds per window.

    Prints the mean ratio to the base over all tries and the best try per
    window (an optimistic bound: it selects on the windows themselves).
    """
    with Evaluator(scenario, windows) as ev:
        ref = ev.evaluate([base])[0, :, 0]
        scenario = ev.scenario
    make = correction.random_agent
    ratios = np.array([[run_agent(scenario, make(base, p, 1000 * k + i), w)[0] / ref[i]
                        for k in range(tries)] for i, w in enumerate(windows)])
    best = ratios.min(axis=1)
    print(f"-- probe: {correction.probe_what} p={p} over {base}, {tries} tries x "
          f"{len(windows)} windows: mean per-window ratio {ratios.mean():.3f}, tries better "
          f"than the base {np.mean(ratios < 1):.1%}; best try per window: mean "
          f"{best.mean():.3f}, windows improved {np.mean(best < 1):.0%}")


def run_agent(scenario, agent, window) -> tuple[float, float, float, object]:
    """The agent on one window: mean bsld, mean wait, max wait, and its policy (whose
    counters say what it chose).

    The metrics are those of :func:`cosim.evaluation.run_window`.
    """
    from cosim.env.acting import acting_policy

    policy = acting_policy(agent.env_config or {}, scenario, window, agent.act, name="agent")
    env = simpy.Environment()
    sim = build(env, scenario, policy, workload=window, record=False)
    sim.run()
    bsld, wait, queued = job_rows(sim.scheduler.jobs, len(window), scenario.metrics.tau)
    done = ~np.isnan(bsld)
    return (float(np.mean(bsld[done])), float(np.mean(wait[done])), float(np.nanmax(queued)),
            policy)


def measure(scenario, windows, agent, names, correction: Correction = INSPECT) -> dict:
    """Heuristics and the agent on ``windows``: per-window bsld and max wait, and what the
    agent chose."""
    with Evaluator(scenario, windows) as ev:
        values = ev.evaluate(list(names))
        scenario = ev.scenario
    out = {"bsld": {n: values[i, :, 0] for i, n in enumerate(names)},
           "max_wait": {n: values[i, :, 2] for i, n in enumerate(names)}}
    if agent is not None:
        rows = [run_agent(scenario, agent, w) for w in windows]
        out["bsld"][correction.label] = np.array([r[0] for r in rows])
        out["max_wait"][correction.label] = np.array([r[2] for r in rows])
        key, value = correction.counts([r[3] for r in rows])
        out["choices"] = (key, value)
    return out


def report(label: str, m: dict, base: str, best: str, agent,
           correction: Correction = INSPECT) -> dict:
    """Print one set's figures; returns them as plain data."""
    print(f"-- {label}")
    for name, v in sorted(m["bsld"].items(), key=lambda kv: float(np.mean(kv[1]))):
        print(f"   {name:<12} mean bsld {np.mean(v):8.2f}   max wait "
              f"{np.max(m['max_wait'][name]):9.0f} s")
    data = {"mean_bsld": {k: float(np.mean(v)) for k, v in m["bsld"].items()}}
    if agent is not None:
        for ref in dict.fromkeys((base, best)):
            c = compare(m["bsld"][correction.label], m["bsld"][ref], policy=correction.label,
                        reference_name=ref)
            print("   " + c.summary())
            data[f"vs {ref}"] = c.as_dict()
        key, value = m["choices"]
        print("   " + correction.describe(value))
        data[key] = value
    return data


def main(argv=None, correction: Correction = INSPECT) -> int:
    """The command line of ``benchmarks/inspector.py`` and ``benchmarks/backfiller.py``."""
    what = correction.label
    ap = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or __doc__)
                                 .splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help=f"a trained {what} (agents train "
                    f"--actions {correction.actions}); without it, only the heuristics")
    ap.add_argument("--estimates", choices=("exact", "tsafrir"),
                    default=correction.default_estimates)
    ap.add_argument("--size", type=int, default=256, help="jobs per window")
    ap.add_argument("--windows", type=int, default=100, help="validation and test windows each")
    ap.add_argument("--test", action="store_true",
                    help=f"read the test windows once, if validation says the {what} helps")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--probe", type=float, default=None, metavar="P",
                    help=f"instead: {correction.probe_what} with probability P over --base "
                         "(is there room?), on the first --windows validation windows")
    ap.add_argument("--trace", default=None, metavar="SWF",
                    help="instead of Lublin windows: windows of this trace, cut in time order "
                         "as agents tune cuts it (validation from 50 to 70 %% of its jobs, test "
                         "the last 30 %%), each run from an empty machine, with the trace's own "
                         "requests as estimates (--estimates does not apply)")
    ap.add_argument("--base", default="saf+easy", help="--probe's base policy")
    ap.add_argument("--tries", type=int, default=8, help="--probe's seeds per window")
    ns = ap.parse_args(argv)
    t0 = time.perf_counter()
    agent, base = None, correction.default_base
    if ns.checkpoint:
        from agents.rl_policy import load_rl_policy

        agent = load_rl_policy(ns.checkpoint)
        cfg = agent.env_config or {}
        if cfg.get("actions") != correction.actions:
            print(f"error: {ns.checkpoint}: expected an agent with actions="
                  f"{correction.actions!r}, got actions={cfg.get('actions')!r}", file=sys.stderr)
            return 2
        base = cfg.get("base_policy") or "sjf+easy"
    if ns.trace:
        try:
            protocol = trace_protocol(ns.trace, ns.size, ns.windows)
        except CosimError as err:       # no such trace, or too short: one line
            print(f"error: {err}", file=sys.stderr)
            return 2
        what_data = f"{Path(ns.trace).name}, the trace's requests as estimates"
    else:
        scenario = scenario_from_dict({"cluster": {"nodes": 256}, "metrics": {"tau": 10},
                                       "workload": {"kind": "lublin", "jobs": 1}})
        protocol = Protocol.seeded(scenario, lublin_maker(ns.estimates), size=ns.size,
                                   train_count=1, count=ns.windows, seeds=SEEDS)
        what_data = f"Lublin-Feitelson, {ns.estimates} estimates"
    scenario, split = protocol.scenario, protocol.split
    cores = capacity_of(scenario)
    if ns.probe is not None:
        probe(scenario, split.validation, ns.base, ns.probe, ns.tries, correction)
        return 0
    names = list(dict.fromkeys([*CLASSIC, base]))
    val = measure(scenario, split.validation, agent, names, correction)
    best = best_heuristic({n: val["bsld"][n] for n in CLASSIC})
    print(f"{what_data}, {cores} units, {len(split.validation)} windows of {ns.size} jobs; "
          + (f"{split.note}; " if split.note else "") + "offered load (validation) "
          f"{offered_load(split.validation, cores):.2f}; base {base}; best heuristic on "
          f"validation {best}")
    figures = {"estimates": "trace" if ns.trace else ns.estimates, "base": base, "best": best,
               "validation": report("validation", val, base, best, agent, correction)}
    if agent is not None and ns.test:
        if not figures["validation"][f"vs {base}"]["mean_ratio_ci"][1] < 1.0:
            print(f"-- test: not read (validation does not say the {what} helps: the upper "
                  "end of its mean-ratio interval against its base is not below 1)")
        else:
            test_windows = protocol.test_windows()
            figures["test"] = report("test", measure(scenario, test_windows, agent,
                                                     [base, best], correction),
                                     base, best, agent, correction)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"({figures['seconds']} s)")
    if ns.json:
        Path(ns.json).write_text(json.dumps(figures, indent=1, default=float))
    return 0

