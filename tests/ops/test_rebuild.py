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


def _keywords(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "memory.db") as db:
        return [k for (k,) in db.execute("SELECT keyword FROM memories ORDER BY seq")]


def test_a_summary_is_no_turn_of_its_session_in_the_keyword_text(tmp_path: Path) -> None:
    """A session summary's keyword text holds no turns before it, and the turn after it takes the turns as
    context, not the summary: the same whether the tier writes it or ``rebuild_indexes`` recomputes it."""
    from llama_index_memory_hierarchy.types import MemoryItem

    folder = tmp_path / "memory"
    with _open(folder) as memory:
        sources = memory.episodic.add_many(["I adopted a puppy named Biscuit", "We walk along the canal"])
        summary = MemoryItem(content="Summary of session s1: a new dog", metadata={"source_ids": sources})
        memory.episodic.add_many([summary])
        memory.episodic.add_many(["He sleeps all afternoon"])
    written = _keywords(folder)
    assert "biscuit" not in written[2].split() and "canal" not in written[2].split()
    assert {"biscuit", "canal"} <= set(written[3].split()) and "summari" not in written[3].split()
    rebuild_indexes(folder, graph=False, embed_model="hashing")
    assert _keywords(folder) == written


def test_an_ordinal_is_indexed_as_its_number() -> None:
    """ "on April 29th" finds the turns of 29 April: every turn's keyword text holds its date as "29 April 2023"."""
    assert keyword_text("What did we talk about on April 29th?").split()[-2:] == ["april", "29"]
    assert keyword_text("the 1st, 2nd and 3rd time") == keyword_text("the 1, 2 and 3 time")
