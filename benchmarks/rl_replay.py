"""Whole-trace replay speed of a trained agent (``rl:DIR``), numpy and torch acting.

The agent acts through :mod:`agents.fast` (numpy logits, torch only for
near-ties) or through torch alone (``AGENTS_ACTING=torch``); both are timed
alternately, each round beside the shared plain-Python FCFS+EASY loop
(``--yardstick``) so that every figure is also a ratio to it measured in the
same minute. Times run from the start of reading the trace to the end of the
simulation, loading the checkpoint included; interpreter start-up and imports
(torch's among them) are excluded, as in ``benchmarks/replay.py``. CPU time
(this process) is printed beside wall time, since the machine may be shared.
The schedules of the two backends are compared job by job. One more,
untimed replay counts the agent's decisions, for decisions/s.

Run from the repository root with ``PYTHONPATH=.``:

    python benchmarks/rl_replay.py ../shared/traces/lublin_256.swf \\
        --agent agents/pretrained/lublin256-select --yardstick ../shared/tools/ref_easy.py --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import agents.rl_policy  # noqa: F401  (imports torch outside the timed part)
from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.workloads import load_workload
from cosim.yardstick import run_yardstick


def one_run(scenario_path: str, trace: str, agent: str, backend: str) -> tuple[float, float, dict]:
    """(wall s, CPU s, summary) of one replay with ``backend`` acting."""
    os.environ["AGENTS_ACTING"] = backend
    scenario = load_scenario(scenario_path, [f"workload.path={trace}"])
    t0, c0 = time.perf_counter(), time.process_time()
    workload = load_workload(scenario)
    summary = run_policy(scenario, f"rl:{agent}", None, workload=workload)
    return time.perf_counter() - t0, time.process_time() - c0, summary


def count_decisions(scenario_path: str, trace: str, agent: str) -> int:
    """The agent's decisions in one replay: the steps of its greedy episode over the whole
    trace in its environment (untimed), one step per choice."""
    from agents.evaluation import greedy_episode
    from agents.rl_policy import load_rl_policy
    from cosim.compose import make_env

    policy = load_rl_policy(agent)
    scenario = load_scenario(scenario_path, [f"workload.path={trace}"])
    workload = load_workload(scenario)
    env = make_env({**policy.env_config, "teacher": None}, scenario=scenario, workload=workload,
                   episode_jobs=len(workload), episode_end="completed")
    steps = greedy_episode(policy, env, seed=0).steps
    env.close()
    return steps


def yardstick(path: str, trace: str) -> float:
    """The yardstick's jobs/s (parse + simulation) on ``trace``, EASY backfilling."""
    return run_yardstick(path, trace)["jobs_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--agent", default="agents/pretrained/lublin256-select")
    ap.add_argument("--scenario", default="scenarios/swf.yaml")
    ap.add_argument("--yardstick", default=None, help="path of ref_easy.py to run beside")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (yardstick, numpy, torch)")
    ap.add_argument("--backends", default="numpy,torch")
    args = ap.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    rates: dict[str, list[tuple[float, float]]] = {b: [] for b in backends}
    summaries: dict[str, dict] = {}
    refs: list[float] = []
    for r in range(max(1, args.repeat)):
        ref = yardstick(args.yardstick, args.trace) if args.yardstick else None
        if ref:
            refs.append(ref)
        for b in backends:
            wall, cpu, summary = one_run(args.scenario, args.trace, args.agent, b)
            jobs = summary["jobs_finished"]
            rates[b].append((jobs / wall, jobs / cpu))
            summaries[b] = summary
            ratio = f"  {jobs / wall / ref:.3f}x the yardstick ({ref:,.0f} jobs/s)" if ref else ""
            print(f"round {r + 1} {b:5s}: {jobs / wall:7,.0f} jobs/s wall, {jobs / cpu:7,.0f} "
                  f"per CPU s{ratio}", flush=True)
    decisions = count_decisions(args.scenario, args.trace, args.agent)
    jobs = next(iter(summaries.values()))["jobs_finished"]
    print(f"decisions: {decisions:,} per replay ({decisions / jobs:.2f} per job)")
    for b in backends:
        walls = [w for w, _ in rates[b]]
        med = statistics.median(walls)
        cpu = statistics.median(c for _, c in rates[b])
        line = (f"{b:5s}: median {med:,.0f} jobs/s ({med * decisions / jobs:,.0f} decisions/s; "
                f"{cpu:,.0f} jobs per CPU s)")
        if refs:
            pairs = sorted(w / y for (w, _), y in zip(rates[b], refs))
            line += f", {' '.join(f'{p:.3f}x' for p in pairs)} the yardstick run by run"
        print(line)
    if len(summaries) > 1:
        keys = ("jobs_finished", "wait_mean", "bsld_mean", "bsld_max", "util")
        first, *rest = summaries.values()
        same = all(all(s.get(k) == first.get(k) for k in keys) for s in rest)
        print("schedules: " + ("identical summaries" if same else "DIFFERENT summaries"))


if __name__ == "__main__":
    main()
