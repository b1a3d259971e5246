"""DBF (seed 000): the split window beats the head-only window at window size 10.

DBF (Wang et al., HPCC 2022, section IV-D and fig. 5) trains one PPO agent
per window configuration on the Lublin-256 workload and finds that, at small
windows (8, 10, 16), taking a few of the M slots from the queue's tail
(``M_h + M_t = M``) lowers the average wait and queue length against the
head-only window ``M_h = M``. Here, per training seed (at least 5), two
agents with the same budget:

- head-only ``10 + 0`` and split ``8 + 2`` (``--split``), DBF's ``start``
  action model (schedule cycling: place window jobs that fit or Fwd, asked at
  every arrival and completion), the compact observation and an MLP, DBF's
  reward (eq. 2: utilization, queue length and waiting, w = 1/3 each, on every
  Fwd), episodes truncated once 256 jobs are placed (DBF: 1,000), random
  windows of ``scenarios/lublin256.yaml``;
- warm start by behaviour cloning of F1 through the agent's own window (not
  in DBF, which trained 100,000 episodes), then masked PPO with RLSchert's
  decaying imitation term; the snapshot with the lowest mean wait on 4
  validation windows of the training workload is kept;
- the starvation guard at 3 days (the queue head holds an EASY reservation
  once it has waited that long), as in ``benchmarks/train_lublin.py``: without
  it the short budgets learn to starve wide jobs.

Test, once every agent is trained: each kept agent runs as a plain policy
(``rl:DIR``) on 10 held-out windows of 1,024 jobs (Lublin generator seed
1001, :func:`agents.reproductions.heldout`), and so does the clone it was
trained from (the warm start, kept by
:class:`agents.reproductions.CloneKeeper`), FCFS+EASY and the teacher too,
all through the evaluation protocol (read once). Reported: mean wait and
mean queue length of each configuration, the split/head ratio of mean waits
per seed, and teacher, clone and agent side by side with the agent's paired
difference to its own clone (per seed, ``mean wait / clone's - 1`` on the
same windows), each with the mean and 95 % interval over seeds (written to
the DBF row of ``docs/reproductions.md``; ``results.json`` also holds the
protocol's paired comparison of each agent with its clone window by window,
``vs_clone_windows``).

    python benchmarks/dbf_split.py                    # 30 min, 5 seeds
    python benchmarks/dbf_split.py --minutes 5        # a short check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from agents import recipe
from agents.ppo import Args
from agents.reproductions import (
    HELDOUT_SEED,
    ROOT,
    CloneKeeper,
    command_cell,
    fmt_ci,
    fmt_pct_ci,
    held_out_scores,
    heldout,
    paired_windows,
    relative_differences,
    validation,
    write_row,
)
from cosim.compose import EnvFactory, make_env
from cosim.config import load_scenario

SCENARIO = "scenarios/lublin256.yaml"
GUARD_WAIT = 3 * 86400.0


def env_config(window: tuple[int, int], episode_jobs: int, reward: str) -> dict:
    """DBF's training environment for one window configuration."""
    return {"scenario": str(ROOT / SCENARIO), "actions": "start", "observation": "compact",
            "window": list(window), "reward": reward, "episode_jobs": episode_jobs,
            "episode_end": "placed", "guard_wait": GUARD_WAIT}


def test_rows(scenario, test, teacher: str, trained: list) -> tuple[tuple, dict]:
    """FCFS+EASY, the teacher, and each trained agent and its clone (``rl:DIR``) on the
    held-out windows, through the protocol (:func:`agents.reproductions.held_out_scores`).

    Args:
        trained: ``(configuration, seed, kept, clone folder)`` of each agent.

    Returns:
        ``((FCFS+EASY's mean wait, the teacher's), rows)``: ``rows[configuration]``, per
        seed, the agent's figures and its clone's.
    """
    sources = ["fcfs+easy", teacher, *(f"rl:{p}" for _, _, kept, clone in trained
                                       for p in (kept.path, clone))]
    protocol, scores = held_out_scores(scenario, test, sources,
                                keys=("wait_mean", "queue_len_mean", "bsld_mean", "wait_max"))

    def mean(name, key):
        return float(np.mean(scores.column(name, key)))
    rows: dict[str, list[dict]] = {}
    for name, seed, kept, clone in trained:
        agent, copy = f"rl:{kept.path}", f"rl:{clone}"
        rows.setdefault(name, []).append({
            "seed": seed, "mean_wait": mean(agent, "wait_mean"),
            "mean_queue": mean(agent, "queue_len_mean"), "bsld": mean(agent, "bsld_mean"),
            "max_wait": float(max(scores.column(agent, "wait_max").tolist())),
            "kept_update": kept.update, "waits": scores.column(agent, "wait_mean").tolist(),
            "clone_waits": scores.column(copy, "wait_mean").tolist(),
            "clone_mean_wait": mean(copy, "wait_mean"),
            "clone_mean_queue": mean(copy, "queue_len_mean"),
            "vs_clone_windows": paired_windows(protocol, scores, "wait_mean", agent, copy)})
    return (mean("fcfs+easy", "wait_mean"), mean(teacher, "wait_mean")), rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="wall-time budget of the whole run (both configurations, all seeds)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--split", type=int, nargs=2, default=[8, 2], metavar=("HEAD", "TAIL"),
                    help="the split window compared with HEAD+TAIL, 0 (default 8 2)")
    ap.add_argument("--reward", default="dbf")
    ap.add_argument("--teacher", default="f1+greedy")
    ap.add_argument("--bc-steps", type=int, default=20_000)
    ap.add_argument("--episode-jobs", type=int, default=256)
    ap.add_argument("--out", default="runs/repro/dbf_split")
    ap.add_argument("--no-table", action="store_true")
    ns = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    t_start = time.monotonic()
    m = sum(ns.split)
    configs = {"head": (m, 0), "split": tuple(ns.split)}
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    scenario = load_scenario(ROOT / SCENARIO)
    test = heldout("exact")
    probes = {k: make_env(env_config(w, ns.episode_jobs, ns.reward), episode_jobs=1024,
                          episode_end="completed") for k, w in configs.items()}
    val = validation(probes["head"])
    print(f"held-out: 10 windows of 1,024 Lublin-256 jobs (generator seed {HELDOUT_SEED}); "
          f"window {m}: head {configs['head']} vs split {configs['split']}", flush=True)

    def scorer(probe):
        def score(policy):
            ms = [policy.play(probe, w) for w in val]
            wait = float(np.mean([x["wait_mean"] for x in ms]))
            return wait, f"validation mean wait {wait:.0f} s"
        return score

    # Test and validation time (about 60 s per agent, its clone's test included) is kept
    # out of the training shares.
    agents = len(configs) * ns.seeds
    left = ns.minutes * 60.0 - (time.monotonic() - t_start) - 60.0 * agents
    share = max(30.0, left / agents)
    trained = []
    for k in range(ns.seeds):
        seed = k + 1
        for name, window in configs.items():
            cfg = env_config(window, ns.episode_jobs, ns.reward)
            args = Args(seed=seed, num_envs=2, async_envs=True, num_steps=256, lr=3e-4,
                        ent_coef=0.003, gamma=0.995, mimic_coef=1.0, mimic_decay=0.6)
            teach = EnvFactory({**cfg, "teacher": ns.teacher})
            keeper = CloneKeeper(scorer(probes[name]))
            kept = recipe.train(teach, "ppo", args, budget_s=share,
                                warm_start=recipe.WarmStartSpec(ns.bc_steps, epochs=8,
                                                                batch_size=256),
                                selection=recipe.Selection(keeper),
                                out=out / f"{name}-seed-{seed}", env_config=cfg,
                                say=lambda s: print(s, flush=True),
                                name=f"{name} {window[0]}+{window[1]} seed {seed}")
            clone = keeper.save(out / f"{name}-seed-{seed}-clone")
            trained.append((name, seed, kept, clone))
    # Every selection is over: the held-out windows, read once by the protocol.
    (ref_wait, teacher_wait), results = test_rows(scenario, test, ns.teacher, trained)
    for name, window in configs.items():
        for res in results[name]:
            print(f"{name} {window[0]}+{window[1]} seed {res['seed']}: mean wait "
                  f"{res['mean_wait']:.0f} s (clone {res['clone_mean_wait']:.0f} s), mean queue "
                  f"{res['mean_queue']:.1f}, bsld {res['bsld']:.1f}", flush=True)
    ratio = [s["mean_wait"] / h["mean_wait"] for s, h in zip(results["split"], results["head"])]
    qratio = [s["mean_queue"] / h["mean_queue"] for s, h in zip(results["split"], results["head"])]
    wins = sum(r < 1 for r in ratio)
    # Agent against its own clone, paired per window; per seed, then over seeds.
    vs_clone = {name: relative_differences([r["waits"] for r in results[name]],
                                           [r["clone_waits"] for r in results[name]])
                for name in configs}
    minutes = (time.monotonic() - t_start) / 60
    print(f"\n{'window':<10}{'agent mean wait s':>22}{'clone mean wait s':>22}"
          f"{'agent vs clone':>28}{'mean queue':>18}")
    for name, window in configs.items():
        print(f"{window[0]}+{window[1]:<8}{fmt_ci([r['mean_wait'] for r in results[name]], '{:.0f}'):>22}"
              f"{fmt_ci([r['clone_mean_wait'] for r in results[name]], '{:.0f}'):>22}"
              f"{fmt_pct_ci(vs_clone[name]):>28}"
              f"{fmt_ci([r['mean_queue'] for r in results[name]], '{:.1f}'):>18}")
    print(f"teacher {ns.teacher} {teacher_wait:.0f} s, fcfs+easy {ref_wait:.0f} s")
    print(f"split/head mean wait {fmt_ci(ratio, '{:.3f}')} (lower in {wins} of {ns.seeds} seeds), "
          f"mean queue {fmt_ci(qratio, '{:.3f}')} ({minutes:.1f} min)")
    (out / "results.json").write_text(json.dumps({
        "configs": {k: list(v) for k, v in configs.items()}, "results": results,
        "ratio": ratio, "fcfs_easy_mean_wait": ref_wait, "teacher": ns.teacher,
        "teacher_mean_wait": teacher_wait, "agent_vs_clone": vs_clone, "minutes": minutes,
        "budget_minutes": ns.minutes}, indent=1))
    if not ns.no_table:
        short = (f"budget {ns.minutes:g} min, ran {minutes:.1f}; " if ns.minutes >= 30 else
                 f"*short budget: {ns.minutes:g} min, ran {minutes:.1f}*; ")
        h, t = ns.split
        write_row("000", [
            "000 DBF", f"split window beats head-only at window {m}",
            "fig. 5 (window 10): one or more tail slots clearly lower the average wait and "
            "queue length; at window 20, 49 % and 50 % lower with the split (section VI)",
            f"{short}{h}+{t} vs {m}+0 mean wait ratio {fmt_ci(ratio, '{:.3f}')}, lower in {wins}/{ns.seeds} seeds; mean queue ratio "
            f"{fmt_ci(qratio, '{:.3f}')}; mean waits {fmt_ci([r['mean_wait'] for r in results['split']], '{:.0f}')}"
            f" s vs {fmt_ci([r['mean_wait'] for r in results['head']], '{:.0f}')} s "
            f"(FCFS+EASY {ref_wait:.0f} s); teacher, clone and agent mean wait on test: "
            + "; ".join(
                f"{w[0]}+{w[1]}: {ns.teacher} {teacher_wait:.0f} s, clone "
                f"{fmt_ci([r['clone_mean_wait'] for r in results[k]], '{:.0f}')} s, agent "
                f"{fmt_ci([r['mean_wait'] for r in results[k]], '{:.0f}')} s, agent vs its clone "
                f"{fmt_pct_ci(vs_clone[k])} (lower in {sum(x < 0 for x in vs_clone[k])}/"
                f"{ns.seeds} seeds)" for k, w in configs.items())
            + f"; PPO kept a trained snapshot over the clone (validation) in "
            f"{sum(r['kept_update'] > 0 for v in results.values() for r in v)}/{2 * ns.seeds} "
            f"agents; {ns.seeds} seeds, 10 held-out windows of 1,024 jobs",
            command_cell("dbf_split.py", ns.minutes),
            "minutes per agent instead of 100,000 episodes, so each agent is warm-started by "
            "behaviour cloning of F1 through its own window; episodes of 256 placed jobs "
            "instead of 1,000; MLP 64x64 instead of 1024-512-256; a 3-day starvation guard"])
        print("row written to docs/reproductions.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
