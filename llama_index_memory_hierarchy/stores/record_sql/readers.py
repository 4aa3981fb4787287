"""One-statement reads of a SQLite file on synchronous connections: in reader threads, or at once.

Why: through SQLAlchemy's async engine on aiosqlite a read of 50 rows took ~3 ms, against
~0.3 ms for the same statement on a plain ``sqlite3`` connection: every step of an async
execution (checkout, execute, fetch, reset) is a round trip to the driver's thread and back to
the event loop. Every search reads its candidates so, on the critical path of ``get()``. Here
the whole read runs on a synchronous engine of the same file (WAL lets readers run beside the
one writer and see every committed write): in one hop to a reader thread, or, for a small read
(a lookup by ids, a keyword search with a limit), at once on the calling thread's own connection.
A hop costs more than such a read: the reader thread must also take the GIL, and while the
event loop runs Python beside it (a search going on while its query embeds) that waited up to
several milliseconds, a third of an ``aget``. The reads are the store's own ``work(conn)``
coroutines, unchanged: a read only awaits ``conn.execute``, so it completes without suspending
on a connection whose ``execute`` is synchronous.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event

from llama_index_memory_hierarchy.stores.per_thread import PerThread

T = TypeVar("T")

#: Reader threads (and pooled connections): two reads of one search (keyword hits, candidates) at once.
READERS = 2


class _SyncConnection:
    """What a store's read ``work`` uses of an ``AsyncConnection``, answered by a synchronous connection."""

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection

    async def execute(self, statement: Any, parameters: Any = None) -> sa.CursorResult[Any]:
        return self._connection.execute(statement, parameters)


def complete(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (it awaits only :class:`_SyncConnection`)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("a read on a SQLite reader suspended: it awaited more than its connection's execute")


class SQLiteReaders:
    """Read-only connections to one SQLite file: a pool for the reader threads, and one per thread reading at once."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._engine = _read_only_engine(
            path, busy_timeout_ms, poolclass=sa.pool.QueuePool, pool_size=READERS, max_overflow=0
        )
        self._executor = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="lmh-sqlite-read")
        # a thread's own connection is never shared: no pool, kept open until close()
        self._own_engine = _read_only_engine(path, busy_timeout_ms, poolclass=sa.pool.NullPool)
        self._owned: PerThread[sa.Connection] = PerThread(
            self._own_engine.connect, lambda: RuntimeError("the SQLite readers are closed")
        )

    async def aread(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(conn)`` (one read statement) in a reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._read, work)

    def read_here(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(conn)`` (one small read statement) at once, on this thread's own connection."""
        connection = self._owned.get()
        try:
            return complete(cast(Coroutine[Any, Any, T], work(_SyncConnection(connection))))
        finally:
            connection.rollback()  # ends SQLAlchemy's implicit transaction (autocommit: nothing held in SQLite)

    def data_version(self) -> tuple[sa.Connection, int]:
        """SQLite's ``PRAGMA data_version`` on this thread's own connection, with that connection: the number
        differs after any commit by another connection (every writer of this process and of others), and is
        comparable only with the same connection's."""
        connection = self._owned.get()
        cursor = connection.connection.dbapi_connection.execute("PRAGMA data_version")  # type: ignore[union-attr]
        try:
            return connection, int(cursor.fetchone()[0])
        finally:
            cursor.close()

    def _read(self, work: Callable[[Any], Awaitable[T]]) -> T:
        with self._engine.connect() as connection:
            return complete(cast(Coroutine[Any, Any, T], work(_SyncConnection(connection))))

    def close(self) -> None:
        """Stop the reader threads and close every connection (idempotent)."""
        self._executor.shutdown(wait=True)
        self._owned.close(sa.Connection.close)
        self._own_engine.dispose()
        self._engine.dispose()


def _read_only_engine(path: Path, busy_timeout_ms: int, **pool: Any) -> sa.Engine:
    """A synchronous engine of the file whose connections read in autocommit (one snapshot per statement) only."""
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False}, **pool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # autocommit: each statement reads one snapshot of its own
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            cursor.execute("PRAGMA query_only = ON")
        finally:
            cursor.close()

    return engine
