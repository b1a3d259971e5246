"""Shared fixtures: where the read-only shared material lives."""

from __future__ import annotations

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
