"""Concurrency: many asyncio tasks and threads adding and retrieving for many users on one set of
stores. Afterwards counts are exact, the indexes agree with SQLite, nothing deadlocked (every wait
has a timeout) and no "database is locked" reached a caller."""

from __future__ import annotations

import asyncio
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from store_checks import assert_indexes_agree, hashing, read_sqlite, vector_ids

from llama_index_memory_hierarchy import HierarchicalMemory

TIMEOUT = 180  # seconds: a deadlock fails the test instead of hanging CI


def _open(folder: Path, user: str, session: str = "s1", model: Any = None) -> HierarchicalMemory:
    return HierarchicalMemory.from_defaults(
        user_id=user, session_id=session, persist_dir=str(folder), embed_model=model or hashing()
    )


def _assert_consistent(memory: HierarchicalMemory) -> None:
    context = memory.context
    assert_indexes_agree(read_sqlite(context.persist_dir), context.runtime.run(vector_ids(context)))


async def _user_workload(memory: HierarchicalMemory, adds: int, rng: random.Random) -> tuple[set[str], int]:
    """Adds (single and batched), puts, gets and retrieves for one user; returns ids kept and puts made."""
    kept: set[str] = set()
    puts = 0
    for step in range(adds):
        choice = rng.random()
        tag = f"{memory.user_id} step {step}"
        if choice < 0.4:
            kept.add(await memory.episodic.aadd(f"{tag}: the parcel came on day {step}"))
        elif choice < 0.6:
            kept.update(await memory.episodic.aadd_many([f"{tag}.{i} batch item" for i in range(3)]))
        elif choice < 0.75:
            await memory.aput_messages([ChatMessage(role=MessageRole.USER, content=f"{tag}: a chat line")])
            puts += 1
        elif choice < 0.9:
            found = await memory.episodic.aretrieve(f"{memory.user_id} parcel", limit=3)
            assert all(item.user_id == memory.user_id for item in found)
        else:
            if kept:
                item = await memory.episodic.aget(next(iter(kept)))
                assert item is not None and item.user_id == memory.user_id
    return kept, puts


def test_many_asyncio_tasks_many_users(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    users = [f"user{i}" for i in range(8)]
    memories = {user: _open(folder, user) for user in users}
    try:

        async def main() -> dict[str, tuple[set[str], int]]:
            rng = random.Random(3)
            tasks = [_user_workload(memories[u], 8, random.Random(rng.random())) for u in users]
            tasks += [_user_workload(memories[u], 4, random.Random(rng.random())) for u in users[:4]]
            results = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
            merged: dict[str, tuple[set[str], int]] = {u: (set(), 0) for u in users}
            for user, (kept, puts) in zip([*users, *users[:4]], results, strict=True):
                merged[user] = (merged[user][0] | kept, merged[user][1] + puts)
            return merged

        results = asyncio.run(main())
        for user, (kept, puts) in results.items():
            memory = memories[user]
            stored = memory.episodic.get_timeline()
            assert {i.id for i in stored} >= kept
            assert len(stored) == len(kept) + puts
            assert all(i.user_id == user for i in stored)
        _assert_consistent(memories[users[0]])
    finally:
        for memory in memories.values():
            memory.close()


def test_many_threads_sync_api_with_removes(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    users = [f"t{i}" for i in range(8)]
    memories = {user: _open(folder, user) for user in users}
    removed: dict[str, set[str]] = {u: set() for u in users}
    added: dict[str, set[str]] = {u: set() for u in users}
    lock = threading.Lock()

    def work(worker: int) -> None:
        rng = random.Random(worker)
        user = users[worker % len(users)]
        memory = memories[user]
        mine: list[str] = []
        for step in range(8):
            roll = rng.random()
            if roll < 0.55 or not mine:
                memory_id = memory.episodic.add(f"worker {worker} step {step} notes the train platform {step}")
                mine.append(memory_id)
                with lock:
                    added[user].add(memory_id)
            elif roll < 0.7:
                memory_id = mine.pop(rng.randrange(len(mine)))
                assert memory.episodic.remove(memory_id)
                with lock:
                    removed[user].add(memory_id)
            elif roll < 0.85:
                memory.episodic.retrieve("train platform", limit=5)
            else:
                memory.episodic.update(mine[-1], importance=rng.random())

    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            futures = [pool.submit(work, worker) for worker in range(12)]
            for future in futures:
                future.result(timeout=TIMEOUT)
        for user in users:
            stored = {i.id for i in memories[user].episodic.get_timeline()}
            assert stored == added[user] - removed[user]
        _assert_consistent(memories[users[0]])
    finally:
        for memory in memories.values():
            memory.close()


def test_threads_each_with_their_own_event_loop(tmp_path: Path) -> None:
    """Agents in different threads, each running asyncio.run, awaiting one shared memory store."""
    folder = tmp_path / "memory_data"
    memories = {f"loop{i}": _open(folder, f"loop{i}") for i in range(6)}
    try:

        def run(user: str) -> set[str]:
            async def go() -> set[str]:
                ids = await asyncio.gather(*(memories[user].episodic.aadd(f"{user} fact {i}") for i in range(8)))
                await asyncio.gather(*(memories[user].episodic.aretrieve(f"{user} fact", limit=2) for _ in range(4)))
                return set(ids)

            return asyncio.run(asyncio.wait_for(go(), TIMEOUT))

        with ThreadPoolExecutor(max_workers=6) as pool:
            results = dict(zip(memories, pool.map(run, memories, timeout=TIMEOUT), strict=True))
        for user, ids in results.items():
            assert {i.id for i in memories[user].episodic.get_timeline()} == ids
    finally:
        for memory in memories.values():
            memory.close()


def test_concurrent_dedupe_keeps_one_row(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    with _open(folder, "alice") as memory:

        async def main() -> list[str]:
            text = "I moved to Valencia in March"
            return await asyncio.wait_for(
                asyncio.gather(*(memory.episodic.aadd(text, dedupe=True) for _ in range(20))), TIMEOUT
            )

        ids = asyncio.run(main())
        assert len(set(ids)) == 1
        assert len(memory.episodic.get_timeline()) == 1


def test_open_while_the_last_holder_is_closing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-request memories (open, write, close) in threads: a new open racing the last close of the
    folder's stores must wait for the close, not fail with StoreLockedError (the close is slowed down
    here so that the race happens every time)."""
    from llama_index_memory_hierarchy.stores.context import StoreContext

    original = StoreContext._aclose

    async def slow_close(self: StoreContext) -> None:
        await asyncio.sleep(0.2)
        await original(self)

    monkeypatch.setattr(StoreContext, "_aclose", slow_close)
    folder = tmp_path / "memory_data"

    def request(number: int) -> str:
        with _open(folder, f"req{number % 3}", session=f"r{number}") as memory:
            return memory.episodic.add(f"request {number} remembered the umbrella")

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = [f.result(timeout=TIMEOUT) for f in [pool.submit(request, n) for n in range(16)]]
    assert len(set(ids)) == 16
    with _open(folder, "req0") as memory:
        assert sum(len(_open_timeline(folder, f"req{u}")) for u in range(3)) == 16
        _assert_consistent(memory)


def _open_timeline(folder: Path, user: str) -> list[Any]:
    with _open(folder, user) as memory:
        return memory.episodic.get_timeline()


def test_semantic_facts_from_many_tasks(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    users = [f"kg{i}" for i in range(6)]
    memories = {user: _open(folder, user) for user in users}
    try:

        async def main() -> None:
            async def facts(user: str) -> None:
                semantic = memories[user].semantic
                await asyncio.gather(
                    *(semantic.aadd_fact(f"{user}-person{i}", "lives_in", f"City{i % 3}") for i in range(6))
                )

            await asyncio.wait_for(asyncio.gather(*(facts(u) for u in users)), TIMEOUT)

        asyncio.run(main())
        for user in users:
            stats = memories[user].semantic.get_stats()
            assert stats["count"] == 6, stats
            related = memories[user].semantic.get_related_entities(f"{user}-person1")
            assert related and all(user in str(r) or "City" in str(r) for r in related)
        _assert_consistent(memories[users[0]])
    finally:
        for memory in memories.values():
            memory.close()


@pytest.mark.slow
def test_many_threads_and_tasks_for_longer(tmp_path: Path) -> None:
    folder = tmp_path / "memory_data"
    users = [f"soak{i}" for i in range(40)]
    memories = {user: _open(folder, user) for user in users}
    try:

        def thread(worker: int) -> tuple[str, set[str], int]:
            user = users[worker % len(users)]
            return user, *asyncio.run(asyncio.wait_for(_user_workload(memories[user], 60, random.Random(worker)), 600))

        totals: dict[str, tuple[set[str], int]] = {u: (set(), 0) for u in users}
        with ThreadPoolExecutor(max_workers=16) as pool:
            for user, kept, puts in pool.map(thread, range(80), timeout=900):
                totals[user] = (totals[user][0] | kept, totals[user][1] + puts)
        operations = 80 * 60
        for user, (kept, puts) in totals.items():
            assert len(memories[user].episodic.get_timeline()) == len(kept) + puts
        _assert_consistent(memories[users[0]])
        print(f"concurrency (slow): {operations} operations, {len(users)} users, 16 threads x 80 loops")
    finally:
        for memory in memories.values():
            memory.close()
