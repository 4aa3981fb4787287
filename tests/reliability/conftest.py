"""Fixtures of the reliability tests: one real embedding model per session, and store checks
written independently of the package's own verifier (the tests must not trust the code under test)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The bundled all-MiniLM-L6-v2, loaded once for the session (contexts are keyed by the instance)."""
    from store_checks import minilm as shared

    return shared()
