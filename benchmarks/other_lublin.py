"""A Lublin-256 agent on a Lublin trace of *other* parameters, against every heuristic with EASY.

Issue 22's second target: the shipped Lublin agent, run on windows of a
Lublin-Feitelson trace whose parameters differ from its training workload's
(``scenarios/lublin256.yaml``: the typeless fit at its natural offered load
of about 0.85, generator seed 1), must reach at most 1.0x the best
heuristic's mean bounded slowdown, with a median per-window ratio at most 1.0.

The other trace (defaults): the model's *batch* fit (Lublin & Feitelson
2003: longer jobs, more serial ones, another daily cycle), its arrival rate
solved for an offered load of 0.9, on 256 cores. Two independent runs of the
generator give the validation windows (seed 7001) and the test windows
(seed 7002); neither seed is used by any training or selection elsewhere in
the repository (training: seed 1; train_agents' held-out set: 1001;
inspector: 1002/1003). Windows are consecutive, non-overlapping runs of
``--size`` jobs, each simulated from an empty machine; every policy sees
the same windows (paired).

Protocol (:class:`cosim.evaluation.Protocol`): the best of FCFS, SJF, SAF, F1, WFP3 and
UNICEF with EASY is chosen on the *validation* windows; the test windows are
sealed and read once, after that choice; each agent is compared with the
best heuristic and with every other one on them: ratio of mean bsld, median
of the per-window ratios (95 % bootstrap intervals over windows), wins and
losses, and the spread of the per-window ratios. Nothing here selects
among agents: a checkpoint is chosen elsewhere, on its own validation data.

Per estimate model (``exact``: requests equal run times; ``tsafrir``: the
modal user-estimate model of Tsafrir, Etsion and Feitelson 2005, applied to
each whole trace with the trace's seed + 1)::

    python benchmarks/other_lublin.py --agent agents/pretrained/lublin256
    python benchmarks/other_lublin.py --agent exact=agents/pretrained/lublin256 \\
        --agent tsafrir=agents/pretrained/lublin256-tsafrir --json out/other.json
    python benchmarks/other_lublin.py --agent DIR --kind interactive --load 0.8

``--agent [MODEL=]DIR`` runs the checkpoint only under that estimate model
(without ``MODEL=``: under every one). Runs in one process (a 1,024-job
window takes about 0.2 s for an agent, 0.03 s for a heuristic); every figure comes
from the protocol's scores and comparisons.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from agents import load_rl_policy  # noqa: F401  (importing agents installs rl:DIR's loader)
from cosim.config import load_scenario
from cosim.evaluation import CLASSIC, Protocol, SealedWindows, Split, windows
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import LUBLIN_KINDS, lublin

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = ROOT / "scenarios" / "lublin256.yaml"
#: Generator seeds of the other trace's validation and test runs.
VALIDATION_SEED, TEST_SEED = 7001, 7002
CORES = 256


def fail(message: str) -> None:
    """Bad input: one line on stderr, exit code 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def other_trace(seed: int, jobs: int, kind: str, load: float, estimates: str):
    """``jobs`` Lublin jobs of fit ``kind`` at offered ``load``, with the estimate model."""
    w = lublin(jobs, procs=CORES, seed=seed, kind=kind, load=load)
    return w if estimates == "exact" else apply_estimates(w, estimates, seed=seed + 1)


def offered_load(ws) -> float:
    """Mean over windows of ``sum(run * procs) / (cores * submit span)``."""
    return float(np.mean([float(np.sum(w.run * w.procs))
                          / (CORES * max(1.0, float(w.submit[-1] - w.submit[0]))) for w in ws]))


def ratio_spread(a: np.ndarray, b: np.ndarray) -> str:
    """Quantiles of the per-window ratios ``a / b``."""
    q = np.quantile(a / b, [0.0, 0.1, 0.5, 0.9, 1.0])
    return "min {:.3f} p10 {:.3f} median {:.3f} p90 {:.3f} max {:.3f}".format(*q)


def evaluate(estimates: str, agents: list[str], ns, say) -> dict:
    """One estimate model: heuristics on validation, the choice, then the test read once."""
    scenario = load_scenario(SCENARIO, [f"workload.estimates.model={estimates}"])
    val = windows(other_trace(VALIDATION_SEED, ns.val_windows * ns.size, ns.kind, ns.load,
                              estimates), ns.size, ns.val_windows)
    sealed = SealedWindows(windows(other_trace(TEST_SEED, ns.test_windows * ns.size, ns.kind,
                                               ns.load, estimates), ns.size, ns.test_windows))
    protocol = Protocol(scenario, Split([], val, sealed, note=f"other trace, {estimates}"))
    t0 = time.perf_counter()
    scores = protocol.score("validation", list(CLASSIC))
    val_bsld = {h: scores.bsld(h) for h in CLASSIC}
    best = protocol.reference(scores)[0]
    say(f"\n[{estimates}] other trace: Lublin kind={ns.kind}, offered load {ns.load} "
        f"(windows: validation {offered_load(val):.2f}), {CORES} cores; "
        f"{len(val)} validation windows (seed {VALIDATION_SEED}), {sealed.count} test windows "
        f"(seed {TEST_SEED}) of {ns.size} jobs")
    say(f"[{estimates}] validation mean bsld: "
        + ", ".join(f"{h} {val_bsld[h].mean():.2f}" for h in CLASSIC) + f" -> best {best}")
    # Once, every choice above made: the heuristics and the agents (rl:DIR) on the test windows.
    tested = protocol.test([*CLASSIC, *(f"rl:{path}" for path in agents)], whole=False,
                           keys=("jobs_finished",))
    test_bsld = {h: tested.bsld(h) for h in CLASSIC}
    say(f"[{estimates}] test mean bsld: "
        + ", ".join(f"{h} {test_bsld[h].mean():.2f}" for h in CLASSIC)
        + f" ({time.perf_counter() - t0:.0f} s)")
    result = {"kind": ns.kind, "load": ns.load, "size": ns.size,
              "seeds": {"validation": VALIDATION_SEED, "test": TEST_SEED},
              "best_heuristic": best,
              "validation": {h: v.tolist() for h, v in val_bsld.items()},
              "test": {h: v.tolist() for h, v in test_bsld.items()}, "agents": {}}
    for path in agents:
        finished = tested.column(f"rl:{path}", "jobs_finished")
        if (finished != ns.size).any():
            fail(f"error: {path}: finished {int(finished.min())} of {ns.size} jobs in a window")
        a = tested.bsld(f"rl:{path}")
        rows = {}
        say(f"[{estimates}] agent {path}: test mean bsld {a.mean():.2f}")
        for h in (best, *[h for h in CLASSIC if h != best]):
            c = protocol.compare("test", a, test_bsld[h], policy=path, reference_name=h)
            rows[h] = c.as_dict()
            tag = " (best on validation)" if h == best else ""
            say(f"  vs {h:<12}{tag:<21} ratio {c.mean_ratio:.3f} [{c.mean_ratio_ci[0]:.3f}, "
                f"{c.mean_ratio_ci[1]:.3f}]  median {c.median_ratio:.3f} "
                f"[{c.median_ratio_ci[0]:.3f}, {c.median_ratio_ci[1]:.3f}]  "
                f"wins {c.wins:3d} losses {c.losses:3d}")
        say(f"  per-window ratio to {best}: {ratio_spread(a, test_bsld[best])}")
        c = rows[best]
        verdict = c["mean_ratio"] <= 1.0 and c["median_ratio"] <= 1.0
        say(f"  target (ratio <= 1.0 and median <= 1.0 vs {best}): "
            f"{'met' if verdict else 'missed'} (ratio {c['mean_ratio']:.4f}, "
            f"median {c['median_ratio']:.4f})")
        result["agents"][path] = {"test": a.tolist(), "comparisons": rows, "target_met": verdict}
    return result


def parse_agents(specs: list[str], models: list[str]) -> dict[str, list[str]]:
    """``[MODEL=]DIR`` -> the checkpoints to run under each estimate model."""
    out: dict[str, list[str]] = {m: [] for m in models}
    for spec in specs:
        model, sep, path = spec.partition("=")
        if not sep:
            model, path = "", spec
        if not (Path(path) / "LATEST").exists() and not any(Path(path).glob("ckpt-*")):
            fail(f"error: --agent {spec}: no checkpoint folder at {path}")
        if model and model not in out:
            fail(f"error: --agent {spec}: estimate model {model!r} is not one of "
                             f"--estimates ({', '.join(models)})")
        for m in ([model] if model else models):
            out[m].append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", action="append", default=[], metavar="[MODEL=]DIR",
                    help="a checkpoint folder (rl:DIR); MODEL= limits it to one estimate model")
    ap.add_argument("--estimates", nargs="+", default=["exact", "tsafrir"],
                    choices=["exact", "tsafrir"])
    ap.add_argument("--kind", default="batch", choices=[k for k in LUBLIN_KINDS if k != "both"])
    ap.add_argument("--load", type=float, default=0.9, help="offered load of the other trace")
    ap.add_argument("--size", type=int, default=1024, help="jobs per window")
    ap.add_argument("--val-windows", type=int, default=50)
    ap.add_argument("--test-windows", type=int, default=100)
    ap.add_argument("--json", default=None, metavar="FILE", help="write every figure here")
    ns = ap.parse_args(argv)
    if ns.load <= 0 or ns.size < 1 or ns.val_windows < 1 or ns.test_windows < 2:
        fail("error: --load > 0, --size >= 1, --val-windows >= 1 and "
                         "--test-windows >= 2 expected")
    agents = parse_agents(ns.agent, ns.estimates)

    def say(text):
        print(text, flush=True)

    results = {m: evaluate(m, agents[m], ns, say) for m in ns.estimates}
    if ns.json:
        path = Path(ns.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(results, indent=1) + "\n")
        tmp.replace(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
