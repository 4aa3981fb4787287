"""``WorkLocks`` in one process (the cross-process cases are in tests/reliability/test_work_locks.py): one holder
per key, other keys free, a cancelled wait holds nothing, two lock sets on one folder (or two PostgreSQL sessions)
exclude each other."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from llama_index_memory_hierarchy.stores.worklock import LOCK_FILE, WorkLocks, key_offset


class Ingest:
    """An owner of locks."""


class Consolidate:
    """Another owner."""


def test_the_byte_of_a_key_depends_on_owner_and_key_only() -> None:
    assert key_offset(Ingest, ("alice",)) == key_offset(Ingest, ("alice",))
    assert len({key_offset(Ingest, ("alice",)), key_offset(Ingest, ("bob",)), key_offset(Consolidate, ("alice",))}) == 3


def test_one_holder_per_key_and_other_keys_stay_free(tmp_path: Path) -> None:
    locks = WorkLocks(tmp_path)

    async def main() -> list[str]:
        order: list[str] = []

        async def hold(name: str, owner: type, key: str) -> None:
            async with locks.get(owner, key):
                order.append(f"{name} in")
                await asyncio.sleep(0.05)
                order.append(f"{name} out")

        first = asyncio.ensure_future(hold("a", Ingest, "alice"))
        await asyncio.sleep(0.01)
        await asyncio.gather(hold("b", Ingest, "alice"), hold("c", Ingest, "bob"), first)
        return order

    order = asyncio.run(main())
    locks.close()
    assert order.index("a out") < order.index("b in")  # same key: after the holder
    assert order.index("c in") < order.index("a out")  # another key: not kept waiting
    assert (tmp_path / LOCK_FILE).stat().st_size == 0  # only byte ranges are locked; nothing is written


def test_two_lock_sets_on_one_folder_exclude_each_other_and_a_cancelled_wait_holds_nothing(tmp_path: Path) -> None:
    """Two contexts of one process on one folder (other settings) share no asyncio lock: the file lock holds."""
    first, second = WorkLocks(tmp_path), WorkLocks(tmp_path)

    async def main() -> None:
        async with first.get(Ingest, "alice"):
            waiting = asyncio.ensure_future(second.get(Ingest, "alice").__aenter__())
            await asyncio.sleep(0.1)
            assert not waiting.done()
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        assert not second.get(Ingest, "alice").locked()
        async with second.get(Ingest, "alice"):  # free: the cancelled wait took nothing
            pass

    asyncio.run(asyncio.wait_for(main(), 10))
    first.close()
    second.close()


def test_without_a_folder_the_locks_are_per_process() -> None:
    locks = WorkLocks(None)

    async def main() -> None:
        async with locks.get(Ingest, "alice"):
            assert locks.get(Ingest, "alice").locked()

    asyncio.run(main())


@pytest.mark.postgres
def test_on_postgresql_two_sessions_exclude_each_other_and_a_release_frees_the_key() -> None:
    """Records on PostgreSQL: session advisory locks (two engines are two sessions, as two processes would be)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    url = os.environ.get("LMH_TEST_POSTGRES_URL", "postgresql+asyncpg://lmh:lmh@127.0.0.1:5432/lmh_test")

    async def main() -> None:
        engines = [create_async_engine(url), create_async_engine(url)]
        try:
            async with engines[0].connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception as exc:  # unreachable server or missing role
            pytest.skip(f"PostgreSQL unavailable: {type(exc).__name__}: {exc}")
        first, second = (WorkLocks(engine=lambda e=e: e) for e in engines)
        try:
            async with first.get(Ingest, "alice"):
                waiting = asyncio.ensure_future(second.get(Ingest, "alice").__aenter__())
                async with second.get(Ingest, "bob"):  # another key: free
                    pass
                await asyncio.sleep(0.2)
                assert not waiting.done()
            await asyncio.wait_for(waiting, 5)  # released: the other session takes it
            await second.get(Ingest, "alice").__aexit__(None, None, None)
            async with first.get(Ingest, "alice"):
                pass
        finally:
            for engine in engines:
                await engine.dispose()

    asyncio.run(asyncio.wait_for(main(), 30))
