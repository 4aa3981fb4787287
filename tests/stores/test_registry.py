"""A memory or knowledge base dropped without ``close()`` releases its stores once it is collected.

Before, the registry kept the context of a forgotten memory open for the life of the process: its
SQLite reader threads, connections and folder lock stayed, and CI saw ``lmh-sqlite-read`` threads
of earlier tests alive in the pytest process.
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase
from llama_index_memory_hierarchy.stores.context import StoreContext


def _open_folders() -> set[Path]:
    return {context.persist_dir for context in StoreContext._registry.contexts()}


def _released(folder: Path) -> bool:
    """Whether the folder's context left the registry (the release runs on its own thread: wait for it)."""
    for _ in range(200):
        gc.collect()
        if folder.resolve() not in _open_folders():
            return True
        time.sleep(0.05)
    return False


def _readers() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("lmh-sqlite-read")}


def test_a_memory_dropped_without_close_releases_its_stores(persist_dir: Path) -> None:
    before = _readers()
    memory = HierarchicalMemory.from_defaults(user_id="ines", session_id="s1", persist_dir=str(persist_dir))
    memory.manager.add_memory("Ines waters the fern on Sundays.", "episodic")
    assert memory.get("fern")  # a read: the reader threads are running
    assert persist_dir.resolve() in _open_folders()
    del memory
    assert _released(persist_dir)
    for thread in _readers() - before:
        thread.join(timeout=30)
    assert not _readers() - before
    with HierarchicalMemory.from_defaults(user_id="ines", session_id="s2", persist_dir=str(persist_dir)) as again:
        assert [i.content for i in again.manager.list_memories().items] == ["Ines waters the fern on Sundays."]


def test_close_releases_at_once_and_only_once(persist_dir: Path) -> None:
    first = HierarchicalMemory.from_defaults(user_id="ines", session_id="s1", persist_dir=str(persist_dir))
    second = HierarchicalMemory.from_defaults(user_id="ines", session_id="s2", persist_dir=str(persist_dir))
    context = first.context
    assert context is second.context and context.refs == 2
    first.close()
    first.close()
    assert context.refs == 1
    del first
    gc.collect()
    assert context.refs == 1  # a closed memory's collection releases nothing more
    second.close()
    assert persist_dir.resolve() not in _open_folders()


def test_a_knowledge_base_dropped_without_close_releases_its_stores(persist_dir: Path) -> None:
    kb = KnowledgeBase.from_defaults(persist_dir=str(persist_dir), user_id="ines")
    assert persist_dir.resolve() in _open_folders()
    del kb
    assert _released(persist_dir)


def test_what_a_dropped_memory_or_knowledge_base_gave_out_keeps_its_stores_open(persist_dir: Path) -> None:
    """``X.from_defaults(...).as_retriever()`` keeps nothing but the retriever: it must keep the stores."""
    memory = HierarchicalMemory.from_defaults(user_id="ines", persist_dir=str(persist_dir / "m"), embed_model="hashing")
    memory.manager.add_memory("Ines keeps the bike pump in the shed.", "episodic")
    retriever = memory.as_retriever()
    kb = KnowledgeBase.from_defaults(persist_dir=str(persist_dir / "k"), user_id="ines", embed_model="hashing")
    kb.add_text("The bike pump lives in the shed.", doc_id="notes")
    chunks = kb.as_retriever()
    del memory, kb
    gc.collect()
    time.sleep(0.5)  # a release would run on its own thread
    assert [n.get_content() for n in retriever.retrieve("where is the bike pump")] == [
        "Ines keeps the bike pump in the shed."
    ]
    assert [n.get_content() for n in chunks.retrieve("where is the bike pump")] == ["The bike pump lives in the shed."]
    del retriever, chunks
    assert _released(persist_dir / "m") and _released(persist_dir / "k")
