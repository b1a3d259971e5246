"""Shared fixtures: where the read-only shared material lives."""

from __future__ import annotations

import os
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
