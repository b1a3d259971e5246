"""The learners by name: the one place a name (``--algo``, a study's ``train.algo``) is read.

As Stable-Baselines3 sorts its algorithms, every learner is one of two kinds:

* :class:`OnPolicyLearner` -- learns from rollouts of the current policy and
  drops them after each update (PPO, A2C, and PG, DRAS's REINFORCE);
* :class:`OffPolicyLearner` -- learns from a replay buffer of past transitions,
  whoever acted (DQL, DRAS's deep Q-learning).

:data:`LEARNERS` maps each name to its class; :func:`learner` looks one up
(with a one-line error naming the choices). A class knows its
hyper-parameters (:meth:`Learner.args_class`), the update the training loop
runs (:meth:`Learner.make_update`) and trains (:meth:`Learner.train`). The
learner modules (and torch) are imported only when one is used, so the
command-line parsers can list the names cheaply.

Examples:
    >>> from agents.registry import LEARNERS, learner
    >>> sorted(LEARNERS)
    ['a2c', 'dql', 'pg', 'ppo']
    >>> learner("dql").off_policy, learner("ppo").off_policy
    (True, False)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, ClassVar

from cosim.errors import InputError, did_you_mean

if TYPE_CHECKING:
    from agents.loop import Args, TrainResult

__all__ = ["Learner", "OnPolicyLearner", "OffPolicyLearner", "PPO", "A2C", "PG", "DQL",
           "LEARNERS", "learner", "PPO_FIELDS", "add_help_groups"]


class Learner:
    """A learner: a name, its hyper-parameters and the update :func:`agents.loop.run` makes.

    Subclasses name the module that holds the learner (``agents.<name>``), its
    hyper-parameter class and its update (a function, or an
    :class:`agents.loop.Learner` class that is instantiated per run).
    """

    name: ClassVar[str] = ""
    #: Whether it learns from a replay buffer of past transitions (SB3's OffPolicyAlgorithm).
    off_policy: ClassVar[bool] = False
    summary: ClassVar[str] = ""
    _module: ClassVar[str] = ""
    _args: ClassVar[str] = ""
    _update: ClassVar[str] = ""

    @classmethod
    def module(cls):
        """The module that holds the learner (imported on first use)."""
        return importlib.import_module(cls._module)

    @classmethod
    def args_class(cls) -> type[Args]:
        """Its hyper-parameters (a dataclass of :mod:`agents.loop`'s ``Args`` family)."""
        return getattr(cls.module(), cls._args)

    @classmethod
    def make_update(cls) -> Any:
        """A fresh update for one training run (a function, or a stateful learner object)."""
        update = getattr(cls.module(), cls._update)
        return update() if isinstance(update, type) else update

    @classmethod
    def train(cls, env_fn, args: Args | None = None, **kwargs) -> TrainResult:
        """Train on ``env_fn``; the keyword arguments are :func:`agents.loop.run`'s."""
        from agents.loop import run

        return run(cls.name, cls.make_update(), env_fn, args or cls.args_class()(), **kwargs)


class OnPolicyLearner(Learner):
    """Learns from rollouts of the current policy, dropped after each update."""

    off_policy = False


class OffPolicyLearner(Learner):
    """Learns from a replay buffer of past transitions (whoever acted)."""

    off_policy = True


class PPO(OnPolicyLearner):
    """Masked PPO (Schulman et al. 2017), with RLSchert's imitation term."""

    name, summary = "ppo", "ppo (masked PPO)"
    _module, _args, _update = "agents.ppo", "Args", "ppo_update"


class A2C(OnPolicyLearner):
    """Synchronous advantage actor-critic (DeepRM's setting)."""

    name, summary = "a2c", "a2c"
    _module, _args, _update = "agents.a2c", "A2CArgs", "a2c_update"


class PG(OnPolicyLearner):
    """DRAS-PG: REINFORCE with DRAS's baseline."""

    name, summary = "pg", "pg (DRAS-PG: REINFORCE with DRAS's baseline)"
    _module, _args, _update = "agents.pg", "PGArgs", "PGLearner"


class DQL(OffPolicyLearner):
    """DRAS-DQL: deep Q-learning with replay and a target network."""

    name, summary = "dql", "dql (DRAS-DQL: deep Q-learning with replay and a target network)"
    _module, _args, _update = "agents.dql", "DQLArgs", "DQLLearner"


#: Learner classes by name, in the order the CLI lists them.
LEARNERS: dict[str, type[Learner]] = {cls.name: cls for cls in (PPO, A2C, PG, DQL)}


def learner(name: str, *, where: str = "algo") -> type[Learner]:
    """The learner class called ``name``.

    Raises:
        InputError: no learner has that name (``where`` names the setting).
    """
    if name not in LEARNERS:
        hint = did_you_mean(str(name), LEARNERS)
        raise InputError(where, repr(name),
                         f"one of {', '.join(LEARNERS)}" + (f" ({hint})" if hint else ""))
    return LEARNERS[name]


#: PPO's own hyper-parameters, what ``agents train --help`` lists for ppo (the other
#: learners show what they add or set otherwise; the off-policy ones have none of these).
PPO_FIELDS = ("gae_lambda", "num_minibatches", "update_epochs", "clip_coef", "clip_vloss",
              "norm_adv", "ent_coef", "vf_coef", "target_kl")


def add_help_groups(parser) -> None:
    """One help section per learner on an argparse ``parser``: its kind, its
    hyper-parameter class and the fields ``--arg NAME=VALUE`` sets, with defaults."""
    from dataclasses import fields

    from agents.loop import Args

    base = {f.name: f.default for f in fields(Args)}
    for name, cls in LEARNERS.items():
        args_cls = cls.args_class()
        if args_cls is Args:
            own = [f for f in fields(Args) if f.name in PPO_FIELDS]
        else:
            own = [f for f in fields(args_cls) if f.name not in base or f.default != base[f.name]
                   and not (cls.off_policy and f.name in PPO_FIELDS)]
        kind = "off-policy" if cls.off_policy else "on-policy"
        parser.add_argument_group(
            f"--algo {name} ({kind}, {args_cls.__module__}.{args_cls.__name__})",
            "--arg " + ", ".join(f"{f.name}={f.default}" for f in own))
