"""Secrets: no credential from the configuration is logged, stored in a memory, written to an export
or shown in an error message or repr; passwords in URLs are redacted wherever a URL is shown."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from store_checks import hashing

from llama_index_memory_hierarchy import HierarchicalMemory
from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import MemoryHierarchyError

SECRET = "Tops3cretPa55"
KEY = "qdr-KEY-9f8e7d6c5b4a"
# Nothing listens on port 1: connections are refused at once.
DEAD_PG = f"postgresql+asyncpg://lmh:{SECRET}@127.0.0.1:1/lmh"


@pytest.mark.parametrize(
    ("url", "hidden"),
    [
        (f"postgresql+asyncpg://lmh:{SECRET}@db.example:5432/lmh", SECRET),
        (f"postgresql://user:p@ss{SECRET}@host/db", SECRET),  # a raw '@' inside the password
        (f"postgresql://user:pa:ss/{SECRET}@host/db", SECRET),  # raw ':' and '/' inside it
        (f"redis://:{SECRET}@host:6379", SECRET),
        (f"neo4j+s://neo4j:{SECRET}@x.databases.neo4j.io", SECRET),
        (f"https://qdrant.example:6333/?api_key={KEY}", KEY),
        (f"postgresql://host/db?user=u&password={SECRET}", SECRET),
        (f"chromas://host:8000/?token={KEY}&tenant=t", KEY),
    ],
)
def test_redact_url_hides_every_form_of_secret(url: str, hidden: str) -> None:
    redacted = redact_url(url)
    assert hidden not in redacted and "***" in redacted
    assert redacted.split("://")[0] == url.split("://")[0]


def test_redact_url_leaves_plain_urls_alone() -> None:
    for url in ["sqlite+aiosqlite:////tmp/x/memory.db", "http://localhost:6333", "https://h/p?email=a@b.c", None]:
        assert redact_url(url) == url


def _secret_config(folder: Path, **extra: Any) -> MemoryConfig:
    return MemoryConfig.create(
        persist_dir=str(folder),
        user_id="alice",
        session_id="s1",
        qdrant_api_key=KEY,
        graph_store_password=SECRET,
        vector_store_api_key=KEY,
        **extra,
    )


def test_config_repr_and_str_hide_secrets(tmp_path: Path) -> None:
    config = _secret_config(
        tmp_path,
        record_store_url=DEAD_PG,
        qdrant_url=f"https://admin:{SECRET}@q.example:6333",
        graph_store_url=f"bolt://neo4j:{SECRET}@g.example:7687",
    )
    for text in (repr(config), str(config), f"{config}", f"{config!r}"):
        assert SECRET not in text and KEY not in text, text
    env = {"LMH_QDRANT_API_KEY": KEY, "LMH_RECORD_STORE_URL": DEAD_PG, "LMH_PERSIST_DIR": str(tmp_path)}
    from_env = MemoryConfig.from_env(environ=env)
    assert KEY not in repr(from_env) and SECRET not in repr(from_env)


def test_store_reprs_hide_secrets(tmp_path: Path) -> None:
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

    store = SQLRecordStore(DEAD_PG)
    assert SECRET not in repr(store) and SECRET not in store.where
    from llama_index_memory_hierarchy.stores.vector import qdrant_vector_index

    try:
        index = qdrant_vector_index("space-8", 8, url=f"http://admin:{SECRET}@127.0.0.1:1", api_key=KEY)
    except MemoryHierarchyError as exc:
        _assert_clean_exception(exc)
    else:
        assert SECRET not in repr(index) and KEY not in repr(index)


def _assert_clean_exception(exc: BaseException) -> None:
    """Neither the error nor anything chained to it shows a secret (what a traceback would print)."""
    text = "".join(traceback.format_exception(exc))
    assert SECRET not in text and KEY not in text, text[-3000:]


def _assert_clean_logs(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        rendered = record.getMessage() + (record.exc_text or "")
        if record.exc_info:
            rendered += "".join(traceback.format_exception(*record.exc_info))
        assert SECRET not in rendered and KEY not in rendered, rendered[:2000]


def test_unreachable_record_server_error_hides_the_password(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(MemoryHierarchyError) as caught:
        HierarchicalMemory.from_defaults(
            config=_secret_config(tmp_path, record_store_url=DEAD_PG), embed_model=hashing()
        )
    assert "127.0.0.1" in str(caught.value)  # it still says where
    _assert_clean_exception(caught.value)
    _assert_clean_logs(caplog)


def test_unreachable_record_server_direct_store_error(caplog: pytest.LogCaptureFixture) -> None:
    from llama_index_memory_hierarchy.stores.record_sql import SQLRecordStore

    caplog.set_level(logging.DEBUG)
    store = SQLRecordStore(DEAD_PG)
    store.max_attempts = 2
    with pytest.raises(MemoryHierarchyError) as caught:
        asyncio.run(store.start())
    _assert_clean_exception(caught.value)
    _assert_clean_logs(caplog)


def test_unreachable_vector_server_error_hides_the_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    config = _secret_config(tmp_path, qdrant_url=f"http://admin:{SECRET}@127.0.0.1:1")
    try:
        memory = HierarchicalMemory.from_defaults(config=config, embed_model=hashing())
    except MemoryHierarchyError as exc:
        _assert_clean_exception(exc)
    else:
        try:
            with pytest.raises(MemoryHierarchyError) as caught:
                memory.episodic.add("a memory that needs the vector server")
                memory.episodic.retrieve("needs the vector server")
            _assert_clean_exception(caught.value)
        finally:
            memory.close()
    _assert_clean_logs(caplog)


@pytest.mark.slow  # the Neo4j driver retries for about 30 s before it gives up
def test_unreachable_graph_server_error_hides_the_password(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("llama_index.graph_stores.neo4j")
    caplog.set_level(logging.DEBUG)
    config = _secret_config(tmp_path, graph_store_url="bolt://127.0.0.1:1", graph_store_username="neo4j")
    with HierarchicalMemory.from_defaults(config=config, embed_model=hashing()) as memory:
        with pytest.raises(Exception) as caught:  # whatever the driver raises must be clean
            memory.semantic.add_fact("Alice", "knows", "Bob")
        _assert_clean_exception(caught.value)
    _assert_clean_logs(caplog)


def test_secrets_are_never_stored_or_exported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Run a whole session with credentials in the config; no file in the folder and no export holds them."""
    caplog.set_level(logging.DEBUG)
    folder = tmp_path / "memory_data"
    config = _secret_config(folder)
    with HierarchicalMemory.from_defaults(config=config, embed_model=hashing()) as memory:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        memory.put(ChatMessage(role=MessageRole.USER, content="I booked the dentist for Tuesday"))
        memory.episodic.add("the gym closes at nine")
        memory.semantic.add_fact("Alice", "works_at", "Acme")
        memory.perceptual.add("a photo of the harbour at dusk")
        memory.get(input="when is the dentist?")
        memory.manager.export_user(None, tmp_path / "export.json")
        transcript = memory.manager.export_session(format="json")
        from llama_index_memory_hierarchy.tools import MemoryToolSpec

        tools = MemoryToolSpec(memory)
        outputs = [tools.memory_stats(), tools.memory_summary(), tools.recall("dentist")]
    for path in [*folder.rglob("*"), tmp_path / "export.json"]:
        if path.is_file() and path.stat().st_size < 50_000_000:
            data = path.read_bytes()
            assert SECRET.encode() not in data and KEY.encode() not in data, f"secret stored in {path}"
    exported = json.loads((tmp_path / "export.json").read_text())
    assert SECRET not in json.dumps(exported) and KEY not in json.dumps(exported)
    assert all(SECRET not in text and KEY not in text for text in [transcript, *outputs])
    _assert_clean_logs(caplog)
