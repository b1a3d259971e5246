"""The one registry of loaders for prefixed policy names (``rl:DIR``), filled by the learners.

A trained agent needs the learners (``agents``, and torch), which the model
side of ``cosim`` never imports. So ``agents`` installs a loader for its
prefix here when it is imported (``import agents`` registers ``rl``), and every
consumer of policy names finds it in the same place: a run
(:func:`cosim.compose.load_policy`) and the evaluation protocol
(:mod:`cosim.evaluation`, which scores ``rl:DIR`` on its windows). A loader
gets the parsed name, the run's scenario and workload, and returns a fresh
policy for one simulation.
"""

from __future__ import annotations

from collections.abc import Callable

from cosim.config import Scenario
from cosim.errors import InputError
from cosim.policies.names import PolicySpec
from cosim.workloads.base import Workload

__all__ = ["POLICY_LOADERS", "PolicyLoader", "register_policy_loader", "prefix_of",
           "load_prefixed", "PREDICTION_BACKENDS", "register_prediction_backend"]

#: ``loader(spec, scenario, workload) -> policy`` for a prefixed policy name.
PolicyLoader = Callable[[PolicySpec, Scenario, Workload], object]

#: Loaders of prefixed policy names (``PREFIX:...``), by prefix.
POLICY_LOADERS: dict[str, PolicyLoader] = {}


def register_policy_loader(prefix: str, loader: PolicyLoader) -> None:
    """Make ``PREFIX:...`` policy names load through ``loader`` (replacing any earlier one)."""
    POLICY_LOADERS[prefix] = loader


#: ``backend(scenario, workload)`` for a name's ``@PREDICTOR``, by predictor: how the evaluation
#: protocol (:mod:`cosim.evaluation`) plans on predictions in its windows without importing
#: ``predictors``. Filled, like :data:`POLICY_LOADERS`, by the layers that may import them
#: (``import agents``, ``import cosim.compose``); ``estimate`` needs none.
PREDICTION_BACKENDS: dict[str, Callable[[Scenario, Workload], object]] = {}


def register_prediction_backend(predictor: str,
                                backend: Callable[[Scenario, Workload], object]) -> None:
    """Make ``@PREDICTOR`` evaluable on the protocol's windows, each run a fresh
    ``backend(scenario, window)`` (a module-level function, so worker processes get it too;
    a backend's ``default_refit`` applies where ``predictor.refit`` says nothing)."""
    PREDICTION_BACKENDS[predictor] = backend


def prefix_of(spec: PolicySpec) -> str:
    """The prefix of a prefixed name: ``rl`` of ``rl:runs/a``."""
    return spec.name.split(":", 1)[0]


def load_prefixed(spec: PolicySpec, scenario: Scenario, workload: Workload,
                  loaders: dict[str, PolicyLoader] | None = None):
    """The policy of a prefixed name, by the loader registered for its prefix.

    ``loaders``: the registry to read (default :data:`POLICY_LOADERS`; a worker
    process gets the parent's).

    Raises:
        InputError: a prefix no loader is registered for.
    """
    loaders = POLICY_LOADERS if loaders is None else loaders
    loader = loaders.get(prefix_of(spec))
    if loader is None:
        known = ", ".join(p + ":" for p in loaders) or "none (import agents to install rl:)"
        raise InputError("policy", repr(spec.name), f"a prefix with a loader: {known}")
    return loader(spec, scenario, workload)
