"""The record store's ``index_outbox``: the operations the vector indexes are kept in step from.

PostgreSQL deployments drain it (:meth:`RecordChanges.outbox_claim`); every process on an embedded
SQLite folder follows it as a change log instead (:meth:`RecordChanges.changes_after`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from llama_index_memory_hierarchy.stores.base import OutboxOp, RecordStore, batches
from llama_index_memory_hierarchy.stores.record_sql.database import SQLDatabase
from llama_index_memory_hierarchy.stores.record_sql.rows import CHUNK, sql_count
from llama_index_memory_hierarchy.stores.schema import index_outbox


class RecordChanges(SQLDatabase, RecordStore):
    """Reading, claiming, acknowledging and pruning the outbox (all users: it is the indexes' feed)."""

    async def outbox_pending(self, limit: int = 1000) -> list[OutboxOp]:
        """Oldest unapplied index operations (all users), in commit order of their writes."""
        limit = sql_count(limit, "limit", 1)
        o = index_outbox.c
        statement = sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space).order_by(o.seq).limit(limit)

        async def work(conn: AsyncConnection) -> list[OutboxOp]:
            result = await conn.execute(statement)
            return [
                OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4]) for row in result
            ]

        return await self.run_transaction(work, write=False, op="outbox_pending")

    async def outbox_ack(self, seqs: Sequence[int]) -> None:
        """Mark index operations applied (their rows are deleted)."""
        wanted = sorted({sql_count(seq, "seqs", 0) for seq in seqs})
        if not wanted:
            return

        async def work(conn: AsyncConnection) -> None:
            for chunk in batches(wanted, CHUNK):
                await conn.execute(sa.delete(index_outbox).where(index_outbox.c.seq.in_(list(chunk))))

        await self.run_transaction(work, write=True, op="outbox_ack")

    async def changes_after(self, cursor: int, limit: int = 1000) -> tuple[list[OutboxOp], int]:
        """The change log after ``cursor`` (SQLite): up to ``limit`` outbox rows with ``seq > cursor``, oldest
        first, and the highest seq ever issued, read in one snapshot.

        Why: every process on an embedded folder mirrors the vectors (:class:`MirrorVectorIndex`) and follows
        this log instead of draining it. SQLite's AUTOINCREMENT never reuses a seq and a rolled-back write
        takes its seq back, so a gap between ``cursor`` and the rows returned means rows were removed
        (pruned, or an erased user's): the caller then reads its state anew.
        """
        cursor = sql_count(cursor, "cursor", 0)
        limit = sql_count(limit, "limit", 1)
        statement = sa.text(
            "SELECT * FROM (SELECT seq, op, memory_id, user_id, space FROM index_outbox WHERE seq > :cursor "
            "ORDER BY seq LIMIT :limit) UNION ALL SELECT coalesce((SELECT seq FROM sqlite_sequence "
            "WHERE name = 'index_outbox'), 0), NULL, NULL, NULL, NULL"
        ).bindparams(cursor=cursor, limit=limit)

        async def work(conn: AsyncConnection) -> tuple[list[OutboxOp], int]:
            rows = list(await conn.execute(statement))
            ops = [OutboxOp(seq=int(r[0]), op=r[1], memory_id=r[2], user_id=r[3], space=r[4]) for r in rows[:-1]]
            return ops, int(rows[-1][0])

        return await self.run_transaction(work, write=False, op="changes_after", one_statement=True, small=True)

    async def prune_changes(self, keep: int) -> int:
        """Delete all but the newest ``keep`` rows of the change log; how many went (SQLite, mirrored indexes).

        A process further behind than that sees the gap and reads its state anew (:meth:`changes_after`).
        """
        keep = sql_count(keep, "keep", 0)
        o = index_outbox.c

        async def work(conn: AsyncConnection) -> int:
            newest = (await conn.execute(sa.select(sa.func.max(o.seq)))).scalar()
            if newest is None:
                return 0
            return (await conn.execute(sa.delete(index_outbox).where(o.seq <= newest - keep))).rowcount

        return await self.run_transaction(work, write=True, op="prune_changes")

    @contextlib.asynccontextmanager
    async def outbox_claim(self, limit: int = 1000) -> AsyncIterator[list[OutboxOp]]:
        """Claim pending operations; acknowledged (deleted) when the block exits cleanly.

        PostgreSQL (many processes share one outbox): one transaction selects the oldest
        operations ``FOR UPDATE SKIP LOCKED`` (a row another drainer holds is skipped, not
        waited for), leaving out any operation with an older one still pending for the same
        memory (held by another drainer, or skipped), so a memory's operations apply one at a
        time and in commit order. The rows are deleted and committed after the block; an
        exception rolls back and leaves them for any process to retry. The block runs while
        the transaction is open, so keep it to applying the operations.

        SQLite (one process, the persist folder lock): read, then acknowledge, as the base class.
        """
        limit = sql_count(limit, "limit", 1)
        if self._strategy.name != "postgresql":
            async with super().outbox_claim(limit) as ops:
                yield ops
            return
        o = index_outbox.c
        older = index_outbox.alias("older")
        statement = (
            sa.select(o.seq, o.op, o.memory_id, o.user_id, o.space)
            .where(~sa.exists().where(older.c.memory_id == o.memory_id, older.c.seq < o.seq))
            .order_by(o.seq)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        in_block = False
        try:
            async with self.engine.connect() as conn, conn.begin():
                result = await conn.execute(statement)
                ops = [
                    OutboxOp(seq=int(row[0]), op=row[1], memory_id=row[2], user_id=row[3], space=row[4])
                    for row in result
                ]
                in_block = True
                yield ops
                in_block = False
                for chunk in batches([op.seq for op in ops], CHUNK):
                    await conn.execute(sa.delete(index_outbox).where(o.seq.in_(list(chunk))))
        except (asyncio.TimeoutError, SQLAlchemyError, OSError) as exc:
            if in_block:  # the caller's failure (rolled back): not the record store's
                raise
            raise self._store_error("outbox_claim", exc, 1) from exc
