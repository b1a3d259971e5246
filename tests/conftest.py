"""Shared fixtures: where the read-only shared material lives, and what the tests build once.

The default run is parallel (pytest-xdist, ``-n auto --dist loadgroup`` in
pyproject.toml). Each test module runs whole on one worker, so its module-scoped
fixtures are built once; the tests on the run's Ray share one worker (one Ray);
what several modules need (the service's trained models) is built once for the
whole run by whichever worker asks first (:func:`built_once`), under a file lock.
``-n 0`` runs everything in this process, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def shared() -> Path:
    """The ../shared folder beside the repository (skip when absent)."""
    if not SHARED.is_dir():
        pytest.skip(f"shared material not found at {SHARED}")
    return SHARED


@pytest.fixture
def lublin_trace(shared) -> Path:
    path = shared / "traces" / "lublin_256.swf"
    if not path.exists():
        pytest.skip(f"trace not found: {path}")
    return path


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray with 2 CPUs, started once for the whole test run (skip without Ray).

    Code under test finds it initialized and uses it instead of starting its own.
    """
    pytest.importorskip("ray")
    from cosim.distributed import ray_session

    # Ray's workers inherit the environment Ray starts with: put the tests
    # folder on their path, so that factories defined in test modules unpickle there.
    here = Path(__file__).resolve().parent
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent)]
                                               + ([saved] if saved else []))
    try:
        session = ray_session(num_cpus=2)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    yield session
    session.close()


# ----------------------------------------------------------------------------- parallel runs


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Put every test in an xdist group (``--dist loadgroup`` keeps a group on one worker).

    A test's own ``xdist_group`` mark wins; a test on the run's Ray joins the
    "ray" group (one Ray per run, not one per worker); any other test is grouped
    with its module, so module-scoped fixtures (trained models, simulated runs)
    are built once per run.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = "ray" if "ray_cluster" in item.fixturenames else item.path.stem
        item.add_marker(pytest.mark.xdist_group(group))


def run_folder(tmp_path_factory) -> Path:
    """A folder of this test run that all its xdist workers share.

    Each worker's base temp is ``<run>/popen-gwN``; without xdist it is the run's own.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def run_lock(tmp_path_factory, name: str) -> Iterator[None]:
    """Hold this run's lock ``name`` (an flock, released when the holder exits or dies)."""
    with open(run_folder(tmp_path_factory) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """``build(folder)`` once per test run, by the first worker to ask; the others wait and reuse it.

    ``build`` returns the path it made (a file or folder under ``folder``); a build
    that raised is retried by the next caller.
    """
    root = run_folder(tmp_path_factory)
    done = root / f"{name}.built.json"
    with run_lock(tmp_path_factory, name):
        if not done.exists():
            made = build(root / name)
            done.write_text(json.dumps(str(made)))
        return Path(json.loads(done.read_text()))


@pytest.fixture(scope="session")
def service_models(tmp_path_factory) -> Path:
    """The prediction service's trained models (600 jobs, both kinds), trained once per run."""
    from predictors.bundle import ensure_models

    return built_once(tmp_path_factory, "service-models", lambda folder: ensure_models(
        folder, jobs=600, seed=1, remaining=True, epochs=2, echo=None))


@pytest.fixture(scope="session")
def service_data(tmp_path_factory) -> Path:
    """200 generated jobs of a seed the service's models were not trained on."""
    from predictors.dataset import generate_dataset

    def build(folder: Path) -> Path:
        generate_dataset(200, 11, folder)
        return folder

    return built_once(tmp_path_factory, "service-data", build)
