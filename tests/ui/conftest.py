"""A persist folder holding two users (see inspector_data.py), one per test module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspector_data import populate

pytest.importorskip("starlette")
pytest.importorskip("jinja2")


@pytest.fixture(scope="module")
def two_users(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("inspector") / "memory_data"
    folder.mkdir()
    return folder, populate(folder)
