"""``SQLRecordStore``: the authoritative record store on SQLAlchemy 2 async.

One implementation serves SQLite embedded (``sqlite+aiosqlite:///path/memory.db``) and
PostgreSQL (``postgresql+asyncpg://...``). Everything dialect-specific sits in a small
:class:`DialectStrategy`: the keyword index (SQLite FTS5 external-content table with BM25,
or a PostgreSQL ``tsvector`` generated column with a GIN index and ``ts_rank_cd``), the
JSON equality used by metadata filters, and write serialisation. The rest is plain Core SQL.

Guarantees:

* every multi-row write is one transaction: rows, keyword index entries (SQLite triggers /
  PostgreSQL generated column) and ``index_outbox`` rows commit together or not at all;
* transient errors (SQLite "database is locked", PostgreSQL serialization failures, deadlocks,
  dropped connections) are retried with bounded, jittered backoff; anything else, or a retry
  budget spent, becomes a :class:`StoreError` naming the database (password redacted);
* user text is never SQL or query syntax: every value is a bound parameter and keyword queries
  are rebuilt from :func:`keyword_tokens` (quoted tokens OR-ed on SQLite, ``plainto_tsquery`` per
  token on PostgreSQL).

All coroutines must run on the loop that called :meth:`start` (the package ``Runtime`` loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import reduce
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import (
    MemoryHierarchyError,
    MemoryValidationError,
    SchemaVersionError,
    StoreError,
)
from llama_index_memory_hierarchy.stores.base import MEMORY_NAMESPACE, OutboxOp, Record, RecordStore
from llama_index_memory_hierarchy.stores.schema import (
    index_outbox,
    memories,
    metadata,
    schema_info,
    user_scoped_tables,
)
from llama_index_memory_hierarchy.text import index_terms, keyword_scope, keyword_text
from llama_index_memory_hierarchy.types import (
    MemoryFilter,
    MemoryItem,
    MemoryType,
    validate_content,
    validate_identifier,
    validate_importance,
    validate_memory_id,
    validate_metadata,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")
OrderBy = Literal["timestamp", "-timestamp", "importance", "-importance", "created_at", "-created_at"]

#: Largest count bound into SQL (SQLite and PostgreSQL BIGINT hold up to 2**63 - 1).
_MAX_SQL_INT = 2**62
#: Ids per ``IN (...)`` list (well under SQLite's and asyncpg's bound-parameter limits).
CHUNK = 500
#: Most distinct tokens a keyword query uses (bounds hostile query size).
MAX_QUERY_TOKENS = 64
#: Content characters in one insert above which keyword tokenizing moves off the event loop.
_OFFLOAD_CHARS = 20_000
#: Advisory-lock class ids (PostgreSQL) of the schema and of per-user dedupe inserts.
_PG_LOCK_SCHEMA = 0x4C4D4801
_PG_LOCK_DEDUPE = 0x4C4D4802

_ORDER: dict[str, tuple[sa.Column[Any], bool]] = {
    "timestamp": (memories.c.timestamp, False),
    "-timestamp": (memories.c.timestamp, True),
    "importance": (memories.c.importance, False),
    "-importance": (memories.c.importance, True),
    "created_at": (memories.c.created_at, False),
    "-created_at": (memories.c.created_at, True),
}

_ITEM_COLUMNS = [c for c in memories.c if c.name not in {"embedding", "keyword", "keyword_scope", "content_hash"}]


# --------------------------------------------------------------------------------------------------
# dialect strategies
# --------------------------------------------------------------------------------------------------


class DialectStrategy(ABC):
    """What differs between backends: keyword index, JSON equality, write serialisation.

    The keyword index objects themselves are created by the schema migrations
    (``stores/migrations/versions``), like every other schema object.
    """

    name: str

    @abstractmethod
    async def rebuild_keyword_index(self, conn: AsyncConnection) -> None:
        """Recompute the keyword index from ``memories.keyword``."""

    @abstractmethod
    def keyword_select(self, tokens: list[str], conditions: list[Any], limit: int, scope: str) -> sa.Select[Any]:
        """``SELECT id, score`` of rows of ``scope`` matching any token, best first (higher is better)."""

    @abstractmethod
    def metadata_equals(self, key: str, value: Any) -> sa.ColumnElement[bool]:
        """True where top-level metadata ``key`` exists and equals ``value`` as JSON."""

    @abstractmethod
    async def lock_schema(self, conn: AsyncConnection) -> None:
        """Serialise concurrent openers while they create or migrate the schema."""

    @abstractmethod
    async def lock_users(self, conn: AsyncConnection, user_ids: Sequence[str]) -> None:
        """Serialise dedupe inserts of these users (so two writers cannot both insert one text)."""


class SQLiteFTS5Strategy(DialectStrategy):
    """SQLite: FTS5 external-content table over ``memories.keyword`` kept in sync by triggers; BM25.

    Writers are already serialised (``BEGIN IMMEDIATE`` plus an in-process lock), so the lock
    hooks are no-ops. Metadata equality uses ``json_each`` so a key is a bound value, never a path.
    """

    name = "sqlite"
    fts = "memories_fts"
    _tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"

    async def rebuild_keyword_index(self, conn: AsyncConnection) -> None:
        try:
            async with conn.begin_nested():
                await conn.exec_driver_sql(f"INSERT INTO {self.fts}({self.fts}) VALUES ('rebuild')")
            return
        except sa.exc.DatabaseError as exc:  # damaged beyond 'rebuild' (its shadow tables): make it anew
            logger.warning("keyword index cannot be rebuilt in place (%s); recreating it", exc.orig)
        await self._recreate_keyword_index(conn)

    async def _recreate_keyword_index(self, conn: AsyncConnection) -> None:
        """Drop the FTS5 table, its shadow tables and triggers, and create them as migration 0002 does."""
        fts = self.fts
        for trigger in ("ai", "ad", "au"):
            await conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {fts}_{trigger}")
        try:
            async with conn.begin_nested():
                await conn.exec_driver_sql(f"DROP TABLE IF EXISTS {fts}")
        except sa.exc.DatabaseError:  # the virtual table cannot even be constructed: unlink it from the schema
            version = (await conn.exec_driver_sql("PRAGMA schema_version")).scalar_one()
            await conn.exec_driver_sql("PRAGMA writable_schema = ON")
            await conn.exec_driver_sql(f"DELETE FROM sqlite_master WHERE type = 'table' AND name = '{fts}'")
            await conn.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
            await conn.exec_driver_sql("PRAGMA writable_schema = OFF")
            for shadow in ("data", "idx", "docsize", "config", "content"):
                await conn.exec_driver_sql(f"DROP TABLE IF EXISTS {fts}_{shadow}")
        columns = "rowid, keyword_scope, keyword"
        for statement in (
            f"CREATE VIRTUAL TABLE {fts} USING fts5(keyword_scope, keyword, content='memories', "
            f"content_rowid='seq', tokenize=\"{self._tokenize}\")",
            f"CREATE TRIGGER {fts}_ai AFTER INSERT ON memories BEGIN "
            f"INSERT INTO {fts}({columns}) VALUES (new.seq, new.keyword_scope, new.keyword); END",
            f"CREATE TRIGGER {fts}_ad AFTER DELETE ON memories BEGIN "
            f"INSERT INTO {fts}({fts}, {columns}) VALUES ('delete', old.seq, old.keyword_scope, old.keyword); END",
            f"CREATE TRIGGER {fts}_au AFTER UPDATE OF keyword ON memories BEGIN "
            f"INSERT INTO {fts}({fts}, {columns}) VALUES ('delete', old.seq, old.keyword_scope, old.keyword); "
            f"INSERT INTO {fts}({columns}) VALUES (new.seq, new.keyword_scope, new.keyword); END",
            f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
        ):
            await conn.exec_driver_sql(statement)

    async def lock_schema(self, conn: AsyncConnection) -> None:
        """No-op: the opening transaction is ``BEGIN IMMEDIATE``, which already excludes writers."""

    async def lock_users(self, conn: AsyncConnection, user_ids: Sequence[str]) -> None:
        """No-op: SQLite writers are serialised (``BEGIN IMMEDIATE`` and the in-process lock)."""

    @staticmethod
    def match_expression(tokens: list[str], scope: str) -> str:
        """FTS5 query: the scope token in its column AND any token (each double-quoted, quotes doubled)."""
        terms = " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
        return f'keyword_scope : "{scope}" AND keyword : ({terms})'

    def keyword_select(self, tokens: list[str], conditions: list[Any], limit: int, scope: str) -> sa.Select[Any]:
        fts = sa.table(self.fts, sa.column("rowid"))
        fts_ref = sa.literal_column(self.fts)
        rank = sa.func.bm25(fts_ref, sa.literal(0.0), sa.literal(1.0))  # the scope column weighs nothing
        return (
            sa.select(memories.c.id, (-rank).label("score"))
            .select_from(memories.join(fts, fts.c.rowid == memories.c.seq))
            .where(fts_ref.op("MATCH")(sa.bindparam("fts_query", self.match_expression(tokens, scope), type_=sa.Text)))
            .where(*conditions)
            .order_by(rank, memories.c.seq)
            .limit(limit)
        )

    def metadata_equals(self, key: str, value: Any) -> sa.ColumnElement[bool]:
        each = sa.func.json_each(memories.c.metadata).table_valued("key", "value", "type").alias("meta_each")
        clauses: list[Any] = [each.c.key == sa.bindparam(None, key, type_=sa.Text)]
        if value is None:
            clauses.append(each.c.type == "null")
        elif isinstance(value, bool):
            clauses.append(each.c.type == ("true" if value else "false"))
        elif isinstance(value, (int, float)):
            number = value if isinstance(value, float) or -(2**63) <= value < 2**63 else float(value)
            clauses += [each.c.type.in_(["integer", "real"]), each.c.value == sa.bindparam(None, number)]
        elif isinstance(value, str):
            clauses += [each.c.type == "text", each.c.value == sa.bindparam(None, value, type_=sa.Text)]
        else:  # dict or list: compare canonical JSON text (stored metadata is canonical too)
            canonical = _canonical_json(value)
            clauses += [
                each.c.type.in_(["object", "array"]),
                sa.func.json(each.c.value) == sa.func.json(sa.bindparam(None, canonical, type_=sa.Text)),
            ]
        return sa.exists(sa.select(sa.literal(1)).select_from(each).where(*clauses))


class PostgresFTSStrategy(DialectStrategy):
    """PostgreSQL: ``tsvector`` generated column ('simple' config) + GIN index, ``ts_rank_cd``.

    Metadata equality is ``jsonb`` equality of ``metadata::jsonb -> key`` (key bound). Dedupe
    inserts take a per-user transaction advisory lock.
    """

    name = "postgresql"
    column = "keyword_tsv"

    async def rebuild_keyword_index(self, conn: AsyncConnection) -> None:
        await conn.exec_driver_sql("REINDEX INDEX ix_memories_keyword_tsv")

    def keyword_select(self, tokens: list[str], conditions: list[Any], limit: int, scope: str) -> sa.Select[Any]:
        simple = sa.literal_column("'simple'::regconfig")
        queries = [sa.func.plainto_tsquery(simple, sa.bindparam(None, token, type_=sa.Text)) for token in tokens]
        tsquery = reduce(lambda left, right: left.op("||")(right), queries)
        vector = sa.literal_column(f"memories.{self.column}")
        score = sa.func.ts_rank_cd(vector, tsquery, sa.literal(1, sa.Integer))
        return (
            sa.select(memories.c.id, score.label("score"))
            .where(vector.op("@@")(tsquery))
            .where(*conditions)
            .order_by(score.desc(), memories.c.seq)
            .limit(limit)
        )

    def metadata_equals(self, key: str, value: Any) -> sa.ColumnElement[bool]:
        document = sa.cast(memories.c.metadata, JSONB)
        left = document.op("->")(sa.bindparam(None, key, type_=sa.Text))
        right = sa.cast(sa.bindparam(None, json.dumps(value, ensure_ascii=False), type_=sa.Text), JSONB)
        return left.op("=", is_comparison=True)(right)

    async def lock_schema(self, conn: AsyncConnection) -> None:
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_SCHEMA, 0)))

    async def lock_users(self, conn: AsyncConnection, user_ids: Sequence[str]) -> None:
        for user_id in sorted(set(user_ids)):  # one lock order for every writer: no deadlock
            key = sa.func.hashtext(sa.bindparam(None, user_id, type_=sa.Text))
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_DEDUPE, key)))


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: how metadata is stored, so equal dicts store equal text."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _epoch(value: datetime) -> float:
    return value.timestamp()


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


def _content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def embedding_bytes(value: Any, field: str = "embedding") -> bytes:
    """Validate an embedding (1-D, finite, non-empty) and encode it as little-endian float32."""
    try:
        array = np.asarray(value, dtype="<f4")
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(field, f"must be a 1-D array of numbers: {exc}") from None
    if array.ndim != 1 or array.size == 0:
        raise MemoryValidationError(field, f"must be a non-empty 1-D vector, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise MemoryValidationError(field, "contains NaN or infinite values")
    return array.tobytes()


def _decode_embedding(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32)


def _validate_space(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise MemoryValidationError("space", f"must be a non-empty string of at most 255 characters, got {value!r}")
    return value


def _memory_type(value: Any) -> MemoryType | None:
    if value is None:
        return None
    try:
        return MemoryType(value)
    except ValueError:
        allowed = ", ".join(t.value for t in MemoryType)
        raise MemoryValidationError("memory_type", f"must be one of {allowed}, got {value!r}") from None


def _validate_ids(ids: Sequence[str] | str, field: str = "ids") -> list[str]:
    """Canonical UUIDs, duplicates removed, first occurrence order kept."""
    if isinstance(ids, str):
        raise MemoryValidationError(field, "must be a sequence of ids, not one string")
    return list(dict.fromkeys(validate_memory_id(i, field) for i in ids))


def _chunks(values: Sequence[T], size: int = CHUNK) -> Iterable[Sequence[T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _count(value: Any, field: str, minimum: int) -> int:
    """A validated count, clamped to what SQL integers hold (a larger limit or offset means the same)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise MemoryValidationError(field, f"must be an integer >= {minimum}, got {value!r}")
    return min(value, _MAX_SQL_INT)


def _row_to_record(row: Any, with_embedding: bool) -> Record:
    """A ``memories`` row (mapping) as a :class:`Record` with a UTC-aware :class:`MemoryItem`."""
    item = MemoryItem.model_construct(
        id=row["id"],
        content=row["content"],
        memory_type=MemoryType(row["memory_type"]),
        user_id=row["user_id"],
        session_id=row["session_id"],
        timestamp=_dt(row["timestamp"]),
        created_at=_dt(row["created_at"]),
        importance=float(row["importance"]),
        access_count=int(row["access_count"]),
        last_accessed=_dt(row["last_accessed"]),
        pinned=bool(row["pinned"]),
        metadata=json.loads(row["metadata"]),
        score=None,
    )
    embedding = _decode_embedding(row["embedding"]) if with_embedding else None
    return Record(item=item, namespace=row["namespace"], embedding=embedding, space=row["space"])


def _sqlstate(exc: BaseException) -> str | None:
    """SQLSTATE of a (wrapped) PostgreSQL error, if any."""
    seen: list[BaseException | None] = [exc, getattr(exc, "orig", None)]
    seen.append(getattr(seen[1], "__cause__", None))
    for candidate in seen:
        for attr in ("sqlstate", "pgcode"):
            code = getattr(candidate, attr, None)
            if isinstance(code, str):
                return code
    return None


#: PostgreSQL SQLSTATEs worth retrying: serialization failure, deadlock, connection failures,
#: server shutting down / starting, too many connections.
_PG_TRANSIENT = {"40001", "40P01", "08000", "08001", "08003", "08004", "08006", "57P01", "57P02", "57P03", "53300"}
_SQLITE_CORRUPT = ("malformed", "not a database", "file is encrypted", "disk image", "vtable constructor failed")


# --------------------------------------------------------------------------------------------------
# the store
# --------------------------------------------------------------------------------------------------


class SQLRecordStore(RecordStore):
    """Authoritative record store on SQLite (embedded) or PostgreSQL, via SQLAlchemy async.

    Build with ``SQLRecordStore(url)`` or ``SQLRecordStore.from_config(config)``; call
    :meth:`start` (or use ``async with``) before anything else.
    """

    #: Attempts of one transaction on transient errors (locks, serialization, connections).
    max_attempts = 8

    def __init__(
        self,
        url: str,
        *,
        sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "FULL",
        busy_timeout_s: float = 10.0,
        pool_size: int = 5,
        max_overflow: int = 10,
        echo: bool = False,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise MemoryValidationError("record_store_url", "must be a SQLAlchemy async URL")
        try:
            parsed = sa.engine.make_url(url)
        except sa.exc.ArgumentError as exc:
            raise MemoryValidationError("record_store_url", f"not a database URL: {redact_url(url)}") from exc
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            if parsed.get_driver_name() != "aiosqlite":
                raise MemoryValidationError("record_store_url", "SQLite needs the async driver: sqlite+aiosqlite:///")
            self._strategy: DialectStrategy = SQLiteFTS5Strategy()
        elif backend == "postgresql":
            if parsed.get_driver_name() != "asyncpg":
                raise MemoryValidationError(
                    "record_store_url", "PostgreSQL needs the async driver: postgresql+asyncpg://"
                )
            self._strategy = PostgresFTSStrategy()
        else:
            raise MemoryValidationError(
                "record_store_url", f"unsupported backend {backend!r}; use sqlite+aiosqlite or postgresql+asyncpg"
            )
        if sqlite_synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise MemoryValidationError(
                "sqlite_synchronous", f"must be OFF, NORMAL, FULL or EXTRA, got {sqlite_synchronous!r}"
            )
        self._url = url
        self._synchronous = sqlite_synchronous
        self._busy_timeout_ms = max(0, int(busy_timeout_s * 1000))
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._echo = echo
        database = parsed.database or ""
        self._memory_db = backend == "sqlite" and (database in ("", ":memory:") or database.startswith("file::memory:"))
        self._path: Path | None = (
            Path(database).expanduser().resolve() if backend == "sqlite" and not self._memory_db else None
        )
        self._engine: AsyncEngine | None = None
        self._write_lock: asyncio.Lock | None = None

    @classmethod
    def from_config(cls, config: MemoryConfig, **kwargs: Any) -> SQLRecordStore:
        """The store a :class:`MemoryConfig` describes (URL and SQLite fsync level)."""
        return cls(config.resolved_record_store_url, sqlite_synchronous=config.sqlite_synchronous, **kwargs)

    # --- properties ----------------------------------------------------------------------------------

    @property
    def dialect(self) -> str:
        """``'sqlite'`` or ``'postgresql'``."""
        return self._strategy.name

    @property
    def where(self) -> str:
        """The database, for messages: the SQLite file path, or the URL with its password hidden."""
        if self._path is not None:
            return str(self._path)
        return redact_url(self._url) or ""

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine (for modules that keep their own tables in this database)."""
        if self._engine is None:
            raise StoreError(f"record store {self.where} is not started; call start() first")
        return self._engine

    def __repr__(self) -> str:
        return f"SQLRecordStore({self.where!r})"

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the database; create the schema or migrate it; refuse a newer or corrupt one."""
        if self._engine is not None:
            return
        if self._path is not None:
            self._check_sqlite_file(self._path)
        self._write_lock = asyncio.Lock()
        try:
            self._engine = self._make_engine()
        except OSError as exc:  # the SQLite folder cannot be created
            raise StoreError(f"record store {self.where} cannot be created: {exc}") from exc
        except ModuleNotFoundError as exc:  # the driver of the URL (asyncpg, aiosqlite) is not installed
            extra = "postgres" if self.dialect == "postgresql" else "sqlite"
            install = (
                f"pip install 'llama-index-memory-hierarchy[{extra}]'"
                if extra == "postgres"
                else "pip install aiosqlite"
            )
            raise StoreError(f"record store {self.where} needs the {exc.name} driver: {install}") from exc
        try:
            await self.run_transaction(self._ensure_schema, write=True, op="open")
        except BaseException:
            engine, self._engine = self._engine, None
            await engine.dispose()
            raise
        logger.debug("record store %s opened (%s)", self.where, self.dialect)

    async def close(self) -> None:
        """Dispose of the connection pool (idempotent)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            await engine.dispose()

    async def __aenter__(self) -> SQLRecordStore:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _make_engine(self) -> AsyncEngine:
        if self._strategy.name == "postgresql":
            return create_async_engine(
                self._url,
                echo=self._echo,
                pool_size=self._pool_size,
                max_overflow=self._max_overflow,
                pool_pre_ping=True,
                pool_recycle=1800,
            )
        kwargs: dict[str, Any] = {"echo": self._echo}
        if self._memory_db:
            kwargs["poolclass"] = sa.pool.StaticPool
        else:
            assert self._path is not None
            self._path.parent.mkdir(parents=True, exist_ok=True)
            kwargs.update(poolclass=sa.pool.AsyncAdaptedQueuePool, pool_size=self._pool_size, max_overflow=0)
        engine = create_async_engine(self._url, **kwargs)
        busy, synchronous, wal = self._busy_timeout_ms, self._synchronous, not self._memory_db

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            # We issue BEGIN ourselves (see _on_begin), so the driver must not.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {busy}")
                if wal:
                    cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute(f"PRAGMA synchronous = {synchronous}")
                cursor.execute("PRAGMA foreign_keys = ON")
            finally:
                cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Any) -> None:
            # Writers take the write lock up front: no deadlock-prone read-to-write upgrade.
            immediate = connection.get_execution_options().get("lmh_write", False)
            connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine

    @staticmethod
    def _check_sqlite_file(path: Path) -> None:
        """Reject a file that is not a SQLite database or is shorter than its header says."""
        if path.is_dir():
            raise StoreError(f"record store {path} is a directory, not a SQLite database file")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        try:
            with path.open("rb") as handle:
                header = handle.read(100)
        except OSError as exc:
            raise StoreError(f"record store {path} cannot be read: {exc}") from exc
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            raise StoreError(
                f"record store {path} is not a SQLite database (garbage or truncated header); "
                "restore it from a backup or move it away to start empty"
            )
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        header_valid = header[24:28] == header[92:96]
        if header_valid and pages and size < pages * page_size:
            raise StoreError(
                f"record store {path} is truncated ({size} bytes, header says {pages * page_size}); "
                "restore it from a backup or move it away to start empty"
            )

    async def _ensure_schema(self, conn: AsyncConnection) -> None:
        """Create or migrate the schema (Alembic revisions), then create tables other modules registered."""
        from llama_index_memory_hierarchy.stores import migrations

        await self._strategy.lock_schema(conn)
        tables = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
        if "memories" in tables and schema_info.name not in tables:
            raise SchemaVersionError(
                f"record store {self.where} has a 'memories' table but no schema version; "
                "it was not created by llama-index-memory-hierarchy"
            )
        await conn.run_sync(lambda sync: migrations.upgrade(sync, where=f"record store {self.where}"))
        await conn.run_sync(metadata.create_all)

    async def create_tables(self) -> None:
        """Create tables registered on the shared metadata after :meth:`start` (idempotent)."""
        await self.run_transaction(lambda conn: conn.run_sync(metadata.create_all), write=True, op="create tables")

    async def rebuild_keyword_index(self) -> None:
        """Recompute the keyword index from the stored keyword text (repair)."""
        await self.run_transaction(self._strategy.rebuild_keyword_index, write=True, op="rebuild keyword index")

    # --- transactions and errors -------------------------------------------------------------------

    async def run_transaction(
        self, work: Callable[[AsyncConnection], Awaitable[T]], *, write: bool = True, op: str = "transaction"
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying transient failures with bounded backoff.

        ``work`` may run more than once, so it must only touch the database. Database errors
        become :class:`StoreError`; this package's own errors pass through unchanged.
        """
        engine = self.engine
        attempt = 0
        while True:
            committing = False
            try:
                async with self._gate(write), engine.connect() as conn:
                    if write and self._strategy.name == "sqlite":
                        await conn.execution_options(lmh_write=True)
                    async with conn.begin():
                        result = await work(conn)
                        committing = True
                    return result
            except MemoryHierarchyError:
                raise
            except (TimeoutError, SQLAlchemyError, OSError) as exc:
                attempt += 1
                if attempt >= self.max_attempts or not self._retryable(exc, committing):
                    raise self._store_error(op, exc, attempt) from exc
                delay = min(1.0, 0.02 * 2**attempt) * (0.5 + random.random())
                logger.debug("record store %s: %s retry %d after %s", self.where, op, attempt, exc)
                await asyncio.sleep(delay)

    @contextlib.asynccontextmanager
    async def _gate(self, write: bool):  # type: ignore[no-untyped-def]
        """SQLite allows one writer: queue this process's writers here instead of in busy waits.

        An in-memory SQLite database has one shared connection, so it serialises readers too.
        """
        if self._write_lock is not None and self._strategy.name == "sqlite" and (write or self._memory_db):
            async with self._write_lock:
                yield
        else:
            yield

    def _retryable(self, exc: BaseException, committing: bool) -> bool:
        if isinstance(exc, IntegrityError):
            return False
        if self._strategy.name == "sqlite":
            message = str(getattr(exc, "orig", exc)).lower()
            return "locked" in message or "busy" in message
        code = _sqlstate(exc)
        if code in ("40001", "40P01"):
            return True  # the server rolled the transaction back: safe to run again
        connection_lost = (
            bool(getattr(exc, "connection_invalidated", False))
            or code in _PG_TRANSIENT
            or isinstance(exc, (OSError, asyncio.TimeoutError))
            or isinstance(getattr(exc, "orig", None), OSError)
        )
        # A connection lost during COMMIT leaves the outcome unknown: do not run the work twice.
        return connection_lost and not committing

    def _store_error(self, op: str, exc: BaseException, attempts: int) -> StoreError:
        cause = getattr(exc, "orig", None) or exc  # the driver's message, without SQL or parameters
        message = f"{type(cause).__name__}: {cause}".strip()
        if self._strategy.name == "sqlite" and any(word in message.lower() for word in _SQLITE_CORRUPT):
            if self._only_keyword_index_damaged():
                folder = self._path.parent if self._path is not None else "DIR"
                return StoreError(
                    f"record store {self.where}: its keyword index is damaged, the memories themselves are intact; "
                    f"'lmh reindex --dir {folder}' rebuilds it ({op}: {message})"
                )
            return StoreError(f"record store {self.where} is corrupt or not a SQLite database ({op}): {message}")
        suffix = f" after {attempts} attempts" if attempts > 1 else ""
        return StoreError(f"record store {self.where}: {op} failed{suffix}: {message}")

    def _only_keyword_index_damaged(self) -> bool:
        """Whether the tables pass SQLite's quick check while the FTS5 keyword index fails its own.

        Why: the keyword index is derived (``lmh reindex`` rebuilds it), so its damage deserves that hint
        rather than "corrupt", which sends the user to a backup. Runs only after a corruption error.
        """
        if self._path is None:
            return False
        fts = SQLiteFTS5Strategy.fts
        try:
            with contextlib.closing(sqlite3.connect(self._path, timeout=1.0, isolation_level=None)) as db:
                if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
                    return False
                try:
                    db.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
                except sqlite3.DatabaseError:
                    return True
        except sqlite3.Error:
            return False
        return False

    # --- validation and row building -------------------------------------------------------------------

    def _conditions(
        self,
        user_id: str | None,
        namespace: str | None,
        memory_type: MemoryType | str | None,
        filters: MemoryFilter | None,
    ) -> list[Any]:
        """WHERE clauses for the scope and a :class:`MemoryFilter` (all values bound)."""
        m = memories.c
        clauses: list[Any] = []
        if user_id is not None:
            clauses.append(m.user_id == validate_identifier(user_id, "user_id"))
        if namespace is not None:
            clauses.append(m.namespace == validate_identifier(namespace, "namespace"))
        kind = _memory_type(memory_type)
        if kind is not None:
            clauses.append(m.memory_type == kind.value)
        if filters is None:
            return clauses
        if not isinstance(filters, MemoryFilter):
            raise MemoryValidationError("filters", f"must be a MemoryFilter, got {type(filters).__name__}")
        if filters.session_id is not None:
            clauses.append(m.session_id == validate_identifier(filters.session_id, "session_id"))
        if filters.start_time is not None:
            clauses.append(m.timestamp >= _epoch(filters.start_time))
        if filters.end_time is not None:
            clauses.append(m.timestamp <= _epoch(filters.end_time))
        if filters.min_importance is not None:
            clauses.append(m.importance >= float(filters.min_importance))
        if filters.memory_ids is not None:
            ids = _validate_ids(filters.memory_ids, "memory_ids")
            clauses.append(m.id.in_(ids) if ids else sa.false())
        for key, value in (filters.metadata or {}).items():
            clauses.append(self._strategy.metadata_equals(key, value))
        return clauses

    @staticmethod
    def _record_row(record: Record, keyword: str) -> dict[str, Any]:
        item = record.item
        return {
            "id": item.id,
            "user_id": item.user_id,
            "session_id": item.session_id,
            "namespace": record.namespace,
            "memory_type": MemoryType(item.memory_type).value,
            "content": item.content,
            "content_hash": _content_hash(item.content),
            "timestamp": _epoch(item.timestamp),
            "created_at": _epoch(item.created_at),
            "last_accessed": None if item.last_accessed is None else _epoch(item.last_accessed),
            "importance": float(item.importance),
            "access_count": int(item.access_count),
            "pinned": bool(item.pinned),
            "metadata": _canonical_json(item.metadata),
            "embedding": None if record.embedding is None else embedding_bytes(record.embedding),
            "space": _validate_space(record.space),
            "keyword": keyword,
            "keyword_scope": keyword_scope(item.user_id, record.namespace),
        }

    async def _build_rows(self, records: Sequence[Record]) -> list[dict[str, Any]]:
        if isinstance(records, Record) or not isinstance(records, Sequence):
            raise MemoryValidationError("records", "must be a sequence of Record")
        for index, record in enumerate(records):
            if not isinstance(record, Record) or not isinstance(record.item, MemoryItem):
                raise MemoryValidationError(f"records[{index}]", "must be a Record holding a MemoryItem")
            validate_identifier(record.namespace, "namespace")
        contents = [record.keyword or record.item.content for record in records]
        if sum(len(text) for text in contents) > _OFFLOAD_CHARS:
            keywords = await asyncio.to_thread(lambda: [keyword_text(text) for text in contents])
        else:
            keywords = [keyword_text(text) for text in contents]
        return [self._record_row(record, keyword) for record, keyword in zip(records, keywords, strict=True)]

    # --- writes ----------------------------------------------------------------------------------------

    async def insert(self, records: Sequence[Record], *, dedupe: bool = False) -> list[str]:
        """Insert in one transaction (rows, keyword index, outbox); return ids in input order."""
        rows = await self._build_rows(records)
        if not rows:
            return []

        async def work(conn: AsyncConnection) -> list[str]:
            ids = [row["id"] for row in rows]
            fresh = rows
            if dedupe:
                ids, fresh = await self._dedupe(conn, rows)
            if fresh:
                try:
                    await conn.execute(sa.insert(memories), fresh)
                except IntegrityError as exc:
                    if "id" in str(exc.orig).lower():
                        raise MemoryValidationError(
                            "id", "a memory with this id already exists (ids must be unique)"
                        ) from None
                    raise
                outbox = [
                    {"op": "upsert", "memory_id": r["id"], "user_id": r["user_id"], "space": r["space"]}
                    for r in fresh
                    if r["embedding"] is not None
                ]
                if outbox:
                    await conn.execute(sa.insert(index_outbox), outbox)
            return ids

        return await self.run_transaction(work, write=True, op="insert")

    async def _dedupe(
        self, conn: AsyncConnection, rows: list[dict[str, Any]]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Ids for ``rows`` (existing ones for duplicates) and the rows still to insert."""

        def key(row: Any) -> tuple[Any, ...]:
            return (row["user_id"], row["session_id"], row["namespace"], row["memory_type"], row["content"])

        users = sorted({row["user_id"] for row in rows})
        await self._strategy.lock_users(conn, users)
        hashes = sorted({row["content_hash"] for row in rows})
        known: dict[tuple[Any, ...], str] = {}
        m = memories.c
        for chunk in _chunks(hashes):
            result = await conn.execute(
                sa.select(m.id, m.user_id, m.session_id, m.namespace, m.memory_type, m.content)
                .where(m.user_id.in_(users), m.content_hash.in_(list(chunk)))
                .order_by(m.seq)
            )
            for existing in result.mappings():
                known.setdefault(key(existing), existing["id"])
        ids: list[str] = []
        fresh: list[dict[str, Any]] = []
        for row in rows:
            found = known.get(key(row))
            if found is None:
                known[key(row)] = found = row["id"]
                fresh.append(row)
            ids.append(found)
        return ids, fresh

    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        metadata: dict[str, Any] | None = None,
        pinned: bool | None = None,
        embedding: np.ndarray | None = None,
        space: str | None = None,
    ) -> Record | None:
        """Change fields of one record (``metadata`` replaces the old dict); None if absent.

        Re-indexes the keyword text when ``content`` changes; writes an outbox upsert when the
        record has an embedding (and a delete for the old space when ``space`` changes).
        """
        validate_identifier(user_id, "user_id")
        memory_id = validate_memory_id(memory_id)
        values: dict[str, Any] = {}
        if content is not None:
            values["content"] = validate_content(content)
            values["content_hash"] = _content_hash(values["content"])
            values["keyword"] = (
                await asyncio.to_thread(keyword_text, values["content"])
                if len(values["content"]) > _OFFLOAD_CHARS
                else keyword_text(values["content"])
            )
        if importance is not None:
            values["importance"] = validate_importance(importance)
        if metadata is not None:
            values["metadata"] = _canonical_json(validate_metadata(metadata))
        if pinned is not None:
            if not isinstance(pinned, bool):
                raise MemoryValidationError("pinned", f"must be a bool, got {type(pinned).__name__}")
            values["pinned"] = pinned
        if embedding is not None:
            values["embedding"] = embedding_bytes(embedding)
        if space is not None:
            values["space"] = _validate_space(space)

        async def work(conn: AsyncConnection) -> Record | None:
            found = await conn.execute(
                sa.select(memories).where(memories.c.user_id == user_id, memories.c.id == memory_id)
            )
            row = found.mappings().first()
            if row is None:
                return None
            if values:
                await conn.execute(sa.update(memories).where(memories.c.seq == row["seq"]).values(**values))
                merged = {**row, **values}
                if row["embedding"] is not None and row["space"] != merged["space"]:
                    await conn.execute(
                        sa.insert(index_outbox).values(
                            op="delete", memory_id=memory_id, user_id=user_id, space=row["space"]
                        )
                    )
                if merged["embedding"] is not None:
                    await conn.execute(
                        sa.insert(index_outbox).values(
                            op="upsert", memory_id=memory_id, user_id=user_id, space=merged["space"]
                        )
                    )
                row = merged
            return _row_to_record(row, with_embedding=True)

        return await self.run_transaction(work, write=True, op="update")

    async def _delete_matching(self, conn: AsyncConnection, clauses: list[Any]) -> list[str]:
        """Delete matching rows, write outbox deletes for embedded ones, return deleted ids.

        SELECT (row-locked on PostgreSQL) then DELETE by ``seq``, not ``DELETE ... RETURNING``:
        SQLite 3.40 returns wrong ``IS NULL`` results in RETURNING on a table with an
        AFTER DELETE trigger (the FTS5 sync trigger), and the outbox depends on that flag.
        """
        m = memories.c
        found = await conn.execute(
            sa.select(m.seq, m.id, m.user_id, m.space, m.embedding.is_not(None))
            .where(*clauses)
            .order_by(m.seq)
            .with_for_update()
        )
        rows = found.all()
        for chunk in _chunks([row[0] for row in rows]):
            await conn.execute(sa.delete(memories).where(m.seq.in_(list(chunk))))
        outbox = [{"op": "delete", "memory_id": r[1], "user_id": r[2], "space": r[3]} for r in rows if r[4]]
        if outbox:
            await conn.execute(sa.insert(index_outbox), outbox)
        return [row[1] for row in rows]

    async def delete(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """Delete this user's records with these ids; return the ids actually deleted (input order)."""
        validate_identifier(user_id, "user_id")
        wanted = _validate_ids(ids)
        if not wanted:
            return []

        async def work(conn: AsyncConnection) -> list[str]:
            deleted: set[str] = set()
            for chunk in _chunks(wanted):
                clauses = [memories.c.user_id == user_id, memories.c.id.in_(list(chunk))]
                deleted.update(await self._delete_matching(conn, clauses))
            return [i for i in wanted if i in deleted]

        return await self.run_transaction(work, write=True, op="delete")

    async def delete_where(
        self,
        user_id: str,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> list[str]:
        """Delete every matching record of this user (``namespace=None``: all namespaces)."""
        clauses = self._conditions(validate_identifier(user_id, "user_id"), namespace, memory_type, filters)
        return await self.run_transaction(lambda conn: self._delete_matching(conn, clauses), op="delete_where")

    async def touch(self, user_id: str, ids: Sequence[str]) -> None:
        """Record an access: ``access_count += 1`` and ``last_accessed = now`` (one statement per chunk)."""
        validate_identifier(user_id, "user_id")
        wanted = _validate_ids(ids)
        if not wanted:
            return
        now = time.time()

        async def work(conn: AsyncConnection) -> None:
            for chunk in _chunks(sorted(wanted)):  # sorted: one lock order for concurrent touches
                await conn.execute(
                    sa.update(memories)
                    .where(memories.c.user_id == user_id, memories.c.id.in_(list(chunk)))
                    .values(access_count=memories.c.access_count + 1, last_accessed=now)
                )

        await self.run_transaction(work, write=True, op="touch")

    async def delete_user(self, user_id: str, *, tombstones: bool = True) -> dict[str, int]:
        """Delete every row of ``user_id`` in every registered table with a ``user_id`` column.

        Runs in one transaction. The user's pending outbox rows go too; with ``tombstones``
        (default) an outbox ``delete`` per embedded memory is written in their place, so derived
        vector indexes are cleaned even if the caller stops before ``VectorIndex.delete_user``.
        Returns rows deleted per table.
        """
        validate_identifier(user_id, "user_id")

        async def work(conn: AsyncConnection) -> dict[str, int]:
            counts: dict[str, int] = {}
            outbox = await conn.execute(sa.delete(index_outbox).where(index_outbox.c.user_id == user_id))
            counts[index_outbox.name] = outbox.rowcount
            if tombstones:
                m = memories.c
                await conn.execute(
                    sa.insert(index_outbox).from_select(
                        ["op", "memory_id", "user_id", "space"],
                        sa.select(sa.literal("delete", sa.String), m.id, m.user_id, m.space)
                        .where(m.user_id == user_id, m.embedding.is_not(None))
                        .order_by(m.seq),
                    )
                )
            existing = set(await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names()))
            for table in user_scoped_tables():
                if table is index_outbox or table.name not in existing:  # registered but never created
                    continue
                result = await conn.execute(sa.delete(table).where(table.c.user_id == user_id))
                counts[table.name] = result.rowcount
            return counts

        return await self.run_transaction(work, write=True, op="delete_user")

    # --- reads -------------------------------------------------------------------------------------------

    def _columns(self, with_embeddings: bool) -> list[Any]:
        return [*_ITEM_COLUMNS, memories.c.embedding if with_embeddings else sa.null().label("embedding")]

    async def get(self, user_id: str, ids: Sequence[str], *, with_embeddings: bool = False) -> list[Record]:
        """This user's records with these ids, in the given order (others' ids are absent)."""
        validate_identifier(user_id, "user_id")
        wanted = _validate_ids(ids)
        if not wanted:
            return []

        async def work(conn: AsyncConnection) -> list[Record]:
            found: dict[str, Record] = {}
            for chunk in _chunks(wanted):
                result = await conn.execute(
                    sa.select(*self._columns(with_embeddings)).where(
                        memories.c.user_id == user_id, memories.c.id.in_(list(chunk))
                    )
                )
                for row in result.mappings():
                    found[row["id"]] = _row_to_record(row, with_embeddings)
            return [found[i] for i in wanted if i in found]

        return await self.run_transaction(work, write=False, op="get")

    async def query(
        self,
        user_id: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        order_by: OrderBy = "timestamp",
        limit: int | None = None,
        offset: int = 0,
        with_embeddings: bool = False,
    ) -> list[Record]:
        """Records matching the filters, ordered (ties by insertion order), paginated."""
        clauses = self._conditions(validate_identifier(user_id, "user_id"), namespace, memory_type, filters)
        if order_by not in _ORDER:
            raise MemoryValidationError("order_by", f"must be one of {', '.join(_ORDER)}, got {order_by!r}")
        column, descending = _ORDER[order_by]
        offset = _count(offset, "offset", 0)
        statement = (
            sa.select(*self._columns(with_embeddings))
            .where(*clauses)
            .order_by(
                column.desc() if descending else column.asc(), memories.c.seq.desc() if descending else memories.c.seq
            )
        )
        if limit is not None:
            statement = statement.limit(_count(limit, "limit", 0))
        if offset:
            statement = statement.offset(offset)

        async def work(conn: AsyncConnection) -> list[Record]:
            result = await conn.execute(statement)
            return [_row_to_record(row, with_embeddings) for row in result.mappings()]

        return await self.run_transaction(work, write=False, op="query")

    async def count(
        self,
        user_id: str | None,
        *,
        namespace: str | None = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
    ) -> int:
        """Number of matching records (``user_id=None``: every user; admin and tests)."""
        clauses = self._conditions(user_id, namespace, memory_type, filters)
        statement = sa.select(sa.func.count()).select_from(memories).where(*clauses)

        async def work(conn: AsyncConnection) -> int:
            return int((await conn.execute(statement)).scalar_one())

        return await self.run_transaction(work, write=False, op="count")

    async def keyword_search(
        self,
        user_id: str,
        text: str,
        *,
        namespace: str = MEMORY_NAMESPACE,
        memory_type: MemoryType | None = None,
        filters: MemoryFilter | None = None,
        limit: int = 20,
    ) -> list[tuple[str, float]]:
        """Full-text search, ``(memory_id, score)`` best first; ``text`` is data, never syntax."""
        clauses = self._conditions(validate_identifier(user_id, "user_id"), namespace, memory_type, filters)
        if not isinstance(text, str):
            raise MemoryValidationError("query", f"must be a string, got {type(text).__name__}")
        limit = _count(limit, "limit", 0)
        tokens = list(dict.fromkeys(index_terms(text)))[:MAX_QUERY_TOKENS]
        if not tokens or limit == 0:
            return []
        statement = self._strategy.keyword_select(tokens, clauses, limit, keyword_scope(user_id, namespace))

        async def work(conn: AsyncConnection) -> list[tuple[str, float]]:
            result = await conn.execute(statement)
            return [(row[0], float(row[1])) for row in result]

        return await self.run_transaction(work, write=False, op="keyword_search")

    async def users(self) -> list[str]:
        """Every user id with at least one record, sorted."""
        statement = sa.select(memories.c.user_id).distinct().order_by(memories.c.user_id)

        async def work(conn: AsyncConnection) -> list[str]:
            return list((await conn.execute(statement)).scalars())

        return await self.run_transaction(work, write=False, op="users")

    async def outbox_pending(self, limit: int = 1000) -> list[OutboxOp]:
        """Oldest unapplied index operations (all users), in commit order of their writes."""
        limit = _count(limit, "limit", 1)
        o = index_outbox.c
        statement = sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space).order_by(o.seq).limit(limit)

        async def work(conn: AsyncConnection) -> list[OutboxOp]:
            result = await conn.execute(statement)
            return [
                OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4]) for row in result
            ]

        return await self.run_transaction(work, write=False, op="outbox_pending")

    async def outbox_ack(self, seqs: Sequence[int]) -> None:
        """Mark index operations applied (their rows are deleted)."""
        wanted = sorted({_count(seq, "seqs", 0) for seq in seqs})
        if not wanted:
            return

        async def work(conn: AsyncConnection) -> None:
            for chunk in _chunks(wanted):
                await conn.execute(sa.delete(index_outbox).where(index_outbox.c.seq.in_(list(chunk))))

        await self.run_transaction(work, write=True, op="outbox_ack")

    @contextlib.asynccontextmanager
    async def outbox_claim(self, limit: int = 1000) -> AsyncIterator[list[OutboxOp]]:
        """Claim pending operations; acknowledged (deleted) when the block exits cleanly.

        PostgreSQL (many processes share one outbox): one transaction selects the oldest
        operations ``FOR UPDATE SKIP LOCKED`` (a row another drainer holds is skipped, not
        waited for), leaving out any operation with an older one still pending for the same
        memory (held by another drainer, or skipped), so a memory's operations apply one at a
        time and in commit order. The rows are deleted and committed after the block; an
        exception rolls back and leaves them for any process to retry. The block runs while
        the transaction is open, so keep it to applying the operations.

        SQLite (one process, the persist folder lock): read, then acknowledge, as the base class.
        """
        limit = _count(limit, "limit", 1)
        if self._strategy.name != "postgresql":
            async with super().outbox_claim(limit) as ops:
                yield ops
            return
        o = index_outbox.c
        older = index_outbox.alias("older")
        statement = (
            sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space)
            .where(~sa.exists().where(older.c.memory_id == o.memory_id, older.c.seq < o.seq))
            .order_by(o.seq)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        in_block = False
        try:
            async with self.engine.connect() as conn, conn.begin():
                result = await conn.execute(statement)
                ops = [
                    OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4])
                    for row in result
                ]
                in_block = True
                yield ops
                in_block = False
                for chunk in _chunks([op.seq for op in ops]):
                    await conn.execute(sa.delete(index_outbox).where(o.seq.in_(list(chunk))))
        except (TimeoutError, SQLAlchemyError, OSError) as exc:
            if in_block:  # the caller's failure (rolled back): not the record store's
                raise
            raise self._store_error("outbox_claim", exc, 1) from exc

    async def iter_embedded(
        self, space: str, *, batch_size: int = 1000, after_seq: int = 0
    ) -> list[tuple[int, Record]]:
        """Up to ``batch_size`` records (all users) embedded in ``space`` with ``seq > after_seq``."""
        if space is None:
            raise MemoryValidationError("space", "must be a vector space name, got None")
        space = _validate_space(space)
        batch_size = _count(batch_size, "batch_size", 1)
        after_seq = _count(after_seq, "after_seq", 0)
        m = memories.c
        statement = (
            sa.select(*self._columns(True))
            .where(m.space == space, m.embedding.is_not(None), m.seq > after_seq)
            .order_by(m.seq)
            .limit(batch_size)
        )

        async def work(conn: AsyncConnection) -> list[tuple[int, Record]]:
            result = await conn.execute(statement)
            return [(int(row["seq"]), _row_to_record(row, True)) for row in result.mappings()]

        return await self.run_transaction(work, write=False, op="iter_embedded")
