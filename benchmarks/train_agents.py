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
3. The configuration reported (and saved with ``--save-pretrained``) is the
   one with the lowest mean bsld on the same validation windows
   (:func:`agents.recipe.select_then_test`); so is the best heuristic it is
   compared with (the teacher).
4. Held-out test: 10 consecutive windows of 1,024 jobs from the Lublin
   model with a generator seed never used in training or selection (1001).
   The agents run as plain policies (``rl:DIR`` through ``cosim.compose``) and
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
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agents import ppo, recipe
from cosim.compose import EnvFactory, make_env, pin_scales, run_policy
from cosim.config import load_scenario
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import lublin
from cosim.workloads.windows import window

ROOT = Path(__file__).resolve().parents[1]

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
          teacher: str, log, wrap_score=None) -> Path:
    """Behaviour cloning, then PPO with model selection; returns the saved checkpoint folder.

    ``wrap_score(score)``, when given, replaces the validation score (e.g. a
    ``repro.CloneKeeper`` that also keeps the warm-start clone)."""
    env_config = dict(env_config, teacher=teacher)
    pin_scales(env_config).close()
    args = ppo.Args(seed=seed, num_envs=2, async_envs=True, num_steps=256, lr=3e-4,
                    ent_coef=0.003, mimic_coef=1.0, mimic_decay=0.6, gamma=0.995,
                    checkpoint_every_s=1e9, time_budget_s=None)
    for key, value in config.args.items():
        setattr(args, key, value)
    eval_env = make_env({**env_config, "teacher": None}, episode_jobs=1024)
    val = validation(eval_env)

    def score(policy):
        bsld = float(np.mean([policy.play(eval_env, w)["mean_bsld"] for w in val]))
        return bsld, f"validation bsld {bsld:8.2f}"

    kept = recipe.train(EnvFactory(env_config), "ppo", args, budget_s=budget_s,
                        warm_start=recipe.WarmStartSpec(config.bc_steps, epochs=6,
                                                        batch_size=256),
                        selection=recipe.Selection(score if wrap_score is None
                                                   else wrap_score(score),
                                                   every_s=None, every_updates=8),
                        out=out / config.name, env_config=env_config, say=log,
                        name=config.name, teacher=teacher)
    return kept.path


def _agent_bsld(scenario, agents: dict[str, Path], runs: dict):
    """``(name, window) -> bsld`` of agent ``name`` run on ``window``; keeps each summary in ``runs``."""
    def score(name: str, w) -> float:
        runs[name, id(w)] = run_policy(scenario, f"rl:{agents[name]}", None, workload=w)
        return runs[name, id(w)]["bsld_mean"]
    return score


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
            agents[name] = train(cfg, env_config, budget, out / est, args.seed, teacher, log)
        # The shipped configuration is chosen on the validation windows of the
        # training workload; the held-out windows are read once, after the choice.
        runs: dict[tuple[str, int], dict] = {}
        best_a, val_bsld, _ = recipe.select_then_test(list(agents), val, test,
                                                      _agent_bsld(scenario, agents, runs))
        for name in agents:
            rows[f"agent:{name}"] = [runs[name, id(w)] for w in test]
        log(fmt_table(rows, f"\n[{est}] held-out: 10 windows of 1,024 Lublin-256 jobs "
                            f"(generator seed {HELDOUT_SEED})"))
        best_h = teacher   # the best heuristic on validation, reported on the held-out windows
        ref_max = max(r["wait_max"] for r in rows[REFERENCE])
        a_rows = rows[f"agent:{best_a}"]
        a_bsld = float(np.mean([r["bsld_mean"] for r in a_rows]))
        h_bsld = float(np.mean([r["bsld_mean"] for r in rows[best_h]]))
        a_max = max(r["wait_max"] for r in a_rows)
        log(f"[{est}] chosen on validation: {best_a} (validation bsld "
            + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in val_bsld.items()) + ")")
        log(f"[{est}] chosen agent {best_a}: held-out bsld {a_bsld:.2f} vs best heuristic {best_h} "
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
