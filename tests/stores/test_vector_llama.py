"""LlamaVectorIndex on a LlamaIndex store other than Qdrant (the generic path)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from llama_index.core.vector_stores import SimpleVectorStore

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorPoint
from llama_index_memory_hierarchy.stores.vector import LlamaVectorIndex

DIM = 8


def vec(i: int) -> np.ndarray:
    v = np.full(DIM, 0.05, dtype=np.float32)
    v[i] = 1.0
    return v


async def test_generic_store_search_filters_and_deletes() -> None:
    index = LlamaVectorIndex(SimpleVectorStore(), "simple-8", DIM)
    rows = [
        VectorPoint(str(uuid.uuid4()), vec(i), {"user_id": user, "memory_type": kind, "timestamp": float(i)})
        for i, (user, kind) in enumerate([("a", "episodic"), ("a", "semantic"), ("b", "episodic"), ("a", "episodic")])
    ]
    await index.upsert(rows)
    hits = await index.search(vec(1), VectorFilter(user_id="a"), 10)
    assert hits[0][0] == rows[1].id and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert {h[0] for h in hits} == {rows[0].id, rows[1].id, rows[3].id}
    flt = VectorFilter(user_id="a", equals={"memory_type": ["episodic"]}, ranges={"timestamp": (1.0, None)})
    assert [h[0] for h in await index.search(vec(0), flt, 10)] == [rows[3].id]
    assert [h[0] for h in await index.search(vec(0), VectorFilter(user_id="a", ids=[rows[1].id]), 10)] == [rows[1].id]

    await index.delete([rows[1].id])
    assert rows[1].id not in {h[0] for h in await index.search(vec(1), VectorFilter(user_id="a"), 10)}
    await index.delete_user("a")
    assert await index.search(vec(0), VectorFilter(user_id="a"), 10) == []
    assert [h[0] for h in await index.search(vec(2), VectorFilter(user_id="b"), 10)] == [rows[2].id]

    with pytest.raises(StoreError, match="get_nodes"):
        await index.count()  # SimpleVectorStore keeps no nodes to list
    await index.close()
    with pytest.raises(StoreError, match="closed"):
        await index.search(vec(0), VectorFilter(user_id="b"), 1)


def test_rejects_a_non_llamaindex_store() -> None:
    with pytest.raises(MemoryValidationError, match="vector_store"):
        LlamaVectorIndex(object(), "x-8", DIM)  # type: ignore[arg-type]


async def test_qdrant_store_through_its_async_client() -> None:
    """The path a Qdrant server takes (async_add / aquery / adelete_nodes, client-side count), in memory."""
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import AsyncQdrantClient

    aclient = AsyncQdrantClient(location=":memory:")
    index = LlamaVectorIndex(
        QdrantVectorStore(collection_name="lmh_async-8", aclient=aclient, index_doc_id=False), "async-8", DIM
    )
    rows = [VectorPoint(str(uuid.uuid4()), vec(i), {"user_id": "ab"[i % 2], "pinned": i == 2}) for i in range(6)]
    await index.upsert(rows)
    assert await index.count() == 6 and await index.count("a") == 3
    assert await index.ids("b") == {rows[1].id, rows[3].id, rows[5].id}
    hits = await index.search(vec(2), VectorFilter(user_id="a", equals={"pinned": True}), 5)
    assert [h[0] for h in hits] == [rows[2].id]
    await index.delete([rows[0].id])
    await index.delete_user("b")
    assert await index.ids() == {rows[2].id, rows[4].id}
    await index.close()
    await aclient.close()


class _RacingStore(SimpleVectorStore):
    """A real in-memory store whose first queries fail as a Chroma server's do when they race a write."""

    failures: int = 0

    def query(self, query, **kwargs):  # type: ignore[no-untyped-def]
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("Error executing plan: Internal error: Error finding id")
        return super().query(query, **kwargs)


async def test_a_search_the_store_fails_transiently_is_tried_again() -> None:
    store = _RacingStore()
    index = LlamaVectorIndex(store, "simple-8", DIM, use_async=False)
    point = VectorPoint(str(uuid.uuid4()), vec(0), {"user_id": "a", "memory_type": "episodic", "timestamp": 0.0})
    await index.upsert([point])
    store.failures = 2
    assert [h[0] for h in await index.search(vec(0), VectorFilter(user_id="a"), 5)] == [point.id]
    store.failures = 3  # a store that keeps failing: the error is raised, naming the store and the cause
    with pytest.raises(StoreError, match="Error finding id"):
        await index.search(vec(0), VectorFilter(user_id="a"), 5)


def test_a_qdrant_store_without_the_qdrant_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The core install has no qdrant-client (its default is qdrant-edge): asking for Qdrant names the extra."""
    import sys

    from llama_index_memory_hierarchy.stores.vector import qdrant_vector_index

    for module in ("qdrant_client", "llama_index.vector_stores.qdrant"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it raises ImportError
    for where in ({"url": "http://127.0.0.1:6333"}, {"path": str(tmp_path / "qdrant")}):
        with pytest.raises(StoreError, match=r"pip install 'llama-index-memory-hierarchy\[qdrant\]'"):
            qdrant_vector_index("text-8", DIM, **where)
