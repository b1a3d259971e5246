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
- No source file grows past 700 lines, and no function or method of the
  packages past 150, without being split by job.
- One interval method (``cosim/paired.py``) and one evaluation protocol
  (``cosim.evaluation.Protocol``): no package module assembles its own.
- bsld and wait are computed only by :mod:`cosim.metrics` (no copy of either
  formula elsewhere; ``tests/test_metrics_producers.py`` compares the producers).
- A learner is chosen by name only through :mod:`agents.registry`: no list of
  learner names, no learner module imported by a name or under a branch on one.
- Benchmarks score their windows through the protocol: none calls the runner
  (``run_policy``) itself but those :data:`RUNNER_CALLS` names, each with why.
- Benchmarks are experiment definitions on the public API: none edits
  ``sys.path``, uses a private name of the packages (or of any module it
  imports), assigns into an imported module (monkeypatching), or imports
  another benchmark (shared code lives in the packages); no test loads a
  benchmark file as a module (tests call the packages, or run a script as a
  command).
"""

from __future__ import annotations

import ast
import json
import re
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
                         "cosim.measures", "cosim.config", "cosim.limits"}


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
    # the runner imports the package agents, whose rl: loader (agents.acting) imports rl_policy
    assert any({"agents.rl_policy", "cosim.compose.policies"} <= set(c) for c in found), found


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


#: A function past this many lines does several jobs: split it into helpers.
MAX_FUNCTION_LINES = 150


def _long_functions(root: Path) -> list[str]:
    """``path:line qualified.name (N lines)`` for each function of the packages past the limit."""
    found = []

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
                n = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and n > MAX_FUNCTION_LINES:
                    found.append(f"{path}:{child.lineno} {name[:-1]} ({n} lines)")
            visit(child, path, name)

    for folder in PACKAGES:
        for p in sorted((root / folder).rglob("*.py")):
            visit(ast.parse(p.read_text()), str(p.relative_to(root)), "")
    return found


def test_no_function_is_over_150_lines():
    assert not _long_functions(ROOT), f"split these by job: {_long_functions(ROOT)}"


def test_the_length_check_sees_a_long_function(tmp_path):
    for folder in PACKAGES:
        (tmp_path / folder).mkdir()
    method = "        x = 1\n" * (MAX_FUNCTION_LINES - 1)
    (tmp_path / "agents" / "big.py").write_text(
        f"class A:\n    def ok(self):\n{method}    def big(self):\n{method}        x = 2\n")
    (tmp_path / "cosim" / "fine.py").write_text("async def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    assert _long_functions(tmp_path) == [f"agents/big.py:{MAX_FUNCTION_LINES + 2} A.big "
                                         f"({MAX_FUNCTION_LINES + 1} lines)"]


#: The one module that computes confidence intervals (issue: three methods once
#: gave the tables, the studies and the tuner different intervals).
INTERVALS = "cosim/paired.py"
#: Where intervals come from when written by hand: scipy's bootstrap and its
#: normal/t quantiles; a resampling loop that takes quantiles of its draws.
_INTERVAL_IMPORTS = {"bootstrap", "norm", "t", "sem", "ttest_rel", "wilcoxon", "bootstrap_ci"}
_QUANTILES = {"quantile", "nanquantile", "percentile", "nanpercentile"}
_DRAWS = {"integers", "choice", "randint"}


def _interval_implementations(root: Path) -> list[str]:
    """Places outside :data:`INTERVALS` that compute an interval themselves."""
    import ast

    found = []
    for folder in (*PACKAGES, "benchmarks", "examples"):
        for path in sorted((root / folder).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel == INTERVALS:
                continue
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scipy.stats")
                        and {a.name for a in node.names} & _INTERVAL_IMPORTS):
                    found.append(f"{rel}:{node.lineno} imports from {node.module}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("scipy.stats")
                                                          for a in node.names):
                    found.append(f"{rel}:{node.lineno} imports scipy.stats")
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    called = {c.func.attr for c in ast.walk(node)
                              if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
                    looped = any(isinstance(c, ast.For | ast.While | ast.comprehension)
                                 for c in ast.walk(node))
                    if called & _QUANTILES and called & _DRAWS and looped:
                        found.append(f"{rel}:{node.lineno} {node.name}() resamples and takes "
                                     "quantiles (a bootstrap)")
    return found


def test_one_interval_method():
    assert not _interval_implementations(ROOT), (
        f"intervals come from {INTERVALS} (mean_interval, bootstrap_interval): "
        f"{_interval_implementations(ROOT)}")


def test_the_interval_check_sees_a_second_method(tmp_path):
    for folder in (*PACKAGES, "benchmarks", "examples"):
        (tmp_path / folder).mkdir()
    (tmp_path / "cosim" / "paired.py").write_text("from scipy.stats import bootstrap\n")
    (tmp_path / "agents" / "recipe.py").write_text(
        "def ci(values):\n    from scipy.stats import bootstrap\n    return bootstrap\n")
    (tmp_path / "benchmarks" / "table.py").write_text(
        "import numpy as np\n\ndef band(x, rng):\n"
        "    means = [x[rng.integers(0, len(x), len(x))].mean() for _ in range(999)]\n"
        "    return np.quantile(means, [0.025, 0.975])\n")
    (tmp_path / "cosim" / "metrics.py").write_text(
        "import numpy as np\n\ndef p99(w):\n    return np.percentile(w, 99)\n")
    assert _interval_implementations(tmp_path) == [
        "agents/recipe.py:2 imports from scipy.stats",
        "benchmarks/table.py:3 band() resamples and takes quantiles (a bootstrap)"]


#: The one evaluation protocol: cosim.evaluation.Protocol (over cosim.splits' spans).
PROTOCOL_HOMES = {"cosim/evaluation.py", "cosim/splits.py"}
#: What only the protocol does: cut the spans, seal the test windows, read them.
_PROTOCOL_PARTS = {"chronological_split", "seeded_split", "SealedWindows"}


def _protocols_elsewhere(root: Path, folders=PACKAGES) -> list[str]:
    """Package modules that assemble a protocol of their own from its parts."""
    import ast

    found = []
    for rel, node, name in _calls(root, folders, skip=PROTOCOL_HOMES):
        f = node.func
        test_read = (name == "read" and isinstance(f, ast.Attribute)
                     and isinstance(f.value, ast.Attribute) and f.value.attr == "test")
        if name in _PROTOCOL_PARTS or test_read:
            found.append(f"{rel}:{node.lineno} {name}()")
    return found


def _calls(root: Path, folders, skip=()):
    """``(file, call node, called name)`` of every call in the folders' modules."""
    import ast

    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel in skip:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    f = node.func
                    yield rel, node, (f.id if isinstance(f, ast.Name) else f.attr
                                      if isinstance(f, ast.Attribute) else "")


def test_one_evaluation_protocol():
    assert not _protocols_elsewhere(ROOT), (
        "split, seal and read the test span through cosim.evaluation.Protocol: "
        f"{_protocols_elsewhere(ROOT)}")


def test_the_protocol_check_sees_a_second_protocol(tmp_path):
    for folder in PACKAGES:
        (tmp_path / folder).mkdir()
    (tmp_path / "cosim" / "splits.py").write_text("def chronological_split(w): ...\n")
    (tmp_path / "agents" / "tune.py").write_text(
        "from cosim.evaluation import chronological_split\n\ndef tune(w):\n"
        "    sp = chronological_split(w)\n    return sp.test.read()\n")
    (tmp_path / "agents" / "fine.py").write_text(
        "def run(p, s):\n    return p.test(s)\n")
    assert _protocols_elsewhere(tmp_path) == ["agents/tune.py:4 chronological_split()",
                                              "agents/tune.py:5 read()"]


#: The one engine for many simulations (local worker processes or Ray tasks).
ENGINE_MODULE = "cosim/engine.py"
#: Constructing a pool of workers, or waiting on Ray tasks as they finish: what only it does.
_POOLS = {"ProcessPoolExecutor", "Pool", "ThreadPoolExecutor"}


def _engines_elsewhere(root: Path, folders=("cosim", "agents")) -> list[str]:
    """Package modules that build a pool of workers (or map over Ray tasks) of their own.

    A vector env's worker processes (``cosim/vector.py``: a Process and a Pipe per
    shard, Gymnasium's async vector env) are environments that step together, not
    simulations mapped to results, and build no pool.
    """
    import ast

    found = []
    for rel, node, name in _calls(root, folders, skip={ENGINE_MODULE}):
        f = node.func
        if name in _POOLS or (name == "wait" and isinstance(f, ast.Attribute)
                              and isinstance(f.value, ast.Name) and f.value.id == "ray"):
            found.append(f"{rel}:{node.lineno} {name}()")
    return found


def test_one_engine_for_many_simulations():
    assert not _engines_elsewhere(ROOT), (
        f"run many simulations through cosim.engine.Engine: {_engines_elsewhere(ROOT)}")


def test_the_engine_check_sees_a_second_engine(tmp_path):
    for folder in ("cosim", "agents"):
        (tmp_path / folder).mkdir()
    (tmp_path / "cosim" / "engine.py").write_text(
        "from concurrent.futures import ProcessPoolExecutor\npool = ProcessPoolExecutor(2)\n")
    (tmp_path / "agents" / "sweep.py").write_text(
        "import multiprocessing as mp\nimport ray\n\ndef run(f, xs, refs):\n"
        "    ray.wait(refs)\n    with mp.Pool(2) as p:\n        return p.map(f, xs)\n")
    assert _engines_elsewhere(tmp_path) == ["agents/sweep.py:5 wait()", "agents/sweep.py:6 Pool()"]


#: ``agents evaluate``: its command, the library function it calls, and what that must use.
EVALUATE = (Path("agents") / "__main__.py", "_evaluate", "evaluate_episodes")
EVALUATE_LIBRARY = (Path("agents") / "evaluation.py", "evaluate_episodes")
#: What evaluating on its own (beside the protocol) would call.
_BESIDE_PROTOCOL = {"run_policy", "compare_each", "compare", "bootstrap_interval",
                    "mean_interval", "summarize"}


def _evaluate_faults(root: Path) -> list[str]:
    """Where ``agents evaluate`` does not go through cosim.evaluation.Protocol."""
    import ast

    def function(path: Path, name: str):
        tree = ast.parse((root / path).read_text())
        return next((n for n in ast.walk(tree)
                     if isinstance(n, ast.FunctionDef) and n.name == name), None)

    def called(fn) -> set[str]:
        return {c.func.id if isinstance(c.func, ast.Name) else c.func.attr
                for c in ast.walk(fn) if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Name | ast.Attribute)}

    faults = []
    command = function(EVALUATE[0], EVALUATE[1])
    if command is None or EVALUATE[2] not in called(command):
        faults.append(f"{EVALUATE[0]}: {EVALUATE[1]}() does not call {EVALUATE[2]}()")
    elif called(command) & _BESIDE_PROTOCOL:
        faults.append(f"{EVALUATE[0]}: {EVALUATE[1]}() calls "
                      f"{', '.join(sorted(called(command) & _BESIDE_PROTOCOL))}")
    library = function(*EVALUATE_LIBRARY)
    if library is None:
        faults.append(f"{EVALUATE_LIBRARY[0]}: no {EVALUATE_LIBRARY[1]}()")
        return faults
    uses = called(library)
    if "given" not in uses and not uses & {"chronological", "seeded"} or "test" not in uses:
        faults.append(f"{EVALUATE_LIBRARY[0]}: {EVALUATE_LIBRARY[1]}() builds no Protocol "
                      "or does not score through Protocol.test")
    if uses & _BESIDE_PROTOCOL - {"compare"}:
        faults.append(f"{EVALUATE_LIBRARY[0]}: {EVALUATE_LIBRARY[1]}() calls "
                      f"{', '.join(sorted(uses & _BESIDE_PROTOCOL - {'compare'}))}")
    return faults


def test_agents_evaluate_goes_through_the_protocol():
    assert not _evaluate_faults(ROOT), _evaluate_faults(ROOT)


def test_the_evaluate_check_sees_an_evaluation_beside_the_protocol(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "__main__.py").write_text(
        "def _evaluate(ns):\n    rows = evaluate_episodes(ns)\n    return compare_each(rows)\n")
    (tmp_path / "agents" / "evaluation.py").write_text(
        "def evaluate_episodes(p):\n    return run_policy(p)\n")
    assert _evaluate_faults(tmp_path) == [
        "agents/__main__.py: _evaluate() calls compare_each",
        "agents/evaluation.py: evaluate_episodes() builds no Protocol or does not score through "
        "Protocol.test",
        "agents/evaluation.py: evaluate_episodes() calls run_policy"]


#: A copy of a metric's formula: bounded slowdown ``max(1, ... / max(tau, ...))``,
#: and a wait ``start - submit`` (the one definition also subtracts the killed seconds).
FORMULAS = {
    "bsld": re.compile(r"(max|maximum)\(\s*1(\.0)?\s*,[^\n]*/\s*(np\.)?max(imum)?\("),
    "wait": re.compile(r"\bstart\b[\"'\]]*\s*-\s*[\w.\[\"']*\bsubmit\b"),
}
#: The one place the formulas are written (cosim.metrics).
METRICS_MODULE = Path("cosim") / "metrics.py"


def _formula_copies(root: Path) -> list[str]:
    return sorted(f"{p.relative_to(root)}:{i}: {name}: {line.strip()}"
                  for folder in (*PACKAGES, "benchmarks", "examples")
                  for p in (root / folder).rglob("*.py")
                  if p.relative_to(root) != METRICS_MODULE
                  for i, line in enumerate(p.read_text().splitlines(), 1)
                  for name, pattern in FORMULAS.items() if pattern.search(line))


def test_bsld_and_wait_are_computed_only_in_cosim_metrics():
    assert not _formula_copies(ROOT), (
        f"call cosim.metrics.bsld / cosim.metrics.wait instead: {_formula_copies(ROOT)}")


def test_the_formula_check_sees_a_copy(tmp_path):
    for folder in (*PACKAGES, "benchmarks", "examples"):
        (tmp_path / folder).mkdir()
    (tmp_path / "cosim" / "metrics.py").write_text(
        "b = np.maximum(1.0, response / np.maximum(tau, run))\n")
    (tmp_path / "agents" / "a.py").write_text(
        "x = max(1.0, (j.end - j.submit) / max(tau, j.end - j.start))\n")
    (tmp_path / "benchmarks" / "b.py").write_text("w = [j.start - j.submit for j in jobs]\n")
    (tmp_path / "cosim" / "c.py").write_text('w = c["start"] - c["submit"]\nq = now - j.submit\n')
    assert [line.split(": ")[0:2] for line in _formula_copies(tmp_path)] == [
        ["agents/a.py:1", "bsld"], ["benchmarks/b.py:1", "wait"], ["cosim/c.py:1", "wait"]]


#: The learners' names (agents.registry.LEARNERS), as a source pattern.
_LEARNER = r"[\"'](?:ppo|a2c|pg|dql)[\"']"
#: Choosing a learner by name elsewhere than the registry: a list of learner names
#: (in the packages; a benchmark may name the learners its experiment compares), a
#: learner module imported by a computed name, or imported under a branch on a name.
CHOICES = {
    "a list of learner names": re.compile(rf"{_LEARNER}\s*,\s*{_LEARNER}"),
    "a learner module by a computed name": re.compile(r"import_module\(\s*f[\"']agents\."),
}
_LEARNER_IMPORT = re.compile(r"^\s+from agents\.(?:ppo|a2c|pg|dql) import ")
_BRANCH = re.compile(r"^\s*(?:if|elif|else)\b")
REGISTRY_MODULE = Path("agents") / "registry.py"


def _learner_choices(root: Path) -> list[str]:
    found = []
    for folder in (*PACKAGES, "benchmarks"):
        for p in sorted((root / folder).rglob("*.py")):
            rel = p.relative_to(root)
            if rel == REGISTRY_MODULE:
                continue
            previous = ""
            for i, line in enumerate(p.read_text().splitlines(), 1):
                if line.lstrip().startswith((">>>", "...", "#")):
                    continue
                for what, pattern in CHOICES.items():
                    if pattern.search(line) and (folder != "benchmarks"
                                                 or what != "a list of learner names"):
                        found.append(f"{rel}:{i}: {what}")
                if _LEARNER_IMPORT.match(line) and _BRANCH.match(previous):
                    found.append(f"{rel}:{i}: a learner imported under a branch")
                if line.strip():
                    previous = line
    return sorted(found)


def test_learners_are_chosen_by_name_only_through_the_registry():
    assert not _learner_choices(ROOT), (
        f"use agents.registry.learner(name): {_learner_choices(ROOT)}")


def test_the_registry_check_sees_a_choice_by_name(tmp_path):
    for folder in (*PACKAGES, "benchmarks"):
        (tmp_path / folder).mkdir()
    (tmp_path / "agents" / "registry.py").write_text('NAMES = ("ppo", "a2c")\n')
    (tmp_path / "agents" / "cli.py").write_text('ALGOS = ("ppo", "a2c", "pg", "dql")\n')
    (tmp_path / "cosim" / "study.py").write_text(
        'def args_class(algo):\n    if algo == "a2c":\n        from agents.a2c import A2CArgs\n'
        '        return A2CArgs\n    from agents.ppo import Args\n    return Args\n')
    (tmp_path / "benchmarks" / "b.py").write_text(
        'LEARNERS = ("ppo", "dql")\nm = importlib.import_module(f"agents.{name}")\n')
    assert _learner_choices(tmp_path) == [
        "agents/cli.py:1: a list of learner names", "benchmarks/b.py:2: a learner module by "
        "a computed name", "cosim/study.py:3: a learner imported under a branch"]


def _benchmark_faults(root: Path) -> list[str]:
    import ast

    scripts = {p.stem for p in (root / "benchmarks").glob("*.py")}
    found = []
    for path in sorted((root / "benchmarks").glob("*.py")):
        rel = path.relative_to(root)
        tree = ast.parse(path.read_text())
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                imported |= {a.asname or a.name for a in node.names}
                mods = [node.module or ""]
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private:
                    found.append(f"{rel}:{node.lineno} imports the private {', '.join(private)}")
            else:
                continue
            for mod in mods:
                if any(part.startswith("_") and part != "__future__" for part in mod.split(".")):
                    found.append(f"{rel}:{node.lineno} imports the private module {mod}")
                top = mod.split(".")[0]
                if top in scripts or top == "benchmarks":
                    found.append(f"{rel}:{node.lineno} imports the benchmark {mod}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "sys" and node.attr == "path"):
                found.append(f"{rel}:{node.lineno} edits sys.path")
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in imported and node.attr.startswith("_")
                  and not node.attr.startswith("__")):
                found.append(f"{rel}:{node.lineno} uses the private {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id in imported):
                        found.append(f"{rel}:{node.lineno} assigns {t.value.id}.{t.attr} "
                                     "(monkeypatching)")
    return sorted(set(found), key=lambda f: (f.split(":")[0], int(f.split(":")[1].split()[0]), f))


def test_benchmarks_are_experiments_on_the_public_api():
    assert not _benchmark_faults(ROOT), _benchmark_faults(ROOT)


def test_the_benchmark_check_sees_each_fault(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "helper.py").write_text("X = 1\n")
    (tmp_path / "benchmarks" / "bad.py").write_text(
        "import sys\nfrom cosim import evaluation\nfrom cosim.metrics import _mean\n"
        "from helper import X\nsys.path.insert(0, '.')\n"
        "evaluation._simulate = None\ny = evaluation._summary\n")
    (tmp_path / "benchmarks" / "good.py").write_text(
        "from cosim import metrics\n\nclass A:\n    def f(self):\n        self._x = 1\n"
        "        return metrics.bsld([2.0], [1.0], 10.0)\n")
    got = _benchmark_faults(tmp_path)
    assert got == ["benchmarks/bad.py:3 imports the private _mean",
                   "benchmarks/bad.py:4 imports the benchmark helper",
                   "benchmarks/bad.py:5 edits sys.path",
                   "benchmarks/bad.py:6 assigns evaluation._simulate (monkeypatching)",
                   "benchmarks/bad.py:6 uses the private evaluation._simulate",
                   "benchmarks/bad.py:7 uses the private evaluation._summary"], got


#: How a test would load a benchmark file as a module instead of running it.
_LOADS = re.compile(r"spec_from_file_location|module_from_spec|SourceFileLoader|run_path"
                    r"|sys\.path\.(insert|append)|import_module")


def _tests_loading_benchmarks(root: Path) -> list[str]:
    """Test lines that load a script of benchmarks/ as a module (or put it on sys.path);
    the loader call and the benchmarks/ path it is given may be up to two lines apart."""
    own = Path(__file__).name          # this file holds the checks' own fixtures
    return [f"{path.relative_to(root)}:{i + 1}"
            for path in sorted((root / "tests").glob("*.py")) if path.name != own
            for lines in [path.read_text().splitlines()]
            for i, line in enumerate(lines)
            if _LOADS.search(line) and "benchmarks" in " ".join(lines[i:i + 3])]


def test_no_test_loads_a_benchmark_file():
    loading = _tests_loading_benchmarks(ROOT)
    assert loading == [], f"call the package the benchmark calls, or run the script: {loading}"


def test_the_test_check_sees_each_way_of_loading_a_benchmark(tmp_path):
    files = {
        "test_bad.py": "import importlib.util, sys\n"
                       "spec = importlib.util.spec_from_file_location(\n"
                       "    'x', ROOT / 'benchmarks' / 'x.py')\n"
                       "sys.path.insert(0, str(ROOT / 'benchmarks'))\n",
        # running a script is how a test exercises it; other folders on sys.path are not ours
        "test_good.py": "import subprocess, sys\n"
                        "subprocess.run([sys.executable, 'benchmarks/x.py', '--help'])\n"
                        "sys.path.insert(0, str(ROOT / 'tests'))\n",
    }
    (tmp_path / "tests").mkdir()
    for name, text in files.items():
        (tmp_path / "tests" / name).write_text(text)
    assert _tests_loading_benchmarks(tmp_path) == ["tests/test_bad.py:2", "tests/test_bad.py:4"]


#: Benchmarks that call the runner (``run_policy``) themselves, and why the protocol
#: (:class:`cosim.evaluation.Protocol`) does not do it for them: every other benchmark
#: scores its windows through the protocol, which runs on the requested times.
RUNNER_CALLS = {
    "rl_replay.py": "measures the engine: wall and CPU time of one rl:DIR replay of a trace",
    "study_scaling.py": "measures the engine: runs in one process against the same runs as "
                        "a study",
    "rlschert.py": "scores whole scenarios with run-time predictions and kills (@rnn, +kill, "
                   "+kill=DIR), which the protocol does not run",
    "trace_scheduling.py": "replays whole traces with trace-model predictions and reads each "
                           "run's job table",
}


def _runner_calls(root: Path) -> list[str]:
    """``benchmarks/X.py:LINE`` of each call of ``run_policy`` (by name or as an attribute)
    outside :data:`RUNNER_CALLS`, and ``X.py listed`` for an exception that no longer calls it."""
    found, calling = [], set()
    for path in sorted((root / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name == "run_policy":
                    calling.add(path.name)
                    if path.name not in RUNNER_CALLS:
                        found.append(f"benchmarks/{path.name}:{node.lineno}")
    found.sort(key=lambda f: (f.split(":")[0], int(f.split(":")[1])))
    return found + [f"{name} listed" for name in sorted(set(RUNNER_CALLS) - calling)
                    if (root / "benchmarks" / name).exists()]


def test_benchmarks_score_through_the_protocol():
    assert _runner_calls(ROOT) == [], (
        "score windows with cosim.evaluation.Protocol (held-out windows: "
        f"agents.reproductions.held_out_scores), or say why in RUNNER_CALLS: {_runner_calls(ROOT)}")


def test_the_protocol_check_sees_a_benchmark_loop(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "loop.py").write_text(
        "from cosim.compose import run_policy\nimport cosim.compose as c\n"
        "rows = [run_policy(sc, 'sjf+easy', None, workload=w) for w in test]\n"
        "row = c.run_policy(sc, 'rl:DIR', None)\n")
    (tmp_path / "benchmarks" / "rl_replay.py").write_text("x = 1\n")   # listed, no call
    (tmp_path / "benchmarks" / "good.py").write_text(
        "from agents.reproductions import held_out_scores\n"
        "_, scores = held_out_scores(sc, test, ['sjf+easy'])\n")
    assert _runner_calls(tmp_path) == ["benchmarks/loop.py:3", "benchmarks/loop.py:4",
                                       "rl_replay.py listed"]
