"""``ChangeLog``: the record store's change log as one process follows it, keeping its vector mirrors current.

On an embedded folder every process mirrors the vectors of ``memory.db`` in memory
(:class:`~.vector.mirror.MirrorVectorIndex`); the ``index_outbox`` rows every write commits are a log
that each process reads after its cursor (``SQLRecordStore.changes_after``) instead of a queue one
drains (:mod:`.outbox`, whose resolution of ops to records it shares). Split from :mod:`.context` (which
owns one per deployment) because following is its own job: a cursor, a lock shared with the loading of
users, the count of other processes' writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from llama_index_memory_hierarchy.stores.base import Record, RecordStore, VectorIndex, VectorPoint
from llama_index_memory_hierarchy.stores.outbox import acurrent_records, last_ops, upsert_records
from llama_index_memory_hierarchy.stores.vector import record_to_point
from llama_index_memory_hierarchy.stores.vector.mirror import MirrorVectorIndex

logger = logging.getLogger(__name__)

#: Log rows read per statement.
BATCH = 2000
#: Change-log rows kept for processes that fall behind (one further behind reads its state anew); pruned
#: whenever the log has grown by this many rows since this process last pruned.
LOG_KEEP = 20_000
#: Records read per statement when a user's vectors are loaded into a mirror.
LOAD_BATCH = 5000


class ChangeLog:
    """One process's cursor in the change log, applied to the mirrors among ``indexes`` (space -> index)."""

    def __init__(self, records: RecordStore, indexes: Mapping[str, VectorIndex]) -> None:
        self.records: Any = records  # an SQLRecordStore on SQLite (changes_after, prune_changes)
        self._indexes = indexes
        self.cursor = 0
        self._pruned_at = 0
        #: Held while the log is applied and while a user is loaded: a change is in a load or applied after it.
        self._lock = asyncio.Lock()
        self._foreign: dict[str, int] = {}
        self._generation = 0
        #: The record store's change token when the log was last read to its end (``RecordStore.change_token``).
        self._followed: Hashable | None = None

    async def astart(self) -> None:
        """Start at the newest change: the mirrors read everything older from the records."""
        _, self.cursor = await self.records.changes_after(0, 1)
        self._pruned_at = self.cursor

    async def afollow(self, known: dict[str, Record] | None = None) -> int:
        """Apply every change committed since this process last looked, by any process, to the mirrors; how many.

        No read when nothing was committed since the last look (:meth:`RecordStore.change_token`), else one
        indexed read when no change was logged. A gap in the log (rows pruned while this process was behind,
        or an erased user's rows) or a ``reset`` row (an erasure) drops what the mirrors hold: each user is
        read again on its next search. Other processes' writes are counted per user (:meth:`foreign_revision`,
        and in the record store's :meth:`~RecordStore.changes`) so caches derived from the records notice them.
        """
        applied = 0
        async with self._lock:
            token = self.records.change_token()
            if token is not None and token == self._followed:
                return 0  # nothing committed since the last look, by anyone: no read (a search follows up to 3 times)
            while True:
                ops, issued = await self.records.changes_after(self.cursor, BATCH)
                contiguous = all(op.seq == self.cursor + 1 + i for i, op in enumerate(ops))
                complete = len(ops) == BATCH or self.cursor + len(ops) == issued
                if not (contiguous and complete) or any(op.op == "reset" for op in ops):
                    self._forget_mirrors()
                    self.cursor, self._followed = issued, token
                    return applied + len(ops)
                if not ops:
                    break
                for op in ops:
                    if not self.records.take_written(op.memory_id):
                        self._foreign[op.user_id] = self._foreign.get(op.user_id, 0) + 1
                        self.records.note_change(op.user_id, None)
                await self._apply(ops, known or {})
                self.cursor = ops[-1].seq
                applied += len(ops)
            if self.cursor - self._pruned_at >= LOG_KEEP:
                self._pruned_at = self.cursor
                await self.records.prune_changes(LOG_KEEP)
            self._followed = token
        return applied

    def foreign_revision(self, user_id: str) -> tuple[int, int]:
        """Changes other processes made to ``user_id``'s records, as this process has seen them: a cache of the
        user's records that was built at another revision is stale."""
        return self._generation, self._foreign.get(user_id, 0)

    def _mirrors(self) -> list[MirrorVectorIndex]:
        return [index for index in self._indexes.values() if isinstance(index, MirrorVectorIndex)]

    def _forget_mirrors(self) -> None:
        self._generation += 1
        self._foreign.clear()
        for index in self._mirrors():
            index.forget()

    async def _apply(self, ops: Sequence[Any], known: dict[str, Record]) -> None:
        """Bring the mirrors to the records' current state for the memories the ops name, where the memory's
        user is loaded (others are read whole on their first search)."""
        mirrors = self._mirrors()
        if not mirrors:
            return
        final = last_ops(ops)
        doomed = [m for m, op in final.items() if op.op == "delete"]
        loaded = {
            m: op for m, op in final.items() if op.op == "upsert" and any(index.loaded(op.user_id) for index in mirrors)
        }
        current, gone = await acurrent_records(self.records, loaded, known)
        doomed += gone
        for index in mirrors:
            here = [r for r in current.values() if r.space == index.space]
            elsewhere = [m for m, r in current.items() if r.space != index.space]
            if here:
                await upsert_records(index, here)
            if doomed or elsewhere:
                await index.delete(doomed + elsewhere)

    async def aload_points(self, space: str, user_id: str | None) -> list[VectorPoint]:
        """The points of ``user_id`` (or everyone) in ``space``, read from the records for a mirror.

        Under the change-log lock: a change is either applied before the read (and in it) or after it.
        """
        points: list[VectorPoint] = []
        after = 0
        async with self._lock:
            while True:
                batch = await self.records.iter_embedded(space, batch_size=LOAD_BATCH, after_seq=after, user_id=user_id)
                points.extend(record_to_point(record) for _, record in batch)
                if len(batch) < LOAD_BATCH:
                    return points
                after = batch[-1][0]
