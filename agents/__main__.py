"""Command line: ``python -m agents train|evaluate``.

Examples::

    python -m agents train scenarios/lublin256.yaml --algo ppo --steps 200000 --envs 2
    python -m agents train scenarios/lublin256.yaml --envs 16 --ray --address auto   # on a Ray cluster
    python -m agents train scenarios/lublin256.yaml --teacher sjf --bc-steps 5000 --out runs/a
    python -m agents train scenarios/lublin256.yaml --out runs/a --resume      # after a crash
    python -m agents train scenarios/lublin256.yaml --algo pg --actions dras \
        --curriculum sampled=20,periods=20,synthetic=20 --reward capacity --out runs/dras
    python -m agents train scenarios/lublin256.yaml --algo dql --actions dras --out runs/dql
    python -m agents train scenarios/lublin256.yaml --actions select --paired saf+easy \
        --contention-min 0.02 --out runs/paired     # return = advantage over SAF+EASY
    python -m agents evaluate scenarios/lublin256.yaml --checkpoint runs/a --episodes 10
    python -m agents evaluate scenarios/lublin256.yaml --checkpoint runs/a --set cluster.nodes=1024

``train`` writes ``OUT/curve.csv`` (one row per update), checkpoints every
``--checkpoint-every`` seconds and at the end (see :mod:`agents.checkpoint`),
and TensorBoard scalars under ``OUT/tb`` when TensorBoard is installed.
``--resume`` continues the run in ``OUT`` with the hyper-parameters and
environment stored in its checkpoint (a curriculum's position included); the
result is the same as an uninterrupted run for the same seed. The scales an
agent's features depend on (time normalization, image slot length, node
rows) are pinned in the saved environment at training, so ``evaluate`` may
run it on another workload or cluster size. User errors print one line and
exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from agents.evaluation import (  # re-exported: the command's library functions
    EVALUATE_COLUMNS,
    evaluate_episodes,
    evaluate_policy,
)
from agents.registry import LEARNERS, add_help_groups, learner
from cosim.cli import (
    ArgumentParser,
    nonnegative_float,
    nonnegative_int,
    output_path,
    positive_float,
    positive_int,
    run_command,
)
from cosim.env.wrappers import PAIRED_MODES
from cosim.errors import InputError, did_you_mean
from cosim.limits import load_yaml

__all__ = ["main", "evaluate_policy", "evaluate_episodes", "DEFAULT_BASELINES"]

#: Heuristics ``evaluate`` runs beside the agent unless told otherwise: the
#: strongest classic orders, each with EASY backfilling.
DEFAULT_BASELINES = ("fcfs+easy", "sjf+easy", "saf+easy", "f1+easy", "wfp3+easy", "unicef+easy")


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m agents", description="Train and evaluate RL scheduling agents.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)

    _add_train_parser(sub)
    e = sub.add_parser("evaluate", help="run a trained agent greedily and print its metrics")
    e.add_argument("scenario", help="scenario YAML file")
    e.add_argument("--checkpoint", required=True, help="training output or checkpoint folder")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--seed", type=nonnegative_int, default=1000, help="first episode seed")
    e.add_argument("--episode-jobs", type=int, default=None)
    e.add_argument("--window", type=nonnegative_int, nargs="+", default=None, metavar="N",
                   help="another window (kernel networks only)")
    e.add_argument("--baseline", action="append", default=None, metavar="NAME",
                   help="heuristic policies run on the same episodes' jobs (repeatable; "
                        f"default: {', '.join(DEFAULT_BASELINES)}; 'none' for none)")
    e.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    from agents.tuning import cli as tune_cli
    tune_cli.add_parser(sub)
    return p


# The train command has many flags; its parser is built in parts (the order of the
# groups is the order of --help).
def _add_train_parser(sub) -> None:
    t = sub.add_parser("train", help="train a PPO, A2C, PG or DQL agent in the scheduling env",
                       usage="python -m agents train SCENARIO [--algo NAME] [options by group "
                             "below] [--arg NAME=VALUE ...]")
    t.add_argument("scenario", help="scenario YAML file")
    run = t.add_argument_group("what to train and for how long")
    run.add_argument("--algo", choices=tuple(LEARNERS), default="ppo",
                     help=", ".join(cls.summary for cls in LEARNERS.values()))
    run.add_argument("--steps", type=int, default=None, help="agent decisions to train for")
    run.add_argument("--envs", type=int, default=None, help="environments stepped together")
    run.add_argument("--async", dest="async_envs", action="store_true",
                     help="step the environments in subprocesses")
    run.add_argument("--ray", action="store_true",
                     help="step the environments in Ray actors (a local Ray unless --address)")
    run.add_argument("--address", default=None, metavar="auto|HOST:PORT",
                     help="with --ray: join this running Ray cluster")
    run.add_argument("--seed", type=nonnegative_int, default=1)
    run.add_argument("--out", type=output_path, default=None,
                     help="output folder (default: runs/agents/<scenario>-<algo>-s<seed>)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out")
    teach = t.add_argument_group("imitation", "a heuristic teacher: behaviour cloning first, "
                                 "then the mimic term of the policy learners (ppo, a2c, pg)")
    teach.add_argument("--teacher", default=None, metavar="NAME",
                       help="heuristic teacher, e.g. sjf: enables the mimic term (RLSchert eq. 11)")
    teach.add_argument("--mimic-coef", type=float, default=None,
                       help="initial imitation weight (default 0.5 with --teacher, else 0)")
    teach.add_argument("--mimic-decay", type=float, default=None, metavar="FRACTION",
                       help="fraction of the training over which the imitation weight decays "
                            "linearly to 0 (default 1: the whole run)")
    teach.add_argument("--bc-steps", type=nonnegative_int, default=0,
                       help="behaviour-cloning pretraining: teacher decisions to clone first")
    teach.add_argument("--bc-epochs", type=positive_int, default=10)
    _add_environment_groups(t)
    pair = t.add_argument_group("paired learning signal")
    pair.add_argument("--paired", default=None, metavar="BASELINE",
                      help="paired learning signal: the episode's return is its advantage over "
                           "heuristic BASELINE's schedule of the same jobs, e.g. saf+easy "
                           "(cosim.env.wrappers.PairedReturn)")
    pair.add_argument("--paired-mode", choices=tuple(PAIRED_MODES), default="replace",
                      help="with --paired: replace the per-step rewards with the relative "
                           "difference (default) or add it to them; log (log ratio) and clip "
                           "(clipped difference) are bounded to [-1, 1]")
    pair.add_argument("--paired-metric", choices=("bsld", "wait"), default="bsld",
                      help="with --paired: the episode metric compared (mean bsld or mean wait)")
    pair.add_argument("--contention-min", type=nonnegative_float, default=None, metavar="X",
                      help="with --paired: skip training windows where FCFS, SJF and SAF with "
                           "EASY are within relative spread X (nothing to learn there)")
    net = t.add_argument_group("network and hyper-parameters")
    net.add_argument("--network", choices=("mlp", "kernel", "cnn", "dras"), default=None)
    net.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                     help="set any hyper-parameter of the learner (its group below), "
                          "e.g. --arg ent_coef=0.02")
    add_help_groups(t)
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                     help="override a scenario value, e.g. --set workload.jobs=2000")
    run.add_argument("--checkpoint-every", type=positive_float, default=300.0, metavar="SECONDS")
    run.add_argument("--time-budget", type=nonnegative_float, default=None, metavar="SECONDS",
                     help="stop after this much wall time")
    run.add_argument("--quiet", action="store_true", help="no progress bar")


def _add_environment_groups(t: argparse.ArgumentParser) -> None:
    """The flags that build the scheduling env (cosim.env.EnvSpec)."""
    act = t.add_argument_group("environment: actions and observations",
                               "what the agent decides and sees (cosim.env.SchedulingEnv)")
    act.add_argument("--actions", choices=("start", "select", "dras", "kill", "inspect", "backfill"),
                     default=None,
                     help="action model: start (DBF split window with Fwd), select (pick the "
                          "next job; it starts or is reserved, EASY backfills), dras (DRAS's two "
                          "levels), inspect (accept or skip each start of --base-policy), backfill "
                          "(order the EASY backfilling of --base-policy)")
    act.add_argument("--base-policy", default=None, metavar="NAME",
                     help="kill: the policy that schedules while the agent decides kills "
                          "(default sjf+easy; a heuristic or rl:DIR); inspect: the policy that "
                          "proposes each start (default sjf+easy; a heuristic or learned:DIR); backfill: "
                          "the EASY policy whose backfilling the agent orders")
    act.add_argument("--observation", choices=("compact", "kernel", "image", "dras", "kill",
                                               "backfill"),
                     default=None,
                     help="default: compact for start, kernel for select, dras for dras")
    act.add_argument("--window", type=nonnegative_int, nargs="+", default=None, metavar="N",
                     help="start: HEAD TAIL (DBF split window, default 10 0); select: N queued "
                          "jobs to choose from (default 128); dras: W (default 50)")
    act.add_argument("--backfill-order", default="fcfs",
                     help="select: order of EASY backfill candidates (a static heuristic)")
    act.add_argument("--predictor", choices=("estimate", "history", "xgboost", "rnn"),
                     default="estimate",
                     help="what the agent sees as run times: user estimates (default) or "
                          "predictions (models from the scenario's predictor section)")
    act.add_argument("--kill-slots", type=int, default=0)
    act.add_argument("--guard-wait", type=float, default=None, metavar="SECONDS",
                     help="starvation guard: the queue head holds an EASY reservation once it "
                          "has waited this long (default: none)")
    rew = t.add_argument_group("environment: episodes and reward")
    rew.add_argument("--reward", default="slowdown")
    rew.add_argument("--episode-jobs", type=int, default=256)
    rew.add_argument("--episode-end", choices=("placed", "completed"), default="completed")
    rew.add_argument("--smdp-gamma", type=float, default=None, metavar="GAMMA",
                     help="SMDP discount per time scale (thesis eq. 2.18): the env discounts "
                          "rewards within each step and the agent between decisions, by the "
                          "same gamma (implies --smdp and sets the agent's gamma)")
    rew.add_argument("--smdp", action="store_true",
                     help="agent-side discount gamma ** (dt / time_scale) per decision")
    rew.add_argument("--time-scale", type=float, default=None, metavar="SECONDS",
                     help="seconds that normalize integral rewards and the SMDP discount "
                          "(env and agent; default 3600)")
    rew.add_argument("--tau", type=float, default=None, metavar="SECONDS",
                     help="bounded-slowdown bound of rewards and metrics (default: the "
                          "scenario's metrics.tau)")
    rew.add_argument("--reward-weights", type=float, nargs=3, default=None,
                     metavar=("W1", "W2", "W3"), help="weights of the dbf and capability rewards")
    obs = t.add_argument_group("environment: observation sizes")
    obs.add_argument("--horizon", type=int, default=None,
                     help="event-horizon length of the compact observation (default 8)")
    obs.add_argument("--image-slots", type=int, default=None,
                     help="time rows of the image observation (default 20)")
    obs.add_argument("--image-slot-s", type=float, default=None, metavar="SECONDS",
                     help="seconds per image row (default: the workload's longest request "
                          "spans 3/4 of the rows)")
    obs.add_argument("--node-rows", type=int, default=None,
                     help="node rows of the dras observation (default: cluster units, at most 256)")
    obs.add_argument("--queue-norm", type=float, default=None,
                     help="job count that maps to 1.0 in the queue features (default 4096)")
    sel = t.add_argument_group("environment: the select action model")
    sel.add_argument("--backfill", choices=("easy", "none"), default=None,
                     help="select: backfilling around the agent's reserved job (default easy)")
    sel.add_argument("--reserve", choices=("easy", "sticky"), default=None,
                     help="select: easy (re-chosen at every decision point) or sticky")
    src = t.add_argument_group("environment: where episodes come from")
    src.add_argument("--episode-source", choices=("window", "jobsets", "curriculum", "mixture"),
                     default=None,
                     help="episodes from random windows (default), DRAS jobsets, a curriculum, "
                          "or a workload mixture (randomised Lublin parameters, optionally mixed "
                          "with trace windows: --env mixture='{trace: 0.3, load: [0.6, 1.0]}', "
                          "see cosim.workloads.mixture)")
    src.add_argument("--curriculum", default=None, metavar="SPEC",
                     help="DRAS's three phases, e.g. sampled=20,periods=20,synthetic=20 "
                          "(also load_range=LOW:HIGH, seed=N), or a JSON file with those keys; "
                          "the position is saved in checkpoints")
    src.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", dest="env_set",
                     help="set any env setting (a field of cosim.env.EnvSpec), "
                          "e.g. --env max_time=200000")


def _parse_value(text: str) -> Any:
    import yaml

    try:
        return load_yaml(text, "--set")
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
            cls = type(args_obj)
            raise InputError(f"--arg {key}", "an unknown hyper-parameter",
                             f"a field of {cls.__module__}.{cls.__name__}",
                             did_you_mean(key, names))
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


def _window(values: list[int] | None, actions: str):
    """``--window`` as the env wants it: a (head, tail) pair for start, a count otherwise."""
    if values is None:
        return None
    if actions == "start":
        if len(values) != 2 or values[0] < 1:
            raise InputError("--window", " ".join(map(str, values)),
                             "HEAD TAIL for --actions start (HEAD above 0)")
        return list(values)
    if len(values) != 1 or values[0] < 1:
        raise InputError("--window", " ".join(map(str, values)),
                         f"one count above 0 for --actions {actions}")
    return int(values[0])


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


def _env_settings(items: list[str]) -> dict[str, Any]:
    """``--env KEY=VALUE`` items as env settings (names checked: the fields of ``EnvSpec``)."""
    from cosim.env import EnvSpec

    names = EnvSpec.names()
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise InputError("--env", repr(item), "KEY=VALUE")
        if key not in names:
            raise InputError(f"--env {key}", "an unknown environment setting",
                             "a field of cosim.env.EnvSpec", did_you_mean(key, names))
        out[key] = _parse_value(value)
    return out


_CURRICULUM_KEYS = ("sampled", "periods", "synthetic", "load_range", "seed")


def _curriculum(spec: str) -> dict[str, Any]:
    """``--curriculum``: ``sampled=N,periods=N,synthetic=N[,load_range=LO:HI][,seed=N]`` or a JSON file."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise InputError(f"--curriculum {spec}", "bytes that are not UTF-8",
                             "a UTF-8 JSON file") from None
        except OSError as exc:
            raise InputError(f"--curriculum {spec}", "a file that cannot be read",
                             "a JSON file or sampled=N,periods=N,synthetic=N") from exc
        except json.JSONDecodeError as exc:
            raise InputError(f"{spec}:{exc.lineno}", "invalid JSON",
                             f"an object with keys among {', '.join(_CURRICULUM_KEYS)}") from exc
        if not isinstance(data, dict):
            raise InputError(spec, type(data).__name__,
                             f"an object with keys among {', '.join(_CURRICULUM_KEYS)}")
        where = spec
    else:
        data = {}
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise InputError("--curriculum", repr(part),
                                 "KEY=VALUE items such as sampled=20,periods=20,synthetic=20")
            key = key.strip()
            if key == "load_range":
                try:
                    lo, hi = (float(x) for x in value.split(":"))
                except ValueError:
                    raise InputError("--curriculum load_range", repr(value), "LOW:HIGH") from None
                data[key] = [lo, hi]
            else:
                try:
                    data[key] = int(value)
                except ValueError:
                    raise InputError(f"--curriculum {key}", repr(value), "an integer") from None
        where = "--curriculum"
    unknown = [k for k in data if k not in _CURRICULUM_KEYS]
    if unknown:
        raise InputError(f"{where}: {unknown[0]}", "an unknown key",
                         f"one of {', '.join(_CURRICULUM_KEYS)}")
    counts = [data.get(k, 0) for k in ("sampled", "periods", "synthetic")]
    if any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in counts) or not sum(counts):
        raise InputError(where, repr(data), "episode counts sampled, periods, synthetic >= 0 "
                         "with at least one episode")
    return {k: data.get(k, 0) for k in ("sampled", "periods", "synthetic")} | {
        k: data[k] for k in ("load_range", "seed") if k in data}


def _env_config(ns) -> dict[str, Any]:
    """The environment description of a new run, from the command line."""
    env_config: dict[str, Any] = {
        "scenario": str(Path(ns.scenario)), "scenario_set": list(ns.overrides),
        "actions": ns.actions, "observation": ns.observation,
        "window": _window(ns.window, ns.actions), "kill_slots": ns.kill_slots,
        "reward": ns.reward, "episode_jobs": ns.episode_jobs, "episode_end": ns.episode_end,
        "smdp_gamma": ns.smdp_gamma, "teacher": ns.teacher, "guard_wait": ns.guard_wait}
    if ns.actions == "select":
        env_config["backfill_order"] = ns.backfill_order
    if ns.actions == "kill":
        if ns.predictor != "rnn":
            raise InputError("--actions kill", f"--predictor {ns.predictor}",
                             "--predictor rnn (kill decisions need in-run predictions)")
        env_config["base_policy"] = ns.base_policy or "sjf+easy"
    elif ns.actions in ("inspect", "backfill"):
        env_config["base_policy"] = ns.base_policy or "sjf+easy"
    elif ns.base_policy is not None:
        raise InputError("--base-policy", ns.base_policy, "--actions kill or inspect or backfill")
    if ns.predictor != "estimate":
        env_config["predictor"] = ns.predictor
    optional = {"time_scale": ns.time_scale, "tau": ns.tau, "horizon": ns.horizon,
                "image_slots": ns.image_slots, "image_slot_s": ns.image_slot_s,
                "node_rows": ns.node_rows, "queue_norm": ns.queue_norm, "backfill": ns.backfill,
                "reserve": ns.reserve, "episode_source": ns.episode_source,
                "reward_weights": list(ns.reward_weights) if ns.reward_weights else None}
    env_config.update({k: v for k, v in optional.items() if v is not None})
    if ns.curriculum is not None:
        if ns.episode_source not in (None, "curriculum"):
            raise InputError("--curriculum", ns.curriculum,
                             f"no --episode-source {ns.episode_source} (a curriculum is its "
                             "own episode source)")
        env_config["episode_source"] = "curriculum"
        env_config["curriculum"] = _curriculum(ns.curriculum)
    elif env_config.get("episode_source") == "curriculum":
        raise InputError("--episode-source curriculum", "no --curriculum",
                         "--curriculum sampled=N,periods=N,synthetic=N")
    extra = _env_settings(ns.env_set)
    clash = sorted(k for k in extra if env_config.get(k) is not None)
    if clash:
        raise InputError(f"--env {clash[0]}", "set twice", "one of --env and its own flag")
    env_config.update(extra)
    if ns.paired is not None:
        env_config["paired"] = {"baseline": ns.paired, "mode": ns.paired_mode,
                                "metric": ns.paired_metric, "contention_min": ns.contention_min}
    elif ns.contention_min is not None or ns.paired_mode != "replace" or ns.paired_metric != "bsld":
        raise InputError("--contention-min/--paired-mode/--paired-metric", "no --paired",
                         "--paired BASELINE (they set the paired signal)")
    return env_config


def _paired_wrap(env_config: dict[str, Any]):
    """The picklable ``env -> env`` of a saved ``paired`` setting (None without one)."""
    import functools

    from cosim.env.wrappers import PairedReturn

    paired = env_config.get("paired")
    return None if not paired else functools.partial(PairedReturn, **paired)


def _train(ns) -> int:
    from agents.checkpoint import latest_checkpoint, load_checkpoint, read_meta
    args_cls = learner(ns.algo, where="--algo").args_class()
    out = Path(ns.out) if ns.out else _default_out(ns.scenario, ns.algo, ns.seed)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}", "a file", "a folder for the training output")
    resuming = ns.resume and latest_checkpoint(out) is not None
    if ns.resume and not resuming:
        raise InputError(f"--resume {out}", "no checkpoint there",
                         "a training output with a checkpoint (leave out --resume to start one)")
    if resuming:
        meta = read_meta(out)
        if meta.get("algo") != ns.algo:
            raise InputError(str(out), f"a {meta.get('algo')} run", f"a {ns.algo} run (--algo)")
        kept = meta["env"].get("actions", "start")
        if ns.actions is not None and ns.actions != kept:
            raise InputError("--actions", f"{ns.actions} with --resume of a --actions {kept} run",
                             f"--actions {kept} or none (a resumed run keeps its action model)")
        args = args_cls.from_dict(meta["args"])
        # Only what does not change results may differ when resuming.
        args.async_envs = ns.async_envs
        args.ray = _ray_address(ns)
        args.checkpoint_every_s = ns.checkpoint_every
        args.time_budget_s = ns.time_budget
        if ns.steps is not None:
            args.total_steps = ns.steps     # a new budget extends the run
        done_updates = int(meta.get("update", 0))
        if ns.time_budget is None and done_updates >= args.num_updates:
            load_checkpoint(out)    # a damaged checkpoint is still a one-line error
            print(f"{out} is already at update {done_updates} of {args.num_updates} "
                  f"({args.total_steps} steps): nothing to train; give a larger --steps "
                  "or a --time-budget to continue", file=sys.stderr)
            return 0
        env_config = meta["env"]
        if ns.paired is not None and ns.paired != (env_config.get("paired") or {}).get("baseline"):
            raise InputError("--paired", f"{ns.paired} with --resume",
                             "none (a resumed run keeps its paired setting)")
        print(f"resuming {out} at update {meta['update']} (step {meta['global_step']}); "
              "hyper-parameters and environment from the checkpoint", file=sys.stderr)
    else:
        ns.actions = ns.actions or "start"
        if ns.bc_steps and not ns.teacher:
            raise InputError("--bc-steps", str(ns.bc_steps), "a --teacher to clone")
        env_config = _env_config(ns)
        args = args_cls(seed=ns.seed)
        if ns.steps is not None:
            args.total_steps = ns.steps
        if ns.envs is not None:
            args.num_envs = ns.envs
        args.async_envs = ns.async_envs
        args.ray = _ray_address(ns)
        args.smdp = ns.smdp
        if ns.time_scale is not None:
            args.time_scale = ns.time_scale
        if ns.smdp_gamma is not None:
            # One SMDP discount (thesis eq. 2.18): the env discounts within each
            # step, the agent between decisions, by the same gamma and time scale.
            args.smdp, args.gamma = True, float(ns.smdp_gamma)
        args.network = ns.network
        mimic_default = 0.5 if ns.teacher and ns.algo != "dql" else 0.0
        args.mimic_coef = ns.mimic_coef if ns.mimic_coef is not None else mimic_default
        if ns.mimic_decay is not None:
            args.mimic_decay = ns.mimic_decay
        args.checkpoint_every_s = ns.checkpoint_every
        args.time_budget_s = ns.time_budget
        _apply_arg_overrides(args, ns.arg)
    args.validate()
    from agents.loop import check_discounting
    from agents.recipe import WarmStartSpec, train
    from cosim.compose import EnvFactory, pin_scales

    check_discounting(args, env_config)
    # Fail fast on a bad scenario or option, before any work; pin the
    # feature scales to the training workload's and machine's.
    probe = pin_scales(env_config)
    wrap = _paired_wrap(env_config)
    if wrap is not None:
        wrap(probe)   # bad settings fail before any work
    env_fn = EnvFactory(env_config, wrap=wrap)
    warm = WarmStartSpec(ns.bc_steps, epochs=ns.bc_epochs) if ns.bc_steps and not resuming else None
    tb = _TensorBoard(out)
    try:
        result = train(env_fn, ns.algo, args, warm_start=warm, out=out, resume=ns.resume,
                       env_config=env_config, progress=not ns.quiet, log=tb,
                       say=lambda text: print(text, file=sys.stderr), teacher=ns.teacher,
                       probe=probe)
    finally:
        tb.close()
        probe.close()
    last = next((r for r in reversed(result.curve) if math.isfinite(r["mean_return"])), None)
    status = "finished" if result.finished else "stopped (time budget)"
    print(f"{ns.algo} {status}: {result.update} updates, {result.global_step} steps"
          + (f", last mean episode return {last['mean_return']:.4g}" if last else ""))
    print(f"checkpoint: {result.checkpoint}")
    print(f"curve: {out / 'curve.csv'}")
    return 0


def _evaluate(ns) -> int:
    from agents.rl_policy import load_rl_policy
    from cosim.compose import make_env

    if ns.episodes < 1:
        raise InputError("--episodes", str(ns.episodes), "a positive number")
    if ns.window is not None and ns.window[0] < 1:   # before the checkpoint is loaded
        raise InputError("--window", " ".join(map(str, ns.window)), "a first count above 0")
    policy = load_rl_policy(ns.checkpoint)
    if policy.env_config is None:
        raise InputError(ns.checkpoint, "a checkpoint without an environment description",
                         "one written by `python -m agents train`")
    overrides: dict[str, Any] = {"scenario": ns.scenario, "scenario_set": list(ns.overrides),
                                 "teacher": None}
    if ns.episode_jobs is not None:
        overrides["episode_jobs"] = ns.episode_jobs
    if ns.window is not None:
        overrides["window"] = _window(ns.window, policy.env_config.get("actions", "start"))
    baselines = list(DEFAULT_BASELINES) if ns.baseline is None else [
        b for b in ns.baseline if b != "none"]
    from cosim.policies import make_policy

    for name in baselines:
        make_policy(name, where="--baseline")    # a bad name fails before any work
    env = make_env(policy.env_config, **overrides)
    # The protocol's paired comparison by episode (each heuristic ran the agent's jobs):
    # the agent's ratio of mean bsld to each, with its interval, wins and losses.
    rows = evaluate_episodes(policy, env, ns.episodes, ns.seed, heuristics=baselines,
                             settings={"window": overrides["window"]} if "window" in overrides
                             else None)
    paired = rows["agent"]["paired"]
    rows["agent"]["paired"] = {name: c.as_dict() for name, c in paired.items()}
    if ns.json:
        print(json.dumps(rows, indent=2))
        return 0
    cols = EVALUATE_COLUMNS
    width = max(12, *(len(n) + 2 for n in rows))
    widths = [max(13, len(c) + 2) for c in cols]
    print(f"{'policy':<{width}}" + "".join(f"{c:>{w}}" for c, w in zip(cols, widths))
          + f"{'mean_return':>13}")
    for name, row in rows.items():
        ret = f"{row['mean_return']:>13.4g}" if "mean_return" in row else f"{'-':>13}"
        print(f"{name:<{width}}" + "".join(f"{row[c]:>{w}.4g}" for c, w in zip(cols, widths))
              + ret)
    for c in paired.values():
        print(c.summary("episodes"))
    trained = _training_capacity(policy.env_config)
    units = env.unwrapped.capacity
    where = f"{units} units" + ("" if trained in (None, units) else f"; trained on {trained}")
    print(f"({ns.episodes} episodes of {env.unwrapped.episode_jobs} jobs from seed {ns.seed} "
          f"on {where}; heuristics run on the same jobs; checkpoint {policy.meta['_path']}, "
          f"update {policy.update})")
    return 0


def _training_capacity(env_config: dict[str, Any]) -> int | None:
    """Units of the machine an agent was trained on (None when its scenario is not at hand)."""
    from cosim.config import load_scenario
    from cosim.errors import CosimError
    from cosim.model import capacity_of

    try:
        scenario = load_scenario(env_config["scenario"], list(env_config.get("scenario_set") or []))
    except (CosimError, KeyError, OSError):
        return None
    return capacity_of(scenario)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (2 for user errors)."""
    def handle(argv):
        ns = _parser().parse_args(argv)
        from agents.tuning.cli import run as _tune
        return {"train": _train, "evaluate": _evaluate, "tune": _tune}[ns.command](ns)
    return run_command(handle, argv, interrupted="interrupted (resume with --resume)")


if __name__ == "__main__":
    sys.exit(main())
