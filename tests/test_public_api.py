"""Every public name imports and explains itself; `import cosim` stays light."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import agents
import cosim
import predictors

#: Old import paths, removed (issue 19): the policies live in cosim.policies.
REMOVED = ("agents.heuristics", "agents.backfill", "agents.knapsack")
MODULES = sorted({m.name for pkg in (cosim, predictors, agents)
                  for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                  if not m.name.endswith("__main__")}
                 | {"cosim", "predictors", "agents"})


@pytest.mark.parametrize("name", MODULES)
def test_public_names_import_and_have_docstrings(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    for public in getattr(module, "__all__", []):
        obj = getattr(module, public)     # AttributeError: listed but missing
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__ and obj.__doc__.strip(), f"{name}.{public} has no docstring"


def test_import_cosim_does_not_import_torch_or_xgboost():
    code = ("import sys, cosim, cosim.model, cosim.env, cosim.compose, cosim.workloads, "
            "predictors, agents; print('torch' in sys.modules, 'xgboost' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_agents_learning_names_load_on_first_use():
    code = ("import sys, agents; before = 'torch' in sys.modules; "
            "from agents import MaskedCategorical, load_rl_policy; "
            "print(before, 'torch' in sys.modules, MaskedCategorical.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "agents.distributions"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agents.nope  # noqa: B018


@pytest.mark.parametrize("old", REMOVED)
def test_moved_policy_modules_are_gone_from_agents(old):
    # By file: an editable install of another checkout may still map the old name.
    assert not (Path(agents.__file__).parent / f"{old.split('.')[1]}.py").exists()
    with pytest.raises(AttributeError):
        agents.make_policy  # noqa: B018
