"""Access bumps of reads: counted exactly, written in the background, one write per burst, flushed on close."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index_memory_hierarchy.stores.access import AccessLog


def test_a_burst_of_searches_shares_one_write_and_counts_every_access(make_memory: Any) -> None:
    memory = make_memory(embed_model="hashing")
    wifi = memory.episodic.add("the wifi password is on the fridge")
    memory.episodic.add("the spare key is under the mat")
    records = memory.context.records
    writes: list[tuple[list[str], int]] = []
    touch = records.touch

    async def counting_touch(user_id: str, ids: list[str], *, times: int = 1) -> None:
        writes.append((sorted(ids), times))
        await touch(user_id, ids, times=times)

    records.touch = counting_touch  # type: ignore[method-assign]

    async def burst() -> None:
        for _ in range(5):
            await memory.cross_tier_search.asearch("wifi password", 1)
        await asyncio.gather(*memory.context._background)

    memory.context.runtime.run(burst())
    assert writes == [([wifi], 5)]
    assert memory.episodic.get(wifi).access_count == 5


def test_pending_bumps_are_written_when_the_stores_close(make_memory: Any, persist_dir: Any) -> None:
    memory = make_memory(embed_model="hashing")
    wifi = memory.episodic.add("the wifi password is on the fridge")
    memory.search("wifi password", 1)
    memory.close()
    again = make_memory(embed_model="hashing", session_id="s2")
    assert again.episodic.get(wifi).access_count == 1


def test_repeat_counts_are_grouped_per_user() -> None:
    calls: list[tuple[str, list[str], int]] = []

    class Records:
        async def touch(self, user_id: str, ids: list[str], *, times: int = 1) -> None:
            calls.append((user_id, sorted(ids), times))

    async def run() -> None:
        log = AccessLog(Records(), lambda coro: coro.close())  # type: ignore[arg-type]  # flushed by hand below
        log.record("alice", ["a", "b"])
        log.record("alice", ["a"])
        log.record("bob", ["c"])
        log.record("bob", [])
        await log.aflush()
        await log.aflush()  # nothing left

    asyncio.run(run())
    assert calls == [("alice", ["b"], 1), ("alice", ["a"], 2), ("bob", ["c"], 1)]
