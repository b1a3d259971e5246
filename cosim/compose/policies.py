"""Policy names -> policies: heuristics, selectors, and trained agents through loaders.

A name is parsed once (:func:`parse_policies`, the grammar of
:func:`cosim.policies.parse_policy` plus the scenario's predictor defaults)
and made into a policy by :func:`load_policy`. Heuristics come from
:func:`cosim.policies.make_policy`; a prefixed name such as ``rl:DIR`` goes to
the loader registered for its prefix in :data:`POLICY_LOADERS`
(:mod:`cosim.policies.loaders`, which ``agents`` fills when imported), so a new
kind of learned policy is one :func:`register_policy_loader` call. A loader gets
the parsed spec, the run's scenario and workload, and returns a fresh policy
for one simulation. A kill (``+kill``: the scenario's rule; ``+kill=DIR``: a
trained kill agent) wraps the policy and reads the run's prediction hub
(:func:`with_kills`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import agents  # noqa: F401  (installs the learners' loaders: rl:DIR)
from cosim.config import Scenario
from cosim.errors import InputError
from cosim.policies import KillRule, KillRulePolicy, PolicySpec, make_policy, parse_policy
from cosim.policies.loaders import (  # the one registry, re-exported for the composition
    POLICY_LOADERS,
    PolicyLoader,
    load_prefixed,
    register_policy_loader,
)
from cosim.policies.slurm_params import parse_slurm_params
from cosim.workloads.base import Workload

__all__ = ["parse_policies", "load_policy", "with_kills", "load_kill_agent",
           "register_policy_loader",
           "POLICY_LOADERS", "PolicyLoader"]

def parse_policies(names: Sequence[str], scenario: Scenario, *, source: str = "--policy"
                   ) -> list[PolicySpec]:
    """Parse policy names and fill in the scenario's predictor defaults.

    Args:
        names: policy names.
        scenario: gives ``predictor.runtime`` and ``predictor.kill.enabled``
            for names without ``@PREDICTOR``.
        source: where the names came from, for error messages: ``"--policy"``,
            or the scenario file (errors then name ``FILE: scheduler.policies[i]``).

    Raises:
        ScenarioError: a name that does not parse, or ``rl:DIR`` without a folder.
    """
    specs = []
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        where = source if source.startswith("--") else f"{source}: scheduler.policies[{i}]"
        # One spelling per policy: a capital or a space would run the same policy
        # under another name (the folder, the table); the part after ':' is a path.
        head, colon, rest = name.partition(":")
        canonical = head.strip().lower() + colon + (rest.strip() if colon else "")
        if canonical != name:
            raise InputError(where, repr(name), "a policy name in lower case without spaces",
                             f"did you mean {canonical!r}?")
        spec = parse_policy(name, where=where)
        if spec.kind == "slurm" and scenario.scheduler.slurm:
            at = "--set" if source.startswith("--") else source
            parse_slurm_params(scenario.scheduler.slurm, where=f"{at}: scheduler.slurm")
        if spec.kind == "agent" and spec.predictor is None:
            # A trained agent sees what it was trained with, unless the name says otherwise.
            spec = spec.resolved(_agent_predictor(spec.checkpoint, where), where=where)
        spec = spec.resolved(scenario.predictor.runtime, scenario.predictor.kill.enabled,
                             where=where)
        if spec.kind == "agent" and not Path(spec.checkpoint).is_dir():
            raise InputError(where, repr(name), "rl:DIR with DIR a checkpoint folder written by "
                             "'python -m agents train'")
        if spec.kill_agent and not Path(spec.kill_agent).is_dir():
            raise InputError(where, repr(name), "+kill=DIR with DIR a kill agent's checkpoint "
                             "folder ('python -m agents train --actions kill')")
        if spec.name in seen:
            raise InputError(where, f"{name!r} a second time (also policy {seen[spec.name] + 1})",
                             "each policy once")
        seen[spec.name] = i
        specs.append(spec)
    return specs


def _agent_predictor(folder: str, where: str) -> str:
    """The predictor a checkpoint's agent was trained with (``estimate`` if none)."""
    if not Path(folder).is_dir():
        raise InputError(where, repr(f"rl:{folder}"), "rl:DIR with DIR a checkpoint folder "
                         "written by 'python -m agents train'")
    from agents.checkpoint import read_meta

    return (read_meta(folder).get("env") or {}).get("predictor") or "estimate"


def load_policy(spec: PolicySpec, scenario: Scenario, workload: Workload, *,
                rng=None, base_dir: str | Path | None = None):
    """The policy a spec names: a heuristic, a selector, or a loaded one (``rl:DIR``).

    A trained agent becomes an :class:`cosim.env.AgentPolicy` acting in
    process (:func:`cosim.env.acting.acting_policy`): the same window, mask
    and observation as the environment it was trained in, answered by the
    network (greedy). ``base_dir`` is accepted for callers that pass it; the
    workload is already loaded.

    Raises:
        InputError: a prefix no loader is registered for.
    """
    if spec.kind != "agent":
        return make_policy(spec, rng=rng, slurm=scenario.scheduler.slurm)
    return load_prefixed(spec, scenario, workload)


def with_kills(spec: PolicySpec, scenario: Scenario, workload: Workload, policy, hub, *,
               base_dir: str | Path | None = None):
    """``policy`` with the kills ``spec`` asks for, reading ``hub``'s predictions.

    ``+kill``: the scenario's kill rule (``predictor.kill``) wraps it
    (:class:`cosim.policies.KillRulePolicy`); ``+kill=DIR``: the trained kill
    agent does (:func:`load_kill_agent`); otherwise it is returned as it is.
    """
    if spec.kill_agent:
        return load_kill_agent(spec.kill_agent, scenario, workload, policy, hub, name=spec.name,
                               base_dir=base_dir)
    if spec.kill:
        return KillRulePolicy(policy, KillRule.from_config(scenario.predictor.kill), hub)
    return policy


def load_kill_agent(folder: str, scenario: Scenario, workload: Workload, base, hub, *,
                    name: str, base_dir: str | Path | None = None):
    """A trained kill agent around ``base``: it decides kills from ``hub``'s predictions.

    Raises:
        InputError: the checkpoint's agent does not decide kills.
    """
    from agents.rl_policy import load_rl_policy
    from cosim.env.acting import acting_policy

    agent = load_rl_policy(folder)
    if (agent.env_config or {}).get("actions") != "kill":
        raise InputError(f"+kill={folder}", "an agent that does not decide kills",
                         "a checkpoint of 'python -m agents train --actions kill'")
    return acting_policy(agent.env_config, scenario, workload, agent.act, name=name, base=base,
                         hub=hub)
