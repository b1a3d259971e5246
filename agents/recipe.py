"""One training recipe: env factory, warm start, learner, model selection on validation.

:func:`train` is what ``python -m agents train`` and every benchmark call:

1. an optional behaviour-cloning warm start (:class:`WarmStartSpec`, run by
   :func:`agents.imitation.warm_start`);
2. the learner's loop (:func:`agents.loop.run`) for a number of steps or a
   wall-time budget;
3. optionally, model selection (:class:`Selection`): the greedy policy is
   scored on *validation* data every so often, and the best snapshot is the
   one saved (loadable as ``rl:OUT``). The scorer sees only what the caller
   gives it; the test data belongs to :func:`select_then_test`, which reads
   it once, after the choice.

The env factory comes from the caller: learners never build envs from
configs themselves (that needs the front, :class:`cosim.compose.EnvFactory`,
which also pins feature scales with :func:`cosim.compose.pin_scales`).
Intervals come from :func:`cosim.paired.mean_interval`, the one interval method.

Examples:
    >>> from agents.recipe import WarmStartSpec, train  # doctest: +SKIP
    >>> from cosim.compose import EnvFactory, pin_scales  # doctest: +SKIP
    >>> config = {"scenario": "scenarios/lublin256.yaml", "teacher": "sjf"}  # doctest: +SKIP
    >>> pin_scales(config).close()  # doctest: +SKIP
    >>> result = train(EnvFactory(config), "ppo", Args(total_steps=20_000),  # doctest: +SKIP
    ...                warm_start=WarmStartSpec(steps=5000))
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from agents import registry
from cosim.errors import InputError

__all__ = ["WarmStartSpec", "Selection", "Selected", "train", "select_then_test"]


# -- training --------------------------------------------------------------------------
@dataclass
class WarmStartSpec:
    """Behaviour cloning before RL: ``steps`` teacher decisions, fitted ``epochs`` times."""

    steps: int
    epochs: int = 10
    batch_size: int = 64
    balance: bool = False
    """Weight decisions by inverse action frequency (rare choices, e.g. kills)."""


@dataclass
class Selection:
    """Model selection on validation data.

    Attributes:
        score: ``policy -> (value, text)``, lower is better, on validation data only.
        every_s: wall seconds of training between scores (None: not by time).
        every_updates: updates between scores (None: not by count).
    """

    score: Callable[[Any], tuple[float, str]]
    every_s: float | None = 30.0
    every_updates: int | None = None


@dataclass
class Selected:
    """The snapshot :func:`train` kept under :class:`Selection`."""

    score: float
    update: int
    step: int
    path: Path
    elapsed_s: float


def _say(log: Callable[[str], None] | None, text: str) -> None:
    if log is not None:
        log(text)


def train(env_fn: Callable[[], gym.Env], algo: str, args, *, budget_s: float | None = None,
          warm_start: WarmStartSpec | None = None, selection: Selection | None = None,
          out: str | Path | None = None, env_config: dict[str, Any] | None = None,
          resume: bool = False, progress: bool = False,
          log: Callable[[dict[str, float]], None] | None = None,
          say: Callable[[str], None] | None = None, name: str = "agent",
          teacher: str | None = None, probe: gym.Env | None = None,
          extra_meta: Mapping[str, Any] | None = None):
    """Warm start, learn, and (with ``selection``) keep the best validation snapshot.

    Args:
        env_fn: training env factory (``num_envs`` envs are built from it).
        algo: a learner name of :data:`agents.registry.LEARNERS`.
        args: its hyper-parameters (``learner(algo).args_class()``).
        budget_s: wall seconds for the whole recipe (warm start and scoring
            included); training then runs until the budget instead of
            ``args.total_steps``. None: ``args`` decides.
        warm_start: behaviour cloning first (not when resuming a run).
        selection: score snapshots on validation and save the best to ``out``
            (without it the loop writes its checkpoints and curve to ``out``).
        out: output folder.
        env_config: the env description saved with the policy.
        resume: continue the run in ``out`` (without ``selection`` only).
        progress: a progress bar.
        log: called with every learning-curve row.
        say: called with one-line progress messages.
        name: label of the messages.
        teacher: the teacher's name, for the warm-start message.
        probe: an env of the training spaces (saves building one).
        extra_meta: more keys for the saved checkpoint's metadata (with ``selection``).

    Returns:
        Without ``selection``, the loop's :class:`agents.loop.TrainResult`;
        with it, the :class:`Selected` snapshot.
    """
    from agents.imitation import warm_start as clone
    from agents.loop import run

    t0 = time.monotonic()
    if selection is not None and resume:
        raise InputError("resume", "with model selection", "a fresh run (selection keeps "
                         "the best snapshot in memory)")
    if selection is not None and out is None:
        raise InputError("out", "None with model selection", "a folder for the kept snapshot")
    learner = registry.learner(algo).make_update()
    init = None
    net = None
    if warm_start is not None and warm_start.steps:
        cloned = clone(env_fn, args, warm_start.steps, epochs=warm_start.epochs,
                       batch_size=warm_start.batch_size, balance=warm_start.balance, probe=probe)
        net = cloned.net
        init = net.state_dict()
        text = cloned.describe(teacher)
        _say(say, text if selection is None else
             f"  {name}: {text} ({time.monotonic() - t0:.0f} s)")
    if selection is None:
        if budget_s is not None:
            args.time_budget_s = max(1.0, budget_s - (time.monotonic() - t0))
            args.total_steps = 10**12
        return run(algo, learner, env_fn, args, out_dir=out, resume=resume,
                   env_config=env_config, init_state_dict=init, progress=progress, log=log)
    return _train_selected(env_fn, algo, args, learner, net, budget_s, selection, Path(out),
                           env_config or {}, log, say, name, extra_meta or {}, t0, progress)


def _train_selected(env_fn, algo, args, learner, net, budget_s, selection, out, env_config,
                    log, say, name, extra_meta, t0, progress):
    """:func:`train` with :class:`Selection` (see there)."""
    import torch

    from agents.checkpoint import env_meta, save_checkpoint
    from agents.loop import run
    from agents.networks import make_network
    from agents.rl_policy import acting_policy_of

    if net is None:
        probe = env_fn()
        with torch.random.fork_rng():
            torch.manual_seed(args.seed)
            net = make_network(probe.observation_space, probe.action_space, args.network,
                               args.hidden)
        probe.close()
    meta = {"algo": algo, "args": args.to_dict(), "network": net.spec,
            "env": env_meta({**env_config, "teacher": None}) if env_config else {"teacher": None}}
    best: dict[str, Any] = {"score": math.inf, "update": 0}

    def consider(state_dict, update, step):
        # Scored by acting greedily: the numpy actor of these weights, as a run would act.
        scored = copy.deepcopy(net).eval()
        scored.load_state_dict(state_dict)
        policy = acting_policy_of(scored, meta)
        value, text = selection.score(policy)
        if value < best["score"]:
            best.update(score=value, state={k: v.clone() for k, v in state_dict.items()},
                        update=update, step=step)
        _say(say, f"  {name}: update {update:5d} step {step:8d} {text} "
                  f"(best {best['score']:.4g} at update {best['update']}) "
                  f"[{time.monotonic() - t0:.0f} s]")

    consider(net.state_dict(), 0, 0)
    if budget_s is not None:
        args.time_budget_s = max(1.0, budget_s - (time.monotonic() - t0))
        args.total_steps = 10**12
    args.checkpoint_every_s = 1e9
    live = {"net": None, "last": time.monotonic(), "n": 0}

    def on_row(row):
        live["n"] += 1
        due = (selection.every_updates is not None and live["n"] % selection.every_updates == 0
               or selection.every_s is not None
               and time.monotonic() - live["last"] >= selection.every_s)
        if due:
            consider(live["net"].state_dict(), int(row["update"]), int(row["global_step"]))
            live["last"] = time.monotonic()
        if log is not None:
            log(row)

    result = run(algo, learner, env_fn, args, init_state_dict=net.state_dict(), log=on_row,
                 on_start=lambda n: live.__setitem__("net", n), env_config=env_config,
                 progress=progress)
    consider(result.net.state_dict(), result.update, result.global_step)
    if out.exists():
        shutil.rmtree(out)
    save_checkpoint(out, {"model": best["state"], "update": best["update"],
                          "global_step": best["step"]},
                    {**meta, "update": best["update"], "global_step": best["step"],
                     "validation_score": best["score"], **extra_meta})
    return Selected(score=best["score"], update=best["update"], step=best["step"], path=out,
                    elapsed_s=time.monotonic() - t0)


# -- evaluation ------------------------------------------------------------------------
def select_then_test(candidates: Sequence[str], validation: Sequence[Any], test: Sequence[Any],
                     score: Callable[[str, Any], float]
                     ) -> tuple[str, dict[str, list[float]], dict[str, list[float]]]:
    """Choose among ``candidates`` on validation data, then read the test data once.

    ``score(candidate, window)`` is lower-is-better. The choice is the
    candidate with the lowest mean validation score (first one on ties); it
    is made before any test window is read, so test data never influences
    it. Every candidate is then scored on every test window, for the report.

    Returns:
        ``(chosen, validation scores, test scores)``, scores per candidate per window.
    """
    if not candidates:
        raise InputError("candidates", "none", "at least one configuration to choose from")
    val = {c: [float(score(c, w)) for w in validation] for c in candidates}
    chosen = min(candidates, key=lambda c: float(np.mean(val[c])))
    tested = {c: [float(score(c, w)) for w in test] for c in candidates}
    return chosen, val, tested
