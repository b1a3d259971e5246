"""Does every learner beat its own clone on test? PPO, A2C, PG and DQL, paired, over seeds.

Issue 22's third target: "every learner beats its own clone on test with a
95 % interval below zero over at least 5 seeds, or the note says it does
not". For each learner and seed:

1. **Teacher.** The best heuristic with EASY (:data:`cosim.evaluation.CLASSIC`)
   on the validation windows (:func:`cosim.evaluation.best_heuristic`).
2. **Clone.** Behaviour cloning of the teacher through the agent's own
   action model (``select`` over a per-job ``kernel`` network, EASY around
   the chosen job, the teacher's order as backfill order: the shipped
   agent's model), saved as ``OUT/runs/ALGO-seed-S/clone`` (``rl:DIR``).
3. **Agent.** The learner trained from the clone with the paired learning
   signal (:class:`cosim.env.wrappers.PairedReturn`: an episode's return is
   its advantage over the teacher's schedule of the same jobs, ``log`` mode
   by default), the imitation term annealed to zero (``--mimic-decay``;
   not for DQL, which has none), windows where FCFS, SJF and SAF agree
   skipped (``--contention-min``), for a fixed wall budget per run. Snapshots
   are scored on the validation windows only and the best *trained* one is
   kept (the clone itself is scored and reported, but is not a candidate:
   the question is what training did to it).
4. **Test, read once.** After every run has chosen its snapshot, the sealed
   test windows (:class:`cosim.evaluation.SealedWindows`) are read once; the
   agent and its clone play each of them, and at every decision of the
   agent's episode the clone's choice is compared with the agent's (the
   fraction of differing decisions says how far training moved it).

Splits: training episodes are random windows of the scenario's workload
(Lublin generator, scenario seed 1); validation and test windows come from
their own generator seeds (2002 and 3003) through
:func:`cosim.evaluation.seeded_split`: nothing is shared.

Statistics (:func:`agents.reproductions.paired_stats`): per seed, the relative difference in mean
bsld on the test windows, ``mean(agent) / mean(clone) - 1`` (negative: the
agent is better); over seeds, its mean with a 95 % BCa bootstrap interval
(:func:`cosim.paired.mean_interval`); wins and losses over windows
(all seeds) and over seeds. A learner "beats its clone" when the interval's
upper end is below zero.

    python benchmarks/learners_vs_clone.py                       # 4 x 5 runs of 100 s
    python benchmarks/learners_vs_clone.py --run-seconds 30 --seeds 2 --test-windows 10

Prints a table, writes ``OUT/results.json`` and its section of
``docs/reproductions.md`` (``--no-table``: not).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from agents import recipe
from agents.registry import LEARNERS, learner
from agents.reproductions import (
    ROOT,
    TABLE,
    clone_env_config,
    command_line,
    fmt_ci,
    paired_stats,
    play_against_clone,
    write_section,
)
from cosim.engine import run_each

SCENARIO = "scenarios/lublin256.yaml"
#: Generator seeds of the three sets (training: the scenario's own workload, seed 1).
SPLIT_SEEDS = (1, 2002, 3003)
#: Markers of this benchmark's section in docs/reproductions.md.
BEGIN, END = "<!-- learners_vs_clone: begin -->", "<!-- learners_vs_clone: end -->"

__all__ = ["learner_args", "env_config", "summary_rows", "section", "main"]


# -- the runs ---------------------------------------------------------------------------
def env_config(teacher: str, window: int, episode_jobs: int) -> dict:
    """The training env: the shipped agent's action model, the teacher's backfill order."""
    return clone_env_config(teacher, window, episode_jobs, scenario=str(ROOT / SCENARIO))


def learner_args(algo: str, seed: int, mimic_decay: float):
    """Each learner's hyper-parameters for fine-tuning a clone (one env, one torch thread).

    The paired return arrives at the episode's end only, so no discounting
    (gamma 1). Learning rates are set so that a short run moves the clone
    without wiping it in a few updates; the imitation weight starts at 0.5.
    DQL starts near-greedy (epsilon 0.1) instead of random, since it starts
    from a clone.
    """
    cls = learner(algo).args_class()
    common = dict(seed=seed, gamma=1.0, checkpoint_every_s=1e9, torch_threads=1)
    if algo == "ppo":
        return cls(**common, num_envs=1, num_steps=256, lr=5e-4, ent_coef=0.003,
                   mimic_coef=0.5, mimic_decay=mimic_decay)
    if algo == "a2c":
        return cls(**common, num_envs=2, num_steps=16, lr=3e-4, mimic_coef=0.5,
                   mimic_decay=mimic_decay)
    if algo == "pg":
        return cls(**common, num_steps=64, lr=5e-4, mimic_coef=0.5, mimic_decay=mimic_decay)
    return cls(**common, lr=3e-4, eps_start=0.1, eps_min=0.02, learning_starts=256)


def _train_one(task: dict) -> dict:
    """Clone, train with the paired signal, keep the best trained snapshot on validation."""
    import torch

    from agents.checkpoint import save_checkpoint
    from cosim.compose import EnvFactory, make_env
    from cosim.env.wrappers import PairedReturn

    torch.set_num_threads(1)
    algo, seed, ns = task["algo"], task["seed"], task["ns"]
    folder = Path(task["out"])
    cfg = task["config"]
    paired = {"baseline": task["teacher"], "mode": ns["paired_mode"], "metric": "bsld",
              "contention_min": ns["contention_min"]}
    env_fn = EnvFactory({**cfg, "teacher": task["teacher"]},
                        wrap=functools.partial(PairedReturn, **paired))
    eval_env = make_env(cfg, episode_jobs=ns["window_jobs"])
    val = task["validation"]
    clone: dict = {}

    def score(policy):
        bsld = float(np.mean([policy.play(eval_env, w)["bsld_mean"] for w in val]))
        if not clone:
            # The first snapshot scored is the clone (update 0): saved, reported,
            # and kept out of the choice (inf), so the agent is a trained snapshot.
            clone.update(bsld=bsld, meta=policy.meta,
                         state={k: v.clone() for k, v in policy.net.state_dict().items()})
            return math.inf, f"clone: validation bsld {bsld:.3f}"
        return bsld, f"validation bsld {bsld:.3f}"

    args = learner_args(algo, seed, ns["mimic_decay"])
    name = f"{algo} seed {seed}"
    kept = recipe.train(env_fn, algo, args, budget_s=ns["run_seconds"],
                        warm_start=recipe.WarmStartSpec(ns["bc_steps"], epochs=8, batch_size=256),
                        selection=recipe.Selection(score, every_s=ns["score_every"]),
                        out=folder / "agent", env_config={**cfg, "paired": paired},
                        say=lambda s: print(s, flush=True), name=name, teacher=task["teacher"],
                        extra_meta={"clone_validation_bsld": clone.get("bsld")})
    save_checkpoint(folder / "clone", {"model": clone["state"], "update": 0, "global_step": 0},
                    {**clone["meta"], "update": 0, "global_step": 0,
                     "validation_score": clone["bsld"]})
    return {"algo": algo, "seed": seed, "agent": str(kept.path), "clone": str(folder / "clone"),
            "clone_validation": clone["bsld"], "agent_validation": kept.score,
            "kept_update": kept.update, "kept_step": kept.step, "elapsed_s": kept.elapsed_s}


def _test_one(task: dict) -> dict:
    """The agent and its clone on every test window; decisions where they differ."""
    import torch

    from agents.rl_policy import load_rl_policy
    from cosim.compose import make_env

    torch.set_num_threads(1)
    env = make_env(task["config"], episode_jobs=task["window_jobs"])
    played = play_against_clone(load_rl_policy(task["agent"]), load_rl_policy(task["clone"]),
                                env, task["test"])
    return {"algo": task["algo"], "seed": task["seed"], **played}


# -- the table ----------------------------------------------------------------------------
def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:+.1f} %"


def summary_rows(results: dict) -> list[list[str]]:
    """One row per learner: the cells of the docs table."""
    rows = []
    for algo, r in results["learners"].items():
        s = r["stats"]
        interval = (f"{_pct(s['mean'])} [{_pct(s['low'])}, {_pct(s['high'])}]"
                    if math.isfinite(s["low"]) else _pct(s["mean"]))
        rows.append([algo, interval, f"{s['seed_wins']}/{s['seed_losses']}",
                     f"{s['window_wins']}/{s['window_losses']}",
                     f"{100 * r['differ_fraction']:.1f} % ({100 * r['differ_choice_fraction']:.1f} %)",
                     fmt_ci(r["agent_mean"], "{:.2f}"), fmt_ci(r["clone_mean"], "{:.2f}"),
                     "yes" if s["beats"] else "no"])
    return rows


HEAD = ["learner", "agent vs clone, mean bsld (95 % interval over seeds)",
        "seeds better/worse", "windows better/worse",
        "decisions differing from the clone (where >1 legal)", "agent mean bsld",
        "clone mean bsld", "beats its clone"]


def _clone_note(results: dict) -> str:
    """How the clones compare with the teacher, and whether the learners share them."""
    clones = [tuple(v["clone_mean"]) for v in results["learners"].values()]
    teacher = results["teacher_test_bsld"]
    mean = float(np.mean(clones[0]))
    shared = ("(the same for every learner of a seed: same seed, same demonstrations)"
              if len(set(clones)) == 1 else "(one per learner and seed)")
    return f"{mean:.2f} on average, {100 * (mean / teacher - 1):+.1f} % against it {shared}"


def section(results: dict, command: str) -> str:
    """The Markdown section of docs/reproductions.md."""
    r = results
    lines = [
        "## Learners against their own clones",
        "",
        f"Does training move a learner beyond the behaviour clone it starts from? "
        f"Teacher {r['teacher']} (best of {', '.join(r['heuristics'])} on validation); "
        f"`select` actions, kernel network over {r['window']} queued jobs; paired signal "
        f"against the teacher ({r['paired_mode']} mode, contention filter "
        f"{r['contention_min']}), imitation annealed to zero over {r['mimic_decay']:g} of "
        f"the run; **{r['run_seconds']:g} s wall per run** (clone of {r['bc_steps']} "
        f"decisions, training and validation scoring included), {r['parallel']} runs at a "
        f"time on a shared 2-core machine; snapshot chosen on {r['validation_windows']} "
        f"validation windows (generator seed {SPLIT_SEEDS[1]}); test read once: "
        f"{r['test_windows']} windows of {r['window_jobs']} jobs (seed {SPLIT_SEEDS[2]}); "
        f"{r['seeds']} seeds. Negative: the agent has the lower mean bsld. Teacher "
        f"{r['teacher']} on the test windows: {r['teacher_test_bsld']:.2f}; the clones "
        f"{_clone_note(r)}. A learner beats its clone when the interval lies below zero.",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(results)]
    lines += ["", f"Command: `{command}` ({r['minutes']:.1f} min)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=tuple(LEARNERS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--run-seconds", type=float, default=100.0,
                    help="wall budget of one run: clone, training and validation scoring")
    ap.add_argument("--parallel", type=int, default=2, help="runs at a time (processes)")
    ap.add_argument("--bc-steps", type=int, default=16_000)
    ap.add_argument("--window", type=int, default=32, help="queued jobs the agent sees")
    ap.add_argument("--episode-jobs", type=int, default=256, help="jobs per training episode")
    ap.add_argument("--window-jobs", type=int, default=256,
                    help="jobs per validation and test window")
    ap.add_argument("--validation-windows", type=int, default=10)
    ap.add_argument("--test-windows", type=int, default=100)
    ap.add_argument("--score-every", type=float, default=12.0, metavar="SECONDS",
                    help="wall seconds of training between validation scores")
    ap.add_argument("--paired-mode", choices=("log", "clip", "replace"), default="log")
    ap.add_argument("--contention-min", type=float, default=0.02)
    ap.add_argument("--mimic-decay", type=float, default=0.5)
    ap.add_argument("--out", default="runs/learners_vs_clone")
    ap.add_argument("--no-table", action="store_true")
    ap.add_argument("--table-from", default=None, metavar="RESULTS",
                    help="only rewrite the docs section from a results.json of an earlier run")
    ns = ap.parse_args(argv)
    if ns.table_from is not None:
        try:
            results = json.loads(Path(ns.table_from).read_text(encoding="utf-8"))
            text = section(results, results["command"])
        except (OSError, ValueError, KeyError) as exc:
            print(f"learners_vs_clone: {ns.table_from}: {exc}; expected a results.json "
                  "written by this script", file=sys.stderr)
            return 2
        write_section(text, BEGIN, END)
        print(f"section written to {TABLE.relative_to(ROOT)}")
        return 0
    if ns.seeds < 1 or ns.test_windows < 1 or ns.validation_windows < 1:
        print("learners_vs_clone: --seeds, --test-windows and --validation-windows must be "
              "at least 1", file=sys.stderr)
        return 2

    from cosim.config import load_scenario
    from cosim.evaluation import CLASSIC, Evaluator, best_heuristic, seeded_split
    from cosim.workloads.estimates import apply_estimates
    from cosim.workloads.lublin import lublin

    t0 = time.monotonic()
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    scenario = load_scenario(ROOT / SCENARIO)

    def generate(seed: int, jobs: int):
        return apply_estimates(lublin(jobs, procs=256, seed=seed), "exact", seed=seed + 1)

    split = seeded_split(generate, size=ns.window_jobs, train_count=1, count=ns.test_windows,
                         seeds=SPLIT_SEEDS)
    val = split.validation[:ns.validation_windows]
    with Evaluator(scenario, val) as ev:
        val_bsld = dict(zip(CLASSIC, ev.evaluate(list(CLASSIC))[:, :, 0], strict=True))
    teacher = best_heuristic(val_bsld)
    print("validation mean bsld: " + ", ".join(f"{k} {np.mean(v):.2f}"
                                               for k, v in val_bsld.items())
          + f"; teacher {teacher}", flush=True)
    cfg = env_config(teacher, ns.window, ns.episode_jobs)
    from cosim.compose import pin_scales

    pin_scales(cfg).close()
    knobs = {k: getattr(ns, k) for k in ("paired_mode", "contention_min", "mimic_decay",
                                         "run_seconds", "bc_steps", "score_every",
                                         "window_jobs")}
    tasks = [{"algo": algo, "seed": seed, "ns": knobs, "config": cfg, "teacher": teacher,
              "validation": val, "out": str(out / "runs" / f"{algo}-seed-{seed}")}
             for seed in range(1, ns.seeds + 1) for algo in ns.learners]
    print(f"{len(tasks)} runs of {ns.run_seconds:g} s, {ns.parallel} at a time", flush=True)
    trained = run_each(_train_one, tasks, ns.parallel)

    # Every choice is made: the test windows are read, once.
    test = split.test.read()
    with Evaluator(scenario, test) as ev:
        teacher_test = ev.evaluate([teacher])[0, :, 0]
    tested = run_each(_test_one, [{**t, "config": cfg, "test": test,
                                   "window_jobs": ns.window_jobs} for t in trained], ns.parallel)
    by = {(t["algo"], t["seed"]): {**t, **x} for t, x in zip(trained, tested, strict=True)}
    minutes = (time.monotonic() - t0) / 60
    results = {"teacher": teacher, "heuristics": list(CLASSIC),
               "validation_heuristics": {k: float(np.mean(v)) for k, v in val_bsld.items()},
               "teacher_test_bsld": float(np.mean(teacher_test)),
               "teacher_test_windows": [float(x) for x in teacher_test],
               "window": ns.window, "seeds": ns.seeds, "parallel": ns.parallel,
               "validation_windows": len(val), "test_windows": len(test),
               "minutes": minutes, "split": split.note, **knobs, "learners": {},
               "command": command_line("learners_vs_clone.py",
                                       sys.argv[1:] if argv is None else argv)}
    for algo in ns.learners:
        runs = [by[algo, s] for s in range(1, ns.seeds + 1)]
        a = np.array([r["agent_bsld"] for r in runs])
        c = np.array([r["clone_bsld"] for r in runs])
        stats = paired_stats(a, c)
        results["learners"][algo] = {
            "stats": stats, "agent_mean": [float(x) for x in a.mean(axis=1)],
            "clone_mean": [float(x) for x in c.mean(axis=1)],
            "differ_fraction": sum(r["differ"] for r in runs) / max(1, sum(r["decisions"]
                                                                           for r in runs)),
            "differ_choice_fraction": sum(r["differ_choices"] for r in runs)
            / max(1, sum(r["choices"] for r in runs)),
            "runs": [{k: v for k, v in r.items() if k not in ("agent_bsld", "clone_bsld")}
                     | {"agent_bsld": r["agent_bsld"], "clone_bsld": r["clone_bsld"]}
                     for r in runs]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print()
    widths = [max(len(h), 8) for h in ("learner", "agent vs clone [95 %]", "seeds +/-",
                                       "windows +/-", "differing", "agent", "clone", "beats")]
    names = ["learner", "agent vs clone [95 %]", "seeds +/-", "windows +/-", "differing",
             "agent", "clone", "beats"]
    rows = summary_rows(results)
    widths = [max(w, *(len(r[i]) for r in rows)) for i, w in enumerate(widths)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)))
    for row in rows:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)))
    print(f"teacher {teacher} on test: {results['teacher_test_bsld']:.2f}; budget "
          f"{ns.run_seconds:g} s wall per run, {ns.parallel} at a time; {len(test)} test windows "
          f"of {ns.window_jobs} jobs; {ns.seeds} seeds; {minutes:.1f} min")
    print(f"wrote {out / 'results.json'}")
    if not ns.no_table:
        write_section(section(results, results["command"]), BEGIN, END)
        print(f"section written to {TABLE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
