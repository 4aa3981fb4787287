"""The access counts of reads, written in the background: one write for a burst of reads.

Why: every search bumps ``access_count`` and ``last_accessed`` of what it returned (forgetting
and importance read them). A write transaction per search cost ~3 ms of CPU, a fifth of an
``aget``, and it ran while the next search did; so did one write every 0.2 s of a burst, which
took the slowest 5% of back-to-back searches (p95 at 10k memories 12 -> 9 ms without it). The
bumps of a burst are written once the reads pause for :data:`FLUSH_QUIET_S` (an agent's searches
are separated by its LLM calls), and at most :data:`FLUSH_MAX_DELAY_S` after the first (at once
when the stores close). Bumps are soft data: they are counted exactly, but a process killed before
they are written loses them, never a memory. Ranking reads none of them, so when they land changes
no result.

The access log rides the same writer: what ``get()`` showed (memory ids), when, for which input is
queued by :meth:`AccessLog.shown` and written with the bumps, in one insert, by the sink the
lifecycle registers (its ``lifecycle_shown`` table); so a ``get()`` waits for no write.
:meth:`AccessLog.adiscard` drops what is still queued for a user or for deleted memories, and
waits for a write in flight, so an erasure or a delete that follows leaves nothing behind.

A person looking (the inspector's search and ``get()`` preview) is not the agent recalling: reads
inside :func:`uncounted` bump nothing and log nothing, so a page view (or a cross-site ``<img>`` of
a search URL) cannot change what forgetting and importance see.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from llama_index_memory_hierarchy.stores.base import RecordStore

#: How long the reads must pause before their bumps are written.
FLUSH_QUIET_S = 0.2
#: The longest bumps wait while reads go on without such a pause.
FLUSH_MAX_DELAY_S = 5.0

#: False inside :func:`uncounted` (a context variable: it follows the read onto the runtime loop).
_COUNTED: ContextVar[bool] = ContextVar("lmh_accesses_counted", default=True)


@contextlib.contextmanager
def uncounted() -> Iterator[None]:
    """Reads made inside this block (in this task, and the runtime work it awaits) bump no access counts."""
    token = _COUNTED.set(False)
    try:
        yield
    finally:
        _COUNTED.reset(token)


class AccessLog:
    """Pending access bumps by user, applied by one background task per burst."""

    def __init__(self, records: RecordStore, spawn: Callable[[Coroutine[Any, Any, Any]], None]) -> None:
        self._records = records
        self._spawn = spawn
        self._pending: dict[str, Counter[str]] = {}
        self._shown: list[dict[str, Any]] = []
        #: Where access-log rows go (the lifecycle's table); None: they are not kept.
        self.shown_sink: Callable[[list[dict[str, Any]]], Coroutine[Any, Any, None]] | None = None
        self._writing = asyncio.Lock()
        self._now = asyncio.Event()
        self._scheduled = False
        self._last = 0.0  # when the latest read was counted (monotonic seconds)

    def record(self, user_id: str, ids: Sequence[str]) -> None:
        """Count one access of each of ``ids`` (on the runtime loop); written when the reads pause (see above)."""
        if not ids or not _COUNTED.get():
            return
        self._pending.setdefault(user_id, Counter()).update(dict.fromkeys(ids, 1))
        self._schedule()

    def shown(self, user_id: str, session_id: str | None, text: str, ids: Sequence[str]) -> None:
        """Log that ``get()`` showed memories ``ids`` for input ``text`` (on the runtime loop; written later)."""
        if self.shown_sink is None or not _COUNTED.get():
            return
        row = {"user_id": user_id, "session_id": session_id, "at": time.time(), "input": text, "memory_ids": list(ids)}
        self._shown.append(row)
        self._schedule()

    def _schedule(self) -> None:
        self._last = time.monotonic()
        if not self._scheduled:
            self._scheduled = True
            self._spawn(self._aflush_later())

    async def adiscard(self, user_id: str, memory_ids: Sequence[str] | None = None) -> None:
        """Drop the queued log rows of ``user_id`` (naming one of ``memory_ids``, or all), and wait for a write
        in flight; None also drops the user's queued bumps (the user is being erased)."""
        async with self._writing:
            if memory_ids is None:
                self._pending.pop(user_id, None)
                self._shown = [row for row in self._shown if row["user_id"] != user_id]
            else:
                gone = set(memory_ids)
                self._shown = [
                    row for row in self._shown if row["user_id"] != user_id or not gone & set(row["memory_ids"])
                ]

    async def _aflush_later(self) -> None:
        deadline = time.monotonic() + FLUSH_MAX_DELAY_S
        while not self._now.is_set():
            due = min(self._last + FLUSH_QUIET_S, deadline)
            if time.monotonic() >= due:
                break
            with contextlib.suppress(asyncio.TimeoutError):  # woken at the due time (3.10: not builtin TimeoutError)
                await asyncio.wait_for(self._now.wait(), due - time.monotonic())
        self._scheduled = False
        await self.aflush()

    async def aflush(self) -> None:
        """Write every pending bump now (one statement per user and repeat count), then the queued log rows."""
        async with self._writing:
            pending, self._pending = self._pending, {}
            shown, self._shown = self._shown, []
            for user_id, counts in pending.items():
                by_times: dict[int, list[str]] = {}
                for memory_id, times in counts.items():
                    by_times.setdefault(times, []).append(memory_id)
                for times, ids in sorted(by_times.items()):
                    await self._records.touch(user_id, ids, times=times)
            if shown and self.shown_sink is not None:
                await self.shown_sink(shown)

    def flush_soon(self) -> None:
        """Wake a waiting flush now (the stores are closing)."""
        self._now.set()
