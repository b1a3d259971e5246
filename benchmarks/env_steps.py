"""Decisions per second of the Gymnasium environment with random legal actions.

For each observation builder: one environment in this process, then K
environments in worker processes (gymnasium AsyncVectorEnv). Episodes are
256 jobs of scenarios/lublin256.yaml from random offsets; resets count in
the time. Peers measured on this machine (random valid actions, 256-job
episodes, one process): RLScheduler's HPCEnv about 3,600 decisions/s,
sched-rl-gym's CompactRM (SMDP) about 370.

    python benchmarks/env_steps.py [--seconds 5] [--envs 2]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

from cosim.env import SchedulingEnv

SCENARIO = "scenarios/lublin256.yaml"


def make(observation: str):
    return lambda: SchedulingEnv(SCENARIO, observation=observation, window=(10, 0),
                                 episode_jobs=256)


def single(observation: str, seconds: float) -> float:
    env = make(observation)()
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=1)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        legal = np.flatnonzero(info["action_mask"])
        obs, _, terminated, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        n += 1
        if terminated or truncated:
            obs, info = env.reset()
    return n / (time.perf_counter() - t0)


def vectorized(observation: str, seconds: float, k: int) -> float:
    envs = gym.vector.AsyncVectorEnv([make(observation) for _ in range(k)], shared_memory=True)
    rng = np.random.default_rng(0)
    obs, info = envs.reset(seed=1)
    n, t0 = 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            masks = info["action_mask"]
            actions = np.array([int(rng.choice(np.flatnonzero(m))) for m in masks])
            obs, _, _, _, info = envs.step(actions)
            n += k
    finally:
        envs.close()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--envs", type=int, default=2)
    args = ap.parse_args()
    print(f"{'observation':12s} {'1 env':>12s} {f'{args.envs} envs (procs)':>18s}")
    for observation in ("compact", "kernel", "image"):
        one = single(observation, args.seconds)
        many = vectorized(observation, args.seconds, args.envs)
        print(f"{observation:12s} {one:12,.0f} {many:18,.0f}   decisions/s")


if __name__ == "__main__":
    main()
