"""Learning curves: validation mean bsld against training steps for ppo, a2c, pg and dql.

Each learner trains from scratch (no warm start), with the same seed, the same
environment (``select`` over a kernel observation of the first 32 queued jobs,
EASY backfilling around the chosen job, slowdown reward) and the same number
of decisions, through :func:`agents.recipe.train`. Every ``--eval-every``
decisions its greedy policy plays the validation windows (the last windows of
the Lublin-256 trace; training episodes start anywhere, so they may overlap:
these are training curves, not a held-out result), and the curve records the
mean bsld. The teacher heuristic SAF+EASY on the same windows is a horizontal
line. ``--mixture`` trains on a workload mixture instead of trace windows
(``episode_source="mixture"``, :mod:`cosim.workloads.mixture`).

Curves move with training noise: one seed, short runs. They show where each
learner starts and which way it goes, not a ranking of the learners.

Usage::

    PYTHONPATH=. python benchmarks/learning_curves.py --out docs/learning_curves.png

prints one row per evaluation and the CPU seconds of each learner, and writes
the PNG and its numbers (``.json`` beside it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from agents import recipe
from agents.registry import LEARNERS, learner
from cosim.compose import EnvFactory, make_env, pin_scales
from cosim.config import load_scenario
from cosim.evaluation import COL_BSLD, Evaluator
from cosim.workloads.windows import window

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/lublin256.yaml"
TEACHER = "saf+easy"


def env_config(episode_jobs: int, mixture: bool) -> dict:
    """The training environment every learner shares."""
    config = {"scenario": SCENARIO, "actions": "select", "observation": "kernel", "window": 32,
              "reward": "slowdown", "episode_jobs": episode_jobs, "backfill_order": "saf"}
    if mixture:
        config.update(episode_source="mixture", mixture={"trace": 0.5, "seed": 0})
    return config


def curve(algo: str, config: dict, steps: int, eval_every: int, seed: int, val, eval_env,
          out: Path) -> tuple[list[tuple[int, float]], float]:
    """``[(step, validation bsld)]`` of one learner, and the CPU seconds it took."""
    args_cls = learner(algo).args_class()
    args = args_cls(seed=seed, total_steps=steps, checkpoint_every_s=1e9)
    per_update = args.num_envs * args.num_steps
    scores: list[float] = []
    points: list[tuple[int, float]] = []

    def score(policy):
        bsld = float(np.mean([policy.play(eval_env, w)["bsld_mean"] for w in val]))
        scores.append(bsld)
        return bsld, f"validation bsld {bsld:8.2f}"

    def say(text: str) -> None:
        # recipe.train reports "update U step S ..." right after each score.
        found = re.search(r"update\s+(\d+) step\s+(\d+)", text)
        if found and scores:
            if points and points[-1][0] == int(found.group(2)):
                points.pop()   # the final score repeats the last step's
            points.append((int(found.group(2)), scores[-1]))
            print(f"{algo:4s} step {int(found.group(2)):7d}  validation bsld {scores[-1]:8.2f}",
                  flush=True)

    cpu = time.process_time()
    recipe.train(EnvFactory(config), algo, args,
                 selection=recipe.Selection(score, every_s=None,
                                            every_updates=max(1, round(eval_every / per_update))),
                 out=out / algo, env_config=config, say=say, name=algo)
    return points, time.process_time() - cpu


def plot(curves: dict, teacher: float, path: Path, title: str) -> None:
    """The curves and the teacher's line as a PNG."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    for algo, points in curves.items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", markersize=3, label=algo)
    ax.axhline(teacher, color="black", linestyle="--", label=f"{TEACHER} (teacher)")
    ax.set_xlabel("training decisions")
    ax.set_ylabel("validation mean bounded slowdown")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=16000, help="training decisions per learner")
    ap.add_argument("--eval-every", type=int, default=1000, metavar="DECISIONS")
    ap.add_argument("--episode-jobs", type=int, default=128)
    ap.add_argument("--windows", type=int, default=3, help="validation windows")
    ap.add_argument("--window-jobs", type=int, default=256)
    ap.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=tuple(LEARNERS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mixture", action="store_true",
                    help="train on a mixture: half trace windows, half randomised Lublin")
    ap.add_argument("--out", default="docs/learning_curves.png")
    ns = ap.parse_args()

    config = env_config(ns.episode_jobs, ns.mixture)
    pin_scales(config).close()
    eval_env = make_env({**config, "episode_source": "window", "mixture": None},
                        episode_jobs=ns.window_jobs)
    jobs = eval_env.unwrapped.workload
    val = [window(jobs, ns.window_jobs, start=len(jobs) - (k + 1) * ns.window_jobs)
           for k in range(ns.windows)]
    scenario = load_scenario(ROOT / SCENARIO)
    with Evaluator(scenario, val) as ev:
        teacher = float(np.mean(ev.evaluate([TEACHER])[0, :, COL_BSLD]))
    print(f"{TEACHER} on the validation windows: {teacher:.2f}", flush=True)
    curves, cpu = {}, {}
    tmp = Path(tempfile.mkdtemp(prefix="learning_curves_"))
    try:
        for algo in ns.learners:
            curves[algo], cpu[algo] = curve(algo, config, ns.steps, ns.eval_every, ns.seed, val,
                                            eval_env, tmp)
            print(f"{algo}: {cpu[algo]:.0f} CPU s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    source = "mixture (half windows, half randomised Lublin)" if ns.mixture else "trace windows"
    title = (f"select, {ns.steps} decisions per learner, seed {ns.seed}, {source}; "
             f"validation: {ns.windows} x {ns.window_jobs} jobs of Lublin-256")
    out = Path(ns.out)
    plot(curves, teacher, out, title)
    out.with_suffix(".json").write_text(json.dumps(
        {"teacher": teacher, "curves": curves, "cpu_s": cpu, "steps": ns.steps,
         "seed": ns.seed, "mixture": ns.mixture}, indent=1))
    print(f"total {sum(cpu.values()):.0f} CPU s; wrote {out}")


if __name__ == "__main__":
    main()
