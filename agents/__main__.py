"""Command line: ``python -m agents train|evaluate``.

Examples::

    python -m agents train scenarios/lublin256.yaml --algo ppo --steps 200000 --envs 2
    python -m agents train scenarios/lublin256.yaml --envs 16 --ray --address auto   # on a Ray cluster
    python -m agents train scenarios/lublin256.yaml --teacher sjf --bc-steps 5000 --out runs/a
    python -m agents train scenarios/lublin256.yaml --out runs/a --resume      # after a crash
    python -m agents evaluate scenarios/lublin256.yaml --checkpoint runs/a --episodes 10

``train`` writes ``OUT/curve.csv`` (one row per update), checkpoints every
``--checkpoint-every`` seconds and at the end (see :mod:`agents.checkpoint`),
and TensorBoard scalars under ``OUT/tb`` when TensorBoard is installed.
``--resume`` continues the run in ``OUT`` with the hyper-parameters and
environment stored in its checkpoint; the result is the same as an
uninterrupted run for the same seed. User errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from cosim.cli import ArgumentParser, run_command
from cosim.errors import InputError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m agents", description="Train and evaluate RL scheduling agents.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    t = sub.add_parser("train", help="train a PPO or A2C agent in the scheduling env")
    t.add_argument("scenario", help="scenario YAML file")
    t.add_argument("--algo", choices=("ppo", "a2c"), default="ppo")
    t.add_argument("--steps", type=int, default=None, help="agent decisions to train for")
    t.add_argument("--envs", type=int, default=None, help="environments stepped together")
    t.add_argument("--async", dest="async_envs", action="store_true",
                   help="step the environments in subprocesses")
    t.add_argument("--ray", action="store_true",
                   help="step the environments in Ray actors (a local Ray unless --address)")
    t.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                   help="with --ray: join this running Ray cluster")
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--out", default=None,
                   help="output folder (default: runs/agents/<scenario>-<algo>-s<seed>)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out")
    t.add_argument("--teacher", default=None, metavar="NAME",
                   help="heuristic teacher, e.g. sjf: enables the mimic term (RLSchert eq. 11)")
    t.add_argument("--mimic-coef", type=float, default=None,
                   help="initial imitation weight (default 0.5 with --teacher, else 0)")
    t.add_argument("--bc-steps", type=int, default=0,
                   help="behaviour-cloning pretraining: teacher decisions to clone first")
    t.add_argument("--bc-epochs", type=int, default=10)
    t.add_argument("--observation", choices=("compact", "kernel", "image"), default="compact")
    t.add_argument("--window", type=int, nargs=2, default=(10, 0), metavar=("HEAD", "TAIL"),
                   help="split window sizes (DBF)")
    t.add_argument("--kill-slots", type=int, default=0)
    t.add_argument("--guard-wait", type=float, default=None, metavar="SECONDS",
                   help="starvation guard: the queue head holds an EASY reservation once it "
                        "has waited this long (default: none)")
    t.add_argument("--reward", default="slowdown")
    t.add_argument("--episode-jobs", type=int, default=256)
    t.add_argument("--episode-end", choices=("placed", "completed"), default="completed")
    t.add_argument("--smdp-gamma", type=float, default=None,
                   help="env-side discount of integral rewards per time scale")
    t.add_argument("--smdp", action="store_true",
                   help="agent-side discount gamma ** (dt / time_scale) per decision")
    t.add_argument("--network", choices=("mlp", "kernel", "cnn"), default=None)
    t.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="set any hyper-parameter of agents.ppo.Args, e.g. --arg ent_coef=0.02")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a scenario value, e.g. --set workload.jobs=2000")
    t.add_argument("--checkpoint-every", type=float, default=300.0, metavar="SECONDS")
    t.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="stop after this much wall time")
    t.add_argument("--quiet", action="store_true", help="no progress bar")

    e = sub.add_parser("evaluate", help="run a trained agent greedily and print its metrics")
    e.add_argument("scenario", help="scenario YAML file")
    e.add_argument("--checkpoint", required=True, help="training output or checkpoint folder")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--seed", type=int, default=1000, help="first episode seed")
    e.add_argument("--episode-jobs", type=int, default=None)
    e.add_argument("--window", type=int, nargs=2, default=None, metavar=("HEAD", "TAIL"),
                   help="another window (kernel networks only)")
    e.add_argument("--baseline", action="append", default=[], metavar="NAME",
                   help="also run heuristic NAME's choice in the same episodes (repeatable)")
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _apply_arg_overrides(args_obj, items: list[str]):
    names = {f.name: f for f in fields(args_obj)}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise InputError("--arg", repr(item), "NAME=VALUE")
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InputError(f"--arg {key}", "an unknown hyper-parameter",
                             f"a field of agents.ppo.Args{hint}")
        parsed = _parse_value(value)
        default = getattr(args_obj, key)
        if isinstance(default, bool) and not isinstance(parsed, bool):
            raise InputError(f"--arg {key}", repr(value), "true or false")
        if isinstance(default, int) and not isinstance(default, bool) and not isinstance(parsed, int):
            raise InputError(f"--arg {key}", repr(value), "an integer")
        if isinstance(default, float) and not isinstance(parsed, int | float):
            raise InputError(f"--arg {key}", repr(value), "a number")
        if isinstance(default, float) and isinstance(parsed, int):
            parsed = float(parsed)
        if key == "hidden" and parsed is not None:
            parsed = tuple(parsed) if isinstance(parsed, list) else (parsed,)
        setattr(args_obj, key, parsed)
    return args_obj


def _ray_address(ns) -> str | None:
    """``Args.ray`` from ``--ray`` and ``--address`` (an address alone means Ray too)."""
    if not (ns.ray or ns.address):
        return None
    if ns.async_envs:
        raise InputError("--ray", "both --ray and --async", "one of them (Ray actors or "
                         "worker processes)")
    return ns.address or "local"


def _default_out(scenario: str, algo: str, seed: int) -> Path:
    return Path("runs") / "agents" / f"{Path(scenario).stem}-{algo}-s{seed}"


def _env_factory(env_config: dict[str, Any]):
    import functools

    from agents.rl_policy import make_env

    return functools.partial(make_env, env_config)


class _TensorBoard:
    """Scalars to OUT/tb when TensorBoard is installed; otherwise nothing."""

    def __init__(self, out: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self.writer = None
        else:
            self.writer = SummaryWriter(str(out / "tb"))

    def __call__(self, row: dict[str, float]) -> None:
        if self.writer is None:
            return
        step = int(row["global_step"])
        for key, value in row.items():
            if key not in ("update", "global_step") and math.isfinite(value):
                self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _train(ns) -> int:
    from agents import a2c, ppo
    from agents.checkpoint import latest_checkpoint, read_meta

    module = ppo if ns.algo == "ppo" else a2c
    args_cls = ppo.Args if ns.algo == "ppo" else a2c.A2CArgs
    out = Path(ns.out) if ns.out else _default_out(ns.scenario, ns.algo, ns.seed)
    resuming = ns.resume and latest_checkpoint(out) is not None
    if resuming:
        meta = read_meta(out)
        if meta.get("algo") != ns.algo:
            raise InputError(str(out), f"a {meta.get('algo')} run", f"a {ns.algo} run (--algo)")
        args = args_cls.from_dict(meta["args"])
        # Only what does not change results may differ when resuming.
        args.async_envs = ns.async_envs
        args.ray = _ray_address(ns)
        args.checkpoint_every_s = ns.checkpoint_every
        args.time_budget_s = ns.time_budget
        env_config = meta["env"]
        print(f"resuming {out} at update {meta['update']} (step {meta['global_step']}); "
              "hyper-parameters and environment from the checkpoint", file=sys.stderr)
    else:
        if ns.bc_steps and not ns.teacher:
            raise InputError("--bc-steps", str(ns.bc_steps), "a --teacher to clone")
        env_config = {"scenario": str(Path(ns.scenario)), "scenario_set": list(ns.overrides),
                      "observation": ns.observation, "window": list(ns.window),
                      "kill_slots": ns.kill_slots, "reward": ns.reward,
                      "episode_jobs": ns.episode_jobs, "episode_end": ns.episode_end,
                      "smdp_gamma": ns.smdp_gamma, "teacher": ns.teacher,
                      "guard_wait": ns.guard_wait}
        args = args_cls(seed=ns.seed)
        if ns.steps is not None:
            args.total_steps = ns.steps
        if ns.envs is not None:
            args.num_envs = ns.envs
        args.async_envs = ns.async_envs
        args.ray = _ray_address(ns)
        args.smdp = ns.smdp
        args.network = ns.network
        args.mimic_coef = ns.mimic_coef if ns.mimic_coef is not None else (0.5 if ns.teacher else 0.0)
        args.checkpoint_every_s = ns.checkpoint_every
        args.time_budget_s = ns.time_budget
        _apply_arg_overrides(args, ns.arg)
    args.validate()
    probe = _env_factory(env_config)()   # fail fast on a bad scenario or option, before any work
    # Pin the time normalization to the training workload's, so that the saved
    # policy sees the same feature scale on any other workload.
    env_config.setdefault("max_time", float(probe.unwrapped.max_time))
    env_fn = _env_factory(env_config)
    init = None
    if not resuming and ns.bc_steps:
        init = _clone_teacher(env_fn, probe, args, ns)
    probe.close()

    tb = _TensorBoard(out)
    try:
        result = module.train(env_fn, args, out_dir=out, resume=ns.resume, env_config=env_config,
                              init_state_dict=init, progress=not ns.quiet, log=tb)
    finally:
        tb.close()
    last = next((r for r in reversed(result.curve) if math.isfinite(r["mean_return"])), None)
    status = "finished" if result.finished else "stopped (time budget)"
    print(f"{ns.algo} {status}: {result.update} updates, {result.global_step} steps"
          + (f", last mean episode return {last['mean_return']:.4g}" if last else ""))
    print(f"checkpoint: {result.checkpoint}")
    print(f"curve: {out / 'curve.csv'}")
    return 0


def _clone_teacher(env_fn, probe, args, ns):
    import torch

    from agents.imitation import agreement, behaviour_cloning, collect_demonstrations
    from agents.networks import make_network

    demos = collect_demonstrations(env_fn, ns.bc_steps, seed=args.seed)
    with torch.random.fork_rng():
        torch.manual_seed(args.seed)
        net = make_network(probe.observation_space, probe.action_space, args.network, args.hidden)
    behaviour_cloning(net, demos, epochs=ns.bc_epochs, seed=args.seed)
    print(f"behaviour cloning of {ns.teacher}: {len(demos)} decisions, "
          f"agreement {agreement(net, demos):.3f}", file=sys.stderr)
    return net.state_dict()


def evaluate_policy(policy, env, episodes: int, seed: int, baseline: str | None = None
                    ) -> dict[str, float]:
    """Mean return and episode metrics of greedy episodes ``seed .. seed+episodes-1``.

    With ``baseline``, the env's ``teacher_action`` (heuristic ``baseline``)
    acts instead of the policy.
    """
    import numpy as np

    from agents.ppo import METRIC_KEYS

    returns, lengths, metrics = [], [], {k: [] for k in METRIC_KEYS}
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        total, steps, done = 0.0, 0, False
        while not done:
            action = (info["teacher_action"] if baseline is not None
                      else policy.act(obs, info["action_mask"]))
            obs, reward, terminated, truncated, info = env.step(action)
            total += reward
            steps += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(steps)
        for key in METRIC_KEYS:
            metrics[key].append(info.get("episode_metrics", {}).get(key, math.nan))
    row = {"episodes": float(episodes), "mean_return": float(np.mean(returns)),
           "mean_length": float(np.mean(lengths))}
    row.update({k: float(np.nanmean(v)) if np.isfinite(v).any() else math.nan
                for k, v in metrics.items()})
    return row


def _evaluate(ns) -> int:
    from agents.rl_policy import load_rl_policy, make_env

    if ns.episodes < 1:
        raise InputError("--episodes", str(ns.episodes), "a positive number")
    policy = load_rl_policy(ns.checkpoint)
    if policy.env_config is None:
        raise InputError(ns.checkpoint, "a checkpoint without an environment description",
                         "one written by `python -m agents train`")
    overrides: dict[str, Any] = {"scenario": ns.scenario, "scenario_set": list(ns.overrides),
                                 "teacher": None}
    if ns.episode_jobs is not None:
        overrides["episode_jobs"] = ns.episode_jobs
    if ns.window is not None:
        overrides["window"] = tuple(ns.window)
    rows = {"agent": evaluate_policy(policy, make_env(policy.env_config, **overrides),
                                     ns.episodes, ns.seed)}
    for name in ns.baseline:
        env = make_env(policy.env_config, **{**overrides, "teacher": name})
        rows[name] = evaluate_policy(None, env, ns.episodes, ns.seed, baseline=name)
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    cols = ["mean_return", "mean_bsld", "mean_wait", "utilization", "max_wait"]
    print(f"{'policy':<12}" + "".join(f"{c:>14}" for c in cols))
    for name, row in rows.items():
        print(f"{name:<12}" + "".join(f"{row[c]:>14.4g}" for c in cols))
    print(f"({ns.episodes} episodes from seed {ns.seed}; checkpoint {policy.meta['_path']}, "
          f"update {policy.update})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for user errors)."""
    def handle(argv):
        ns = _parser().parse_args(argv)
        return {"train": _train, "evaluate": _evaluate}[ns.command](ns)
    return run_command(handle, argv, interrupted="interrupted (resume with --resume)")


if __name__ == "__main__":
    sys.exit(main())
