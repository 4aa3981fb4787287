"""``SQLDatabase``: the SQLAlchemy async database under the record store.

Opens SQLite (``sqlite+aiosqlite:///path/memory.db``, WAL, one writer at a time) or PostgreSQL
(``postgresql+asyncpg://...``, a connection pool), creates or migrates the schema (Alembic
revisions in ``stores/migrations``) and runs every piece of work in one transaction, retrying
transient errors (SQLite "database is locked", PostgreSQL serialization failures, deadlocks,
dropped connections) with bounded, jittered backoff. Anything else, or a retry budget spent,
becomes a :class:`StoreError` naming the database (password redacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from llama_index_memory_hierarchy.config import MemoryConfig, redact_url
from llama_index_memory_hierarchy.errors import (
    MemoryHierarchyError,
    MemoryValidationError,
    SchemaVersionError,
    StoreError,
)
from llama_index_memory_hierarchy.stores.record_sql.dialects import (
    DialectStrategy,
    PostgresFTSStrategy,
    SQLiteFTS5Strategy,
)
from llama_index_memory_hierarchy.stores.record_sql.readers import SQLiteReaders
from llama_index_memory_hierarchy.stores.schema import metadata, schema_info

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

logger = logging.getLogger(__name__)

T = TypeVar("T")


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


class SQLDatabase:
    """One SQLite or PostgreSQL database opened through SQLAlchemy async, with retrying transactions.

    Build with ``SQLDatabase(url)`` or ``from_config(config)``; call :meth:`start` (or use
    ``async with``) before anything else. All coroutines must run on the loop that called
    :meth:`start` (the package ``Runtime`` loop).
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
        self._readers: SQLiteReaders | None = None
        self._write_lock: asyncio.Lock | None = None

    @classmethod
    def from_config(cls, config: MemoryConfig, **kwargs: Any) -> Self:
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
        if self._path is not None:  # a file: its one-statement reads skip the async driver (``readers``)
            self._readers = SQLiteReaders(self._path, busy_timeout_ms=self._busy_timeout_ms)
        logger.debug("record store %s opened (%s)", self.where, self.dialect)

    async def close(self) -> None:
        """Dispose of the connection pool (idempotent)."""
        readers, self._readers = self._readers, None
        if readers is not None:
            await asyncio.to_thread(readers.close)
        engine, self._engine = self._engine, None
        if engine is not None:
            await engine.dispose()

    async def __aenter__(self) -> Self:
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
            options = connection.get_execution_options()
            if options.get("lmh_one_statement", False):
                return  # one statement is atomic on its own (see run_transaction's one_statement)
            # Writers take the write lock up front: no deadlock-prone read-to-write upgrade.
            connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get("lmh_write", False) else "BEGIN")

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
        from llama_index_memory_hierarchy.stores import migrations  # Alembic (~0.5 s) loads only when a store opens

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

    def change_token(self) -> Hashable | None:
        """See :meth:`RecordStore.change_token`: a SQLite file's data version (a few microseconds), else None."""
        return self._readers.data_version() if self._readers is not None else None

    # --- transactions and errors -------------------------------------------------------------------

    async def run_transaction(
        self,
        work: Callable[[AsyncConnection], Awaitable[T]],
        *,
        write: bool = True,
        op: str = "transaction",
        one_statement: bool = False,
        small: bool = False,
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying transient failures with bounded backoff.

        ``work`` may run more than once, so it must only touch the database. Database errors
        become :class:`StoreError`; this package's own errors pass through unchanged.
        ``one_statement``: ``work`` runs a single statement; on SQLite it runs without
        BEGIN/COMMIT (one statement reads one snapshot, or writes atomically, by itself), which
        saves four of the nine round trips to the driver's thread that such a transaction costs:
        the searches and access bumps of every query are such statements. Such a read of a
        SQLite file runs on a synchronous reader connection in one hop (:mod:`.readers`); a ``small`` one
        (bounded by ids or a limit, as a search's) at once on the calling thread's own reader connection.
        """
        engine = self.engine
        readers = self._readers if one_statement and not write else None
        attempt = 0
        while True:
            committing = False
            try:
                if readers is not None:
                    return readers.read_here(work) if small else await readers.aread(work)
                async with self._gate(write), engine.connect() as conn:
                    if one_statement and self._strategy.name == "sqlite":
                        await conn.execution_options(lmh_one_statement=True)
                        return await work(conn)  # closing the connection ends the (empty) transaction
                    if write and self._strategy.name == "sqlite":
                        await conn.execution_options(lmh_write=True)
                    async with conn.begin():
                        result = await work(conn)
                        committing = True
                    return result
            except MemoryHierarchyError:
                raise
            except (asyncio.TimeoutError, SQLAlchemyError, OSError) as exc:
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

    @contextlib.asynccontextmanager
    async def connection(self, *, write: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection outside :meth:`run_transaction` (no retry, no transaction: e.g. for ``VACUUM``).

        A writer waits for this process's other SQLite writers first, as a transaction's does.
        """
        async with self._gate(write), self.engine.connect() as conn:
            yield conn

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
