"""Command line: ``python -m cosim run|validate|policies|report``.

Examples::

    python -m cosim run scenarios/lublin256.yaml --policy fcfs+easy --policy sjf+easy
    python -m cosim run scenarios/swf.yaml --set workload.path=trace.swf.gz
    python -m cosim validate scenarios/deeprm.yaml
    python -m cosim policies
    python -m cosim report results/lublin256
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cosim.errors import CosimError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, like every user error
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m cosim", description="HPC scheduling co-simulation (SimPy).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run a scenario under one or more policies")
    r.add_argument("scenario", help="scenario YAML file")
    r.add_argument("--policy", action="append", default=None, metavar="NAME",
                   help="policy HEURISTIC[+BACKFILL]; repeat to compare (default: the scenario's)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a scenario value, e.g. --set cluster.nodes=512")
    r.add_argument("--seed", type=int, default=None, help="override the scenario seed")
    r.add_argument("--out", default=None, help="results folder (default: results/<scenario name>)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNGs and report.html")
    r.add_argument("--quiet", action="store_true", help="no progress bar")

    v = sub.add_parser("validate", help="check a scenario file and print it resolved")
    v.add_argument("scenario")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")

    sub.add_parser("policies", help="list policy names")

    rep = sub.add_parser("report", help="write PNGs and report.html for a results folder")
    rep.add_argument("results", help="results folder written by `run`")
    return p


def _load(args) -> tuple:
    from cosim.config import load_scenario

    overrides = list(args.overrides)
    if getattr(args, "seed", None) is not None:
        overrides.append(f"seed={args.seed}")
    scenario = load_scenario(args.scenario, overrides)
    return scenario, Path(args.scenario).resolve().parent


def _run(args) -> int:
    from cosim.runner import run_scenario

    scenario, base = _load(args)
    policies = args.policy or list(scenario.scheduler.policies)
    out = Path(args.out) if args.out else Path("results") / scenario.name
    run_scenario(scenario, policies, out, base_dir=base,
                 plots=scenario.output.plots and not args.no_plots, progress=not args.quiet)
    return 0


def _validate(args) -> int:
    import yaml

    from cosim.model import load_workload

    scenario, base = _load(args)
    from agents.heuristics import make_policy

    for name in scenario.scheduler.policies:
        make_policy(name, where="scheduler.policies")
    workload = load_workload(scenario, base_dir=base)
    print(yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False), end="")
    print(f"# ok: {len(workload)} jobs from {workload.source or scenario.workload.kind}")
    return 0


def _policies(args) -> int:
    from agents.heuristics import policy_names

    rows = policy_names()
    width = max(len(n) for n, _ in rows)
    print("Policies are HEURISTIC[+BACKFILL], e.g. fcfs+easy, sjf+conservative, f1.\n")
    for name, doc in rows:
        print(f"  {name.ljust(width)}  {doc}")
    return 0


def _report(args) -> int:
    from cosim.report import write_report

    print(write_report(args.results))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for user errors)."""
    args = _parser().parse_args(argv)
    try:
        return {"run": _run, "validate": _validate, "policies": _policies,
                "report": _report}[args.command](args)
    except CosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
