"""Command line: ``python -m cosim run|validate|sweep|policies|report|convert``.

Examples::

    python -m cosim run scenarios/lublin256.yaml --policy fcfs+easy --policy sjf+easy
    python -m cosim run scenarios/swf.yaml --set workload.path=trace.swf.gz
    python -m cosim run scenarios/slurm.yaml --set workload.path=sacct.txt
    python -m cosim validate scenarios/deeprm.yaml
    python -m cosim sweep scenarios/study-lublin.yaml            # on a local Ray
    python -m cosim sweep study.yaml --address auto             # on a running Ray cluster
    python -m cosim policies
    python -m cosim report results/lublin256
    python -m cosim convert sacct.txt --to swf

``run`` prints the comparison table on stdout; warnings about the workload,
the models used and progress bars go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cosim.cli import ArgumentParser, nonnegative_int, output_path, run_command, stderr_line
from cosim.errors import ScenarioError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m cosim", description="HPC scheduling co-simulation (SimPy).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    r = sub.add_parser("run", help="run a scenario under one or more policies")
    r.add_argument("scenario", help="scenario YAML file")
    r.add_argument("--policy", action="append", default=None, metavar="NAME",
                   help="policy HEURISTIC[+BACKFILL][@PREDICTOR[+kill]], knapsack or rl:DIR; "
                        "repeat to compare (default: the scenario's; see 'policies')")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a scenario value, e.g. --set cluster.nodes=512")
    r.add_argument("--seed", type=nonnegative_int, default=None, help="override the scenario seed")
    r.add_argument("--out", type=output_path, default=None,
                   help="results folder, replaced as a whole when the run completes "
                        "(default: results/<scenario name>, plus -<trace name> for a trace)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNGs and report.html")
    r.add_argument("--quiet", action="store_true", help="no progress bar, no warnings on stderr")

    v = sub.add_parser("validate", help="check a scenario (or study) file and print it resolved")
    v.add_argument("scenario")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")

    sw = sub.add_parser("sweep", help="run a study (policies x seeds x settings) on Ray")
    sw.add_argument("study", help="study YAML file (see cosim.studies)")
    sw.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                    help="join a running Ray cluster (default: a local Ray in this process)")
    sw.add_argument("--workers", type=int, default=None, metavar="N",
                    help="runs at once (default: the CPUs of the Ray cluster)")
    sw.add_argument("--out", type=output_path, default=None, help="results folder (default: results/<study name>)")
    sw.add_argument("--serial", action="store_true",
                    help="run in this process, one run after another, without Ray")
    sw.add_argument("--dry-run", action="store_true",
                    help="check the study and list its runs; run nothing")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")

    sub.add_parser("policies", help="the policy-name grammar and every name")

    rep = sub.add_parser("report", help="write PNGs and report.html for a results folder")
    rep.add_argument("results", help="results folder written by `run`")

    c = sub.add_parser("convert", help="convert Slurm accounting (sacct) output to SWF")
    c.add_argument("file", help="sacct --parsable2 --allocations output with a header line")
    c.add_argument("--to", choices=["swf"], required=True, help="output format")
    c.add_argument("--out", type=output_path, default=None, help="output file (default: FILE with .swf; "
                   "a name ending in .gz is compressed)")
    c.add_argument("--max-procs", type=int, default=None,
                   help="machine size in CPUs, e.g. the partition's (default: the nodes "
                   "NodeList shows times CPUs per node, else a loudly marked guess: the peak "
                   "allocated at once)")
    c.add_argument("--status", default="all",
                   help="jobs to keep: all (default), completed, or comma-separated Slurm states")
    return p


def _load(args) -> tuple:
    from cosim.config import load_scenario

    overrides = list(args.overrides)
    if getattr(args, "seed", None) is not None:
        overrides.append(f"seed={args.seed}")
    scenario = load_scenario(args.scenario, overrides)
    return scenario, Path(args.scenario).resolve().parent


def _run(args) -> int:
    from cosim.compose import default_out_dir, run_scenario

    scenario, base = _load(args)
    policies = args.policy or list(scenario.scheduler.policies)
    out = Path(args.out) if args.out else default_out_dir(scenario)
    run_scenario(scenario, policies, out, base_dir=base,
                 plots=scenario.output.plots and not args.no_plots, progress=not args.quiet,
                 source="--policy" if args.policy else args.scenario,
                 notify=None if args.quiet else stderr_line)
    return 0


def _validate(args) -> int:
    import yaml

    from cosim.compose import parse_policies
    from cosim.studies import is_study, validate_study
    from cosim.workloads.loading import load_workload, resolve_machine, workload_warnings

    if is_study(args.scenario):
        if args.overrides:
            raise ScenarioError("--set", " ".join(args.overrides), "no --set with a study file "
                                "(its set and grid keys say what to override)")
        print(validate_study(args.scenario), end="")
        return 0
    scenario, base = _load(args)
    parse_policies(list(scenario.scheduler.policies), scenario, source=args.scenario)
    workload = load_workload(scenario, base_dir=base)
    scenario = resolve_machine(scenario, workload)
    warnings = workload_warnings(workload, scenario)
    if warnings:
        stderr_line(f"warning: {workload.source or scenario.workload.kind}:")
        for line in warnings:
            stderr_line(f"  {line}")
    print(yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False), end="")
    print(f"# ok: {len(workload)} jobs from {workload.source or scenario.workload.kind}")
    return 0


def _sweep(args) -> int:
    from cosim.studies import run_study

    return run_study(args.study, out=args.out, address=args.address, workers=args.workers,
                     serial=args.serial, dry_run=args.dry_run, quiet=args.quiet)


def _policies(args) -> int:
    from cosim.policies import grammar_help

    print(grammar_help())
    return 0


def _report(args) -> int:
    from cosim.report import write_report

    print(write_report(args.results))
    return 0


def _convert(args) -> int:
    from cosim.errors import InputError
    from cosim.workloads.loading import require_jobs, workload_warnings
    from cosim.workloads.slurm import read_sacct
    from cosim.workloads.swf import write_swf

    src = Path(args.file)
    out = Path(args.out) if args.out else src.with_suffix(".swf")
    if out.resolve() == src.resolve():
        raise InputError("--out", str(out), "an output file other than the input")
    status = args.status if args.status in ("all", "completed") else [
        s.strip() for s in args.status.split(",") if s.strip()]
    if args.max_procs is not None and args.max_procs <= 0:
        raise InputError("--max-procs", str(args.max_procs), "a positive number of CPUs")
    w = require_jobs(read_sacct(src, max_procs=args.max_procs, status=status))
    header = {"Note": f"converted from Slurm accounting (sacct) by hpc-cosim convert; "
                      f"MaxProcs is the {w.machine_source or 'given machine size'}"}
    for pid, name in sorted(w.labels.get("partition", {}).items()):
        header.setdefault("Partition", "")
        header["Partition"] += f"{pid} {name}\n"
    header["Partition"] = header.get("Partition", "").rstrip("\n")
    if not header["Partition"]:
        del header["Partition"]
    cleaning = ", ".join(f"{k} {v}" for k, v in w.cleaning.items() if v)
    if cleaning:
        header["Cleaning"] = cleaning
    write_swf(w, out, header=header)
    warnings = workload_warnings(w)
    if warnings:
        stderr_line(f"warning: {src}:")
        for line in warnings:
            stderr_line(f"  {line}")
    print(f"wrote {len(w)} jobs to {out} (MaxProcs {w.max_procs})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for user errors)."""
    def handle(argv):
        args = _parser().parse_args(argv)
        return {"run": _run, "validate": _validate, "sweep": _sweep, "policies": _policies,
                "report": _report, "convert": _convert}[args.command](args)
    return run_command(handle, argv)


if __name__ == "__main__":
    sys.exit(main())
