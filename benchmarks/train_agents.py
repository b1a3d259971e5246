"""Learned agents against the best heuristics with EASY backfilling, on held-out workloads.

Issue 10's benchmark. For each estimate model (``exact``: requests equal run
times, as in the Lublin and Mao settings of the seed papers; ``tsafrir``:
noisy user requests, thesis ch. 2):

1. Training data: ``scenarios/lublin256.yaml`` (256 cores, Lublin-Feitelson
   jobs, generator seed 1). The teacher is the heuristic with the lowest mean
   bsld on validation windows of the *training* workload (never the held-out
   one).
2. Each agent configuration is trained within its share of the time budget:
   behaviour cloning from the teacher through the agent's own action model,
   then masked PPO with RLSchert's decaying imitation term. Every few updates
   the greedy policy is scored on the validation windows, and the best
   snapshot is kept (model selection on training-distribution data only).
3. Held-out test: 10 consecutive windows of 1,024 jobs from the Lublin
   model with a generator seed never used in training or selection (1001).
   The agents run as plain policies (``rl:DIR`` through ``cosim.runner``) and
   the heuristics through the same runner, on the same jobs.

Target (issue 10): the best agent's mean bsld at or below the best of SJF,
SAF, F1, WFP3 and UNICEF with EASY, with its max wait at most 2x FCFS+EASY's
(max over the windows). The script prints one table per estimate model (mean
and per-window bsld, max wait) and writes ``OUT/results.json``.

    python benchmarks/train_agents.py [--minutes 30] [--estimates exact tsafrir]
        [--configs select-saf select-guard] [--out runs/train_agents]
        [--save-pretrained agents/pretrained/lublin256]

The time budget is wall time on this machine (2 cores) for all configurations
of one estimate model; torch uses one thread and each configuration steps two
environments in two processes (``ShardedVectorEnv``).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents import loop, ppo  # noqa: E402
from agents.checkpoint import save_checkpoint  # noqa: E402
from agents.imitation import agreement, behaviour_cloning, collect_demonstrations  # noqa: E402
from agents.networks import make_network  # noqa: E402
from agents.rl_policy import RLPolicy, make_env  # noqa: E402
from cosim.config import load_scenario  # noqa: E402
from cosim.runner import run_policy  # noqa: E402
from cosim.workloads.estimates import apply_estimates  # noqa: E402
from cosim.workloads.lublin import lublin  # noqa: E402
from cosim.workloads.windows import window  # noqa: E402

SCENARIO = "scenarios/lublin256.yaml"
HEURISTICS = ("sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")
REFERENCE = "fcfs+easy"
HELDOUT_SEED = 1001


@dataclass
class Config:
    """One agent configuration: action model, env options, learning options."""

    name: str
    env: dict
    args: dict = field(default_factory=dict)
    bc_steps: int = 20_000
    share: float = 1.0


#: The configurations the benchmark can train (``--configs``).
CONFIGS = {
    # select (RLScheduler / thesis style) with EASY semantics for the agent's
    # choice, a per-job scoring network over the first 128 queued jobs.
    "select": Config("select", dict(actions="select", observation="kernel", window=128,
                                    reward="slowdown", episode_jobs=256)),
    # the same, fine-tuned gently (a sixth of the learning rate, twice the
    # demonstrations). Tried for issue 10: its clone validated worse (24.7
    # against 20.2) and PPO did not close the gap in 8 minutes (best 24.1).
    "select-fine": Config("select-fine", dict(actions="select", observation="kernel", window=128,
                                              reward="slowdown", episode_jobs=256),
                          args=dict(lr=5e-5, target_kl=0.01), bc_steps=40_000),
    # the same with the starvation guard at 3 days (bounds the max wait).
    "select-guard": Config("select-guard", dict(actions="select", observation="kernel",
                                                window=128, reward="slowdown", episode_jobs=256,
                                                guard_wait=3 * 86400.0)),
    # DRAS's two levels with DRAS's network.
    "dras": Config("dras", dict(actions="dras", observation="dras", window=50,
                                reward="slowdown", episode_jobs=256)),
    # DBF's split window (start model).
    "start": Config("start", dict(actions="start", observation="kernel", window=[24, 8],
                                  reward="slowdown", episode_jobs=256,
                                  guard_wait=3 * 86400.0)),
}


def estimate_sets(model: str) -> list[str]:
    """``--set`` overrides that give the training scenario this estimate model."""
    return [f"workload.estimates.model={model}"]


def heldout(model: str, n: int = 10, size: int = 1024):
    """The held-out windows: a Lublin workload with an unseen generator seed."""
    jobs = lublin(n * size, procs=256, seed=HELDOUT_SEED)
    if model != "trace":
        jobs = apply_estimates(jobs, model, seed=HELDOUT_SEED + 1)
    return [window(jobs, size, start=k * size) for k in range(n)]


def validation(env, n: int = 4, size: int = 1024):
    """Validation windows of the training workload (late in the trace)."""
    w = env.workload
    return [window(w, size, start=len(w) - (k + 1) * size) for k in range(n)]


def score_heuristics(scenario, windows, names) -> dict[str, list[dict]]:
    """Each heuristic's summary per window."""
    return {name: [run_policy(scenario, name, None, workload=w) for w in windows]
            for name in names}


def train(config: Config, env_config: dict, budget_s: float, out: Path, seed: int,
          teacher: str, log) -> Path:
    """Behaviour cloning, then PPO with model selection; returns the saved checkpoint folder."""
    import torch

    t0 = time.monotonic()
    env_config = dict(env_config, teacher=teacher)
    probe = make_env(env_config)
    env_config["max_time"] = float(probe.max_time)
    env_fn = _Factory(env_config)
    args = ppo.Args(seed=seed, num_envs=2, async_envs=True, num_steps=256, lr=3e-4,
                    ent_coef=0.003, mimic_coef=1.0, mimic_decay=0.6, gamma=0.995,
                    checkpoint_every_s=1e9, time_budget_s=None)
    for key, value in config.args.items():
        setattr(args, key, value)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = make_network(probe.observation_space, probe.action_space, args.network, args.hidden)
    demos = collect_demonstrations(env_fn, config.bc_steps, seed=seed)
    behaviour_cloning(net, demos, epochs=6, batch_size=256, seed=seed)
    log(f"  {config.name}: cloned {teacher} from {len(demos)} decisions, "
        f"agreement {agreement(net, demos):.3f} ({time.monotonic() - t0:.0f} s)")
    del demos
    eval_env = make_env({**env_config, "teacher": None}, episode_jobs=1024)
    val = validation(eval_env)
    meta = {"algo": "ppo", "args": args.to_dict(), "network": net.spec,
            "env": {**env_config, "teacher": None}}
    best = {"score": math.inf}

    def consider(state_dict, update, step):
        policy = RLPolicy(copy.deepcopy(net).eval(), meta)
        policy.net.load_state_dict(state_dict)
        ms = [policy.play(eval_env, w) for w in val]
        bsld = float(np.mean([m["mean_bsld"] for m in ms]))
        if bsld < best["score"]:
            best.update(score=bsld, state={k: v.clone() for k, v in state_dict.items()},
                        update=update, step=step)
        log(f"  {config.name}: update {update:4d} step {step:8d} validation bsld {bsld:8.2f}"
            f" (best {best['score']:.2f} at {best.get('update', 0)}) "
            f"[{time.monotonic() - t0:.0f} s]")

    consider(net.state_dict(), 0, 0)
    remaining = budget_s - (time.monotonic() - t0)
    args.time_budget_s = max(1.0, remaining)
    args.total_steps = 10**12
    state = {"net": None, "n": 0}

    def on_row(row):
        state["n"] += 1
        if state["n"] % 8 == 0:
            consider(state["net"].state_dict(), int(row["update"]), int(row["global_step"]))

    result = loop.run("ppo", ppo.ppo_update, env_fn, args, init_state_dict=net.state_dict(),
                     log=on_row, on_start=lambda n: state.__setitem__("net", n))
    consider(result.net.state_dict(), result.update, result.global_step)
    folder = out / config.name
    if folder.exists():
        shutil.rmtree(folder)
    save_checkpoint(folder, {"model": best["state"], "update": best["update"],
                             "global_step": best["step"]},
                    {**meta, "update": best["update"], "global_step": best["step"],
                     "validation_bsld": best["score"]})
    return folder


class _Factory:
    """A picklable env factory (ShardedVectorEnv workers build their own envs)."""

    def __init__(self, env_config: dict):
        self.env_config = env_config

    def __call__(self):
        return make_env(self.env_config)


def fmt_table(rows: dict[str, list[dict]], title: str) -> str:
    """Mean bsld, per-window bsld, mean and max wait, one row per policy."""
    lines = [title, f"{'policy':<16}{'mean bsld':>10}{'max wait s':>12}{'mean wait s':>12}"
             "   per-window bsld"]
    for name, res in rows.items():
        b = [r["bsld_mean"] for r in res]
        lines.append(f"{name:<16}{np.mean(b):>10.2f}{max(r['wait_max'] for r in res):>12.0f}"
                     f"{np.mean([r['wait_mean'] for r in res]):>12.0f}   "
                     + " ".join(f"{x:.0f}" for x in b))
    return "\n".join(lines)


def main() -> None:
    import torch

    torch.set_num_threads(1)   # small networks; the environments use the other core
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="training wall time per estimate model, shared by the configurations")
    ap.add_argument("--estimates", nargs="+", default=["exact", "tsafrir"])
    ap.add_argument("--configs", nargs="+", default=["select", "select-guard"],
                    choices=sorted(CONFIGS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="runs/train_agents")
    ap.add_argument("--save-pretrained", default=None, metavar="DIR",
                    help="copy the best agent of the last estimate model here")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}

    def log(msg):
        print(msg, flush=True)

    best_overall = None
    for est in args.estimates:
        sets = estimate_sets(est)
        scenario = load_scenario(ROOT / SCENARIO, sets)
        env_probe = make_env({"scenario": SCENARIO, "scenario_set": sets}, episode_jobs=1024)
        val = validation(env_probe)
        val_scores = score_heuristics(scenario, val, HEURISTICS)
        teacher = min(HEURISTICS, key=lambda n: np.mean([r["bsld_mean"] for r in val_scores[n]]))
        log(f"[{est}] teacher (best on validation windows of the training workload): {teacher}")
        test = heldout(est)
        rows = score_heuristics(scenario, test, (REFERENCE, *HEURISTICS))
        total = args.minutes * 60.0
        shares = sum(CONFIGS[c].share for c in args.configs)
        agents = {}
        for name in args.configs:
            cfg = CONFIGS[name]
            env_config = {"scenario": SCENARIO, "scenario_set": sets, **cfg.env}
            if env_config.get("actions") == "select":
                env_config["backfill_order"] = teacher.split("+")[0]
            budget = total * cfg.share / shares
            folder = train(cfg, env_config, budget, out / est, args.seed, teacher, log)
            agents[name] = folder
            rows[f"agent:{name}"] = [run_policy(scenario, f"rl:{folder}", None, workload=w)
                                     for w in test]
        log(fmt_table(rows, f"\n[{est}] held-out: 10 windows of 1,024 Lublin-256 jobs "
                            f"(generator seed {HELDOUT_SEED})"))
        best_h = min(HEURISTICS, key=lambda n: np.mean([r["bsld_mean"] for r in rows[n]]))
        ref_max = max(r["wait_max"] for r in rows[REFERENCE])
        best_a = min(agents, key=lambda a: np.mean([r["bsld_mean"] for r in rows[f"agent:{a}"]]))
        a_rows = rows[f"agent:{best_a}"]
        a_bsld = float(np.mean([r["bsld_mean"] for r in a_rows]))
        h_bsld = float(np.mean([r["bsld_mean"] for r in rows[best_h]]))
        a_max = max(r["wait_max"] for r in a_rows)
        log(f"[{est}] best agent {best_a}: bsld {a_bsld:.2f} vs best heuristic {best_h} "
            f"{h_bsld:.2f} ({(a_bsld / h_bsld - 1) * 100:+.1f} %); max wait {a_max:.0f} = "
            f"{a_max / ref_max:.2f}x {REFERENCE}'s {ref_max:.0f} (target <= 2x)")
        results[est] = {"teacher": teacher, "agents": {k: str(v) for k, v in agents.items()},
                        "rows": {k: [{m: r.get(m) for m in ("bsld_mean", "wait_mean", "wait_max",
                                                             "utilization")} for r in v]
                                 for k, v in rows.items()}}
        best_overall = agents[best_a]
    (out / "results.json").write_text(json.dumps(results, indent=1))
    if args.save_pretrained and best_overall is not None:
        dest = Path(args.save_pretrained)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(best_overall, dest)
        log(f"saved {best_overall} as {dest}")


if __name__ == "__main__":
    main()
