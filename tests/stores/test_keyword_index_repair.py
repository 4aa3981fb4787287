"""A damaged keyword index is named as such, with the command that repairs it, and ``lmh reindex``
repairs it, even when SQLite can no longer construct the FTS5 table (issue 17, item 12)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.cli import main
from llama_index_memory_hierarchy.errors import StoreError

DAMAGE = {
    "garbled blocks": "UPDATE memories_fts_data SET block = randomblob(length(block)) WHERE id > 10",
    "lost structure": "DELETE FROM memories_fts_data WHERE id > 1",
}


def _open(folder: Path) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id="kim", session_id="s1", persist_dir=str(folder), embed_model="hashing"
    )


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_keyword_index_says_reindex_and_reindex_repairs_it(
    persist_dir: Path, damage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = _open(persist_dir)
    memory.episodic.add_many([f"note {i}: the tomatoes in the garden need water" for i in range(20)])
    memory.close()
    with sqlite3.connect(persist_dir / "memory.db") as db:
        db.execute(DAMAGE[damage])
    memory = _open(persist_dir)
    try:
        with pytest.raises(StoreError) as failed:
            memory.episodic.retrieve("tomatoes garden")
    finally:
        memory.close()
    message = str(failed.value)
    assert "keyword index is damaged" in message and f"lmh reindex --dir {persist_dir}" in message
    assert "corrupt" not in message

    monkeypatch.setenv("LMH_EMBED_MODEL", "hashing")
    assert main(["reindex", "--dir", str(persist_dir)]) == 0, capsys.readouterr().err
    memory = _open(persist_dir)
    try:
        assert len(memory.episodic.retrieve("tomatoes garden", limit=50)) == 20
        memory.episodic.add("the garden hose is in the shed")
        assert memory.episodic.retrieve("hose shed", limit=1)[0].content == "the garden hose is in the shed"
    finally:
        memory.close()
