"""Trained agents as policies of any run or evaluation: the ``rl:`` loader ``agents`` installs.

``import agents`` registers :func:`load_rl` for the prefix ``rl`` in
:mod:`cosim.policies.loaders`, the one registry of prefixed policy names, so
``cosim run --policy rl:DIR`` and the evaluation protocol
(:class:`cosim.evaluation.Protocol`, which scores ``rl:DIR`` on its windows)
load an agent the same way, without the model side importing the learners.
An :class:`ActingAgent` is the same agent as a source of the protocol with
settings of its own (another window than it was trained with). Nothing here
imports torch until an agent is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ActingAgent", "load_rl"]


@dataclass(frozen=True)
class ActingAgent:
    """A trained agent acting greedily through its training env's eyes, as a policy source.

    Args:
        checkpoint: the training output or checkpoint folder.
        settings: env settings over the checkpoint's (``window``: another window for
            a kernel network); only :data:`cosim.env.acting.ACTING_KEYS` are read.
        name: the policy's name in results (default ``rl:CHECKPOINT``).
        agent: the loaded :class:`agents.rl_policy.RLPolicy` when at hand (not
            shipped to worker processes: each loads its own).
    """

    checkpoint: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    agent: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", f"rl:{self.checkpoint}")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "agent": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def loaded(self):
        """The agent (loaded from the checkpoint on first use)."""
        if self.agent is None:
            from agents.rl_policy import load_rl_policy

            object.__setattr__(self, "agent", load_rl_policy(self.checkpoint))
        return self.agent

    def policy_for(self, scenario, workload):
        """A fresh policy for one simulation of ``workload`` under ``scenario``."""
        from cosim.env.acting import acting_policy

        agent = self.loaded()
        config = {**(agent.env_config or {}), **dict(self.settings)}
        return acting_policy(config, scenario, workload, agent.act, name=self.name)


def load_rl(spec, scenario, workload):
    """``rl:DIR``: the trained agent, acting greedily through its training env's eyes."""
    return ActingAgent(spec.checkpoint, name=spec.name).policy_for(scenario, workload)
