"""The access counts of reads, written in the background: one write for a burst of reads.

Why: every search bumps ``access_count`` and ``last_accessed`` of what it returned (forgetting
and importance read them). A write transaction per search cost ~3 ms of CPU, a fifth of an
``aget``, and it ran while the next search did. Bumps are soft data: they are counted exactly
and applied within :data:`FLUSH_DELAY_S` (at once when the stores close), but a process killed
in that window loses them, never a memory. Ranking reads none of them, so when they land
changes no result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from llama_index_memory_hierarchy.stores.base import RecordStore

#: How long bumps wait for others to share their write.
FLUSH_DELAY_S = 0.2


class AccessLog:
    """Pending access bumps by user, applied by one background task per burst."""

    def __init__(self, records: RecordStore, spawn: Callable[[Coroutine[Any, Any, Any]], None]) -> None:
        self._records = records
        self._spawn = spawn
        self._pending: dict[str, Counter[str]] = {}
        self._now = asyncio.Event()
        self._scheduled = False

    def record(self, user_id: str, ids: Sequence[str]) -> None:
        """Count one access of each of ``ids`` (on the runtime loop); written within ``FLUSH_DELAY_S``."""
        if not ids:
            return
        self._pending.setdefault(user_id, Counter()).update(dict.fromkeys(ids, 1))
        if not self._scheduled:
            self._scheduled = True
            self._spawn(self._aflush_later())

    async def _aflush_later(self) -> None:
        with contextlib.suppress(TimeoutError):  # the delay passed: flush what gathered
            await asyncio.wait_for(self._now.wait(), FLUSH_DELAY_S)
        self._scheduled = False
        await self.aflush()

    async def aflush(self) -> None:
        """Write every pending bump now: one statement per user and repeat count."""
        pending, self._pending = self._pending, {}
        for user_id, counts in pending.items():
            by_times: dict[int, list[str]] = {}
            for memory_id, times in counts.items():
                by_times.setdefault(times, []).append(memory_id)
            for times, ids in sorted(by_times.items()):
                await self._records.touch(user_id, ids, times=times)

    def flush_soon(self) -> None:
        """Wake a waiting flush now (the stores are closing)."""
        self._now.set()
