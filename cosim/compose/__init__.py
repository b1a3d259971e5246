"""The composition root: the only part of ``cosim`` that wires in ``agents`` and ``predictors``.

- :mod:`~cosim.compose.policies`: policy names -> policies (heuristics, and
  prefixed names such as ``rl:DIR`` through a loader registry).
- :mod:`~cosim.compose.predictions`: one prediction set-up (models, backend,
  hub), in process or in front of a prediction service.
- :mod:`~cosim.compose.envs`: environments from saved env configs (what the
  learners get as factories; they never import this package).
- :mod:`~cosim.compose.run`: one policy's simulation, and a scenario under
  several policies into one results folder.
- :mod:`~cosim.compose.staging`, :mod:`~cosim.compose.table`: results folders,
  the comparison table and the progress bar.
"""

from cosim.compose.envs import EnvFactory, make_env, pin_scales
from cosim.compose.policies import (
    POLICY_LOADERS,
    load_kill_agent,
    load_policy,
    parse_policies,
    register_policy_loader,
)
from cosim.compose.predictions import (
    HubFactory,
    attach_predictions,
    make_prediction_hub,
    prediction_backend,
    prepare_models,
)
from cosim.compose.run import run_policy, run_scenario
from cosim.compose.staging import default_out_dir, policy_dir
from cosim.compose.table import TABLE_COLUMNS, comparison_table

__all__ = ["run_policy", "run_scenario", "parse_policies", "load_policy", "load_kill_agent",
           "register_policy_loader", "POLICY_LOADERS", "prepare_models", "prediction_backend",
           "make_prediction_hub", "attach_predictions", "HubFactory", "make_env", "EnvFactory",
           "pin_scales",
           "default_out_dir", "policy_dir", "TABLE_COLUMNS", "comparison_table"]
