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
