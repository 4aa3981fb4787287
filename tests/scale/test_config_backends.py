"""Backends chosen by configuration alone (no server needed for these checks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.vector_stores import SimpleVectorStore

from llama_index_memory_hierarchy.config import MemoryConfig
from llama_index_memory_hierarchy.errors import MemoryValidationError
from llama_index_memory_hierarchy.stores.context import StoreContext
from llama_index_memory_hierarchy.stores.vector import LlamaVectorIndex, load_factory
from llama_index_memory_hierarchy.stores.vector.chroma import collection_name, parse_chroma_url

PG = "postgresql+asyncpg://lmh:s3cret@db.internal:5432/memory"


def simple_store(space: str, dim: int) -> SimpleVectorStore:
    """A ``vector_store_factory`` target: any LlamaIndex vector store for (space, dim)."""
    return SimpleVectorStore()


def test_environment_selects_backends(tmp_path: Path) -> None:
    environ = {"LMH_PERSIST_DIR": str(tmp_path), "LMH_RECORD_STORE_URL": PG}
    assert MemoryConfig.from_env(environ=environ).resolved_vector_backend == "edge"  # beside records on a server
    assert MemoryConfig.from_env(environ={"LMH_PERSIST_DIR": str(tmp_path)}).resolved_vector_backend == "sqlite"
    cases = {
        "qdrant": {"LMH_QDRANT_URL": "http://qdrant:6333", "LMH_QDRANT_API_KEY": "k"},
        "chroma": {"LMH_VECTOR_STORE_URL": "chroma://vectors:8000", "LMH_QDRANT_URL": "http://qdrant:6333"},
        "factory": {"LMH_VECTOR_STORE_FACTORY": "test_config_backends:simple_store"},
        "qdrant-local": {"LMH_QDRANT_PATH": str(tmp_path / "q")},
    }
    for expected, extra in cases.items():
        config = MemoryConfig.from_env(environ={**environ, **extra})
        assert config.resolved_vector_backend == expected
        assert config.records_on_server
        assert config.vectors_on_server == (expected != "qdrant-local")
    sqlite = MemoryConfig.from_env(environ={"LMH_PERSIST_DIR": str(tmp_path)})
    assert not sqlite.records_on_server and not sqlite.vectors_on_server
    shown = repr(MemoryConfig.create(record_store_url=PG, vector_store_url="chroma://u:pw@h:1"))
    assert "s3cret" not in shown and "pw@" not in shown


def test_factory_by_configuration_and_the_folder_lock(tmp_path: Path) -> None:
    """A vector store named in the config serves the memory; SQLite records still lock the folder."""
    from llama_index.core.llms import ChatMessage

    from llama_index_memory_hierarchy.hierarchy import HierarchicalMemory

    memory = HierarchicalMemory.from_defaults(
        user_id="dan",
        persist_dir=str(tmp_path),
        embed_model="hashing",
        vector_store_factory="test_config_backends:simple_store",
    )
    try:
        assert memory.context.locked  # records are embedded: one process owns the folder
        memory.put(ChatMessage(role="user", content="the boat is moored in Kiel"))
        index = memory.context.runtime.run(memory.context.avector_index())
        assert isinstance(index, LlamaVectorIndex) and isinstance(index.store, SimpleVectorStore)
        assert memory.episodic.retrieve("where is the boat moored?", limit=1)[0].content.endswith("Kiel")
    finally:
        memory.close()
    with pytest.raises(MemoryValidationError, match="vector_store_factory"):
        load_factory("no_such_module_xyz:make")
    with pytest.raises(MemoryValidationError, match="vector_store_factory"):
        load_factory("just_a_module")
    with pytest.raises(MemoryValidationError, match="vector_store"):
        StoreContext.acquire(MemoryConfig.create(persist_dir=tmp_path / "x"), vector_store=object())


def test_chroma_urls_and_names() -> None:
    assert parse_chroma_url("chroma://h:9000") == {"host": "h", "port": 9000, "ssl": False}
    assert parse_chroma_url("chromas://h?tenant=t&database=d") == {
        "host": "h",
        "port": 443,
        "ssl": True,
        "tenant": "t",
        "database": "d",
    }
    with pytest.raises(MemoryValidationError):
        parse_chroma_url("http://h:8000")
    assert collection_name("lmh", "all-minilm-l6-v2-384") == "lmh_all-minilm-l6-v2-384"
    odd = collection_name("_x", "space.")
    assert odd[0].isalnum() and odd[-1].isalnum() and odd == collection_name("_x", "space.")
