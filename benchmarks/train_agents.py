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
   one with the lowest mean bsld on the same validation windows (first on
   ties); so is the best heuristic it is compared with (the teacher).
4. Held-out test, read once after the choice: 10 consecutive windows of
   1,024 jobs from the Lublin model with a generator seed never used in
   training or selection (1001). The agents run as plain policies
   (``rl:DIR``) and the heuristics on the same jobs, all through the
   evaluation protocol (:func:`agents.reproductions.held_out_scores`).

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

``--recipe shipped`` (issue 22) trains the shipped agents instead: the base
is the best classic heuristic with EASY on validation windows of the training
*distribution* (:func:`shipped_validation`: typeless Lublin windows and
mixture draws, seeds 3001/3003); an ``inspect`` agent over it (or, with
``--actions select``, a ``select`` agent cloned from it) learns from the
paired ``log`` signal against the base's schedule of the same episode, with
the imitation weight annealed to zero, contention filtering and (exact
estimates) the workload mixture :data:`SHIPPED_MIXTURE`; the snapshot kept is
the best on validation, the clone included. The test is
``benchmarks/other_lublin.py`` (a Lublin trace of other parameters)::

    python benchmarks/train_agents.py --recipe shipped --estimates exact --minutes 20 --out runs/ship-exact
    python benchmarks/train_agents.py --recipe shipped --actions select --estimates tsafrir \
        --no-mixture --minutes 15 --out runs/sel-tsafrir
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from agents import ppo, recipe
from agents.reproductions import HELDOUT_SEED, held_out_scores, heldout, validation
from cosim.compose import EnvFactory, make_env, pin_scales
from cosim.compose.training import CONFIGS, train_from_clone
from cosim.config import load_scenario
from cosim.evaluation import COL_BSLD, Evaluator
from cosim.workloads.estimates import apply_estimates
from cosim.workloads.lublin import lublin

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = "scenarios/lublin256.yaml"
HEURISTICS = ("sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")
REFERENCE = "fcfs+easy"


def estimate_sets(model: str) -> list[str]:
    """``--set`` overrides that give the training scenario this estimate model."""
    return [f"workload.estimates.model={model}"]


def validation_bsld(scenario, windows, names) -> dict[str, list[float]]:
    """Each policy's mean bsld per validation window (:class:`cosim.evaluation.Evaluator`)."""
    with Evaluator(scenario, windows) as ev:
        values = ev.evaluate(list(names))[:, :, COL_BSLD]
    return {name: values[i].tolist() for i, name in enumerate(names)}


#: The figures of each held-out window the report reads (the names of summary.json).
ROW_KEYS = ("bsld_mean", "wait_mean", "wait_max", "utilization")


def held_out_rows(scenario, windows, sources: dict[str, str]) -> dict[str, list[dict]]:
    """``{row name: policy}`` on the held-out windows, read once through the evaluation
    protocol (:func:`agents.reproductions.held_out_scores`): per row, :data:`ROW_KEYS` of
    each window."""
    _, scores = held_out_scores(scenario, windows, list(sources.values()), keys=ROW_KEYS)
    return {row: [{k: float(scores.column(name, k)[i]) for k in ROW_KEYS}
                  for i in range(len(windows))] for row, name in sources.items()}


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
        val_scores = validation_bsld(scenario, val, HEURISTICS)
        teacher = min(HEURISTICS, key=lambda n: np.mean(val_scores[n]))
        log(f"[{est}] teacher (best on validation windows of the training workload): {teacher}")
        test = heldout(est)
        total = args.minutes * 60.0
        shares = sum(CONFIGS[c].share for c in args.configs)
        agents = {}
        for name in args.configs:
            cfg = CONFIGS[name]
            env_config = {"scenario": SCENARIO, "scenario_set": sets, **cfg.env}
            if env_config.get("actions") == "select":
                env_config["backfill_order"] = teacher.split("+")[0]
            budget = total * cfg.share / shares
            agents[name] = train_from_clone(cfg, env_config, budget, out / est, args.seed, teacher, log)
        # The shipped configuration is chosen on the validation windows of the
        # training workload; the held-out windows are read once, after the choice.
        val_bsld = validation_bsld(scenario, val, [f"rl:{agents[n]}" for n in agents])
        val_bsld = {name: val_bsld[f"rl:{agents[name]}"] for name in agents}
        best_a = min(agents, key=lambda name: float(np.mean(val_bsld[name])))
        rows = held_out_rows(scenario, test, {
            **{name: name for name in (REFERENCE, *HEURISTICS)},
            **{f"agent:{name}": f"rl:{path}" for name, path in agents.items()}})
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


# -- issue 22: the shipped agents' recipe ---------------------------------------------------
#: Generator seeds of the shipped recipe's validation windows: typeless Lublin windows
#: (estimates drawn with the next seed) and the mixture's draws. Disjoint from training
#: (1), train_agents' held-out set (1001), inspector (1002, 1003) and other_lublin (7001, 7002).
SHIPPED_VALIDATION_SEEDS = (3001, 3003)

#: The workload mixture the shipped agents train on: Lublin parameters drawn per episode
#: over the range of the paper's three fits, offered load 0.6-1.0, and the scenario's own
#: trace in a third of the episodes.
SHIPPED_MIXTURE = {"lublin": 2.0, "trace": 1.0, "load": [0.6, 1.0], "seed": 11}


def shipped_validation(estimates: str, n: int = 8, size: int = 1024) -> list:
    """Validation windows of the training *distribution*: ``n`` typeless Lublin windows and
    ``n`` mixture draws, with the estimate model; never the other-parameter test trace."""
    from cosim.evaluation import windows
    from cosim.workloads.mixture import draw_episode, lublin_episode, normalise_mixture

    typeless_seed, mixture_seed = SHIPPED_VALIDATION_SEEDS
    jobs = lublin(n * size, procs=256, seed=typeless_seed)
    out = windows(jobs if estimates == "exact"
                  else apply_estimates(jobs, estimates, seed=typeless_seed + 1), size, n)
    spec = normalise_mixture({**SHIPPED_MIXTURE, "trace": 0.0, "seed": mixture_seed})
    rng = np.random.default_rng(mixture_seed)
    for k in range(n):
        w = lublin_episode(draw_episode(spec, rng, 0, size), size, 256)
        out.append(w if estimates == "exact"
                   else apply_estimates(w, estimates, seed=mixture_seed + 1 + k))
    return out


def train_shipped(estimates: str, base: str, minutes: float, out: Path, seed: int, log,
                  *, mixture: bool = True, bc_steps: int = 4096, episode_jobs: int = 256,
                  update_every: int = 6, ent_coef: float = 0.01, actions: str = "inspect"
                  ) -> dict:
    """Issue 22's recipe: an ``inspect`` agent over ``base`` (accept or delay each start).

    Behaviour cloning of ``base`` (accept every proposal: the base's schedule),
    then PPO on the paired ``log`` signal against ``base``'s schedule of the
    same episode, the imitation weight annealed to zero over the first quarter,
    windows where FCFS, SJF and SAF are within 5 % skipped, episodes from
    :data:`SHIPPED_MIXTURE`. Every ``update_every`` updates the greedy policy
    is scored on :func:`shipped_validation` (mean per-window ratio to ``base``);
    the best snapshot is kept, the clone (= ``base``) included, so validation
    never says it is worse than its base. Returns the figures for the card.

    ``actions="select"`` trains the thesis's ``select`` model instead (kernel
    observation of 128 queued jobs, EASY around the chosen job, backfilling in
    ``base``'s order), cloned from ``base`` with 20,000 decisions and the
    imitation weight annealed over the first half; its clone is not exactly
    ``base``, so validation can rate it worse.
    """
    import functools
    import resource
    import time

    from agents.rl_policy import load_rl_policy
    from cosim.env.wrappers import PairedReturn
    from cosim.evaluation import Evaluator

    sets = estimate_sets(estimates)
    paired = {"baseline": base, "mode": "log", "metric": "bsld", "contention_min": 0.05}
    env_config = {"scenario": SCENARIO, "scenario_set": sets, "actions": "inspect",
                  "observation": "compact", "base_policy": base, "kill_slots": 0,
                  "reward": "slowdown", "episode_jobs": episode_jobs,
                  "episode_end": "completed", "smdp_gamma": None, "teacher": base,
                  "guard_wait": None, "paired": paired}
    mimic_decay = 0.25
    if actions == "select":
        del env_config["base_policy"]
        env_config.update(actions="select", observation="kernel", window=128,
                          backfill_order=base.split("+")[0])
        bc_steps, mimic_decay = max(bc_steps, 20_000), 0.5
    if mixture:
        env_config.update(episode_source="mixture", mixture=dict(SHIPPED_MIXTURE))
    pin_scales(env_config).close()
    scenario = load_scenario(ROOT / SCENARIO, sets)
    val = shipped_validation(estimates)
    with Evaluator(scenario, val) as ev:
        base_val = ev.evaluate([base])[0, :, 0]
    eval_env = make_env({**env_config, "teacher": None}, episode_jobs=1024,
                        episode_end="completed")

    def score(policy):
        agent = np.array([policy.play(eval_env, w)["bsld_mean"] for w in val])
        r = float(np.mean(agent / base_val))
        return r, f"validation ratio to {base} {r:.4f} (mean bsld {agent.mean():.2f})"

    args = ppo.Args(seed=seed, num_envs=2, async_envs=True, num_steps=256, lr=3e-4,
                    ent_coef=ent_coef, mimic_coef=0.5, mimic_decay=mimic_decay, gamma=1.0,
                    gae_lambda=1.0, checkpoint_every_s=1e9, time_budget_s=None)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    kept = recipe.train(EnvFactory(env_config, wrap=functools.partial(PairedReturn, **paired)),
                        "ppo", args, budget_s=minutes * 60.0,
                        warm_start=recipe.WarmStartSpec(bc_steps, epochs=6, batch_size=256),
                        selection=recipe.Selection(score, every_s=None,
                                                   every_updates=update_every),
                        out=out, env_config=env_config, say=log, name=f"{actions}-{estimates}",
                        teacher=base,
                        extra_meta={"validation": "mean per-window ratio to the base on "
                                    f"shipped_validation({estimates!r}) (seeds "
                                    f"{SHIPPED_VALIDATION_SEEDS})"})
    cpu1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(cpu0, cpu1))
    policy = load_rl_policy(out)
    agent_val = np.array([policy.play(eval_env, w)["bsld_mean"] for w in val])
    return {"estimates": estimates, "base": base, "actions": actions, "env": env_config, "args": args.to_dict(),
            "kept_update": kept.update, "kept_step": kept.step, "validation_score": kept.score,
            "validation_agent": agent_val.tolist(), "validation_base": base_val.tolist(),
            "wall_s": time.monotonic() - t0, "cpu_s": cpu, "bc_steps": bc_steps}


def shipped_main(argv=None) -> None:
    """``--recipe shipped``: choose the base on validation, train, save, write a summary."""
    import torch

    from cosim.evaluation import CLASSIC, Evaluator, best_heuristic

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description="issue 22's shipped agents (inspect over a base)")
    ap.add_argument("--recipe", choices=["shipped"], required=True)
    ap.add_argument("--estimates", default="exact", choices=["exact", "tsafrir"])
    ap.add_argument("--minutes", type=float, default=20.0, help="training wall time")
    ap.add_argument("--base", action="append", default=[], metavar="POLICY",
                    help="extra base candidates (e.g. learned:DIR) beside the classic heuristics")
    ap.add_argument("--no-mixture", action="store_true", help="train on the scenario's trace")
    ap.add_argument("--ent-coef", type=float, default=0.01)
    ap.add_argument("--actions", default="inspect", choices=["inspect", "select"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, flush=True)

    scenario = load_scenario(ROOT / SCENARIO, estimate_sets(ns.estimates))
    val = shipped_validation(ns.estimates)
    candidates = [*CLASSIC, *ns.base]
    with Evaluator(scenario, val) as ev:
        vb = ev.evaluate(candidates)[:, :, 0]
    val_bsld = {c: vb[i] for i, c in enumerate(candidates)}
    base = best_heuristic(val_bsld)
    log(f"[{ns.estimates}] base chosen on validation ({len(val)} windows): {base}; "
        + ", ".join(f"{c} {v.mean():.2f}" for c, v in val_bsld.items()))
    figures = train_shipped(ns.estimates, base, ns.minutes, out / "agent", ns.seed, log,
                            mixture=not ns.no_mixture, ent_coef=ns.ent_coef,
                            actions=ns.actions)
    figures["base_candidates"] = {c: v.tolist() for c, v in val_bsld.items()}
    (out / "shipped.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")
    log(f"[{ns.estimates}] kept update {figures['kept_update']} (validation ratio "
        f"{figures['validation_score']:.4f}); {figures['wall_s']:.0f} s wall, "
        f"{figures['cpu_s']:.0f} CPU s; agent in {out / 'agent'}")


if __name__ == "__main__":
    import sys

    if "--recipe" in sys.argv:
        shipped_main()
    else:
        main()
