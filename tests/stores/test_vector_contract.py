"""One contract for every VectorIndex backend.

Runs against MirrorVectorIndex (the default: in-process, without a record store behind it),
EdgeVectorIndex (embedded qdrant-edge), LlamaVectorIndex on qdrant-client local
mode, LlamaVectorIndex on a Chroma server (``chroma run`` from the chromadb wheel, started on a
free loopback port for the session; skipped with the reason when the ``chroma`` extra is missing)
and LlamaVectorIndex on a real Qdrant server when ``QDRANT_URL`` is set.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest

from llama_index_memory_hierarchy.errors import EmbeddingDimensionError, MemoryValidationError
from llama_index_memory_hierarchy.stores.base import VectorFilter, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.vector import EdgeVectorIndex, chroma_vector_index, qdrant_vector_index
from llama_index_memory_hierarchy.stores.vector.mirror import MirrorVectorIndex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from servers import ChromaServer, Unavailable

DIM = 16
SPACE = "test-model-16"
QDRANT_URL = os.environ.get("QDRANT_URL")


class Backend:
    """Opens indexes of one backend kind on one location (so reopening finds the data)."""

    def __init__(self, kind: str, tmp_path: Path, chroma_url: str | None = None) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.chroma_url = chroma_url
        self.prefix = f"t{uuid.uuid4().hex[:12]}"  # isolates tests sharing a server

    def open(self, dim: int = DIM, space: str = SPACE) -> VectorIndex:
        if self.kind == "mirror":
            return MirrorVectorIndex(space, dim)
        if self.kind == "edge":
            return EdgeVectorIndex(self.tmp_path / "persist", space, dim)
        if self.kind == "chroma-server":
            return chroma_vector_index(space, dim, url=self.chroma_url, collection_prefix=self.prefix)
        if self.kind == "qdrant-local":
            return qdrant_vector_index(space, dim, path=self.tmp_path / "qdrant", collection_prefix=self.prefix)
        return qdrant_vector_index(
            space, dim, url=QDRANT_URL, api_key=os.environ.get("QDRANT_API_KEY"), collection_prefix=self.prefix
        )

    def cleanup(self) -> None:
        if self.kind == "chroma-server":
            import chromadb

            client = chromadb.HttpClient(host="127.0.0.1", port=int(str(self.chroma_url).rsplit(":", 1)[1]))
            for collection in client.list_collections():
                if collection.name.startswith(self.prefix):
                    client.delete_collection(collection.name)
        if self.kind == "qdrant-server":
            from qdrant_client import QdrantClient

            client = QdrantClient(url=QDRANT_URL, api_key=os.environ.get("QDRANT_API_KEY"))
            for collection in client.get_collections().collections:
                if collection.name.startswith(self.prefix):
                    client.delete_collection(collection.name)
            client.close()


BACKENDS = [
    pytest.param("mirror", id="mirror"),
    pytest.param("edge", id="edge"),
    pytest.param("qdrant-local", id="qdrant-local"),
    pytest.param("chroma-server", id="chroma-server"),
    pytest.param(
        "qdrant-server",
        id="qdrant-server",
        marks=pytest.mark.skipif(not QDRANT_URL, reason="set QDRANT_URL (and QDRANT_API_KEY) to test a Qdrant server"),
    ),
]


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Chroma server for the session, on a free loopback port."""
    try:
        server = ChromaServer(tmp_path_factory.mktemp("chroma") / "data").start()
    except Unavailable as exc:
        pytest.skip(f"Chroma server unavailable: {exc}")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    url = request.getfixturevalue("chroma_url") if request.param == "chroma-server" else None
    made = Backend(request.param, tmp_path, url)
    yield made
    made.cleanup()


@pytest.fixture
async def index(backend: Backend) -> AsyncIterator[VectorIndex]:
    opened = backend.open()
    yield opened
    await opened.close()


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def basis(i: int, dim: int = DIM) -> np.ndarray:
    vector = np.full(dim, 0.01, dtype=np.float32)
    vector[i] = 1.0
    return unit(vector)


def point(vector: np.ndarray, user: str = "alice", pid: str | None = None, **payload: object) -> VectorPoint:
    return VectorPoint(id=pid or str(uuid.uuid4()), vector=vector, payload={"user_id": user, **payload})


async def test_upsert_search_delete(index: VectorIndex) -> None:
    points = [point(basis(i)) for i in range(3)]
    await index.upsert(points)
    hits = await index.search(basis(1), VectorFilter(user_id="alice"), 3)
    assert hits[0][0] == points[1].id
    assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
    assert all(hits[i][1] >= hits[i + 1][1] for i in range(len(hits) - 1))
    assert {h[0] for h in hits} == {p.id for p in points}
    assert await index.count() == 3
    assert await index.search(basis(1), VectorFilter(user_id="alice"), 0) == []

    await index.delete([points[1].id, str(uuid.uuid4())])  # an absent id is ignored
    hits = await index.search(basis(1), VectorFilter(user_id="alice"), 3)
    assert points[1].id not in {h[0] for h in hits}
    assert await index.ids() == {points[0].id, points[2].id}
    await index.delete([])


async def test_upsert_is_idempotent_and_replaces(index: VectorIndex) -> None:
    points = [point(basis(i), importance=0.5) for i in range(4)]
    await index.upsert(points)
    await index.upsert(points)
    assert await index.count() == 4
    moved = point(basis(7), pid=points[0].id, importance=0.9)
    await index.upsert([moved])
    assert await index.count() == 4
    hits = await index.search(basis(7), VectorFilter(user_id="alice"), 1)
    assert hits[0][0] == points[0].id and hits[0][1] == pytest.approx(1.0, abs=1e-4)
    high = await index.search(basis(7), VectorFilter(user_id="alice", ranges={"importance": (0.8, None)}), 10)
    assert [h[0] for h in high] == [points[0].id]


async def test_user_isolation(index: VectorIndex) -> None:
    shared = basis(3)
    alice = [point(shared, "alice") for _ in range(3)]
    bob = [point(shared, "bob") for _ in range(2)]
    await index.upsert([*alice, *bob])

    hits = await index.search(shared, VectorFilter(user_id="alice"), 10)
    assert {h[0] for h in hits} == {p.id for p in alice}
    bob_ids = [p.id for p in bob]
    assert await index.search(shared, VectorFilter(user_id="alice", ids=bob_ids), 10) == []
    assert await index.search(shared, VectorFilter(user_id="carol"), 10) == []
    assert await index.count("alice") == 3 and await index.count("bob") == 2 and await index.count() == 5
    assert await index.ids("bob") == set(bob_ids)

    await index.delete_user("alice")
    assert await index.count("alice") == 0
    assert await index.ids() == set(bob_ids)
    assert {h[0] for h in await index.search(shared, VectorFilter(user_id="bob"), 10)} == set(bob_ids)


async def test_filters(index: VectorIndex) -> None:
    rows = [
        point(basis(0), namespace="memory", memory_type="episodic", session_id="s1", timestamp=100.0, importance=0.1),
        point(basis(1), namespace="memory", memory_type="semantic", session_id="s1", timestamp=200.0, importance=0.5),
        point(basis(2), namespace="kb:docs", memory_type="semantic", session_id="s2", timestamp=300.0, importance=0.9),
        point(basis(3), namespace="memory", memory_type="episodic", timestamp=400.0, importance=0.7, pinned=True),
    ]
    await index.upsert(rows)
    ids = [r.id for r in rows]
    query = unit(np.ones(DIM, dtype=np.float32))

    async def found(**kwargs: object) -> set[str]:
        return {h[0] for h in await index.search(query, VectorFilter(user_id="alice", **kwargs), 10)}

    assert await found() == set(ids)
    assert await found(equals={"memory_type": "semantic"}) == {ids[1], ids[2]}
    assert await found(equals={"memory_type": "semantic", "namespace": "memory"}) == {ids[1]}
    assert await found(equals={"namespace": ["kb:docs", "other"]}) == {ids[2]}
    assert await found(equals={"session_id": ["s1", "s2"]}) == {ids[0], ids[1], ids[2]}
    assert await found(equals={"namespace": []}) == set()
    assert await found(equals={"pinned": True}) == {ids[3]}
    assert await found(ranges={"timestamp": (200.0, 300.0)}) == {ids[1], ids[2]}
    assert await found(ranges={"timestamp": (None, 200.0)}) == {ids[0], ids[1]}
    assert await found(ranges={"timestamp": (250.0, None), "importance": (0.8, 1.0)}) == {ids[2]}
    assert await found(ranges={"timestamp": (None, None)}) == set(ids)
    assert await found(ids=[ids[0], ids[3]]) == {ids[0], ids[3]}
    assert await found(ids=[ids[0], ids[3]], equals={"memory_type": "episodic"}, ranges={"timestamp": (150, None)}) == {
        ids[3]
    }
    assert await found(ids=[]) == set()


def _persistent(backend: Backend) -> None:
    if backend.kind == "mirror":
        pytest.skip("a mirror keeps nothing of its own: reopened, it reads the record store (test_vector_mirror.py)")


async def test_reopen_keeps_data(backend: Backend) -> None:
    _persistent(backend)
    first = backend.open()
    points = [point(basis(i), user=f"u{i % 2}") for i in range(6)]
    await first.upsert(points)
    await first.delete([points[0].id])
    await first.close()
    await first.close()  # idempotent

    second = backend.open()
    try:
        assert await second.ids() == {p.id for p in points[1:]}
        hits = await second.search(basis(3), VectorFilter(user_id="u1"), 1)
        assert hits[0][0] == points[3].id
    finally:
        await second.close()


async def test_dimension_mismatch(backend: Backend) -> None:
    _persistent(backend)
    first = backend.open()
    await first.upsert([point(basis(0))])
    with pytest.raises(EmbeddingDimensionError):
        await first.upsert([point(np.ones(DIM + 1, dtype=np.float32))])
    with pytest.raises(EmbeddingDimensionError):
        await first.search(np.ones(DIM - 1, dtype=np.float32), VectorFilter(user_id="alice"), 3)
    await first.close()
    with pytest.raises(EmbeddingDimensionError):
        backend.open(dim=DIM * 2)
    reopened = backend.open()  # the failed open left the index usable
    assert await reopened.count() == 1
    await reopened.close()


async def test_rejects_bad_points_and_filters(index: VectorIndex) -> None:
    with pytest.raises(MemoryValidationError, match="all-zero"):
        await index.upsert([point(np.zeros(DIM, dtype=np.float32))])
    bad = basis(0).copy()
    bad[2] = np.nan
    with pytest.raises(MemoryValidationError, match="NaN"):
        await index.upsert([point(bad)])
    with pytest.raises(MemoryValidationError, match="user_id"):
        await index.upsert([VectorPoint(id=str(uuid.uuid4()), vector=basis(0), payload={})])
    with pytest.raises(MemoryValidationError, match="UUID"):
        await index.upsert([point(basis(0), pid="not-a-uuid")])
    with pytest.raises(MemoryValidationError, match="user_id"):
        await index.search(basis(0), VectorFilter(user_id="a b"), 3)
    with pytest.raises(MemoryValidationError):
        await index.search(basis(0), VectorFilter(user_id="alice", equals={"x') OR 1=1": "y"}), 3)
    with pytest.raises(MemoryValidationError):
        await index.search(basis(0), VectorFilter(user_id="alice", ranges={"timestamp": (float("nan"), None)}), 3)
    with pytest.raises(MemoryValidationError):
        await index.search(basis(0), VectorFilter(user_id="alice"), -1)
    assert await index.count() == 0  # nothing of a rejected batch was written


async def test_many_points_many_users(index: VectorIndex) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1500, DIM)).astype(np.float32)
    points = [point(vectors[i], user=f"user{i % 10}", timestamp=float(i)) for i in range(len(vectors))]
    await index.upsert(points)
    assert await index.count() == 1500
    assert await index.count("user3") == 150
    assert len(await index.ids("user3")) == 150
    for i in (0, 777, 1499):
        hits = await index.search(vectors[i], VectorFilter(user_id=f"user{i % 10}"), 5)
        assert hits[0][0] == points[i].id
        assert len(hits) == 5
    await index.delete([p.id for p in points[:500]])
    assert await index.count() == 1000
