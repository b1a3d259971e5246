"""Studies and rollouts on Ray against one process: speedup, overhead per task, throughput.

1. Sweep: 3 policies x 10 seeds of ``scenarios/lublin256.yaml`` (10,000 jobs a
   run), each run writing its results folder. A plain sequential loop over
   :func:`cosim.compose.run_policy` in this process, then the same 30 runs
   with ``python -m cosim sweep`` machinery (:func:`cosim.studies.run_study`)
   on a local Ray (one task per run, ``--workers`` at once) and in process
   (``--serial``, what the sweep's bookkeeping costs), and in a plain process
   pool, which says how much parallelism the (shared) machine gives at the
   time. Ray's start-up (a few seconds, once per sweep) is reported apart
   from the runs. The overhead per task is ``(workers x ray_wall - sum of run
   times measured inside the tasks) / tasks``: core-seconds a task costs
   beyond its run.
2. Training throughput: PPO on 256-job episodes of the same scenario, the
   environments stepped in process (SyncVectorEnv), in worker processes
   (ShardedVectorEnv, ``--async``) and in Ray actors (RayVectorEnv,
   ``--ray``): agent steps per second of whole updates (rollout and
   learning), the first update (start-up) left out; then the three vector
   envs stepping alone, 8 and 32 environments over 2 workers.

    python benchmarks/study_scaling.py [--seeds 10] [--workers 2] [--train-envs 8] [--skip-train]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from cosim.compose import EnvFactory, policy_dir, run_policy
from cosim.config import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "lublin256.yaml"
POLICIES = ["fcfs+easy", "sjf+easy", "f1+conservative"]


def sequential(seeds: list[int], out: Path) -> tuple[float, list[float]]:
    times = []
    t0 = time.perf_counter()
    for seed in seeds:
        scenario = load_scenario(SCENARIO, [f"seed={seed}"])
        for policy in POLICIES:
            t = time.perf_counter()
            run_policy(scenario, policy, out / f"seed-{seed}" / policy_dir(policy))
            times.append(time.perf_counter() - t)
    return time.perf_counter() - t0, times


def _one(args: tuple[int, str, str]) -> float:
    seed, policy, out = args
    scenario = load_scenario(SCENARIO, [f"seed={seed}"])
    t = time.perf_counter()
    run_policy(scenario, policy, out)
    return time.perf_counter() - t


def pool(seeds: list[int], out: Path, workers: int) -> float:
    """The same runs in a plain process pool: what parallelism the machine gives now."""
    from concurrent.futures import ProcessPoolExecutor

    jobs = [(seed, policy, str(out / f"seed-{seed}" / policy_dir(policy)))
            for seed in seeds for policy in POLICIES]
    with ProcessPoolExecutor(workers) as ex:
        list(ex.map(_one, jobs[:workers]))          # start the workers and import cosim
        t0 = time.perf_counter()
        list(ex.map(_one, jobs))
        return time.perf_counter() - t0


def study(tmp: Path, seeds: list[int]) -> Path:
    path = tmp / "bench-study.yaml"
    path.write_text(f"scenario: {SCENARIO}\npolicies: [{', '.join(POLICIES)}]\n"
                    f"seeds: [{', '.join(map(str, seeds))}]\nplots: false\n")
    return path


def run_seconds(out: Path) -> list[float]:
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "study.parquet", columns=["status", "error", "run_seconds"])
    failed = [e for st, e in zip(rows["status"].to_pylist(), rows["error"].to_pylist())
              if st != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, e.g.: {failed[0]}")
    return rows["run_seconds"].to_pylist()


def sweep_figures(seeds: list[int], workers: int) -> None:
    from cosim.distributed import ray_session
    from cosim.studies import run_study

    n = len(seeds) * len(POLICIES)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        seq_wall, seq_times = sequential(seeds, tmp / "loop")
        print(f"sweep: {len(POLICIES)} policies x {len(seeds)} seeds of lublin256.yaml "
              f"(10,000 jobs a run), {n} runs, {os.cpu_count()} cores")
        print(f"  sequential loop, one process    : {seq_wall:6.2f} s  "
              f"({np.mean(seq_times):.3f} s a run)")
        pool_wall = pool(seeds, tmp / "pool", workers)
        print(f"  process pool, {workers} workers      : {pool_wall:6.2f} s  speedup "
              f"{seq_wall / pool_wall:.2f}x  (the parallelism this machine gives now)")
        path = study(tmp, seeds)
        t0 = time.perf_counter()
        run_study(path, out=tmp / "serial", serial=True, quiet=True, echo=None)
        serial_wall = time.perf_counter() - t0
        print(f"  sweep --serial, one process     : {serial_wall:6.2f} s  "
              f"({(serial_wall - seq_wall) / n * 1000:+.0f} ms a run of bookkeeping)")
        t0 = time.perf_counter()
        session = ray_session(num_cpus=workers)
        start = time.perf_counter() - t0
        try:
            for label in ("cold", "warm"):
                out = tmp / f"ray-{label}"
                t0 = time.perf_counter()
                run_study(path, out=out, workers=workers, quiet=True, echo=None)
                wall = time.perf_counter() - t0
                inside = sum(run_seconds(out))
                overhead = (workers * wall - inside) / n
                print(f"  sweep on local Ray, {workers} ({label}) : {wall:6.2f} s  speedup "
                      f"{seq_wall / wall:.2f}x  overhead {overhead * 1000:.0f} ms a task"
                      + ("  (first tasks import cosim in new workers)" if label == "cold" else ""))
                shutil.rmtree(out)
            ray = session.ray
            noop = ray.remote(num_cpus=1)(_noop)
            ray.get([noop.remote() for _ in range(workers)])
            t0 = time.perf_counter()
            ray.get([noop.remote() for _ in range(200)])
            print(f"  Ray start-up {start:.1f} s (once per sweep); an empty task "
                  f"{(time.perf_counter() - t0) / 200 * 1000:.2f} ms round trip")
        finally:
            session.close()


def _noop() -> None:
    return None


def train_figures(envs: int, steps: int) -> None:

    import torch

    from agents.ppo import Args, train

    torch.set_num_threads(1)
    config = {"scenario": str(SCENARIO), "window": [10, 0], "episode_jobs": 256}
    fn = EnvFactory(config)
    print(f"training throughput: PPO, {envs} envs x 64 steps a rollout, 256-job episodes, "
          f"{steps} steps (agent steps/s of whole updates, first update left out)")
    for label, kw in (("in process (SyncVectorEnv)", {}),
                      ("worker processes (--async)", {"async_envs": True}),
                      ("Ray actors (--ray)", {"ray": "local"})):
        args = Args(seed=1, total_steps=steps, num_envs=envs, num_steps=64, **kw)
        t0 = time.perf_counter()
        result = train(fn, args)
        wall = time.perf_counter() - t0
        rows = result.curve[1:] or result.curve
        fps = np.mean([r["fps"] for r in rows])
        print(f"  {label:28s}: {fps:7.0f} steps/s  (whole run {wall:.1f} s, start-up included)")


def stepping_figures(counts: list[int], seconds: float = 4.0) -> None:
    """Decisions per second of the vector envs alone (random legal actions)."""
    import functools

    from gymnasium.vector import SyncVectorEnv

    from cosim.distributed import ray_session
    from cosim.env import SchedulingEnv
    from cosim.vector import RayVectorEnv, ShardedVectorEnv

    make = functools.partial(SchedulingEnv, str(SCENARIO), window=(10, 0), episode_jobs=256)

    def rate(envs) -> float:
        rng = np.random.default_rng(0)
        _, info = envs.reset(seed=1)
        n, t0 = 0, time.perf_counter()
        try:
            while time.perf_counter() - t0 < seconds:
                u = rng.random(info["action_mask"].shape) * info["action_mask"]
                *_, info = envs.step(u.argmax(axis=1))
                n += envs.num_envs
        finally:
            envs.close()
        return n / (time.perf_counter() - t0)

    session = ray_session(num_cpus=os.cpu_count())
    try:
        print("vector env stepping alone (decisions/s, 2 workers):")
        for k in counts:
            sync = rate(SyncVectorEnv([make] * k))
            sharded = rate(ShardedVectorEnv([make] * k, workers=2))
            ray = rate(RayVectorEnv([make] * k, workers=2))
            print(f"  {k:3d} envs: in process {sync:7.0f}   worker processes {sharded:7.0f}   "
                  f"Ray actors {ray:7.0f}")
    finally:
        session.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--train-envs", type=int, default=8)
    p.add_argument("--train-steps", type=int, default=8 * 64 * 16)
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--skip-sweep", action="store_true")
    a = p.parse_args()
    if not a.skip_sweep:
        sweep_figures(list(range(1, a.seeds + 1)), a.workers)
    if not a.skip_train:
        train_figures(a.train_envs, a.train_steps)
        stepping_figures([8, 32])


if __name__ == "__main__":
    main()
