"""Keyword analysis versions (``stores.reconcile.analyzer_version``) and ``rebuild_indexes`` recomputing keyword text.

A store written before the keyword analysis had a version (no ``schema_info`` row) is named
in a warning on open; ``rebuild_indexes`` recomputes every record's keyword text with today's
analysis, episodic turns with their session context, and records the version.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.language import ANALYZER_VERSION, keyword_text
from llama_index_memory_hierarchy.ops.rebuild import rebuild_indexes
from llama_index_memory_hierarchy.stores.reconcile import ANALYZER_COMPONENT


def _open(folder: Path) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id="zhang", session_id="s1", persist_dir=str(folder), embed_model="hashing"
    )


def _analyzer_row(folder: Path) -> list[tuple[int]]:
    with sqlite3.connect(folder / "memory.db") as db:
        return db.execute("SELECT version FROM schema_info WHERE component = ?", (ANALYZER_COMPONENT,)).fetchall()


def test_old_keyword_text_is_named_and_recomputed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "memory"
    with _open(folder) as memory:
        memory.episodic.add_many(["我在学Python", "My manager asked for the weekly reports"])
    assert _analyzer_row(folder) == [(ANALYZER_VERSION,)]  # a new store is marked with this analysis
    with sqlite3.connect(folder / "memory.db") as db:  # as an earlier release left it
        db.execute("DELETE FROM schema_info WHERE component = ?", (ANALYZER_COMPONENT,))
        db.execute("UPDATE memories SET keyword = 'stale'")
    with caplog.at_level(logging.WARNING), _open(folder):
        pass
    assert any("keyword analysis v1" in r.getMessage() and "lmh reindex" in r.getMessage() for r in caplog.records)

    report = rebuild_indexes(folder, graph=False, embed_model="hashing")  # the model it was made with
    assert report.analyzer_version == ANALYZER_VERSION and report.reembedded == {}
    assert _analyzer_row(folder) == [(ANALYZER_VERSION,)]
    with sqlite3.connect(folder / "memory.db") as db:
        keywords = [k for (k,) in db.execute("SELECT keyword FROM memories ORDER BY seq")]
    assert "python" in keywords[0].split() and "学" in keywords[0].split()
    assert set(keyword_text("weekly reports").split()) <= set(keywords[1].split())
    assert "python" in keywords[1].split()  # the previous turn of the session is part of the document
    caplog.clear()
    with caplog.at_level(logging.WARNING), _open(folder) as memory:
        assert [i.content for i in memory.episodic.retrieve("周报 reports", limit=1)]
    assert not any("keyword analysis" in r.getMessage() for r in caplog.records)
