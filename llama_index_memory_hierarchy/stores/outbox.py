"""``Outbox``: the index operations every write commits with its rows, applied to the vector indexes.

A write commits its rows and their ``index_outbox`` entries in one transaction; the outbox then brings
the vector indexes to the records' state. Where the vectors live on a server (or in one process's
folder) the outbox is a queue that processes drain: the record store hands each operation to one
drainer at a time, never a memory's later operation before its earlier one (``SELECT ... FOR UPDATE
SKIP LOCKED`` on PostgreSQL), and acknowledges it in the same transaction only once the vector write
succeeded; upserts are idempotent. A process whose vector write fails leaves the operation for itself
(bounded background retries) or any other process to apply. On an embedded folder the same rows are a
change log that every process follows instead (:mod:`.changelog`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from llama_index_memory_hierarchy.errors import MemoryValidationError, StoreError
from llama_index_memory_hierarchy.stores.base import Record, RecordStore, VectorIndex
from llama_index_memory_hierarchy.stores.vector import record_to_point

logger = logging.getLogger(__name__)

#: Operations claimed per transaction.
BATCH = 2000
#: Background re-drains after a failed index write: attempts and the first delay (doubling).
RETRY_ATTEMPTS = 6
RETRY_FIRST_DELAY_S = 0.5


def last_ops(ops: Sequence[Any]) -> dict[str, Any]:
    """Per memory its last operation (the one that decides), in the order the memories were last touched."""
    final: dict[str, Any] = {}
    for op in ops:
        final.pop(op.memory_id, None)
        final[op.memory_id] = op
    return final


async def acurrent_records(
    records: RecordStore, upserts: Mapping[str, Any], known: Mapping[str, Record]
) -> tuple[dict[str, Record], list[str]]:
    """The current embedded record of each upserted memory (``upserts``: memory id -> its op), and the ids of
    those that are gone or un-embedded since (to delete from the indexes).

    ``known`` holds records this process just wrote: they are not read back.
    """
    current: dict[str, Record] = {}
    gone: list[str] = []
    fetch: dict[str, list[str]] = {}
    for memory_id, op in upserts.items():
        record = known.get(memory_id)
        if record is not None and record.embedding is not None and record.space:
            current[memory_id] = record
        else:
            fetch.setdefault(op.user_id, []).append(memory_id)
    for user_id, ids in fetch.items():
        found = {r.item.id: r for r in await records.get(user_id, ids, with_embeddings=True)}
        for memory_id in ids:
            record = found.get(memory_id)
            if record is not None and record.embedding is not None and record.space:
                current[memory_id] = record
            else:  # deleted (or un-embedded) since: its later op, if any, is applied after this one
                gone.append(memory_id)
    return current, gone


async def upsert_records(index: VectorIndex, records: list[Record]) -> None:
    """Upsert the records' points; a record the index rejects (e.g. an all-zero vector) is logged and skipped.

    A rejected point would otherwise stay in the outbox forever and block every later op.
    """
    try:
        await index.upsert([record_to_point(r) for r in records])
    except MemoryValidationError:
        for record in records:
            try:
                await index.upsert([record_to_point(record)])
            except MemoryValidationError as exc:
                logger.error("memory %s cannot be indexed and is skipped: %s", record.item.id, exc)


class Outbox:
    """Drains the record store's outbox into the vector indexes of one deployment (``indexes``: space -> index)."""

    def __init__(
        self,
        records: RecordStore,
        indexes: Mapping[str, VectorIndex],
        open_index: Callable[[str | None, int | None], Awaitable[VectorIndex]],
        name: str,
    ) -> None:
        self.records = records
        self._indexes = indexes
        self._open_index = open_index
        self._name = name
        self._lock = asyncio.Lock()
        self._retry: asyncio.Task[Any] | None = None

    async def adrain(self, known: dict[str, Record] | None = None) -> int:
        """Apply pending operations to the vector indexes; how many.

        Claimed from the record store (on PostgreSQL: row locks, skipping those another process holds) and
        acknowledged in the same transaction after the vector writes succeed; on failure they stay pending
        and this raises.
        """
        applied = 0
        async with self._lock:
            while True:
                async with self.records.outbox_claim(BATCH) as ops:
                    if not ops:
                        return applied
                    await self._apply(ops, known or {})
                applied += len(ops)

    def retry_soon(self, drain: Callable[[], Awaitable[Any]]) -> None:
        """Retry ``drain`` in the background (bounded, doubling delays) after an index write failed."""
        if self._retry is not None and not self._retry.done():
            return

        async def retry() -> None:
            delay = RETRY_FIRST_DELAY_S
            for attempt in range(1, RETRY_ATTEMPTS + 1):
                await asyncio.sleep(delay)
                try:
                    await drain()
                    return
                except (StoreError, OSError, asyncio.TimeoutError) as exc:
                    logger.info("%s: outbox retry %d failed: %s", self._name, attempt, exc)
                    delay *= 2
            logger.error("%s: outbox not applied after %d retries; the next write or open retries", self._name, attempt)

        self._retry = asyncio.ensure_future(retry())

    def cancel_retry(self) -> None:
        if self._retry is not None:
            self._retry.cancel()

    async def _apply(self, ops: Sequence[Any], known: dict[str, Record]) -> None:
        """Bring the indexes to the records' current state for every memory the ops name.

        Per memory the last operation decides: an upsert writes the record's current vector (re-read unless
        this process just wrote it) into its space, and removes it from other open spaces when an earlier op
        in the batch deleted it there (a space change); a delete removes it from every open index.
        """
        final = last_ops(ops)
        deleted_somewhere = {op.memory_id for op in ops if op.op == "delete"}
        deletes = [memory_id for memory_id, op in final.items() if op.op == "delete"]
        current, gone = await acurrent_records(
            self.records, {m: op for m, op in final.items() if op.op != "delete"}, known
        )
        deletes += gone
        upserts: dict[str, dict[str, Record]] = {}
        for memory_id, record in current.items():
            upserts.setdefault(record.space, {})[memory_id] = record  # type: ignore[arg-type]
        for space, bucket in upserts.items():
            first = next(iter(bucket.values()))
            index = await self._open_index(space, int(np.asarray(first.embedding).shape[-1]))
            await upsert_records(index, list(bucket.values()))
        moved = {memory_id: record.space for memory_id, record in current.items()}
        stale = [m for m in moved if m in deleted_somewhere]
        if deletes or stale:
            await self._open_index(None, None)  # the default space may not be open yet
            for space, index in list(self._indexes.items()):
                doomed = deletes + [m for m in stale if moved[m] != space]
                if doomed:
                    await index.delete(doomed)
