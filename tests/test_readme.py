"""The README's code examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_block(section: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {section}")
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match, f"no python block under '{section}'"
    return match.group(1)


def test_embedding_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    code = _python_block("Embedding the model")
    scope: dict = {}
    exec(compile(code, "README.md (Embedding the model)", "exec"), scope)
    sim, log, samples = scope["sim"], scope["log"], scope["samples"]
    assert sim.finished.triggered
    assert len(log.starts) == len(sim.workload)          # every job started once
    assert samples and max(used for _, used in samples) <= sim.cluster.capacity


@pytest.mark.parametrize("section", ["Gymnasium environment"])
def test_env_example_runs(monkeypatch, section):
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(_python_block(section), f"README.md ({section})", "exec"), scope)
    assert scope["info"]["action_mask"].dtype.name == "int8"


#: Documents whose module names and paths must exist.
_DOCS = ["README.md", "docs/architecture.md", "docs/metrics.md", "docs/predictors.md",
         "docs/reproductions.md", "docs/schemas.md", "docs/tuning.md"]
#: Names that look like modules but are not: Parquet metadata keys, the Gym id.
_NOT_MODULES = {"cosim.run", "cosim.schema", "cosim.study", "predictors.md"}


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("doc", _DOCS)
def test_every_module_name_and_path_exists(doc):
    # A rename (cosim.runner -> cosim.compose, benchmarks/sweep.py ->
    # study_scaling.py) must not leave the documents naming what is gone.
    text = (ROOT / doc).read_text()
    names = set(re.findall(r"\b((?:cosim|agents|predictors)(?:\.[A-Za-z_]\w*)+)", text))
    missing = sorted(n for n in names - _NOT_MODULES if not _resolves(n))
    assert not missing, f"{doc} names what does not exist: {missing}"
    paths = set(re.findall(r"(?<![\w./])((?:benchmarks|tests|cosim|agents|predictors|examples"
                           r"|scenarios|docs)/[\w/.-]*\w)", text)) - {"cosim/Scheduling-v0"}
    gone = sorted(p for p in paths if not (ROOT / p).exists())
    assert not gone, f"{doc} names paths that do not exist: {gone}"


def test_readme_commands_write_under_out():
    # Outputs of the README's commands go under out/ (ignored), not the checkout's root.
    text = (ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))
    targets = re.findall(r"(?:--out|--json|(?<=\s)>)\s+(\S+)", blocks)
    assert targets
    bad = [t for t in targets if not t.startswith(("out/", "DIR", "FILE"))]
    assert not bad, f"README commands write outside out/: {bad}"
    assert "out/" in (ROOT / ".gitignore").read_text().split()
