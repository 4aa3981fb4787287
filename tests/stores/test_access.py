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


class _Writes:
    """A record store's ``touch`` that notes when each write came."""

    def __init__(self) -> None:
        self.at: list[float] = []

    async def touch(self, user_id: str, ids: list[str], *, times: int = 1) -> None:
        self.at.append(asyncio.get_running_loop().time())


async def _reads_every(log: AccessLog, interval: float, duration: float) -> float:
    """Count a read every ``interval`` seconds for ``duration``; returns when the last one was counted."""
    loop = asyncio.get_running_loop()
    end = loop.time() + duration
    last = loop.time()
    while loop.time() < end:
        last = loop.time()
        log.record("alice", ["a"])
        await asyncio.sleep(interval)
    return last


async def test_bumps_wait_for_a_pause_in_the_reads(monkeypatch: Any) -> None:
    """Reads every 20 ms for 0.6 s, the quiet time 0.4 s: no write while they go on, one after they stop.

    The quiet time is 20 times the reads' interval, so a loaded machine's late wake-up is not a pause."""
    from llama_index_memory_hierarchy.stores import access

    monkeypatch.setattr(access, "FLUSH_QUIET_S", 0.4)
    monkeypatch.setattr(access, "FLUSH_MAX_DELAY_S", 10.0)
    writes, tasks = _Writes(), []
    log = AccessLog(writes, lambda coro: tasks.append(asyncio.ensure_future(coro)))  # type: ignore[arg-type]
    last = await _reads_every(log, 0.02, 0.6)
    await asyncio.gather(*tasks)
    assert len(writes.at) == 1 and writes.at[0] >= last + 0.4


async def test_reads_without_a_pause_are_written_at_the_longest_delay(monkeypatch: Any) -> None:
    from llama_index_memory_hierarchy.stores import access

    monkeypatch.setattr(access, "FLUSH_QUIET_S", 0.1)
    monkeypatch.setattr(access, "FLUSH_MAX_DELAY_S", 0.15)
    writes, tasks = _Writes(), []
    log = AccessLog(writes, lambda coro: tasks.append(asyncio.ensure_future(coro)))  # type: ignore[arg-type]
    start = asyncio.get_running_loop().time()
    await _reads_every(log, 0.02, 0.4)
    await asyncio.gather(*tasks)
    assert 2 <= len(writes.at) <= 4  # every ~0.15 s while the reads went on, then one after they stopped
    assert writes.at[0] - start < 0.15 + 0.1  # not after the reads (0.4 s): at the longest delay


def test_the_access_log_says_what_get_showed_and_goes_with_the_memories_and_the_user(
    make_memory: Any, persist_dir: Any
) -> None:
    from pathlib import Path

    from llama_index_memory_hierarchy.stores.access import uncounted

    memory = make_memory(embed_model="hashing")
    wifi = memory.episodic.add("the wifi password is on the fridge")
    key = memory.episodic.add("the spare key is under the mat")
    memory.get(input="where is the wifi password")
    memory.get(input="where is the spare key")
    with uncounted():  # an inspector's preview: not logged
        memory.get(input="where is the wifi password, again")
    log = memory.manager.access_log()
    assert [row["input"] for row in log] == ["where is the spare key", "where is the wifi password"]  # newest first
    assert wifi in log[1]["memory_ids"] and key in log[0]["memory_ids"]
    assert all(row["session_id"] == memory.session_id and row["at"] > 0 for row in log)

    memory.get(input="the wifi password please")  # queued, not written yet: the delete drops it too
    memory.manager.forget_memories([wifi])
    left = memory.manager.access_log()
    assert all(wifi not in row["memory_ids"] for row in left)  # the rows naming it went, the queued one too
    kept = [row["input"] for row in log if wifi not in row["memory_ids"]]
    assert [row["input"] for row in left if row["input"] != "the wifi password please"] == kept
    memory.get(input="where was the spare key again?")  # a question: shown again though shown before (issue 37)
    newest = memory.manager.access_log()[0]
    assert (newest["input"], newest["memory_ids"]) == ("where was the spare key again?", [key])
    memory.manager.forget_user()
    assert memory.manager.access_log() == []
    memory.close()
    for file in Path(persist_dir).rglob("*"):
        if file.is_file():
            assert b"spare key again" not in file.read_bytes(), file
