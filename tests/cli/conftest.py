"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import Result, run_lmh


@pytest.fixture
def lmh() -> Callable[..., Result]:
    return run_lmh


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A memory folder for one test (created by the first command that writes)."""
    return tmp_path / "memory"
