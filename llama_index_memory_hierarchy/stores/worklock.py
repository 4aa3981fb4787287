"""``WorkLocks``: one holder at a time per key (a user's ingest, consolidation, media write), in every process.

What these locks guard is a read-modify-write of rows in ``memory.db`` (and of files in the folder) with
slow work in between: a knowledge-base ingest reads the document manifest, embeds, writes the new
chunks and deletes the old; a consolidation reads a user's unconsolidated turns, extracts (an LLM call),
writes facts and marks the turns; a perception is checked for a duplicate by hash before its file and
record are written. A SQLite transaction (``BEGIN IMMEDIATE``) cannot span that work: it would hold the
one database write lock, for every user of every process, through seconds of embedding or LLM time. So
the cross-process part is a lock on a file in the folder: ``.work.lock``, one byte per key (a hash of
the key, so no file names a user), locked with an open-file-description lock (``F_OFD_SETLK``, Linux;
``lockf`` elsewhere) that the kernel drops when its holder dies, also by SIGKILL. Within the process an
asyncio lock per key comes first, so coroutines queue there and only one of them polls the file.

Where the records are on PostgreSQL (reached from many machines, where a file lock means nothing)
the cross-process part is a session advisory lock of that database on the key instead
(``pg_try_advisory_lock``, one pooled connection held while the key is), also dropped with a dead
holder's connection.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import os
import struct
import threading
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

#: The lock file in the persist folder (empty: only byte ranges of it are locked).
LOCK_FILE = ".work.lock"
#: First and longest pause between two tries of a key held by another process.
_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.1
_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
#: ``struct flock`` (type, whence, start, len, pid; padded): the layout of Linux on 64-bit machines.
_FLOCK = "hhqqi4x"
_BUSY = (errno.EAGAIN, errno.EACCES)


def key_offset(owner: type, key: tuple[Hashable, ...]) -> int:
    """The number that stands for ``(owner, *key)`` in every process: a byte of the lock file, an advisory key."""
    name = repr((owner.__module__, owner.__qualname__, *key)).encode()
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big") >> 2


class _Shared(Protocol):
    """Where the keys are held across processes: the folder's lock file, or the PostgreSQL database."""

    async def acquire(self, offset: int) -> None: ...

    async def release(self, offset: int) -> None: ...

    def close(self) -> None: ...


async def _poll(attempt: Callable[[], Awaitable[bool]]) -> None:
    """Await ``attempt()`` until it returns True, pausing longer each time (a cancelled wait holds nothing)."""
    pause = _POLL_FIRST_S
    while not await attempt():
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX_S)


class _LockFile:
    """The folder's lock file as this context holds it: one open file description, a byte per key."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._fd: int | None = None
        self._guard = threading.Lock()
        self._descriptor()  # now, while the file is the one every opener of the folder has (stores.lock)

    def _descriptor(self) -> int:
        with self._guard:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            return self._fd

    def _set(self, offset: int, kind: int) -> bool:
        """Lock (``F_WRLCK``) or unlock (``F_UNLCK``) byte ``offset`` without waiting; False while another holds it."""
        fd = self._descriptor()
        try:
            if _OFD_SETLK is not None:
                fcntl.fcntl(fd, _OFD_SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0))
            else:
                command = fcntl.LOCK_UN if kind == fcntl.F_UNLCK else fcntl.LOCK_EX | fcntl.LOCK_NB
                fcntl.lockf(fd, command, 1, offset, os.SEEK_SET)
        except OSError as exc:
            if exc.errno in _BUSY:
                return False
            raise
        return True

    async def acquire(self, offset: int) -> None:
        """Wait until byte ``offset`` is this context's."""

        async def attempt() -> bool:
            return self._set(offset, fcntl.F_WRLCK)

        await _poll(attempt)

    async def release(self, offset: int) -> None:
        self._set(offset, fcntl.F_UNLCK)

    def close(self) -> None:
        with self._guard:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class _AdvisoryLocks:
    """Session advisory locks of a PostgreSQL database: a held key keeps its own connection until released."""

    def __init__(self, engine: Callable[[], AsyncEngine]) -> None:
        self._engine = engine
        self._held: dict[int, AsyncConnection] = {}

    async def acquire(self, offset: int) -> None:
        async def attempt() -> bool:
            conn = await self._engine().connect()
            try:
                taken = (await conn.execute(sa.select(sa.func.pg_try_advisory_lock(offset)))).scalar_one()
                await conn.commit()  # the session holds the lock; no transaction stays open
            except BaseException:
                await conn.invalidate()
                raise
            if not taken:
                await conn.close()
                return False
            self._held[offset] = conn
            return True

        await _poll(attempt)

    async def release(self, offset: int) -> None:
        conn = self._held.pop(offset)
        try:
            await conn.execute(sa.select(sa.func.pg_advisory_unlock(offset)))
            await conn.commit()
        except BaseException:
            await conn.invalidate()  # never back to the pool still holding the key
            raise
        await conn.close()

    def close(self) -> None:
        """Nothing to close: each held key's connection is closed on release."""


class WorkLock:
    """``async with`` it: alone with the key in this process, then in every process of the deployment's stores."""

    def __init__(self, shared: _Shared | None, offset: int) -> None:
        self._local = asyncio.Lock()
        self._shared = shared
        self._offset = offset

    def locked(self) -> bool:
        """Whether a coroutine of this process holds the key (another process's hold is not seen)."""
        return self._local.locked()

    async def __aenter__(self) -> WorkLock:
        await self._local.acquire()
        try:
            if self._shared is not None:
                await self._shared.acquire(self._offset)
        except BaseException:
            self._local.release()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self._shared is not None:
                await self._shared.release(self._offset)
        finally:
            self._local.release()


class WorkLocks:
    """The work locks of one store context: across processes through ``engine`` (a PostgreSQL record store's) or
    ``folder`` (the persist folder of SQLite records) when given, else within this process."""

    def __init__(self, folder: Path | None = None, engine: Callable[[], AsyncEngine] | None = None) -> None:
        self._shared: _Shared | None = (
            _AdvisoryLocks(engine) if engine is not None else None if folder is None else _LockFile(folder)
        )
        self._locks: dict[tuple[Hashable, ...], WorkLock] = {}
        self._guard = threading.Lock()

    def get(self, owner: type, *key: Hashable) -> WorkLock:
        """The lock of ``owner`` (the class whose work it serialises) for ``key``."""
        slot = (owner, *key)
        with self._guard:
            lock = self._locks.get(slot)
            if lock is None:
                lock = self._locks[slot] = WorkLock(self._shared, key_offset(owner, key))
            return lock

    def close(self) -> None:
        """Close the lock file (every lock is free by then: the context's work is done)."""
        if self._shared is not None:
            self._shared.close()
