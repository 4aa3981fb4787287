"""The SQLite reader connections: one-statement reads of a file in one hop, beside the async writer."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.record_sql.readers import complete
from llama_index_memory_hierarchy.stores.schema import memories
from llama_index_memory_hierarchy.types import MemoryItem


def _record(text: str) -> Record:
    return Record(item=MemoryItem.create(content=text, user_id="alice"))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLRecordStore]:
    """A started store on a file, whose reads go through the readers."""
    store = SQLRecordStore(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
    await store.start()
    try:
        assert store._readers is not None
        yield store
    finally:
        await store.close()


async def test_a_read_sees_every_write_committed_before_it(store: SQLRecordStore) -> None:
    for n in range(30):
        [memory_id] = await store.insert([_record(f"note {n} about gardening")])
        [found] = await store.get("alice", [memory_id])
        assert found.item.content == f"note {n} about gardening"
        assert memory_id in [i for i, _ in await store.keyword_search("alice", "gardening", limit=100)]
        assert await store.count("alice") == n + 1
    deleted = await store.delete("alice", [memory_id])
    assert deleted == [memory_id] and await store.get("alice", [memory_id]) == []


async def test_reads_and_writes_at_once_see_whole_writes(store: SQLRecordStore) -> None:
    """A batch insert is one transaction: a reader running beside it sees all of it or none."""

    async def write() -> None:
        for n in range(20):
            await store.insert([_record(f"batch {n} item {i}") for i in range(10)])

    async def read() -> list[int]:
        seen = []
        for _ in range(60):
            seen.append(await store.count("alice"))
            await asyncio.sleep(0)
        return seen

    _, seen = await asyncio.gather(write(), read())
    assert all(count % 10 == 0 for count in seen), seen
    assert await store.count("alice") == 200


async def test_a_reader_cannot_write(store: SQLRecordStore) -> None:
    async def write(conn) -> None:  # type: ignore[no-untyped-def]
        await conn.execute(sa.delete(memories))

    assert store._readers is not None
    with pytest.raises(sa.exc.OperationalError, match="readonly"):
        await store._readers.aread(write)


def test_a_read_that_suspends_is_refused() -> None:
    async def suspends() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="suspended"):
        complete(suspends())


async def test_closing_the_store_stops_its_reader_threads(tmp_path: Path) -> None:
    def reader_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("lmh-sqlite-read")}

    others = reader_threads()  # stores other tests left open in this process keep their own
    store = SQLRecordStore(f"sqlite+aiosqlite:///{tmp_path / 'memory.db'}")
    await store.start()
    await store.get("alice", [(await store.insert([_record("hello")]))[0]])
    assert await store.count("alice") == 1  # a read of unbounded size: in a reader thread
    assert reader_threads() - others
    readers = store._readers
    await store.close()
    assert not reader_threads() - others
    assert readers is not None and not readers._owned  # the calling threads' own connections are closed too

    async def one(conn) -> None:  # type: ignore[no-untyped-def]
        await conn.execute(sa.select(1))

    with pytest.raises(RuntimeError, match="closed"):
        readers.read_here(one)


async def test_small_reads_run_at_once_on_the_calling_thread(store: SQLRecordStore) -> None:
    """A lookup by ids and a keyword search take no hop: they run on this thread's own connection (and see every
    write committed before them, as the reader threads do)."""
    assert store._readers is not None
    seen: list[int] = []
    read_here = store._readers.read_here

    def spy(work):  # type: ignore[no-untyped-def]
        seen.append(threading.get_ident())
        return read_here(work)

    store._readers.read_here = spy  # type: ignore[method-assign]
    [memory_id] = await store.insert([_record("a note about gardening")])
    assert [r.item.id for r in await store.get("alice", [memory_id], with_embeddings=True)] == [memory_id]
    assert [i for i, _ in await store.keyword_search("alice", "gardening")] == [memory_id]
    assert seen == [threading.get_ident()] * 2
    assert len(store._readers._owned) == 1  # one connection for this thread, kept


async def test_threads_reading_at_once_each_use_their_own_connection(store: SQLRecordStore) -> None:
    ids = await store.insert([_record(f"note {n} on tomatoes") for n in range(20)])
    assert store._readers is not None
    barrier = threading.Barrier(4)

    async def count(conn) -> int:  # type: ignore[no-untyped-def]
        return int((await conn.execute(sa.select(sa.func.count()).select_from(memories))).scalar_one())

    def read(_: int) -> int:
        barrier.wait(5)
        return store._readers.read_here(count)  # type: ignore[union-attr]

    counts = await asyncio.gather(*(asyncio.to_thread(read, n) for n in range(4)))
    assert counts == [len(ids)] * 4
    assert len(store._readers._owned) == 4


async def test_an_in_memory_database_reads_through_its_one_connection() -> None:
    store = SQLRecordStore("sqlite+aiosqlite:///:memory:")
    await store.start()
    try:
        assert store._readers is None  # another connection would open another, empty database
        [memory_id] = await store.insert([_record("kept in memory")])
        assert (await store.get("alice", [memory_id]))[0].item.content == "kept in memory"
    finally:
        await store.close()


async def test_the_change_token_differs_after_any_commit_and_only_then(store: SQLRecordStore, tmp_path: Path) -> None:
    before = store.change_token()
    await store.get("alice", [str(uuid.uuid4())])
    assert store.change_token() == before  # a read commits nothing
    await store.insert([_record("a note from this process")])
    after = store.change_token()
    assert after != before
    other = sqlite3.connect(tmp_path / "memory.db")  # another connection: another process's writer alike
    try:
        other.execute("UPDATE memories SET importance = 0.9")
        other.commit()
    finally:
        other.close()
    assert store.change_token() != after


async def test_an_in_memory_database_has_no_change_token() -> None:
    store = SQLRecordStore("sqlite+aiosqlite:///:memory:")  # no reader connection: every cache reads again
    await store.start()
    try:
        assert store.change_token() is None
    finally:
        await store.close()
