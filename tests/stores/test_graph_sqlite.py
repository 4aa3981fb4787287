"""What the embedded graph store promises beyond the shared contract: durability, transactions, errors."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, Relation
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError, SchemaVersionError, StoreError
from llama_index_memory_hierarchy.stores.graph import SQLitePropertyGraphStore, open_graph_store


def node(node_id: str, user: str = "u1", **props: object) -> EntityNode:
    return EntityNode(name=node_id, label="PERSON", properties={"user_id": user, **props})


def test_committed_data_survives_reopen(tmp_path: Path) -> None:
    store = SQLitePropertyGraphStore(tmp_path / "graph.db")
    store.upsert([node("a"), node("b")], [Relation(label="KNOWS", source_id="a", target_id="b", properties={})])
    store.close()
    reopened = SQLitePropertyGraphStore(tmp_path / "graph.db")
    assert {n.id for n in reopened.get()} == {"a", "b"}
    assert len(reopened.get_triplets(ids=["a"])) == 1
    assert reopened.count("u1") == {"nodes": 2, "relations": 0}  # relation had no user_id property
    reopened.close()
    reopened.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        reopened.get()


def test_a_failed_call_writes_nothing(tmp_path: Path) -> None:
    store = SQLitePropertyGraphStore(tmp_path / "graph.db")
    store.upsert_nodes([node("a", "u1"), node("b", "u2")])
    with pytest.raises(MemoryValidationError, match="different users"):
        store.upsert(
            [node("c", "u1")],
            [
                Relation(label="KNOWS", source_id="a", target_id="c", properties={"user_id": "u1"}),
                Relation(label="KNOWS", source_id="a", target_id="b", properties={"user_id": "u1"}),
            ],
        )
    assert {n.id for n in store.get()} == {"a", "b"}
    assert store.get_triplets() == []
    with pytest.raises(MemoryValidationError, match="JSON"):
        store.upsert_nodes([node("d", bad=float("nan"))])
    store.close()


def test_corrupt_and_newer_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"bad\.db"):
        SQLitePropertyGraphStore(bad)
    newer = tmp_path / "newer.db"
    SQLitePropertyGraphStore(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE graph_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="99"):
        SQLitePropertyGraphStore(newer)


def test_simple_property_graph_store_is_not_safe_to_delete_from() -> None:
    """Why not the in-memory default: deleting one entity by name wipes every node."""
    simple = SimplePropertyGraphStore()
    simple.upsert_nodes([node("a"), node("b"), node("c")])
    simple.upsert_relations([Relation(label="KNOWS", source_id="a", target_id="b")])
    simple.delete(entity_names=["a"])
    assert simple.get() == []  # "c" was unrelated, yet it is gone


def test_vector_query_filters_by_user(tmp_path: Path) -> None:
    store = SQLitePropertyGraphStore(tmp_path / "graph.db")
    store.upsert_nodes(
        [
            EntityNode(name="a", properties={"user_id": "u1"}, embedding=[1.0, 0.0]),
            EntityNode(name="b", properties={"user_id": "u1"}, embedding=[0.6, 0.8]),
            EntityNode(name="c", properties={"user_id": "u2"}, embedding=[1.0, 0.0]),
            EntityNode(name="d", properties={"user_id": "u1"}),
        ]
    )
    filters = MetadataFilters(filters=[MetadataFilter(key="user_id", value="u1", operator=FilterOperator.EQ)])
    nodes, scores = store.vector_query(
        VectorStoreQuery(query_embedding=[1.0, 0.0], similarity_top_k=5, filters=filters)
    )
    assert [n.id for n in nodes] == ["a", "b"]
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(0.6)
    with pytest.raises(NotImplementedError):
        store.structured_query("MATCH (n) RETURN n")
    store.close()


def test_concurrent_writers_from_threads(tmp_path: Path) -> None:
    store = SQLitePropertyGraphStore(tmp_path / "graph.db")

    def write(worker: int) -> None:
        for i in range(20):
            store.upsert([node(f"w{worker}-{i}")], [])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.count("u1")["nodes"] == 80
    store.close()


def test_a_read_waits_for_no_writer_and_sees_every_committed_write(tmp_path: Path) -> None:
    """Reads use the calling thread's own read-only connection (WAL): a writer holding the store's lock, inside a
    transaction, neither blocks them nor shows them its uncommitted rows."""
    store = SQLitePropertyGraphStore(tmp_path / "graph.db")
    store.upsert([node("a")], [])
    in_transaction, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with store._transaction() as cur:
            cur.execute(
                "INSERT INTO graph_nodes (id, kind, name, label, user_id, properties, updated_at) "
                "VALUES ('b', 'entity', 'b', 'PERSON', 'u1', '{}', 0)"
            )
            in_transaction.set()
            release.wait(10)

    writer = threading.Thread(target=slow_writer)
    writer.start()
    try:
        assert in_transaction.wait(10)
        assert [n.id for n in store.get(ids=["a", "b"])] == ["a"]  # at once: the lock is held, "b" uncommitted
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._readers.get().execute("DELETE FROM graph_nodes")  # the read connection cannot write
    finally:
        release.set()
        writer.join()
    assert [n.id for n in store.get(ids=["a", "b"])] == ["a", "b"]
    reader = store._readers.get()  # this thread's, which the reads above used
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed with the store
        reader.execute("SELECT 1")
    with pytest.raises(StoreError, match="closed"):
        store.get(ids=["a"])


async def test_async_twins_and_factory(tmp_path: Path) -> None:
    store = open_graph_store(MemoryConfig(persist_dir=tmp_path))
    assert isinstance(store, SQLitePropertyGraphStore)
    assert store.path == (tmp_path / "graph.db").resolve()
    await store.aupsert_nodes([node("a"), node("b")])
    await store.aupsert_relations([Relation(label="KNOWS", source_id="a", target_id="b", properties={"user_id": "u1"})])
    assert len(await store.aget_triplets(ids=["a"])) == 1
    assert len(await store.aget_rel_map(await store.aget(ids=["a"]), depth=1)) == 1
    await store.adelete(ids=["a"])
    assert [n.id for n in await store.aget()] == ["b"]
    await store.aclose()
    with pytest.raises(MemoryValidationError, match="graph_store_url"):
        open_graph_store(MemoryConfig(persist_dir=tmp_path, graph_store_url="ftp://example"))
