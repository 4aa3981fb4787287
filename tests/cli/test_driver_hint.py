"""A record store URL whose driver is not installed gets the install command, not "unexpected
ModuleNotFoundError" (issue 17, item 12)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.cli import main


def test_postgres_without_asyncpg_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # as if asyncpg were not installed
    config = tmp_path / "memory.toml"
    config.write_text('record_store_url = "postgresql+asyncpg://lmh:secret@127.0.0.1:5432/lmh_test"\n')
    assert main(["stats", "--config", str(config), "--dir", str(tmp_path / "memory")]) == 1
    error = capsys.readouterr().err
    assert "pip install 'llama-index-memory-hierarchy[postgres]'" in error and "asyncpg" in error
    assert "unexpected" not in error and "secret" not in error
