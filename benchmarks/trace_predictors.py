"""Run-time predictions on real traces: the trace model against the request and the history.

For each shared real trace (gzipped SWF in ``../shared/traces/``), the trace
model (:mod:`predictors.trace`) is fitted on the first 70 % of the jobs by
submit time, its loss chosen on the latest 20 % of that past
(:func:`predictors.trace.fit_on_past`), and scored once on the last 30 %
against the user's request, the last-two history (Tsafrir et al.) and the
user's mean, all capped at the request. Prints a Markdown table (and writes
it, with the choice made on each past, as JSON with ``--json``).

    python benchmarks/trace_predictors.py [--traces DIR] [--only SDSC-SP2 ...] [--json FILE]

Targets (issue "run-time predictions learned from the traces"): model MAE at
most 0.5x the request's and at most 0.85x the last-two history's, with no
more too-short predictions than the last-two history.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cosim.workloads.swf import read_swf
from predictors.trace import baselines, fit_on_past, trace_errors
from predictors.trace_features import trace_columns

TRACES = {
    "SDSC-SP2": "SDSC-SP2-1998-4.2-cln.swf.gz",
    "CTC-SP2": "CTC-SP2-1996-3.1-cln.swf.gz",
    "HPC2N": "HPC2N-2002-2.2-cln.swf.gz",
    "RICC-2010-2": "RICC-2010-2.swf.gz",
}
PREDICTORS = ("model", "request", "last_two", "user_mean")
SPLIT = 0.7


def evaluate_trace_file(path: Path, threads: int = 1) -> dict:
    """Fit on the past 70 % of one trace, score every predictor on the future 30 %."""
    t0 = time.perf_counter()
    workload = read_swf(path)
    cols = trace_columns(workload)
    cut = int(round(len(workload) * SPLIT))
    past = {k: v[:cut] for k, v in cols.items()}
    future = {k: v[cut:] for k, v in cols.items()}
    model, choice = fit_on_past(past, n_jobs=threads)
    y = future["runtime"]
    preds = {"model": model.predict_columns(future)}
    preds.update({k: v[cut:] for k, v in baselines(cols).items()})
    errors = {k: trace_errors(y, preds[k]) for k in PREDICTORS}
    m, req, two = errors["model"], errors["request"], errors["last_two"]
    return {"jobs": len(workload), "future": len(y), "errors": errors, "choice": choice,
            "mae_vs_request": m["mae"] / req["mae"], "mae_vs_last_two": m["mae"] / two["mae"],
            "targets_met": {"mae <= 0.5 request": bool(m["mae"] <= 0.5 * req["mae"]),
                            "mae <= 0.85 last_two": bool(m["mae"] <= 0.85 * two["mae"]),
                            "too_short <= last_two": bool(m["too_short"] <= two["too_short"])},
            "seconds": round(time.perf_counter() - t0, 1)}


def markdown(results: dict) -> str:
    """The table of the guide: one row per trace and predictor."""
    lines = ["| trace | predictor | MAE (s) | median abs log ratio | too short | MAE / request |"
             " MAE / last-two |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, r in results.items():
        req, two = r["errors"]["request"]["mae"], r["errors"]["last_two"]["mae"]
        for k in PREDICTORS:
            e = r["errors"][k]
            label = k.replace("_", "-")
            if k == "model":
                c = r["choice"]["chosen"]
                label += " (" + ", ".join(f"{a}={b}" for a, b in c.items()).replace(
                    "objective=reg:", "") + ")"
            lines.append(f"| {name} | {label} | {e['mae']:.0f} | {e['median_abs_log_ratio']:.2f}"
                         f" | {e['too_short']:.3f} | {e['mae'] / req:.2f} | {e['mae'] / two:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=Path("../shared/traces"),
                        help="folder of the gzipped SWF traces (default ../shared/traces, "
                             "beside the repository when run from its root)")
    parser.add_argument("--only", nargs="*", choices=sorted(TRACES), default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    results = {}
    for name in args.only or TRACES:
        path = args.traces / TRACES[name]
        if not path.is_file():
            print(f"skipping {name}: no {path}", file=sys.stderr)
            continue
        results[name] = evaluate_trace_file(path, threads=args.threads)
        r = results[name]
        print(f"{name}: {r['jobs']} jobs, {r['seconds']} s, model MAE {r['mae_vs_request']:.2f}x "
              f"request, {r['mae_vs_last_two']:.2f}x last-two; targets {r['targets_met']}",
              file=sys.stderr, flush=True)
    print(markdown(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
