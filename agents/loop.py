"""The training loop shared by every learner: rollouts, updates, curve, checkpoints, resume.

:func:`run` is the loop of :mod:`agents.ppo`, :mod:`agents.a2c`,
:mod:`agents.pg` and :mod:`agents.dql`; each supplies its update through a
:class:`Learner` (how it acts, how it learns from one
:class:`agents.rollout.Rollout`, what it keeps between updates). The loop
owns everything else: seeding, learning-rate and imitation-weight decay,
logging the learning curve (:data:`CURVE_FIELDS`), checkpoints (see
:mod:`agents.checkpoint`) and exact resume (a resumed run equals an
uninterrupted one for the same seed).

:class:`Args` holds the hyper-parameters of the loop and of PPO (the
defaults follow the thesis' table 5.2 and RLSchert's table 4 where they
agree with common PPO practice); the other learners subclass it with their
own defaults and fields and ignore the PPO-only ones, so one checkpoint
format and one ``--arg`` grammar serve all four.

Examples:
    >>> from agents.loop import Args, run                       # doctest: +SKIP
    >>> from agents.ppo import ppo_update                       # doctest: +SKIP
    >>> result = run("ppo", ppo_update, lambda: MyMaskedEnv(), Args(total_steps=20_000))  # doctest: +SKIP
    >>> result.curve[-1]["mean_return"]                          # doctest: +SKIP
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.checkpoint import (
    capture_rng,
    env_meta,
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from agents.networks import make_network, network_from_spec
from agents.rollout import EnvRunner, Rollout, collect_rollout, sample_policy
from cosim.errors import InputError

__all__ = ["TrainArgs", "Args", "Learner", "TrainResult", "UpdateFn", "check_discounting", "run",
           "CURVE_FIELDS", "METRIC_KEYS",
           "RENAMED_METRICS"]

#: Per-episode scheduling metrics read from ``info["episode_metrics"]``.
METRIC_KEYS = ("bsld_mean", "wait_mean", "utilization", "wait_max", "queue_len_mean")
#: Their names in the curves of checkpoints written before they took the names of
#: ``summary.json`` (the shipped ``agents/pretrained`` ones): renamed on resume.
RENAMED_METRICS = {"mean_bsld": "bsld_mean", "mean_wait": "wait_mean", "max_wait": "wait_max",
                   "mean_queue": "queue_len_mean"}

#: Columns of the learning curve, one row per update.
CURVE_FIELDS = ("update", "global_step", "episodes", "mean_return", "mean_length",
                *METRIC_KEYS, "policy_loss", "value_loss", "entropy", "approx_kl",
                "clipfrac", "explained_variance", "mimic_loss", "mimic_coef",
                "teacher_agreement", "lr", "epochs", "fps", "elapsed_s", "epsilon",
                "q_mean", "episodes_started")


# ---------------------------------------------------------------------------------------
# 1. Hyper-parameters
# ---------------------------------------------------------------------------------------
@dataclass
class TrainArgs:
    """What every learner takes: the run, its rollouts, the optimizer, imitation, the network.

    The on-policy learners add :class:`Args`'s fields (PPO's); the off-policy
    :class:`agents.dql.DQLArgs` adds its replay buffer and target network instead.
    """

    seed: int = 1
    """Seed of everything: network init, action sampling, episode seeds, minibatches."""
    total_steps: int = 100_000
    """Agent decisions to train for, summed over environments."""
    num_envs: int = 1
    """Environments stepped together (one vector env)."""
    async_envs: bool = False
    """Step environments in worker processes (:class:`cosim.vector.ShardedVectorEnv`, one
    worker per core, several environments each) instead of in turn."""
    ray: str | None = None
    """Step environments in Ray actors (:class:`cosim.vector.RayVectorEnv`, one actor per
    CPU of the cluster): ``"local"`` starts a Ray in this process, ``"auto"`` or
    ``"HOST:PORT"`` joins a running cluster; None: no Ray."""
    num_steps: int = 128
    """Decisions per environment in one rollout (batch = num_envs * num_steps)."""
    lr: float = 3e-4
    """Initial learning rate."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the training."""
    optimizer: str = "adam"
    """``adam`` or ``rmsprop``."""
    gamma: float = 0.99
    """Discount per decision, or per ``time_scale`` seconds when ``smdp`` is set."""
    smdp: bool = False
    """Discount by simulated time: ``gamma ** (info['dt'] / time_scale)`` (thesis eq. 2.18)."""
    time_scale: float = 3600.0
    """Seconds that one factor gamma stands for with ``smdp``."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    mimic_coef: float = 0.0
    """Initial weight alpha_t of the imitation term (RLSchert eq. 11; 0 disables it)."""
    mimic_decay: float = 1.0
    """Fraction of the training over which alpha_t decays linearly to 0."""
    network: str | None = None
    """``mlp``, ``kernel`` or ``cnn``; default from the observation shape."""
    hidden: tuple[int, ...] | None = None
    """Hidden layer sizes (network default when None)."""
    checkpoint_every_s: float = 300.0
    """Wall-clock seconds between checkpoints (one is always written at the end)."""
    checkpoint_every_updates: int | None = None
    """Also checkpoint every this many updates (deterministic; used by tests)."""
    time_budget_s: float | None = None
    """Stop after this much wall time; the LR and alpha_t then decay by elapsed time too."""
    torch_threads: int = 1
    """Threads torch may use (small networks run fastest on one; the machine is shared)."""

    def __post_init__(self) -> None:
        if self.hidden is not None:
            self.hidden = tuple(int(h) for h in self.hidden)

    @property
    def batch_size(self) -> int:
        """Transitions per update."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Updates the training makes (at least one)."""
        return max(1, self.total_steps // self.batch_size)

    def validate(self) -> None:
        """Raise :class:`InputError` for impossible settings."""
        positive = ("total_steps", "num_envs", "num_steps", "torch_threads")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"args.{name}", repr(value), "a positive integer")
        for name in ("lr", "gamma", "time_scale"):
            if not getattr(self, name) > 0:
                raise InputError(f"args.{name}", repr(getattr(self, name)), "a positive number")
        if self.gamma > 1:
            raise InputError("args.gamma", repr(self.gamma), "a number in (0, 1]")
        if self.optimizer not in ("adam", "rmsprop"):
            raise InputError("args.optimizer", repr(self.optimizer), "adam or rmsprop")
        if not 0 <= self.mimic_coef < math.inf or not 0 < self.mimic_decay <= 1:   # NaN too
            raise InputError("args.mimic_coef/mimic_decay", f"{self.mimic_coef}/{self.mimic_decay}",
                             "a finite mimic_coef >= 0 and 0 < mimic_decay <= 1")

    def to_dict(self) -> dict[str, Any]:
        """Plain-value dict (JSON and ``weights_only`` safe)."""
        d = asdict(self)
        if d["hidden"] is not None:
            d["hidden"] = list(d["hidden"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        """Inverse of :meth:`to_dict` (unknown keys are an :class:`InputError`)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise InputError("args", ", ".join(unknown), f"fields of {cls.__name__}")
        return cls(**d)


@dataclass
class Args(TrainArgs):
    """PPO hyper-parameters (the on-policy learners' base); :class:`agents.a2c.A2CArgs` and
    :class:`agents.pg.PGArgs` change some defaults."""

    gae_lambda: float = 0.95
    """GAE lambda (1.0 gives n-step returns)."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Passes over each rollout."""
    clip_coef: float = 0.2
    """PPO ratio clipping epsilon."""
    clip_vloss: bool = True
    """Clip the value update around the old values too."""
    norm_adv: bool = True
    """Normalize advantages within each minibatch."""
    ent_coef: float = 0.01
    """Entropy bonus weight (entropy over legal actions only)."""
    vf_coef: float = 0.5
    """Value loss weight."""
    target_kl: float | None = 0.02
    """Stop the epochs of an update when a minibatch's approximate KL exceeds 1.5 x this."""

    def validate(self) -> None:
        """Raise :class:`InputError` for impossible settings."""
        super().validate()
        for name in ("num_minibatches", "update_epochs"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"args.{name}", repr(value), "a positive integer")
        if not 0 <= self.gae_lambda <= 1:
            raise InputError("args.gae_lambda", repr(self.gae_lambda), "a number in [0, 1]")
        if self.batch_size < self.num_minibatches:
            raise InputError("args.num_minibatches", str(self.num_minibatches),
                             f"at most the batch size {self.batch_size}")


#: Fields that may differ between a run and its resumption (they do not change results).
#: Args a resumed run may change: how it runs, and how long (``total_steps``
#: extends a run; the learning-rate schedule then stretches to the new end).
_OPERATIONAL = {"checkpoint_every_s", "checkpoint_every_updates", "async_envs", "ray",
                "torch_threads", "time_budget_s", "total_steps"}


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    net: nn.Module
    curve: list[dict[str, float]]
    global_step: int
    update: int
    checkpoint: Path | None
    finished: bool
    """False when stopped early (``stop_after_updates`` or the time budget)."""


UpdateFn = Callable[[nn.Module, torch.optim.Optimizer, Rollout, Args, float, np.random.Generator],
                    dict[str, float]]


class Learner:
    """An algorithm's part of :func:`run`: how it acts, how it learns, what it keeps.

    The loop (rollouts, learning-rate decay, curve, checkpoints, exact
    resume) is shared; a learner supplies the rest. The default is on-policy
    actor-critic: sample the masked policy, update with ``update_fn`` (PPO,
    A2C). :mod:`agents.pg` keeps its return baseline here, :mod:`agents.dql`
    its target network, replay buffer and epsilon, all saved in checkpoints
    through :meth:`state_dict` (tensors and plain values only).

    Args:
        update_fn: ``(net, optimizer, rollout, args, mimic_coef, rng) -> stats``.
    """

    def __init__(self, update_fn: UpdateFn | None = None):
        self.update_fn = update_fn

    def bind(self, net: nn.Module, args: TrainArgs) -> None:
        """Called once the network exists (before any checkpoint is restored)."""

    def act(self, net: nn.Module, obs: torch.Tensor, mask: torch.Tensor,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, log-probability, value)`` for a batch of observations."""
        return sample_policy(net, obs, mask, generator)

    def update(self, net: nn.Module, optimizer: torch.optim.Optimizer, rollout: Rollout,
               args: TrainArgs, mimic_coef: float, rng: np.random.Generator) -> dict[str, float]:
        """Learn from one rollout; returns statistics for the learning curve."""
        return self.update_fn(net, optimizer, rollout, args, mimic_coef, rng)

    def state_dict(self) -> dict[str, Any]:
        """What must survive a checkpoint besides the network and optimizer."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state_dict`."""


def check_discounting(args: TrainArgs, env_config: dict[str, Any] | None) -> None:
    """Refuse a run that would discount rewards two different ways.

    The environment's ``smdp_gamma`` discounts each step's integral reward by
    simulated time within the step (thesis eq. 2.18: the option's reward).
    The consistent learner then discounts *between* decisions by the same
    rule, ``gamma ** (dt / time_scale)`` (``args.smdp``) with the same gamma
    and time scale. A per-decision gamma on top of the env's time discount,
    or two different time discounts, mixes two objectives.

    Raises:
        InputError: the env discounts by time and the learner does not discount
            the same way.
    """
    env_gamma = (env_config or {}).get("smdp_gamma")
    if env_gamma is None:
        return
    env_scale = float((env_config or {}).get("time_scale") or 3600.0)
    if not args.smdp:
        raise InputError("args.smdp", "false with the environment's smdp_gamma="
                         f"{env_gamma} (a per-decision gamma on top of a time discount: "
                         "discounting twice)",
                         "args.smdp=true (--smdp) with gamma and time_scale equal to the "
                         "env's, or no env smdp_gamma")
    if not math.isclose(args.gamma, float(env_gamma)) or not math.isclose(args.time_scale,
                                                                          env_scale):
        raise InputError("args.gamma/time_scale", f"{args.gamma}/{args.time_scale}",
                         f"the environment's smdp_gamma/time_scale {env_gamma}/{env_scale} "
                         "(two different time discounts)")


def _explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    var = float(np.var(returns))
    return math.nan if var == 0 else 1.0 - float(np.var(returns - values)) / var


def _episode_means(episodes: list[dict[str, Any]]) -> dict[str, float]:
    def mean(key):
        vals = [e[key] for e in episodes if key in e and np.isfinite(e[key])]
        return float(np.mean(vals)) if vals else math.nan
    row = {"episodes": float(len(episodes)), "mean_return": mean("return"),
           "mean_length": mean("length")}
    row.update({k: mean(k) for k in METRIC_KEYS})
    return row


def _teacher_agreement(rollout: Rollout) -> float:
    legal = (rollout.teacher >= 0) & (np.take_along_axis(
        rollout.masks, np.clip(rollout.teacher, 0, None)[..., None], -1)[..., 0] > 0)
    if not legal.any():
        return math.nan
    return float(np.mean(rollout.actions[legal] == rollout.teacher[legal]))


def _write_curve(path: Path, rows: list[dict[str, float]], append: bool) -> None:
    new = not append or not path.exists()
    with open(path, "w" if new else "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CURVE_FIELDS), extrasaction="ignore")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _make_optimizer(net: nn.Module, args: TrainArgs) -> torch.optim.Optimizer:
    if args.optimizer == "rmsprop":
        return torch.optim.RMSprop(net.parameters(), lr=args.lr, alpha=0.99, eps=1e-5)
    return torch.optim.Adam(net.parameters(), lr=args.lr, eps=1e-5)


def _check_same_args(saved: dict[str, Any], args: TrainArgs, where: str) -> None:
    now = args.to_dict()
    diff = [k for k in now if k not in _OPERATIONAL and saved.get(k) != now[k]]
    if diff:
        k = diff[0]
        raise InputError(f"{where}: args.{k}", repr(now[k]),
                         f"{saved.get(k)!r} as in the checkpoint being resumed "
                         f"(differing: {', '.join(diff)})")


# run() by job: what is resumed, the progress bar, one curve row; the loop
# itself stays in run() (it owns the checkpoint closure and the clocks).
def _checkpoint_to_resume(out: Path | None, resume: bool, algo: str,
                          args: TrainArgs) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The latest checkpoint in ``out`` and its meta (None, None for a new run)."""
    state = meta = None
    if out is not None and latest_checkpoint(out) is not None:
        if not resume:
            raise InputError(str(out), "an existing training output",
                             "a new directory, or resume=True (--resume) to continue it")
        state, meta = load_checkpoint(out)
        if meta.get("algo") != algo:
            raise InputError(str(out), f"a {meta.get('algo')} checkpoint", f"a {algo} checkpoint")
        _check_same_args(meta["args"], args, str(out))
    return state, meta


def _progress_bar(algo: str, args: TrainArgs, curve: list[dict[str, float]], global_step: int):
    """A tqdm bar: wall time against the budget of a timed run, else steps."""
    from cosim.cli import progress_bar as tqdm  # no \r frames in logs
    if args.time_budget_s is not None:
        # A time-limited run ends on its budget: show wall time against it.
        done = min(curve[-1]["elapsed_s"], args.time_budget_s) if curve else 0.0
        return tqdm(total=round(args.time_budget_s), initial=round(done), unit="s",
                    desc=f"{algo} (time budget)")
    return tqdm(total=args.num_updates * args.batch_size, initial=global_step,
                unit="step", desc=algo)


def _curve_row(update: int, global_step: int, rollout, stats: dict[str, float],
               mimic_coef: float, lr: float, args: TrainArgs, t0: float, t_start: float,
               episodes_started: int) -> dict[str, float]:
    """One row of ``curve.csv`` (every :data:`CURVE_FIELDS`, NaN where unknown)."""
    row = {"update": float(update), "global_step": float(global_step),
           **_episode_means(rollout.episodes), **stats,
           "explained_variance": _explained_variance(rollout.values.ravel(),
                                                     rollout.returns.ravel()),
           "mimic_coef": mimic_coef, "teacher_agreement": _teacher_agreement(rollout),
           "lr": lr, "fps": args.batch_size / max(1e-9, time.monotonic() - t0),
           "elapsed_s": time.monotonic() - t_start,
           "episodes_started": episodes_started}
    return {k: float(row.get(k, math.nan)) for k in CURVE_FIELDS}


def _advance_bar(bar, row: dict[str, float], timed: bool, batch_size: int,
                 global_step: int) -> None:
    if timed:
        bar.update(max(0, min(round(row["elapsed_s"]), bar.total) - bar.n))
    else:
        bar.update(batch_size)
    post = {"steps": global_step} if timed else {}
    if not math.isnan(row["mean_return"]):
        post["ret"] = f"{row['mean_return']:.3g}"
    bar.set_postfix(post)


def run(algo: str, update_fn: UpdateFn, env_fn: Callable[[], gym.Env] |
        Sequence[Callable[[], gym.Env]], args: TrainArgs, *, out_dir: str | Path | None = None,
        resume: bool = False, env_config: dict[str, Any] | None = None,
        init_state_dict: dict[str, Any] | None = None, progress: bool = False,
        stop_after_updates: int | None = None,
        log: Callable[[dict[str, float]], None] | None = None,
        on_start: Callable[[nn.Module], None] | None = None) -> TrainResult:
    """The training loop: rollouts, ``update_fn``, curve, checkpoints, resume.

    Args:
        algo: name stored in checkpoints (``ppo``, ``a2c``, ``pg``, ``dql``).
        update_fn: ``(net, optimizer, rollout, args, mimic_coef, rng) -> stats``, or a
            :class:`Learner` (acting, update and state kept between updates).
        env_fn: an environment factory (called ``num_envs`` times) or one per env.
            Resuming needs environments that are deterministic given their
            reset seed and actions.
        args: hyper-parameters.
        out_dir: where checkpoints and ``curve.csv`` go (None: nowhere).
        resume: continue from ``out_dir``'s latest checkpoint when there is one.
        env_config: JSON description of the environment, saved for
            :func:`agents.rl_policy.load_rl_policy`.
        init_state_dict: network weights to start from (e.g. behaviour cloning).
        progress: show a tqdm progress bar.
        stop_after_updates: stop (after checkpointing) once this many updates are done.
        log: called with every curve row.
        on_start: called once with the network before training (for callers
            that look at it between updates, e.g. to keep the best snapshot).
    """
    args.validate()
    check_discounting(args, env_config)
    learner = update_fn if isinstance(update_fn, Learner) else Learner(update_fn)
    torch.set_num_threads(args.torch_threads)
    env_fns = list(env_fn) if isinstance(env_fn, Sequence) else [env_fn] * args.num_envs
    if len(env_fns) != args.num_envs:
        raise InputError("env_fn", f"{len(env_fns)} factories", f"args.num_envs={args.num_envs}")
    out = Path(out_dir) if out_dir is not None else None
    state, meta = _checkpoint_to_resume(out, resume, algo, args)

    seeds = np.random.SeedSequence(args.seed).spawn(2)
    rng = np.random.default_rng(seeds[0])                 # episode seeds, minibatches
    gen = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))  # action sampling
    runner = EnvRunner(env_fns, rng, asynchronous=args.async_envs, ray=args.ray,
                       resume=state["runner"] if state is not None else None)
    if state is not None:
        net = network_from_spec(meta["network"])
    else:
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = make_network(runner.observation_space, runner.action_space, args.network,
                               args.hidden)
    if init_state_dict is not None and state is None:
        net.load_state_dict(init_state_dict)
    learner.bind(net, args)
    optimizer = _make_optimizer(net, args)
    if on_start is not None:
        on_start(net)
    curve: list[dict[str, float]] = []
    update, global_step = 0, 0
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        restore_rng(state["rng"], rng, gen)
        learner.load_state_dict(state.get("learner", {}))
        update, global_step = int(state["update"]), int(state["global_step"])
        curve = [{RENAMED_METRICS.get(k, k): v for k, v in r.items()} for r in state["curve"]]
    meta_out = {"algo": algo, "args": args.to_dict(), "network": net.spec,
                "env": env_meta(env_config), "versions": {"torch": torch.__version__,
                                                "gymnasium": gym.__version__,
                                                "numpy": np.__version__}}
    curve_path = out / "curve.csv" if out is not None else None
    if curve_path is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write_curve(curve_path, curve, append=False)

    def checkpoint() -> Path | None:
        if out is None:
            return None
        st = {"model": net.state_dict(), "optimizer": optimizer.state_dict(),
              "update": update, "global_step": global_step,
              "rng": capture_rng(rng, gen), "runner": runner.state_dict(), "curve": curve,
              "learner": learner.state_dict()}
        return save_checkpoint(out, st, {**meta_out, "update": update,
                                         "global_step": global_step})

    timed = args.time_budget_s is not None
    bar = _progress_bar(algo, args, curve, global_step) if progress else None
    # Wall time already spent before a resume counts toward the time budget.
    t_start = time.monotonic() - (curve[-1]["elapsed_s"] if curve else 0.0)
    last_ckpt_t = time.monotonic()
    last_ckpt_path = None
    stopped_early = False
    try:
        while update < args.num_updates:
            if stop_after_updates is not None and update >= stop_after_updates:
                stopped_early = True
                break
            elapsed = time.monotonic() - t_start
            if args.time_budget_s is not None and elapsed >= args.time_budget_s:
                stopped_early = True
                break
            frac = update / args.num_updates
            if args.time_budget_s is not None:
                frac = max(frac, elapsed / args.time_budget_s)
            lr = args.lr * (1.0 - frac) if args.anneal_lr else args.lr
            for group in optimizer.param_groups:
                group["lr"] = lr
            mimic_coef = args.mimic_coef * max(0.0, 1.0 - frac / args.mimic_decay)
            t0 = time.monotonic()
            rollout = collect_rollout(runner, net, args.num_steps, gen,
                                      learner.act).finish(args)
            stats = learner.update(net, optimizer, rollout, args, mimic_coef, rng)
            update += 1
            global_step += args.batch_size
            row = _curve_row(update, global_step, rollout, stats, mimic_coef, lr, args,
                             t0, t_start, runner.next_episode)
            curve.append(row)
            if curve_path is not None:
                _write_curve(curve_path, [row], append=True)
            if log is not None:
                log(row)
            if bar is not None:
                _advance_bar(bar, row, timed, args.batch_size, global_step)
            now = time.monotonic()
            due = now - last_ckpt_t >= args.checkpoint_every_s or (
                args.checkpoint_every_updates is not None
                and update % args.checkpoint_every_updates == 0)
            if due and update < args.num_updates:
                last_ckpt_path = checkpoint()
                last_ckpt_t = now
        last_ckpt_path = checkpoint() or last_ckpt_path
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    return TrainResult(net=net, curve=curve, global_step=global_step, update=update,
                       checkpoint=last_ckpt_path, finished=not stopped_early)
