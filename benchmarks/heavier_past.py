"""Does a searched point that loses on a heavier future already lose on a heavier past?

Minimax's losses on held-out rows came where the test span was more loaded
than any period of the past (seed 118: FCFS+EASY 1,343 mean bsld on test
against 301-812 before; seed 332: 1,228 against 137-616). A stress check
would then tell them apart before shipping: run the past again with every
job arriving ``F`` times as late after the trace's first submit (``F < 1``:
the same jobs closer together, load x 1/F), and ask whether the point still
leads the heuristic that led validation in every period there.

The script reads rows that ``benchmarks/minimax_rows.py`` wrote (the
point found, its figures and the row's trace), runs the classic heuristics
and the point on the compressed past (the four training chunks and the
validation span; the test span is never run here), and prints, per factor,
the point's ratio to the lead heuristic in each period and the worst::

    python benchmarks/minimax_rows.py --rows fresh3 --first 301 --last 332 --shrink --out out/shrink
    python benchmarks/heavier_past.py --factors 0.8,0.65 out/shrink/seed3*-shrink.json

A probe (stop 41): on the seven rows where minimax shipped its point, the
three that lost on test did no worse on the compressed pasts than the four
that won (docs/tuning.md, "A heavier past").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hindsight_search import ROOT, Periods  # noqa: E402

from cosim.evaluation import CLASSIC  # noqa: E402
from cosim.policies.priority import PriorityWeights  # noqa: E402


def point_on_compressed_past(row: dict, factor: float, processes: int) -> dict:
    """The row's point and the classic heuristics on its past compressed by ``factor``:
    per period the point's ratio to the lead heuristic, the lead's and FCFS+EASY's
    mean bsld, and the heuristic best there."""
    scenario, *overrides = row["trace"].split()
    per = Periods(str(ROOT / "scenarios" / scenario), overrides, processes,
                  compress=factor)
    try:
        found = row["found"]
        point = PriorityWeights(tuple(found["weights"]), per.capacity, name="found",
                                backfill_weights=tuple(found["backfill_weights"]) or None)
        means = per.run([*CLASSIC, point], ("train", "validation"))["means"][:, :-1]
    finally:
        per.close()
    heur, lead = means[:len(CLASSIC)], CLASSIC.index(row["best_on_validation"])
    ratio = means[-1] / heur[lead]
    return {"factor": factor, "ratios": ratio.tolist(), "worst": float(ratio.max()),
            "lead": heur[lead].tolist(), "fcfs": heur[CLASSIC.index("fcfs+easy")].tolist(),
            "best": [CLASSIC[i] for i in heur.argmin(axis=0)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+", help="JSON files written by minimax_rows.py")
    ap.add_argument("--factors", default="0.8,0.65",
                    help="submit-time factors in (0, 1], separated by commas (1: the row's "
                         "own past, which reproduces its figures)")
    ap.add_argument("--processes", type=int, default=2)
    ns = ap.parse_args(argv)
    try:
        factors = [float(f) for f in ns.factors.split(",")]
    except ValueError:
        factors = [-1.0]
    if any(not 0.0 < f <= 1.0 for f in factors):
        print(f"error: --factors: expected fractions in (0, 1] separated by commas, got "
              f"{ns.factors!r}", file=sys.stderr)
        return 2
    for path in ns.rows:
        try:
            row = json.loads(Path(path).read_text())
            ref = np.array(row["heuristics"][row["best_on_validation"]])
            r = np.array(row["found"]["means"]) / ref
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {path}: expected a row written by minimax_rows.py ({exc})",
                  file=sys.stderr)
            return 2
        print(f"{Path(path).name}: lead {row['best_on_validation']}; the point's ratio on the "
              f"past {np.round(r[:-1], 3).tolist()} (worst {r[:-1].max():.3f}), on test "
              f"{r[-1]:.3f}")
        for f in factors:
            s = point_on_compressed_past(row, f, ns.processes)
            print(f"  submit x {f:g}: FCFS+EASY {np.round(s['fcfs'], 0).tolist()}, the point's "
                  f"ratio {np.round(s['ratios'], 3).tolist()}, worst {s['worst']:.3f}; best "
                  f"there {', '.join(s['best'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
