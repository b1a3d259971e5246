"""Decisions per second of the Gymnasium environment with random legal actions.

For each action model and observation builder: one environment in this process; K
environments in K worker processes (gymnasium AsyncVectorEnv, one env per
process); and E environments sharded over K workers (cosim.vector.
ShardedVectorEnv, E/K envs per process, one message per worker per step).
Actions are drawn in the main process, as a training loop would. Episodes are
256 jobs of scenarios/lublin256.yaml from random offsets; resets count in
the time. Peers measured on this machine (random valid actions, 256-job
episodes, one process): RLScheduler's HPCEnv about 3,600 decisions/s,
sched-rl-gym's CompactRM (SMDP) about 370.

    PYTHONPATH=. python benchmarks/env_steps.py [--seconds 5] [--envs 2] [--sharded-envs 16] \
        [--single] [--chunks 3] [--yardstick ../shared/tools/ref_easy.py] \
        [--trace ../shared/traces/lublin_256.swf]

Every figure is also printed as a ratio to the yardstick's jobs/s: the shared
plain-Python FCFS+EASY loop on the Lublin-256 trace, in a subprocess, run
before every case (the best run is the reference), so the ratios compare
across machines and loads. One env's figure is the best of ``--chunks``
stretches of the measured seconds.

Target (issue 10): the ``select`` model at least 10,000 decisions/s in one process.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

from cosim.env import SchedulingEnv
from cosim.vector import ShardedVectorEnv
from cosim.yardstick import run_yardstick

SCENARIO = "scenarios/lublin256.yaml"


#: (action model, observation, window) rows of the table.
CASES = [("start", "compact", (10, 0)), ("start", "kernel", (10, 0)), ("start", "image", (10, 0)),
         ("select", "kernel", 128), ("select", "compact", 32), ("dras", "dras", 50),
         ("dras", "kernel", 50)]


def make(actions: str, observation: str, window):
    return lambda: SchedulingEnv(SCENARIO, actions=actions, observation=observation,
                                 window=window, episode_jobs=256)


def single(actions: str, observation: str, window, seconds: float, chunks: int = 1) -> float:
    """Decisions/s of one env; with ``chunks`` > 1 the best of that many
    consecutive stretches of ``seconds / chunks`` (a loaded machine slows
    stretches at random, never speeds them up)."""
    env = make(actions, observation, window)()
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=1)
    best = 0.0
    for _ in range(max(1, chunks)):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / max(1, chunks):
            legal = np.flatnonzero(info["action_mask"])
            obs, _, terminated, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
            n += 1
            if terminated or truncated:
                obs, info = env.reset()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def vectorized(envs: gym.vector.VectorEnv, seconds: float) -> float:
    rng = np.random.default_rng(0)
    k = envs.num_envs
    obs, info = envs.reset(seed=1)
    n, t0 = 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            # Random legal actions for the whole batch at once (next-step autoreset
            # rows carry a fresh mask too).
            u = rng.random(info["action_mask"].shape) * info["action_mask"]
            obs, _, _, _, info = envs.step(u.argmax(axis=1))
            n += k
    finally:
        envs.close()
    return n / (time.perf_counter() - t0)


def yardstick(path: str, trace: str) -> float:
    """Jobs/s of the shared FCFS+EASY loop on ``trace`` (parse and simulation)."""
    return run_yardstick(path, trace)["jobs_per_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--yardstick", default="../shared/tools/ref_easy.py",
                    help="path of ref_easy.py ('' to print no ratios)")
    ap.add_argument("--trace", default="../shared/traces/lublin_256.swf",
                    help="the trace the yardstick replays")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--envs", type=int, default=2, help="worker processes")
    ap.add_argument("--sharded-envs", type=int, default=16)
    ap.add_argument("--single", action="store_true", help="one process only (no vector envs)")
    ap.add_argument("--chunks", type=int, default=3,
                    help="one env: the best of this many stretches of the measured seconds; "
                         "the yardstick runs before every case and its best run is the reference")
    args = ap.parse_args()
    k, e = args.envs, args.sharded_envs
    refs = [yardstick(args.yardstick, args.trace)] if args.yardstick else []
    print(f"{'actions':8s} {'observation':12s} {'1 env':>17s} {f'async {k}x1':>17s} "
          f"{f'sharded {k}x{e // k}':>17s}")
    rows = []
    for actions, observation, window in CASES:
        if refs and len(rows):
            refs.append(yardstick(args.yardstick, args.trace))
        one = single(actions, observation, window, args.seconds, args.chunks)
        many = sharded = float("nan")
        if not args.single:
            fn = make(actions, observation, window)
            many = vectorized(gym.vector.AsyncVectorEnv([fn] * k), args.seconds)
            sharded = vectorized(ShardedVectorEnv([fn] * e, workers=k), args.seconds)
        rows.append((actions, observation, one, many, sharded))
    # Ratios to the best yardstick run, measured between the cases.
    ref = max(refs) if refs else float("nan")
    for actions, observation, one, many, sharded in rows:
        cells = " ".join(f"{v:9,.0f} {v / ref:5.2f}x" for v in (one, many, sharded))
        print(f"{actions:8s} {observation:12s} {cells}   decisions/s")
    if refs:
        print(f"yardstick: best {ref:,.0f} jobs/s of {len(refs)} runs between the cases "
              f"(FCFS+EASY on {args.trace}); ratios are decisions/s over it")


if __name__ == "__main__":
    main()
