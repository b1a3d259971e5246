"""The documentation site builds with warnings as errors, with its generated pages.

The site is MkDocs (``mkdocs.yml`` at the root, pages in ``docs/``);
``mkdocs``, ``mkdocs-material`` and ``mkdocstrings`` come with the ``dev``
extra. The command-line and scenario reference pages are made at build time
by the hook ``docs/gen_reference.py`` from the parsers and from
:mod:`cosim.config`, so they cannot fall behind the code.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Pages a user reads; the history belongs in CHANGELOG.md only.
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_shows_every_subcommand():
    page = _generator().cli_page()
    for command in ("cosim run", "cosim sweep", "cosim convert", "agents train", "agents tune",
                    "agents evaluate", "predictors train", "predictors serve"):
        assert f"## `python -m {command}`" in page, command
    assert "--window-jobs" in page and "--max-body-mb" in page   # options, not only usage


def test_metric_keys_page_lists_every_definition():
    from cosim.metrics import METRIC_DEFINITIONS

    page = _generator().metrics_page()
    for key in METRIC_DEFINITIONS:
        assert f"| `{key}` |" in page, key


def test_scenario_reference_lists_every_key():
    from cosim.config import Scenario

    page = _generator().scenario_page()
    for section, field in Scenario.model_fields.items():
        assert f"| `{section}` |" in page
        model = field.annotation
        for key in getattr(model, "model_fields", {}):
            assert f"| `{section}.{key}` |" in page, f"{section}.{key}"


def test_user_pages_hold_no_lab_diary():
    # "stop N" (a work session) and issue numbers are history: CHANGELOG.md.
    for page in USER_PAGES:
        text = page.read_text(encoding="utf-8")
        found = re.findall(r"\b[Ss]tops? [0-9]+\b|\b[Ii]ssues? #?[0-9]+\b", text)
        assert not found, f"{page.relative_to(ROOT)}: {found}"


def test_every_page_is_in_the_nav():
    import yaml

    class _Loader(yaml.SafeLoader):
        pass
    # mkdocs.yml names a Python function for the mermaid fence; no need to import it here
    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)

    def pages(nav):
        for item in nav:
            for value in (item.values() if isinstance(item, dict) else [item]):
                yield from (pages(value) if isinstance(value, list) else [value])
    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    on_disk |= {f"reference/{name}" for name in _generator().PAGES}     # made at build time
    assert not listed - on_disk, f"the nav names missing pages: {sorted(listed - on_disk)}"


@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[dev]')")
def test_site_builds_strictly(tmp_path):
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[dev]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "guide" / "run" / "index.html").exists()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "load_scenario" in api          # the API page is made from the docstrings
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "python -m agents tune" in cli  # the generated pages are part of the site


def test_pages_are_not_ignored_by_git():
    # A page git ignores is lost on the next clone (results/ once hid docs/results/).
    made = {f"docs/reference/{name}" for name in _generator().PAGES}
    pages = [str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")]
    probes = [*pages, "docs/reference/limits.md", "docs/results/new.md", "docs/guide/new.md"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *probes], cwd=ROOT,
                          capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        pytest.skip(f"git check-ignore failed: {proc.stderr.strip()}")
    ignored = set(proc.stdout.split()) - made
    assert not ignored, f"git ignores these pages: {sorted(ignored)}"
