"""Contract suite of the record store, run on SQLite (embedded) and PostgreSQL (local server).

PostgreSQL: ``LMH_TEST_POSTGRES_URL`` (default ``postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test``)
names a database the role can connect to; the role needs CREATEDB. A fresh database is created
per test run and dropped afterwards; each test starts from an empty schema. When the server is
unreachable the PostgreSQL variants are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import MemoryValidationError, SchemaVersionError, StoreError
from llama_index_memory_hierarchy.stores import schema
from llama_index_memory_hierarchy.stores.base import Record
from llama_index_memory_hierarchy.stores.record_sql import SQLiteFTS5Strategy, SQLRecordStore
from llama_index_memory_hierarchy.text import count_tokens, keyword_scope, keyword_text, keyword_tokens
from llama_index_memory_hierarchy.types import MemoryFilter, MemoryItem, MemoryType

PG_DEFAULT_URL = "postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test"
T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)

HOSTILE_QUERIES = [
    '"',
    '""',
    "*",
    "NEAR(",
    "NEAR(a b",
    "OR",
    "AND NOT",
    "-",
    ":",
    "keyword:python",
    "^python",
    "python*",
    '"unterminated',
    "(",
    ")",
    "{a b}",
    "'; DROP TABLE memories; --",
    "1' OR '1'='1",
    "Robert'); DROP TABLE schema_info;--",
    "\\",
    "%_",
    "a & b | !c <-> d",
    "",
    "   ",
]


# --------------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------------


def _run_isolated(factory: Callable[[], Awaitable[Any]]) -> Any:
    """Run a coroutine on a private loop in a worker thread (callable from inside a running loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()  # type: ignore[arg-type]


def _asyncpg_dsn(url: str | sa.engine.URL) -> str:
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _pg_execute(url: str | sa.engine.URL, *statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_asyncpg_dsn(url), timeout=5)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run (dropped afterwards)."""
    base = os.environ.get("LMH_TEST_POSTGRES_URL", PG_DEFAULT_URL)
    name = f"lmh_test_{uuid.uuid4().hex[:12]}"
    try:
        _run_isolated(lambda: _pg_execute(base, f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # unreachable server, missing role, no CREATEDB
        pytest.skip(
            f"PostgreSQL unavailable at {redact_url(base)}: {type(exc).__name__}: {exc}. "
            "Start it and create the role (see the CI script), or set LMH_TEST_POSTGRES_URL."
        )
    try:
        yield sa.engine.make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        _run_isolated(lambda: _pg_execute(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """An empty database of the backend under test."""
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{(tmp_path / 'memory.db').as_posix()}"
    url = request.getfixturevalue("pg_url")
    await _pg_execute(url, "DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public")
    return url


@pytest.fixture
async def make_store(store_url: str) -> AsyncIterator[Callable[..., Awaitable[SQLRecordStore]]]:
    """Factory of started stores on the test's database; all closed afterwards."""
    opened: list[SQLRecordStore] = []

    async def factory(**kwargs: Any) -> SQLRecordStore:
        store = SQLRecordStore(store_url, **kwargs)
        await store.start()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


@pytest.fixture
async def store(make_store: Callable[..., Awaitable[SQLRecordStore]]) -> SQLRecordStore:
    return await make_store()


def rec(
    content: str,
    *,
    user_id: str = "alice",
    namespace: str = "memory",
    embedding: np.ndarray | None = None,
    space: str | None = None,
    **fields: Any,
) -> Record:
    return Record(
        item=MemoryItem.create(content=content, user_id=user_id, **fields),
        namespace=namespace,
        embedding=embedding,
        space=space,
    )


def vec(seed: int, dim: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


# --------------------------------------------------------------------------------------------------
# text helpers
# --------------------------------------------------------------------------------------------------


def test_keyword_tokens() -> None:
    assert keyword_tokens("Hello, World! snake_case café") == ["hello", "world", "snake", "case", "café"]
    assert keyword_tokens("我喜欢学习Python编程") == ["我", "喜欢", "学习", "python", "编程"]
    assert keyword_tokens('say "hi" NEAR(x) OR a* -b c:d') == ["say", "hi", "near", "x", "or", "a", "b", "c", "d"]
    assert keyword_tokens("Ｐｙｔｈｏｎ") == ["python"]  # NFKC folds full-width letters
    assert "テキスト" in keyword_tokens("日本語のテキスト")
    assert keyword_tokens("!!! ... ---") == []
    assert keyword_text("A  b,C") == "a b c"
    assert count_tokens("") == 0
    assert 0 < count_tokens("hello world, this is a test") < 10


def test_fts5_match_expression_quotes_everything() -> None:
    expression = SQLiteFTS5Strategy.match_expression(["a", 'b"c', "or"], "s0a")
    assert expression == '"s0aa" OR "s0ab""c" OR "s0aor"'


# --------------------------------------------------------------------------------------------------
# contract
# --------------------------------------------------------------------------------------------------


async def test_round_trip_every_field(store: SQLRecordStore) -> None:
    embedding = vec(1, 384)
    local = timezone(timedelta(hours=9))
    item = MemoryItem.create(
        content="Ünïcode ✓ 内容 — with \"quotes\" and 'apostrophes'\nnew line",
        memory_type=MemoryType.SEMANTIC,
        user_id="alice",
        session_id="s-1",
        timestamp=T0.astimezone(local),
        created_at=T0 + timedelta(seconds=1.5),
        importance=0.73,
        access_count=5,
        last_accessed=T0 + timedelta(days=2, microseconds=7),
        pinned=True,
        metadata={"str": "v", "int": 3, "float": 2.5, "bool": False, "none": None, "list": [1, "x"], "d": {"z": 1}},
    )
    plain = MemoryItem.create(content="plain", user_id="alice")
    ids = await store.insert(
        [Record(item=item, namespace="kb:docs", embedding=embedding, space="minilm-384"), Record(item=plain)]
    )
    assert ids == [item.id, plain.id]

    [full] = await store.get("alice", [item.id], with_embeddings=True)
    assert full.namespace == "kb:docs"
    assert full.space == "minilm-384"
    assert full.embedding is not None and full.embedding.dtype == np.float32
    np.testing.assert_array_equal(full.embedding, embedding)
    got = full.item
    for name in ("id", "content", "memory_type", "user_id", "session_id", "importance", "access_count", "pinned"):
        assert getattr(got, name) == getattr(item, name), name
    assert got.metadata == item.metadata
    for name in ("timestamp", "created_at", "last_accessed"):
        value = getattr(got, name)
        assert value == getattr(item, name), name
        assert value.tzinfo is not None and value.utcoffset() == timedelta(0), name
    assert got.score is None

    [light] = await store.get("alice", [item.id])
    assert light.embedding is None and light.space == "minilm-384"

    [bare] = await store.get("alice", [plain.id], with_embeddings=True)
    assert bare.embedding is None and bare.space is None and bare.item.last_accessed is None
    assert bare.item.session_id is None and bare.namespace == "memory"
    assert bare.item.memory_type is MemoryType.EPISODIC

    [queried] = await store.query("alice", namespace="kb:docs", with_embeddings=True)
    assert queried.item.model_dump() == got.model_dump()


async def test_get_order_duplicates_and_missing(store: SQLRecordStore) -> None:
    ids = await store.insert([rec(f"note {i}") for i in range(3)])
    missing = str(uuid.uuid4())
    got = await store.get("alice", [ids[2], missing, ids[0], ids[2]])
    assert [r.item.id for r in got] == [ids[2], ids[0]]
    assert await store.get("alice", []) == []
    assert await store.insert([]) == []


async def test_dedupe(store: SQLRecordStore) -> None:
    [first] = await store.insert([rec("I like tea", session_id="s1")], dedupe=True)
    again = await store.insert(
        [
            rec("I like tea", session_id="s1"),  # duplicate of the stored one
            rec("I like tea", session_id="s2"),  # other session: new
            rec("I like tea", session_id="s1", memory_type="semantic"),  # other type: new
            rec("I like tea", session_id="s1", namespace="kb:x"),  # other namespace: new
            rec("I like tea", session_id="s1", user_id="bob"),  # other user: new
            rec("I like tea!", session_id="s1"),  # other content: new
            rec("fresh", session_id="s1", embedding=vec(2), space="sp"),
            rec("fresh", session_id="s1", embedding=vec(3), space="sp"),  # duplicate within the batch
        ],
        dedupe=True,
    )
    assert again[0] == first
    assert len(set(again[1:7])) == 6 and first not in again[1:7]
    assert again[7] == again[6]
    assert await store.count(None, namespace=None) == 7
    pending = await store.outbox_pending()
    assert [(op.op, op.memory_id) for op in pending] == [("upsert", again[6])]

    no_dedupe = await store.insert([rec("I like tea", session_id="s1")])
    assert no_dedupe[0] != first
    assert await store.count("alice", filters=MemoryFilter(session_id="s1")) == 5


async def test_duplicate_id_fails_whole_batch(store: SQLRecordStore) -> None:
    existing = rec("original text", embedding=vec(1), space="sp")
    await store.insert([existing])
    before_outbox = await store.outbox_pending()
    clash = Record(item=MemoryItem.create(id=existing.item.id, content="other text", user_id="alice"))
    with pytest.raises(MemoryValidationError) as info:
        await store.insert([rec("zebra crossing", embedding=vec(2), space="sp"), clash])
    assert info.value.field == "id"
    assert await store.count(None) == 1
    assert await store.keyword_search("alice", "zebra") == []
    assert await store.outbox_pending() == before_outbox


async def test_scoping_by_user(store: SQLRecordStore) -> None:
    [mine] = await store.insert([rec("alice secret plan", importance=0.4)])
    [theirs] = await store.insert([rec("bob secret plan", user_id="bob")])
    assert await store.get("bob", [mine]) == []
    assert await store.update("bob", mine, content="hijacked", importance=1.0) is None
    assert await store.delete("bob", [mine]) == []
    await store.touch("bob", [mine])
    [kept] = await store.get("alice", [mine])
    assert kept.item.content == "alice secret plan" and kept.item.importance == 0.4 and kept.item.access_count == 0
    assert [i for i, _ in await store.keyword_search("bob", "secret plan")] == [theirs]
    assert [r.item.id for r in await store.query("bob")] == [theirs]
    assert await store.count("bob") == 1 and await store.count(None) == 2
    assert await store.delete_where("bob", namespace=None) == [theirs]
    assert await store.users() == ["alice"]


async def test_filters(store: SQLRecordStore) -> None:
    low = {"importance": 0.2}
    rows = [
        rec("a", session_id="s1", timestamp=T0, importance=0.1, metadata={"topic": "food", "n": 1, "ok": True}),
        rec("b", session_id="s1", timestamp=T0 + timedelta(hours=1), importance=0.5, metadata={"topic": "work"}),
        rec("c", session_id="s2", timestamp=T0 + timedelta(hours=2), importance=0.9, metadata={"n": 1.0, "ok": 1}),
        rec(
            "d", session_id="s2", timestamp=T0 + timedelta(hours=3), memory_type="semantic", metadata={"n": None}, **low
        ),
        rec("e", timestamp=T0 + timedelta(hours=4), metadata={"tags": ["x", "y"], "obj": {"b": 2, "a": [1]}}, **low),
        rec("f", namespace="kb:manual", timestamp=T0, metadata={"topic": "food"}),
    ]
    ids = await store.insert(rows)
    a, b, c, d, e, _f = ids

    async def contents(**kwargs: Any) -> list[str]:
        memory_type = kwargs.pop("memory_type", None)
        namespace = kwargs.pop("namespace", "memory")
        flt = MemoryFilter.from_kwargs(**kwargs) if kwargs else None
        found = await store.query("alice", namespace=namespace, memory_type=memory_type, filters=flt)
        assert await store.count("alice", namespace=namespace, memory_type=memory_type, filters=flt) == len(found)
        return [r.item.content for r in found]

    assert await contents() == ["a", "b", "c", "d", "e"]
    assert await contents(session_id="s1") == ["a", "b"]
    assert await contents(time_range=(T0 + timedelta(hours=1), T0 + timedelta(hours=3))) == ["b", "c", "d"]
    assert await contents(start_time=T0 + timedelta(hours=4)) == ["e"]  # inclusive bound, exact float
    assert await contents(end_time=T0) == ["a"]
    assert await contents(min_importance=0.5) == ["b", "c"]
    assert await contents(memory_type=MemoryType.SEMANTIC) == ["d"]
    assert await contents(namespace="kb:manual") == ["f"]
    assert await contents(metadata={"topic": "food"}) == ["a"]
    assert await contents(metadata={"topic": "food", "n": 1}) == ["a"]
    assert await contents(metadata={"n": 1}) == ["a", "c"]  # 1 == 1.0 as JSON numbers
    assert await contents(metadata={"ok": True}) == ["a"]  # true is not 1
    assert await contents(metadata={"ok": 1}) == ["c"]
    assert await contents(metadata={"n": None}) == ["d"]  # present and null; absent keys do not match
    assert await contents(metadata={"tags": ["x", "y"]}) == ["e"]
    assert await contents(metadata={"tags": ["y", "x"]}) == []
    assert await contents(metadata={"obj": {"a": [1], "b": 2}}) == ["e"]  # key order is irrelevant
    assert await contents(metadata={"topic": "Food"}) == []
    assert await contents(metadata={"missing": "x"}) == []
    assert await contents(memory_ids=[c, a, str(uuid.uuid4())]) == ["a", "c"]
    assert await contents(memory_ids=[]) == []
    assert await contents(session_id="s2", min_importance=0.5) == ["c"]
    assert await store.count(None, namespace=None) == 6

    deleted = await store.delete_where("alice", filters=MemoryFilter(metadata={"topic": "work"}))
    assert deleted == [b]
    deleted = await store.delete_where("alice", memory_type=MemoryType.SEMANTIC)
    assert deleted == [d]
    assert sorted(await store.delete_where("alice")) == sorted([a, c, e])
    assert await contents(namespace="kb:manual") == ["f"]


async def test_ordering_and_pagination(store: SQLRecordStore) -> None:
    rows = [
        rec(f"item {i}", timestamp=T0 + timedelta(minutes=(i * 7) % 10), importance=(i % 4) / 4, created_at=T0)
        for i in range(10)
    ]
    await store.insert(rows)
    by_id = {r.item.id: r.item for r in rows}
    order_keys = {
        "timestamp": lambda it: it.timestamp,
        "importance": lambda it: it.importance,
        "created_at": lambda it: it.created_at,
    }
    for order_by in ("timestamp", "-timestamp", "importance", "-importance", "created_at", "-created_at"):
        full = await store.query("alice", order_by=order_by)  # type: ignore[arg-type]
        values = [order_keys[order_by.lstrip("-")](by_id[r.item.id]) for r in full]
        assert values == sorted(values, reverse=order_by.startswith("-")), order_by
        pages = []
        for offset in range(0, 10, 3):
            pages += await store.query("alice", order_by=order_by, limit=3, offset=offset)  # type: ignore[arg-type]
        assert [r.item.id for r in pages] == [r.item.id for r in full], order_by
    assert await store.query("alice", limit=0) == []
    assert len(await store.query("alice", offset=8)) == 2
    with pytest.raises(MemoryValidationError):
        await store.query("alice", order_by="content")  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError):
        await store.query("alice", limit=-1)


async def test_keyword_search_english_and_chinese(store: SQLRecordStore) -> None:
    zh, en1, en2, other = await store.insert(
        [
            rec("我喜欢学习Python编程", session_id="s1"),
            rec("The quick brown fox jumps over the lazy dog", session_id="s1"),
            rec("A fox, a fox! Another fox sighting near the den", session_id="s2", memory_type="semantic"),
            rec("Completely unrelated sentence about gardening"),
        ]
    )
    assert [i for i, _ in await store.keyword_search("alice", "Python")] == [zh]
    assert [i for i, _ in await store.keyword_search("alice", "python")] == [zh]
    assert [i for i, _ in await store.keyword_search("alice", "学习")] == [zh]
    assert [i for i, _ in await store.keyword_search("alice", "我想学习编程")] == [zh]
    results = await store.keyword_search("alice", "fox")
    assert [i for i, _ in results] == [en2, en1]  # more occurrences rank higher
    assert results[0][1] > results[1][1] > 0
    assert [i for i, _ in await store.keyword_search("alice", "FOX", limit=1)] == [en2]
    assert await store.keyword_search("alice", "fox", limit=0) == []
    assert [i for i, _ in await store.keyword_search("alice", "fox", memory_type=MemoryType.EPISODIC)] == [en1]
    found = await store.keyword_search("alice", "fox gardening", filters=MemoryFilter(session_id="s1"))
    assert [i for i, _ in found] == [en1]
    assert {i for i, _ in await store.keyword_search("alice", "dog gardening")} == {en1, other}
    assert await store.keyword_search("alice", "fox", namespace="kb:none") == []
    assert await store.keyword_search("alice", "elephant") == []


async def test_hostile_text_stays_data(store: SQLRecordStore) -> None:
    hostile_meta = {"'; DROP TABLE memories; --": "x\"y'z", "$.a[0]": "path", "k": "1' OR '1'='1"}
    contents = [*HOSTILE_QUERIES[:-2], "near the python keyword"]
    ids = await store.insert([rec(text, metadata=hostile_meta) for text in contents])
    for query in HOSTILE_QUERIES:
        results = await store.keyword_search("alice", query)
        assert all(i in ids for i, _ in results), query
    near = await store.keyword_search("alice", "NEAR(")
    assert ids[-1] in [i for i, _ in near] and ids[contents.index("NEAR(")] in [i for i, _ in near]
    with_python = {ids[n] for n, text in enumerate(contents) if "python" in text}
    assert {i for i, _ in await store.keyword_search("alice", "python*")} == with_python
    stored = await store.get("alice", ids)
    assert [r.item.content for r in stored] == contents
    assert all(r.item.metadata == hostile_meta for r in stored)
    for key, value in hostile_meta.items():
        assert await store.count("alice", filters=MemoryFilter(metadata={key: value})) == len(contents)
    assert await store.count("alice", filters=MemoryFilter(metadata={"k": "1"})) == 0
    assert await store.count(None) == len(contents)  # tables intact


async def test_update(store: SQLRecordStore) -> None:
    [mid] = await store.insert([rec("old words about cats", importance=0.2, metadata={"a": 1})])
    updated = await store.update("alice", mid, content="new words about dogs", importance=0.8, metadata={"b": 2})
    assert updated is not None
    assert updated.item.content == "new words about dogs" and updated.item.importance == 0.8
    assert updated.item.metadata == {"b": 2}
    assert await store.keyword_search("alice", "cats") == []
    assert [i for i, _ in await store.keyword_search("alice", "dogs")] == [mid]
    assert await store.outbox_pending() == []  # no embedding: nothing to index

    pinned = await store.update("alice", mid, pinned=True, embedding=vec(5), space="sp1")
    assert pinned is not None and pinned.item.pinned and pinned.space == "sp1"
    np.testing.assert_array_equal(pinned.embedding, vec(5))
    moved = await store.update("alice", mid, embedding=vec(6), space="sp2")
    assert moved is not None and moved.space == "sp2"
    ops = [(op.op, op.space) for op in await store.outbox_pending()]
    assert ops == [("upsert", "sp1"), ("delete", "sp1"), ("upsert", "sp2")]
    [again] = await store.get("alice", [mid], with_embeddings=True)
    np.testing.assert_array_equal(again.embedding, vec(6))
    assert again.item.pinned and again.item.metadata == {"b": 2} and again.item.importance == 0.8

    unchanged = await store.update("alice", mid)
    assert unchanged is not None and unchanged.item.content == "new words about dogs"
    assert await store.update("alice", str(uuid.uuid4()), importance=0.1) is None
    for kwargs in ({"importance": 1.5}, {"content": "  "}, {"metadata": {1: "x"}}, {"embedding": np.array([np.nan])}):
        with pytest.raises(MemoryValidationError):
            await store.update("alice", mid, **kwargs)
    with pytest.raises(MemoryValidationError):
        await store.update("alice", "not-a-uuid", importance=0.1)


async def test_set_keywords_replaces_what_the_index_holds_for_that_user_only(store: SQLRecordStore) -> None:
    [mine] = await store.insert([rec("a reply", user_id="alice")])
    [theirs] = await store.insert([rec("another reply", user_id="bob")])

    found = await store.set_keywords("alice", {mine: "about cats\na reply", theirs: "about cats"})

    assert found == 1  # bob's record is not alice's to rewrite
    assert [i for i, _ in await store.keyword_search("alice", "cats")] == [mine]
    assert await store.keyword_search("bob", "cats") == []
    [record] = await store.get("alice", [mine])
    assert record.item.content == "a reply"  # the content is untouched
    assert await store.set_keywords("alice", {mine: "a reply"}) == 1
    assert await store.keyword_search("alice", "cats") == []
    assert await store.set_keywords("alice", {}) == 0
    for texts in ({"not-a-uuid": "x"}, {mine: "  "}):
        with pytest.raises(MemoryValidationError):
            await store.set_keywords("alice", texts)


async def test_get_with_keywords_reads_the_terms_the_index_holds(store: SQLRecordStore) -> None:
    """What the search reads to tell a turn's own words from its context's: the analysed keyword text."""
    [turn] = await store.insert(
        [
            Record(
                item=MemoryItem.create(content="Sure, I walked", user_id="alice"),
                keyword="Ann: Did you walk the dogs?\nSure, I walked",
            )
        ]
    )
    [indexed] = await store.get("alice", [turn], with_keywords=True)
    assert indexed.keyword == "ann did you walk the dog sure i walk"
    [plain] = await store.get("alice", [turn], with_embeddings=True)
    assert plain.keyword is None  # only when asked
    assert await store.get("bob", [turn], with_keywords=True) == []


async def test_touch(store: SQLRecordStore) -> None:
    ids = await store.insert([rec("one"), rec("two")])
    before = datetime.now(UTC) - timedelta(seconds=1)
    await store.touch("alice", [ids[0], ids[0]])
    await store.touch("alice", ids)
    first, second = await store.get("alice", ids)
    assert first.item.access_count == 2 and second.item.access_count == 1
    assert first.item.last_accessed is not None and first.item.last_accessed >= before
    assert first.item.last_accessed.tzinfo is not None
    await store.touch("alice", [])
    await store.touch("alice", [ids[1]], times=3)  # a burst of reads, written at once (stores/access.py)
    assert (await store.get("alice", [ids[1]]))[0].item.access_count == 4
    with pytest.raises(MemoryValidationError, match="times"):
        await store.touch("alice", ids, times=0)


async def test_outbox_written_with_inserts_and_deletes(store: SQLRecordStore) -> None:
    ids = await store.insert(
        [
            rec("embedded one", embedding=vec(1), space="sp"),
            rec("not embedded"),
            rec("embedded two", user_id="bob", embedding=vec(2), space="sp"),
        ]
    )
    pending = await store.outbox_pending()
    assert [(op.op, op.memory_id, op.user_id, op.space) for op in pending] == [
        ("upsert", ids[0], "alice", "sp"),
        ("upsert", ids[2], "bob", "sp"),
    ]
    assert pending[0].seq < pending[1].seq
    assert len(await store.outbox_pending(limit=1)) == 1
    await store.outbox_ack([op.seq for op in pending])
    assert await store.outbox_pending() == []

    assert await store.delete("alice", [ids[1], ids[0], str(uuid.uuid4())]) == [ids[1], ids[0]]
    assert [(op.op, op.memory_id) for op in await store.outbox_pending()] == [("delete", ids[0])]
    await store.outbox_ack([op.seq for op in await store.outbox_pending()])
    await store.outbox_ack([])


async def test_iter_embedded(store: SQLRecordStore) -> None:
    ids = await store.insert(
        [rec(f"v{i}", user_id=f"u{i % 2}", embedding=vec(i), space="sp" if i != 3 else "other") for i in range(7)]
        + [rec("no vector")]
    )
    seen: list[str] = []
    after = 0
    while batch := await store.iter_embedded("sp", batch_size=2, after_seq=after):
        assert len(batch) <= 2
        for seq, record in batch:
            assert seq > after and record.space == "sp" and record.embedding is not None
            np.testing.assert_array_equal(record.embedding, vec(int(record.item.content[1:])))
            seen.append(record.item.id)
        after = batch[-1][0]
    assert seen == [ids[i] for i in (0, 1, 2, 4, 5, 6)]
    assert [r.item.id for _, r in await store.iter_embedded("other")] == [ids[3]]


async def test_users_and_delete_user(store: SQLRecordStore) -> None:
    extra = sa.Table(
        "test_extra_user_rows",
        schema.metadata,
        sa.Column("pk", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
    )
    try:
        await store.create_tables()
        async with store.engine.begin() as conn:
            await conn.execute(sa.insert(extra), [{"user_id": "alice"}, {"user_id": "alice"}, {"user_id": "bob"}])
        alice = await store.insert([rec("a1", embedding=vec(1), space="sp"), rec("a2"), rec("a3", namespace="kb:x")])
        [bob] = await store.insert([rec("b1", user_id="bob", embedding=vec(2), space="sp")])
        assert await store.users() == ["alice", "bob"]

        counts = await store.delete_user("alice")
        assert counts["memories"] == 3 and counts["test_extra_user_rows"] == 2 and counts["index_outbox"] == 1
        assert await store.users() == ["bob"]
        assert await store.count("alice", namespace=None) == 0
        assert await store.keyword_search("alice", "a1") == []
        pending = [(op.op, op.memory_id) for op in await store.outbox_pending()]
        assert pending == [("upsert", bob), ("delete", alice[0])]  # a tombstone replaces alice's upsert
        async with store.engine.connect() as conn:
            left = (await conn.execute(sa.select(extra.c.user_id))).scalars().all()
        assert left == ["bob"]
    finally:
        schema.metadata.remove(extra)


async def test_validation_errors(store: SQLRecordStore) -> None:
    with pytest.raises(MemoryValidationError):
        await store.get("bad user/../", [])
    with pytest.raises(MemoryValidationError):
        await store.get("alice", ["not-a-uuid"])
    with pytest.raises(MemoryValidationError):
        await store.get("alice", "0b1e6c2e-8d0e-4d5e-9c52-8f2f6d3b7a10")  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError):
        await store.insert([rec("x", embedding=np.ones((2, 2)), space="sp")])
    with pytest.raises(MemoryValidationError):
        await store.insert([rec("x", embedding=np.array([1.0, np.inf]), space="sp")])
    with pytest.raises(MemoryValidationError):
        await store.insert([rec("x", namespace="bad namespace")])
    with pytest.raises(MemoryValidationError):
        await store.insert(["not a record"])  # type: ignore[list-item]
    with pytest.raises(MemoryValidationError):
        await store.keyword_search("alice", "x", limit=-1)
    with pytest.raises(MemoryValidationError):
        await store.count("alice", memory_type="feelings")  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError):
        await store.outbox_pending(limit=0)
    assert await store.count(None) == 0


async def test_concurrent_inserts_exact_counts(store: SQLRecordStore) -> None:
    async def writer(task: int) -> list[str]:
        records = [rec(f"task {task} note {i}", user_id=f"user{task % 3}") for i in range(5)]
        return await store.insert(records)

    results = await asyncio.gather(*(writer(t) for t in range(40)))
    ids = [i for batch in results for i in batch]
    assert len(set(ids)) == 200
    assert await store.count(None) == 200
    assert sum([await store.count(f"user{u}") for u in range(3)]) == 200

    same = await asyncio.gather(*(store.insert([rec("the same fact", user_id="dup")], dedupe=True) for _ in range(20)))
    assert len({batch[0] for batch in same}) == 1
    assert await store.count("dup") == 1

    mixed = await asyncio.gather(
        *(store.touch("dup", [same[0][0]]) for _ in range(10)),
        *(store.query("user1", limit=5) for _ in range(10)),
    )
    assert all(len(result) == 5 for result in mixed[10:])
    [touched] = await store.get("dup", [same[0][0]])
    assert touched.item.access_count == 10


EXTRA_REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "test_next"
down_revision = {head!r}
branch_labels = None
depends_on = None
schema_version = {version}


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("test_extra", sa.Integer(), nullable=True))
"""


async def test_schema_version_refusal_and_migration(
    store: SQLRecordStore, make_store: Callable[..., Awaitable[SQLRecordStore]], tmp_path: Path
) -> None:
    """Alembic is the one migration mechanism: revisions run on open; unknown/newer schemas are refused."""
    from llama_index_memory_hierarchy.stores import migrations

    assert migrations.head_schema_version() == schema.SCHEMA_VERSION
    [mid] = await store.insert([rec("kept across reopen")])
    info = schema.schema_info

    async def scalar(sql: str) -> Any:
        async with store.engine.connect() as conn:
            return (await conn.exec_driver_sql(sql)).scalar_one()

    assert await scalar("SELECT version_num FROM alembic_version") == migrations.head_revision()

    # A database created before Alembic (schema version 1 in schema_info, no alembic_version) is
    # stamped at the baseline and upgraded: rows stay, and later revisions backfill what they add.
    from alembic import command

    async with store.engine.begin() as conn:
        baseline = migrations.BASELINE_REVISION
        await conn.run_sync(lambda sync: command.downgrade(migrations.alembic_config(sync), baseline))
        await conn.exec_driver_sql("DROP TABLE alembic_version")
        await conn.execute(sa.update(info).values(version=1))
    legacy = await make_store()
    assert await scalar("SELECT version_num FROM alembic_version") == migrations.head_revision()
    assert await scalar("SELECT version FROM schema_info") == schema.SCHEMA_VERSION
    assert [r.item.content for r in await legacy.get("alice", [mid])] == ["kept across reopen"]
    assert [i for i, _ in await legacy.keyword_search("alice", "kept")] == [mid]

    # A new revision runs inside the caller's transaction and bumps schema_info.
    extra = tmp_path / "extra_versions"
    extra.mkdir()
    head, version = migrations.head_revision(), schema.SCHEMA_VERSION + 1
    (extra / "test_next.py").write_text(EXTRA_REVISION.format(head=head, version=version))
    async with store.engine.begin() as conn:
        await conn.run_sync(lambda sync: migrations.upgrade(sync, extra_locations=(str(extra),)))
    assert await scalar("SELECT version_num FROM alembic_version") == "test_next"
    assert await scalar("SELECT version FROM schema_info") == version
    assert await scalar("SELECT count(test_extra) FROM memories") == 0

    # This package does not know that schema: it refuses rather than guess.
    with pytest.raises(SchemaVersionError) as refused:
        await make_store()
    assert str(version) in str(refused.value) and "newer" in str(refused.value)
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(info).values(version=schema.SCHEMA_VERSION))
    with pytest.raises(SchemaVersionError, match="test_next"):
        await make_store()
    assert [r.item.content for r in await store.get("alice", [mid])] == ["kept across reopen"]


async def test_schema_matches_the_migrations(store: SQLRecordStore) -> None:
    """The revisions build exactly what stores/schema.py declares (what ``alembic check`` verifies)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from llama_index_memory_hierarchy.stores import migrations

    def diff(sync: Any) -> list[Any]:
        context = MigrationContext.configure(
            sync, opts={"include_object": migrations.include_object, "compare_type": True}
        )
        return compare_metadata(context, schema.metadata)

    async with store.engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_rebuild_keyword_index(store: SQLRecordStore) -> None:
    [mid] = await store.insert([rec("rebuild me please")])
    await store.rebuild_keyword_index()
    assert [i for i, _ in await store.keyword_search("alice", "rebuild")] == [mid]


# --------------------------------------------------------------------------------------------------
# backend-specific behaviour
# --------------------------------------------------------------------------------------------------


async def test_sqlite_garbage_and_truncated_files(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(StoreError, match=str(garbage)):
        await SQLRecordStore(f"sqlite+aiosqlite:///{garbage}").start()

    path = tmp_path / "truncated.db"
    store = SQLRecordStore(f"sqlite+aiosqlite:///{path}")
    await store.start()
    await store.insert([rec(f"row {i} " + "x" * 2000) for i in range(200)])
    await store.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StoreError, match=str(path)):
        await SQLRecordStore(f"sqlite+aiosqlite:///{path}").start()

    header_only = tmp_path / "header.db"
    header_only.write_bytes(data[:100] + b"\x00" * 50)
    with pytest.raises(StoreError, match=str(header_only)):
        await SQLRecordStore(f"sqlite+aiosqlite:///{header_only}").start()


async def test_sqlite_keyword_terms_are_each_users_own(tmp_path: Path) -> None:
    """Every FTS5 term is behind its row's scope token: one word of two users is two terms, so a search reads
    only the asking user's postings and counts only their documents; deletes and edits keep the index exact."""
    path = tmp_path / "scoped.db"
    store = SQLRecordStore(f"sqlite+aiosqlite:///{path}")
    await store.start()
    try:
        [alice_tea] = await store.insert([rec("green tea at noon")])
        await store.insert([rec(f"tea number {i}", user_id="bob") for i in range(20)])
        [gone] = await store.insert([rec("a tea to delete")])
        await store.delete("alice", [gone])
        await store.update("alice", alice_tea, content="green tea at dawn")
        async with store.engine.connect() as conn:
            await conn.exec_driver_sql("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, memories_fts, row)")
            rows = (await conn.exec_driver_sql("SELECT term, doc FROM temp.terms")).all()
            check = "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)"
            await conn.exec_driver_sql(check)
        alice, bob = keyword_scope("alice", "memory"), keyword_scope("bob", "memory")
        terms = dict(rows)
        assert all(t.startswith((alice, bob)) for t in terms), [t for t in terms if not t.startswith((alice, bob))]
        assert terms[alice + "tea"] == 1 and terms[bob + "tea"] == 20  # the deleted row left no posting
        assert alice + "noon" not in terms and terms[alice + "dawn"] == 1
        assert [i for i, _ in await store.keyword_search("alice", "tea")] == [alice_tea]
    finally:
        await store.close()


async def test_sqlite_settings_and_lock_retry(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    config = MemoryConfig.create(persist_dir=tmp_path, sqlite_synchronous="NORMAL")
    store = SQLRecordStore.from_config(config.model_copy(update={"record_store_url": f"sqlite+aiosqlite:///{path}"}))
    await store.start()
    try:
        async with store.engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA synchronous")).scalar() == 1  # NORMAL
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
        await store.close()

        # busy_timeout 0: "database is locked" surfaces at once and the retry loop must absorb it.
        store = SQLRecordStore(f"sqlite+aiosqlite:///{path}", busy_timeout_s=0)
        await store.start()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.create_task(store.insert([rec("written after the lock")]))
        await asyncio.sleep(0.1)
        assert not pending.done()
        other.execute("COMMIT")
        assert len(await pending) == 1

        other.execute("BEGIN IMMEDIATE")
        store.max_attempts = 3
        with pytest.raises(StoreError, match="locked"):
            await store.insert([rec("never written")])
        other.execute("ROLLBACK")
        other.close()
        assert await store.count(None) == 1
    finally:
        await store.close()


async def test_sqlite_in_memory() -> None:
    async with SQLRecordStore("sqlite+aiosqlite:///:memory:") as store:
        ids = await asyncio.gather(*(store.insert([rec(f"m {i}")]) for i in range(10)))
        assert await store.count(None) == 10 and len({i[0] for i in ids}) == 10
        assert len(await store.keyword_search("alice", "m")) == 10


async def test_bad_urls() -> None:
    for url in ("mysql+aiomysql://x/y", "sqlite:///plain.db", "postgresql://u:p@h/db", "not a url"):
        with pytest.raises(MemoryValidationError):
            SQLRecordStore(url)
    store = SQLRecordStore("postgresql+asyncpg://u:secret@127.0.0.1:1/db")
    assert "secret" not in repr(store) and "secret" not in store.where


@pytest.mark.postgres
async def test_postgres_recovers_from_dropped_connections(pg_url: str) -> None:
    await _pg_execute(pg_url, "DROP SCHEMA IF EXISTS public CASCADE", "CREATE SCHEMA public")
    async with SQLRecordStore(pg_url) as store:
        [mid] = await store.insert([rec("survives a server-side disconnect")])
        database = sa.engine.make_url(pg_url).database
        await _pg_execute(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()",
        )
        assert [r.item.id for r in await store.get("alice", [mid])] == [mid]
        assert len(await store.insert([rec("and writes again")])) == 1
    unreachable = SQLRecordStore("postgresql+asyncpg://lmh:secret@127.0.0.1:1/none")
    unreachable.max_attempts = 2
    with pytest.raises(StoreError) as info:
        await unreachable.start()
    assert "127.0.0.1:1" in str(info.value) and "secret" not in str(info.value)


async def test_changes_count_committed_writes_per_user_and_type(store: SQLRecordStore) -> None:
    """What a derived cache keys on where this process is the only writer (the profile, ``MemoryManager``)."""
    start = store.changes("alice", MemoryType.SEMANTIC)
    [fact] = await store.insert([rec("alice lives in Utrecht", memory_type=MemoryType.SEMANTIC)])
    assert store.changes("alice", MemoryType.SEMANTIC) == start + 1
    before = store.changes("alice", MemoryType.EPISODIC)
    await store.update("alice", fact, importance=0.9)
    assert store.changes("alice", MemoryType.SEMANTIC) == start + 2
    assert store.changes("alice", MemoryType.EPISODIC) == before  # another tier's cache stays valid
    await store.touch("alice", [fact])  # an access is not a change
    assert store.changes("alice", MemoryType.SEMANTIC) == start + 2
    await store.delete("alice", [fact])
    assert store.changes("alice", MemoryType.EPISODIC) == before + 1  # a delete counts for every type
    assert store.changes("bob", MemoryType.SEMANTIC) == 0


async def test_a_lookup_by_a_list_of_ids_uses_the_id_index_on_sqlite(tmp_path: Path) -> None:
    """SQLite has no statistics: scoped by ``user_id`` plainly, a list of ids read every row of the user
    through the user index (1,000 rows at 100k memories); the scope clause keeps it on the unique id index."""
    from sqlalchemy.dialects import sqlite

    path = tmp_path / "memory.db"
    store = SQLRecordStore(f"sqlite+aiosqlite:///{path.as_posix()}")
    await store.start()
    try:
        ids = await store.insert([rec(f"note number {i}") for i in range(40)])
    finally:
        await store.close()
    m = schema.memories.c
    statement = sa.select(m.id).where(SQLiteFTS5Strategy().owned_by("alice"), m.id.in_(ids[:5]))
    sql = str(statement.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    with sqlite3.connect(path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        assert "(id=?)" in plan, plan
        assert sorted(row[0] for row in conn.execute(sql)) == sorted(ids[:5])
