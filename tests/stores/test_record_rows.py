"""A row whose time is out of range (written before times were bounded: issue 36, item 3) does not make the user's
memory unreadable: every read clamps it with a logged warning, and ``get``/``remove`` of that very row work."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.stores.record_sql.rows import stored_time
from llama_index_memory_hierarchy.types import TIME_MAX, TIME_MIN

#: What 9999-12-31T23:59:59.999999 became as a float of epoch seconds: it reads back as year 10000.
YEAR_10000 = 253402300800.0


def _open(folder: Path) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id="alice", session_id="s1", persist_dir=str(folder), embed_model="hashing", llm=None
    )


def test_stored_times_out_of_range_are_clamped() -> None:
    assert stored_time(YEAR_10000) == TIME_MAX and stored_time(-1e15) == TIME_MIN
    assert stored_time(float("nan")) == TIME_MAX and stored_time(None) is None
    assert stored_time(0.0).year == 1970


def test_a_row_stored_past_year_9999_leaves_the_user_readable(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "memory"
    with _open(folder) as memory:
        bad = memory.episodic.add("The canoe trip on the quiet lake")
        good = memory.episodic.add("A picnic by the river with cousins")
    with sqlite3.connect(folder / "memory.db") as db:  # as an earlier version let it be written
        db.execute(
            "UPDATE memories SET timestamp = ?, created_at = ?, last_accessed = ? WHERE id = ?",
            (YEAR_10000, YEAR_10000, -1e15, bad),
        )
    with caplog.at_level(logging.WARNING), _open(folder) as memory:
        found = memory.search("canoe trip on the lake", 5)
        assert bad in [item.id for item in found]
        item = memory.episodic.get(bad)
        assert item is not None and item.timestamp == TIME_MAX and item.last_accessed == TIME_MIN
        assert {i.id for i in memory.episodic.get_timeline()} == {bad, good}
        assert memory.episodic.get_stats()["count"] == 2
        assert "canoe" in str(memory.get("what about the canoe trip?"))
        memory.manager.export_user(None, tmp_path / "export.json")
        assert memory.episodic.remove(bad) and memory.episodic.get(bad) is None
        assert [i.id for i in memory.episodic.get_timeline()] == [good]
    assert "a stored time out of range" in caplog.text


@pytest.mark.parametrize("valid_at", ["9999-12-31T23:59:59.999999+00:00", "9999-12-31T23:00:00-05:00", "not a time"])
def test_a_fact_whose_stored_valid_at_is_out_of_range_leaves_the_user_readable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, valid_at: str
) -> None:
    """A fact keeps ``valid_at`` in its metadata; one past the bounds (or no time at all) made loading the user's
    facts raise, and with it every search, ``get()`` and stats of the user."""
    folder = tmp_path / "memory"
    with _open(folder) as memory:
        fact = memory.semantic.add_fact("Noor", "lives_in", "Utrecht")
        memory.episodic.add("A walk along the canal with Noor")
    with sqlite3.connect(folder / "memory.db") as db:
        (raw,) = db.execute("SELECT metadata FROM memories WHERE id = ?", (fact,)).fetchone()
        db.execute(
            "UPDATE memories SET metadata = ? WHERE id = ?",
            (json.dumps({**json.loads(raw), "valid_at": valid_at}), fact),
        )
    with caplog.at_level(logging.WARNING), _open(folder) as memory:
        assert [f.id for f in memory.semantic.get_facts("Noor")] == [fact]
        assert fact in [item.id for item in memory.search("where does Noor live?", 5)]
        assert "Utrecht" in str(memory.get("where does Noor live?"))
        assert memory.semantic.get_stats()["count"] >= 1
        assert memory.semantic.remove(fact) and memory.semantic.get_facts("Noor") == []
    assert "stored valid_at cannot be used" in caplog.text
