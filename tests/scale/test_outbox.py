"""The shared outbox on PostgreSQL: concurrent drainers, failed vector writes, supplied stores.

* two record stores claiming at once get disjoint operations, never a memory's later
  operation while its earlier one is held, and a failed block leaves its operations pending;
* a context whose vector write fails still acknowledges the add (it is committed), leaves the
  operation in the outbox, and another process's context (or its own background retry) applies it;
* a plain LlamaIndex ``ChromaVectorStore`` passed as ``vector_store=`` serves the memory.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import StoreError
from llama_index_memory_hierarchy.stores.base import Record, VectorFilter, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore
from llama_index_memory_hierarchy.stores.vector import chroma_vector_index
from llama_index_memory_hierarchy.types import MemoryItem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from servers import Unavailable, fresh_pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A database of its own for each test (the outbox is global to a database)."""
    try:
        with fresh_pg_database("lmh_outbox") as url:
            yield url
    except Unavailable as exc:
        pytest.skip(str(exc))


def rec(content: str, user_id: str = "alice", seed: int = 0) -> Record:
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return Record(item=MemoryItem.create(content=content, user_id=user_id), embedding=vector, space="sp-8")


async def test_concurrent_claims_are_disjoint_and_ordered(pg_url: str) -> None:
    a, b = SQLRecordStore(pg_url), SQLRecordStore(pg_url)
    await a.start()
    await b.start()
    try:
        ids = await a.insert([rec(f"note {i}", seed=i) for i in range(6)])
        await a.delete("alice", [ids[0]])  # a later op for a memory whose upsert is still pending
        async with a.outbox_claim(3) as first:
            assert [op.memory_id for op in first] == ids[:3]
            async with b.outbox_claim(100) as second:
                # rows a holds are skipped, not waited for; so is the delete of ids[0] (its upsert is held)
                assert [op.memory_id for op in second] == ids[3:]
            async with b.outbox_claim(100) as third:
                assert third == []
        with pytest.raises(RuntimeError):
            async with b.outbox_claim(100) as fourth:
                assert [(op.op, op.memory_id) for op in fourth] == [("delete", ids[0])]
                raise RuntimeError("vector server down")
        pending = await a.outbox_pending()
        assert [(op.op, op.memory_id) for op in pending] == [("delete", ids[0])]  # left for a retry
        async with a.outbox_claim(100) as fifth:
            assert [op.memory_id for op in fifth] == [ids[0]]
        assert await a.outbox_pending() == []
    finally:
        await a.close()
        await b.close()


class FlakyIndex(VectorIndex):
    """A real index whose writes fail while ``fail`` is set (a vector server outage)."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner, self.dim, self.space = inner, inner.dim, inner.space
        self.fail = True

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        if self.fail:
            raise StoreError("vector server unreachable (simulated)")
        await self.inner.upsert(points)

    async def delete(self, ids: Sequence[str]) -> None:
        if self.fail:
            raise StoreError("vector server unreachable (simulated)")
        await self.inner.delete(ids)

    async def delete_user(self, user_id: str) -> None:
        await self.inner.delete_user(user_id)

    async def search(self, vector: np.ndarray, flt: VectorFilter, limit: int) -> list[tuple[str, float]]:
        return await self.inner.search(vector, flt, limit)

    async def count(self, user_id: str | None = None) -> int:
        return await self.inner.count(user_id)

    async def ids(self, user_id: str | None = None) -> set[str]:
        return await self.inner.ids(user_id)

    async def close(self) -> None:
        await self.inner.close()


def test_failed_vector_write_is_left_for_another_process(
    pg_url: str, scale_chroma_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    prefix = f"ob{uuid.uuid4().hex[:6]}"
    flaky: list[FlakyIndex] = []

    def failing(space: str, dim: int) -> VectorIndex:
        flaky.append(FlakyIndex(chroma_vector_index(space, dim, url=scale_chroma_url, collection_prefix=prefix)))
        return flaky[-1]

    def healthy(space: str, dim: int) -> VectorIndex:
        return chroma_vector_index(space, dim, url=scale_chroma_url, collection_prefix=prefix)

    config = MemoryConfig.create(persist_dir=tmp_path / "p", record_store_url=pg_url, embed_model="hashing")
    broken = StoreContext.acquire(config, vector_store=failing)  # "process" A
    other = StoreContext.acquire(config, vector_store=healthy)  # "process" B: same deployment, own index client
    try:
        assert broken is not other and not broken.locked and not other.locked
        run = broken.runtime.run
        record = Record(item=MemoryItem.create(content="written while the vector server was down", user_id="u1"))
        [memory_id] = run(broken.awrite([record]))  # acknowledged: the record is committed
        assert "deferred" in caplog.text
        assert [op.memory_id for op in run(broken.records.outbox_pending())] == [memory_id]
        assert run(broken.records.get("u1", [memory_id]))[0].item.content.startswith("written while")

        assert run(other.drain_outbox()) == 1  # another process applies what A left
        index = run(other.avector_index())
        assert run(index.ids("u1")) == {memory_id}
        assert run(broken.records.outbox_pending()) == []

        # A's own bounded background retry applies its op once the server is back.
        second = Record(item=MemoryItem.create(content="another one during the outage", user_id="u1"))
        [second_id] = run(broken.awrite([second]))
        flaky[-1].fail = False
        deadline = time.monotonic() + 20
        while run(broken.records.outbox_pending()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run(broken.records.outbox_pending()) == []
        assert run(index.ids("u1")) == {memory_id, second_id}
    finally:
        broken.release()
        other.release()


def test_plain_chroma_vector_store_instance(pg_url: str, scale_chroma_url: str, tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings
    from llama_index.core.llms import ChatMessage
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.stores.vector.chroma import parse_chroma_url

    args = parse_chroma_url(scale_chroma_url)
    client = chromadb.HttpClient(host=args["host"], port=args["port"], settings=Settings(anonymized_telemetry=False))
    collection = client.get_or_create_collection(
        f"plain_{uuid.uuid4().hex[:8]}", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    store = ChromaVectorStore(chroma_collection=collection)
    memory = HierarchicalMemory.from_defaults(
        user_id="carol",
        session_id="s1",
        persist_dir=str(tmp_path / "p"),
        record_store_url=pg_url,
        embed_model="hashing",
        vector_store=store,
    )
    try:
        assert not memory.context.locked
        memory.put(ChatMessage(role="user", content="I keep bees on the roof of my flat in Ghent."))
        memory.put(ChatMessage(role="user", content="My sister plays the cello."))
        memory.put(ChatMessage(role="user", content="I keep bees on the roof of my flat in Ghent."))
        assert collection.count() == 3  # upserts through the adapted store
        hits = memory.episodic.retrieve("bees on the roof", limit=2)
        assert hits[0].content.startswith("I keep bees") and all(h.user_id == "carol" for h in hits)
        with pytest.raises(StoreError, match="factory"):
            memory.context.runtime.run(memory.context.avector_index("clip-512", 512))
    finally:
        memory.close()


def test_retry_does_not_delay_close(pg_url: str, tmp_path: Path) -> None:
    """A pending background retry is cancelled on close (the op stays in the outbox for the next open)."""

    class Down(FlakyIndex):
        def __init__(self, space: str, dim: int) -> None:
            self.dim, self.space, self.fail = dim, space, True

        async def close(self) -> None:
            return None

    config = MemoryConfig.create(persist_dir=tmp_path / "p", record_store_url=pg_url, embed_model="hashing")
    context = StoreContext.acquire(config, vector_store=Down)
    record = Record(item=MemoryItem.create(content="left in the outbox", user_id="u2"))
    context.runtime.run(context.awrite([record]))
    started = time.monotonic()
    context.release()
    assert time.monotonic() - started < 5
    check = SQLRecordStore(pg_url)

    async def pending() -> int:
        await check.start()
        try:
            return len(await check.outbox_pending())
        finally:
            await check.close()

    assert asyncio.run(pending()) == 1
