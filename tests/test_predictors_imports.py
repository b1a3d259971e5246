"""The import graph of predictors: no cycles, and only the simulator parts it may use."""

from __future__ import annotations

import grimp
import pytest

# What predictors may import from cosim: the one list, which also checks that
# the import-linter contract is its complement (tests/test_architecture.py).
from test_architecture import PREDICTORS_MAY_IMPORT as ALLOWED


@pytest.fixture(scope="module")
def graph():
    # function-level and TYPE_CHECKING imports count too (grimp's default)
    return grimp.build_graph("predictors", "cosim", "agents")


def _modules(graph) -> list[str]:
    return sorted(m for m in graph.modules if m == "predictors" or m.startswith("predictors."))


def test_no_import_cycles_inside_predictors(graph):
    mods = _modules(graph)
    cycles = [(a, b) for a in mods for b in mods if a < b
              and graph.chain_exists(importer=a, imported=b)
              and graph.chain_exists(importer=b, imported=a)]
    assert cycles == []


def test_predictors_imports_only_the_allowed_simulator_modules(graph):
    bad = [(m, i) for m in _modules(graph) for i in graph.find_modules_directly_imported_by(m)
           if i.split(".")[0] in ("cosim", "agents")
           and i not in ALLOWED and not i.startswith("cosim.workloads.")]
    assert bad == []
