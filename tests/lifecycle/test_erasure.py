"""User erasure: after forget_user, nothing of the user remains in any store.

The proof scans everything: every table of the SQLite record store (the keyword index's shadow
tables included) cell by cell, every vector index (count by user and a full scan of payloads),
the graph, the files folder, and the raw bytes of every file in the persist folder, for the
user's id and for a word only they ever wrote. Another user's data is the positive control:
the same scans find it, and it is all still there.
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from PIL import Image, ImageDraw

from llama_index_memory_hierarchy.knowledge.base import KnowledgeBase
from llama_index_memory_hierarchy.perception.files import FileStore
from llama_index_memory_hierarchy.stores.graph import GRAPH_DB_NAME
from llama_index_memory_hierarchy.types import MemoryType

ERIN, ERIN_WORD, ERIN_SESSION = "erin-q7x", "zanzibarquux", "talk-wq4zv"
BOB, BOB_WORD = "bob-k2m", "quokkafrost"


def picture(seed: int) -> bytes:
    image = Image.new("RGB", (96, 64), "white")
    draw = ImageDraw.Draw(image)
    for i in range(0, 96, 8 + seed):
        draw.line((i, 0, 96 - i, 64), fill=(seed * 40 % 255, 80, 160), width=3)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def populate(memory: Any, word: str, seed: int) -> None:
    """Every kind of data a user can leave: turns, summary, facts, graph, perception and file, KB, marks, pins."""
    name = word.capitalize()
    manager = memory.manager
    for i in range(6):
        memory.put_messages(
            [
                ChatMessage(role="user", content=f"My cat {name} loves tuna, and I live in Utrecht ({i})."),
                ChatMessage(role="assistant", content=f"{name} sounds lovely, noted ({i})."),
            ]
        )
        memory.get()
    pinned = manager.add_memory(f"My best friend is called {name} Smith.", "semantic", 0.9)
    manager.pin(pinned)
    manager.add_memory(f"Remind me to feed {name} at six.", "working", 0.8)
    manager.add_memory(picture(seed), caption=f"A photo of {name} asleep on the sofa")
    kb = KnowledgeBase(context=memory.context, namespace="notes", user_id=memory.user_id)
    kb.add_text(f"# Vet notes\n\n{name} had a checkup; weight 4.2 kg.", doc_id="vet")
    manager.consolidate()
    manager.forget("importance_based", dry_run=True)
    manager.export_session(format="json")


def sqlite_cells(path: Path) -> list[tuple[str, Any]]:
    """(table, value) of every cell of every table (virtual and shadow tables included)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells = []
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):  # table names come from sqlite_master
                cells.extend((table, value) for value in row)
        return cells
    finally:
        connection.close()


def contains(value: Any, needle: str) -> bool:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return needle.encode() in bytes(value).lower()
    return isinstance(value, str) and needle in value.casefold()


def raw_hits(folder: Path, needle: str) -> list[str]:
    """Files under ``folder`` whose raw bytes contain ``needle`` (any case)."""
    hits = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != ".lock"):
        if needle.encode() in path.read_bytes().lower():
            hits.append(str(path.relative_to(folder)))
    return hits


def vector_payloads(index: Any, runtime: Any) -> list[dict[str, Any]]:
    """Every payload of an embedded index (a full scroll, not a filtered count)."""
    import qdrant_edge as qe

    from llama_index_memory_hierarchy.stores.vector.mirror import MirrorVectorIndex

    if isinstance(index, MirrorVectorIndex):  # every user it holds, once all are read from the records
        runtime.run(index.ids())
        return [p for block in index._blocks.values() for p in block.payloads]

    payloads, offset = [], None
    while True:
        records, offset = index._shard.scroll(
            qe.ScrollRequest(offset=offset, limit=256, with_payload=True, with_vector=False)
        )
        payloads.extend(dict(r.payload or {}) for r in records)
        if offset is None or not records:
            return payloads


@pytest.fixture
def two_users(memory_factory, persist_dir):
    erin = memory_factory(user_id=ERIN, session_id=ERIN_SESSION, chat_history_token_limit=120)
    bob = memory_factory(user_id=BOB, chat_history_token_limit=120)
    populate(erin, ERIN_WORD, 1)
    populate(bob, BOB_WORD, 2)
    return erin, bob


def spaces(persist_dir: Path) -> list[str]:
    """The vector spaces: qdrant-edge folders, or (the in-process mirrors) the spaces of the records."""
    if (persist_dir / "vectors").is_dir():
        return sorted(p.name for p in (persist_dir / "vectors").iterdir() if p.is_dir())
    db = sqlite3.connect(f"file:{persist_dir / 'memory.db'}?mode=ro", uri=True)
    try:
        return sorted(r[0] for r in db.execute("SELECT DISTINCT space FROM memories WHERE space IS NOT NULL"))
    finally:
        db.close()


def test_forget_user_leaves_nothing_anywhere(two_users, persist_dir) -> None:
    erin, bob = two_users
    runtime = erin.context.runtime
    # positive control before: both users are visible to every scan
    cells = sqlite_cells(persist_dir / "memory.db")
    for needle in (ERIN, ERIN_WORD, BOB, BOB_WORD):
        assert any(contains(v, needle) for _, v in cells), needle
    tables_with_erin = {t for t, v in cells if contains(v, ERIN)}
    assert {"memories", "lifecycle_summaries", "lifecycle_consolidated", "lifecycle_events"} <= tables_with_erin
    assert len(spaces(persist_dir)) >= 2  # the text space and at least the phash satellite space
    assert FileStore(persist_dir).stored_files(ERIN)
    bob_before = runtime.run(bob.context.records.count(BOB, namespace=None))
    erin_ids = [r.item.id for r in runtime.run(erin.context.records.query(ERIN, limit=8))]

    report = erin.manager.forget_user()

    assert report.user_id == ERIN and report.total_rows > 0 and report.files == 1 and report.compacted
    assert report.rows["memories"] > 0 and report.graph["nodes"] > 0 and report.live_memories == 1
    assert sum(report.vectors.values()) > 0 and len(report.vectors) >= 2

    # 1. every SQLite table, every column
    cells = sqlite_cells(persist_dir / "memory.db")
    leaks = sorted({t for t, v in cells if contains(v, ERIN) or contains(v, ERIN_WORD)})
    assert leaks == []
    assert any(contains(v, BOB_WORD) for _, v in cells)
    graph_cells = sqlite_cells(persist_dir / GRAPH_DB_NAME)
    assert not [t for t, v in graph_cells if contains(v, ERIN) or contains(v, ERIN_WORD)]
    assert any(contains(v, BOB) for _, v in graph_cells)

    # 2. every vector index: count by user and a full scan of payloads
    for space in spaces(persist_dir):
        index = runtime.run(_open(erin, space))
        assert runtime.run(index.count(ERIN)) == 0, space
        payloads = vector_payloads(index, runtime)
        assert not [p for p in payloads if p.get("user_id") == ERIN], space
    first = runtime.run(_open(erin, spaces(persist_dir)[0]))
    assert any(p.get("user_id") == BOB for p in vector_payloads(first, runtime))

    # 3. the graph store and 4. the files folder
    from llama_index_memory_hierarchy.stores.graph import SQLitePropertyGraphStore

    graph = SQLitePropertyGraphStore.from_persist_dir(persist_dir)
    try:
        assert graph.count(ERIN) == {"nodes": 0, "relations": 0}
        assert graph.count(BOB)["nodes"] > 0
    finally:
        graph.close()
    assert FileStore(persist_dir).stored_files(ERIN) == []
    assert not (persist_dir / "files" / ERIN).exists()

    # 5. the raw bytes of every file in the persist folder (SQLite free pages and WAL, FTS5 segments, the
    # vector folders' WAL, payload pages and payload index) hold no id, session id or word of the user
    for needle in (ERIN, ERIN_WORD, ERIN_SESSION, *erin_ids):
        assert raw_hits(persist_dir, needle) == [], needle
    assert raw_hits(persist_dir, BOB_WORD)
    scanned = [p for p in persist_dir.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in scanned)
    print(f"erasure scan: {len(scanned)} files, {size:,} bytes, {report.total_rows} rows")

    # the live memory forgot too, and the other user has everything
    assert erin.get_all() == [] and erin.working.get_stats()["count"] == 0
    assert erin.manager.retrieve_memories(f"{ERIN_WORD} tuna", limit=5) == []
    assert erin.manager.session_summary() is None
    assert runtime.run(bob.context.records.count(BOB, namespace=None)) == bob_before
    assert BOB_WORD in bob.manager.retrieve_memories(f"{BOB_WORD} tuna", limit=3)[0].content.casefold()
    assert bob.manager.get_profile().preferences or bob.manager.get_profile().facts

    erin.close()
    bob.close()
    for needle in (ERIN, ERIN_WORD, ERIN_SESSION):  # closing (flushes) writes nothing of hers back
        assert raw_hits(persist_dir, needle) == [], needle


async def _open(memory: Any, space: str) -> Any:
    import json

    config = Path(memory.context.persist_dir) / "vectors" / space / "edge_config.json"
    if not config.exists():  # an in-process mirror: its dimension is the records'
        from llama_index_memory_hierarchy.stores.reconcile import space_stats

        return await memory.context.avector_index(space, (await space_stats(memory.context.records))[space][1])
    dim = json.loads(config.read_text())
    return await memory.context.avector_index(space, int(dim["vectors"][""]["size"]))


def test_forget_user_by_id_from_another_users_manager(two_users) -> None:
    erin, bob = two_users
    report = bob.manager.forget_user(ERIN, compact=False)
    assert report.rows["memories"] > 0 and not report.compacted
    runtime = bob.context.runtime
    assert runtime.run(bob.context.records.count(ERIN, namespace=None)) == 0
    assert erin.working.get_stats()["count"] == 0  # erin's open memory in this process was reset
    assert bob.manager.retrieve_memories("tuna", limit=3)
    assert bob.manager.forget_user("nobody-here").total_rows == 0


def test_semantic_state_is_reloaded_after_erasure(two_users) -> None:
    erin, _ = two_users
    assert erin.semantic.get_facts("User")
    erin.manager.forget_user()
    assert erin.semantic.get_facts("User") == []
    assert erin.semantic.get_stats()["facts"] == 0
    erin.manager.add_memory("I live in Oslo.", "semantic")
    assert [f.content for f in erin.semantic.get_facts("User")] == ["User lives in Oslo"]
    assert MemoryType.SEMANTIC in {i.memory_type for i in erin.manager.retrieve_memories("Oslo", limit=3)}


# ------------------------------------------------------------------ no byte left: PostgreSQL table files
def _pg_table_files(url: str) -> list[Path]:
    """The files of every table, index and TOAST relation of the database (forks and segments too)."""
    import sqlalchemy as sa

    sync_url = sa.engine.make_url(url).set(drivername="postgresql+psycopg")
    engine = sa.create_engine(sync_url)
    try:
        with engine.connect() as conn:
            paths = [
                row[0]
                for row in conn.execute(
                    sa.text("SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid >= 16384 AND relfilenode <> 0")
                )
                if row[0]
            ]
    finally:
        engine.dispose()
    for data_dir in sorted(Path("/var/lib/postgresql").glob("*/main")):
        try:
            found = [f for p in paths for f in data_dir.glob(p + "*") if f.is_file()]
        except PermissionError:
            continue
        if found:
            return found
    pytest.skip("the PostgreSQL data directory is not readable here (run as root beside the server)")


def _file_hits(files: list[Path], needle: str) -> list[str]:
    return [str(f) for f in files if needle.encode() in f.read_bytes().lower()]


def test_forget_user_on_postgresql_leaves_nothing_in_the_table_files(tmp_path: Path) -> None:
    from servers import Unavailable, fresh_pg_database

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    try:
        database = fresh_pg_database("lmh_erase")
        url = database.__enter__()
    except Unavailable as exc:
        pytest.skip(str(exc))
    try:
        common = {"persist_dir": str(tmp_path / "memory"), "embed_model": "hashing", "record_store_url": url}
        erin = HierarchicalMemory.from_defaults(
            user_id=ERIN, session_id=ERIN_SESSION, chat_history_token_limit=120, **common
        )
        bob = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", chat_history_token_limit=120, **common)
        try:
            populate(erin, ERIN_WORD, 1)
            populate(bob, BOB_WORD, 2)
            erin_ids = [r.item.id for r in erin.context.runtime.run(erin.context.records.query(ERIN, limit=8))]
            report = erin.manager.forget_user()
            assert report.compacted and report.rows["memories"] > 0
            files = _pg_table_files(url)
            for needle in (ERIN, ERIN_WORD, ERIN_SESSION, *erin_ids):
                assert _file_hits(files, needle) == [], needle
                assert raw_hits(tmp_path / "memory", needle) == [], needle
            assert _file_hits(files, BOB_WORD) and _file_hits(files, BOB)  # the same scan finds the other user
            size = sum(f.stat().st_size for f in files)
            print(f"erasure scan on PostgreSQL: {len(files)} relation files, {size:,} bytes, {report.total_rows} rows")
        finally:
            erin.close()
            bob.close()
    finally:
        database.__exit__(None, None, None)


# ------------------------------------------------------------------ a kill during erasure, finished on the next open
CHILD = Path(__file__).with_name("erasure_child.py")


def _kill_child_at(tmp_path: Path, folder: Path, stage: str, *backend: str) -> None:
    """Run the erasing child until it stalls at ``stage``, then SIGKILL it."""
    import sys

    sys.path.insert(0, str(CHILD.parent))
    from erasure_child import kill_at

    assert kill_at(folder, ERIN, stage, *backend, log=tmp_path / "child.err")


def test_sigkill_during_erasure_is_finished_on_the_next_open(tmp_path: Path) -> None:
    """Killed after the rows went (graph and files left), killed again while the next open finished the
    erasure (during the compaction), then the next open finishes it: no byte of the user anywhere."""
    from llama_index_memory_hierarchy.config import MemoryConfig
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.ops.verify import averify_indexes, verify_indexes

    folder = tmp_path / "memory"
    common = {"persist_dir": str(folder), "embed_model": "hashing", "chat_history_token_limit": 120}
    erin = HierarchicalMemory.from_defaults(user_id=ERIN, session_id=ERIN_SESSION, **common)
    bob = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", **common)
    populate(erin, ERIN_WORD, 1)
    populate(bob, BOB_WORD, 2)
    bob_rows = bob.context.runtime.run(bob.context.records.count(BOB, namespace=None))
    erin.close()
    bob.close()
    config = MemoryConfig.from_env(persist_dir=str(folder), embed_model="hashing")

    # 1. killed with the rows and vector points gone, the graph nodes and files not yet: reported
    _kill_child_at(tmp_path, folder, "graph")
    half = verify_indexes(config)
    assert not half.ok and half.pending_erasures == [ERIN]
    assert half.graph_orphans and half.file_orphans, half.problems
    assert any("graph" in p for p in half.problems) and any("files" in p for p in half.problems)

    # 2. the next open resumes it; killed again during the compaction: the marker is reported
    _kill_child_at(tmp_path, folder, "compact")
    half = verify_indexes(config)
    assert not half.ok and half.pending_erasures == [] and not half.graph_orphans and not half.file_orphans
    assert any("compaction" in p for p in half.problems), half.problems
    if (folder / "vectors").exists():  # a positive control where vectors are on disk (qdrant-edge); the default
        assert raw_hits(folder, ERIN)  # mirrors hold none, and SQLite's deleted pages are zeroed (secure_delete)

    # 3. the next open finishes the erasure: nothing of the user in any byte, the other user intact
    again = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", **common)
    try:
        for needle in (ERIN, ERIN_WORD, ERIN_SESSION):
            assert raw_hits(folder, needle) == [], needle
        runtime = again.context.runtime
        assert runtime.run(again.context.records.count(ERIN, namespace=None)) == 0
        assert runtime.run(again.context.records.count(BOB, namespace=None)) == bob_rows
        assert runtime.run(averify_indexes(again.context)).ok
        assert raw_hits(folder, BOB_WORD)
    finally:
        again.close()
    for needle in (ERIN, ERIN_WORD, ERIN_SESSION):
        assert raw_hits(folder, needle) == [], needle


def test_sigkill_while_the_erasure_rebuilds_a_vector_folder_leaves_one_that_opens(tmp_path: Path) -> None:
    """qdrant-edge backend, killed while the compaction removes a folder, right after its edge_config.json went:
    before, that was the live folder (``shutil.rmtree``) and every open failed 'corrupt: it has segments but no
    edge_config.json', so the erasure was never finished. Now it is the old folder, already switched out."""
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.ops.verify import averify_indexes

    folder = tmp_path / "memory"
    common = {"persist_dir": str(folder), "embed_model": "hashing", "vector_backend": "edge"}
    erin = HierarchicalMemory.from_defaults(user_id=ERIN, session_id=ERIN_SESSION, **common)
    erin.episodic.add(f"{ERIN_WORD} is what I call my bicycle")
    erin.manager.add_memory(f"My cat {ERIN_WORD.capitalize()} loves tuna.", "semantic", 0.9)
    erin.close()
    bob = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", **common)
    for n in range(3):
        bob.episodic.add(f"{BOB_WORD} is the name of my kayak, number {n}")
    bob.close()

    _kill_child_at(tmp_path, folder, "unlink", "edge")

    again = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", **common)
    try:
        assert not [p.name for p in (folder / "vectors").iterdir() if p.name.startswith(".")]
        for needle in (ERIN, ERIN_WORD, ERIN_SESSION):
            assert raw_hits(folder, needle) == [], needle
        assert len(again.episodic.retrieve(f"{BOB_WORD} kayak", 5)) == 3
        assert again.context.runtime.run(averify_indexes(again.context)).ok
    finally:
        again.close()


def test_forget_user_erases_the_graph_store_the_memory_was_given(make_memory, tmp_path: Path) -> None:
    from llama_index_memory_hierarchy.stores.graph.sqlite import SQLitePropertyGraphStore

    custom = SQLitePropertyGraphStore(tmp_path / "custom" / GRAPH_DB_NAME)
    memory = make_memory(ERIN, graph_store=custom)
    memory.semantic.add_fact(ERIN_WORD.capitalize(), "lives_in", "Utrecht")
    assert custom.count(ERIN)["nodes"] > 0
    memory.manager.forget_user()
    assert custom.count(ERIN) == {"nodes": 0, "relations": 0}


# ------------------------------------------------------------------ issue 36, item 1: erasure racing background work
RACER, RACER_SESSION = "ryn-v3q8", "chat-hq2kz"


def test_forget_user_stops_a_consolidation_already_running_from_another_object(memory_factory, persist_dir) -> None:
    """``consolidate(background=True)`` on one memory, ``forget_user()`` from another of the same user: the
    consolidation wrote lifecycle_events / lifecycle_consolidated rows naming the user after the erasure."""
    from lifecycle_llm import DISTILL, ScriptedLLM

    slow = ScriptedLLM(rules=[(DISTILL, '{"facts": []}')], async_delay=2.0)  # a hosted model, mid-reply
    first = memory_factory(user_id=RACER, session_id=RACER_SESSION, llm=slow)
    first.put_messages(
        [ChatMessage(role="user", content=f"I keep bees on the roof, hive {n}.") for n in range(6)]
        + [ChatMessage(role="user", content="My sister runs a bakery in Porto.")]
    )
    other = memory_factory(user_id=RACER, session_id="other")
    first.manager.consolidate(background=True)
    assert first.manager.background_running
    report = other.manager.forget_user()
    assert report.cancelled_tasks == 1 and not first.manager.background_running
    first.manager.wait_background()  # nothing left to finish: the task was cancelled and awaited
    for needle in (RACER, RACER_SESSION):
        leftovers = {t for t, v in sqlite_cells(persist_dir / "memory.db") if contains(v, needle)}
        assert not leftovers, (needle, leftovers)

    from llama_index_memory_hierarchy.ops.verify import averify_indexes

    assert other.context.runtime.run(averify_indexes(other.context)).ok


def test_lifecycle_writes_for_a_user_being_erased_are_refused_in_their_transaction(memory_factory) -> None:
    from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore, UserErasedError

    memory = memory_factory(user_id=RACER)
    store, run = LifecycleStore(memory.context), memory.context.runtime.run
    run(store.abegin_erasure(RACER))  # what another object's forget_user commits first
    for write in (
        store.alog(RACER, "consolidate", {"n": 1}),
        store.amark(RACER, "promote", [("3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60", None, [])]),
        store.aset_state(RACER, "last_reflection", 1.0),
    ):
        with pytest.raises(UserErasedError):
            run(write)
    run(store.alog("someone-else", "consolidate", {"n": 1}))  # other users write on
    run(store.aend_erasure(RACER))
    run(store.alog(RACER, "consolidate", {"n": 1}))  # a user re-created after the erasure writes again


def test_verify_indexes_finds_lifecycle_rows_of_a_user_without_records(memory_factory) -> None:
    from llama_index_memory_hierarchy.lifecycle.erasure import user_digest
    from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore
    from llama_index_memory_hierarchy.ops.verify import averify_indexes

    memory = memory_factory(user_id="alice")
    memory.episodic.add("Alice waters the ferns on Sundays")
    run = memory.context.runtime.run
    run(LifecycleStore(memory.context).amark(RACER, "promote", [("3f1c2a9e-8d3b-4c5e-9f6a-1b2c3d4e5f60", None, [])]))
    report = run(averify_indexes(memory.context))
    assert not report.ok and report.lifecycle_orphans == {user_digest(RACER): 1}
    assert any("consolidation marks" in p for p in report.problems)


def test_forget_user_waits_for_a_consolidation_running_in_another_process(tmp_path: Path) -> None:
    """A consolidation in another process, its LLM mid-reply when ``forget_user`` runs here: before, the erasure
    returned at once and the consolidation then wrote facts, marks and its audit event naming the user."""
    import os
    import subprocess
    import sys

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.ops.verify import averify_indexes

    folder = tmp_path / "memory"
    common = {"persist_dir": str(folder), "embed_model": "hashing"}
    bob = HierarchicalMemory.from_defaults(user_id=BOB, session_id="s1", **common)
    bob.episodic.add(f"{BOB_WORD} is the name of my kayak")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child_script = Path(__file__).with_name("consolidation_child.py")
    with open(tmp_path / "child.err", "wb") as err:
        child = subprocess.Popen(
            [sys.executable, str(child_script), str(folder), RACER, RACER_SESSION],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().decode().strip()  # blocks until the child's LLM is mid-reply
        assert line == "REPLYING", f"{line!r}; see {tmp_path / 'child.err'}"
        racer = HierarchicalMemory.from_defaults(user_id=RACER, session_id="eraser", **common)
        racer.manager.forget_user()
        outcome = child.stdout.readline().decode().strip()  # what the consolidation did after the erasure
        assert child.wait(60) == 0, (tmp_path / "child.err").read_text()
    finally:
        if child.poll() is None:
            child.kill()
    for needle in (RACER, RACER_SESSION):
        leftovers = {t for t, v in sqlite_cells(folder / "memory.db") if contains(v, needle)}
        assert not leftovers, (needle, leftovers)
    assert bob.context.runtime.run(averify_indexes(bob.context)).ok
    assert outcome == "UserErasedError", outcome  # its writes after the erasure began were refused
    assert bob.context.runtime.run(bob.context.records.count(BOB, namespace=None)) == 1  # the other user intact
    racer.close()
    bob.close()


def test_access_log_rows_another_process_queued_before_the_erasure_are_not_written_after_it(
    memory_factory, persist_dir
) -> None:
    """Another process's ``get()`` queued what it showed (written in the background, a second or so later); the
    user is erased meanwhile: its flush wrote lifecycle_shown rows naming the user and deleted memory ids."""
    import time

    from llama_index_memory_hierarchy.lifecycle.tables import LifecycleStore

    racer = memory_factory(user_id=RACER, session_id=RACER_SESSION)
    alice = memory_factory(user_id="alice")
    shown_id = racer.episodic.add("I keep bees on the roof")
    alice_id = alice.episodic.add("Alice waters the ferns on Sundays")
    queued = [
        {"user_id": RACER, "session_id": RACER_SESSION, "at": time.time(), "input": "bees?", "memory_ids": [shown_id]},
        {"user_id": "alice", "session_id": "s1", "at": time.time(), "input": "ferns?", "memory_ids": [alice_id]},
    ]
    racer.manager.forget_user()
    store = LifecycleStore(alice.context)
    alice.context.runtime.run(store.arecord_shown(queued))  # the other process's flush, after the erasure
    for needle in (RACER, RACER_SESSION, shown_id):
        assert not {t for t, v in sqlite_cells(persist_dir / "memory.db") if contains(v, needle)}, needle
    assert [row["input"] for row in alice.context.runtime.run(store.ashown("alice"))] == ["ferns?"]
