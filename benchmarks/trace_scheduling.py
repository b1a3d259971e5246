"""Planning on predictions, on real traces: which beliefs the past chooses, and what they score.

Each shared trace is replayed whole (as a cluster runs: no window starts
from an empty machine) under FCFS, SJF, SAF, F1, WFP3 and UNICEF with EASY,
each on the users' requests (``@estimate``), on the last-two history
(``@history``, EASY++) and, where a trace model is available, on it
(``@xgboost``), with each correction of a job that outlives its prediction
(``scheduler.correction``: ``overrun``, ``stepup``, ``double``, ``request``).
A job is killed at its request only where the scenario enforces walltime
(``--set scheduler.enforce_walltime=true``); by default jobs run their
recorded time, as on the machines that wrote the traces.

Every replay is scored on three spans of its jobs in submit order (the rows
of each span inside the one run): the past's train (first 50 %) and
validation (next 20 %) spans, and the future (last 30 %). On the validation
span the past chooses one configuration per family (requests, history,
trace model: the heuristic and the correction of least mean bsld); the
table says what each choice scores on the future, with its mean and max wait
and the reservations broken and corrections (overruns) of the run beside
the bsld. The figure of merit is the chosen predicted configuration's future
mean bsld over the chosen request-based one's (below 1: predictions win).

Rows are kept in ``--out`` (one JSON file per replay), so a run can be cut
short and resumed, and the table rebuilt from them. With ``--write`` the
table goes into ``docs/results/trace-predictions.md`` (dated, with the
command).

    python benchmarks/trace_scheduling.py --traces SDSC-SP2 CTC-SP2 HPC2N RICC-2010-2 \\
        --processes 2 --out .cache/trace-scheduling --write
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.errors import CosimError
from cosim.metrics import job_metrics
from cosim.records import read_jobs
from cosim.workloads import load_workload

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "swf.yaml"
TRACE_DIR = ROOT.parent / "shared" / "traces"
TRACES = {
    "SDSC-SP2": "SDSC-SP2-1998-4.2-cln.swf.gz",
    "CTC-SP2": "CTC-SP2-1996-3.1-cln.swf.gz",
    "HPC2N": "HPC2N-2002-2.2-cln.swf.gz",
    "RICC-2010-2": "RICC-2010-2.swf.gz",
}
HEURISTICS = ("fcfs", "sjf", "saf", "f1", "wfp3", "unicef")
CORRECTIONS = ("overrun", "stepup", "double", "request")
#: family -> (predictor, corrections it is run with). Requests plan with the
#: request itself, so only a job that outlives its request is ever corrected:
#: the default rule is enough there.
FAMILIES = {"requests": ("estimate", ("overrun",)),
            "history": ("history", CORRECTIONS),
            "trace model": ("xgboost", CORRECTIONS)}
SPANS = {"train": (0.0, 0.5), "validation": (0.5, 0.7), "future": (0.7, 1.0)}
RESULTS_PAGE = ROOT / "docs" / "results" / "trace-predictions.md"


def scenario_for(trace: str, correction: str, sets: list[str], trace_dir: Path = TRACE_DIR):
    path = Path(trace_dir) / TRACES[trace]
    return load_scenario(SCENARIO, [f"workload.path={path}",
                                    f"scheduler.correction={correction}", *sets])


def replay(task: tuple[str, str, str, str, list[str], str]) -> dict:
    """One whole replay: its scores on each span and its counters."""
    trace, heuristic, predictor, correction, sets, trace_dir = task
    scenario = scenario_for(trace, correction, sets, Path(trace_dir))
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    name = f"{heuristic}+easy@{predictor}"
    t0, c0 = time.perf_counter(), time.process_time()
    with TemporaryDirectory() as tmp:
        summary = run_policy(scenario, name, Path(tmp) / "run", workload=workload,
                             base_dir=SCENARIO.parent)
        jobs = read_jobs(Path(tmp) / "run" / "jobs.parquet")
        per = job_metrics(jobs, tau=scenario.metrics.tau)
    n = len(per["bsld"])
    row = {"trace": trace, "heuristic": heuristic, "predictor": predictor,
           "correction": correction, "jobs": n, "wall_s": time.perf_counter() - t0,
           "cpu_s": time.process_time() - c0, "model_refits": summary.get("model_refits", 0),
           "overruns": summary["overruns"],
           "reservations_broken": summary["reservations_broken"]}
    for span, (lo, hi) in SPANS.items():
        a, b = int(lo * n), int(hi * n)
        done = per["finished"][a:b]
        bsld, wait = per["bsld"][a:b][done], per["wait"][a:b][done]
        row[span] = {"bsld_mean": float(bsld.mean()), "wait_mean": float(wait.mean()),
                     "wait_max": float(wait.max()), "jobs": int(done.sum())}
    return row


def _key(task) -> str:
    trace, heuristic, predictor, correction = task[:4]
    return f"{trace}__{heuristic}__{predictor}__{correction}"


def trace_model_available(trace: str, sets: list[str], trace_dir: Path) -> str:
    """"" when ``@xgboost`` runs on ``trace``, else why not (one line)."""
    from cosim.compose import prepare_models

    scenario = scenario_for(trace, "overrun", sets, trace_dir)
    try:
        prepare_models(scenario, ["fcfs+easy@xgboost"], SCENARIO.parent, echo=None)
    except CosimError as exc:
        return str(exc)
    return ""


def run_all(traces: list[str], families: list[str], sets: list[str], out: Path,
            processes: int, trace_dir: Path, corrections: list[str],
            heuristics: tuple[str, ...] = HEURISTICS) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    tasks = [(t, h, FAMILIES[f][0], c, sets, str(trace_dir)) for t in traces for f in families
             for c in FAMILIES[f][1] if c in corrections or f == "requests" for h in heuristics]
    todo = [t for t in tasks if not (out / f"{_key(t)}.json").exists()]
    print(f"{len(tasks)} replays, {len(tasks) - len(todo)} already in {out}", file=sys.stderr)
    with ProcessPoolExecutor(max_workers=max(1, processes)) as pool:
        for task, row in zip(todo, pool.map(replay, todo)):
            (out / f"{_key(task)}.json").write_text(json.dumps(row))
            print(f"  {_key(task)}: future bsld {row['future']['bsld_mean']:.2f} "
                  f"({row['wall_s']:.0f} s)", file=sys.stderr)
    return [json.loads((out / f"{_key(t)}.json").read_text()) for t in tasks]


def _config(row: dict) -> str:
    pred = {"estimate": "requests", "history": "history", "xgboost": "trace model"}[
        row["predictor"]]
    tail = "" if row["predictor"] == "estimate" else f", {row['correction']}"
    return f"{row['heuristic'].upper()}+EASY on {pred}{tail}"


def tables(rows: list[dict]) -> str:
    """The results: per trace, every replay's future; then what the past chooses."""
    lines = []
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    head = ("| configuration | validation bsld | future bsld | future mean wait (h) | "
            "future max wait (h) | reservations broken | corrections |")
    for trace in traces:
        mine = [r for r in rows if r["trace"] == trace]
        lines += [f"### {trace} ({mine[0]['jobs']:,} jobs)", "", head,
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(mine, key=lambda r: r["validation"]["bsld_mean"]):
            f = r["future"]
            lines.append(f"| {_config(r)} | {r['validation']['bsld_mean']:.2f} | "
                         f"{f['bsld_mean']:.2f} | {f['wait_mean'] / 3600:.2f} | "
                         f"{f['wait_max'] / 3600:.1f} | {r['reservations_broken']:,} | "
                         f"{r['overruns']:,} |")
        lines.append("")
    lines += ["### What the past chooses", "",
              "| trace | family | chosen on validation | future bsld | future mean wait (h) | "
              "future max wait (h) | vs requests |", "|---|---|---|---:|---:|---:|---:|"]
    for trace in traces:
        chosen = {}
        for family, (pred, _) in FAMILIES.items():
            mine = [r for r in rows if r["trace"] == trace and r["predictor"] == pred]
            if mine:
                chosen[family] = min(mine, key=lambda r: r["validation"]["bsld_mean"])
        base = chosen["requests"]["future"]["bsld_mean"] if "requests" in chosen else np.nan
        for family, r in chosen.items():
            f = r["future"]
            lines.append(f"| {trace} | {family} | {_config(r)} | {f['bsld_mean']:.2f} | "
                         f"{f['wait_mean'] / 3600:.2f} | {f['wait_max'] / 3600:.1f} | "
                         f"{f['bsld_mean'] / base:.3f} |")
    lines += ["", "### Speed", "",
              "| trace | on requests: CPU s (mean) | on history: CPU s (mean) | on the trace "
              "model, refitting: CPU s (mean) | refits per replay | speed ratio (vs requests) | "
              "vs history |", "|---|---:|---:|---:|---:|---:|---:|"]
    for trace in traces:
        cpu = {pred: [r["cpu_s"] for r in rows if r["trace"] == trace and r["predictor"] == pred]
               for pred in ("estimate", "history", "xgboost")}
        xgb = [r for r in rows if r["trace"] == trace and r["predictor"] == "xgboost"]
        if cpu["estimate"] and xgb:
            a, b = float(np.mean(cpu["estimate"])), float(np.mean(cpu["xgboost"]))
            h = float(np.mean(cpu["history"])) if cpu["history"] else np.nan
            refits = float(np.mean([r.get("model_refits", 0) for r in xgb]))
            lines.append(f"| {trace} | {a:.1f} | {h:.1f} | {b:.1f} | {refits:.0f} | "
                         f"{a / b:.2f}x | {h / b:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=list(TRACES))
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="scenario override for every replay, e.g. workload.jobs=20000 "
                         "(a prefix of each trace)")
    ap.add_argument("--corrections", nargs="+", default=list(CORRECTIONS), choices=CORRECTIONS,
                    help="the corrections the predicted families are run with")
    ap.add_argument("--heuristics", nargs="+", default=list(HEURISTICS), choices=HEURISTICS,
                    help="the priority orders replayed (each with EASY)")
    ap.add_argument("--trace-dir", type=Path, default=TRACE_DIR,
                    help="where the gzipped SWF traces are (default: ../shared/traces)")
    ap.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "trace-scheduling")
    ap.add_argument("--write", action="store_true", help=f"write {RESULTS_PAGE.name}")
    args = ap.parse_args()
    families = list(args.families)
    notes = []
    if "trace model" in families:
        why = trace_model_available(args.traces[0], args.sets, args.trace_dir)
        if why:
            families.remove("trace model")
            notes.append(f"The trace model (@xgboost) was left out: {why}")
            print(f"note: {notes[-1]}", file=sys.stderr)
    rows = run_all(args.traces, families, args.sets, args.out, args.processes, args.trace_dir,
                   args.corrections, tuple(args.heuristics))
    text = tables(rows)
    print(text)
    if args.write:
        command = "python benchmarks/trace_scheduling.py " + " ".join(sys.argv[1:])
        page = [
            "# Planning on predictions: real traces", "",
            f"Measured {dt.date.today().isoformat()} with", "", "```", command, "```", "",
            "Each trace replayed from its first job (whole, or the prefix the command states); spans are its jobs in submit order, scored inside "
            "the one run: train (first 50 %), validation (next 20 %), future (last 30 %). "
            "The past (validation) chooses each family's heuristic and correction; "
            "\"vs requests\" is the chosen configuration's future mean bsld over the chosen "
            "request-based one's. Max wait is the longest wait of a job of the future span. "
            "Reservations broken and corrections are counted over the whole run.", "",
            *[f"{n}" for n in notes], "", text]
        RESULTS_PAGE.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_PAGE.write_text("\n".join(page))


if __name__ == "__main__":
    main()
