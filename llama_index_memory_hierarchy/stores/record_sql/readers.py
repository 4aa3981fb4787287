"""One-statement reads of a SQLite file on synchronous connections, in reader threads.

Why: through SQLAlchemy's async engine on aiosqlite a read of 50 rows took ~3 ms, against
~0.3 ms for the same statement on a plain ``sqlite3`` connection: every step of an async
execution (checkout, execute, fetch, reset) is a round trip to the driver's thread and back to
the event loop. Every search reads its candidates so, on the critical path of ``get()``. Here
the whole read runs in one hop to a reader thread, on a synchronous engine of the same file
(WAL lets readers run beside the one writer and see every committed write). The reads are the
store's own ``work(conn)`` coroutines, unchanged: a read only awaits ``conn.execute``, so it
completes without suspending on a connection whose ``execute`` is synchronous.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event

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
    """Read-only connections to one SQLite file, each used by one reader thread at a time."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._engine = sa.create_engine(
            f"sqlite:///{path}",
            poolclass=sa.pool.QueuePool,
            pool_size=READERS,
            max_overflow=0,
            connect_args={"check_same_thread": False},
        )
        self._executor = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="lmh-sqlite-read")

        @event.listens_for(self._engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # autocommit: each statement reads one snapshot of its own
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
                cursor.execute("PRAGMA query_only = ON")
            finally:
                cursor.close()

    async def aread(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(conn)`` (one read statement) in a reader thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._read, work)

    def _read(self, work: Callable[[Any], Awaitable[T]]) -> T:
        with self._engine.connect() as connection:
            return complete(cast(Coroutine[Any, Any, T], work(_SyncConnection(connection))))

    def close(self) -> None:
        """Stop the reader threads and close the connections (idempotent)."""
        self._executor.shutdown(wait=True)
        self._engine.dispose()
