"""Every public name imports and explains itself; `import cosim` stays light."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import agents
import cosim
import predictors

#: Old import paths kept for one release; they warn (checked below).
DEPRECATED = {"agents.heuristics": "cosim.policies", "agents.backfill": "cosim.policies.backfill",
              "agents.knapsack": "cosim.policies.knapsack"}
MODULES = sorted({m.name for pkg in (cosim, predictors, agents)
                  for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")
                  if not m.name.endswith("__main__")} - set(DEPRECATED)
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


@pytest.mark.parametrize("old,new", sorted(DEPRECATED.items()))
def test_moved_modules_still_import_with_a_deprecation_warning(old, new):
    code = ("import warnings, importlib; warnings.simplefilter('error'); "
            f"importlib.import_module({old!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0 and "DeprecationWarning" in proc.stderr and new in proc.stderr
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.reload(importlib.import_module(old))
    target = importlib.import_module(new)
    for name in module.__all__:
        assert getattr(module, name) is getattr(target, name, getattr(module, name))


def test_old_make_policy_import_keeps_working():
    with pytest.warns(DeprecationWarning, match="cosim.policies"):
        old = importlib.reload(importlib.import_module("agents.heuristics")).make_policy
    from cosim.policies import make_policy
    assert old is make_policy and old("sjf+easy").name == "sjf+easy"
    with pytest.warns(DeprecationWarning, match="cosim.policies"):
        assert agents.make_policy is make_policy
