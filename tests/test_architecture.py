"""The layering of docs/architecture.md holds, and its checks can fail.

- The import-linter contracts in ``pyproject.toml`` pass (``lint-imports``),
  and fail, naming the contract, when a wrong import is added to a copy of
  the code.
- No import cycle among the modules of ``cosim``, ``agents`` and
  ``predictors`` taken together, counting imports inside functions and under
  ``if TYPE_CHECKING:`` (grimp's graph); the check finds the cycle the
  learners once had with the runner.
- Every module of ``cosim`` is either on the model side (forbidden to import
  ``agents`` and ``predictors``) or one of the named composition modules.
- ``predictors`` imports from ``cosim`` only what an allow-list names, and
  the contract's deny-list is exactly the rest.
- No source file grows past 700 lines without being split by job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cosim", "predictors", "agents")
#: The only cosim modules that may wire in predictors and agents.
COMPOSITION = {"cosim.__main__", "cosim.compose", "cosim.studies"}
#: The only parts of cosim that predictors may import.
PREDICTORS_MAY_IMPORT = {"cosim.errors", "cosim.cli", "cosim.workloads", "cosim.metrics",
                         "cosim.measures", "cosim.config"}


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env)


def _copy_tree(dest: Path) -> Path:
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_import_contracts_hold():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize("module,line,contract", [
    ("cosim/model.py", "import agents.ppo", "model side of cosim"),
    ("cosim/env/rewards.py", "from predictors import history", "model side of cosim"),
    ("predictors/bundle.py", "import agents.checkpoint", "predictors never imports"),
    ("cosim/queue.py", "import cosim.actors.scheduler", "Layers inside cosim"),
    # The learners never import the front.
    ("agents/ppo.py", "from cosim.compose import run_policy", "agents holds learners"),
    ("agents/rl_policy.py", "import cosim.studies", "agents holds learners"),
    # actors and policies are siblings: the scheduler never imports a heuristic.
    ("cosim/actors/scheduler.py", "from cosim.policies import heuristics", "Layers inside cosim"),
    ("cosim/policies/heuristics.py", "import cosim.actors.nodes", "Layers inside cosim"),
    # A type-checking import counts (the policy seam once typed by the concrete Cluster).
    ("cosim/decisions.py", "from typing import TYPE_CHECKING as _TC\nif _TC:\n"
     "    from cosim.actors.nodes import Cluster", "Layers inside cosim"),
    # predictors' allow-list: distributed is not on it.
    ("predictors/bundle.py", "import cosim.distributed", "predictors never imports"),
])
def test_a_wrong_import_breaks_a_contract(tmp_path, module, line, contract):
    tree = _copy_tree(tmp_path)
    path = tree / module
    text = path.read_text()
    # After the module docstring and __future__ import, so it is a real import.
    anchor = "from __future__ import annotations\n"
    assert anchor in text
    path.write_text(text.replace(anchor, anchor + line + "\n", 1))
    proc = _lint(tree)
    assert proc.returncode != 0, proc.stdout[-2000:]
    broken = proc.stdout[proc.stdout.index("Contracts"):]
    assert contract in broken and "BROKEN" in broken, broken[-2000:]


def _edges(graph: grimp.ImportGraph, *packages: str) -> dict[str, list[str]]:
    """Direct imports among the modules of ``packages``."""
    modules = sorted(m for m in graph.modules
                     if any(m == p or m.startswith(p + ".") for p in packages))
    return {m: sorted(d for d in graph.find_modules_directly_imported_by(m) if d in modules)
            for m in modules}


def cycles(graph: grimp.ImportGraph | dict[str, list[str]], *packages: str) -> list[list[str]]:
    """Every module-level import cycle among ``packages`` (one cycle per strongly connected set)."""
    edges = graph if isinstance(graph, dict) else _edges(graph, *packages)
    modules = sorted(edges)
    # Tarjan's strongly connected components; any component of two or more
    # modules (or a module importing itself) is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges[v]:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for m in modules:
        if m not in index:
            visit(m)
    return found


def _graph(*packages: str, path: Path | None = None) -> grimp.ImportGraph:
    if path is not None:
        sys.path.insert(0, str(path))
    try:
        return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)
    finally:
        if path is not None:
            sys.path.remove(str(path))


def test_no_import_cycles_across_the_three_packages():
    graph = _graph(*PACKAGES)
    assert cycles(graph, *PACKAGES) == []


def test_the_cycle_check_sees_a_learner_importing_the_front(tmp_path):
    # The cycle issue 19 found: agents.rl_policy imported the runner, which imports it back.
    tree = _copy_tree(tmp_path)
    path = tree / "agents" / "rl_policy.py"
    anchor = "from __future__ import annotations\n"
    path.write_text(path.read_text().replace(anchor, anchor + "from cosim.compose import policies\n", 1))
    # A fresh interpreter, so the graph is the copy's (this process has imported the real cosim).
    code = ("import json, sys, grimp; sys.path.insert(0, sys.argv[1]); from test_architecture "
            "import _edges, PACKAGES; print(json.dumps(_edges(grimp.build_graph(*PACKAGES, "
            "exclude_type_checking_imports=False, cache_dir=None), *PACKAGES)))")
    proc = subprocess.run([sys.executable, "-c", code, str(tree)], capture_output=True, text=True,
                          cwd=tree, env={"PYTHONPATH": f"{tree}:{ROOT / 'tests'}",
                                         "PATH": "/usr/bin:/bin"}, check=True)
    found = cycles(json.loads(proc.stdout), *PACKAGES)
    assert ["agents.rl_policy", "cosim.compose.policies"] in found, found


def test_the_cycle_check_finds_a_cycle(tmp_path):
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyclepkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from cyclepkg import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from cyclepkg import a\n")
    (pkg / "d.py").write_text("from cyclepkg import a\n")
    assert cycles(_graph("cyclepkg", path=tmp_path), "cyclepkg") == [
        ["cyclepkg.a", "cyclepkg.b", "cyclepkg.c"]]


def test_every_cosim_module_is_on_a_side():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    model_side = next(c for c in config["contracts"] if c["id"] == "model-side")
    children = {m for m in _graph(*PACKAGES).find_children("cosim")}
    placed = set(model_side["source_modules"]) | COMPOSITION
    assert children <= placed, f"not placed: {sorted(children - placed)}"
    assert not set(model_side["source_modules"]) & COMPOSITION


def test_predictors_imports_from_cosim_only_its_allow_list():
    graph = _graph(*PACKAGES)
    used = {d for m in graph.find_children("predictors") | graph.find_descendants("predictors")
            for d in graph.find_modules_directly_imported_by(m) if d.startswith("cosim.")}
    top = {".".join(d.split(".")[:2]) for d in used}
    assert top <= PREDICTORS_MAY_IMPORT, sorted(top - PREDICTORS_MAY_IMPORT)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    alone = next(c for c in config["contracts"] if c["id"] == "predictors-alone")
    children = set(graph.find_children("cosim"))
    assert set(alone["forbidden_modules"]) == {"agents"} | (children - PREDICTORS_MAY_IMPORT)


#: A module past this many lines does several jobs: split it (DESIGN.md, "Layout").
MAX_LINES = 700


def _long_files(root: Path) -> list[str]:
    return sorted(f"{p.relative_to(root)} ({n} lines)"
                  for folder in (*PACKAGES, "benchmarks", "examples")
                  for p in (root / folder).rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)


def test_no_source_file_is_over_700_lines():
    assert not _long_files(ROOT), f"split these by job: {_long_files(ROOT)}"


def test_the_length_check_sees_a_long_file(tmp_path):
    for folder in (*PACKAGES, "benchmarks", "examples"):
        (tmp_path / folder).mkdir()
    (tmp_path / "agents" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "cosim" / "fine.py").write_text("x = 1\n" * MAX_LINES)
    assert _long_files(tmp_path) == [f"agents/big.py ({MAX_LINES + 1} lines)"]
