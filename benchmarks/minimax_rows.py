"""Does ``agents tune --selection minimax`` pay its way on traces it was not designed on?

Each row runs ``benchmarks/hindsight_search.py --fit past-only`` (the tuner's
search with the worst ratio over the past as its fitness: four training
chunks run whole and the validation span, against the best heuristic on
validation; the same search ``--selection minimax`` runs, point for point,
at the same seed and generations) and applies the rule: the point found
ships only if its worst past ratio is below ``--margin``
(:data:`agents.tuning.select.MINIMAX_MARGIN`), else the heuristic stays
(1.000). The test span is read after the search, once per row.

``--rows design``: the rows the margin was chosen on (the 8 synthetic
Lublin traces of stop 35 and ``lublin_256.swf``); ``--rows holdout``: the
40 rows of :func:`fallback_rules.holdout_traces` from an empty machine
(seeds 101-140; 101-104 were read before the margin was fixed); ``--rows
fresh``: 40 more drawn the same way (seeds 201-240), for rules designed
after the held-out rows were read::

    python benchmarks/minimax_rows.py --rows holdout --first 105 --last 140 --out out/minimax

Where F1+EASY leads validation the search runs again with
``--with-submit-time``, as the tuner's minimax does since stop 38 (F1's
``log_submit`` term joins the space, so the seed point is F1+EASY itself),
and the rule reads that search (``<row>-f1term.json``); rows led by another
heuristic are unchanged. ``--without-f1-term``: stop 37's rule, the term
never searched (the held-out table of docs/tuning.md)::

    python benchmarks/minimax_rows.py --rows fresh --out out/minimax-fresh

``--backlog``: the search also moves the backlog products of
:mod:`cosim.policies.priority` (``agents tune --backlog searched``; files
``<row>[-f1term]-backlog.json``); ``--rows fresh3``: 40 more rows (seeds
301-340, drawn the same way), on which stop 39 judged it::

    python benchmarks/minimax_rows.py --rows fresh3 --out out/minimax-fresh3
    python benchmarks/minimax_rows.py --rows fresh3 --out out/minimax-fresh3 --backlog

``--shrink``: the search also reads the point found shrunk toward the seed
heuristic's point (:data:`agents.tuning.select.SHRINK` of the way) and applies
both rules: the point itself (stop 39's minimax) and the smallest step whose
worst past ratio is below the margin (the tuner's minimax since stop 40,
judged on seeds 317-332 by a rule written beforehand; files
``<row>[-f1term]-shrink.json``)::

    python benchmarks/minimax_rows.py --rows fresh3 --first 317 --last 332 --shrink --out out/shrink

Which heuristic leads validation is read from the plain row's JSON, or from a
run without a search (``<row>-lead.json``, ``--generations 0``) where that
row has not run. About 2-4 minutes a row on 2 cores at ``--generations 60``. A row whose
JSON is already in ``--out`` is read, not rerun, so a stopped batch resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hindsight_search  # noqa: E402
from fallback_rules import holdout_traces  # noqa: E402

from agents.tuning.select import MINIMAX_MARGIN, SHRINK  # noqa: E402
from cosim.paired import bootstrap_interval  # noqa: E402

#: Stop 35's synthetic design traces (``scenarios/lublin256.yaml`` overrides).
DESIGN = ["seed=37", "seed=41 workload.params.load=0.95 workload.estimates.model=tsafrir",
          "seed=43 workload.params.kind=batch",
          "seed=47 workload.jobs=20000 workload.estimates.model=tsafrir",
          "seed=53 workload.params.kind=interactive workload.params.load=0.9",
          "seed=59 workload.params.load=0.8 workload.estimates.model=tsafrir",
          "seed=61 workload.params.kind=batch workload.params.load=0.9 "
          "workload.estimates.model=tsafrir", "seed=67 workload.jobs=20000"]


def rows(which: str) -> list[tuple[str, list[str]]]:
    """(label, hindsight_search arguments) per row."""
    if which == "design":
        out = [(o.split()[0], ["--scenario", "scenarios/lublin256.yaml",
                               *[a for k in o.split() for a in ("--set", k)]]) for o in DESIGN]
        return out + [("lublin_256.swf", ["--trace", "lublin"])]
    drawn = {"holdout": holdout_traces(), "fresh": holdout_traces(20261129, 201),
             "fresh3": holdout_traces(20261201, 301)}[which]
    return [(o[0], ["--scenario", "scenarios/lublin256.yaml",
                    *[a for k in o for a in ("--set", k)]])
            for _, o, warm in drawn if warm == 0]


def outcome(d: dict, margin: float) -> dict:
    """The rule on one row's figures: worst past ratio, shipped or kept, the test ratio."""
    ref = d["heuristics"][d["best_on_validation"]]
    r = np.array(d["found"]["means"]) / np.array(ref)
    worst = float(r[:-1].max())
    t = d["intervals"]["test"]
    ship = worst < margin
    return {"reference": d["best_on_validation"], "worst_past": worst, "shipped": ship,
            "test": t["mean_ratio"] if ship else 1.0, "ci": t["mean_ratio_ci"],
            "wins": t["wins"], "losses": t["losses"], "point_test": t["mean_ratio"]}


def shrink_outcome(d: dict, margin: float) -> dict:
    """The shrink rule on one row: the smallest fraction ``a`` of the way from the seed
    heuristic's point to the point found (``a = 1``: the point itself) whose worst past
    ratio is below ``margin`` ships; none: the heuristic stays."""
    ref = np.array(d["heuristics"][d["best_on_validation"]])
    points = [(float(a), np.array(m)) for a, m in d["shrunk"].items()]
    points.append((1.0, np.array(d["found"]["means"])))
    for a, m in sorted(points, key=lambda p: p[0]):
        r = m / ref
        if r[:-1].max() < margin:
            return {"alpha": a, "worst_past": float(r[:-1].max()), "shipped": True,
                    "test": float(r[-1])}
    return {"alpha": None, "worst_past": None, "shipped": False, "test": 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", choices=("design", "holdout", "fresh", "fresh3"), default="holdout")
    ap.add_argument("--first", type=int, default=None, help="holdout, fresh: first seed")
    ap.add_argument("--last", type=int, default=None, help="holdout, fresh: last seed")
    ap.add_argument("--generations", type=int, default=60)
    ap.add_argument("--margin", type=float, default=MINIMAX_MARGIN)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--out", default="out/minimax", help="one JSON per row")
    ap.add_argument("--without-f1-term", action="store_true",
                    help="stop 37's rule: no submit-time term where F1+EASY leads")
    ap.add_argument("--backlog", action="store_true",
                    help="also search the backlog products (files <row>[-f1term]-backlog.json)")
    ap.add_argument("--shrink", action="store_true",
                    help="also read the point found shrunk toward the seed heuristic and "
                         "apply the shrink rule (files <row>[-f1term]-shrink.json)")
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    print("| trace | drawn parameters | best on validation | worst past ratio | the rule on "
          "test [95 %], wins / losses |\n|---|---|---|---|---|")
    for label, args in rows(ns.rows):
        if ns.rows != "design":
            seed = int(label.partition("=")[2])
            if (ns.first and seed < ns.first) or (ns.last and seed > ns.last):
                continue
        stem = label.replace("=", "")
        search = [*args, "--fit", "past-only", "--minutes", "60",
                  "--processes", str(ns.processes)]

        def read(path: Path, extra: list[str], search=search) -> dict | None:
            if not path.exists() and hindsight_search.main([*search, *extra, "--json",
                                                            str(path)]):
                return None
            return json.loads(path.read_text())
        # Which heuristic leads validation decides the space; a run without a search
        # (generations 0) says so where the plain row has not run.
        lead = out / f"{stem}.json"
        if not lead.exists() and (ns.backlog or not ns.without_f1_term):
            lead = out / f"{stem}-lead.json"
        d = read(lead, ["--generations", "0" if lead.stem.endswith("-lead")
                        else str(ns.generations)])
        if d is None:
            return 1
        f1 = not ns.without_f1_term and d["best_on_validation"] == "f1+easy"
        extra = ((["--with-submit-time"] if f1 else [])
                 + (["--with-backlog"] if ns.backlog else [])
                 + (["--shrink", ",".join(map(str, SHRINK))] if ns.shrink else []))
        if extra:
            d = read(out / f"{stem}{'-f1term' if f1 else ''}"
                     f"{'-backlog' if ns.backlog else ''}{'-shrink' if ns.shrink else ''}.json",
                     ["--generations", str(ns.generations), *extra])
        elif lead.stem.endswith("-lead"):
            d = read(out / f"{stem}.json", ["--generations", str(ns.generations)])
        if d is None:
            return 1
        res = outcome(d, ns.margin)
        if ns.shrink:
            res["shrink"] = shrink_outcome(d, ns.margin)
        results.append(res)
        lo, hi = res["ci"]
        drawn = " ".join(args[3::2]).partition(" ")[2]
        for long, short in (("workload.params.", ""), ("workload.estimates.model=", ""),
                            ("workload.", "")):
            drawn = drawn.replace(long, short)
        print(f"| {label} | {drawn or '--'} | {res['reference']} | "
              f"{res['worst_past']:.3f} | "
              + (f"shipped: **{res['test']:.3f}** [{lo:.3f}, {hi:.3f}], {res['wins']} / "
                 f"{res['losses']} |" if res["shipped"] else
                 f"kept: 1.000 (the point: {res['point_test']:.3f}) |")
              + (f" shrink: a = {res['shrink']['alpha']}, **{res['shrink']['test']:.3f}** |"
                 if ns.shrink and res["shrink"]["shipped"] else
                 " shrink: kept, 1.000 |" if ns.shrink else ""), flush=True)
    if results:
        v = np.array([r["test"] for r in results])
        print(f"{len(v)} rows, margin {ns.margin:g}: mean {v.mean():.3f}, geometric mean "
              f"{np.exp(np.log(v).mean()):.3f}, shipped {sum(r['shipped'] for r in results)}, "
              f"wins {int(np.sum(v < 0.999))}, losses {int(np.sum(v > 1.001))}, "
              f"worst {v.max():.3f}")
        if ns.shrink:
            w = np.array([r["shrink"]["test"] for r in results])
            d = w - v
            # The project's paired interval (percentile bootstrap of the mean difference).
            lo, hi = bootstrap_interval(lambda i: d[i].mean(), len(d), resamples=10000)
            print(f"shrink rule: mean {w.mean():.3f}, geometric mean "
                  f"{np.exp(np.log(w).mean()):.3f}, shipped "
                  f"{sum(r['shrink']['shipped'] for r in results)}, wins "
                  f"{int(np.sum(w < 0.999))}, losses {int(np.sum(w > 1.001))}, worst "
                  f"{w.max():.3f}; paired shrink - minimax {d.mean():+.3f} "
                  f"[{lo:+.3f}, {hi:+.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
