"""PPO on the Lublin-256 setting for a fixed wall-clock budget, then held-out evaluation.

Trains masked PPO agents in ``scenarios/lublin256.yaml`` (256 cores, Lublin-
Feitelson jobs; the DBF setting of seed 000) on episodes of 256-1024
consecutive jobs from random offsets, truncated once the episode's jobs are
placed (DBF, seed 000, section III-A: episodes end at a job count, so the
value is bootstrapped there). Two agents share the budget equally: a
head-only window of 32 and the DBF split window 24 + 8 (seed 000, section
IV-D compares exactly this kind of pair).

Evaluation uses 10 windows of 1024 consecutive jobs from a Lublin workload
generated with a *different* seed (held out: never seen in training); each
agent acts greedily until every job has ended, and FCFS+EASY, SJF+EASY and
F1+EASY run on the same windows through the evaluation protocol. Reported: mean
bounded slowdown (tau = 10 s), mean wait, utilization and max wait, averaged
over the windows (definitions in METRICS.md; the env's ``episode_metrics``
use the same ones).

    python benchmarks/train_lublin.py                       # 30 min of training
    python benchmarks/train_lublin.py --budget-min 3 --eval-windows 3   # smoke run
    python benchmarks/train_lublin.py --out runs/bench --resume         # after an interrupt

Defaults (what the figures below used): two agents, head-only window 32
and DBF split 24 + 8, 15 min each; behaviour cloning from ``f1+greedy``
(20k decisions) then PPO with the mimic term; the env's starvation guard at
3 days (``--guard-wait 259200``: the queue head holds an EASY reservation
once it has waited that long). Measured on the 2-core machine, one env
thread, ~1.5 M decisions per agent, 10 held-out windows::

    policy        mean bsld  mean wait s    util  max wait s  mean queue
    ppo 32+0         446.87        31687   0.745      410876        27.9
    ppo 24+8         213.80        26405   0.731      418907        22.9
    fcfs+easy        296.89        24784   0.813      273109        24.0
    sjf+easy          45.48        13613   0.741      727949        11.9
    f1+easy           33.91        12243   0.763      597137        11.0

The split-window agent beats FCFS+EASY on mean bsld by 28 % with a max
wait of 1.53x EASY's; the head-only agent does not (DBF's window
staleness: it cannot see the short jobs behind a blocked head). Without
the guard, agents learn to starve wide jobs (max wait 4x EASY's in an
earlier 5-minute run). The teacher itself, played through the env with
the same window and guard, scores about 120-150: the agents stay short of
their teacher and far from SJF/F1+EASY, which see the whole queue.

Results: a table on stdout and ``OUT/results.json``; each agent's learning
curve and checkpoints in ``OUT/window-<H>-<T>/``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from agents import recipe
from agents.checkpoint import latest_checkpoint
from agents.evaluation import greedy_episode
from agents.loop import METRIC_KEYS
from agents.ppo import Args
from agents.reproductions import held_out_scores
from agents.rl_policy import RLPolicy, load_rl_policy
from cosim.compose import EnvFactory, make_env, pin_scales
from cosim.config import load_scenario
from cosim.model import load_workload
from cosim.workloads.windows import window

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "lublin256.yaml"
HEURISTICS = ("fcfs+easy", "sjf+easy", "f1+easy")


def train_agent(out: Path, window_split: tuple[int, int], budget_s: float, ns) -> Path:
    """Train one agent for ``budget_s`` seconds of wall time; returns its output folder."""
    config = {"scenario": str(SCENARIO), "observation": ns.observation,
              "window": list(window_split), "kill_slots": 0, "reward": ns.reward,
              "episode_jobs": ns.max_jobs, "episode_end": "placed", "smdp_gamma": None,
              "teacher": None, "guard_wait": ns.guard_wait}
    # Pin the time normalization to the training workload's (the held-out windows
    # would otherwise derive their own from their longest request).
    pin_scales(config).close()
    args = Args(seed=ns.seed, total_steps=10**12, num_envs=ns.envs, async_envs=ns.async_envs,
                num_steps=ns.num_steps, lr=ns.lr, gamma=ns.gamma, ent_coef=ns.ent_coef,
                time_budget_s=budget_s, checkpoint_every_s=120.0,
                mimic_coef=0.5 if ns.teacher else 0.0, mimic_decay=0.5)
    run_dir = out / f"window-{window_split[0]}-{window_split[1]}"
    env_fn = EnvFactory({**config, "teacher": ns.teacher},
                     episode_range=(ns.min_jobs, ns.max_jobs))
    t0 = time.monotonic()
    warm = None
    if ns.teacher and ns.bc_steps and not (ns.resume and latest_checkpoint(run_dir)):
        warm = recipe.WarmStartSpec(ns.bc_steps, epochs=10)
    result = recipe.train(env_fn, "ppo", args, warm_start=warm, out=run_dir, resume=ns.resume,
                          env_config=config, progress=not ns.quiet, teacher=ns.teacher,
                          say=lambda text: print(text, file=sys.stderr))
    print(f"window {window_split}: {result.update} updates, {result.global_step} steps in "
          f"{time.monotonic() - t0:.0f} s", file=sys.stderr)
    return run_dir


def held_out_windows(n_windows: int, n_jobs: int, seed: int):
    """``n_windows`` windows of ``n_jobs`` jobs from a Lublin workload of another seed."""
    scenario = load_scenario(SCENARIO, [f"seed={seed}"])
    workload = load_workload(scenario, base_dir=SCENARIO.parent)
    starts = np.linspace(0, len(workload) - n_jobs, n_windows).astype(int)
    return scenario, [window(workload, n_jobs, start=int(s)) for s in starts]


def evaluate_agent(policy: RLPolicy, scenario, windows) -> list[dict[str, float]]:
    """Greedy episodes, one per window, run until every job has ended."""
    rows = []
    for w in windows:
        env = make_env({**policy.env_config, "scenario": scenario, "teacher": None},
                       workload=w, episode_jobs=len(w), episode_end="completed",
                       base_dir=SCENARIO.parent)
        t0 = time.perf_counter()
        _, steps, info = greedy_episode(policy, env, seed=0)
        m = info["episode_metrics"]
        rows.append({k: float(m[k]) for k in METRIC_KEYS} | {
            "jobs": float(m["jobs_finished"]), "decisions": float(steps),
            "seconds": time.perf_counter() - t0})
    return rows


def evaluate_heuristics(names, scenario, windows) -> dict[str, list[dict[str, float]]]:
    """Each heuristic on every window, through the evaluation protocol (the windows read
    once: :func:`agents.reproductions.held_out_scores`)."""
    _, scores = held_out_scores(scenario, windows, list(names),
                                keys=(*METRIC_KEYS, "jobs_finished"))
    return {name: [{k: float(scores.column(name, k)[i]) for k in METRIC_KEYS}
                   | {"jobs": float(scores.column(name, "jobs_finished")[i])}
                   for i in range(len(windows))] for name in names}


def summarize(rows: list[dict[str, float]]) -> dict[str, float]:
    """Means over windows (and the worst max wait)."""
    out = {k: float(np.mean([r[k] for r in rows])) for k in METRIC_KEYS}
    out["wait_max_worst"] = float(np.max([r["wait_max"] for r in rows]))
    out["jobs"] = float(np.sum([r["jobs"] for r in rows]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-min", type=float, default=30.0,
                    help="total training wall time in minutes, split over the windows")
    ap.add_argument("--out", default="runs/bench/train_lublin")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--windows", nargs="+", default=["32,0", "24,8"], metavar="H,T")
    ap.add_argument("--observation", default="compact", choices=("compact", "kernel"))
    ap.add_argument("--reward", default="slowdown")
    ap.add_argument("--min-jobs", type=int, default=256)
    ap.add_argument("--max-jobs", type=int, default=1024)
    ap.add_argument("--envs", type=int, default=2)
    ap.add_argument("--async", dest="async_envs", action="store_true")
    ap.add_argument("--num-steps", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--ent-coef", type=float, default=0.001)
    ap.add_argument("--teacher", default="f1+greedy", metavar="NAME",
                    help="heuristic teacher: behaviour-cloning warm start and mimic term "
                         "(its first start, or its best legal window job); 'none' disables")
    ap.add_argument("--bc-steps", type=int, default=20000)
    ap.add_argument("--guard-wait", type=float, default=259200.0, metavar="SECONDS",
                    help="env starvation guard (the queue head holds an EASY reservation "
                         "once it has waited this long)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--eval-windows", type=int, default=10)
    ap.add_argument("--eval-jobs", type=int, default=1024)
    ap.add_argument("--eval-seed", type=int, default=1001,
                    help="Lublin generator seed of the held-out workload (training uses 1)")
    ap.add_argument("--skip-train", action="store_true", help="evaluate existing checkpoints")
    ap.add_argument("--quiet", action="store_true")
    ns = ap.parse_args()
    if ns.teacher and ns.teacher.lower() == "none":
        ns.teacher = None
    torch.set_num_threads(1)
    out = Path(ns.out)
    splits = [tuple(int(x) for x in w.split(",")) for w in ns.windows]
    budget_each = ns.budget_min * 60.0 / len(splits)

    run_dirs = {}
    for split in splits:
        run_dir = out / f"window-{split[0]}-{split[1]}"
        run_dirs[split] = run_dir if ns.skip_train else train_agent(out, split, budget_each, ns)

    scenario, windows = held_out_windows(ns.eval_windows, ns.eval_jobs, ns.eval_seed)
    results: dict[str, dict] = {}
    for split, run_dir in run_dirs.items():
        policy = load_rl_policy(run_dir)
        name = f"ppo {split[0]}+{split[1]}"
        per_window = evaluate_agent(policy, scenario, windows)
        results[name] = {**summarize(per_window), "per_window": per_window,
                         "train_steps": policy.global_step, "updates": policy.update}
    for name, per_window in evaluate_heuristics(HEURISTICS, scenario, windows).items():
        results[name] = {**summarize(per_window), "per_window": per_window}

    header = (f"{'policy':<12}{'mean bsld':>11}{'mean wait s':>13}{'util':>8}{'max wait s':>12}"
              f"{'mean queue':>12}")
    print(f"held-out: {ns.eval_windows} windows x {ns.eval_jobs} jobs (Lublin seed "
          f"{ns.eval_seed}); training {ns.budget_min:g} min total")
    print(header)
    for name, r in results.items():
        print(f"{name:<12}{r['bsld_mean']:>11.2f}{r['wait_mean']:>13.0f}{r['utilization']:>8.3f}"
              f"{r['wait_max']:>12.0f}{r['queue_len_mean']:>12.1f}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(
        {"budget_min": ns.budget_min, "eval_windows": ns.eval_windows,
         "eval_jobs": ns.eval_jobs, "eval_seed": ns.eval_seed, "results": results},
        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
