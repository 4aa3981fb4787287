"""A missing or emptied ``memory.db`` beside existing vector and graph files is refused, naming the files and
the way out, instead of opening as a new store that wipes the vector index (issue 17, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.errors import StoreError


def _filled(folder: Path) -> None:
    memory = HierarchicalMemory.from_defaults(user_id="ann", session_id="s1", persist_dir=str(folder))
    memory.episodic.add("Ann keeps her spare key under the blue pot.")
    memory.semantic.add("Ann lives in Porto.")
    memory.close()


def _derived_bytes(folder: Path) -> dict[str, int]:
    """The files derived from the records (the vectors are mirrored from memory.db, so none are on disk)."""
    return {str(p): p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.startswith("memory.db")}


@pytest.mark.parametrize("damage", ["missing", "emptied"])
def test_a_lost_record_store_is_refused_not_recreated(persist_dir: Path, damage: str) -> None:
    _filled(persist_dir)
    database = persist_dir / "memory.db"
    if damage == "missing":
        database.unlink()
    else:
        database.write_bytes(b"")
    before = _derived_bytes(persist_dir)
    with pytest.raises(StoreError) as refused:
        HierarchicalMemory.from_defaults(user_id="ann", session_id="s2", persist_dir=str(persist_dir))
    message = str(refused.value)
    assert str(database) in message and "graph.db" in message
    assert "allow_fresh_store" in message and "backup" in message
    assert _derived_bytes(persist_dir) == before  # nothing touched
    assert not database.exists() or database.stat().st_size == 0

    fresh = HierarchicalMemory.from_defaults(  # an explicit choice opens a new, empty store
        user_id="ann", session_id="s2", persist_dir=str(persist_dir), allow_fresh_store=True
    )
    try:
        assert fresh.episodic.get_stats()["count"] == 0
    finally:
        fresh.close()


def test_a_new_folder_and_an_intact_one_open_as_before(persist_dir: Path) -> None:
    _filled(persist_dir)
    again = HierarchicalMemory.from_defaults(user_id="ann", session_id="s2", persist_dir=str(persist_dir))
    try:
        assert again.episodic.retrieve("spare key", limit=1)[0].content.startswith("Ann keeps")
    finally:
        again.close()
