"""Does a learned backfilling order (``--actions backfill``) beat its EASY base? Paired, with intervals.

The protocol of :mod:`cosim.evaluation`, as ``benchmarks/inspector.py``:
windows of Lublin-Feitelson jobs (256 cores) from disjoint generator seeds,
training (the agent's own scenario, seed 1), validation (seed 1002) and test
(seed 1003); every policy runs on the same windows; the agent is compared
with its base policy (mean-bsld ratio and median per-window ratio, 95 %
bootstrap intervals, wins and losses) and with the best classic heuristic,
chosen on validation. The test windows are read once, and only when
validation says the agent helps (the upper end of its mean-ratio interval
against its base below 1).

Train one first, e.g. (about 9 minutes of 2 shared cores)::

    python -m agents train scenarios/lublin256.yaml --set workload.estimates.model=tsafrir \\
        --actions backfill --base-policy saf+easy --paired saf+easy --paired-mode log \\
        --contention-min 0.05 --teacher saf+easy --bc-steps 2048 --mimic-decay 0.25 \\
        --episode-jobs 256 --arg gamma=1.0 --arg gae_lambda=1.0 --envs 4 \\
        --time-budget 540 --out runs/backfill-tsafrir

then::

    python benchmarks/backfiller.py --checkpoint runs/backfill-tsafrir --estimates tsafrir [--test]
    python benchmarks/backfiller.py --probe 0.2 --base saf+easy --windows 30   # is there room?

Prints every heuristic's mean bsld on validation, the agent against its base
and the best heuristic, and how often the greedy agent departs from EASY's
own pick (slot 0) or stops backfilling.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import simpy

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.inspector import SEEDS, lublin_maker, offered_load  # noqa: E402
from cosim.config import scenario_from_dict  # noqa: E402
from cosim.evaluation import CLASSIC, Evaluator, best_heuristic, compare, seeded_split  # noqa: E402
from cosim.job import Outcome  # noqa: E402
from cosim.model import build  # noqa: E402


class _RandomDepartures:
    """A stand-in agent: EASY's pick, except with probability ``p`` a random other legal
    action (another candidate or stop), for :func:`probe`."""

    def __init__(self, base: str, p: float, seed: int):
        self.env_config = {"actions": "backfill", "base_policy": base}
        self.p, self.rng = p, np.random.default_rng(seed)

    def act(self, obs, mask) -> int:
        others = np.flatnonzero(mask[1:]) + 1
        if len(others) and self.rng.random() < self.p:
            return int(self.rng.choice(others))
        return 0


def probe(scenario, windows, base: str, p: float, tries: int) -> None:
    """Is there room? Random departures from EASY's order with probability ``p``.

    Prints the mean ratio to the base over all tries and the best try per
    window (an optimistic bound: it selects on the windows themselves).
    """
    with Evaluator(scenario, windows) as ev:
        ref = ev.evaluate([base])[0, :, 0]
        scenario = ev.scenario
    ratios = np.array([[run_agent(scenario, _RandomDepartures(base, p, 1000 * k + i), w)[0]
                        / ref[i] for k in range(tries)] for i, w in enumerate(windows)])
    best = ratios.min(axis=1)
    print(f"-- probe: random departures p={p} over {base}, {tries} tries x {len(windows)} "
          f"windows: mean per-window ratio {ratios.mean():.3f}, tries better than the base "
          f"{np.mean(ratios < 1):.1%}; best try per window: mean {best.mean():.3f}, "
          f"windows improved {np.mean(best < 1):.0%}")


def run_agent(scenario, agent, window) -> tuple[float, float, int, int, int]:
    """The agent on one window: mean bsld, max wait, asks, departures from slot 0, stops.

    The metrics are those of :func:`cosim.evaluation.run_window`.
    """
    from cosim.env.acting import acting_policy

    policy = acting_policy(agent.env_config or {}, scenario, window, agent.act, name="agent")
    env = simpy.Environment()
    sim = build(env, scenario, policy, workload=window, record=False)
    env.run(until=sim.finished)
    tau = scenario.metrics.tau
    bs, waits = [], []
    for j in sim.scheduler.jobs:
        if j.outcome in (Outcome.COMPLETED, Outcome.TIMEOUT):
            bs.append(max(1.0, (j.end - j.submit) / max(tau, j.end - j.start)))
            waits.append(j.start - j.submit)
    return (float(np.mean(bs)), float(np.max(waits)), policy.asks, policy.departures,
            policy.stops)


def measure(scenario, windows, agent, names) -> dict:
    """Heuristics and the agent on ``windows``: per-window bsld and max wait, and its choices."""
    with Evaluator(scenario, windows) as ev:
        values = ev.evaluate(list(names))
        scenario = ev.scenario
    out = {"bsld": {n: values[i, :, 0] for i, n in enumerate(names)},
           "max_wait": {n: values[i, :, 2] for i, n in enumerate(names)}}
    if agent is not None:
        rows = [run_agent(scenario, agent, w) for w in windows]
        out["bsld"]["backfiller"] = np.array([r[0] for r in rows])
        out["max_wait"]["backfiller"] = np.array([r[1] for r in rows])
        asks = sum(r[2] for r in rows)
        out["choices"] = {"asks": asks, "departures": sum(r[3] for r in rows),
                          "stops": sum(r[4] for r in rows)}
    return out


def report(label: str, m: dict, base: str, best: str, agent) -> dict:
    """Print one set's figures; returns them as plain data."""
    print(f"-- {label}")
    for name, v in sorted(m["bsld"].items(), key=lambda kv: float(np.mean(kv[1]))):
        print(f"   {name:<12} mean bsld {np.mean(v):8.2f}   max wait "
              f"{np.max(m['max_wait'][name]):9.0f} s")
    data = {"mean_bsld": {k: float(np.mean(v)) for k, v in m["bsld"].items()}}
    if agent is not None:
        for ref in dict.fromkeys((base, best)):
            c = compare(m["bsld"]["backfiller"], m["bsld"][ref], policy="backfiller",
                        reference_name=ref)
            print("   " + c.summary())
            data[f"vs {ref}"] = c.as_dict()
        ch = m["choices"]
        print(f"   backfiller: {ch['asks']} choices, {ch['departures']} departures from "
              f"EASY's pick, {ch['stops']} stops")
        data["choices"] = ch
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help="a trained backfiller (agents train "
                    "--actions backfill); without it, only the heuristics")
    ap.add_argument("--estimates", choices=("exact", "tsafrir"), default="tsafrir")
    ap.add_argument("--size", type=int, default=256, help="jobs per window")
    ap.add_argument("--windows", type=int, default=100, help="validation and test windows each")
    ap.add_argument("--test", action="store_true",
                    help="read the test windows once, if validation says the agent helps")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--probe", type=float, default=None, metavar="P",
                    help="instead: depart from EASY's pick at random with probability P over "
                         "--base (is there room?), on the first --windows validation windows")
    ap.add_argument("--base", default="saf+easy", help="--probe's base policy")
    ap.add_argument("--tries", type=int, default=8, help="--probe's seeds per window")
    ns = ap.parse_args(argv)
    t0 = time.perf_counter()
    agent, base = None, "saf+easy"
    if ns.checkpoint:
        from agents.rl_policy import load_rl_policy

        agent = load_rl_policy(ns.checkpoint)
        cfg = agent.env_config or {}
        if cfg.get("actions") != "backfill":
            print(f"error: {ns.checkpoint}: expected a backfill agent, got actions="
                  f"{cfg.get('actions')!r}", file=sys.stderr)
            return 2
        base = cfg.get("base_policy") or "sjf+easy"
    split = seeded_split(lublin_maker(ns.estimates), size=ns.size, train_count=1,
                         count=ns.windows, seeds=SEEDS)
    scenario = scenario_from_dict({"cluster": {"nodes": 256}, "metrics": {"tau": 10},
                                   "workload": {"kind": "lublin", "jobs": 1}})
    if ns.probe is not None:
        probe(scenario, split.validation, ns.base, ns.probe, ns.tries)
        return 0
    names = list(dict.fromkeys([*CLASSIC, base]))
    val = measure(scenario, split.validation, agent, names)
    best = best_heuristic({n: val["bsld"][n] for n in CLASSIC})
    print(f"Lublin-Feitelson, 256 cores, {ns.estimates} estimates, {len(split.validation)} "
          f"windows of {ns.size} jobs; {split.note}; offered load (validation) "
          f"{offered_load(split.validation, 256):.2f}; base {base}; best heuristic on "
          f"validation {best}")
    figures = {"estimates": ns.estimates, "base": base, "best": best,
               "validation": report("validation", val, base, best, agent)}
    if agent is not None and ns.test:
        if not figures["validation"][f"vs {base}"]["mean_ratio_ci"][1] < 1.0:
            print("-- test: not read (validation does not say the backfiller helps: the upper "
                  "end of its mean-ratio interval against its base is not below 1)")
        else:
            test_windows = split.test.read()
            figures["test"] = report("test", measure(scenario, test_windows, agent,
                                                     [base, best]), base, best, agent)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"({figures['seconds']} s)")
    if ns.json:
        Path(ns.json).write_text(json.dumps(figures, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
