"""The documentation's code examples run as written, and what it names exists.

The README is the front page; the guide, reference and results pages live in
``docs/`` (the MkDocs site). Every page is checked alike: its Python
examples run, its module names and paths exist, its commands parse with the
real command-line parsers and write under ``out/``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every page a user reads: the front page and the site's pages.
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


def _python_block(page: str, heading: str = "") -> str:
    text = (ROOT / page).read_text()
    start = text.index(heading) if heading else 0
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match, f"no python block in {page} after '{heading}'"
    return match.group(1)


def test_embedding_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    code = _python_block("docs/guide/embedding.md")
    scope: dict = {}
    exec(compile(code, "docs/guide/embedding.md", "exec"), scope)
    sim, log, samples = scope["sim"], scope["log"], scope["samples"]
    assert sim.finished.triggered
    assert len(log.starts) == len(sim.workload)          # every job started once
    assert samples and max(used for _, used in samples) <= sim.cluster.capacity


def test_env_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(_python_block("docs/guide/env.md"), "docs/guide/env.md", "exec"), scope)
    assert scope["info"]["action_mask"].dtype.name == "int8"


#: Names that look like modules but are not: Parquet metadata keys, the Gym id.
_NOT_MODULES = {"cosim.run", "cosim.schema", "cosim.study"}


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


@pytest.mark.parametrize("doc", PAGES)
def test_every_module_name_and_path_exists(doc):
    # A rename (cosim.runner -> cosim.compose, benchmarks/sweep.py ->
    # study_scaling.py) must not leave the documents naming what is gone.
    text = (ROOT / doc).read_text()
    names = set(re.findall(r"(?<![\w/.-])((?:cosim|agents|predictors)(?:\.[A-Za-z_]\w*)+)", text))
    names = {n for n in names if not n.endswith((".md", ".png"))}   # links to pages
    missing = sorted(n for n in names - _NOT_MODULES if not _resolves(n))
    assert not missing, f"{doc} names what does not exist: {missing}"
    paths = set(re.findall(r"(?<![\w./])((?:benchmarks|tests|cosim|agents|predictors|examples"
                           r"|scenarios|docs)/[\w/.-]*\w)", text)) - {"cosim/Scheduling-v0"}
    gone = sorted(p for p in paths if not (ROOT / p).exists())
    assert not gone, f"{doc} names paths that do not exist: {gone}"


def _commands(text: str) -> list[str]:
    """The shell commands of a page's ``bash`` blocks, continuation lines joined."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(line)
    return found


def test_pages_show_commands():
    assert any("python -m cosim run" in c for c in _commands((ROOT / "README.md").read_text()))


@pytest.mark.parametrize("doc", PAGES)
def test_commands_write_under_out(doc):
    # Outputs of the documented commands go under out/ (ignored), not the checkout's root.
    blocks = "\n".join(_commands((ROOT / doc).read_text()))
    targets = re.findall(r"(?:--out|--json|(?<=\s)>)\s+(\S+)", blocks)
    bad = [t for t in targets if not t.startswith(("out/", "DIR", "FILE"))]
    assert not bad, f"{doc}: commands write outside out/: {bad}"
    assert "out/" in (ROOT / ".gitignore").read_text().split()


def _parsers() -> dict:
    """The real parsers by package, as the command-line reference page shows them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    return {parser.prog.split()[-1]: parser for parser in generator.parsers()}


def _module_calls(command: str) -> list[tuple[str, list[str]]]:
    """Each ``python -m PACKAGE ARGS`` of a shell line, with its arguments."""
    calls = []
    for part in re.split(r"&&|;|(?<![>|])&(?!&)|\|\|", command):
        words = shlex.split(part, comments=True)
        if words[:2] == ["python", "-m"] and len(words) > 2:
            args = words[3:]
            if ">" in args:                      # a redirection ends the arguments
                args = args[:args.index(">")]
            calls.append((words[2], args))
    return calls


@pytest.mark.parametrize("doc", PAGES)
def test_documented_commands_parse(doc, capsys):
    # Every `python -m cosim|agents|predictors ...` a page shows is accepted by
    # the real parser: no option renamed or removed under the documentation.
    parsers = _parsers()
    for command in _commands((ROOT / doc).read_text()):
        for package, args in _module_calls(command):
            if package not in parsers:
                continue
            try:
                parsers[package].parse_args(args)
            except SystemExit as stop:
                err = capsys.readouterr().err.strip().splitlines()
                pytest.fail(f"{doc}: `python -m {package} {shlex.join(args)}` is refused "
                            f"(exit {stop.code}): {err[-1] if err else ''}")


@pytest.mark.parametrize("doc", PAGES)
def test_documented_policy_names_parse(doc):
    # Every --policy NAME and --teacher/--base-policy/--paired NAME a page shows is
    # a name of the policy grammar (checkpoint folders are not checked here).
    from cosim.errors import InputError
    from cosim.policies import parse_policy

    for command in _commands((ROOT / doc).read_text()):
        for _, args in _module_calls(command):
            for flag, value in zip(args, args[1:]):
                if flag in ("--policy", "--teacher", "--base-policy", "--paired"):
                    try:
                        parse_policy(value)
                    except InputError as err:
                        pytest.fail(f"{doc}: {flag} {value}: {err}")


def test_policies_page_names_every_part_of_the_grammar():
    # A heuristic, backfilling, predictor or selector added to the grammar is
    # documented on the policies page (its tables or its grammar block).
    from cosim.policies import BACKFILLS, HEURISTICS, PREDICTORS, SELECTORS

    page = (ROOT / "docs" / "guide" / "policies.md").read_text()
    names = [*HEURISTICS, *BACKFILLS, "relaxed", "drain", *PREDICTORS, *SELECTORS, "slurm",
             "rl:", "learned:"]
    missing = [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", page)]
    assert not missing, f"docs/guide/policies.md does not name {missing}"


def test_study_files_on_the_studies_page_validate(tmp_path, capsys):
    # The study files the page shows are accepted by `python -m cosim validate`,
    # as scenarios/study-*.yaml are.
    from cosim.__main__ import main

    text = (ROOT / "docs" / "guide" / "studies.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    scenario = (ROOT / "scenarios" / "lublin256.yaml").as_posix()
    for i, block in enumerate(blocks):
        study = tmp_path / f"study-{i}.yaml"
        study.write_text(block.replace("scenario: lublin256.yaml", f"scenario: {scenario}"))
        code = main(["validate", str(study)])
        assert code == 0, f"study {i} of docs/guide/studies.md: {capsys.readouterr().err.strip()}"
    # and they are scenarios/study-lublin.yaml and study-ppo.yaml, key for key
    import yaml

    for block, name in zip(blocks, ("study-lublin.yaml", "study-ppo.yaml")):
        shown, real = yaml.safe_load(block), yaml.safe_load((ROOT / "scenarios" / name).read_text())
        assert shown == {k: real[k] for k in shown}, f"docs/guide/studies.md differs from {name}"


def test_ci_runs_the_readme_commands():
    # .ci/run is the README's install and test commands, nothing else.
    readme = "\n".join(_commands((ROOT / "README.md").read_text()))
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert steps
    for step in steps:
        assert step in readme, f".ci/run runs what the README does not show: {step}"
    for command in ("python -m pytest", "python -m pytest -m slow"):
        assert command in steps or any(s.endswith(command) for s in steps)
